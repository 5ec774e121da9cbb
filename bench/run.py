#!/usr/bin/env python3
"""Benchmark: sandcastle (ours) side by side with @ai-hero/sandcastle (the peer) and the Docker floor.

Both orchestrators drive the same work on the same Docker engine: the same locally built image and
the same agent, either a stand-in `claude` that prints a minimal stream-json transcript and exits
(the orchestrators alone) or the real Claude Code CLI against the scripted Messages API
(fake-anthropic). Writes bench/RESULTS.md and bench/results.json, and prints the table.

Workloads (each timed from process start to exit, min / median / max over --runs runs):
  W1   one issue, one iteration that completes (ours then runs the reviewer, pushes, opens a PR)
  W1x  one issue, one iteration that does not complete (maxIterations 1; ours then gives up)
  W10  one issue, 10 iterations that never complete
  W8   8 issues at concurrency 4, each one completing iteration
  W1g, W8g  ours only: W1 and W8 with a gate (`check = [["true"]]`), as a project runs them; the
       others have no gate, as the peer has none
  W1n, W8n  ours only: W1 and W8 like for like with the peer: no gate, no assessor, and no
       reviewer (`[review] enabled = false`)
  W0   start-up: `sandcastle --help` and `load-config` against the peer's import
per-iteration overhead = (W10 - W1x) / 9. The report ends with issue 30's goals, each against its
limit (`goals`).

Run from the repository root:  python3 bench/run.py [--quick]
"""

import argparse
import datetime
import json
import os
import platform
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
PEER = BENCH / "peer"
RELEASE = ROOT / "target" / "release"
# The image both orchestrators' sandboxes run: the test image with release builds of sandcastle's
# binaries, as the Nix image has them (a debug `sandcastle` is six times the size, and each sandbox
# copies it at start), built by the bench unless SANDCASTLE_TEST_IMAGE names one.
BASE_IMAGE = os.environ.get("SANDCASTLE_TEST_IMAGE", "scbench-base:latest")
OWNER, NAME, USER = "bench", "proj", "bench-bot"
API_KEY = "sk-bench-not-a-real-key-0000"


class BenchError(Exception):
    pass


def die(message):
    print(f"bench: {message}", file=sys.stderr)
    sys.exit(1)


def sh(*argv, cwd=None, env=None, input=None, check=True):
    """Runs argv; its stdout (text). A failure is a BenchError naming the command and its stderr."""
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, input=input, capture_output=True, text=True
    )
    if check and done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no error output"])[-1]
        raise BenchError(f"`{' '.join(map(str, argv))[:120]}` failed ({done.returncode}): {last}")
    return done.stdout


# --- timing -----------------------------------------------------------------------------------------


def timed(argv, cwd=None, env=None, stdout_path=None, meter=None, tree=None):
    """Runs argv to its end: (seconds, peak RSS in MB of that process alone, exit code).

    The peak is the kernel's high-water mark (VmHWM) of the process itself, read every 5 ms until it
    exits; its children (the `docker` CLI) are not counted. A CpuMeter, if given, runs from just
    before the start to just after the end; a ProcessTree, if given, is sampled with the peak."""
    out = open(stdout_path, "w") if stdout_path else subprocess.DEVNULL
    if meter:
        meter.start()
    start = time.perf_counter()
    proc = subprocess.Popen(
        [str(a) for a in argv], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT
    )
    peak_kb = 0
    if tree:
        tree.root(proc.pid)
    status = f"/proc/{proc.pid}/status"
    while proc.poll() is None:
        try:
            with open(status) as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peak_kb = max(peak_kb, int(line.split()[1]))
                        break
        except (OSError, ValueError):
            pass
        if tree:
            tree.sample()
        time.sleep(0.005)
        if meter:
            meter.poll()
    seconds = time.perf_counter() - start
    if meter:
        meter.stop()
    if stdout_path:
        out.close()
    return seconds, peak_kb / 1024, proc.returncode


PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


class ProcessTree:
    """The resident set of a process and its living descendants (the `docker` CLI, git), summed at
    each sample; `peak_kb` the largest sum seen. A descendant is found when it is new since the last
    sample (a pid above the highest seen) and its parent is in the tree, so one that lives less than
    a sample's interval (5 ms) may be missed: the figure is a lower bound."""

    def __init__(self):
        self.members, self.seen, self.peak_kb = set(), 0, 0

    def root(self, pid):
        self.members, self.seen = {pid}, pid

    def sample(self):
        new = sorted(int(e) for e in os.listdir("/proc") if e.isdigit() and int(e) > self.seen)
        for pid in new:
            try:
                parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if parent in self.members:
                self.members.add(pid)
        self.seen = max([self.seen, *new])
        total = 0
        for pid in list(self.members):
            try:
                total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_KB
            except (OSError, IndexError, ValueError):
                self.members.discard(pid)
        self.peak_kb = max(self.peak_kb, total)


TICK = os.sysconf("SC_CLK_TCK")
DOCKER_CGROUP = Path("/sys/fs/cgroup/cpuacct/docker/cpuacct.usage")


def proc_ticks(pid, children=True):
    """CPU ticks of a process (user + system), with those of its reaped children; None when gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return sum(int(f) for f in fields[11:15 if children else 13])


def pids_named(prefix):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/comm").read_text().startswith(prefix):
                    found.append(int(entry))
            except OSError:
                pass
    return found


class CpuMeter:
    """CPU-seconds spent on one run, for W8's machine-bound ideal: the orchestrator and every process
    it starts and reaps (getrusage of run.py's children: the `docker` CLI, git, the peer's node), the
    fake forge, dockerd and containerd, each containerd-shim's own time (sampled every ~50 ms, so a
    shim's last moments before it exits are missed) and every container's processes (the `docker`
    cpuacct cgroup). The Docker daemons and the cgroup are shared with whatever else uses this
    engine at the time, so the figure is an upper bound when other work runs; `machine_busy_s` is
    the whole machine's busy time over the same window, for comparison."""

    def __init__(self, pids=()):
        self.pids = list(pids)
        self.polls = 0

    @staticmethod
    def children_s():
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    @staticmethod
    def busy_s():
        fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return (sum(fields[:8]) - fields[3] - fields[4]) / TICK  # all but idle and iowait

    @staticmethod
    def containers_s():
        try:
            return int(DOCKER_CGROUP.read_text()) / 1e9
        except (OSError, ValueError):
            return 0.0

    def start(self):
        self.daemons = {pid: proc_ticks(pid) for pid in pids_named("dockerd") + pids_named("containerd")
                        if not Path(f"/proc/{pid}/comm").read_text().startswith("containerd-shim")}
        self.daemons.update({pid: proc_ticks(pid) for pid in self.pids})
        self.shims = {pid: [proc_ticks(pid, children=False)] * 2 for pid in pids_named("containerd-shim")}
        self.seen = max((int(e) for e in os.listdir("/proc") if e.isdigit()), default=0)
        self.at = (self.children_s(), self.busy_s(), self.containers_s())

    def poll(self):
        self.polls += 1
        if self.polls % 10:
            return
        for pid, ticks in self.shims.items():
            now = proc_ticks(pid, children=False)
            if now is not None:
                ticks[1] = now
        new = [int(e) for e in os.listdir("/proc") if e.isdigit() and int(e) > self.seen]
        for pid in new:
            try:
                if Path(f"/proc/{pid}/comm").read_text().startswith("containerd-shim"):
                    self.shims[pid] = [0, proc_ticks(pid, children=False) or 0]
            except OSError:
                pass
        self.seen = max([self.seen, *new])

    def stop(self):
        self.polls = 9
        self.poll()
        children, busy, containers = self.at
        daemons = sum((proc_ticks(pid) or start) - start for pid, start in self.daemons.items() if start is not None)
        shims = sum(last - first for first, last in self.shims.values() if first is not None and last is not None)
        self.result = {
            "orchestrator_tree_s": self.children_s() - children,
            "docker_daemons_s": (daemons + shims) / TICK,
            "containers_s": self.containers_s() - containers,
            "machine_busy_s": self.busy_s() - busy,
        }
        self.result["cpu_s"] = sum(self.result[k] for k in ["orchestrator_tree_s", "docker_daemons_s", "containers_s"])


