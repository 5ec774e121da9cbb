# Every per-system output of the flake, for one system. flake.nix maps this
# over flake-utils' default systems.
#
# The image outputs (mkSandcastleImage, sandcastlePackages, sandcastleImage)
# exist on Linux systems only: the image is a Linux container. On macOS,
# build `.#packages.<x86_64|aarch64>-linux.sandcastleImage` with a Linux
# builder.
{ nixpkgs, rust-overlay, llm-agents, system }:
let
  pkgs = import nixpkgs {
    inherit system;
    overlays = [ rust-overlay.overlays.default ];
  };
  inherit (pkgs) lib;
  isLinux = pkgs.stdenv.hostPlatform.isLinux;

  claude-code = (llm-agents.packages.${system} or { }).claude-code or null;
  rustToolchain = pkgs.callPackage ./rustToolchain.nix { };
  helpers = pkgs.callPackage ./helpers.nix {
    inherit rustToolchain;
    src = pkgs.callPackage ./source.nix { };
  };
  sandcastle = pkgs.callPackage ./sandcastle.nix { inherit helpers; };
  imageArgsFromConfig = pkgs.callPackage ./imageArgsFromConfig.nix { };
  # This repository's own config, or the template's example while it has none.
  selfConfig =
    if builtins.pathExists ../.sandcastle/config.toml
    then ../.sandcastle/config.toml
    else ../templates/rust/.sandcastle/config.toml;

  image = lib.optionalAttrs isLinux rec {
    sandcastlePackages = pkgs.callPackage ./sandcastlePackages.nix { inherit claude-code helpers; };
    mkSandcastleImage = pkgs.callPackage ./mkSandcastleImage.nix { inherit sandcastlePackages; };
    # This repository's own image, named and pointed at the forge by its
    # config, with the Rust toolchain its agents need.
    sandcastleImage = mkSandcastleImage (imageArgsFromConfig selfConfig // {
      extraContents = [ rustToolchain pkgs.pkg-config ];
    });
  };
  sandcastleImage = image.sandcastleImage or null;
in
{
  lib = { inherit imageArgsFromConfig; }
    // lib.optionalAttrs isLinux { inherit (image) mkSandcastleImage sandcastlePackages; };

  packages = {
    inherit helpers sandcastle;
    default = helpers;
  }
  // lib.optionalAttrs (claude-code != null) { inherit claude-code; }
  // lib.optionalAttrs isLinux { inherit sandcastleImage; };

  apps = import ./apps.nix { inherit lib sandcastle sandcastleImage; };

  checks = { inherit helpers; } // lib.optionalAttrs isLinux { inherit sandcastleImage; };

  formatter = pkgs.nixpkgs-fmt;

  devShells.default = pkgs.callPackage ./devShell.nix { inherit rustToolchain claude-code; };
}
