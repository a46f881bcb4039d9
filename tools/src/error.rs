//! The tools' errors: each prints as one line (`rnic: ...`) and exits non-zero.

use std::time::Duration;

/// Everything a command can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// A `-d` argument that names no kind of device.
    #[error(
        "bad device name `{0}` (expected emu:<IPv4>, emu-tap:<ifname>,<IPv4>/<prefix>, emu0, emu1, mlx5_<N> or a PCI address)"
    )]
    BadDeviceName(String),
    /// A `--emu-faults` argument that does not parse.
    #[error("bad fault specification: {0}")]
    BadFaults(String),
    /// A well-formed name with no device behind it.
    #[error("no such device `{0}`{1}")]
    NoSuchDevice(String, String),
    /// No device at all.
    #[error("No IB devices found")]
    NoDevices,
    /// An option that only applies elsewhere, or values that cannot go together.
    #[error("{0}")]
    Usage(String),
    /// The TCP port for the out-of-band exchange is taken.
    #[error("couldn't listen to port {0}: address in use")]
    AddressInUse(u16),
    /// The peer refused or could not be reached.
    #[error("couldn't connect to {0}: {1}")]
    Connect(String, String),
    /// Something did not happen in time.
    #[error("timed out after {secs}s {1}", secs = .0.as_secs_f64())]
    Timeout(Duration, String),
    /// The peer sent something that is not the expected message.
    #[error("peer protocol error: {0}")]
    Protocol(String),
    /// The peer's parameters differ from ours where they must agree.
    #[error("parameters differ from the peer's: {0}")]
    Mismatch(String),
    /// A verb failed (device, PD, MR, CQ, QP, post or poll).
    #[error("{0}")]
    Verbs(String),
    /// A completion with an error status.
    #[error("completion error: {0}")]
    Completion(String),
    /// `-c` found data that differs from what the peer sent.
    #[error("data check failed: {0}")]
    DataCheck(String),
    /// Reading or writing a file or socket.
    #[error("{0}")]
    Io(String),
    /// The command reported in its own words already (rping's lines); exit with this
    /// status.
    #[error("exit status {0}")]
    Exit(u8),
}

impl ToolError {
    /// Wraps an I/O error with what was being done.
    pub fn io(what: &str, e: std::io::Error) -> ToolError {
        match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                ToolError::Io(format!("{what}: timed out"))
            }
            std::io::ErrorKind::UnexpectedEof => {
                ToolError::Io(format!("{what}: the peer closed the connection"))
            }
            _ => ToolError::Io(format!("{what}: {e}")),
        }
    }
}
