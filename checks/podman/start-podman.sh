#!/usr/bin/env bash
# Start rootful Podman's Docker-compatible API for the tests' Podman pass, unless it already answers:
#   checks/podman/start-podman.sh [SOCKET]   (default /run/sandcastle-podman/podman.sock)
# Then `DOCKER_HOST=unix://SOCKET` points sandcastle, and the `docker` CLI the tests use, at Podman.
# Creates no network: sandboxes use `none` (or `host`). Installs nothing (checks/setup.sh does).
set -euo pipefail

socket="${1:-/run/sandcastle-podman/podman.sock}"
log="${PODMAN_LOG:-/tmp/sandcastle-podman.log}"
wait_seconds="${PODMAN_WAIT_SECONDS:-60}"
answers() { DOCKER_HOST="unix://$socket" docker version >/dev/null 2>&1; }

if answers; then
    echo "start-podman: Podman already answers at $socket"
    exit 0
fi
command -v podman >/dev/null || { echo "start-podman: podman not found; run checks/setup.sh" >&2; exit 1; }

mkdir -p "$(dirname "$socket")"
echo "start-podman: starting podman system service at $socket (log: $log)"
# From /: the engine outlives this checkout, and its container monitors fail once their working
# directory is gone ("Failed to get working directory").
(cd / && exec nohup podman system service --time=0 "unix://$socket" >>"$log" 2>&1) &
pid=$!
for ((i = 0; i < wait_seconds; i++)); do
    if answers; then
        echo "start-podman: Podman answers (pid $pid)"
        exit 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "start-podman: podman exited; last lines of $log:" >&2
        tail -n 20 "$log" >&2
        exit 1
    fi
    sleep 1
done
echo "start-podman: Podman did not answer within ${wait_seconds}s; see $log" >&2
exit 1
