#!/usr/bin/env bash
# Start the Docker engine for the tests, unless it already answers.
# Networking stays on the host only: no bridge, no iptables, no forwarding; containers use
# `--network host` or `none`. Installs nothing (CI installs docker.io first).
# Registers the runtime `sandcastle-test-runc` (runc under another name, what the `[sandbox] runtime`
# tests run under) in daemon.json, idempotently: before the start, or, when the engine already
# answers without it, by a reload (SIGHUP; `runtimes` is live-reloadable, so running containers stay).
set -euo pipefail

log="${DOCKERD_LOG:-/tmp/sandcastle-dockerd.log}"
wait_seconds="${DOCKERD_WAIT_SECONDS:-60}"
daemon_json="${DOCKERD_CONFIG:-/etc/docker/daemon.json}"
test_runtime=sandcastle-test-runc

if ! command -v jq >/dev/null 2>&1; then
    echo "start-dockerd: jq not found (it edits daemon.json); install it first: apt-get install -y jq" >&2
    exit 1
fi

has_test_runtime() {
    docker info --format '{{json .Runtimes}}' 2>/dev/null | jq -e --arg r "$test_runtime" 'has($r)' >/dev/null
}

# Merges the test runtime into daemon.json, keeping whatever else it says.
register_test_runtime() {
    mkdir -p "$(dirname "$daemon_json")"
    local current='{}'
    [ -s "$daemon_json" ] && current=$(cat "$daemon_json")
    jq --arg r "$test_runtime" '.runtimes[$r] = {"path": "runc"}' <<<"$current" >"$daemon_json.new"
    mv -f "$daemon_json.new" "$daemon_json"
}

if docker info >/dev/null 2>&1; then
    echo "start-dockerd: Docker engine already answers"
    if ! has_test_runtime; then
        register_test_runtime
        pid=$(cat /var/run/docker.pid 2>/dev/null || pidof dockerd || true)
        if [ -z "$pid" ]; then
            echo "start-dockerd: the engine that answers is not a dockerd of this machine; register the runtime $test_runtime (path runc) in its configuration by hand" >&2
            exit 1
        fi
        echo "start-dockerd: registering the runtime $test_runtime (reloading dockerd pid $pid)"
        kill -HUP "$pid"
        for ((i = 0; i < wait_seconds; i++)); do
            has_test_runtime && break
            sleep 1
        done
        if ! has_test_runtime; then
            echo "start-dockerd: dockerd did not take the runtime $test_runtime from $daemon_json; see its log" >&2
            exit 1
        fi
    fi
    exit 0
fi
if ! command -v dockerd >/dev/null 2>&1; then
    echo "start-dockerd: dockerd not found; install it first: apt-get install -y docker.io" >&2
    exit 1
fi

register_test_runtime
echo "start-dockerd: starting dockerd (log: $log)"
# From /: the engine outlives this checkout, and its container monitors fail once their working
# directory is gone ("Failed to get working directory").
(cd / && exec nohup dockerd --bridge=none --iptables=false --ip-forward=false --ip-masq=false >>"$log" 2>&1) &
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
