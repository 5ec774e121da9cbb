//! The parsed TOML document -> [`Config`], checking every key, type and range on the way. Each
//! check fails with the location of the offending key or value and an example of the fix.
use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use toml_edit::{Item, TableLike, Value};

use self::Omitted::{Otherwise, Same};
use crate::source::Source;
use crate::{
    Asks, Budget, Cluster, Commands, Config, ConfigError, Egress, Handler, Implement, MAX_ATTEMPTS,
    Network, Publish, Review, defaults, forge, image, mounts, suggest,
};

/// Top-level keys read by hand before [`KEYS`], in this order (a config wrong in several fails on
/// the first, as `nix/imageArgsFromConfig.nix` does): `repo` and `forgeHost` are required, and the
/// default `imageName` is made from `repo`. Each with the type and meaning the reference shows.
#[rustfmt::skip]
pub(crate) const IDENTITY_KEYS: &[Identity] = &[
    //        key          type                example                 default
    identity("repo",      "`\"owner/name\"`", "\"owner/name\"",        Omitted::Required,                                          "the Forgejo repository the loop works on"),
    identity("forgeHost", "string",           "\"forge.example.dev\"", Omitted::Required,                                          "a host (`\"forge.example.dev\"`, meaning HTTPS) or a base URL for a forge on a port or plain HTTP (`\"http://127.0.0.1:3000\"`); no path. Resolves to `forgeUrl`; pushes go to `<forgeUrl>/<owner>/<repo>.git`"),
    identity("imageName", "string",           "\"sandcastle:name\"",   Omitted::Otherwise("`\"sandcastle:<name part of repo>\"`"), "the Docker image of the sandboxes; checked as Docker reads a reference (`[registry[:port]/]path[:tag]`, lower-case path, no digest), so a name Docker would refuse fails here"),
];

/// The `[tables]` of the file, in the order their shape and keys are checked.
pub(crate) const SECTIONS: &[&str] = &[
    "models",
    "commands",
    "sandbox",
    "review",
    "implement",
    "budget",
    "cluster",
    "questions",
    "asks",
    "clarify",
    "autopilot",
    "publish",
];

