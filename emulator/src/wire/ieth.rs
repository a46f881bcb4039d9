//! The Invalidate Extended Transport Header (4 bytes, SEND_*_WITH_INVALIDATE).

use super::{HeaderKind, WireError, be32};

/// The IETH's fields (roce-v2.md section 2), by byte range.
mod field {
    use crate::wire::Field;

    /// R_Key: the key to invalidate.
    pub(super) const R_KEY: Field = 0..4;
}

/// Length of the IETH.
pub(crate) const IETH_LEN: usize = field::R_KEY.end;

header_view!(
    /// A zero-copy view of an IETH.
    ///
    /// ```
    /// use rnic_emulator::wire::IethHeader;
    ///
    /// assert_eq!(IethHeader::new_checked(&[0, 0, 0x12, 0x34][..]).unwrap().rkey(), 0x1234);
    /// ```
    IethHeader,
    IETH_LEN,
    HeaderKind::Ieth
);

impl<T: AsRef<[u8]>> IethHeader<T> {
    /// The R_Key to invalidate.
    pub fn rkey(&self) -> u32 {
        be32(self.buffer.as_ref(), field::R_KEY.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IethHeader<T> {
    /// Sets the R_Key to invalidate.
    pub fn set_rkey(&mut self, rkey: u32) {
        self.buffer.as_mut()[field::R_KEY].copy_from_slice(&rkey.to_be_bytes());
    }
}

/// A parsed IETH.
///
/// ```
/// use rnic_emulator::wire::{IethHeader, IethRepr};
///
/// let mut buf = [0u8; 4];
/// IethRepr { rkey: 0x0102_0304 }.emit(&mut IethHeader::new_unchecked(&mut buf[..]));
/// assert_eq!(buf, [1, 2, 3, 4]);
/// assert_eq!(IethRepr::parse(&IethHeader::new_checked(&buf[..])?)?.rkey, 0x0102_0304);
/// # Ok::<(), rnic_emulator::wire::WireError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IethRepr {
    /// The R_Key to invalidate.
    pub rkey: u32,
}

impl IethRepr {
    /// Parses an IETH (every value is valid).
    pub fn parse<T: AsRef<[u8]>>(header: &IethHeader<T>) -> Result<Self, WireError> {
        Ok(IethRepr {
            rkey: header.rkey(),
        })
    }

    /// The header length in bytes (4).
    pub const fn buffer_len(&self) -> usize {
        IETH_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut IethHeader<T>) {
        header.set_rkey(self.rkey);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let repr = IethRepr { rkey: 0x0102_0304 };
        let mut buf = [0u8; 4];
        repr.emit(&mut IethHeader::new_unchecked(&mut buf[..]));
        assert_eq!(buf, [1, 2, 3, 4]);
        assert_eq!(
            IethRepr::parse(&IethHeader::new_checked(&buf[..]).unwrap()),
            Ok(repr)
        );
        assert!(IethHeader::new_checked(&buf[..0]).is_err());
    }
}
