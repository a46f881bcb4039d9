//! The Atomic Extended Transport Header (28 bytes, packed) and the Atomic ACK Extended
//! Transport Header (8 bytes).

use super::{HeaderKind, WireError, be32, be64};

/// The AtomicETH's fields (roce-v2.md section 2), by byte range.
mod field {
    use crate::wire::Field;

    /// VA: the remote virtual address.
    pub(super) const VA: Field = 0..8;
    /// R_Key.
    pub(super) const R_KEY: Field = 8..12;
    /// Swap (or Add) Data.
    pub(super) const SWAP_ADD_DATA: Field = 12..20;
    /// Compare Data.
    pub(super) const COMPARE_DATA: Field = 20..28;
}

/// The AtomicAckETH's fields (roce-v2.md section 2), by byte range.
mod ack_field {
    use crate::wire::Field;

    /// Original Remote Data: the value before the atomic operation.
    pub(super) const ORIG_REMOTE_DATA: Field = 0..8;
}

/// Length of the AtomicETH.
pub(crate) const ATOMIC_ETH_LEN: usize = field::COMPARE_DATA.end;
/// Length of the AtomicAckETH.
pub(crate) const ATOMIC_ACK_ETH_LEN: usize = ack_field::ORIG_REMOTE_DATA.end;

header_view!(
    /// A zero-copy view of an AtomicETH: VA(8), R_Key(4), Swap/Add(8), Compare(8), packed (the
    /// 64-bit fields are not 8-byte aligned in the frame).
    ///
    /// ```
    /// use rnic_emulator::wire::AtomicEthHeader;
    ///
    /// let mut buf = [0u8; 28];
    /// buf[19] = 5; // swap/add data: bytes 12..20
    /// let h = AtomicEthHeader::new_checked(&buf[..]).unwrap();
    /// assert_eq!((h.swap_add(), h.compare()), (5, 0));
    /// ```
    AtomicEthHeader,
    ATOMIC_ETH_LEN,
    HeaderKind::AtomicEth
);

impl<T: AsRef<[u8]>> AtomicEthHeader<T> {
    /// Remote virtual address (8-byte aligned for a valid request).
    pub fn virtual_addr(&self) -> u64 {
        be64(self.buffer.as_ref(), field::VA.start)
    }

    /// Remote key.
    pub fn rkey(&self) -> u32 {
        be32(self.buffer.as_ref(), field::R_KEY.start)
    }

    /// Swap value (COMPARE_SWAP) or addend (FETCH_ADD).
    pub fn swap_add(&self) -> u64 {
        be64(self.buffer.as_ref(), field::SWAP_ADD_DATA.start)
    }

