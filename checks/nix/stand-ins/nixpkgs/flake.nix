# Stand-in for NixOS/nixpkgs, for offline evaluation tests only.
{
  description = "nixpkgs stand-in: the functions sandcastle calls, with real argument names";

  outputs = _: {
    lib = import ./lib.nix;
  };
}
