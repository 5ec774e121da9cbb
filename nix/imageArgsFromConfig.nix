# imageArgsFromConfig ./.sandcastle/config.toml -> { name, tag, forgeUrl }
#
# The image name, tag and forge URL as `load-config` resolves them, so a
# flake builds exactly the image its config.toml names: `imageName`
# (default "sandcastle:<name part of repo>") split at its last ':' (no tag
# means "latest"), and `forgeHost` as a URL (a bare host means
# https://<host>).
{ lib }:
configFile:
let
  config = lib.importTOML configFile;
  repoName = lib.last (lib.splitString "/" config.repo);
  imageName = config.imageName or "sandcastle:${repoName}";
  afterLastColon = lib.last (lib.splitString ":" imageName);
  # "registry:5000/sandcastle" has a port, not a tag.
  hasTag = afterLastColon != imageName && !(lib.hasInfix "/" afterLastColon);
  host = config.forgeHost;
in
{
  name =
    if hasTag
    then builtins.substring 0 (builtins.stringLength imageName - builtins.stringLength afterLastColon - 1) imageName
    else imageName;
  tag = if hasTag then afterLastColon else "latest";
  forgeUrl = if lib.hasInfix "://" host then host else "https://${host}";
}
