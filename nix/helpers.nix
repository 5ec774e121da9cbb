# All five helper binaries (configure-tea, fmt, check, load-config,
# sandcastle) from the one Cargo workspace, tests run in checkPhase.
#
# What runs inside the Nix build sandbox: unit tests, tests against the fake
# forge and fake Anthropic servers (they listen on 127.0.0.1, which the
# sandbox has) and tests that use real git. What is skipped: tests that need a
# Docker engine (including every test of the real Claude Code CLI, which runs
# in a container; they read SANDCASTLE_SKIP_DOCKER_TESTS and skip themselves),
# the template test, which needs Nix (SANDCASTLE_SKIP_NIX_TESTS), and the report
# page's test in Chromium (SANDCASTLE_SKIP_BROWSER_TESTS).
{ lib, makeRustPlatform, git, rustToolchain, src }:
let
  rustPlatform = makeRustPlatform {
    cargo = rustToolchain;
    rustc = rustToolchain;
  };
  binaries = [ "configure-tea" "fmt" "check" "load-config" "sandcastle" ];
in
rustPlatform.buildRustPackage {
  pname = "sandcastle-helpers";
  inherit ((lib.importTOML ../Cargo.toml).workspace.package) version;
  inherit src;
  cargoLock.lockFile = ../Cargo.lock;

  # Tests drive real git repositories, with a writable HOME.
  nativeCheckInputs = [ git ];
  env = {
    SANDCASTLE_SKIP_DOCKER_TESTS = "1";
    # The template test runs `nix flake init`, which cannot run inside a Nix build.
    SANDCASTLE_SKIP_NIX_TESTS = "1";
    # The report page's test renders it in Chromium, which the build does not have.
    SANDCASTLE_SKIP_BROWSER_TESTS = "1";
  };
  preCheck = ''
    export HOME=$(mktemp -d)
  '';

  # `cargo test` also builds the test-support binaries (fake-anthropic) into
  # the release directory the install hook copies from: ship the helpers only.
  postInstall = ''
    for bin in "$out"/bin/*; do
      case "$(basename "$bin")" in
        ${lib.concatStringsSep "|" binaries}) ;;
        *) rm "$bin" ;;
      esac
    done
  '';
  doInstallCheck = true;
  installCheckPhase = ''
    runHook preInstallCheck
    for bin in ${lib.concatStringsSep " " binaries}; do
      "$out/bin/$bin" --help >/dev/null
    done
    runHook postInstallCheck
  '';

  meta = {
    description = "sandcastle's helper binaries: ${lib.concatStringsSep ", " binaries}";
    mainProgram = "sandcastle";
  };
}