def spread(values):
    values = sorted(values)
    return {"min": values[0], "median": statistics.median(values), "max": values[-1], "n": len(values)}


# --- images and containers ------------------------------------------------------------------------


class Docker:
    """The images this run builds and every container made from them; all removed at the end."""

    def __init__(self, tag):
        self.tag = tag
        self.images = []

    def build(self, dockerfile, name, base):
        ref = f"{name}:{self.tag}"
        sh("docker", "build", "-q", "--build-arg", f"BASE={base}", "-t", ref, "-f",
           BENCH / "image" / dockerfile, BENCH / "image")
        self.images.append(ref)
        return ref

    def sweep(self):
        """Removes the containers of this run's images (others on the engine are left alone)."""
        for ref in self.images:
            ids = sh("docker", "ps", "-aq", "--filter", f"ancestor={ref}", check=False).split()
            if ids:
                sh("docker", "rm", "-f", *ids, check=False)

    def cleanup(self):
        self.sweep()
        for ref in reversed(self.images):
            sh("docker", "rmi", "-f", ref, check=False)


# The stand-in agent as the orchestrators run it for an iteration that does not complete.
AGENT_ARGV = ["claude", "--print", "--verbose", "--output-format", "stream-json", "--model", "bench",
              "--dangerously-skip-permissions"]
WORKSPACE = "/home/agent/workspace"


def floor(image, runs):
    """One container start, one `docker exec … true`, one removal: each timed alone. And the agent
    alone: one `docker exec` of the stand-in `claude` (an implementer prompt on stdin, a new session
    named by --session-id, in the workspace, as the agent user), which is what an iteration of either
    orchestrator runs, without anything the orchestrator adds around it."""
    start, execs, agent, rm = [], [], [], []
    name = f"scbench-floor-{os.getpid()}"
    for _ in range(runs):
        t = time.perf_counter()
        sh("docker", "run", "-d", "--name", name, "--network", "none", image)
        start.append(time.perf_counter() - t)
        for _ in range(5):
            t = time.perf_counter()
            sh("docker", "exec", name, "true")
            execs.append(time.perf_counter() - t)
        sh("docker", "exec", "-u", "agent", name, "mkdir", "-p", WORKSPACE)
        for _ in range(5):
            argv = ["docker", "exec", "-i", "-u", "agent", "-w", WORKSPACE, name, *AGENT_ARGV,
                    "--session-id", str(uuid.uuid4()), "-p", "-"]
            t = time.perf_counter()
            sh(*argv, input="# Role: implementer\nBench issue 1.\n")
            agent.append(time.perf_counter() - t)
        t = time.perf_counter()
        sh("docker", "rm", "-f", name)
        rm.append(time.perf_counter() - t)
    return {"start": spread(start), "exec": spread(execs), "agent_exec": spread(agent), "rm": spread(rm)}


# --- ours: a fake forge, a project, `sandcastle run --once` ---------------------------------------


class Server:
    """A test server started in the background; `line` is the first line matching `pattern`."""

    def __init__(self, argv, pattern, env=None, stdout_only=False):
        self.log = tempfile.NamedTemporaryFile("w+", prefix="scbench-server-", delete=False)
        self.proc = subprocess.Popen(
            [str(a) for a in argv], env=env, stdout=self.log,
            stderr=subprocess.DEVNULL if stdout_only else subprocess.STDOUT,
        )
        for _ in range(200):
            text = Path(self.log.name).read_text()
            match = re.search(pattern, text, re.M)
            if match:
                self.line = match.group(0)
                return
            if self.proc.poll() is not None:
                self.stop()
                raise BenchError(f"{Path(argv[0]).name} exited: {text.strip()[-200:]}")
            time.sleep(0.05)
        self.stop()
        raise BenchError(f"{Path(argv[0]).name} did not start within 10 s")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        os.unlink(self.log.name)


class Ours:
    """A fresh fake forge with `issues` ready-for-agent issues and a project pushed to it."""

    def __init__(self, work, image, issues, concurrency, max_iterations, env, check="[]", mounts=(),
                 tree=None, review=True):
        self.check, self.mounts, self.tree, self.review = check, list(mounts), tree, review
        self.dir = Path(tempfile.mkdtemp(prefix="ours-", dir=work))
        state = self.dir / "forge"
        state.mkdir()
        self.forge = Server(
            [RELEASE / "fake-forge", "--user", USER, "--repo", f"{OWNER}/{NAME}",
             "--token-file", state / "token"],
            r"^forge:\s+\S+", env={**os.environ, "TMPDIR": str(state)},
        )
        self.url = self.forge.line.split()[1]
        self.token = (state / "token").read_text().strip()
        try:
            self.seed(image, issues, concurrency, max_iterations, env)
        except BaseException:
            self.close()
            raise

    def api(self, method, path, body=None):
        request = urllib.request.Request(
            f"{self.url}/api/v1{path}", method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)

    def git(self, *args):
        env = {**os.environ, "BENCH_USER": USER, "BENCH_TOKEN": self.token}
        helper = '!f() { test "$1" = get && printf "username=%s\\npassword=%s\\n" "$BENCH_USER" "$BENCH_TOKEN"; }; f'
        return sh("git", "-c", "credential.helper=", "-c", f"credential.helper={helper}",
                  "-c", "user.name=Bench", "-c", "user.email=bench@localhost", *args, env=env)

    def seed(self, image, issues, concurrency, max_iterations, env):
        self.project = self.dir / "project"
        self.git("clone", "-q", f"{self.url}/{OWNER}/{NAME}.git", self.project)
        sc = self.project / ".sandcastle"
        sc.mkdir()
        (sc / "config.toml").write_text(
            f'repo = "{OWNER}/{NAME}"\nforgeHost = "{self.url}"\nimageName = "{image}"\n'
            f"maxConcurrency = {concurrency}\nmaxIterations = {max_iterations}\n"
            f'idleTimeout = "2m"\npollInterval = "1s"\n\n[commands]\ncheck = {self.check}\n\n'
            f'[sandbox]\nnetwork = "host"\nmemory = "1g"\nmounts = {json.dumps(self.mounts)}\n'
            + ("" if self.review else "\n[review]\nenabled = false\n")
        )
        if self.tree:
            shutil.copytree(self.tree, self.project, dirs_exist_ok=True)
        (sc / ".gitignore").write_text(".env\nlogs/\nrepos/\n")
        lines = {"ANTHROPIC_API_KEY": API_KEY, "FORGEJO_USER": USER, "FORGEJO_TOKEN": self.token, **env}
        (sc / ".env").write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
        self.git("-C", self.project, "add", "-A")
        self.git("-C", self.project, "commit", "-q", "-m", "Set up sandcastle")
        self.git("-C", self.project, "push", "-q", "origin", "HEAD")
        for label in ["ready-for-agent", "in-review", "ready-for-human", "epic", "needs-info"]:
            created = self.api("POST", f"/repos/{OWNER}/{NAME}/labels", {"name": label, "color": "#00aa00"})
            if label == "ready-for-agent":
                ready = created["id"]
        for n in range(1, issues + 1):
            self.api("POST", f"/repos/{OWNER}/{NAME}/issues",
                     {"title": f"Issue {n}", "body": f"Bench issue {n}.", "labels": [ready]})

    def pulls(self):
        return len(self.api("GET", f"/repos/{OWNER}/{NAME}/pulls?state=all&limit=50"))

    def comments(self, issue):
        return len(self.api("GET", f"/repos/{OWNER}/{NAME}/issues/{issue}/comments"))

    def close(self):
        self.forge.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


# The workloads of ours: (issues, maxConcurrency, maxIterations, the agent completes, `check`, the
# reviewer runs). An empty check is no gate, as the peer has none; W1g and W8g run a gate (`true`)
# as a project does; W1n and W8n are like for like with the peer (no gate, no reviewer).
OURS_WORKLOADS = {
    "W1": (1, 1, 1, 1, "[]", True), "W1x": (1, 1, 1, 0, "[]", True), "W10": (1, 1, 10, 0, "[]", True),
    "W8": (8, 4, 1, 1, "[]", True), "W1g": (1, 1, 1, 1, '[["true"]]', True),
    "W8g": (8, 4, 1, 1, '[["true"]]', True), "W1n": (1, 1, 1, 1, "[]", False),
    "W8n": (8, 4, 1, 1, "[]", False),
}


