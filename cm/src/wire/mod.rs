//! CM wire formats: the MAD common header ([`Mad`]), one room per CM message, and rdma_cm's
//! IP conventions ([`ip`]). Field positions are named once per message (a `mod field`: byte
//! offset in the message, bit offset from that byte's most significant bit, width), as
//! IBTA's tables give them (Vol. 1, 12.6 and 16.7).

mod mad;
mod msg;

pub mod ip;

pub use mad::{CM_CLASS, CM_CLASS_VERSION, MAD_BASE_VERSION, MAD_HEADER_LEN, MAD_LEN, Mad, Method};
pub use msg::drep::Drep;
pub use msg::dreq::Dreq;
pub use msg::mra::Mra;
pub use msg::rej::{Rej, RejReason};
pub use msg::rep::Rep;
pub use msg::req::{Path, Req};
pub use msg::rtu::Rtu;
pub use msg::sidr::{SidrRep, SidrReq, SidrStatus};

/// Why bytes are not the CM message they should be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Shorter than a MAD (256 bytes).
    #[error("{len} bytes: a MAD is 256")]
    Short {
        /// Bytes given.
        len: usize,
    },
    /// Not base version 1.
    #[error("MAD base version {0}, expected 1")]
    BaseVersion(u8),
    /// Not the CM class (0x07).
    #[error("management class {0:#04x}, expected the CM's 0x07")]
    Class(u8),
    /// Not class version 2.
    #[error("CM class version {0}, expected 2")]
    ClassVersion(u8),
    /// Another message than the one asked for.
    #[error("attribute {found:#06x}, expected {expected:#06x}")]
    Attribute {
        /// The attribute ID in the MAD.
        found: u16,
        /// The one the parser reads.
        expected: u16,
    },
    /// An attribute the CM class does not define.
    #[error("attribute {0:#06x} is not a CM message")]
    UnknownAttribute(u16),
    /// A length field larger than its room (REJ's ARI, SIDR REP's additional information).
    #[error("{what} length {len} exceeds {max}")]
    Length {
        /// Which length.
        what: &'static str,
        /// Its value.
        len: u8,
        /// The room.
        max: u8,
    },
}

/// Where a field sits in a CM message (after the MAD header): `byte` offset, `bit` offset from
/// that byte's most significant bit, `width` in bits (at most 64, within 8 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Field {
    pub(crate) byte: usize,
    pub(crate) bit: usize,
    pub(crate) width: usize,
}

impl Field {
    /// A field of `width` bits at `byte`, `bit`.
    pub(crate) const fn at(byte: usize, bit: usize, width: usize) -> Field {
        Field { byte, bit, width }
    }

    fn offset(self) -> usize {
        (MAD_HEADER_LEN + self.byte) * 8 + self.bit
    }

    /// The field's value in `mad` (a whole MAD, at least [`MAD_LEN`] bytes).
    pub(crate) fn get(self, mad: &[u8]) -> u64 {
        rnic_hw_regs::layout::bits::get(mad, self.offset(), self.width)
    }

    /// Sets the field in `mad` to `value`, truncated to its width.
    pub(crate) fn set(self, mad: &mut [u8], value: u64) {
        let v = if self.width >= 64 {
            value
        } else {
            value & ((1 << self.width) - 1)
        };
        rnic_hw_regs::layout::bits::set(mad, self.offset(), self.width, v);
    }
}

/// `len` bytes at `byte` of the message.
pub(crate) fn bytes<const N: usize>(mad: &[u8], byte: usize) -> [u8; N] {
    let at = MAD_HEADER_LEN + byte;
    let mut out = [0u8; N];
    out.copy_from_slice(&mad[at..at + N]);
    out
}

/// Writes `data` at `byte` of the message.
pub(crate) fn put(mad: &mut [u8], byte: usize, data: &[u8]) {
    let at = MAD_HEADER_LEN + byte;
    mad[at..at + data.len()].copy_from_slice(data);
}

/// Checks `mad` is a CM MAD carrying `attr_id`.
pub(crate) fn check(mad: &[u8], attr_id: u16) -> Result<(), WireError> {
    let m = Mad::parse(mad)?;
    if m.attr_id != attr_id {
        return Err(WireError::Attribute {
            found: m.attr_id,
            expected: attr_id,
        });
    }
    Ok(())
}
