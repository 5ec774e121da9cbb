//! What the run shows while it works: a live view on a terminal (one line per issue with lane, role,
//! iteration n/max, last tool call, elapsed time, cost so far), plain timestamped lines otherwise.
//! Every line goes through one rule, [`Progress::printable`]: redacted, and with every control
//! character escaped, the newline included, on a terminal or not: one call writes one line, so no
//! text inside it (an agent's, the forge's) can start another. A prompt to a person (the `terminal`
//! question handler) pauses the live view: its lines are held back and shown when the prompt is done.
use crate::secrets::Redactor;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One issue's (or pull request's) current state, as the view shows it.
#[derive(Debug, Clone)]
pub struct Status {
    /// `issue #42`, `pull request #7`.
    pub key: String,
    /// `rework`, `plan`, `implement`.
    pub lane: String,
    pub role: String,
    pub iteration: u32,
    pub max_iterations: u32,
    pub last_tool: String,
    pub cost_usd: f64,
}

/// Shared by every worker thread; a clone is a handle on the same view.
#[derive(Clone)]
pub struct Progress {
    redactor: Redactor,
    view: Arc<Mutex<View>>,
}

enum View {
    Live {
        multi: MultiProgress,
        bars: HashMap<String, ProgressBar>,
        /// While a prompt has the terminal: the lines to show after it.
        held: Option<Vec<String>>,
    },
    Plain {
        out: Box<dyn Write + Send>,
        shown: HashMap<String, Shown>,
    },
}

/// What a plain line last said about one key, to print again only when it changes.
struct Shown {
    started: Instant,
    role: String,
    iteration: u32,
    tool: String,
    cost_usd: f64,
}

impl Progress {
    /// Live when stderr is a terminal, plain otherwise.
    pub fn new(redactor: Redactor) -> Progress {
        if std::io::stderr().is_terminal() {
            Progress {
                redactor,
                view: Arc::new(Mutex::new(View::Live {
                    multi: MultiProgress::new(),
                    bars: HashMap::new(),
                    held: None,
                })),
            }
        } else {
            Progress::plain(redactor, Box::new(std::io::stderr()))
        }
    }

    /// Plain timestamped lines to `out`.
    fn plain(redactor: Redactor, out: Box<dyn Write + Send>) -> Progress {
        Progress {
            redactor,
            view: Arc::new(Mutex::new(View::Plain {
                out,
                shown: HashMap::new(),
            })),
        }
    }

    /// Creates or updates the line for `status.key`.
    pub fn update(&self, status: &Status) {
        let mut view = self.view();
        match &mut *view {
            View::Live { multi, bars, .. } => {
                let prefix = self.printable(&format!(
                    "{}  {}  {} {}/{}",
                    status.key, status.lane, status.role, status.iteration, status.max_iterations
                ));
                let message = self.printable(&status.last_tool);
                let position = cents(status.cost_usd);
                // A new line is filled in before it is added, so it is never drawn blank.
                let bar = bars.entry(status.key.clone()).or_insert_with(|| {
                    multi.add(
                        live_bar()
                            .with_prefix(prefix.clone())
                            .with_message(message.clone())
                            .with_position(position),
                    )
                });
                bar.set_prefix(prefix);
                bar.set_message(message);
                bar.set_position(position);
            }
            View::Plain { out, shown } => {
                let changed = match shown.get(&status.key) {
                    Some(last) => {
                        last.role != status.role
                            || last.iteration != status.iteration
                            || last.tool != status.last_tool
                    }
                    None => true,
                };
                let started = shown
                    .get(&status.key)
                    .map_or_else(Instant::now, |last| last.started);
                shown.insert(
                    status.key.clone(),
                    Shown {
                        started,
                        role: status.role.clone(),
                        iteration: status.iteration,
                        tool: status.last_tool.clone(),
                        cost_usd: status.cost_usd,
                    },
                );
                if changed {
                    let mut line = format!(
                        "{} {} {} {}/{}",
                        status.key,
                        status.lane,
                        status.role,
                        status.iteration,
                        status.max_iterations
                    );
                    if !status.last_tool.is_empty() {
                        let _ = write!(line, " {}", status.last_tool);
                    }
                    let _ = write!(line, " {}", dollars(status.cost_usd));
                    self.print_plain(out, &line);
                }
            }
        }
    }

