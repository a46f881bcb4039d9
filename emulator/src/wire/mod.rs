//! RoCE v2 wire formats: zero-copy views over byte buffers and parsed `Repr`s.
//!
//! A RoCE v2 frame is
//! `Ethernet [802.1Q] | IPv4 or IPv6 | UDP (dst 4791) | BTH | ext headers | payload | pad | ICRC`
//! (see `shared/reference/roce-v2.md`). This module follows the style of smoltcp's `wire`
//! module: for every header there is a view `XxxHeader<T: AsRef<[u8]>>` with `new_checked`
//! (a typed [`WireError`] when the buffer is too short), field getters and, for
//! `T: AsMut<[u8]>`, setters; and a `XxxRepr` with `parse`, `buffer_len` and `emit`.
//!
//! Ethernet, IPv4, IPv6 and UDP use smoltcp's views ([`EthernetFrame`], [`Ipv4Packet`],
//! [`Ipv6Packet`], [`UdpPacket`]); the `Repr`s here are our own because a byte-exact RoCE v2
//! frame needs fields smoltcp's `Ipv4Repr` drops (IP ID, DSCP/ECN, DF) and an ICRC that covers
//! them.
//!
//! The whole-frame entry points are [`RocePacket`] (a checked view that knows where every
//! header is) and [`PacketRepr`] (parse a frame into header `Repr`s plus a payload slice, or emit
//! one into a caller buffer, computing lengths, checksums, pad and ICRC). Nothing here
//! allocates.
//!
//! # Example
//!
//! Build an RC SEND_ONLY frame, parse it back and check its ICRC:
//!
//! ```
//! use core::net::Ipv4Addr;
//! use rnic_emulator::wire::{
//!     BthRepr, EthRepr, EthernetAddress, IpRepr, Ipv4Repr, Opcode, PacketRepr, RocePacket,
//!     UdpRepr,
//! };
//!
//! let payload = b"hello, rxe";
//! let repr = PacketRepr::new(
//!     EthRepr::new(
//!         EthernetAddress([0x52, 0x54, 0, 0, 0, 2]),
//!         EthernetAddress([0x52, 0x54, 0, 0, 0, 1]),
//!     ),
//!     IpRepr::V4(Ipv4Repr::new(Ipv4Addr::new(10, 11, 0, 2), Ipv4Addr::new(10, 11, 0, 3))),
//!     UdpRepr::new(0xC123),
//!     BthRepr::new(Opcode::RcSendOnly, 0x11, 0x3A5B2C),
//! );
//! let mut frame = [0u8; 128];
//! let len = repr.emit(&mut frame, payload).unwrap();
//!
//! let (parsed, data) = PacketRepr::parse(&frame[..len]).unwrap();
//! assert_eq!(data, payload);
//! assert_eq!(parsed.bth.opcode, Opcode::RcSendOnly);
//! assert_eq!(parsed.bth.pad_count, 2); // 10 bytes of payload + 2 bytes of pad
//! assert_eq!(parsed.bth.dest_qp, 0x11);
//! RocePacket::new_checked(&frame[..len]).unwrap().verify_icrc().unwrap();
//! ```

/// Defines a zero-copy view type `$name<T: AsRef<[u8]>>` over a fixed-length header with
/// `LEN`, `new_unchecked`, `new_checked` and `into_inner`.
macro_rules! header_view {
    ($(#[$doc:meta])* $name:ident, $len:expr, $kind:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $name<T> {
            /// The header length in bytes.
            pub const LEN: usize = $len;

            /// Wraps a buffer without checking its length; getters and setters panic if it is
            /// shorter than [`Self::LEN`]. Use [`Self::new_checked`] for untrusted input.
            #[doc = concat!(
                "\n\n```\n",
                "use rnic_emulator::wire::", stringify!($name), ";\n\n",
                "let mut buf = [0u8; ", stringify!($name), "::<&[u8]>::LEN];\n",
                "let view = ", stringify!($name), "::new_unchecked(&mut buf[..]);\n",
                "assert_eq!(view.into_inner().len(), ", stringify!($name), "::<&[u8]>::LEN);\n",
                "```\n",
            )]
            pub const fn new_unchecked(buffer: T) -> Self {
                $name { buffer }
            }

            /// Wraps a buffer that holds at least [`Self::LEN`] bytes, or returns
            /// [`WireError::Truncated`](crate::wire::WireError::Truncated).
            #[doc = concat!(
                "\n\n```\n",
                "use rnic_emulator::wire::{", stringify!($name), ", WireError};\n\n",
                "let len = ", stringify!($name), "::<&[u8]>::LEN;\n",
                "let buf = [0u8; 64];\n",
                "assert!(", stringify!($name), "::new_checked(&buf[..len]).is_ok());\n",
                "let short = ", stringify!($name), "::new_checked(&buf[..len - 1]);\n",
                "assert!(matches!(short, Err(WireError::Truncated { needed, .. }) if needed == len));\n",
                "```\n",
            )]
            pub fn new_checked(buffer: T) -> Result<Self, crate::wire::WireError> {
                crate::wire::check_len(buffer.as_ref(), $len, $kind)?;
                Ok($name { buffer })
            }

            /// Returns the underlying buffer.
            #[doc = concat!(
                "\n\n```\n",
                "use rnic_emulator::wire::", stringify!($name), ";\n\n",
                "let buf = vec![7u8; 64];\n",
                "let view = ", stringify!($name), "::new_checked(buf).unwrap();\n",
                "assert_eq!(view.into_inner(), vec![7u8; 64]); // the same buffer back\n",
                "```\n",
            )]
            pub fn into_inner(self) -> T {
                self.buffer
            }
        }
    };
}

