# The Rust toolchain (cargo, rustc, rustfmt, clippy) from rust-overlay: the
# workspace needs a recent stable (edition 2024, rust-version 1.95), and the
# helpers' tests run `cargo fmt` / `cargo clippy`, which nixpkgs' plain rustc
# and cargo do not ship.
{ rust-bin }:
rust-bin.stable.latest.default
