{
  description = "A Rust project worked on by sandcastle agents";

  inputs = {
    nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";
    flake-utils.url = "github:numtide/flake-utils";
    rust-overlay = {
      url = "github:oxalica/rust-overlay";
      inputs.nixpkgs.follows = "nixpkgs";
    };
    # Point this at sandcastle's flake: the address you gave
    # `nix registry add sandcastle <address>`. `sandcastle doctor` reports
    # it while it is still this placeholder.
    sandcastle = {
      url = "git+https://forge.example.dev/sandcastle/sandcastle";
      inputs.nixpkgs.follows = "nixpkgs";
      inputs.flake-utils.follows = "flake-utils";
      inputs.rust-overlay.follows = "rust-overlay";
    };
  };

  outputs = { nixpkgs, flake-utils, rust-overlay, sandcastle, ... }:
    flake-utils.lib.eachDefaultSystem (system:
      let
        pkgs = import nixpkgs {
          inherit system;
          overlays = [ rust-overlay.overlays.default ];
        };
        inherit (pkgs) lib;
        rustToolchain = pkgs.rust-bin.stable.latest.default;
        rustPlatform = pkgs.makeRustPlatform {
          cargo = rustToolchain;
          rustc = rustToolchain;
        };
        # sandcastle's library built from this flake's own pkgs.
        sandcastleLib = sandcastle.lib.mkLib pkgs;

        clippy = rustPlatform.buildRustPackage {
          pname = "my-project-clippy";
          version = "0.1.0";
          src = ./.;
          cargoLock.lockFile = ./Cargo.lock;
          buildPhase = "cargo clippy --all-targets --offline -- -D warnings";
          installPhase = "touch $out";
          doCheck = false;
        };

        # The image the agents run in (Linux only). Its name, tag and forge
        # URL come from .sandcastle/config.toml, resolved as sandcastle
        # resolves them.
        image = lib.optionalAttrs (sandcastleLib ? mkSandcastleImage) {
          sandcastleImage = sandcastleLib.mkSandcastleImage
            (sandcastle.lib.imageArgsFromConfig ./.sandcastle/config.toml // {
              extraContents = [ rustToolchain pkgs.pkg-config ];
            });
        };
      in
      {
        packages = image;

        # `nix run .#sandcastle`, and `nix run .#sandcastleImage | docker load`.
        apps = sandcastleLib.mkApps (image.sandcastleImage or null);

        checks = { inherit clippy; } // image;

        devShells = {
          default = pkgs.mkShell {
            packages = [ rustToolchain pkgs.pkg-config sandcastleLib.helpers ];
          };
          # What CI needs to run `check`.
          ci = pkgs.mkShell {
            packages = [ rustToolchain sandcastleLib.helpers ];
          };
        };

        formatter = pkgs.nixpkgs-fmt;
      });
}
