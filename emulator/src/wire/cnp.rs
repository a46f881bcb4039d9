//! The 16 reserved bytes that follow the BTH of a RoCE v2 CNP (opcode 0x81).

use super::{HeaderKind, WireError};

/// The CNP block's fields (roce-v2.md section 6), by byte range.
mod field {
    use crate::wire::Field;

    /// Reserved (sent as zero, ignored on receive).
    pub(super) const RESERVED: Field = 0..16;
}

/// Length of the CNP's reserved block.
pub(crate) const CNP_LEN: usize = field::RESERVED.end;

header_view!(
    /// A zero-copy view of a CNP's 16 reserved bytes.
    ///
    /// ```
    /// use rnic_emulator::wire::CnpHeader;
    ///
    /// let mut buf = [1u8; 16];
    /// let mut h = CnpHeader::new_checked(&mut buf[..]).unwrap();
    /// h.clear();
    /// assert_eq!(h.reserved(), &[0; 16]);
    /// ```
    CnpHeader,
    CNP_LEN,
    HeaderKind::Cnp
);

impl<T: AsRef<[u8]>> CnpHeader<T> {
    /// The reserved bytes (sent as zero, ignored on receive).
    pub fn reserved(&self) -> &[u8] {
        &self.buffer.as_ref()[field::RESERVED]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> CnpHeader<T> {
    /// Zeroes the reserved bytes.
    pub fn clear(&mut self) {
        self.buffer.as_mut()[field::RESERVED].fill(0);
    }
}

/// A parsed CNP block: it holds nothing, the reserved bytes are ignored on parse and sent as
/// zero.
///
/// ```
/// use rnic_emulator::wire::{CnpHeader, CnpRepr};
///
/// let mut buf = [0xFFu8; 16];
/// CnpRepr.emit(&mut CnpHeader::new_unchecked(&mut buf[..]));
/// assert_eq!(buf, [0; 16]); // 16 reserved bytes, sent as zero
/// assert_eq!(CnpRepr.buffer_len(), 16);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CnpRepr;

impl CnpRepr {
    /// Parses the reserved block (every value is accepted).
    pub fn parse<T: AsRef<[u8]>>(_header: &CnpHeader<T>) -> Result<Self, WireError> {
        Ok(CnpRepr)
    }

    /// The block length in bytes (16).
    pub const fn buffer_len(&self) -> usize {
        CNP_LEN
    }

    /// Writes 16 zero bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut CnpHeader<T>) {
        header.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emit_zeroes() {
        let mut buf = [0xFFu8; 16];
        CnpRepr.emit(&mut CnpHeader::new_unchecked(&mut buf[..]));
        assert_eq!(buf, [0; 16]);
        let view = CnpHeader::new_checked(&buf[..]).unwrap();
        assert_eq!(view.reserved(), &[0; 16]);
        assert_eq!(CnpRepr::parse(&view), Ok(CnpRepr));
        assert!(CnpHeader::new_checked(&buf[..15]).is_err());
    }
}