/// Every other key, one row each: its table (`""`: the top level), its name, the value an error's
/// fix shows, its value when omitted ([`Omitted`]), how its value is read and checked ([`As`], which
/// also names its type) with where it is stored, and what it means (Markdown, as the configuration
/// reference shows it). A key that is absent keeps its default. Rows are read in this order and the
/// first bad value is the error; a table's keys are listed in this order in the "known keys" of an
/// error and in the reference.
#[rustfmt::skip]
pub(crate) const KEYS: &[Key] = &[
    //  table        key                     example in errors          when omitted                          read as, and stored in
    key("",          "maxIterations",        "5",                       Same("5"),                            As::Count(|c, v| c.max_iterations = v),
        "implementer (and pr-fixer) iterations before the work is given up; an iteration whose claim of completion the gate refutes counts"),
    key("",          "maxConcurrency",       "1",                       Same("1"),                            As::Count(|c, v| c.max_concurrency = v),
        "pieces of work at the same time; a pass works through the planner's issues this many at a time, starting the next as soon as one finishes"),
    key("",          "idleTimeout",          "\"10m\"",                 Same("\"10m\""),                      As::Duration(|c, v| c.idle_timeout = v),
        "an agent silent this long fails its iteration"),
    key("",          "pollInterval",         "\"1m\"",                  Same("\"1m\""),                       As::Duration(|c, v| c.poll_interval = v),
        "the wait after a pass that found nothing to do"),
    key("models",    "planner",              "\"claude-opus-4-8\"",     Same("\"claude-opus-4-8\""),          As::Word(|c, v| c.models.planner = v),
        "the planner's model; a partial `[models]` keeps the defaults for the roles it leaves out"),
    key("models",    "implementer",          "\"claude-sonnet-4-6\"",   Same("\"claude-sonnet-4-6\""),        As::Word(|c, v| c.models.implementer = v),
        "the implementer's model"),
    key("models",    "reviewer",             "\"claude-opus-4-8\"",     Same("\"claude-opus-4-8\""),          As::Word(|c, v| c.models.reviewer = v),
        "the reviewer's model"),
    key("models",    "prFixer",              "\"claude-sonnet-4-6\"",   Same("\"claude-sonnet-4-6\""),        As::Word(|c, v| c.models.pr_fixer = v),
        "the pr-fixer's model"),
    key("models",    "assessor",             "\"claude-sonnet-4-6\"",   Same("\"claude-sonnet-4-6\""),        As::Word(|c, v| c.models.assessor = v),
        "the model that scores an issue's completeness before work starts ([clarifying](asking.md#clarifying-an-issue-before-work-starts))"),
    key("commands",  "check",                "[[\"cargo\", \"test\"]]", Same("[[\"cargo\", \"fmt\", \"--check\"], [\"cargo\", \"clippy\", \"--all-targets\", \"--\", \"-D\", \"warnings\"], [\"cargo\", \"test\"]]"), As::Steps(|c, v| c.commands.check = v),
        "the steps of `check`, run in order without a shell from the project root; the first failure stops. Also [the gate](pull-requests.md#the-gate) sandcastle runs on the commit it would push when an agent says it is done (in a fresh container with a build cache of its own; sandcastle pushes exactly the commit the gate last ran on). `[]` means no gate"),
    key("commands",  "fmt",                  "[[\"cargo\", \"fmt\"]]",  Same("[[\"cargo\", \"clippy\", \"--fix\", \"--allow-dirty\", \"--allow-staged\", \"--\", \"-D\", \"warnings\"], [\"cargo\", \"fmt\"]]"), As::Steps(|c, v| c.commands.fmt = v),
        "the steps of `fmt`"),
    key("sandbox",   "network",              "\"none\"",                Same("\"none\""),                     As::Network(|c, v| c.sandbox.network = v),
        "`docker run --network`. `\"none\"`: loopback only, the model and the `egress` hosts through sandcastle's proxy; `\"bridge\"` and `\"host\"` give the sandbox direct network access (the start line and `doctor` say so; the model key stays on the host all the same). See [the network](network.md)"),
    key("sandbox",   "memory",               "\"4g\"",                  Same("\"4g\""),                       As::Memory(|c, v| c.sandbox.memory = v),
        "`docker run --memory`"),
    key("sandbox",   "pidsLimit",            "1024",                    Same("1024"),                         As::Count(|c, v| c.sandbox.pids_limit = v),
        "`docker run --pids-limit`"),
    key("sandbox",   "mounts",               "[\"/srv/cache:/cache\"]", Same("[]"),                           As::Mounts(|c, v| c.sandbox.mounts = v),
        "extra mounts, always read-only; `/`, the Docker socket (or `/run`, `/var/run`) and the project's `.sandcastle/` (or a directory holding it) are refused, also through links"),
    key("sandbox",   "turnTimeout",          "\"60m\"",                 Same("\"60m\""),                      As::Duration(|c, v| c.sandbox.turn_timeout = v),
        "the longest an agent turn, or one gate step, may run, output or not; it is then stopped and fails with one line saying so"),
    key("sandbox",   "egress",               "[\"index.crates.io\", \"*.example.com:8443\"]", Same("[]"),    As::Egress(|c, v| c.sandbox.egress = v),
        "the hosts a sandbox may reach through the proxy (`HTTPS_PROXY`/`HTTP_PROXY`); without a port, 443 and 80. With a `FORGEJO_AGENT_TOKEN`, `tea` reaches the forge as `http://forge.sandcastle.invalid`, whatever this says; the Rust template allows `index.crates.io` and `static.crates.io`. See [egress](network.md#egress)"),
    key("sandbox",   "runtime",              "\"runsc\"",               Otherwise("the engine's default"),    As::Runtime(|c, v| c.sandbox.runtime = Some(v)),
        "`docker run --runtime`: the OCI runtime every sandbox runs under, gates and warm-ups included; `\"runsc\"` is gVisor, a user-space kernel between the agent and the host's (it does not run sandcastle's turns yet). The engine must know it (`runtimes` in `/etc/docker/daemon.json`); the start line and `doctor` say which runtime sandboxes use. See [gVisor](security.md#gvisor-a-kernel-of-its-own)"),
    key("implement", "attempts",             "3",                       Same("1"),                            As::Attempts(|c, v| c.implement.attempts = v),
        "independent implementers per issue, each in its own sandbox and branch; the attempts the gate passes go to the reviewer, which chooses one (see [best of N](pull-requests.md#best-of-n-several-attempts-at-one-issue)); an issue's `attempts-N` label or `sandcastle-attempts: N` line overrides it"),
    key("budget",    "maxCostPerIssue",      "5.0",                     Otherwise("none"),                    As::Dollars(|c, v| c.budget.max_cost_per_issue = Some(v)),
        "what the model proxy metered from the API's own answers: checked before every agent turn (a piece of work that has cost this much stops with one comment, like work given up), and by the proxy before every model request (past it, the request gets an error Claude Code shows, which ends the turn)"),
    key("budget",    "maxCostPerRun",        "50",                      Otherwise("none"),                    As::Dollars(|c, v| c.budget.max_cost_per_run = Some(v)),
        "the same for the whole run: the work in hand stops with one comment saying a later run goes on, and the run ends"),
    key("cluster",   "id",                   "\"build-host-1\"",        Otherwise("host name and process id"), As::Word(|c, v| c.cluster.id = Some(v)),
        "this orchestrator's name in its claims, comments, logs and run report ([several hosts](hosts.md))"),
    key("cluster",   "leaseTtl",             "\"10m\"",                 Same("\"10m\""),                      As::Duration(|c, v| c.cluster.lease_ttl = v),
        "how long a claim holds without renewal; a crashed orchestrator's work is free for another after it"),
    key("review",    "enabled",              "false",                   Same("true"),                         As::Boolean(|c, v| c.review.enabled = v),
        "run the reviewer on an issue's work (and a green round's) before its pull request opens; `false` opens the pull request once the gate passes, for a person to review"),
    key("review",    "rounds",               "2",                       Same("2"),                            As::Count(|c, v| c.review.rounds = v),
        "how many times the reviewer may send an issue's work back with findings; after the last round the pull request opens with the findings under \"Outstanding findings\""),
    key("questions", "enabled",              "true",                    Otherwise("`true` with the table, `false` without it"), As::Boolean(|c, v| c.questions.enabled = v),
        "teach agents the `<questions>` signal and wait for a person's answer (see [questions to a person](asking.md#questions-to-a-person))"),
    key("questions", "pollBackoff",          "[\"5m\", \"15m\", \"30m\", \"1h\"]", Same("[\"5m\", \"15m\", \"30m\", \"1h\"]"), As::Durations(|c, v| c.questions.poll_backoff = v),
        "the waits between reads of a waiting question's issue comments; the last repeats"),
    key("questions", "timeout",              "\"24h\"",                 Same("\"24h\""),                      As::Duration(|c, v| c.questions.timeout = v),
        "a question unanswered this long is recorded as a timeout in the run report and said once on the issue"),
    key("questions", "responders",           "[\"alice\"]",             Same("[]"),                           As::Logins(|c, v| c.questions.responders = v),
        "logins whose replies count besides those with write access"),
    key("questions", "handlers",             "[\"terminal\", \"forge\"]", Same("[\"terminal\", \"forge\"]"), As::Handlers(|c, v| c.questions.handlers = v),
        "where an agent's question goes; a handler that cannot reach a person in a run (no terminal, `run --once`, no `command`) is skipped with one line"),
    key("questions", "command",              "[\"/usr/local/bin/ask-slack\", \"--channel\", \"dev\"]", Otherwise("none"), As::Argv(|c, v| c.questions.command = Some(v)),
        "the `command` handler's program and arguments: the question as JSON on stdin, the answer as JSON on stdout ([its JSON](asking.md#the-question-commands-json-version-1))"),
    key("asks",      "enabled",              "true",                    Otherwise("`true` with the table, `false` without it"), As::Boolean(|c, v| c.asks.enabled = v),
        "teach working agents `sandcastle ask` and its MCP tool, and put their asks to a person through `[questions] handlers` (see [asks that do not stop the agent](asking.md#asks-that-do-not-stop-the-agent-sandcastle-ask)); off, an ask is refused in the sandbox"),
    key("clarify",   "enabled",              "true",                    Otherwise("`true` with the table, `false` without it"), As::Boolean(|c, v| c.clarify.enabled = v),
        "assess each issue before work starts (`sandcastle run --yes` skips it for one run)"),
    key("clarify",   "threshold",            "0.8",                     Same("0.8"),                          As::Fraction(|c, v| c.clarify.threshold = v),
        "the completeness from which an issue starts at once; below it, one question a round"),
    key("clarify",   "maxRounds",            "5",                       Same("5"),                            As::Count(|c, v| c.clarify.max_rounds = v),
        "questions asked at most before work starts anyway, with its assumptions in the pull request"),
    key("clarify",   "timeout",              "\"180s\"",                Same("\"180s\""),                     As::Duration(|c, v| c.clarify.timeout = v),
        "an assessment still running after this is stopped; it counts as degraded and work starts"),
    key("autopilot", "enabled",              "true",                    Same("true"),                         As::Boolean(|c, v| c.autopilot.enabled = v),
        "keep sandcastle's own `ready-for-human` pull requests green: a failing CI status or a merge conflict goes back to the pr-fixer (see [pull requests that keep themselves green](pull-requests.md#pull-requests-that-keep-themselves-green))"),
    key("autopilot", "ciRounds",             "2",                       Same("2"),                            As::Count(|c, v| c.autopilot.ci_rounds = v),
        "rounds that fix a failing CI status, per pull request; past them one comment asks a person"),
    key("autopilot", "conflictRounds",       "2",                       Same("2"),                            As::Count(|c, v| c.autopilot.conflict_rounds = v),
        "rounds that merge the default branch into a conflicting pull request, per pull request; past them one comment asks a person"),
    key("publish",   "allowWorkflowChanges", "true",                    Same("false"),                        As::Boolean(|c, v| c.publish.allow_workflow_changes = v),
        "push changes to what CI runs (`.forgejo/`, `.gitea/`, `.github/` `workflows/` and `actions/`, any `action.yml`), judged against the base branch; without it such work stops with one comment naming them (see [what is kept back](security.md#what-the-forge-would-act-on-is-kept-back))"),
];

