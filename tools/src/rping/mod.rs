//! rping (librdmacm's `examples/rping.c`): an RDMA ping-pong over a connection the CM made.
//! The client advertises a buffer, the server RDMA READs it, then RDMA WRITEs it back into a
//! second buffer the client advertises; `-V` checks the echo, `-v` prints each ping.
//!
//! - [`info`]: the 16-byte message the peers exchange (`struct rping_rdma_info`);
//! - [`pattern`]: the text the client pings with;
//! - [`session`]: the loop of both roles on a connected RC QP, with rping's queue depths;
//! - [`run`]: `rnic rping` itself: its flags, the connection through the connection manager
//!   (address and route resolution, connect / accept, disconnect), rping's messages and
//!   exit statuses.
//!
//! The session starts once the QP is connected and ends when it leaves RTS.

pub mod info;
pub mod pattern;
pub mod run;
pub mod session;

/// rping's default port (7174).
pub const DEFAULT_PORT: u16 = 7174;
/// rping's default ping size (`cb->size = 64`).
pub const DEFAULT_SIZE: u32 = 64;
/// rping's largest buffer (`RPING_BUFSIZE`, 64 KiB); `-S` must stay below it.
pub const BUFSIZE: u32 = 64 * 1024;
/// rping's smallest `-S` (`RPING_MIN_BUFSIZE`: `sizeof("2147483647")` +
/// `sizeof("rdma-ping-%d: ")`, each with its NUL).
pub const MIN_BUFSIZE: u32 = 11 + 15;

/// Checks `-S` as rping does, with its message.
///
/// ```
/// use rnic_tools::rping::check_size;
///
/// assert!(check_size(64).is_ok());
/// assert_eq!(
///     check_size(25).unwrap_err().to_string(),
///     "Invalid size 25 (valid range is 26 to 65536)"
/// );
/// assert!(check_size(65535).is_ok() && check_size(65536).is_err());
/// ```
pub fn check_size(size: u32) -> Result<u32, crate::ToolError> {
    if (MIN_BUFSIZE..BUFSIZE).contains(&size) {
        Ok(size)
    } else {
        Err(crate::ToolError::Usage(format!(
            "Invalid size {size} (valid range is {MIN_BUFSIZE} to {BUFSIZE})"
        )))
    }
}