def run_ours(work, docker, image, workload, log, env_extra=None):
    """One timed run of `workload` by ours: (seconds, peak RSS MB, CpuMeter result or None, peak RSS
    MB with its descendants). The forge is checked after."""
    issues, conc, iters, complete, check, review = OURS_WORKLOADS[workload]
    env = {"BENCH_COMPLETE": str(complete), "BENCH_PLAN_MAX": str(issues), **(env_extra or {})}
    ours = Ours(work, image, issues, conc, iters, env, check=check, review=review)
    try:
        argv = [RELEASE / "sandcastle", "-C", ours.project, "run", "--once"]
        if issues == 1:
            argv += ["--issue", "1"]
        # W8 is one pass: the planner plans all eight, the pass works through them four at a time.
        meter = CpuMeter([ours.forge.proc.pid]) if workload == "W8" else None
        tree = ProcessTree()
        total, peak, code = timed(argv, stdout_path=log, meter=meter, tree=tree)
        if code != 0:
            raise BenchError(f"ours {workload}: sandcastle exited {code}; log: {log}")
        expected_pulls = issues if complete else 0
        if ours.pulls() != expected_pulls:
            raise BenchError(f"ours {workload}: {ours.pulls()} pull request(s), expected {expected_pulls}; log: {log}")
        if not complete and ours.comments(1) != 1:
            raise BenchError(f"ours {workload}: issue #1 has no give-up comment; log: {log}")
        return total, peak, meter and meter.result, tree.peak_kb / 1024
    finally:
        ours.close()
        docker.sweep()


# --- the gate: a fresh container per gate, its cache a copy of the base branch's warm one ---------


def gate_crate(work):
    """A small Rust library with only std (so it builds offline): a few modules and their tests,
    what a gate builds and tests. The stand-in agent's commit adds one line to `src/lib.rs`."""
    crate = work / "gate-crate"
    (crate / "src").mkdir(parents=True)
    (crate / "Cargo.toml").write_text(
        '[package]\nname = "gatebench"\nversion = "0.1.0"\nedition = "2021"\n')
    modules = ["tokens", "shapes", "stats", "table", "graph", "text"]
    (crate / "src" / "lib.rs").write_text("".join(f"pub mod {m};\n" for m in modules))
    for m in modules:
        items = []
        for i in range(40):
            items.append(
                f"#[derive(Debug, Clone, PartialEq, Default)]\npub struct Item{i} {{ pub a: u64, pub b: String, pub c: Vec<u32> }}\n"
                f"impl Item{i} {{\n    pub fn new(a: u64) -> Self {{ Item{i} {{ a, b: format!(\"{m}-{{a}}\"), c: (0..(a as u32 % 7)).collect() }} }}\n"
                f"    pub fn score(&self) -> u64 {{ self.a * {i + 1} + self.b.len() as u64 + self.c.iter().map(|&x| x as u64).sum::<u64>() }}\n}}\n"
                f"pub fn total{i}<I: IntoIterator<Item = u64>>(values: I) -> u64 {{ values.into_iter().map(|v| Item{i}::new(v).score()).sum() }}\n")
        tests = "".join(
            f"    #[test]\n    fn total{i}_adds_scores() {{ assert_eq!(total{i}([1u64, 2]), Item{i}::new(1).score() + Item{i}::new(2).score()); }}\n"
            for i in range(40))
        (crate / "src" / f"{m}.rs").write_text(
            "use std::collections::BTreeMap;\n" + "".join(items)
            + "pub fn index(words: &[&str]) -> BTreeMap<String, usize> {\n"
              "    let mut map = BTreeMap::new();\n    for w in words { *map.entry(w.to_string()).or_insert(0) += 1; }\n    map\n}\n"
            + f"#[cfg(test)]\nmod tests {{\n    use super::*;\n{tests}}}\n")
    return crate


def gate_run(work, docker, image, check, iterations, tree, mounts, env, log):
    """One `run --once --issue 1` of ours with `check`: the gate runs' seconds from the run report."""
    ours = Ours(work, image, 1, 1, iterations,
                {"BENCH_COMPLETE": "1", "BENCH_PLAN_MAX": "1", **env},
                check=check, mounts=mounts, tree=tree)
    try:
        argv = [RELEASE / "sandcastle", "-C", ours.project, "run", "--once", "--issue", "1"]
        _, _, code = timed(argv, stdout_path=log)
        if code != 0 or ours.pulls() != 1:
            raise BenchError(f"gate: sandcastle exited {code} with {ours.pulls()} pull request(s); log: {log}")
        reports = sorted((ours.project / ".sandcastle" / "logs").glob("run-*.json"))
        return json.loads(reports[-1].read_text())["work"][0]["gateSeconds"]
    finally:
        ours.close()
        docker.sweep()


# `cargo build` of the crate and `cargo check --all-targets` (its tests compiled, not linked: the test
# image has no C linker; the host's toolchain is mounted at /opt/rust), then: passes
# on the base branch's tip (0 commits past it: the warm-up) unless $1 is `cold-base`, fails on the
# first implementer turn's commit and passes on the second's.
GATE_CHECK = ('[["sh", "-c", "n=$(git rev-list --count origin/main..HEAD); '
              'PATH=/opt/rust/bin:$PATH; cargo build --offline -q && cargo check --offline -q --all-targets && '
              '{ { [ $n -eq 0 ] && [ $1 != cold-base ]; } || [ $n -ge 2 ]; }", "sh", "%s"]]')


def persistent_build(image, crate, mounts, runs):
    """The baseline: the gate's `cargo build` and `cargo check --all-targets` in one persistent container that built the crate
    once already, after the same one-line change to `src/lib.rs`: seconds of each."""
    name = f"scbench-persistent-{os.getpid()}"
    volumes = [a for m in mounts for a in ("-v", f"{m}:ro")]
    sh("docker", "run", "-d", "--name", name, "--network", "none", *volumes,
       "--entrypoint", "sleep", image, "infinity")
    try:
        sh("docker", "cp", f"{crate}/.", f"{name}:/crate")
        build = ("cd /crate && PATH=/opt/rust/bin:$PATH; "
                 "cargo build --offline -q && cargo check --offline -q --all-targets")
        sh("docker", "exec", "-u", "0", name, "sh", "-c", build)
        seconds = []
        for _ in range(runs):
            edit = "printf 'pub const BENCH_EDIT_%s: u32 = 1;\\n' \"$(date +%s%N)\" >> /crate/src/lib.rs"
            sh("docker", "exec", "-u", "0", name, "sh", "-c", edit)
            t = time.perf_counter()
            sh("docker", "exec", "-u", "0", name, "sh", "-c", build)
            seconds.append(time.perf_counter() - t)
        return seconds
    finally:
        sh("docker", "rm", "-f", name, check=False)


def gate_cost(work, docker, image, runs, logs):
    """The gate's cost (--gate): with `check = [["true"]]` (the fresh container, the checkout and
    the removal alone); with `cargo build` and `cargo check --all-targets` of a std-only crate on a commit that changes
    one source file, the second gate of the work (warm: its cache a copy of the base branch's), the
    first (which waits for the warm-up on the base branch's tip), and a gate whose warm-up failed
    (cold); and the same build in a persistent container that built the crate before. Seconds of
    each, min / median / max."""
    sysroot = sh("rustc", "--print", "sysroot").strip()
    mounts = [f"{Path(sysroot).resolve()}:/opt/rust"]
    crate = gate_crate(work)
    edit = {"BENCH_EDIT": "src/lib.rs"}
    empty, first, warm, cold = [], [], [], []
    for i in range(runs):
        print(f"bench: gate run {i + 1}/{runs}", flush=True)
        empty += gate_run(work, docker, image, '[["true"]]', 1, None, [], {}, logs / f"gate-true-{i}.log")
        seconds = gate_run(work, docker, image, GATE_CHECK % "warm-base", 3, crate, mounts, edit,
                           logs / f"gate-warm-{i}.log")
        if len(seconds) != 2:
            raise BenchError(f"gate: expected two gate runs (warm-up and gate, gate), got {seconds}")
        first.append(seconds[0])
        warm.append(seconds[1])
        seconds = gate_run(work, docker, image, GATE_CHECK % "cold-base", 3, crate, mounts, edit,
                           logs / f"gate-cold-{i}.log")
        cold.append(seconds[1])
    persistent = persistent_build(image, crate, mounts, runs)
    return {"true": spread(empty), "cargo_first_with_warm_up": spread(first),
            "cargo_warm": spread(warm), "cargo_cold": spread(cold),
            "cargo_persistent": spread(persistent)}


