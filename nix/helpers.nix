# All five helper binaries (configure-tea, fmt, check, load-config,
# sandcastle) from the one Cargo workspace, tests run in checkPhase.
#
# What runs inside the Nix build sandbox: unit tests, tests against the fake
# forge and fake Anthropic servers (they listen on 127.0.0.1, which the
# sandbox has) and tests that use real git. What is skipped: tests that need a
# Docker engine or the real Claude Code CLI; they read
# SANDCASTLE_SKIP_DOCKER_TESTS and skip themselves.
{ lib, makeRustPlatform, git, rustToolchain, src }:
let
  rustPlatform = makeRustPlatform {
    cargo = rustToolchain;
    rustc = rustToolchain;
  };
in
rustPlatform.buildRustPackage {
  pname = "sandcastle-helpers";
  inherit ((lib.importTOML ../Cargo.toml).workspace.package) version;
  inherit src;
  cargoLock.lockFile = ../Cargo.lock;

  # Tests drive real git repositories.
  nativeCheckInputs = [ git ];
  env.SANDCASTLE_SKIP_DOCKER_TESTS = "1";

  meta = {
    description = "sandcastle's helper binaries: configure-tea, fmt, check, load-config, sandcastle";
    mainProgram = "sandcastle";
  };
}
