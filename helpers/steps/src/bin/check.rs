//! `check`: run the project's check steps (default: cargo fmt --check, clippy, test).
fn main() -> std::process::ExitCode {
    sandcastle_steps::main(sandcastle_steps::Steps::Check)
}