    /// The work on `key` is over; `outcome` is one short line.
    pub fn finish(&self, key: &str, outcome: &str) {
        let mut view = self.view();
        match &mut *view {
            View::Live { multi, bars, held } => {
                // Finished work leaves the live area and stays above it as a plain line.
                let line = match bars.remove(key) {
                    Some(bar) => {
                        let line = format!(
                            "{key}  {outcome}  ({}, {})",
                            clock(bar.elapsed()),
                            dollars(bar.position() as f64 / 100.0)
                        );
                        bar.finish_and_clear();
                        line
                    }
                    None => format!("{key}  {outcome}"),
                };
                self.println(multi, held, &line);
            }
            View::Plain { out, shown } => {
                let line = match shown.remove(key) {
                    Some(last) => format!(
                        "{key} {outcome} ({}, {})",
                        clock(last.started.elapsed()),
                        dollars(last.cost_usd)
                    ),
                    None => format!("{key} {outcome}"),
                };
                self.print_plain(out, &line);
            }
        }
    }

    /// A message not tied to one line (timestamped when plain).
    pub fn note(&self, message: &str) {
        let mut view = self.view();
        match &mut *view {
            View::Live { multi, held, .. } => self.println(multi, held, message),
            View::Plain { out, .. } => self.print_plain(out, message),
        }
    }

    /// Hands the terminal to a prompt until the returned guard is dropped: the live lines are
    /// cleared and stop drawing, and what the run says meanwhile is shown afterwards.
    pub fn pause(&self) -> Paused<'_> {
        if let View::Live { multi, held, .. } = &mut *self.view() {
            let _ = multi.clear();
            multi.set_draw_target(ProgressDrawTarget::hidden());
            held.get_or_insert_with(Vec::new);
        }
        Paused { progress: self }
    }

    /// What every line this view writes, and every prompt it shows, is made of: `text` redacted,
    /// with its control characters escaped (see [`escape_controls`]).
    pub fn printable(&self, text: &str) -> String {
        escape_controls(&self.redactor.redact(text))
    }

    /// A line above the live lines, or held back while a prompt has the terminal; a closed
    /// stderr is nothing to report to.
    fn println(&self, multi: &MultiProgress, held: &mut Option<Vec<String>>, line: &str) {
        let line = self.printable(line);
        match held {
            Some(lines) => lines.push(line),
            None => {
                let _ = multi.println(line);
            }
        }
    }

    /// Lines for stdout (the closing summary), each one line as [`Progress::printable`] makes it,
    /// printed with the live lines out of the way so neither overwrites the other.
    pub fn print_stdout(&self, lines: &[String]) {
        let view = self.view();
        let print = || {
            let mut stdout = std::io::stdout().lock();
            for line in lines {
                let _ = writeln!(stdout, "{}", self.printable(line));
            }
            let _ = stdout.flush();
        };
        match &*view {
            View::Live { multi, .. } => multi.suspend(print),
            View::Plain { .. } => print(),
        }
    }

    /// A panicked worker leaves the view usable.
    fn view(&self) -> std::sync::MutexGuard<'_, View> {
        self.view
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn print_plain(&self, out: &mut Box<dyn Write + Send>, line: &str) {
        let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ");
        let _ = writeln!(out, "{now} {}", self.printable(line));
        let _ = out.flush();
    }
}

/// The live view paused for a prompt; dropping it draws the view again.
pub struct Paused<'a> {
    progress: &'a Progress,
}

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        if let View::Live { multi, held, .. } = &mut *self.progress.view() {
            multi.set_draw_target(ProgressDrawTarget::stderr());
            for line in held.take().unwrap_or_default() {
                let _ = multi.println(line);
            }
        }
    }
}

