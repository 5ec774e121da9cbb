# Stand-in for oxalica/rust-overlay, for offline evaluation tests only.
{
  description = "rust-overlay stand-in";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs = _: {
    overlays.default = _final: prev: {
      rust-bin.stable.latest.default =
        derivation
          {
            name = "rust-default-stable";
            inherit (prev) system;
            builder = "/bin/sh";
            args = [ "-c" "exit 1" ];
          } // {
          standIn = { function = "rust-bin.stable.latest.default"; arguments = { }; };
        };
    };
  };
}
