//! The parsed TOML document -> [`Config`], checking every key, type and range on the way. Each
//! check fails with the location of the offending key or value and an example of the fix.
use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use toml_edit::{Item, TableLike, Value};

use crate::source::Source;
use crate::{
    Budget, Cluster, Commands, Config, ConfigError, Egress, Handler, Network, Publish, Review,
    defaults, forge, image, mounts, suggest,
};

/// Top-level keys read by hand before [`KEYS`], in this order (a config wrong in several fails on
/// the first, as `nix/imageArgsFromConfig.nix` does): `repo` and `forgeHost` are required, and the
/// default `imageName` is made from `repo`.
const IDENTITY_KEYS: &[&str] = &["repo", "forgeHost", "imageName"];

/// The `[tables]` of the file, in the order their shape and keys are checked.
const SECTIONS: &[&str] = &[
    "models",
    "commands",
    "sandbox",
    "review",
    "budget",
    "cluster",
    "questions",
    "clarify",
    "autopilot",
    "publish",
];

/// Every other key, one row each: its table (`""`: the top level), its name, the value an error's
/// fix shows, and how its value is read and checked ([`As`]) with where it is stored. A key that is
/// absent keeps its default. Rows are read in this order and the first bad value is the error; a
/// table's keys are listed in this order in the "known keys" of an error.
#[rustfmt::skip]
const KEYS: &[Key] = &[
    //  table        key                     example in errors          read as, and stored in
    key("",          "maxIterations",        "5",                       As::Count(|c, v| c.max_iterations = v)),
    key("",          "maxConcurrency",       "1",                       As::Count(|c, v| c.max_concurrency = v)),
    key("",          "idleTimeout",          "\"10m\"",                 As::Duration(|c, v| c.idle_timeout = v)),
    key("",          "pollInterval",         "\"1m\"",                  As::Duration(|c, v| c.poll_interval = v)),
    key("models",    "planner",              "\"claude-opus-4-8\"",     As::Word(|c, v| c.models.planner = v)),
    key("models",    "implementer",          "\"claude-sonnet-4-6\"",   As::Word(|c, v| c.models.implementer = v)),
    key("models",    "reviewer",             "\"claude-opus-4-8\"",     As::Word(|c, v| c.models.reviewer = v)),
    key("models",    "prFixer",              "\"claude-sonnet-4-6\"",   As::Word(|c, v| c.models.pr_fixer = v)),
    key("models",    "assessor",             "\"claude-sonnet-4-6\"",   As::Word(|c, v| c.models.assessor = v)),
    key("commands",  "check",                "[[\"cargo\", \"test\"]]", As::Steps(|c, v| c.commands.check = v)),
    key("commands",  "fmt",                  "[[\"cargo\", \"fmt\"]]",  As::Steps(|c, v| c.commands.fmt = v)),
    key("sandbox",   "network",              "\"none\"",                As::Network(|c, v| c.sandbox.network = v)),
    key("sandbox",   "memory",               "\"4g\"",                  As::Memory(|c, v| c.sandbox.memory = v)),
    key("sandbox",   "pidsLimit",            "1024",                    As::Count(|c, v| c.sandbox.pids_limit = v)),
    key("sandbox",   "mounts",               "[\"/srv/cache:/cache\"]", As::Mounts(|c, v| c.sandbox.mounts = v)),
    key("sandbox",   "turnTimeout",          "\"60m\"",                 As::Duration(|c, v| c.sandbox.turn_timeout = v)),
    key("sandbox",   "egress",               "[\"index.crates.io\", \"*.example.com:8443\"]", As::Egress(|c, v| c.sandbox.egress = v)),
    key("budget",    "maxCostPerIssue",      "5.0",                     As::Dollars(|c, v| c.budget.max_cost_per_issue = Some(v))),
    key("budget",    "maxCostPerRun",        "50",                      As::Dollars(|c, v| c.budget.max_cost_per_run = Some(v))),
    key("cluster",   "id",                   "\"build-host-1\"",        As::Word(|c, v| c.cluster.id = Some(v))),
    key("cluster",   "leaseTtl",             "\"10m\"",                 As::Duration(|c, v| c.cluster.lease_ttl = v)),
    key("review",    "rounds",               "2",                       As::Count(|c, v| c.review.rounds = v)),
    key("questions", "enabled",              "true",                    As::Boolean(|c, v| c.questions.enabled = v)),
    key("questions", "pollBackoff",          "[\"5m\", \"15m\", \"30m\", \"1h\"]", As::Durations(|c, v| c.questions.poll_backoff = v)),
    key("questions", "timeout",              "\"24h\"",                 As::Duration(|c, v| c.questions.timeout = v)),
    key("questions", "responders",           "[\"alice\"]",             As::Logins(|c, v| c.questions.responders = v)),
    key("questions", "handlers",             "[\"terminal\", \"forge\"]", As::Handlers(|c, v| c.questions.handlers = v)),
    key("questions", "command",              "[\"/usr/local/bin/ask-slack\", \"--channel\", \"dev\"]", As::Argv(|c, v| c.questions.command = Some(v))),
    key("clarify",   "enabled",              "true",                    As::Boolean(|c, v| c.clarify.enabled = v)),
    key("clarify",   "threshold",            "0.8",                     As::Fraction(|c, v| c.clarify.threshold = v)),
    key("clarify",   "maxRounds",            "5",                       As::Count(|c, v| c.clarify.max_rounds = v)),
    key("clarify",   "timeout",              "\"180s\"",                As::Duration(|c, v| c.clarify.timeout = v)),
    key("autopilot", "enabled",              "true",                    As::Boolean(|c, v| c.autopilot.enabled = v)),
    key("autopilot", "ciRounds",             "2",                       As::Count(|c, v| c.autopilot.ci_rounds = v)),
    key("autopilot", "conflictRounds",       "2",                       As::Count(|c, v| c.autopilot.conflict_rounds = v)),
    key("publish",   "allowWorkflowChanges", "true",                    As::Boolean(|c, v| c.publish.allow_workflow_changes = v)),
];