/// `text` as one line: every control character (C0, DEL and C1, the newline and carriage return
/// included), the line and paragraph separators (U+2028, U+2029) and every bidirectional-text control
/// written as its Rust escape (`\n`, `\u{1b}`, `\u{202e}`). So text from outside (an agent's tool
/// call, summary or ask, a forge login, an error) cannot start a line that reads as another of
/// sandcastle's, move the cursor, recolour or retitle the terminal, write its clipboard (OSC 52),
/// ask it for a reply, or reorder what a line shows.
pub fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() || breaks_or_reorders(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// The line and paragraph separators and the bidirectional-text controls: embeddings and overrides
/// (U+202A–U+202E), isolates (U+2066–U+2069), the marks (U+200E, U+200F, U+061C).
fn breaks_or_reorders(c: char) -> bool {
    matches!(
        c,
        '\u{2028}'
            | '\u{2029}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2066}'..='\u{2069}'
            | '\u{200E}'
            | '\u{200F}'
            | '\u{061C}'
    )
}

/// One live line: `issue #42  implement  implementer 2/5  Bash: cargo test  1m12s  $0.42`. The tool
/// call takes the width that is left (cut to fit); the cost rides in the bar's position, in cents.
fn live_bar() -> ProgressBar {
    let style = ProgressStyle::with_template("{prefix}  {wide_msg}  {clock}  {cost}")
        .expect("the live template is valid")
        .with_key(
            "clock",
            |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = w.write_str(&clock(state.elapsed()));
            },
        )
        .with_key(
            "cost",
            |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "${}.{:02}", state.pos() / 100, state.pos() % 100);
            },
        );
    let bar = ProgressBar::new_spinner().with_style(style);
    bar.enable_steady_tick(Duration::from_secs(1));
    bar
}

fn cents(usd: f64) -> u64 {
    (usd.max(0.0) * 100.0).round() as u64
}

fn dollars(usd: f64) -> String {
    let cents = cents(usd);
    format!("${}.{:02}", cents / 100, cents % 100)
}