mod aeth;
mod atomic;
mod bth;
mod cnp;
mod deth;
mod error;
mod eth;
mod gso;
pub mod icrc;
mod ieth;
mod imm;
mod ip;
mod opcode;
mod packet;
pub(crate) mod psn;
mod reth;
mod udp;

pub use aeth::{AethHeader, AethRepr, NakCode, Syndrome};
pub use atomic::{AtomicAckEthHeader, AtomicAckEthRepr, AtomicEthHeader, AtomicEthRepr};
pub use bth::{BthHeader, BthRepr};
pub use cnp::{CnpHeader, CnpRepr};
pub use deth::{DethHeader, DethRepr};
pub use error::{HeaderKind, WireError};
pub(crate) use eth::TPID_8021Q;
pub use eth::{ETH_MIN_FRAME_LEN, EthRepr, VlanTag, ethernet_frame};
pub use gso::{GSO_MAX_BYTES, GsoRun, gso_middle_of};
pub use ieth::{IethHeader, IethRepr};
pub use imm::{ImmDtHeader, ImmDtRepr};
pub(crate) use ip::fill_ipv4_checksum;
pub use ip::{IpRepr, Ipv4Repr, Ipv6Repr, ipv4_packet, ipv6_packet};
pub use opcode::{Opcode, Operation, PayloadRule, Position, Transport};
pub use packet::{ExtHeaders, PacketRepr, RocePacket};
pub use reth::{RethHeader, RethRepr};
pub use udp::{
    ROCE_V2_PORT, UdpRepr, rdma_calc_flow_label, rdma_flow_label_to_udp_sport, rdma_get_udp_sport,
    rxe_legacy_udp_sport, udp_packet,
};

pub use smoltcp::wire::{
    EthernetAddress, EthernetFrame, EthernetProtocol, IpProtocol, Ipv4Packet, Ipv6Packet, UdpPacket,
};

/// A header field's byte range (smoltcp's `wire::field::Field`): each header's private
/// `mod field` names its fields' ranges once, the getters and setters use the names.
type Field = core::ops::Range<usize>;

/// The largest RoCE v2 frame, with room to spare: path MTU 4096 plus Ethernet, VLAN, IPv6,
/// UDP, BTH, the largest extended header and ICRC. Links and the port size their buffers
/// with it.
pub(crate) const FRAME_CAPACITY: usize = 4096 + 256;

/// Reads a big-endian `u16` at `off`. Callers have checked the length.
#[inline]
fn be16(b: &[u8], off: usize) -> u16 {
    u16::from_be_bytes([b[off], b[off + 1]])
}

/// Reads a big-endian 24-bit value at `off`. Callers have checked the length.
#[inline]
fn be24(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes([0, b[off], b[off + 1], b[off + 2]])
}

/// Reads a big-endian `u32` at `off`. Callers have checked the length.
#[inline]
fn be32(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

/// Reads a big-endian `u64` at `off`. Callers have checked the length.
#[inline]
fn be64(b: &[u8], off: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[off..off + 8]);
    u64::from_be_bytes(v)
}

/// Writes a big-endian 24-bit value (the low 24 bits of `v`) at `off`.
#[inline]
fn put24(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 3].copy_from_slice(&v.to_be_bytes()[1..]);
}

/// Checks that `buf` holds at least `needed` bytes for `header`.
#[inline]
fn check_len(buf: &[u8], needed: usize, header: HeaderKind) -> Result<(), WireError> {
    if buf.len() < needed {
        Err(WireError::Truncated {
            header,
            needed,
            available: buf.len(),
        })
    } else {
        Ok(())
    }
}
