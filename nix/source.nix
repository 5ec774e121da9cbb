# The helpers' source: the workspace manifests, the crates, the prompts (the
# orchestrator `include_str!`s prompts/*.md) and the two template files whose
# placeholders `sandcastle doctor` looks for (a test checks they agree).
# Nothing else, so editing Nix files, docs or the rest of the template does
# not rebuild the crates.
{ lib }:
lib.fileset.toSource {
  root = ../.;
  fileset = lib.fileset.unions [
    ../Cargo.toml
    ../Cargo.lock
    ../helpers
    ../prompts
    ../templates/rust/flake.nix
    ../templates/rust/.sandcastle/config.toml
  ];
}