/// One row of [`IDENTITY_KEYS`].
pub(crate) struct Identity {
    pub(crate) name: &'static str,
    /// The type, in words, as the reference shows it.
    pub(crate) kind: &'static str,
    pub(crate) example: &'static str,
    pub(crate) omitted: Omitted,
    pub(crate) meaning: &'static str,
}

const fn identity(
    name: &'static str,
    kind: &'static str,
    example: &'static str,
    omitted: Omitted,
    meaning: &'static str,
) -> Identity {
    Identity {
        name,
        kind,
        example,
        omitted,
        meaning,
    }
}

/// One row of [`KEYS`].
pub(crate) struct Key {
    pub(crate) section: &'static str,
    pub(crate) name: &'static str,
    pub(crate) example: &'static str,
    pub(crate) omitted: Omitted,
    pub(crate) read: As,
    pub(crate) meaning: &'static str,
}

const fn key(
    section: &'static str,
    name: &'static str,
    example: &'static str,
    omitted: Omitted,
    read: As,
    meaning: &'static str,
) -> Key {
    Key {
        section,
        name,
        example,
        omitted,
        read,
        meaning,
    }
}

/// What a key comes to when the file leaves it out.
pub(crate) enum Omitted {
    /// The key must be there.
    Required,
    /// The same as writing this TOML value (a test holds every such row to it).
    Same(&'static str),
    /// What the setting is then, in words (Markdown).
    Otherwise(&'static str),
}

/// How a key's value is read and checked (by the [`Section`] reader of the same name), and the
/// setter that stores it in the [`Config`].
pub(crate) enum As {
    Word(fn(&mut Config, String)),
    Count(fn(&mut Config, u32)),
    Attempts(fn(&mut Config, u32)),
    Dollars(fn(&mut Config, f64)),
    Fraction(fn(&mut Config, f64)),
    Boolean(fn(&mut Config, bool)),
    Duration(fn(&mut Config, Duration)),
    Durations(fn(&mut Config, Vec<Duration>)),
    Logins(fn(&mut Config, Vec<String>)),
    Handlers(fn(&mut Config, Vec<Handler>)),
    Argv(fn(&mut Config, Vec<String>)),
    Steps(fn(&mut Config, Vec<Vec<String>>)),
    Network(fn(&mut Config, Network)),
    Memory(fn(&mut Config, String)),
    Mounts(fn(&mut Config, Vec<String>)),
    Egress(fn(&mut Config, Vec<Egress>)),
    Runtime(fn(&mut Config, String)),
}

impl As {
    /// The values this reader accepts, in words (Markdown), as the reference shows them.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            As::Word(_) => "string without spaces",
            As::Count(_) => "integer ≥ 1",
            As::Attempts(_) => "integer from 1 to 4",
            As::Dollars(_) => "number of US dollars above 0",
            As::Fraction(_) => "number from 0 to 1",
            As::Boolean(_) => "boolean",
            As::Duration(_) => "duration (`\"90s\"`, `\"10m\"`, `\"1h 30m\"`), at least `\"1s\"`",
            As::Durations(_) => "non-empty list of durations",
            As::Logins(_) => "list of logins",
            As::Handlers(_) => "list of `\"terminal\"`, `\"forge\"`, `\"command\"`",
            As::Argv(_) => "argv list (program first)",
            As::Steps(_) => "list of argv lists",
            As::Network(_) => "`\"none\"`, `\"bridge\"` or `\"host\"`",
            As::Memory(_) => "size (`\"512m\"`, `\"4g\"`), not `\"0\"` (no limit)",
            As::Mounts(_) => "list of `\"host-path:/container-path\"`",
            As::Egress(_) => {
                "list of host names or `\"*.suffix\"`, each with an optional `\":port\"`"
            }
            As::Runtime(_) => "runtime name (letters, digits, `_`, `.`, `-`)",
        }
    }
}

