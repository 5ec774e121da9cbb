#!/usr/bin/env bash
# Start the Docker engine for the tests, unless it already answers.
# Networking stays on the host only: no bridge, no iptables, no forwarding; containers use
# `--network host` or `none`. Installs nothing (CI installs docker.io first).
set -euo pipefail

log="${DOCKERD_LOG:-/tmp/sandcastle-dockerd.log}"
wait_seconds="${DOCKERD_WAIT_SECONDS:-60}"

if docker info >/dev/null 2>&1; then
    echo "start-dockerd: Docker engine already answers"
    exit 0
fi
if ! command -v dockerd >/dev/null 2>&1; then
    echo "start-dockerd: dockerd not found; install it first: apt-get install -y docker.io" >&2
    exit 1
fi

echo "start-dockerd: starting dockerd (log: $log)"
nohup dockerd --bridge=none --iptables=false --ip-forward=false --ip-masq=false >>"$log" 2>&1 &
pid=$!

for ((i = 0; i < wait_seconds; i++)); do
    if docker info >/dev/null 2>&1; then
        echo "start-dockerd: Docker engine answers (dockerd pid $pid)"
        exit 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "start-dockerd: dockerd exited; last lines of $log:" >&2
        tail -n 20 "$log" >&2
        exit 1
    fi
    sleep 1
done
echo "start-dockerd: dockerd did not answer within ${wait_seconds}s; see $log" >&2
exit 1
