{
  description = "sandcastle: an autonomous pull-request loop of Claude Code agents in Docker sandboxes, on Forgejo issues";

  inputs = {
    nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";
    flake-utils.url = "github:numtide/flake-utils";
    rust-overlay = {
      url = "github:oxalica/rust-overlay";
      inputs.nixpkgs.follows = "nixpkgs";
    };
    llm-agents = {
      url = "github:numtide/llm-agents.nix";
      inputs.nixpkgs.follows = "nixpkgs";
    };
  };

  outputs = { nixpkgs, flake-utils, rust-overlay, llm-agents, ... }:
    let
      # sandcastle's library from a consumer's own pkgs, like crane's.
      mkLib = import ./nix/mkLib.nix { inherit rust-overlay llm-agents; };
      perSystem = flake-utils.lib.eachDefaultSystem (system:
        import ./nix/perSystem.nix { inherit nixpkgs rust-overlay mkLib system; });
    in
    {
      # Named one by one (not `perSystem // { ... }`) so that reading
      # `templates` does not evaluate, or fetch, any input.
      inherit (perSystem) packages apps checks formatter devShells;
      # `lib.mkLib pkgs` and the system-free `lib.imageArgsFromConfig`, beside
      # the per-system `lib.<system>` aliases.
      lib = perSystem.lib // {
        inherit mkLib;
        imageArgsFromConfig = import ./nix/imageArgsFromConfig.nix { inherit (nixpkgs) lib; };
      };
      templates = import ./nix/templates.nix;
    };
}
