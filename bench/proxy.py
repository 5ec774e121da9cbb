#!/usr/bin/env python3
"""Benchmark: what the model proxy adds to one Messages API request.

One sandbox of a real `sandcastle run` (release build, the real Claude Code CLI in the image, on
the host's network so the stub is reachable directly too) sends the same streamed request to the
same stub (fake-anthropic) alternately two ways, timing each inside the container:
  direct   straight to the stub on 127.0.0.1
  proxied  to $ANTHROPIC_BASE_URL: the relay, the work's socket, the proxy on the host (key check,
           budget check, credential, usage metering) and on to the stub
Both go through the same bash `/dev/tcp` client with `connection: close` (a new connection each,
a `date` either side), so their difference is the proxy's cost. Writes the medians to stdout and,
with --write, a section of bench/RESULTS.md.

Run from the repository root:  python3 bench/proxy.py [--requests N] [--write]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402  (bench/run.py: the fake forge, the project, the release build)

IMAGE = "sandcastle-bench-proxy:latest"
SECTION = "## Model proxy overhead per request"

# The body is the same both ways; the stub answers it as a side request, streamed.
LOOP = r"""
body='{"model":"claude-sonnet-4-6","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"BENCH-PROXY"}]}'
relay=${ANTHROPIC_BASE_URL##*:}
ask() { exec 3<>/dev/tcp/127.0.0.1/$1; printf 'POST /v1/messages HTTP/1.1\r\nHost: model\r\nx-api-key: %s\r\ncontent-type: application/json\r\nanthropic-version: 2023-06-01\r\ncontent-length: %s\r\nconnection: close\r\n\r\n%s' "$ANTHROPIC_API_KEY" "${#body}" "$body" >&3; cat <&3 > /tmp/answer; exec 3<&-; grep -q message_stop /tmp/answer || echo "failed $2" >> timings.txt; }
: > timings.txt
for i in $(seq REQUESTS); do
  for way in direct proxied; do
    port=$([ $way = direct ] && echo STUB_PORT || echo $relay)
    t0=$(date +%s%N); ask $port $way; t1=$(date +%s%N)
    echo "$way $(( (t1 - t0) / 1000 ))" >> timings.txt
  done
done
git add timings.txt && git commit -qm timings
"""


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200, help="requests each way (default 200)")
    parser.add_argument("--write", action="store_true", help="write the section of bench/RESULTS.md")
    args = parser.parse_args()

    print("bench: cargo build --release (sandcastle, fake-forge, fake-anthropic)", flush=True)
    bench.sh("cargo", "build", "--release", "-q", "-p", "sandcastle", "-p", "fake-forge", "-p", "fake-anthropic",
             cwd=bench.ROOT)
    print(f"bench: image {IMAGE} from the release binaries", flush=True)
    subprocess.run(["bash", str(bench.ROOT / "checks/docker/build-test-image.sh"), IMAGE], check=True,
                   env={**os.environ, "SANDCASTLE_BIN_DIR": str(bench.RELEASE)}, stdout=subprocess.DEVNULL)

    port = free_port()
    loop = LOOP.replace("REQUESTS", str(args.requests)).replace("STUB_PORT", str(port))
    # The first script whose `match` is in the prompt answers: the reviewer's prompt names the issue too.
    scenario = [
        {"match": "BENCH-PROXY", "without_tools": True, "turns": [{"text": "ok"}], "repeat_last": True},
        {"match": "# Role: reviewer", "turns": [{"text": "Fine. <promise>COMPLETE</promise>"}]},
        {"match": "Bench issue 1.", "turns": [{"bash": loop, "description": "time requests"},
                                              {"text": "Done. <promise>COMPLETE</promise>"}]},
    ]
    work = Path(tempfile.mkdtemp(prefix="scbench-proxy-"))
    scenario_file = work / "scenario.json"
    scenario_file.write_text(json.dumps(scenario))
    model = bench.Server([bench.RELEASE / "fake-anthropic", scenario_file, "--port", port], r"^http://\S+",
                         stdout_only=True)
    ours = None
    try:
        ours = bench.Ours(work, IMAGE, 1, 1, 1, {"ANTHROPIC_BASE_URL": model.line})
        # The first implementer turn runs the loop: no assessor before it.
        config = ours.project / ".sandcastle/config.toml"
        config.write_text(config.read_text() + "\n[clarify]\nenabled = false\n")
        print(f"bench: {args.requests} requests each way through one sandbox", flush=True)
        code = subprocess.run([bench.RELEASE / "sandcastle", "-C", ours.project, "run", "--issue", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
        clone = work / "clone"
        ours.git("clone", "-q", "-b", "sandcastle/issue-1", f"{ours.url}/{bench.OWNER}/{bench.NAME}.git", clone)
        lines = (clone / "timings.txt").read_text().split()
    finally:
        if ours:
            ours.close()
        model.stop()
    if code != 0:
        bench.die(f"sandcastle run exited {code}")
    pairs = list(zip(lines[0::2], lines[1::2]))
    failed = [p for p in pairs if p[0] == "failed"]
    if failed:
        bench.die(f"{len(failed)} request(s) got no whole answer: {failed[:3]}")
    times = {way: [int(us) / 1000 for w, us in pairs if w == way] for way in ("direct", "proxied")}
    direct, proxied = statistics.median(times["direct"]), statistics.median(times["proxied"])
    # Each proxied request right after its direct twin: their difference shares the moment's load.
    paired = statistics.median(p - d for d, p in zip(times["direct"], times["proxied"]))
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    result = (
        f"{SECTION}\n\n"
        f"Generated by `python3 bench/proxy.py` (bench/proxy.py): {args.requests} streamed requests each way, "
        f"alternating, from one sandbox of a release-build `sandcastle run` to the same stub; machine load "
        f"average (1 / 5 / 15 min) at the end {load} on {os.cpu_count()} cores.\n\n"
        "| way | median ms | p90 ms |\n|---|---|---|\n"
        f"| direct to the stub | {direct:.2f} | {quantile(times['direct'], 0.9):.2f} |\n"
        f"| through the relay and the proxy | {proxied:.2f} | {quantile(times['proxied'], 0.9):.2f} |\n"
        f"| the proxy's cost: difference of the medians | {proxied - direct:.2f} | |\n"
        f"| **the proxy's cost: median of the paired differences** | **{paired:.2f}** | |\n\n"
        "Each request is a new connection (`connection: close`) from bash's `/dev/tcp` with a `date` on either "
        "side, the same both ways; the proxied way adds the relay in the container, the work's Unix socket, the "
        "proxy's key and budget checks, the credential, the upstream hop (pooled) and the usage meter reading "
        "the stream. Target: at most 5 ms.\n"
    )
    print(result)
    if args.write:
        path = bench.BENCH / "RESULTS.md"
        text = path.read_text()
        if SECTION in text:
            text = text[: text.index(SECTION)].rstrip() + "\n"
        path.write_text(text.rstrip() + "\n\n" + result)


def quantile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


if __name__ == "__main__":
    try:
        main()
    except bench.BenchError as error:
        bench.die(str(error))