    /// Compare value (COMPARE_SWAP; FETCH_ADD ignores it).
    pub fn compare(&self) -> u64 {
        be64(self.buffer.as_ref(), field::COMPARE_DATA.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> AtomicEthHeader<T> {
    /// Sets the remote virtual address.
    pub fn set_virtual_addr(&mut self, va: u64) {
        self.buffer.as_mut()[field::VA].copy_from_slice(&va.to_be_bytes());
    }

    /// Sets the remote key.
    pub fn set_rkey(&mut self, rkey: u32) {
        self.buffer.as_mut()[field::R_KEY].copy_from_slice(&rkey.to_be_bytes());
    }

    /// Sets the swap value or addend.
    pub fn set_swap_add(&mut self, v: u64) {
        self.buffer.as_mut()[field::SWAP_ADD_DATA].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the compare value.
    pub fn set_compare(&mut self, v: u64) {
        self.buffer.as_mut()[field::COMPARE_DATA].copy_from_slice(&v.to_be_bytes());
    }
}

/// A parsed AtomicETH.
///
/// ```
/// use rnic_emulator::wire::{AtomicEthHeader, AtomicEthRepr};
///
/// let repr = AtomicEthRepr { virtual_addr: 0x1000, rkey: 9, swap_add: 1, compare: 0 };
/// let mut buf = [0u8; 28];
/// repr.emit(&mut AtomicEthHeader::new_unchecked(&mut buf[..]));
/// assert_eq!(repr.buffer_len(), 28);
/// assert_eq!(AtomicEthRepr::parse(&AtomicEthHeader::new_checked(&buf[..])?)?, repr);
/// # Ok::<(), rnic_emulator::wire::WireError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicEthRepr {
    /// Remote virtual address.
    pub virtual_addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap value (COMPARE_SWAP) or addend (FETCH_ADD).
    pub swap_add: u64,
    /// Compare value (COMPARE_SWAP).
    pub compare: u64,
}

impl AtomicEthRepr {
    /// Parses an AtomicETH (every value is valid on the wire; alignment is the responder's
    /// check).
    pub fn parse<T: AsRef<[u8]>>(header: &AtomicEthHeader<T>) -> Result<Self, WireError> {
        Ok(AtomicEthRepr {
            virtual_addr: header.virtual_addr(),
            rkey: header.rkey(),
            swap_add: header.swap_add(),
            compare: header.compare(),
        })
    }

    /// The header length in bytes (28).
    pub const fn buffer_len(&self) -> usize {
        ATOMIC_ETH_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut AtomicEthHeader<T>) {
        header.set_virtual_addr(self.virtual_addr);
        header.set_rkey(self.rkey);
        header.set_swap_add(self.swap_add);
        header.set_compare(self.compare);
    }
}

header_view!(
    /// A zero-copy view of an AtomicAckETH: the original remote data (8).
    ///
    /// ```
    /// use rnic_emulator::wire::AtomicAckEthHeader;
    ///
    /// let h = AtomicAckEthHeader::new_checked(&[0, 0, 0, 0, 0, 0, 1, 0][..]).unwrap();
    /// assert_eq!(h.orig_data(), 256);
    /// ```
    AtomicAckEthHeader,
    ATOMIC_ACK_ETH_LEN,
    HeaderKind::AtomicAckEth
);

impl<T: AsRef<[u8]>> AtomicAckEthHeader<T> {
    /// The value at the remote address before the atomic operation.
    pub fn orig_data(&self) -> u64 {
        be64(self.buffer.as_ref(), ack_field::ORIG_REMOTE_DATA.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> AtomicAckEthHeader<T> {
    /// Sets the original remote data.
    pub fn set_orig_data(&mut self, v: u64) {
        self.buffer.as_mut()[ack_field::ORIG_REMOTE_DATA].copy_from_slice(&v.to_be_bytes());
    }
}

/// A parsed AtomicAckETH.
///
/// ```
/// use rnic_emulator::wire::{AtomicAckEthHeader, AtomicAckEthRepr};
///
/// let mut buf = [0u8; 8];
/// AtomicAckEthRepr { orig_data: 42 }.emit(&mut AtomicAckEthHeader::new_unchecked(&mut buf[..]));
/// assert_eq!(buf, 42u64.to_be_bytes());
/// let h = AtomicAckEthHeader::new_checked(&buf[..])?;
/// assert_eq!(AtomicAckEthRepr::parse(&h)?.orig_data, 42);
/// # Ok::<(), rnic_emulator::wire::WireError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicAckEthRepr {
    /// The value at the remote address before the atomic operation.
    pub orig_data: u64,
}

impl AtomicAckEthRepr {
    /// Parses an AtomicAckETH (every value is valid).
    pub fn parse<T: AsRef<[u8]>>(header: &AtomicAckEthHeader<T>) -> Result<Self, WireError> {
        Ok(AtomicAckEthRepr {
            orig_data: header.orig_data(),
        })
    }

    /// The header length in bytes (8).
    pub const fn buffer_len(&self) -> usize {
        ATOMIC_ACK_ETH_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut AtomicAckEthHeader<T>) {
        header.set_orig_data(self.orig_data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_eth_is_packed() {
        let repr = AtomicEthRepr {
            virtual_addr: 0x1000,
            rkey: 0xAABB_CCDD,
            swap_add: 0x0102_0304_0506_0708,
            compare: 0x1112_1314_1516_1718,
        };
        let mut buf = [0u8; 28];
        repr.emit(&mut AtomicEthHeader::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[8..12], &[0xAA, 0xBB, 0xCC, 0xDD]);
        assert_eq!(&buf[12..20], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(
            &buf[20..28],
            &[0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18]
        );
        assert_eq!(
            AtomicEthRepr::parse(&AtomicEthHeader::new_checked(&buf[..]).unwrap()),
            Ok(repr)
        );
        assert!(AtomicEthHeader::new_checked(&buf[..27]).is_err());
    }

    #[test]
    fn atomic_ack_eth() {
        let repr = AtomicAckEthRepr { orig_data: 42 };
        let mut buf = [0u8; 8];
        repr.emit(&mut AtomicAckEthHeader::new_unchecked(&mut buf[..]));
        assert_eq!(buf, [0, 0, 0, 0, 0, 0, 0, 42]);
        assert_eq!(
            AtomicAckEthRepr::parse(&AtomicAckEthHeader::new_checked(&buf[..]).unwrap()),
            Ok(repr)
        );
        assert!(AtomicAckEthHeader::new_checked(&buf[..7]).is_err());
    }
}
