//! The one message rping's peers send each other: `struct rping_rdma_info` (librdmacm's
//! `examples/rping.c`), a buffer's address, rkey and size, big-endian, 16 bytes.

/// A buffer a peer may READ from or WRITE into (`struct rping_rdma_info`).
///
/// ```
/// use rnic_tools::rping::info::RdmaInfo;
///
/// let info = RdmaInfo { buf: 0x1122_3344_5566_7788, rkey: 0xabcd, size: 64 };
/// let bytes = info.to_bytes();
/// assert_eq!(&bytes[..8], &0x1122_3344_5566_7788u64.to_be_bytes());
/// assert_eq!(RdmaInfo::parse(&bytes), Some(info));
/// assert_eq!(RdmaInfo::parse(&bytes[..15]), None); // rping: "Received bogus data"
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RdmaInfo {
    /// The buffer's address in the sender's registered region (`buf`, `__be64`).
    pub buf: u64,
    /// The region's rkey (`__be32`).
    pub rkey: u32,
    /// The buffer's length in bytes (`__be32`).
    pub size: u32,
}

impl RdmaInfo {
    /// The message's length: rping refuses a receive of any other length.
    pub const LEN: usize = 16;

    /// The message's bytes.
    pub fn to_bytes(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[0..8].copy_from_slice(&self.buf.to_be_bytes());
        b[8..12].copy_from_slice(&self.rkey.to_be_bytes());
        b[12..16].copy_from_slice(&self.size.to_be_bytes());
        b
    }

    /// The message in `b`, which must be exactly [`RdmaInfo::LEN`] bytes.
    pub fn parse(b: &[u8]) -> Option<RdmaInfo> {
        let b: &[u8; Self::LEN] = b.try_into().ok()?;
        let (buf, rest) = b.split_at(8);
        let (rkey, size) = rest.split_at(4);
        Some(RdmaInfo {
            buf: u64::from_be_bytes(buf.try_into().ok()?),
            rkey: u32::from_be_bytes(rkey.try_into().ok()?),
            size: u32::from_be_bytes(size.try_into().ok()?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_big_endian_in_field_order() {
        let i = RdmaInfo {
            buf: 1,
            rkey: 2,
            size: 3,
        };
        assert_eq!(
            i.to_bytes(),
            [0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3]
        );
    }

    #[test]
    fn other_lengths_do_not_parse() {
        for n in [0, 1, 15, 17, 32] {
            assert_eq!(RdmaInfo::parse(&vec![0u8; n]), None, "{n} bytes");
        }
    }
}
