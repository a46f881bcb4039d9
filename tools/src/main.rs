//! The `rnic` command line.
//!
//! Not yet implemented: the commands (devinfo, pingpong, perftest-style benchmarks) arrive with
//! the tools issue. Until then every invocation says so and exits with status 2.

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