type Span = Option<Range<usize>>;

/// Checks every key of the document and reads it into a [`Config`].
pub(crate) fn config(source: &Source, root: &dyn TableLike) -> Result<Config, ConfigError> {
    let top = Section {
        source,
        table: root,
        name: None,
    };
    // Unknown keys first: a typo in a required key should be reported as the typo it is.
    top.reject_unknown(&known_keys(""))?;
    let mut tables = vec![("", top)];
    for &name in SECTIONS {
        if let Some(section) = top.section(name)? {
            tables.push((name, section));
        }
    }
    let mut config = identity_and_defaults(&top)?;
    // A `[questions]`, `[asks]` or `[clarify]` table turns its feature on unless its `enabled` says otherwise.
    let present = |section| tables.iter().any(|(name, _)| *name == section);
    config.questions.enabled |= present("questions");
    config.asks.enabled |= present("asks");
    config.clarify.enabled |= present("clarify");
    for key in KEYS {
        if let Some((_, table)) = tables.iter().find(|(name, _)| *name == key.section) {
            key.read(table, &mut config)?;
        }
    }
    Ok(config)
}

/// The keys a table (`""`: the top level) may hold, in the order an error lists them.
fn known_keys(section: &str) -> Vec<&'static str> {
    let rows = KEYS
        .iter()
        .filter(|key| key.section == section)
        .map(|key| key.name);
    if section.is_empty() {
        let identity = IDENTITY_KEYS.iter().map(|key| key.name);
        identity
            .chain(rows)
            .chain(SECTIONS.iter().copied())
            .collect()
    } else {
        rows.collect()
    }
}

/// The [`IDENTITY_KEYS`] read and checked, and every other setting at its default.
fn identity_and_defaults(top: &Section) -> Result<Config, ConfigError> {
    let source = top.source;
    let (repo, repo_span) = top.required_word("repo", "\"owner/name\"")?;
    let repo_name = repo_name(&repo)
        .map_err(|why| source.error(repo_span.clone(), format!("`repo` {why}")))?
        .to_string();
    let (forge_host, host_span) = top.required_word("forgeHost", "\"forge.example.dev\"")?;
    let forge_url = forge::forge_url(&forge_host)
        .map_err(|why| source.error(host_span, format!("`forgeHost` \"{forge_host}\" {why}")))?;

    // The name Docker will know the image by: checked here, so a bad one fails before a build.
    let image_name = match top.word_at("imageName", "\"sandcastle:name\"")? {
        Some((image_name, span)) => {
            image::name_and_tag(&image_name)
                .map_err(|why| source.error(span, format!("`imageName` \"{image_name}\" {why}")))?;
            image_name
        }
        None => {
            let image_name = format!("sandcastle:{repo_name}");
            image::name_and_tag(&image_name).map_err(|_| {
                source.error(
                    repo_span,
                    format!(
                        "`repo` \"{repo}\" makes the default `imageName` \"{image_name}\", which \
                         Docker refuses; set `imageName`, e.g. `imageName = \"sandcastle:name\"`"
                    ),
                )
            })?;
            image_name
        }
    };

    Ok(Config {
        repo,
        forge_host,
        forge_url,
        image_name,
        max_iterations: defaults::MAX_ITERATIONS,
        max_concurrency: defaults::MAX_CONCURRENCY,
        idle_timeout: defaults::IDLE_TIMEOUT,
        poll_interval: defaults::POLL_INTERVAL,
        models: defaults::models(),
        commands: Commands::default(),
        sandbox: defaults::sandbox(),
        review: Review {
            enabled: true,
            rounds: defaults::REVIEW_ROUNDS,
        },
        implement: Implement { attempts: 1 },
        budget: Budget::default(),
        cluster: Cluster::default(),
        questions: defaults::questions(),
        asks: Asks::default(),
        clarify: defaults::clarify(),
        publish: Publish::default(),
        autopilot: defaults::autopilot(),
    })
}

impl Key {
    /// Reads this key from its table into `config`; an absent key leaves its default there.
    fn read(&self, table: &Section, config: &mut Config) -> Result<(), ConfigError> {
        let (key, example) = (self.name, self.example);
        match self.read {
            As::Word(set) => store(config, set, table.word(key, example)?),
            As::Count(set) => store(config, set, table.count(key, example)?),
            As::Attempts(set) => store(config, set, table.attempts(key, example)?),
            As::Dollars(set) => store(config, set, table.dollars(key, example)?),
            As::Fraction(set) => store(config, set, table.fraction(key, example)?),
            As::Boolean(set) => store(config, set, table.boolean(key, example)?),
            As::Duration(set) => store(config, set, table.duration(key, example)?),
            As::Durations(set) => store(config, set, table.durations(key, example)?),
            As::Logins(set) => store(config, set, table.logins(key, example)?),
            As::Handlers(set) => store(config, set, table.handlers(key, example)?),
            As::Argv(set) => store(config, set, table.argv(key, example)?),
            As::Steps(set) => store(config, set, table.steps(key, example)?),
            As::Network(set) => store(config, set, table.network(key, example)?),
            As::Memory(set) => store(config, set, table.memory(key, example)?),
            As::Mounts(set) => store(config, set, table.mounts(key, example)?),
            As::Egress(set) => store(config, set, table.egress(key, example)?),
            As::Runtime(set) => store(config, set, table.runtime(key, example)?),
        }
        Ok(())
    }
}

fn store<T>(config: &mut Config, set: fn(&mut Config, T), value: Option<T>) {
    if let Some(value) = value {
        set(config, value);
    }
}

