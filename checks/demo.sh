#!/usr/bin/env bash
# The main job, for real, on this machine: sets everything up, then runs one pass of sandcastle's
# loop (planner, two implementers side by side, reviewers, pushes, pull requests) with the real
# `sandcastle` binary, the real Docker engine and the real Claude Code CLI in the test image.
# There is no real forge or model here, so the forge is `fake-forge` (Forgejo's API, git smart HTTP)
# and the model is `fake-anthropic` playing checks/demo/scenario.json, both on 127.0.0.1 only.
#
#   bash checks/demo.sh [PROJECT_DIR]     (as root on Debian; default PROJECT_DIR: a new mktemp -d)
#
# PROJECT_DIR must be new, empty, or a project an earlier demo made (which is replaced). The
# servers stop when the script ends; sandcastle removes its own containers.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

step() { printf '\n==> %s\n' "$*"; }
die() {
    echo "demo: $*" >&2
    exit 1
}
trap 'echo "demo: failed: $BASH_COMMAND (line $LINENO)" >&2' ERR

owner=demo
user=demo-bot # the token's user; not the owner's name, since sandcastle redacts every .env value
name=hello
repo="$owner/$name"
scenario="$root/checks/demo/scenario.json"
marker=.git/sandcastle-demo # in a project this script made

# --- set-up -------------------------------------------------------------------------------------
project="${1:-}"
if [[ -n "$project" && -e "$project" ]]; then
    [[ -d "$project" ]] || die "$project is not a directory; give a new or empty directory"
    if [[ -e "$project/$marker" ]]; then
        find "$project" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
    elif [[ -n "$(ls -A "$project")" ]]; then
        die "$project is not empty and not an earlier demo project; give a new or empty directory"
    fi
fi

command -v cargo >/dev/null ||
    die "cargo not found; install Rust $(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml) or newer with rustup (https://rustup.rs), then run this again"
missing=()
for pair in curl:curl npm:npm; do
    command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
