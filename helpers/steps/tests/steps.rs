//! `fmt` and `check` run against a small real Cargo project, and with custom `[commands]`.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const CARGO_TOML: &str =
    "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n";

const CLEAN_LIB: &str = "\
pub fn add(a: u32, b: u32) -> u32 {
    a + b
}

#[cfg(test)]
mod tests {
    #[test]
    fn adds() {
        assert_eq!(super::add(2, 3), 5);
    }
}
";

struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn cargo(lib: &str) -> Project {
        let project = Project::empty();
        project.write("Cargo.toml", CARGO_TOML);
        project.write("src/lib.rs", lib);
        project
    }

    fn empty() -> Project {
        Project {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, relative: &str, text: &str) {
        let path = self.path().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn config(&self, commands: &str) {
        self.write(
            ".sandcastle/config.toml",
            &format!("repo = \"acme/demo\"\nforgeHost = \"forge.example.dev\"\n{commands}"),
        );
    }

    fn run(&self, binary: &str, cwd: &Path) -> Output {
        Command::new(binary)
            .current_dir(cwd)
            // Keep the project's build out of the workspace's target directory.
            .env("CARGO_TARGET_DIR", self.path().join("target"))
            .output()
            .expect("the binary runs")
    }

    fn check(&self) -> Output {
        self.run(env!("CARGO_BIN_EXE_check"), self.path())
    }

    fn fmt(&self) -> Output {
        self.run(env!("CARGO_BIN_EXE_fmt"), self.path())
    }

    fn lib(&self) -> String {
        std::fs::read_to_string(self.path().join("src/lib.rs")).unwrap()
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The line that names the failed step: the last line of stderr.
fn failure_line(output: &Output) -> String {
    stderr(output)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn check_passes_on_a_clean_project_with_the_default_steps() {
    let project = Project::cargo(CLEAN_LIB);
    let output = project.check();
    let stderr = stderr(&output);
    assert!(output.status.success(), "{stderr}");
    for step in [
        "check: step 1/3: cargo fmt --check",
        "check: step 2/3: cargo clippy --all-targets -- -D warnings",
        "check: step 3/3: cargo test",
    ] {
        assert!(stderr.contains(step), "{step:?} in {stderr}");
    }
    // cargo test's own output streams through.
    assert!(String::from_utf8_lossy(&output.stdout).contains("test tests::adds ... ok"));
}

#[test]
fn check_stops_at_step_1_on_misformatted_code() {
    let project = Project::cargo("pub fn add(a:u32,b:u32)->u32{a+b}\n");
    let output = project.check();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        failure_line(&output),
        "check: step 1/3 failed: cargo fmt --check (exit 1)"
    );
    assert!(
        !stderr(&output).contains("step 2/3"),
        "later steps do not run"
    );
}

#[test]
fn check_fails_at_clippy_with_its_exit_status() {
    let project = Project::cargo("pub fn none(v: &[u32]) -> bool {\n    v.len() == 0\n}\n");
    let output = project.check();
    assert_eq!(output.status.code(), Some(101));
    assert_eq!(
        failure_line(&output),
        "check: step 2/3 failed: cargo clippy --all-targets -- -D warnings (exit 101)"
    );
    assert!(
        stderr(&output).contains("len_zero"),
        "clippy's own output streams through"
    );
}

#[test]
fn check_fails_at_a_failing_test() {
    let project = Project::cargo(&CLEAN_LIB.replace("add(2, 3), 5", "add(2, 3), 6"));
    let output = project.check();
    assert_eq!(output.status.code(), Some(101));
    assert_eq!(
        failure_line(&output),
        "check: step 3/3 failed: cargo test (exit 101)"
    );
}

#[test]
fn fmt_fixes_what_check_rejects() {
    let project = Project::cargo("pub fn none(v:&[u32])->bool{v.len()==0}\n");
    // `cargo clippy --fix` insists on a version-controlled project, as every real one is.
    let init = Command::new("git")
        .args(["init", "-q"])
        .current_dir(project.path())
        .status()
        .unwrap();
    assert!(init.success());
    let output = project.fmt();
    let stderr = stderr(&output);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "fmt: step 1/2: cargo clippy --fix --allow-dirty --allow-staged -- -D warnings"
        )
    );
    assert!(stderr.contains("fmt: step 2/2: cargo fmt"));
    assert_eq!(
        project.lib(),
        "pub fn none(v: &[u32]) -> bool {\n    v.is_empty()\n}\n"
    );
    assert!(project.check().status.success());
}

#[test]
fn custom_steps_run_in_order_and_the_first_failure_stops_the_run() {
    let project = Project::empty();
    project.config("[commands]\ncheck = [[\"true\"], [\"false\"], [\"touch\", \"third-ran\"]]\n");
    let output = project.check();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        failure_line(&output),
        "check: step 2/3 failed: false (exit 1)"
    );
    assert!(!project.path().join("third-ran").exists());
}

#[test]
fn custom_steps_that_pass_run_from_the_project_root_even_from_a_subdirectory() {
    let project = Project::empty();
    project.config("[commands]\nfmt = [[\"touch\", \"first\"], [\"mkdir\", \"second\"]]\n");
    let subdirectory: PathBuf = project.path().join("deep/inside");
    std::fs::create_dir_all(&subdirectory).unwrap();
    let output = project.run(env!("CARGO_BIN_EXE_fmt"), &subdirectory);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(project.path().join("first").is_file());
    assert!(project.path().join("second").is_dir());
}

#[test]
fn a_failing_step_returns_its_own_exit_status() {
    let project = Project::empty();
    project.config("[commands]\ncheck = [[\"sh\", \"-c\", \"exit 7\"]]\n");
    let output = project.check();
    assert_eq!(output.status.code(), Some(7));
    assert_eq!(
        failure_line(&output),
        "check: step 1/1 failed: sh -c 'exit 7' (exit 7)"
    );
}

#[test]
fn a_missing_program_is_named_with_the_fix() {
    let project = Project::empty();
    project.config("[commands]\ncheck = [[\"true\"], [\"no-such-linter-h1\", \"--strict\"]]\n");
    let output = project.check();
    assert_eq!(output.status.code(), Some(127));
    assert_eq!(
        failure_line(&output),
        "check: step 2/2 failed: no-such-linter-h1 --strict (`no-such-linter-h1` not found; install it or \
         change `check` under [commands] in .sandcastle/config.toml)"
    );
}

#[test]
fn an_invalid_config_is_its_one_line_error_and_exit_2() {
    let project = Project::empty();
    project.config("[commands]\nchecks = [[\"true\"]]\n");
    let output = project.check();
    assert_eq!(output.status.code(), Some(2));
    let config = project.path().join(".sandcastle/config.toml");
    assert_eq!(
        stderr(&output),
        format!(
            "check: {}:4:1: unknown key `checks` in [commands]; did you mean `check`?\n",
            config.display()
        )
    );
}

#[test]
fn help_says_where_the_steps_come_from() {
    for (binary, default_step) in [
        (
            env!("CARGO_BIN_EXE_check"),
            "cargo clippy --all-targets -- -D warnings",
        ),
        (
            env!("CARGO_BIN_EXE_fmt"),
            "cargo clippy --fix --allow-dirty --allow-staged -- -D warnings",
        ),
    ] {
        let output = Command::new(binary).arg("--help").output().unwrap();
        assert!(output.status.success());
        let help = String::from_utf8(output.stdout).unwrap();
        assert!(
            help.contains("[commands] in .sandcastle/config.toml"),
            "{help}"
        );
        assert!(help.contains(default_step), "{help}");
    }
}