/// One row of [`KEYS`].
struct Key {
    section: &'static str,
    name: &'static str,
    example: &'static str,
    read: As,
}

const fn key(section: &'static str, name: &'static str, example: &'static str, read: As) -> Key {
    Key {
        section,
        name,
        example,
        read,
    }
}

/// How a key's value is read and checked (by the [`Section`] reader of the same name), and the
/// setter that stores it in the [`Config`].
enum As {
    Word(fn(&mut Config, String)),
    Count(fn(&mut Config, u32)),
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
    // A `[questions]` or `[clarify]` table turns its feature on unless its `enabled` says otherwise.
    let present = |section| tables.iter().any(|(name, _)| *name == section);
    config.questions.enabled |= present("questions");
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
        let identity = IDENTITY_KEYS.iter().copied();
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
            rounds: defaults::REVIEW_ROUNDS,
        },
        budget: Budget::default(),
        cluster: Cluster::default(),
        questions: defaults::questions(),
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

/// The number of Docker's `--memory` syntax (`512m`, `4g`, `1.5GiB`), or `None` when `text` is not
/// that syntax.
fn memory_size(text: &str) -> Option<f64> {
    let unit_start = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(unit_start);
    let number_ok = number.split('.').all(|digits| !digits.is_empty());
    let unit = unit.to_ascii_lowercase();
    let unit = unit
        .strip_prefix(['k', 'm', 'g', 't', 'p'])
        .unwrap_or(&unit);
    let unit = unit.strip_prefix('i').unwrap_or(unit);
    let unit = unit.strip_prefix('b').unwrap_or(unit);
    if !(number_ok && unit.is_empty()) {
        return None;
    }
    number.parse().ok()
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
    use super::{KEYS, SECTIONS};

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

    /// The example an error shows as the fix is itself accepted.
    #[test]
    fn every_example_is_a_valid_value() {
        for key in KEYS {
            let assignment = format!("{} = {}\n", key.name, key.example);
            let (top, table) = match key.section {
                "" => (assignment, String::new()),
                section => (String::new(), format!("[{section}]\n{assignment}")),
            };
            let text =
                format!("repo = \"acme/widget\"\nforgeHost = \"forge.example.dev\"\n{top}{table}");
            let path = std::path::Path::new("/project/.sandcastle/config.toml");
            if let Err(error) = crate::parse(path, &text) {
                panic!("the example of `{}` is refused: {error}", key.name);
            }
        }
    }
}
