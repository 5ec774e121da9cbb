# The helpers' source: the workspace manifests, the crates and the prompts
# (the orchestrator `include_str!`s prompts/*.md). Nothing else, so editing
# Nix files, docs or templates does not rebuild the crates.
{ lib }:
lib.fileset.toSource {
  root = ../.;
  fileset = lib.fileset.unions [
    ../Cargo.toml
    ../Cargo.lock
    ../helpers
    ../prompts
  ];
}
