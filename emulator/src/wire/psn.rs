//! PSN arithmetic: packet sequence numbers are 24 bits wide and wrap, so order is decided in
//! the half space around a PSN.

/// Adds `n` to a 24-bit PSN.
pub(crate) const fn psn_add(psn: u32, n: u32) -> u32 {
    psn.wrapping_add(n) & 0xFF_FFFF
}

/// Compares two 24-bit PSNs in the half space: negative when `a` is before `b`.
pub(crate) const fn psn_cmp(a: u32, b: u32) -> i32 {
    (a.wrapping_sub(b) << 8) as i32
}
