# mkLib pkgs -> sandcastle's library, built from the consumer's own `pkgs`
# (their nixpkgs, overlays and config), as crane's `mkLib` is:
#
#   sandcastleLib = sandcastle.lib.mkLib pkgs;
#
# rust-overlay is added to `pkgs` only when it lacks `rust-bin`, so a consumer
# who already applies it keeps their own. Claude Code comes from
# numtide/llm-agents.nix for the host platform's system (null where it has
# none). The image functions exist on Linux only: the image is a Linux
# container.
{ rust-overlay, llm-agents }:
pkgs:
let
  inherit (pkgs) lib;
  withRust = if pkgs ? rust-bin then pkgs else pkgs.extend rust-overlay.overlays.default;
  inherit (pkgs.stdenv.hostPlatform) system isLinux;

  claude-code = (llm-agents.packages.${system} or { }).claude-code or null;
  rustToolchain = withRust.callPackage ./rustToolchain.nix { };
  helpers = pkgs.callPackage ./helpers.nix {
    inherit rustToolchain;
    src = pkgs.callPackage ./source.nix { };
  };
  sandcastle = pkgs.callPackage ./sandcastle.nix { inherit helpers; };
  sandcastlePackages = pkgs.callPackage ./sandcastlePackages.nix { inherit claude-code helpers; };
in
{
  inherit helpers sandcastle rustToolchain claude-code;
  imageArgsFromConfig = import ./imageArgsFromConfig.nix { inherit lib; };
  # The apps a project exposes: `sandcastle`, and `sandcastleImage` (for
  # `nix run .#sandcastleImage | docker load`) when given an image.
  mkApps = sandcastleImage: import ./apps.nix { inherit lib sandcastle sandcastleImage; };
}
  // lib.optionalAttrs isLinux {
  inherit sandcastlePackages;
  mkSandcastleImage = pkgs.callPackage ./mkSandcastleImage.nix { inherit sandcastlePackages; };
}