# --- W8 on one host and on two: a second Docker engine on this machine stands in for a second host


class SecondEngine:
    """A second `dockerd` on its own socket and data root, with `image` loaded: a second host."""

    def __init__(self, image):
        self.root = Path(tempfile.mkdtemp(prefix="scb2-", dir="/tmp"))
        self.host = f"unix://{self.root}/d.sock"
        self.log = open(self.root / "dockerd.log", "w")
        self.proc = subprocess.Popen(
            ["dockerd", "--bridge=none", "--iptables=false", "--ip-forward=false", "--ip-masq=false",
             "-H", self.host, "--data-root", self.root / "data", "--exec-root", self.root / "x",
             "--pidfile", self.root / "d.pid"],
            stdout=self.log, stderr=subprocess.STDOUT,
        )
        env = {**os.environ, "DOCKER_HOST": self.host}
        for _ in range(300):
            if subprocess.run(["docker", "version"], env=env, capture_output=True).returncode == 0:
                break
            if self.proc.poll() is not None:
                raise BenchError(f"the second dockerd exited; log: {self.root / 'dockerd.log'}")
            time.sleep(0.1)
        else:
            self.close()
            raise BenchError("the second dockerd did not answer within 30 s")
        saved = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
        loaded = subprocess.run(["docker", "load", "-q"], stdin=saved.stdout, env=env, capture_output=True)
        saved.wait()
        if saved.returncode or loaded.returncode:
            self.close()
            raise BenchError(f"cannot load {image} into the second engine: {loaded.stderr.decode()[-200:]}")

    def close(self):
        env = {**os.environ, "DOCKER_HOST": self.host}
        ids = sh("docker", "ps", "-aq", env=env, check=False).split()
        if ids:
            sh("docker", "rm", "-f", *ids, env=env, check=False)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        # dockerd leaves its network namespace handle mounted under its exec root.
        for line in Path("/proc/mounts").read_text().splitlines()[::-1]:
            target = line.split()[1]
            if target.startswith(str(self.root)):
                sh("umount", "-l", target, check=False)
        shutil.rmtree(self.root, ignore_errors=True)


def run_w8_hosts(work, docker, image, engines, log):
    """W8 (8 issues, concurrency 4 per host) by one orchestrator per engine in `engines` (a
    DOCKER_HOST, or None for the default), all against one forge, each with its own project:
    the seconds until every issue has its pull request and every orchestrator has stopped."""
    env = {"BENCH_COMPLETE": "1", "BENCH_PLAN_MAX": "8"}
    ours = Ours(work, image, 8, 4, 1, env)
    try:
        projects = [ours.project]
        for n in range(1, len(engines)):
            other = ours.dir / f"project-{n}"
            ours.git("clone", "-q", f"{ours.url}/{OWNER}/{NAME}.git", other)
            for name in ["config.toml", ".env"]:
                shutil.copy(ours.project / ".sandcastle" / name, other / ".sandcastle" / name)
            projects.append(other)
        failures = []

        def host(project, engine):
            env = {**os.environ, **({"DOCKER_HOST": engine} if engine else {})}
            # `run --once` until the forge has every pull request: work the other host claimed
            # is left to it, and may be given up to this one only in a later pass.
            for _ in range(6):
                if ours.pulls() >= 8:
                    return
                _, _, code = timed([RELEASE / "sandcastle", "-C", project, "run", "--once"],
                                   env=env, stdout_path=f"{log}.{Path(project).name}")
                if code != 0:
                    failures.append(f"{Path(project).name} exited {code}")
                    return

        start = time.perf_counter()
        threads = [threading.Thread(target=host, args=(p, e)) for p, e in zip(projects, engines)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - start
        if failures or ours.pulls() != 8:
            raise BenchError(f"W8 on {len(engines)} host(s): {failures or ours.pulls()} ; logs: {log}.*")
        return seconds
    finally:
        ours.close()
        docker.sweep()


def hosts(args, runs):
    """`--hosts`: W8 on one host against W8 on two, written to HOSTS.md and hosts.json."""
    work = Path(tempfile.mkdtemp(prefix="scbench-"))
    docker = Docker(f"bench-{os.getpid()}")
    second = None
    try:
        stub = docker.build("Dockerfile.stub", "scbench-stub", BASE_IMAGE)
        print("bench: a second Docker engine, as a second host", flush=True)
        second = SecondEngine(stub)
        walls = {}
        for label, engines in [("one host", [None]), ("two hosts", [None, second.host])]:
            times = []
            for i in range(runs):
                print(f"bench: W8 on {label}, run {i + 1}/{runs}", flush=True)
                times.append(run_w8_hosts(work, docker, stub, engines, work / f"w8-{len(engines)}-{i}.log"))
            walls[label] = spread(times)
        result = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": machine(),
            "command": "python3 bench/run.py --hosts" + (f" --runs {args.runs}" if args.runs != 5 else ""),
            "w8_hosts_wall_s": {"one_host": walls["one host"], "two_hosts": walls["two hosts"]},
        }
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "hosts.json").write_text(json.dumps(result, indent=2) + "\n")
        one, two = walls["one host"], walls["two hosts"]
        table = (
            "| W8, 8 issues, maxConcurrency 4 per host | wall s (min / median / max) |\n|---|---|\n"
            f"| one host | {fmt_s(one)} |\n| two hosts (two Docker engines on this machine) | {fmt_s(two)} |\n"
            f"| two hosts / one host (medians) | {two['median'] / one['median']:.2f}× |\n"
        )
        print("\n" + table)
        (args.out / "HOSTS.md").write_text(
            f"# W8 on one host and on two\n\nGenerated by `{result['command']}` on {result['date']}, "
            f"{runs} run(s) each.\n\n- machine: {result['machine']}\n\n{table}\n"
            "Each host is one `sandcastle` with its own project directory against the same forge, each "
            "running `run --once` until every issue has its pull request; the second host's sandboxes run "
            "on a second `dockerd` on this machine (`DOCKER_HOST`). The hosts share this machine's cores, "
            "so on a CPU-bound machine two hosts cannot be faster than one; on two machines each host "
            "brings its own. Claims on the forge keep them from working on the same issue.\n"
        )
        print(f"bench: wrote {args.out / 'HOSTS.md'} and {args.out / 'hosts.json'}")
    except BenchError as e:
        die(str(e))
    finally:
        if second:
            second.close()
        docker.cleanup()
        shutil.rmtree(work, ignore_errors=True)


# --- the peer: bench/peer/drive.mjs -------------------------------------------------------------


def run_peer(work, docker, image, workload, log, env_extra=None):
    """One timed run of `workload` by the peer: as `run_ours`."""
    issues, conc, iters, complete = {
        "W1": (1, 1, 1, 1), "W10": (1, 1, 10, 0), "W8": (8, 4, 1, 1),
    }[workload]
    repo = Path(tempfile.mkdtemp(prefix="peer-", dir=work))
    try:
        home = repo / "home"  # the peer keeps captured sessions under ~/.claude
        home.mkdir()
        repo = repo / "repo"
        repo.mkdir()
        sh("git", "init", "-q", "-b", "main", repo)
        sh("git", "-C", repo, "-c", "user.name=Bench", "-c", "user.email=bench@localhost",
           "commit", "-q", "--allow-empty", "-m", "init")
        argv = ["node", PEER / "drive.mjs", "--repo", repo, "--image", image, "--issues", issues,
                "--concurrency", conc, "--max-iterations", iters,
                "--env", f"ANTHROPIC_API_KEY={API_KEY}", "--env", f"BENCH_COMPLETE={complete}"]
        for key, value in (env_extra or {}).items():
            argv += ["--env", f"{key}={value}"]
        meter = CpuMeter() if workload == "W8" else None
        tree = ProcessTree()
        seconds, rss, code = timed(argv, cwd=PEER, env={**os.environ, "HOME": str(home)}, stdout_path=log,
                                   meter=meter, tree=tree)
        if code != 0:
            raise BenchError(f"peer {workload}: drive.mjs exited {code}; log: {log}")
        text = Path(log).read_text()
        want = f"{iters} iteration(s), signal {'yes' if complete else 'no'}"
        if text.count(want) != issues:
            raise BenchError(f"peer {workload}: expected {issues} line(s) '{want}'; log: {log}")
        return seconds, rss, meter and meter.result, tree.peak_kb / 1024
    finally:
        shutil.rmtree(repo.parent, ignore_errors=True)
        docker.sweep()


