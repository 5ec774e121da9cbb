# The helpers' source: the workspace manifests, the crates, the prompts (the
# orchestrator `include_str!`s prompts/*.md), the two template files whose
# placeholders `sandcastle doctor` looks for (a test checks they agree), and
# the docs the tests hold to the code (the generated configuration reference,
# the module maps, the guide's links). Nothing else, so editing Nix files or
# the rest of the template does not rebuild the crates.
{ lib }:
lib.fileset.toSource {
  root = ../.;
  fileset = lib.fileset.unions [
    ../Cargo.toml
    ../Cargo.lock
    ../README.md
    ../ARCHITECTURE.md
    ../docs
    ../helpers
    ../prompts
    ../templates/rust/flake.nix
    ../templates/rust/.sandcastle/config.toml
  ];
}
