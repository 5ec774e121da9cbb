//! `fmt`: run the project's format steps (default: cargo clippy --fix, then cargo fmt).
fn main() -> std::process::ExitCode {
    sandcastle_steps::main(sandcastle_steps::Steps::Fmt)
}