/// `12s`, `1m12s`, `1h02m`.
fn clock(elapsed: Duration) -> String {
    let secs = elapsed.as_secs();
    match (secs / 3600, secs % 3600 / 60, secs % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::EnvFile;
    use std::sync::Arc;

    /// A `Write` the test can read back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().write(buf)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        fn lines(&self) -> Vec<String> {
            String::from_utf8(self.0.lock().unwrap().clone())
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect()
        }
    }

    fn redactor() -> Redactor {
        Redactor::new(&EnvFile {
            vars: vec![("FORGEJO_TOKEN".into(), "tok-123456".into())],
        })
    }

    fn status(tool: &str, iteration: u32, cost: f64) -> Status {
        Status {
            key: "issue #42".into(),
            lane: "implement".into(),
            role: "implementer".into(),
            iteration,
            max_iterations: 5,
            last_tool: tool.into(),
            cost_usd: cost,
        }
    }

    /// The line without its timestamp, which is checked for shape.
    fn untimed(line: &str) -> &str {
        let (stamp, rest) = line.split_once(' ').unwrap();
        assert!(
            stamp.len() == 20 && stamp.parse::<jiff::Timestamp>().is_ok(),
            "{stamp}"
        );
        rest
    }

    #[test]
    fn plain_lines_are_timestamped_redacted_and_only_printed_on_change() {
        let out = Shared::default();
        let progress = Progress::plain(redactor(), Box::new(out.clone()));
        progress.update(&status("", 1, 0.0));
        progress.update(&status("Bash: cargo test", 1, 0.1));
        progress.update(&status("Bash: cargo test", 1, 0.2)); // cost alone: no line
        progress.update(&status("Bash: cargo test", 2, 0.42)); // new iteration
        progress.update(&status("Bash: echo tok-123456", 2, 0.5));
        progress.note("pushed with tok-123456");
        progress.finish("issue #42", "pull request #7 opened");

        let lines = out.lines();
        let lines: Vec<&str> = lines.iter().map(|line| untimed(line)).collect();
        assert_eq!(
            lines[..5],
            [
                "issue #42 implement implementer 1/5 $0.00",
                "issue #42 implement implementer 1/5 Bash: cargo test $0.10",
                "issue #42 implement implementer 2/5 Bash: cargo test $0.42",
                "issue #42 implement implementer 2/5 Bash: echo [redacted] $0.50",
                "pushed with [redacted]",
            ]
        );
        assert!(
            lines[5].starts_with("issue #42 pull request #7 opened (0s, $0.50)"),
            "{}",
            lines[5]
        );
    }

    /// Agent text shown on the terminal (a question's prompt) cannot steer the terminal.
    #[test]
    fn printable_text_has_no_control_sequences_and_no_secrets() {
        let progress = Progress::plain(redactor(), Box::new(Shared::default()));
        assert_eq!(
            progress.printable("pick\x1b[2J\x1b]0;owned\x07 one\r\ntok-123456\u{9b}\u{202e}\n"),
            "pick\\u{1b}[2J\\u{1b}]0;owned\\u{7} one\\r\\n[redacted]\\u{9b}\\u{202e}\\n"
        );
    }

    /// Every character that breaks a line or reorders one is escaped, in every range; a
    /// backslash, a zero-width space and other printable text stay as they are.
    #[test]
    fn every_line_break_and_bidi_control_is_escaped() {
        for c in [
            '\n', '\r', '\x0b', '\x0c', '\0', '\x7f', '\u{85}', '\u{9f}', '\u{2028}', '\u{2029}',
            '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{202e}', '\u{2066}', '\u{2067}',
            '\u{2068}', '\u{2069}', '\u{200e}', '\u{200f}', '\u{61c}',
        ] {
            let escaped = escape_controls(&format!("a{c}b"));
            assert_eq!(escaped, format!("a{}b", c.escape_default()), "{c:?}");
            assert!(
                escaped.is_ascii(),
                "{c:?} leaves no such character: {escaped}"
            );
        }
        let plain = "a\\n \u{200b} é ✅ <b>";
        assert_eq!(escape_controls(plain), plain);
    }

    /// Every line the view writes follows the one rule: status lines, notes and finished work; an
    /// agent's text with newlines in a note is one line that forges no other.
    #[test]
    fn no_line_carries_a_control_character_and_one_call_is_one_line() {
        let out = Shared::default();
        let progress = Progress::plain(redactor(), Box::new(out.clone()));
        let hostile = "x\x1b]52;c;b3duZWQ=\x07\x1b[6n\r\n2026-01-01T00:00:00Z issue #1 pull request #9 opened\u{2028}y";
        progress.update(&status(&format!("Bash: {hostile}"), 1, 0.0));
        progress.note(&format!("refused: {hostile}"));
        progress.finish("issue #42", hostile);
        let bytes = out.0.lock().unwrap().clone();
        assert!(
            !bytes.iter().any(|b| b.is_ascii_control() && *b != b'\n'),
            "{:?}",
            String::from_utf8_lossy(&bytes)
        );
        assert_eq!(out.lines().len(), 3, "{:?}", out.lines());
        assert!(out.lines()[1].ends_with(
            "refused: x\\u{1b}]52;c;b3duZWQ=\\u{7}\\u{1b}[6n\\r\\n2026-01-01T00:00:00Z issue #1 pull request #9 opened\\u{2028}y"
        ));
    }

    #[test]
    fn clock_and_dollars_read_short() {
        assert_eq!(clock(Duration::from_secs(7)), "7s");
        assert_eq!(clock(Duration::from_secs(72)), "1m12s");
        assert_eq!(clock(Duration::from_secs(65)), "1m05s");
        assert_eq!(clock(Duration::from_secs(3720)), "1h02m");
        assert_eq!(dollars(0.4249), "$0.42");
        assert_eq!(dollars(12.005), "$12.01");
        assert_eq!(dollars(-1.0), "$0.00");
    }

    /// Drives the live view for a few seconds, for a person (or tmux's capture-pane) to look at:
    /// `cargo test -p sandcastle --bin sandcastle live_view_demo -- --ignored --nocapture`
    /// in a terminal.
    #[test]
    #[ignore = "manual: shows the live view on a terminal"]
    fn live_view_demo() {
        assert!(std::io::stderr().is_terminal(), "run it on a terminal");
        let progress = Progress::new(redactor());
        progress.note("sandcastle run: 2 issues, token tok-123456");
        let mut other = status("", 1, 0.0);
        other.key = "issue #43".into();
        for step in 0..6u32 {
            progress.update(&status(
                &format!("Bash: cargo test --step {step}"),
                step / 2 + 1,
                f64::from(step) * 0.07,
            ));
            other.last_tool = format!("Edit: src/lib{step}.rs");
            other.cost_usd = f64::from(step) * 0.03;
            progress.update(&other);
            std::thread::sleep(Duration::from_millis(700));
        }
        progress.finish("issue #43", "pull request #9 opened, ready-for-human");
        std::thread::sleep(Duration::from_secs(2));
    }
}