/// One table of the document: the top level or one of the [`SECTIONS`].
#[derive(Clone, Copy)]
struct Section<'a> {
    source: &'a Source<'a>,
    table: &'a dyn TableLike,
    name: Option<&'static str>,
}

impl<'a> Section<'a> {
    fn reject_unknown(&self, known: &[&str]) -> Result<(), ConfigError> {
        let Some((key, item)) = self.table.iter().find(|(key, _)| !known.contains(key)) else {
            return Ok(());
        };
        let place = self
            .name
            .map(|name| format!(" in [{name}]"))
            .unwrap_or_default();
        let fix = match suggest::nearest(key, known) {
            Some(nearest) => format!("did you mean `{nearest}`?"),
            // TOML puts every key after `[table]` into that table.
            None if self.name.is_some() && known_keys("").contains(&key) => {
                format!("`{key}` is a top-level key; move it above the first [table]")
            }
            None => {
                let known: Vec<String> = known.iter().map(|key| format!("`{key}`")).collect();
                format!("the known keys{place} are {}", known.join(", "))
            }
        };
        let span = self
            .table
            .key(key)
            .and_then(|key| key.span())
            .or_else(|| item.span());
        Err(self
            .source
            .error(span, format!("unknown key `{key}`{place}; {fix}")))
    }

