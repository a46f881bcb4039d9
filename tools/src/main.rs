//! The `rnic` command line.
//!
//! Being written: the formatting and protocol modules exist (in the `rnic_tools` library); the
//! commands arrive next. Until then every invocation says so and exits with status 2.

use std::process::ExitCode;

fn main() -> ExitCode {
    let cmd = std::env::args()
        .nth(1)
        .unwrap_or_else(|| String::from("(none)"));
    eprintln!(
        "rnic: command `{cmd}` is not yet available: the rnic command line is not implemented \
         yet (see the status table in README.md)"
    );
    ExitCode::from(2)
}
