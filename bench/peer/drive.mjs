// Drives @ai-hero/sandcastle (the peer) through its public API for bench/run.py: N issues, each one
// `run()` with its Docker sandbox and Claude Code agent on a branch of its own (a git worktree),
// at most C at a time through a semaphore (the peer has no limiter of its own).
//
//   node drive.mjs --repo DIR --image IMAGE [--issues N] [--concurrency C] [--max-iterations M]
//                  [--env NAME=VALUE]...
//
// --env entries go to the agent (Claude Code) of every run. Exits 0 when every run finished, with
// one line per run on stderr; 1 with a one-line error otherwise.
import { run, claudeCode } from "@ai-hero/sandcastle";
import { docker } from "@ai-hero/sandcastle/sandboxes/docker";

const usage =
  "usage: node drive.mjs --repo DIR --image IMAGE [--issues N] [--concurrency C] [--max-iterations M] [--env NAME=VALUE]...";

function parse(argv) {
  const opts = { issues: 1, concurrency: 1, maxIterations: 1, env: {} };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = argv[i + 1];
    if (flag === "--help" || flag === "-h") {
      console.log(usage);
      process.exit(0);
    }
    if (value === undefined) throw new Error(`${flag} needs a value\n${usage}`);
    i++;
    switch (flag) {
      case "--repo": opts.repo = value; break;
      case "--image": opts.image = value; break;
      case "--issues": opts.issues = positive(flag, value); break;
      case "--concurrency": opts.concurrency = positive(flag, value); break;
      case "--max-iterations": opts.maxIterations = positive(flag, value); break;
      case "--env": {
        const eq = value.indexOf("=");
        if (eq < 1) throw new Error(`--env wants NAME=VALUE, got ${value}`);
        opts.env[value.slice(0, eq)] = value.slice(eq + 1);
        break;
      }
      default: throw new Error(`unknown option ${flag}\n${usage}`);
    }
  }
  if (!opts.repo || !opts.image) throw new Error(`--repo and --image are required\n${usage}`);
  return opts;
}

function positive(flag, value) {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${flag} wants an integer >= 1, got ${value}`);
  return n;
}

async function main() {
  const opts = parse(process.argv.slice(2));
  const sandbox = docker({
    imageName: opts.image,
    network: "host", // the engine has no bridge; the scripted model listens on 127.0.0.1
    containerUid: 1000, // the image's non-root `agent` user (Claude Code refuses root)
    containerGid: 1000,
  });
  let free = opts.concurrency;
  const waiting = [];
  const acquire = () => (free > 0 ? (free--, Promise.resolve()) : new Promise((go) => waiting.push(go)));
  const release = () => (waiting.length ? waiting.shift()() : free++);

  const one = async (n) => {
    await acquire();
    try {
      const result = await run({
        agent: claudeCode("claude-sonnet-4-6", { env: opts.env }),
        sandbox,
        cwd: opts.repo,
        name: `issue-${n}`,
        prompt: `The issue: #${n}\nWork on issue ${n} of this repository.`,
        maxIterations: opts.maxIterations,
        branchStrategy: { type: "branch", branch: `bench/issue-${n}` },
      });
      console.error(`peer: issue ${n}: ${result.iterations.length} iteration(s), signal ${result.completionSignal ? "yes" : "no"}`);
    } finally {
      release();
    }
  };
  const results = await Promise.allSettled(Array.from({ length: opts.issues }, (_, i) => one(i + 1)));
  const failed = results.filter((r) => r.status === "rejected");
  if (failed.length) {
    const why = String(failed[0].reason?.message ?? failed[0].reason).split("\n")[0];
    throw new Error(`${failed.length} of ${opts.issues} run(s) failed; first: ${why}`);
  }
}

main().catch((e) => {
  console.error(`drive.mjs: ${String(e?.message ?? e).split("\n")[0]}`);
  process.exit(1);
});