    /// A sub-table, with its keys checked.
    fn section(&self, key: &'static str) -> Result<Option<Section<'a>>, ConfigError> {
        let Some(item) = self.table.get(key) else {
            return Ok(None);
        };
        let Some(table) = item.as_table_like() else {
            return Err(self.source.error(
                self.span(key, item),
                format!(
                    "`{key}` must be a table, found {}; write it as a [{key}] table",
                    kind(item)
                ),
            ));
        };
        let section = Section {
            source: self.source,
            table,
            name: Some(key),
        };
        section.reject_unknown(&known_keys(key))?;
        Ok(Some(section))
    }

    /// The key's value and where it is, if present.
    fn value(
        &self,
        key: &str,
        example: &str,
        expected: &str,
    ) -> Result<Option<(&'a Value, Span)>, ConfigError> {
        let Some(item) = self.table.get(key) else {
            return Ok(None);
        };
        match item.as_value() {
            Some(value) => Ok(Some((value, self.span(key, item)))),
            None => Err(self.wrong_type(key, self.span(key, item), kind(item), expected, example)),
        }
    }

    /// A non-empty string without whitespace.
    fn word(&self, key: &str, example: &str) -> Result<Option<String>, ConfigError> {
        Ok(self.word_at(key, example)?.map(|(word, _)| word))
    }

    fn word_at(&self, key: &str, example: &str) -> Result<Option<(String, Span)>, ConfigError> {
        let Some((text, span)) = self.string_at(key, example)? else {
            return Ok(None);
        };
        if text.is_empty() || text.contains(char::is_whitespace) {
            return Err(self.source.error(
                span,
                format!(
                    "`{}` must be a non-empty string without spaces; write e.g. {}",
                    self.qualified(key),
                    self.assignment(key, example)
                ),
            ));
        }
        Ok(Some((text, span)))
    }

    fn required_word(&self, key: &str, example: &str) -> Result<(String, Span), ConfigError> {
        self.word_at(key, example)?.ok_or_else(|| {
            self.source.error(
                None,
                format!("missing required key `{key}`; add `{key} = {example}` before any [table]"),
            )
        })
    }

    /// A whole number of at least 1 (iterations, concurrency, processes).
    fn count(&self, key: &str, example: &str) -> Result<Option<u32>, ConfigError> {
        let Some((value, span)) = self.value(key, example, "an integer")? else {
            return Ok(None);
        };
        let Some(number) = value.as_integer() else {
            return Err(self.wrong_type(key, span, value_kind(value), "an integer", example));
        };
        let out_of_range = |bound: &str| {
            self.source.error(
                span.clone(),
                format!(
                    "`{}` must be {bound}, found {number}; write e.g. {}",
                    self.qualified(key),
                    self.assignment(key, example)
                ),
            )
        };
        if number < 1 {
            return Err(out_of_range("at least 1"));
        }
        u32::try_from(number)
            .map(Some)
            .map_err(|_| out_of_range(&format!("at most {}", u32::MAX)))
    }

    /// A count of attempts at one issue, from 1 to [`MAX_ATTEMPTS`].
    fn attempts(&self, key: &str, example: &str) -> Result<Option<u32>, ConfigError> {
        let Some(count) = self.count(key, example)? else {
            return Ok(None);
        };
        if count <= MAX_ATTEMPTS {
            return Ok(Some(count));
        }
        let span = self
            .value(key, example, "an integer")?
            .map(|(_, span)| span);
        Err(self.source.error(
            span.flatten(),
            format!(
                "`{}` must be at most {MAX_ATTEMPTS}, found {count}; write e.g. {}",
                self.qualified(key),
                self.assignment(key, example)
            ),
        ))
    }

    /// An amount of US dollars above zero, written as an integer or a decimal.
    fn dollars(&self, key: &str, example: &str) -> Result<Option<f64>, ConfigError> {
        let Some((number, span)) = self.number(key, example, "a number of US dollars")? else {
            return Ok(None);
        };
        if !(number.is_finite() && number > 0.0) {
            return Err(self.source.error(
                span,
                format!(
                    "`{}` must be a number of US dollars above 0, found {number}; write e.g. {}",
                    self.qualified(key),
                    self.assignment(key, example)
                ),
            ));
        }
        Ok(Some(number))
    }

    /// A number written as an integer or a decimal, and where it is.
    fn number(
        &self,
        key: &str,
        example: &str,
        expected: &str,
    ) -> Result<Option<(f64, Span)>, ConfigError> {
        let Some((value, span)) = self.value(key, example, expected)? else {
            return Ok(None);
        };
        match (value.as_float(), value.as_integer()) {
            (Some(float), _) => Ok(Some((float, span))),
            (None, Some(integer)) => Ok(Some((integer as f64, span))),
            (None, None) => Err(self.wrong_type(key, span, value_kind(value), "a number", example)),
        }
    }

    /// `true` or `false`.
    fn boolean(&self, key: &str, example: &str) -> Result<Option<bool>, ConfigError> {
        let Some((value, span)) = self.value(key, example, "a boolean")? else {
            return Ok(None);
        };
        match value.as_bool() {
            Some(flag) => Ok(Some(flag)),
            None => Err(self.wrong_type(key, span, value_kind(value), "true or false", example)),
        }
    }

    /// A number from 0 to 1, written as a decimal or as 0 or 1.
    fn fraction(&self, key: &str, example: &str) -> Result<Option<f64>, ConfigError> {
        let Some((number, span)) = self.number(key, example, "a number from 0 to 1")? else {
            return Ok(None);
        };
        if !(0.0..=1.0).contains(&number) {
            return Err(self.source.error(
                span,
                format!(
                    "`{}` must be a number from 0 to 1, found {number}; write e.g. {}",
                    self.qualified(key),
                    self.assignment(key, example)
                ),
            ));
        }
        Ok(Some(number))
    }

    /// A humantime duration such as "10m" or "1h 30m", at least one second.
    fn duration(&self, key: &str, example: &str) -> Result<Option<Duration>, ConfigError> {
        let Some((text, span)) = self.string_at(key, example)? else {
            return Ok(None);
        };
        let problem = match humantime::parse_duration(&text) {
            Ok(duration) if duration >= Duration::from_secs(1) => return Ok(Some(duration)),
            Ok(_) => "is shorter than one second".to_string(),
            Err(error) => format!("is not a duration ({error})"),
        };
        Err(self.source.error(
            span,
            format!(
                "`{}` = \"{text}\" {problem}; write e.g. {} (units: s, m, h, d)",
                self.qualified(key),
                self.assignment(key, example)
            ),
        ))
    }

    /// A non-empty list of durations, each at least one second.
    fn durations(&self, key: &str, example: &str) -> Result<Option<Vec<Duration>>, ConfigError> {
        let Some(entries) = self.strings(key, example)? else {
            return Ok(None);
        };
        if entries.is_empty() {
            return Err(self.source.error(
                self.table.get(key).and_then(|item| item.span()),
                format!(
                    "`{}` is empty; write e.g. {}",
                    self.qualified(key),
                    self.assignment(key, example)
                ),
            ));
        }
        let mut durations = Vec::with_capacity(entries.len());
        for (text, span) in entries {
            match humantime::parse_duration(&text) {
                Ok(duration) if duration >= Duration::from_secs(1) => durations.push(duration),
                _ => {
                    return Err(self.source.error(
                        span,
                        format!(
                            "`{}` entry \"{text}\" is not a duration of at least one second; write e.g. {} (units: s, m, h, d)",
                            self.qualified(key),
                            self.assignment(key, example)
                        ),
                    ));
                }
            }
        }
        Ok(Some(durations))
    }

    /// A list of forge logins.
    fn logins(&self, key: &str, example: &str) -> Result<Option<Vec<String>>, ConfigError> {
        let Some(entries) = self.strings(key, example)? else {
            return Ok(None);
        };
        let mut logins = Vec::with_capacity(entries.len());
        for (login, span) in entries {
            let valid = !login.is_empty()
                && login
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
            if !valid {
                return Err(self.source.error(
                    span,
                    format!(
                        "`{}` entry \"{login}\" is not a forge login; write e.g. {}",
                        self.qualified(key),
                        self.assignment(key, example)
                    ),
                ));
            }
            logins.push(login);
        }
        Ok(Some(logins))
    }

    /// A list of question handlers, each named once.
    fn egress(&self, key: &str, example: &str) -> Result<Option<Vec<Egress>>, ConfigError> {
        let Some(entries) = self.strings(key, example)? else {
            return Ok(None);
        };
        entries
            .into_iter()
            .map(|(entry, span)| {
                Egress::parse(&entry).ok_or_else(|| {
                    self.source.error(
                        span,
                        format!(
                            "`{}` entry \"{entry}\" is not a host name, `*.suffix` or either with `:port`; write e.g. {}",
                            self.qualified(key),
                            self.assignment(key, example)
                        ),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    fn network(&self, key: &str, example: &str) -> Result<Option<Network>, ConfigError> {
        let Some((name, span)) = self.string_at(key, example)? else {
            return Ok(None);
        };
        match Network::ALL.into_iter().find(|n| n.name() == name) {
            Some(network) => Ok(Some(network)),
            None => Err(self.source.error(
                span,
                format!(
                    "`{}` \"{name}\" is not a sandbox network; use \"none\" (loopback only, through sandcastle's proxy), or \"bridge\" or \"host\" for direct network access, e.g. {}",
                    self.qualified(key),
                    self.assignment(key, example)
                ),
            )),
        }
    }

    /// An OCI runtime's name as the engine's `runtimes` know it: `[A-Za-z0-9_.-]+`.
    fn runtime(&self, key: &str, example: &str) -> Result<Option<String>, ConfigError> {
        let Some((name, span)) = self.string_at(key, example)? else {
            return Ok(None);
        };
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
        if !valid {
            return Err(self.source.error(
                span,
                format!(
                    "`{}` \"{}\" is not a runtime name (letters, digits, `_`, `.`, `-`); name one the engine knows, e.g. {}",
                    self.qualified(key),
                    name.escape_debug(),
                    self.assignment(key, example)
                ),
            ));
        }
        Ok(Some(name))
    }

    fn handlers(&self, key: &str, example: &str) -> Result<Option<Vec<Handler>>, ConfigError> {
        let Some(entries) = self.strings(key, example)? else {
            return Ok(None);
        };
        let allowed: Vec<String> = Handler::ALL.iter().map(|h| format!("\"{h}\"")).collect();
        let mut handlers = Vec::with_capacity(entries.len());
        for (name, span) in entries {
            let problem = match Handler::ALL.into_iter().find(|h| h.name() == name) {
                Some(handler) if !handlers.contains(&handler) => {
                    handlers.push(handler);
                    continue;
                }
                Some(_) => "is named twice",
                None => "is not a handler",
            };
            return Err(self.source.error(
                span,
                format!(
                    "`{}` entry \"{name}\" {problem}; the handlers are {}, e.g. {}",
                    self.qualified(key),
                    allowed.join(", "),
                    self.assignment(key, example)
                ),
            ));
        }
        Ok(Some(handlers))
    }

    /// One argv: a program and its arguments.
    fn argv(&self, key: &str, example: &str) -> Result<Option<Vec<String>>, ConfigError> {
        let Some(words) = self.strings(key, example)? else {
            return Ok(None);
        };
        if words.first().is_none_or(|(program, _)| program.is_empty()) {
            return Err(self.source.error(
                self.table.get(key).and_then(|item| item.span()),
                format!(
                    "`{}` has no program to run; write e.g. {}",
                    self.qualified(key),
                    self.assignment(key, example)
                ),
            ));
        }
        Ok(Some(words.into_iter().map(|(word, _)| word).collect()))
    }

    /// A list of strings, each with where it is.
    fn strings(
        &self,
        key: &str,
        example: &str,
    ) -> Result<Option<Vec<(String, Span)>>, ConfigError> {
        let Some((value, span)) = self.value(key, example, "a list of strings")? else {
            return Ok(None);
        };
        let Some(entries) = value.as_array() else {
            return Err(self.wrong_type(
                key,
                span,
                value_kind(value),
                "a list of strings",
                example,
            ));
        };
        entries
            .iter()
            .map(|entry| match entry.as_str() {
                Some(text) => Ok((text.to_string(), entry.span())),
                None => Err(self.wrong_type(
                    key,
                    entry.span(),
                    value_kind(entry),
                    "a list of strings",
                    example,
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// A docker `--memory` size: a number with an optional b/k/m/g/t/p unit, not zero (which
    /// Docker reads as no limit).
    fn memory(&self, key: &str, example: &str) -> Result<Option<String>, ConfigError> {
        let Some((text, span)) = self.word_at(key, example)? else {
            return Ok(None);
        };
        let problem = match memory_size(&text) {
            Some(size) if size > 0.0 => return Ok(Some(text)),
            Some(_) => "means no limit to Docker",
            None => "is not a memory size",
        };
        Err(self.source.error(
            span,
            format!(
                "`{}` = \"{text}\" {problem}; write e.g. {} (units: b, k, m, g)",
                self.qualified(key),
                self.assignment(key, example)
            ),
        ))
    }

    /// A string that may contain spaces (durations like "1h 30m").
    fn string_at(&self, key: &str, example: &str) -> Result<Option<(String, Span)>, ConfigError> {
        let Some((value, span)) = self.value(key, example, "a string")? else {
            return Ok(None);
        };
        match value.as_str() {
            Some(text) => Ok(Some((text.to_string(), span))),
            None => Err(self.wrong_type(key, span, value_kind(value), "a string", example)),
        }
    }

    /// A list of steps, each an argv list with a program name first.
    fn steps(&self, key: &str, example: &str) -> Result<Option<Vec<Vec<String>>>, ConfigError> {
        let Some((value, span)) = self.value(key, example, "a list of steps")? else {
            return Ok(None);
        };
        let Some(steps) = value.as_array() else {
            return Err(self.wrong_type(key, span, value_kind(value), "a list of steps", example));
        };
        let qualified = self.qualified(key);
        let assignment = self.assignment(key, example);
        let mut argvs = Vec::with_capacity(steps.len());
        for (index, step) in steps.iter().enumerate() {
            let number = index + 1;
            let Some(argv) = step.as_array() else {
                return Err(self.source.error(
                    step.span(),
                    format!(
                        "step {number} of `{qualified}` must be an argv list, found {}; \
                         write e.g. {assignment} (a list of steps, each a list of arguments)",
                        value_kind(step)
                    ),
                ));
            };
            let mut words = Vec::with_capacity(argv.len());
            for word in argv.iter() {
                let Some(word) = word.as_str() else {
                    return Err(self.source.error(
                        word.span(),
                        format!(
                            "step {number} of `{qualified}` has {} where an argument should be; \
                             quote it, e.g. \"5\"",
                            value_kind(word)
                        ),
                    ));
                };
                words.push(word.to_string());
            }
            if words.first().is_none_or(String::is_empty) {
                return Err(self.source.error(
                    step.span(),
                    format!("step {number} of `{qualified}` has no program to run; write e.g. {assignment}"),
                ));
            }
            argvs.push(words);
        }
        Ok(Some(argvs))
    }

    /// Extra read-only mounts, each `host-path:container-path`.
    fn mounts(&self, key: &str, example: &str) -> Result<Option<Vec<String>>, ConfigError> {
        let Some((value, span)) = self.value(key, example, "a list of strings")? else {
            return Ok(None);
        };
        let Some(entries) = value.as_array() else {
            return Err(self.wrong_type(
                key,
                span,
                value_kind(value),
                "a list of strings",
                example,
            ));
        };
        let mut mounts = Vec::with_capacity(entries.len());
        for entry in entries.iter() {
            let valid = entry.as_str().filter(|mount| match mount.split_once(':') {
                Some((host, container)) => {
                    !host.is_empty() && container.starts_with('/') && !container.contains(':')
                }
                None => false,
            });
            let Some(mount) = valid else {
                return Err(self.source.error(
                    entry.span(),
                    format!(
                        "each of `{}` must be \"host-path:/container-path\" (mounted read-only); write e.g. {}",
                        self.qualified(key),
                        self.assignment(key, example)
                    ),
                ));
            };
            let host = mount.split_once(':').map_or(mount, |(host, _)| host);
            if let Some(why) =
                mounts::mount_refused(&mounts::project_of(self.source.path), Path::new(host))
            {
                return Err(self.source.error(
                    entry.span(),
                    format!(
                        "`{}` entry \"{mount}\" {why}; mount only what the agents need, e.g. {}",
                        self.qualified(key),
                        self.assignment(key, example)
                    ),
                ));
            }
            mounts.push(mount.to_string());
        }
        Ok(Some(mounts))
    }

    fn wrong_type(
        &self,
        key: &str,
        span: Span,
        found: &str,
        expected: &str,
        example: &str,
    ) -> ConfigError {
        self.source.error(
            span,
            format!(
                "`{}` must be {expected}, found {found}; write e.g. {}",
                self.qualified(key),
                self.assignment(key, example)
            ),
        )
    }

    /// Where the value is, or failing that where its key is.
    fn span(&self, key: &str, item: &Item) -> Span {
        item.span()
            .or_else(|| self.table.key(key).and_then(|key| key.span()))
    }

    fn qualified(&self, key: &str) -> String {
        match self.name {
            Some(name) => format!("{name}.{key}"),
            None => key.to_string(),
        }
    }

    fn assignment(&self, key: &str, example: &str) -> String {
        match self.name {
            Some(name) => format!("`{key} = {example}` in [{name}]"),
            None => format!("`{key} = {example}`"),
        }
    }
}

/// The name part of `owner/name`, or why `repo` is not that and the fix.
fn repo_name(repo: &str) -> Result<&str, String> {
    let is_part = |part: &str| {
        !part.is_empty()
            && part != "."
            && part != ".."
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    match repo.split_once('/') {
        Some((owner, name)) if is_part(owner) && is_part(name) => match name.strip_suffix(".git") {
            Some(bare) => Err(format!(
                "\"{repo}\" ends in .git; write `repo = \"{owner}/{bare}\"`"
            )),
            None => Ok(name),
        },
        _ => Err(format!(
            "must be `owner/name`, found \"{repo}\"; write e.g. `repo = \"owner/name\"`"
        )),
    }
}

/// The bytes of Docker's `--memory` syntax (`512m`, `4g`, `1.5GiB`; units of 1024, as Docker
/// reads them), or `None` when `text` is not that syntax.
pub fn memory_size(text: &str) -> Option<f64> {
    let unit_start = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(unit_start);
    let number_ok = number.split('.').all(|digits| !digits.is_empty());
    let unit = unit.to_ascii_lowercase();
    let power = ["k", "m", "g", "t", "p"]
        .iter()
        .position(|prefix| unit.starts_with(prefix))
        .map_or(0, |at| at + 1);
    let unit = &unit[power.min(1)..];
    let unit = unit.strip_prefix('i').unwrap_or(unit);
    let unit = unit.strip_prefix('b').unwrap_or(unit);
    if !(number_ok && unit.is_empty()) {
        return None;
    }
    let number: f64 = number.parse().ok()?;
    Some(number * 1024f64.powi(power as i32))
}

fn kind(item: &Item) -> &'static str {
    match item {
        Item::None => "nothing",
        Item::Table(_) => "a table",
        Item::ArrayOfTables(_) => "an array of tables",
        Item::Value(value) => value_kind(value),
    }
}

fn value_kind(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a date-time",
        Value::Array(_) => "an array",
        Value::InlineTable(_) => "a table",
    }
}

#[cfg(test)]
mod tests {
    use super::{IDENTITY_KEYS, KEYS, Omitted, SECTIONS};

    const IDENTITY: &str = "repo = \"acme/widget\"\nforgeHost = \"forge.example.dev\"\n";

    /// A config of the identity keys and `assignment` in `section` (`""`: the top level); the
    /// section's table is written even when `assignment` is empty, since a `[questions]` or
    /// `[clarify]` table turns its feature on.
    fn config_with(section: &str, assignment: &str) -> Result<crate::Config, crate::ConfigError> {
        let text = match section {
            "" => format!("{IDENTITY}{assignment}"),
            section => format!("{IDENTITY}[{section}]\n{assignment}"),
        };
        crate::parse(
            std::path::Path::new("/project/.sandcastle/config.toml"),
            &text,
        )
    }

    /// A row naming a table that is not one of the sections would never be read.
    #[test]
    fn every_row_is_in_a_known_table_once() {
        for (index, key) in KEYS.iter().enumerate() {
            assert!(
                key.section.is_empty() || SECTIONS.contains(&key.section),
                "`{}` is in an unknown table [{}]",
                key.name,
                key.section
            );
            let twice = KEYS[..index]
                .iter()
                .any(|other| (other.section, other.name) == (key.section, key.name));
            assert!(!twice, "`{}` has two rows", key.name);
        }
    }

    /// The example an error shows as the fix (and the reference shows) is itself accepted.
    #[test]
    fn every_example_is_a_valid_value() {
        for key in KEYS {
            let assignment = format!("{} = {}\n", key.name, key.example);
            if let Err(error) = config_with(key.section, &assignment) {
                panic!("the example of `{}` is refused: {error}", key.name);
            }
        }
        let identity: String = IDENTITY_KEYS
            .iter()
            .map(|key| format!("{} = {}\n", key.name, key.example))
            .collect();
        let path = std::path::Path::new("/project/.sandcastle/config.toml");
        if let Err(error) = crate::parse(path, &identity) {
            panic!("the examples of the top-level keys are refused: {error}");
        }
    }

    /// The default the reference shows is the code's: writing it changes nothing.
    #[test]
    fn every_shown_default_is_what_an_omitted_key_gets() {
        for key in KEYS {
            let Omitted::Same(value) = key.omitted else {
                continue;
            };
            let written = config_with(key.section, &format!("{} = {value}\n", key.name));
            let written = written.unwrap_or_else(|error| {
                panic!("the default of `{}` is refused: {error}", key.name)
            });
            assert_eq!(
                written,
                config_with(key.section, "").unwrap(),
                "`{}` = {value}, the default the reference shows, is not what the code uses \
                 when the key is left out; fix the row in KEYS or the default in defaults.rs",
                key.name
            );
        }
    }
}
