# Every per-system output of the flake, for one system: the library made by
# `mkLib` from nixpkgs with rust-overlay, and this repository's own packages,
# image, apps and checks from it. flake.nix maps this over flake-utils'
# default systems.
#
# The image outputs (mkSandcastleImage, sandcastlePackages, sandcastleImage)
# exist on Linux systems only: the image is a Linux container. On macOS,
# build `.#packages.<x86_64|aarch64>-linux.sandcastleImage` with a Linux
# builder.
{ nixpkgs, rust-overlay, mkLib, system }:
let
  pkgs = import nixpkgs {
    inherit system;
    overlays = [ rust-overlay.overlays.default ];
  };
  inherit (pkgs) lib;
  sandcastleLib = mkLib pkgs;
  inherit (sandcastleLib) helpers sandcastle claude-code rustToolchain;

  # This repository's own config, or the template's example while it has none.
  selfConfig =
    if builtins.pathExists ../.sandcastle/config.toml
    then ../.sandcastle/config.toml
    else ../templates/rust/.sandcastle/config.toml;

  # This repository's own image, named and pointed at the forge by its
  # config, with the Rust toolchain its agents need.
  sandcastleImage =
    if sandcastleLib ? mkSandcastleImage
    then
      sandcastleLib.mkSandcastleImage
        (sandcastleLib.imageArgsFromConfig selfConfig // {
          extraContents = [ rustToolchain pkgs.pkg-config ];
        })
    else null;
  image = lib.optionalAttrs (sandcastleImage != null) { inherit sandcastleImage; };
in
{
  # `lib.<system>`: `lib.mkLib` of nixpkgs with rust-overlay, a thin alias
  # for projects that do not pass their own pkgs.
  lib = sandcastleLib;

  packages = {
    inherit helpers sandcastle;
    default = helpers;
  }
  // lib.optionalAttrs (claude-code != null) { inherit claude-code; }
  // image;

  apps = sandcastleLib.mkApps sandcastleImage;

  checks = { inherit helpers; } // image;

  formatter = pkgs.nixpkgs-fmt;

  devShells.default = pkgs.callPackage ./devShell.nix { inherit rustToolchain claude-code; };
}
