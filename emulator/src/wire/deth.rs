//! The Datagram Extended Transport Header (8 bytes, UD).

use super::{HeaderKind, WireError, be24, be32, put24};

/// The DETH's fields (roce-v2.md section 2), by byte offset or range.
mod field {
    use crate::wire::Field;

    /// Q_Key.
    pub(super) const Q_KEY: Field = 0..4;
    /// Reserved (sent as zero).
    pub(super) const RESV8: usize = 4;
    /// SrcQP.
    pub(super) const SRC_QP: Field = 5..8;
}

/// Length of the DETH.
pub(crate) const DETH_LEN: usize = field::SRC_QP.end;

header_view!(
    /// A zero-copy view of a DETH: Q_Key(4), reserved(1), SrcQP(3).
    ///
    /// ```
    /// use rnic_emulator::wire::DethHeader;
    ///
    /// let h = DethHeader::new_checked(&[0, 0, 0, 7, 0xFF, 0, 0, 3][..]).unwrap();
    /// assert_eq!((h.qkey(), h.src_qp()), (7, 3)); // the reserved byte is ignored
    /// ```
    DethHeader,
    DETH_LEN,
    HeaderKind::Deth
);

impl<T: AsRef<[u8]>> DethHeader<T> {
    /// Queue key.
    pub fn qkey(&self) -> u32 {
        be32(self.buffer.as_ref(), field::Q_KEY.start)
    }

    /// Source QP number (24 bits).
    pub fn src_qp(&self) -> u32 {
        be24(self.buffer.as_ref(), field::SRC_QP.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> DethHeader<T> {
    /// Sets the queue key.
    pub fn set_qkey(&mut self, qkey: u32) {
        self.buffer.as_mut()[field::Q_KEY].copy_from_slice(&qkey.to_be_bytes());
    }

    /// Sets the source QP (low 24 bits) and clears the reserved byte.
    pub fn set_src_qp(&mut self, qpn: u32) {
        self.buffer.as_mut()[field::RESV8] = 0;
        put24(self.buffer.as_mut(), field::SRC_QP.start, qpn);
    }
}

/// A parsed DETH. The reserved byte is ignored on parse and sent as zero.
///
/// ```
/// use rnic_emulator::wire::{DethHeader, DethRepr};
///
/// let repr = DethRepr { qkey: 0x1111_1111, src_qp: 0x12 };
/// let mut buf = [0u8; 8];
/// repr.emit(&mut DethHeader::new_unchecked(&mut buf[..]));
/// assert_eq!(buf, [0x11, 0x11, 0x11, 0x11, 0, 0, 0, 0x12]);
/// assert_eq!(DethRepr::parse(&DethHeader::new_checked(&buf[..])?)?, repr);
/// # Ok::<(), rnic_emulator::wire::WireError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DethRepr {
    /// Queue key.
    pub qkey: u32,
    /// Source QP (24 bits).
    pub src_qp: u32,
}

impl DethRepr {
    /// Parses a DETH (every value is valid).
    pub fn parse<T: AsRef<[u8]>>(header: &DethHeader<T>) -> Result<Self, WireError> {
        Ok(DethRepr {
            qkey: header.qkey(),
            src_qp: header.src_qp(),
        })
    }

    /// The header length in bytes (8).
    pub const fn buffer_len(&self) -> usize {
        DETH_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut DethHeader<T>) {
        header.set_qkey(self.qkey);
        header.set_src_qp(self.src_qp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let repr = DethRepr {
            qkey: 0x1111_1111,
            src_qp: 0x12_3456,
        };
        let mut buf = [0xAAu8; 8];
        repr.emit(&mut DethHeader::new_unchecked(&mut buf[..]));
        assert_eq!(buf, [0x11, 0x11, 0x11, 0x11, 0, 0x12, 0x34, 0x56]);
        assert_eq!(
            DethRepr::parse(&DethHeader::new_checked(&buf[..]).unwrap()),
            Ok(repr)
        );
        assert!(DethHeader::new_checked(&buf[..7]).is_err());
    }
}