done
if ((${#missing[@]})); then
    step "apt-get install ${missing[*]} (the demo seeds the forge with curl; setup.sh installs Claude Code with npm)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
bash checks/setup.sh
step "cargo build --workspace --bins"
cargo build --workspace --bins
step "test image sandcastle-test:latest (the real Claude Code CLI and the helpers)"
bash checks/docker/build-test-image.sh
for bin in sandcastle fake-forge fake-anthropic; do
    [[ -x "target/debug/$bin" ]] || die "target/debug/$bin missing after cargo build"
done

# Server state, the token and the forge's repositories: removed on exit.
state="$(mktemp -d /tmp/sandcastle-demo-state.XXXXXX)"
pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$state"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_for FILE PATTERN PID NAME: until FILE has a line matching PATTERN; prints that line.
wait_for() {
    local i line
    for ((i = 0; i < 100; i++)); do
        line="$(grep -m1 -E "$2" "$1" 2>/dev/null || true)"
        if [[ -n "$line" ]]; then
            echo "$line"
            return
        fi
        kill -0 "$3" 2>/dev/null || die "$4 exited: $(tail -n 3 "$1")"
        sleep 0.1
    done
    die "$4 did not start within 10s; see $1"
}

step "fake-forge: Forgejo API and git smart HTTP on 127.0.0.1, repository $repo"
TMPDIR="$state" target/debug/fake-forge --user "$user" --repo "$repo" --token-file "$state/token" \
    >"$state/forge.log" 2>&1 &
pids+=($!)
forge_url="$(wait_for "$state/forge.log" '^forge: ' "$!" fake-forge | awk '{print $2}')"
echo "forge: $forge_url (log: in memory, gone when the demo ends)"
token="$(cat "$state/token")"
# curl reads the Authorization header from a file: the token is never a process argument.
(umask 077 && printf 'Authorization: token %s\n' "$token" >"$state/auth-header")

step "fake-anthropic: the Messages API playing $scenario"
target/debug/fake-anthropic "$scenario" >"$state/anthropic.url" 2>"$state/anthropic.log" &
pids+=($!)
anthropic_url="$(wait_for "$state/anthropic.url" '^http://' "$!" fake-anthropic)"
echo "model: $anthropic_url"

api() { # METHOD PATH [JSON]
    local args=(-sS --fail-with-body -X "$1" -H @"$state/auth-header" -H 'Content-Type: application/json')
    [[ $# -ge 3 ]] && args+=(-d "$3")
    curl "${args[@]}" "$forge_url/api/v1$2" || die "forge API $1 $2 failed"
}

step "the project: a clone of $repo with .sandcastle/config.toml, pushed to the forge"
project="${project:-$(mktemp -d /tmp/sandcastle-demo.XXXXXX)}"
mkdir -p "$project"
project="$(cd "$project" && pwd)"
# git gets the token from a credential helper reading the environment, never from argv.
forge_git() {
    DEMO_USER="$user" DEMO_TOKEN="$token" git -c credential.helper= \
        -c 'credential.helper=!f() { test "$1" = get && printf "username=%s\npassword=%s\n" "$DEMO_USER" "$DEMO_TOKEN"; }; f' \
        -c user.name="Demo Human" -c user.email=human@demo.invalid "$@"
}
forge_git clone -q "$forge_url/$repo.git" "$project"
touch "$project/$marker"
mkdir -p "$project/.sandcastle"
cat >"$project/.sandcastle/config.toml" <<EOF
repo = "$repo"
forgeHost = "$forge_url"
imageName = "sandcastle-test:latest"
maxConcurrency = 2
maxIterations = 3
idleTimeout = "2m"

[commands]
check = [["bash", "-c", "shopt -s nullglob; for f in *.sh; do bash -n \"\$f\" || exit 1; echo \"\$f: syntax ok\"; done"]]
fmt = [["bash", "-c", "shopt -s nullglob; sed -i 's/[[:space:]]*\$//' *.sh"]]

[sandbox]
# network = "none" (the default): the model on 127.0.0.1 is reached through sandcastle's proxy.
memory = "2g"
pidsLimit = 512
EOF
printf '.env\nlogs/\nrepos/\n' >"$project/.sandcastle/.gitignore"
(
    umask 077
    cat >"$project/.sandcastle/.env" <<EOF
ANTHROPIC_BASE_URL=$anthropic_url
ANTHROPIC_API_KEY=sk-demo-not-a-real-key
FORGEJO_USER=$user
FORGEJO_TOKEN=$token
EOF
)
forge_git -C "$project" add .sandcastle
forge_git -C "$project" commit -q -m "Set up sandcastle"
forge_git -C "$project" push -q origin HEAD
echo "project: $project"

step "the lifecycle labels and two ready-for-agent issues on $repo"
# `sandcastle run` would create missing labels, but `doctor` rightly reports them missing first.
for spec in ready-for-agent:0e8a16 in-review:fbca04 ready-for-human:1d76db epic:5319e7 needs-info:d93f0b; do
    api POST "/repos/$repo/labels" "{\"name\":\"${spec%%:*}\",\"color\":\"#${spec#*:}\"}" >/dev/null
done
label="$(api GET "/repos/$repo/labels" | jq '.[] | select(.name == "ready-for-agent") | .id')"
new_issue() { # TITLE BODY
    api POST "/repos/$repo/issues" "$(jq -nc --arg t "$1" --arg b "$2" --argjson l "$label" \
        '{title: $t, body: $b, labels: [$l]}')" | jq -r '"#\(.number) \(.title)"'
}
new_issue "Add a greeting script" "Add greet.sh: \`./greet.sh NAME\` prints \`Hello, NAME!\` (default: world)."
new_issue "Add a farewell script" "Add farewell.sh: \`./farewell.sh NAME\` prints \`Goodbye, NAME!\` (default: world)."

sandcastle=("$root/target/debug/sandcastle" -C "$project")
step "sandcastle doctor"
"${sandcastle[@]}" doctor || die "sandcastle doctor found a problem (above)"

step "sandcastle run --once (planner, 2 implementers at once, reviewers, push, pull requests)"
status=0
"${sandcastle[@]}" run --once || status=$?

# --- what happened --------------------------------------------------------------------------------
step "pull requests on $repo"
api GET "/repos/$repo/pulls?state=all" | jq -r '.[] |
    "#\(.number) \(.title)\n    head \(.head.ref) -> \(.base.ref), \(.state), labels: \([.labels[].name] | join(", "))\n    \(.body | split("\n")[0])"'
step "issues on $repo"
api GET "/repos/$repo/issues?state=all&type=issues" | jq -r '.[] |
    "#\(.number) \(.title) (\(.state)), labels: \([.labels[].name] | join(", "))"'
step "the agents' commits on the pushed branches"
forge_git -C "$project" fetch -q origin
for branch in $(git -C "$project" for-each-ref --format='%(refname:strip=3)' 'refs/remotes/origin/sandcastle/'); do
    echo "$branch:"
    git -C "$project" log --format='    %h %an: %s' "origin/HEAD..origin/$branch"
done

logs="$project/.sandcastle/logs"
report="$(ls -t "$logs"/run-*.json 2>/dev/null | head -n 1 || true)"
step "logs"
echo "transcripts, sessions, state: $logs"
echo "run report:                   ${report:-none written}"
echo "work repositories:            $project/.sandcastle/repos"
if [[ -n "$report" ]]; then
    run_id="$(jq -r .runId "$report")"
    echo "containers of run $run_id left: $(docker ps -aq --filter "label=sandcastle.run=$run_id" | wc -l)"
fi
step "sandcastle report (the run's cost, time and work, and what became of its pull requests)"
"${sandcastle[@]}" report || die "sandcastle report failed (above)"
((status == 0)) || die "sandcastle run --once exited with status $status"
echo
echo "demo: done. The forge and the model stop now; the project stays in $project."
