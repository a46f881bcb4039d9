//! The out-of-band TCP connection both rdma-core's ping-pong tools and perftest use to
//! exchange addresses before the first RDMA operation: the server's listener, the client's
//! connect (retried until the server is up) and the fixed-size, NUL-terminated text messages
//! both protocols send.

use crate::error::ToolError;
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Binds the server's listening socket (on all addresses, as rc_pingpong does).
pub fn listen(port: u16) -> Result<TcpListener, ToolError> {
    TcpListener::bind(("0.0.0.0", port)).map_err(|e| {
        if e.kind() == ErrorKind::AddrInUse {
            ToolError::AddressInUse(port)
        } else {
            ToolError::io(&format!("couldn't listen to port {port}"), e)
        }
    })
}

/// Accepts one connection, giving up after `timeout`.
pub fn accept(l: &TcpListener, timeout: Duration) -> Result<TcpStream, ToolError> {
    l.set_nonblocking(true)
        .map_err(|e| ToolError::io("listen", e))?;
    let deadline = Instant::now() + timeout;
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)
                    .map_err(|e| ToolError::io("accept", e))?;
                return Ok(s);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err(ToolError::Timeout(
                        timeout,
                        "waiting for a client to connect".into(),
                    ));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(ToolError::io("accept", e)),
        }
    }
}

/// Connects to `host:port`, retrying refused connections until `timeout` (so a client may be
/// started just before its server).
pub fn connect(host: &str, port: u16, timeout: Duration) -> Result<TcpStream, ToolError> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| ToolError::Connect(format!("{host}:{port}"), e.to_string()))?
        .filter(SocketAddr::is_ipv4)
        .collect();
    if addrs.is_empty() {
        return Err(ToolError::Connect(
            format!("{host}:{port}"),
            "no IPv4 address".into(),
        ));
    }
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    loop {
        for a in &addrs {
            let left = deadline.saturating_duration_since(Instant::now());
            match TcpStream::connect_timeout(a, left.max(Duration::from_millis(10))) {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    return Ok(s);
                }
                Err(e) => last = e.to_string(),
            }
        }
        if Instant::now() >= deadline {
            return Err(ToolError::Connect(
                format!("{host}:{port}"),
                format!("{last} (gave up after {}s)", timeout.as_secs_f64()),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Writes `s` into the fixed-size message `out` as C's `sprintf` into a zeroed buffer of that
/// size would leave it: at most `out.len() - 1` bytes, then NUL padding.
///
/// ```
/// let mut m = [0xffu8; 6];
/// rnic_tools::oob::put_text(&mut m, "0001:abcd");
/// assert_eq!(&m, b"0001:\0");
/// ```
pub fn put_text(out: &mut [u8], s: &str) {
    let n = s.len().min(out.len().saturating_sub(1));
    out[..n].copy_from_slice(&s.as_bytes()[..n]);
    out[n..].fill(0);
}

/// The text of a received message: its bytes up to the first NUL (all of them without one),
/// or `None` if they are not UTF-8.
///
/// ```
/// assert_eq!(rnic_tools::oob::text(b"3\0\0"), Some("3"));
/// assert_eq!(rnic_tools::oob::text(b"\xff\0"), None);
/// ```
pub fn text(msg: &[u8]) -> Option<&str> {
    let end = msg.iter().position(|&b| b == 0).unwrap_or(msg.len());
    std::str::from_utf8(&msg[..end]).ok()
}
