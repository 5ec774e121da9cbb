# mkSandcastleImage { name, tag, extraContents ? [ ], extraEnv ? [ ], forgeUrl }
#
# A Docker image (a streamLayeredImage script: run it and pipe it into
# `docker load`) in which the agents run: the sandcastle base packages plus
# `extraContents`, a non-root user `agent` (Claude Code refuses
# --dangerously-skip-permissions as root) and an entrypoint that just keeps
# the container alive for `docker exec` (`sandcastle run` starts its sandboxes
# with `sandcastle relay` instead, the model proxy's end in the container).
# Of the project's config it bakes in the name, the tag and `SANDCASTLE_FORGE_URL=<forgeUrl>` (use
# imageArgsFromConfig, which resolves all three as load-config does);
# sandcastle also passes the forge URL with each `docker exec`, which
# overrides the baked one, and passes the secrets only that way.
{ dockerTools
, glibcLocales
, coreutils
, sandcastlePackages
}:
let
  user = "agent";
  uid = 1000;
  gid = 1000;
  home = "/home/${user}";

  # fakeNss's /etc/passwd is a symlink into the store: add the user through
  # the package's arguments, not by writing the file.
  nss = dockerTools.fakeNss.override {
    extraPasswdLines = [ "${user}:x:${toString uid}:${toString gid}:sandcastle agent:${home}:/bin/sh" ];
    extraGroupLines = [ "${user}:x:${toString gid}:" ];
  };

  # A small locale archive with C.UTF-8 (glibc >= 2.35 ships its source but
  # no compiled copy) and en_US.UTF-8. nixpkgs' glibc reads LOCALE_ARCHIVE,
  # so every program in the image finds it.
  locales = glibcLocales.override {
    allLocales = false;
    locales = [ "C.UTF-8/UTF-8" "en_US.UTF-8/UTF-8" ];
  };

  # dockerTools.caCertificates links the bundle here.
  caBundle = "/etc/ssl/certs/ca-bundle.crt";
in
{ name
, tag
, extraContents ? [ ]
, extraEnv ? [ ]
, forgeUrl
}:
dockerTools.streamLayeredImage {
  inherit name tag;

  contents = sandcastlePackages ++ [
    nss
    locales
    dockerTools.usrBinEnv
    dockerTools.binSh
    dockerTools.caCertificates
  ] ++ extraContents;

  # Runs under fakeroot in a chroot of the image's root, so the ownership and
  # modes end up in the layer.
  enableFakechroot = true;
  fakeRootCommands = ''
    mkdir -p ${home} /tmp
    chown ${toString uid}:${toString gid} ${home}
    chmod 0755 ${home}
    chmod 1777 /tmp
  '';

  config = {
    Entrypoint = [ "${coreutils}/bin/sleep" "infinity" ];
    User = user;
    WorkingDir = home;
    Env = [
      "PATH=/bin:/usr/bin"
      "HOME=${home}"
      "SSL_CERT_FILE=${caBundle}"
      "NIX_SSL_CERT_FILE=${caBundle}"
      "GIT_SSL_CAINFO=${caBundle}"
      "LANG=C.UTF-8"
      "LOCALE_ARCHIVE=${locales}/lib/locale/locale-archive"
      "SANDCASTLE_FORGE_URL=${forgeUrl}"
    ] ++ extraEnv;
  };
}
