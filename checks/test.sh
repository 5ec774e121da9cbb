#!/usr/bin/env bash
# The whole test suite, from a fresh machine: set-up, the Rust tests (unit, integration, and the
# end-to-end scenarios with a real Docker engine and the real Claude Code CLI), lint, the offline
# Nix checks, and the user guide's build.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

bash checks/setup.sh

step "cargo build (every test, and the binaries baked into the test image)"
cargo test --workspace --no-run --quiet
step "test image"
bash checks/docker/build-test-image.sh

step "cargo fmt --check"
cargo fmt --all --check
step "cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings
step "cargo doc (rustdoc warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --quiet
step "Nix checks (offline)"
bash checks/nix/test.sh
step "the user guide (mdbook build; its links are checked by tests/guide.rs)"
mdbook build docs/guide

step "cargo test --doc (nextest runs no doctests)"
cargo test --workspace --doc --quiet
# nextest runs every test in a process of its own, the test binaries side by side, and the
# end-to-end scenarios three at a time (.config/nextest.toml; docs/design/ci.md has the figures).
step "cargo nextest run (every other test)"
cargo nextest run --workspace --no-fail-fast

step "core scenarios again on an image whose sh is BusyBox and that has no bash (build-test-image.sh --busybox)"
bash checks/docker/build-test-image.sh --busybox sandcastle-test:busybox
SANDCASTLE_TEST_IMAGE=sandcastle-test:busybox cargo nextest run --no-fail-fast -p sandcastle-core \
    agent::docker_tests::a_turn_that_ends_at_the_hosts_tip sandbox::docker_tests::an_image_lacking
SANDCASTLE_TEST_IMAGE=sandcastle-test:busybox cargo nextest run --no-fail-fast -p sandcastle --test e2e \
    driver::the_second_iteration_remembers_the_first \
    containment::agent_processes_cannot_signal_or_trace_pid_1 \
    asks::an_ask_made_mid_turn_is_on_the_forge_while_the_turn_still_runs

# The same sandcastle on Podman through its Docker-compatible API (docs/design/ci.md says why these):
# the sandbox's own tests, a pull request end to end, the trust-boundary attacks, the proxy (the key
# kept out, egress refused) and a question's round trip through the forge.
step "core scenarios again on Podman (checks/podman/start-podman.sh; DOCKER_HOST at its socket)"
podman_socket=/run/sandcastle-podman/podman.sock
bash checks/podman/start-podman.sh "$podman_socket"
docker save sandcastle-test:latest | podman load -q
DOCKER_HOST="unix://$podman_socket" cargo nextest run --no-fail-fast -p sandcastle-core \
    sandbox::docker_tests agent::docker_tests::a_turn_that_ends_at_the_hosts_tip
DOCKER_HOST="unix://$podman_socket" cargo nextest run --no-fail-fast -p sandcastle --test e2e \
    two_issues_become_two_pull_requests \
    driver::the_second_iteration_remembers_the_first \
    driver::a_stopped_run_resumes_the_same_session \
    containment::agent_processes_cannot_signal_or_trace_pid_1_or_trace_their_turns_wrapper \
    containment::a_marker_the_agent_prints_ends_nothing \
    containment::gates_start_warm_from_the_base_and_write_only_their_own_copy \
    trust::no_sandbox_holds_the_orchestrators_token \
    trust::the_agents_hooks_and_git_config_never_act_on_the_host \
    trust::a_symlinked_session_file_reads_no_host_file \
    proxy::the_model_key_never_enters_a_sandbox \
    proxy::the_model_key_never_enters_a_sandbox_on_the_hosts_network \
    proxy::a_sandbox_reaches_nothing_directly_and_cannot_touch_the_relay \
    questions::a_maintainers_forge_reply_answers_and_the_work_goes_on
