# The development shell of this repository: the Rust toolchain, the tools the
# tests call, and the Nix linters checks/nix/test.sh runs.
{ mkShell
, rustToolchain
, pkg-config
, git
, jq
, tea
, docker-client
, nixpkgs-fmt
, deadnix
, claude-code
}:
mkShell {
  packages = [
    rustToolchain
    pkg-config
    git
    jq
    tea
    docker-client
    nixpkgs-fmt
    deadnix
  ] ++ (if claude-code == null then [ ] else [ claude-code ]);
}