# --- start-up -------------------------------------------------------------------------------------


def startup(work, runs):
    def best(argv, cwd=None, n=runs):
        times = []
        for _ in range(n):
            t = time.perf_counter()
            if subprocess.run([str(a) for a in argv], cwd=cwd, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode:
                raise BenchError(f"`{' '.join(map(str, argv))}` failed")
            times.append(time.perf_counter() - t)
        return spread(times)

    project = Path(tempfile.mkdtemp(prefix="config-", dir=work))
    (project / ".sandcastle").mkdir()
    (project / ".sandcastle" / "config.toml").write_text(
        'repo = "bench/proj"\nforgeHost = "http://127.0.0.1:3000"\n')
    peer_main = PEER / "node_modules" / "@ai-hero" / "sandcastle" / "dist" / "main.js"
    return {
        "ours_help": best([RELEASE / "sandcastle", "--help"]),
        "ours_load_config": best([RELEASE / "load-config", project / ".sandcastle" / "config.toml"]),
        "peer_import": best(["node", "-e", 'await import("@ai-hero/sandcastle")', "--input-type=module"],
                            cwd=PEER, n=max(5, runs // 3)),
        "peer_help": best(["node", peer_main, "--help"], cwd=PEER, n=max(5, runs // 3)),
        "floor_true": best(["true"]),
        "floor_node": best(["node", "-e", "0"], n=max(5, runs // 3)),
    }


# --- the report -----------------------------------------------------------------------------------


def fmt_s(s):
    return f"{s['min']:.2f} / {s['median']:.2f} / {s['max']:.2f}" if s else "—"


def ratio(a, b):
    return f"{a / b:.2f}×" if a is not None and b else "—"


def med(d, *path):
    if d is None:
        return None
    for key in path:
        d = d.get(key) if isinstance(d, dict) else None
        if d is None:
            return None
    return d["median"]


def report(r):
    w = r["walls"]
    per = r["per_iteration_ms"]
    fl = r["floor"]
    exec_s, start_s, rm_s = fl["exec"]["median"], fl["start"]["median"], fl["rm"]["median"]
    floor_of = {"W1": start_s + exec_s + rm_s, "W1x": start_s + exec_s + rm_s,
                "W10": start_s + 10 * exec_s + rm_s, "W8": 2 * (start_s + exec_s + rm_s)}
    floor_of["W1g"], floor_of["W8g"] = floor_of["W1"], floor_of["W8"]
    floor_of["W1n"], floor_of["W8n"] = floor_of["W1"], floor_of["W8"]
    rows = []
    for wl, what in [("W1", "one issue, one completing iteration"),
                     ("W1x", "one issue, one iteration, not completing"),
                     ("W10", "one issue, 10 iterations, never completing"),
                     ("W8", "8 issues, concurrency 4"),
                     ("W1g", "W1 with a gate (`check = [[\"true\"]]`), as a project runs it"),
                     ("W8g", "W8 with a gate, as a project runs it"),
                     ("W1n", "W1 like for like: no gate, no reviewer"),
                     ("W8n", "W8 like for like: no gate, no reviewer")]:
        o, p, k = w["ours"].get(wl), w["peer"].get(wl), w["peer_sigkill"].get(wl)
        if o is None:
            continue
        rows.append(f"| {wl} wall s (min / median / max) — {what} | {fmt_s(o)} | {fmt_s(p)} | {fmt_s(k)} | "
                    f"{ratio(med(o), med(p))} | {ratio(med(o), med(k))} | {floor_of[wl]:.2f} |")
    rows.append(f"| per-iteration overhead ms, (W10 − W1x) / 9 | {per['ours']:.0f} | "
                f"{fmt_opt(per['peer'], 0)} | {per['peer_sigkill']:.0f} | {ratio(per['ours'], per['peer'])} | "
                f"{ratio(per['ours'], per['peer_sigkill'])} | {per['floor_exec']:.0f} (one exec) |")
    agent = per.get("floor_agent_exec")
    if agent is not None:
        def added(x):
            return f"{x - agent:.0f}" if x is not None else "—"
        rows.append(f"| per-iteration ms the orchestrator adds: overhead − one `docker exec` of the stand-in agent "
                    f"alone ({agent:.0f} ms) | {added(per['ours'])} | {added(per['peer'])} | "
                    f"{added(per['peer_sigkill'])} | | | {agent:.0f} (agent exec) |")
    w8 = r["w8_wall_s"]
    rows.append(f"| W8 ideal s (8 × W1 / 4) | {w8['ideal']:.2f} | {fmt_opt(w8.get('peer_ideal'))} | "
                f"{fmt_opt(w8.get('peer_sigkill_ideal'))} | W8/ideal: ours {w8['ours'] / w8['ideal']:.2f}× | "
                f"peer SIGKILL {ratio(w8.get('peer_sigkill'), w8.get('peer_sigkill_ideal'))} | |")
    wc = r.get("w8_cpu") or {}
    if wc.get("ours"):
        def cpu_of(side):
            c = wc.get(side)
            return f"{c['cpu_s']:.1f} ({c['machine_busy_s']:.1f})" if c else "—"

        def ideal_of(side):
            c = wc.get(side)
            return f"{c['machine_ideal_s']:.2f}" if c else "—"

        def over(side):
            c = wc.get(side)
            return ratio(w8.get(side), c and c["machine_ideal_s"])
        rows.append(f"| W8 CPU-seconds of the work (machine-wide busy), median | {cpu_of('ours')} | "
                    f"{cpu_of('peer')} | {cpu_of('peer_sigkill')} | | | |")
        rows.append(f"| W8 machine-bound ideal s, max(8 × W1 / 4, CPU-s / {wc['ours']['cores']} cores) | "
                    f"{ideal_of('ours')} | {ideal_of('peer')} | {ideal_of('peer_sigkill')} | "
                    f"W8/machine ideal: ours {over('ours')} | peer SIGKILL {over('peer_sigkill')} | |")
    rss = r["peak_rss_mb"]
    rows.append(f"| peak RSS MB of the orchestrator process (max over W1–W8) | {rss['ours']:.1f} | "
                f"{rss['peer']:.1f} | {rss['peer_sigkill']:.1f} | {ratio(rss['ours'], rss['peer'])} | "
                f"{ratio(rss['ours'], rss['peer_sigkill'])} | |")
    tree = r.get("peak_rss_with_children_mb")
    if tree:
        rows.append(f"| peak RSS MB with its children (sampled every 5 ms) | {tree['ours']:.1f} | "
                    f"{tree['peer']:.1f} | {tree['peer_sigkill']:.1f} | {ratio(tree['ours'], tree['peer'])} | "
                    f"{ratio(tree['ours'], tree['peer_sigkill'])} | |")
    tree_w1 = r.get("peak_rss_with_children_w1_mb")
    if tree_w1:
        rows.append(f"| peak RSS MB with its children in W1 (one issue) | {tree_w1['ours']:.1f} | "
                    f"{tree_w1['peer']:.1f} | {tree_w1['peer_sigkill']:.1f} | "
                    f"{ratio(tree_w1['ours'], tree_w1['peer'])} | {ratio(tree_w1['ours'], tree_w1['peer_sigkill'])} | |")
    st = r["startup"]
    rows.append(f"| start-up ms: `sandcastle --help` vs `node dist/main.js --help` | "
                f"{med(st, 'ours_help') * 1000:.1f} | {med(st, 'peer_help') * 1000:.0f} | | "
                f"{ratio(med(st, 'ours_help'), med(st, 'peer_help'))} | | {med(st, 'floor_true') * 1000:.1f} (`true`) |")
    rows.append(f"| start-up ms: `load-config` vs `import(\"@ai-hero/sandcastle\")` | "
                f"{med(st, 'ours_load_config') * 1000:.1f} | {med(st, 'peer_import') * 1000:.0f} | | "
                f"{ratio(med(st, 'ours_load_config'), med(st, 'peer_import'))} | | "
                f"{med(st, 'floor_node') * 1000:.0f} (`node -e 0`) |")
    real = r.get("real")
    if real:
        o, k = real.get("ours"), real.get("peer_sigkill")
        rows.append(f"| W1 real Claude Code + scripted API, wall s | {fmt_s(o)} | — | {fmt_s(k)} | — | "
                    f"{ratio(med(o), med(k))} | {floor_of['W1']:.2f} |")
    header = ("| workload | ours | peer (shared image) | peer (STOPSIGNAL SIGKILL image) | ours/peer | "
              "ours/peer SIGKILL | Docker floor |\n|---|---|---|---|---|---|---|")
    table = header + "\n" + "\n".join(rows)
    return table + "\n\n" + goals_table(r) if "peak_rss_with_children_mb" in r else table


def goals(r):
    """Issue 30's goals, each as (figure, ours, what it is held against, the value, the goal, the
    limit): met when the value is at most the limit. A figure this run did not measure is None."""
    w, per, fl = r["walls"], r["per_iteration_ms"], r["floor"]
    ours = w["ours"]

    def over_ideal(wl, one):
        return med(ours, wl) / (8 * med(ours, one) / 4) if wl in ours and one in ours else None

    kill = med(w["peer_sigkill"], "W1")
    w8_peer = r["w8_wall_s"].get("peer_sigkill"), r["w8_wall_s"].get("peer_sigkill_ideal")
    return [
        ("per-iteration overhead, (W10 − W1x) / 9", f"{per['ours']:.0f} ms",
         f"one `docker exec … true`, {per['floor_exec']:.0f} ms", per["ours"] / per["floor_exec"], "≤ 0.5×", 0.5),
        ("per-iteration overhead", f"{per['ours']:.0f} ms",
         f"the peer on its SIGKILL image, {per['peer_sigkill']:.0f} ms",
         per["ours"] / per["peer_sigkill"] if per["peer_sigkill"] else None, "≤ 0.05×", 0.05),
        ("W1: one issue, one completing iteration, no gate", f"{med(ours, 'W1'):.2f} s",
         f"the peer on its SIGKILL image, {kill:.2f} s" if kill else "the peer (not run)",
         med(ours, "W1") / kill if kill else None, "≤ 1.0×", 1.0),
        ("W1n: W1 like for like (no reviewer), vs the peer", f"{med(ours, 'W1n'):.2f} s" if "W1n" in ours else "—",
         f"the peer on its SIGKILL image, {kill:.2f} s" if kill else "the peer (not run)",
         med(ours, "W1n") / kill if kill and "W1n" in ours else None, "≤ 1.0×", 1.0),
        ("W1g: W1 with a commit (implementer, gate, reviewer, push, pull request)",
         f"{med(ours, 'W1g'):.2f} s" if "W1g" in ours else "—", "—",
         med(ours, "W1g"), "≤ 1.4 s", 1.4),
        ("peak RSS of the orchestrator process", f"{r['peak_rss_mb']['ours']:.1f} MB",
         f"the peer's {r['peak_rss_mb']['peer_sigkill']:.1f} MB", r["peak_rss_mb"]["ours"], "≤ 7 MB", 7),
        ("peak RSS with its children", f"{r['peak_rss_with_children_mb']['ours']:.1f} MB",
         f"the peer's {r['peak_rss_with_children_mb']['peer_sigkill']:.1f} MB",
         r["peak_rss_with_children_mb"]["ours"], "≤ 12 MB", 12),
        *([("peak RSS with its children in W1 (one issue, as the peer's one worktree)",
            f"{r['peak_rss_with_children_w1_mb']['ours']:.1f} MB",
            f"the peer's {r['peak_rss_with_children_w1_mb']['peer_sigkill']:.1f} MB",
            r["peak_rss_with_children_w1_mb"]["ours"], "≤ 12 MB", 12)]
          if "peak_rss_with_children_w1_mb" in r else []),
        ("W8g / ideal (8 × W1g / 4), as the project runs it (gate, reviewer)",
         f"{med(ours, 'W8g'):.2f} s" if "W8g" in ours else "—", "8 × W1g / 4",
         over_ideal("W8g", "W1g"), "≤ 1.3×", 1.3),
        ("W8 / ideal (8 × W1 / 4), as the project runs it without a gate (reviewer)",
         f"{med(ours, 'W8'):.2f} s",
         f"8 × W1 / 4; the peer SIGKILL {ratio(*w8_peer)}", over_ideal("W8", "W1"), "≤ 1.3×", 1.3),
        ("W8n / ideal (8 × W1n / 4), like for like (no assessor, no gate, no reviewer)",
         f"{med(ours, 'W8n'):.2f} s" if "W8n" in ours else "—", "8 × W1n / 4",
         over_ideal("W8n", "W1n"), "≤ 1.15×", 1.15),
    ]


def goals_table(r):
    rows = []
    for figure, value, against, x, goal, limit in goals(r):
        shown = "—" if x is None else (f"{x:.2f}×" if goal.endswith("×") else f"{x:.1f}")
        met = "—" if x is None else ("yes" if x <= limit else "no")
        rows.append(f"| {figure} | {value} | {against} | {shown} | {goal} | {met} |")
    return ("| issue 30's goal | ours | against | value | goal | met |\n|---|---|---|---|---|---|\n"
            + "\n".join(rows))


def fmt_opt(x, digits=2):
    return f"{x:.{digits}f}" if x is not None else "—"


# How long one container under runsc may take to run `uname -r` before it counts as hung.
RUNSC_TIMEOUT = 60


def runsc(image, runtime):
    """Issue 32: one container of `image` under gVisor's runsc (registered as `runtime`) through
    Docker, bounded in time and removed whatever happened, with the kernel it ran on. The engine
    must know the runtime (a manual step: it changes the engine's configuration, which a benchmark
    should not)."""
    runtimes = json.loads(sh("docker", "info", "--format", "{{json .Runtimes}}"))
    if runtime not in runtimes:
        die(f'the engine does not know the runtime {runtime}: apt-get install runsc, add '
            f'{{"runtimes": {{"{runtime}": {{"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none", "--host-uds=open"]}}}}}} '
            'to /etc/docker/daemon.json (merged with what is there), and reload dockerd '
            '(systemctl reload docker, or SIGHUP)')
    version = sh("runsc", "--version", check=False).splitlines()[:1] or ["unknown"]
    name = f"sandcastle-bench-runsc-{os.getpid()}"
    started = time.monotonic()
    try:
        done = subprocess.run(
            ["docker", "run", "--pull", "never", "--name", name, "--runtime", runtime, "--network", "none",
             "--entrypoint", "uname", image, "-r"],
            capture_output=True, text=True, timeout=RUNSC_TIMEOUT)
        said = (done.stdout.strip() or done.stderr.strip()).splitlines()[:1] or ["nothing"]
        outcome = (f"{'ran' if done.returncode == 0 else f'failed ({done.returncode})'} in "
                   f"{time.monotonic() - started:.1f} s; it said: {said[0]}")
    except subprocess.TimeoutExpired:
        outcome = f"hung: no exit within {RUNSC_TIMEOUT} s"
    finally:
        try:
            removed = subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=120)
            left = "" if removed.returncode == 0 else f" (docker rm -f: {removed.stderr.decode().strip()})"
        except subprocess.TimeoutExpired:
            left = f" (docker rm -f {name} did not return within 120 s: remove it by hand)"
    print(f"bench: {runtime}, runsc ({version[0]}) with {runtimes[runtime].get('runtimeArgs', [])}, under Docker ({sh('docker', 'version', '--format', '{{.Server.Version}}').strip()})"
          f" on Linux {platform.release()}: {outcome}{left}", flush=True)


def versions():
    def first(*argv):
        try:
            return sh(*argv).strip().splitlines()[0]
        except (BenchError, IndexError, OSError):
            return "unknown"
    peer = json.loads((PEER / "node_modules" / "@ai-hero" / "sandcastle" / "package.json").read_text())["version"]
    return {
        "sandcastle": first(RELEASE / "sandcastle", "--version"),
        "sandcastle_commit": first("git", "-C", ROOT, "rev-parse", "--short", "HEAD"),
        "peer": f"@ai-hero/sandcastle {peer}",
        "node": first("node", "--version"),
        "docker": first("docker", "version", "--format", "client {{.Client.Version}}, engine {{.Server.Version}}"),
        "claude_code": first("docker", "run", "--rm", "--network", "none", "--entrypoint", "claude",
                             BASE_IMAGE, "--version"),
    }


def machine():
    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = int(Path("/proc/meminfo").read_text().split()[1]) // 1024 // 1024
    return f"{os.cpu_count()} cores ({cpu}), {mem} GiB, {platform.system()} {platform.release()}"


# --- main -----------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(
        prog="bench/run.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="2 runs per workload, no W10 of the peer on the shared image (10 s "
                             "`docker stop` per iteration), one run with the real Claude Code")
    parser.add_argument("--runs", type=int, default=5, help="runs per workload (default 5; --quick: 2)")
    parser.add_argument("--no-real", action="store_true", help="skip the real Claude Code workload")
    parser.add_argument("--hosts", action="store_true",
                        help="only W8 on one host against W8 on two (a second dockerd on this machine), "
                             "written to HOSTS.md and hosts.json")
    parser.add_argument("--gate", action="store_true",
                        help="only the gate's cost, cold and warm build cache, written to gate.json")
    parser.add_argument("--runsc", nargs="?", const="runsc", metavar="RUNTIME",
                        help="only one container under gVisor's runsc, as the engine knows it "
                             "(default name runsc), bounded and removed; prints the result and the kernel")
    parser.add_argument("--out", type=Path, default=BENCH,
                        help="where RESULTS.md and results.json go (default bench/)")
    args = parser.parse_args()
    runs = 2 if args.quick and args.runs == 5 else args.runs
    if runs < 1:
        die("--runs wants an integer >= 1")
    command = "python3 bench/run.py" + (" --quick" if args.quick else "") + (
        f" --runs {args.runs}" if args.runs != 5 else "") + (" --no-real" if args.no_real else "")

    if not shutil.which("docker"):
        die("docker not found; install Docker's client and start the engine (checks/docker/start-dockerd.sh)")
    if args.runsc:
        return runsc(BASE_IMAGE, args.runsc)
    if not shutil.which("node") or not shutil.which("npm"):
        die("node and npm not found; apt-get install nodejs npm")
    print("bench: cargo build --release --workspace --bins", flush=True)
    if subprocess.run(["cargo", "build", "--release", "-q", "--workspace", "--bins"], cwd=ROOT).returncode:
        die("cargo build --release failed (above)")
    if "SANDCASTLE_TEST_IMAGE" not in os.environ:
        print(f"bench: {BASE_IMAGE}, the test image with the release binaries", flush=True)
        env = {**os.environ, "SANDCASTLE_BIN_DIR": str(RELEASE)}
        if subprocess.run(["bash", ROOT / "checks" / "docker" / "build-test-image.sh", BASE_IMAGE],
                          env=env, stdout=subprocess.DEVNULL).returncode:
            die("building the bench's image failed (above)")
    if subprocess.run(["docker", "image", "inspect", BASE_IMAGE], capture_output=True).returncode:
        die(f"the image {BASE_IMAGE} is missing; build it with bash checks/docker/build-test-image.sh")
    if args.hosts:
        return hosts(args, runs)
    if args.gate:
        return gate(args, runs)
    if not (PEER / "node_modules" / "@ai-hero" / "sandcastle").is_dir():
        print("bench: npm ci in bench/peer (the peer, pinned by package-lock.json)", flush=True)
        if subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=PEER).returncode:
            die("npm ci in bench/peer failed (above)")

    work = Path(tempfile.mkdtemp(prefix="scbench-"))
    logs = work / "logs"
    logs.mkdir()
    docker = Docker(f"bench-{os.getpid()}")
    interrupted = []
    signal.signal(signal.SIGTERM, lambda *_: (interrupted.append(1), (_ for _ in ()).throw(KeyboardInterrupt)))
    started = time.time()
    try:
        stub = docker.build("Dockerfile.stub", "scbench-stub", BASE_IMAGE)
        stub_kill = docker.build("Dockerfile.sigkill", "scbench-stub-sigkill", stub)
        real_kill = docker.build("Dockerfile.sigkill", "scbench-real-sigkill", BASE_IMAGE)
        walls = {"ours": {}, "peer": {}, "peer_sigkill": {}}
        rss = {"ours": 0.0, "peer": 0.0, "peer_sigkill": 0.0}
        rss_tree = {"ours": 0.0, "peer": 0.0, "peer_sigkill": 0.0}  # with descendants
        # W1 alone: one issue, what the peer's one worktree and container do (W8 adds four works'
        # git processes at once, the peer has none of those).
        rss_tree_w1 = {"ours": 0.0, "peer": 0.0, "peer_sigkill": 0.0}
        cpu = {"ours": [], "peer": [], "peer_sigkill": []}  # W8 runs' CpuMeter results
        failures = []

        def measure(side, workload, fn, image, n, env=None):
            times = []
            for i in range(n):
                log = logs / f"{side}-{workload}-{i}.log"
                print(f"bench: {side} {workload} run {i + 1}/{n}", flush=True)
                try:
                    seconds, peak, used, peak_tree = fn(work, docker, image, workload, log, env)
                except BenchError as e:
                    # A run that fails (the peer has timed out under load here) is said, and run
                    # again once; results.json counts them.
                    tail = " | ".join(Path(log).read_text().strip().splitlines()[-3:]) if Path(log).exists() else ""
                    print(f"bench: {e}: {tail[-300:]}; running it again", flush=True)
                    failures.append(f"{side} {workload}: {e}: {tail[-300:]}")
                    seconds, peak, used, peak_tree = fn(work, docker, image, workload, log, env)
                times.append(seconds)
                if env is None:
                    rss[side] = max(rss[side], peak)
                    rss_tree[side] = max(rss_tree[side], peak_tree)
                    if workload == "W1":
                        rss_tree_w1[side] = max(rss_tree_w1[side], peak_tree)
                if used and env is None:
                    cpu[side].append(used)
            return spread(times)

        for wl in ["W1", "W1x", "W10", "W8", "W1g", "W8g", "W1n", "W8n"]:
            walls["ours"][wl] = measure("ours", wl, run_ours, stub, runs)
        for wl in ["W1", "W10", "W8"]:
            walls["peer_sigkill"][wl] = measure("peer_sigkill", wl, run_peer, stub_kill, runs)
        # The peer does one container per iteration, and `docker stop` waits 10 s for each on the
        # shared image: its W10 there takes minutes, so it runs a fifth as often (--quick: never).
        walls["peer"]["W1"] = measure("peer", "W1", run_peer, stub, runs)
        walls["peer"]["W8"] = measure("peer", "W8", run_peer, stub, runs)
        if not args.quick:
            walls["peer"]["W10"] = measure("peer", "W10", run_peer, stub, max(1, runs // 5))
        # For the peer one iteration is the same work whether it completes or not: W1x is its W1.
        for side in ["peer", "peer_sigkill"]:
            walls[side]["W1x"] = walls[side]["W1"]

        print("bench: the Docker floor", flush=True)
        fl = floor(stub, runs)
        print("bench: start-up", flush=True)
        st = startup(work, 30 if runs >= 5 else 10)

        real = None
        if not args.no_real:
            model = Server([RELEASE / "fake-anthropic", BENCH / "scenario.json"], r"^http://\S+",
                           stdout_only=True)
            try:
                env = {"ANTHROPIC_BASE_URL": model.line}
                n = 1 if args.quick else min(runs, 3)
                real = {"ours": measure("ours", "W1", run_ours, real_kill, n, env),
                        "peer_sigkill": measure("peer_sigkill", "W1", run_peer, real_kill, n, env)}
            finally:
                model.stop()

        def per_iter(side):
            w = walls[side]
            if "W10" not in w:
                return None
            return (w["W10"]["median"] - w["W1x"]["median"]) / 9 * 1000

        ideal = 8 * walls["ours"]["W1"]["median"] / 4
        cores = os.cpu_count()

        def w8_cpu(side):
            """The median over W8 runs of each CpuMeter figure, and the machine-bound ideal:
            max(8 × W1 / 4, CPU-seconds of the W8 work / cores)."""
            if not cpu[side]:
                return None
            figures = {key: statistics.median(run[key] for run in cpu[side]) for key in cpu[side][0]}
            figures["cores"] = cores
            figures["machine_ideal_s"] = max(8 * walls[side]["W1"]["median"] / 4, figures["cpu_s"] / cores)
            return figures
        result = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": machine(),
            "versions": versions(),
            "command": command,
            "runs": runs,
            "per_iteration_ms": {"ours": per_iter("ours"), "peer": per_iter("peer"),
                                 "peer_sigkill": per_iter("peer_sigkill"),
                                 "floor_exec": fl["exec"]["median"] * 1000,
                                 "floor_agent_exec": fl["agent_exec"]["median"] * 1000},
            "peak_rss_mb": rss,
            "peak_rss_with_children_mb": rss_tree,
            "peak_rss_with_children_w1_mb": rss_tree_w1,
            "startup_ms": {"ours": med(st, "ours_help") * 1000, "peer": med(st, "peer_import") * 1000,
                           "ours_load_config": med(st, "ours_load_config") * 1000,
                           "peer_help": med(st, "peer_help") * 1000},
            "w8_wall_s": {"ours": walls["ours"]["W8"]["median"], "peer": walls["peer"]["W8"]["median"],
                          "peer_sigkill": walls["peer_sigkill"]["W8"]["median"], "ideal": ideal,
                          "peer_ideal": 8 * walls["peer"]["W1"]["median"] / 4,
                          "peer_sigkill_ideal": 8 * walls["peer_sigkill"]["W1"]["median"] / 4},
            "w8_cpu": {side: w8_cpu(side) for side in cpu},
            "walls": walls,
            "floor": fl,
            "startup": st,
            "real": real,
            "failed_runs_repeated": failures,
            "elapsed_s": round(time.time() - started),
        }
        table = report(result)
        print("\n" + table)
        write(args.out, result, table)
        print(f"\nbench: wrote {args.out / 'RESULTS.md'} and {args.out / 'results.json'} "
              f"({result['elapsed_s']} s)")
    except BenchError as e:
        die(str(e))
    except KeyboardInterrupt:
        die("interrupted; containers and images of this run removed")
    finally:
        docker.cleanup()
        shutil.rmtree(work, ignore_errors=True)


def gate(args, runs):
    """--gate: gate_cost on the stand-in image, written to gate.json and printed."""
    work = Path(tempfile.mkdtemp(prefix="scbench-"))
    logs = work / "logs"
    logs.mkdir()
    docker = Docker(f"bench-{os.getpid()}")
    try:
        stub = docker.build("Dockerfile.stub", "scbench-stub", BASE_IMAGE)
        result = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                  "runs": runs, "machine": machine(), "gate_s": gate_cost(work, docker, stub, runs, logs)}
    except BenchError as e:
        die(str(e))
    finally:
        docker.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gate.json").write_text(json.dumps(result, indent=2) + "\n")
    for name, s in result["gate_s"].items():
        print(f"gate {name:24} {fmt_s(s)}")


def failed_note(result):
    failed = result.get("failed_runs_repeated") or []
    if not failed:
        return ""
    return "\nRuns that failed and were run again (not counted):\n" + "".join(f"- {f}\n" for f in failed)


# The headline figures a run keeps of the run before it, as `before` in results.json.
HEADLINE = ["date", "command", "per_iteration_ms", "peak_rss_mb", "peak_rss_with_children_mb",
            "peak_rss_with_children_w1_mb", "startup_ms",
            "w8_wall_s", "w8_cpu"]


def write(out, result, table):
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    if path.exists():
        previous = json.loads(path.read_text())
        result["before"] = {key: previous[key] for key in HEADLINE + ["versions"] if key in previous}
    path.write_text(json.dumps(result, indent=2) + "\n")
    v = result["versions"]
    md = out / "RESULTS.md"
    previous = md.read_text() if md.exists() else ""
    # Hand-written sections (before/after of each optimisation) stay below the generated part.
    keep = previous.split("<!-- end of generated part -->", 1)[1] if "<!-- end of generated part -->" in previous else ""
    md.write_text(f"""# Benchmark results

Generated by `{result['command']}` (bench/run.py) on {result['date']}, {result['runs']} run(s) per
workload, in {result['elapsed_s']} s.

- machine: {result['machine']}
- ours: sandcastle {v['sandcastle']} (commit {v['sandcastle_commit']}, release build)
- peer: {v['peer']} (bench/peer/package-lock.json), Node {v['node']}
- Docker: {v['docker']}; Claude Code in the image: {v['claude_code']}

{table}
{failed_note(result)}
Times are wall seconds from process start to exit (min / median / max); ratios use medians. The
floor is the same work done by Docker alone: one `docker run -d`, one `docker exec … true` per agent
iteration and one `docker rm -f`, each timed alone (W8: two such sequences, concurrency 4). Peak RSS
is the orchestrator process's own high-water mark (VmHWM, sampled every 5 ms; the `docker` CLI it
spawns is not counted): `sandcastle` for ours, `node drive.mjs` for the peer; "with its
children" is the largest sum of its and its living descendants' resident sets at one 5 ms sample.
W1g and W8g are ours with a gate (`check = [["true"]]`), as a project runs them; the other
workloads have none, as the peer has none. W1n and W8n are like for like with the peer: no gate,
and no reviewer (`[review] enabled = false`), so one agent turn per issue as the peer runs. The second table holds issue 30's goals, each against
its limit.

The agent-exec floor is one `docker exec` of the stand-in `claude` alone (as the agent user, in the
workspace, an implementer prompt on stdin, a new session), timed alone: what an iteration of either
orchestrator runs at the least. Per-iteration overhead minus it is what the orchestrator adds per
iteration (ours: the cleanup and the hand-out inside the same exec, and the transcript, the state
file and the progress line on the host; the peer: a container per iteration). W8's machine-bound
ideal is max(8 × W1 / 4, CPU-seconds of the W8 work / cores): the issue's ideal, 8 × W1 / 4, assumes
four issues run at once as fast as one alone, which the cores cannot do when the work needs more CPU
than they have. The CPU-seconds (bench/run.py `CpuMeter`, median over the W8 runs) are those of the
orchestrator and every process it reaps (the `docker` CLI, git), the fake forge, dockerd, containerd,
the containerd shims and all containers (the `docker` cpuacct cgroup); the daemons and the cgroup are
shared with anything else using the engine at the time, so this is an upper bound when other work
runs; the machine's whole busy time over the same runs is in brackets. "W8/ideal" uses the issue's
ideal, "W8/machine ideal" the machine-bound one.

**What each side does that the other does not.** Ours, per issue: fetches the forge's repository
into its own bare repository, starts one container and makes the agent's checkout inside it from a
bundle, runs every iteration in that container, takes the commits out as a bundle after each turn,
on completion runs the reviewer (an agent turn: W1 is two agent runs for ours and W1x one, one for
the peer; the bench's project has no `[clarify]` table, so no assessor), pushes the branch and opens a labelled pull request on the forge; it gives up with a comment
on the issue after W1x and W10; W8 is one `run --once` pass (a planner turn plans all eight, and the
pass works through them maxConcurrency at a time, starting the next as soon as one finishes). The peer, per issue: makes a git worktree on the host and
bind-mounts it, and starts a new container for every iteration (`docker run`, four set-up
`docker exec`s, the agent, `docker cp` of the session, `docker stop`, `docker rm`); no forge, no
review, no push. On the shared image PID 1 (`sleep infinity`) ignores SIGTERM, so each `docker stop`
of the peer waits 10 s: the "shared image" column shows that; the SIGKILL column is the same image
with `STOPSIGNAL SIGKILL`, which removes that wait. Ours removes containers with `docker rm -f`.
<!-- end of generated part -->{keep}""")


if __name__ == "__main__":
    main()
