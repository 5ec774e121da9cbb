# `import nixpkgs { system; overlays; }` for the stand-in. Every function takes
# exactly the argument names the real nixpkgs function takes and has no `...`
# unless noted, so a misspelled argument fails evaluation. Results are
# never-built derivations that carry `standIn.function` and
# `standIn.arguments` for the tests to inspect.
{ system, overlays ? [ ], config ? { } }:
let
  lib = import ./lib.nix;

  # A derivation Nix can instantiate (so `nix flake check --no-build` and
  # `nix flake show` accept it) but that is never built.
  fake = name: function: arguments:
    derivation
      {
        inherit name system;
        builder = "/bin/sh";
        args = [ "-c" "echo stand-in derivations cannot be built >&2; exit 1" ];
      } // {
      standIn = { inherit function arguments; };
    };

  package = name: fake name "package" { };

  # callPackage-style .override: the new arguments go through the same
  # function, so they are checked the same way.
  overridable = f: arguments: f arguments // {
    override = newArguments: overridable f (arguments // newArguments);
  };

  base = self: {
    inherit lib system config;

    # pkgs/top-level/stage.nix: `extend = f: self.appendOverlays [ f ]`, one
    # more overlay on the same set.
    extend = overlay: import ./default.nix { inherit system config; overlays = overlays ++ [ overlay ]; };

    stdenv.hostPlatform = {
      inherit system;
      isLinux = lib.hasSuffix "-linux" system;
      isDarwin = lib.hasSuffix "-darwin" system;
    };

    callPackage = fn: overrides:
      let f = if builtins.isFunction fn then fn else import fn;
      in f (builtins.intersectAttrs (builtins.functionArgs f) self // overrides);

    # pkgs/build-support/docker/default.nix (dockerTools)
    dockerTools = {
      streamLayeredImage =
        { name
        , tag ? null
        , fromImage ? null
        , contents ? [ ]
        , config ? { }
        , architecture ? "amd64"
        , created ? "1970-01-01T00:00:01Z"
        , mtime ? "1970-01-01T00:00:01Z"
        , uid ? 0
        , gid ? 0
        , uname ? "root"
        , gname ? "root"
        , maxLayers ? 100
        , extraCommands ? ""
        , fakeRootCommands ? ""
        , enableFakechroot ? false
        , includeStorePaths ? true
        , includeNixDB ? false
        , passthru ? { }
        , meta ? { }
        , layeringPipeline ? null
        , debug ? false
        }@arguments:
          assert lib.assertMsg (builtins.isList contents) "streamLayeredImage: contents must be a list";
          fake "stream-${name}" "dockerTools.streamLayeredImage" arguments // passthru;
      # dockerTools.fakeNss is the top-level fakeNss (pkgs/by-name/fa/fakeNss).
      inherit (self) fakeNss;
      usrBinEnv = package "usr-bin-env";
      binSh = package "bin-sh";
      caCertificates = package "ca-certificates";
    };

    # pkgs/by-name/fa/fakeNss/package.nix: callPackage'd with
    # `extraPasswdLines ? [ ]` and `extraGroupLines ? [ ]`.
    fakeNss = overridable
      ({ extraPasswdLines ? [ ], extraGroupLines ? [ ] }@arguments:
        fake "fake-nss" "fakeNss" arguments)
      { };

    # pkgs/development/libraries/glibc/locales.nix: `allLocales ? true`,
    # `locales ? [ "en_US.UTF-8/UTF-8" ]`.
    glibcLocales = overridable
      ({ allLocales ? true, locales ? [ "en_US.UTF-8/UTF-8" ] }@arguments:
        fake "glibc-locales" "glibcLocales" arguments)
      { };

    # pkgs/development/compilers/rust/make-rust-platform.nix takes
    # `{ rustc, cargo, ... }`; the stand-in refuses anything else.
    makeRustPlatform = { rustc, cargo }: {
      # The real buildRustPackage passes unknown attributes on to
      # stdenv.mkDerivation (it has `...`); the stand-in accepts its own named
      # arguments plus the mkDerivation attributes sandcastle uses.
      buildRustPackage =
        { pname
        , version
        , src
        , cargoLock ? null
        , cargoHash ? null
        , buildType ? "release"
        , checkType ? buildType
        , buildFeatures ? [ ]
        , buildNoDefaultFeatures ? false
        , cargoBuildFlags ? [ ]
        , cargoTestFlags ? [ ]
        , checkFlags ? [ ]
        , useNextest ? false
        , doCheck ? true
        , nativeBuildInputs ? [ ]
        , buildInputs ? [ ]
        , nativeCheckInputs ? [ ]
        , env ? { }
        , preCheck ? ""
        , buildPhase ? null
        , installPhase ? null
        , postInstall ? ""
        , doInstallCheck ? false
        , installCheckPhase ? null
        , meta ? { }
        }@arguments:
          assert lib.assertMsg (cargoLock != null || cargoHash != null)
            "buildRustPackage: cargoHash, cargoVendorDir, or cargoLock must be set";
          assert lib.assertMsg (cargoLock == null || builtins.pathExists cargoLock.lockFile)
            "buildRustPackage: cargoLock.lockFile does not exist";
          fake "${pname}-${version}" "rustPlatform.buildRustPackage" (arguments // { inherit rustc cargo; });
    };

    # pkgs/build-support/trivial-builders/default.nix
    writeShellApplication =
      { name
      , text
      , runtimeInputs ? [ ]
      , runtimeEnv ? null
      , meta ? { }
      , passthru ? { }
      , checkPhase ? null
      , excludeShellChecks ? [ ]
      , extraShellCheckFlags ? [ ]
      , bashOptions ? [ "errexit" "nounset" "pipefail" ]
      , derivationArgs ? { }
      , inheritPath ? true
      }@arguments:
      fake name "writeShellApplication" arguments // passthru;

    # pkgs/build-support/mkshell/default.nix: has `...` in nixpkgs; the
    # stand-in takes the documented names.
    mkShell =
      { name ? "nix-shell"
      , packages ? [ ]
      , inputsFrom ? [ ]
      , buildInputs ? [ ]
      , nativeBuildInputs ? [ ]
      , shellHook ? ""
      , env ? { }
      }@arguments:
      fake name "mkShell" arguments;
  } // lib.genAttrs [
    "bash"
    "cacert"
    "coreutils"
    "curl"
    "deadnix"
    "docker-client"
    "findutils"
    "gawk"
    "git"
    "gnugrep"
    "gnused"
    "jq"
    "nix"
    "nixpkgs-fmt"
    "nodejs"
    "openssl"
    "pkg-config"
    "tea"
    "which"
  ]
    package;

  pkgs = lib.fix (self: builtins.foldl' (super: overlay: super // overlay self super) (base self) overlays);
in
pkgs
