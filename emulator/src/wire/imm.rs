//! The Immediate Data header (4 bytes, the `*_WITH_IMMEDIATE` opcodes).

use super::{HeaderKind, WireError, be32};

/// The ImmDt's fields (roce-v2.md section 2), by byte range.
mod field {
    use crate::wire::Field;

    /// Immediate Data.
    pub(super) const IMMEDIATE_DATA: Field = 0..4;
}

/// Length of the ImmDt.
pub(crate) const IMM_DT_LEN: usize = field::IMMEDIATE_DATA.end;

header_view!(
    /// A zero-copy view of an ImmDt.
    ///
    /// ```
    /// use rnic_emulator::wire::ImmDtHeader;
    ///
    /// assert_eq!(ImmDtHeader::new_checked(&[0, 0, 1, 0][..]).unwrap().imm(), 256);
    /// ```
    ImmDtHeader,
    IMM_DT_LEN,
    HeaderKind::ImmDt
);

impl<T: AsRef<[u8]>> ImmDtHeader<T> {
    /// The immediate data, read as a big-endian integer (verbs' `imm_data` is the same four
    /// bytes in network order).
    pub fn imm(&self) -> u32 {
        be32(self.buffer.as_ref(), field::IMMEDIATE_DATA.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ImmDtHeader<T> {
    /// Sets the immediate data (written big-endian).
    pub fn set_imm(&mut self, imm: u32) {
        self.buffer.as_mut()[field::IMMEDIATE_DATA].copy_from_slice(&imm.to_be_bytes());
    }
}

/// A parsed ImmDt.
///
/// ```
/// use rnic_emulator::wire::{ImmDtHeader, ImmDtRepr};
///
/// let mut buf = [0u8; 4];
/// ImmDtRepr { imm: 0xDEAD_BEEF }.emit(&mut ImmDtHeader::new_unchecked(&mut buf[..]));
/// assert_eq!(buf, [0xDE, 0xAD, 0xBE, 0xEF]);
/// let h = ImmDtHeader::new_checked(&buf[..])?;
/// assert_eq!(ImmDtRepr::parse(&h)?.imm, 0xDEAD_BEEF);
/// # Ok::<(), rnic_emulator::wire::WireError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ImmDtRepr {
    /// The immediate data as a big-endian integer.
    pub imm: u32,
}

impl ImmDtRepr {
    /// Parses an ImmDt (every value is valid).
    pub fn parse<T: AsRef<[u8]>>(header: &ImmDtHeader<T>) -> Result<Self, WireError> {
        Ok(ImmDtRepr { imm: header.imm() })
    }

    /// The header length in bytes (4).
    pub const fn buffer_len(&self) -> usize {
        IMM_DT_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut ImmDtHeader<T>) {
        header.set_imm(self.imm);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let repr = ImmDtRepr { imm: 0xDEAD_BEEF };
        let mut buf = [0u8; 4];
        repr.emit(&mut ImmDtHeader::new_unchecked(&mut buf[..]));
        assert_eq!(buf, [0xDE, 0xAD, 0xBE, 0xEF]);
        assert_eq!(
            ImmDtRepr::parse(&ImmDtHeader::new_checked(&buf[..]).unwrap()),
            Ok(repr)
        );
        assert!(ImmDtHeader::new_checked(&buf[..3]).is_err());
    }
}
