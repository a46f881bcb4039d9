//! What the tests that run the `rnic` binary share: running it, its text, and the lock that
//! keeps the runs that move data one at a time.

use std::process::{Child, Command, Output, Stdio};

/// The binary under test.
pub(crate) const RNIC: &str = env!("CARGO_BIN_EXE_rnic");

/// The tests that move data run one at a time: emulated devices are threads, and on a small
/// machine several runs at once can starve them past RC's retransmission limits.
static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Holds the data-moving lock while alive.
pub(crate) fn heavy() -> std::sync::MutexGuard<'static, ()> {
    HEAVY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `rnic` with `args` to the end (logs on stderr only where a test asks for them).
pub(crate) fn rnic(args: &[&str]) -> Output {
    Command::new(RNIC)
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run rnic")
}

/// Starts `rnic` with `args`, its stdout and stderr piped.
pub(crate) fn spawn(args: &[&str]) -> Child {
    Command::new(RNIC)
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rnic")
}

/// A run's stdout and stderr.
pub(crate) fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}
