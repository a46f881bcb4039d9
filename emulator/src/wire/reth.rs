//! The RDMA Extended Transport Header (16 bytes): WRITE FIRST / ONLY and READ request.

use super::{HeaderKind, WireError, be32, be64};

/// The RETH's fields (roce-v2.md section 2), by byte range.
mod field {
    use crate::wire::Field;

    /// VA: the remote virtual address.
    pub(super) const VA: Field = 0..8;
    /// R_Key.
    pub(super) const R_KEY: Field = 8..12;
    /// DMALen: the length of the whole message.
    pub(super) const DMA_LEN: Field = 12..16;
}

/// Length of the RETH.
pub(crate) const RETH_LEN: usize = field::DMA_LEN.end;

header_view!(
    /// A zero-copy view of a RETH: VA(8), R_Key(4), DMA length(4).
    ///
    /// ```
    /// use rnic_emulator::wire::RethHeader;
    ///
    /// let mut buf = [0u8; 16];
    /// let mut h = RethHeader::new_checked(&mut buf[..]).unwrap();
    /// h.set_rkey(0xABCD);
    /// h.set_dma_len(64);
    /// assert_eq!((h.rkey(), h.dma_len(), h.virtual_addr()), (0xABCD, 64, 0));
    /// ```
    RethHeader,
    RETH_LEN,
    HeaderKind::Reth
);

impl<T: AsRef<[u8]>> RethHeader<T> {
    /// Remote virtual address.
    pub fn virtual_addr(&self) -> u64 {
        be64(self.buffer.as_ref(), field::VA.start)
    }

    /// Remote key.
    pub fn rkey(&self) -> u32 {
        be32(self.buffer.as_ref(), field::R_KEY.start)
    }

    /// DMA length: the length of the whole message.
    pub fn dma_len(&self) -> u32 {
        be32(self.buffer.as_ref(), field::DMA_LEN.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> RethHeader<T> {
    /// Sets the remote virtual address.
    pub fn set_virtual_addr(&mut self, va: u64) {
        self.buffer.as_mut()[field::VA].copy_from_slice(&va.to_be_bytes());
    }

    /// Sets the remote key.
    pub fn set_rkey(&mut self, rkey: u32) {
        self.buffer.as_mut()[field::R_KEY].copy_from_slice(&rkey.to_be_bytes());
    }

    /// Sets the DMA length.
    pub fn set_dma_len(&mut self, len: u32) {
        self.buffer.as_mut()[field::DMA_LEN].copy_from_slice(&len.to_be_bytes());
    }
}

/// A parsed RETH.
///
/// ```
/// use rnic_emulator::wire::{RethHeader, RethRepr};
///
/// let repr = RethRepr { virtual_addr: 0x7f00_1000, rkey: 0x1234, dma_len: 4096 };
/// let mut buf = [0u8; 16];
/// repr.emit(&mut RethHeader::new_unchecked(&mut buf[..]));
/// assert_eq!(buf[8..], [0, 0, 0x12, 0x34, 0, 0, 0x10, 0]);
/// assert_eq!(RethRepr::parse(&RethHeader::new_checked(&buf[..])?)?, repr);
/// # Ok::<(), rnic_emulator::wire::WireError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RethRepr {
    /// Remote virtual address.
    pub virtual_addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// DMA length (whole message).
    pub dma_len: u32,
}

impl RethRepr {
    /// Parses a RETH (every value is valid).
    pub fn parse<T: AsRef<[u8]>>(header: &RethHeader<T>) -> Result<Self, WireError> {
        Ok(RethRepr {
            virtual_addr: header.virtual_addr(),
            rkey: header.rkey(),
            dma_len: header.dma_len(),
        })
    }

    /// The header length in bytes (16).
    pub const fn buffer_len(&self) -> usize {
        RETH_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut RethHeader<T>) {
        header.set_virtual_addr(self.virtual_addr);
        header.set_rkey(self.rkey);
        header.set_dma_len(self.dma_len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let repr = RethRepr {
            virtual_addr: 0x0102_0304_0506_0708,
            rkey: 0x1122_3344,
            dma_len: 3000,
        };
        let mut buf = [0u8; 16];
        repr.emit(&mut RethHeader::new_unchecked(&mut buf[..]));
        assert_eq!(
            buf,
            [
                1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0, 0, 0x0b, 0xb8
            ]
        );
        assert_eq!(
            RethRepr::parse(&RethHeader::new_checked(&buf[..]).unwrap()),
            Ok(repr)
        );
        assert!(matches!(
            RethHeader::new_checked(&buf[..15]),
            Err(WireError::Truncated {
                header: HeaderKind::Reth,
                ..
            })
        ));
    }
}
