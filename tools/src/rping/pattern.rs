//! The text rping's client puts in its buffer before each ping: `rdma-ping-<n>: ` and then
//! printable characters from 'A' (65) to 'z' (122), starting one further on each ping, the
//! last byte NUL (`rping_test_client` in librdmacm's `examples/rping.c`).

use std::io::Write;

/// The first character of the run ('A').
pub const FIRST: u8 = 65;
/// The last character of the run ('z'); after it the run starts again at [`FIRST`].
pub const LAST: u8 = 122;

/// The character after `c` in the run.
fn next(c: u8) -> u8 {
    if c >= LAST { FIRST } else { c + 1 }
}

/// The character the run of the ping after one that started at `start` starts at.
pub fn next_start(start: u8) -> u8 {
    next(start)
}

/// Fills `buf` for ping number `ping` whose run starts at `start`, as rping does (the
/// prefix is cut to fit, as `snprintf` cuts it; the last byte is always NUL).
///
/// ```
/// use rnic_tools::rping::pattern::{fill, FIRST};
///
/// let mut buf = [0u8; 26];
/// fill(&mut buf, 0, FIRST);
/// assert_eq!(&buf, b"rdma-ping-0: ABCDEFGHIJKL\0");
/// ```
pub fn fill(buf: &mut [u8], ping: u32, start: u8) {
    let Some(last) = buf.len().checked_sub(1) else {
        return;
    };
    // "rdma-ping-4294967295: " is 22 bytes.
    let mut prefix = [0u8; 24];
    let len = {
        let mut w = &mut prefix[..];
        let _ = write!(w, "rdma-ping-{ping}: ");
        24 - w.len()
    };
    let cc = len.min(last);
    buf[..cc].copy_from_slice(&prefix[..cc]);
    let mut c = start;
    for b in &mut buf[cc..last] {
        *b = c;
        c = next(c);
    }
    buf[last] = 0;
}

/// The bytes of `buf` up to its first NUL (all of it if none): what rping prints with `%s`
/// and how much its server WRITEs back (`strlen(rdma_buf) + 1`, the NUL included).
pub fn c_str(buf: &[u8]) -> &[u8] {
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    &buf[..n]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_wraps_from_z_to_a() {
        let mut buf = [0u8; 80];
        fill(&mut buf, 7, b'x');
        let s = c_str(&buf);
        assert!(s.starts_with(b"rdma-ping-7: xyzABC"));
        assert_eq!(s.len(), 79);
        assert_eq!(buf[79], 0);
        assert_eq!(next_start(LAST), FIRST);
        assert_eq!(next_start(FIRST), FIRST + 1);
    }

    #[test]
    fn a_short_buffer_cuts_the_prefix() {
        let mut buf = [0xffu8; 6];
        fill(&mut buf, 123, FIRST);
        assert_eq!(&buf, b"rdma-\0");
        fill(&mut [], 1, FIRST); // nothing to fill, no panic
        assert_eq!(c_str(b"ab\0cd"), b"ab");
        assert_eq!(c_str(b"abc"), b"abc");
    }
}
