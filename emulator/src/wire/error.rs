//! The typed error of every parse and emit in [`crate::wire`].

use core::fmt;

use super::Opcode;

/// Which header a [`WireError`] is about.
///
/// ```
/// use rnic_emulator::wire::{BthHeader, HeaderKind, WireError};
///
/// let err = BthHeader::new_checked(&[0u8; 5][..]).unwrap_err();
/// assert!(matches!(err, WireError::Truncated { header: HeaderKind::Bth, needed: 12, available: 5 }));
/// assert_eq!(HeaderKind::Bth.to_string(), "BTH");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HeaderKind {
    /// The 14-byte Ethernet II header.
    Ethernet,
    /// A 4-byte IEEE 802.1Q tag.
    Vlan,
    /// The IPv4 header.
    Ipv4,
    /// The IPv6 header.
    Ipv6,
    /// The UDP header.
    Udp,
    /// The InfiniBand Base Transport Header.
    Bth,
    /// The Datagram Extended Transport Header.
    Deth,
    /// The RDMA Extended Transport Header.
    Reth,
    /// The Atomic Extended Transport Header.
    AtomicEth,
    /// The ACK Extended Transport Header.
    Aeth,
    /// The Atomic ACK Extended Transport Header.
    AtomicAckEth,
    /// The Immediate Data header.
    ImmDt,
    /// The Invalidate Extended Transport Header.
    Ieth,
    /// The 16 reserved bytes of a CNP.
    Cnp,
    /// The 4-byte invariant CRC.
    Icrc,
    /// A whole frame being emitted.
    Frame,
}

impl fmt::Display for HeaderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            HeaderKind::Ethernet => "Ethernet",
            HeaderKind::Vlan => "802.1Q",
            HeaderKind::Ipv4 => "IPv4",
            HeaderKind::Ipv6 => "IPv6",
            HeaderKind::Udp => "UDP",
            HeaderKind::Bth => "BTH",
            HeaderKind::Deth => "DETH",
            HeaderKind::Reth => "RETH",
            HeaderKind::AtomicEth => "AtomicETH",
            HeaderKind::Aeth => "AETH",
            HeaderKind::AtomicAckEth => "AtomicAckETH",
            HeaderKind::ImmDt => "ImmDt",
            HeaderKind::Ieth => "IETH",
            HeaderKind::Cnp => "CNP",
            HeaderKind::Icrc => "ICRC",
            HeaderKind::Frame => "frame",
        };
        f.write_str(s)
    }
}

/// Everything that can be wrong with a RoCE v2 frame (on parse) or a `Repr` (on emit).
///
/// ```
/// use rnic_emulator::wire::{PacketRepr, WireError};
///
/// let err = PacketRepr::parse(&[0u8; 60]).unwrap_err(); // EtherType 0: not IP
/// assert!(matches!(err, WireError::NotIp { .. }));
/// println!("{err}"); // every error has a readable message
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The buffer ends inside `header` (or, for [`HeaderKind::Frame`], the emit buffer is too
    /// small).
    #[error("truncated at {header}: need {needed} bytes, have {available}")]
    Truncated {
        /// The header that does not fit.
        header: HeaderKind,
        /// Bytes needed from the start of that header.
        needed: usize,
        /// Bytes available from the start of that header.
        available: usize,
    },
    /// The EtherType is neither IPv4 nor IPv6 (e.g. ARP): not a RoCE v2 frame.
    #[error("not IP: EtherType {ethertype:#06x}")]
    NotIp {
        /// The EtherType found (after any 802.1Q tag).
        ethertype: u16,
    },
    /// The IP version nibble does not match the EtherType.
    #[error("wrong IP version {found} (expected {expected})")]
    IpVersion {
        /// The version the EtherType announced.
        expected: u8,
        /// The version nibble found.
        found: u8,
    },
    /// IPv4 IHL other than 5: RoCE v2 carries no IP options.
    #[error("IPv4 IHL {ihl} (RoCE v2 requires 5, no options)")]
    BadIhl {
        /// The IHL found, in 32-bit words.
        ihl: u8,
    },
    /// An IPv4 fragment (MF set or a non-zero fragment offset).
    #[error("IPv4 fragment (offset {offset}, more fragments {more})")]
    Fragmented {
        /// Fragment offset in 8-byte units.
        offset: u16,
        /// The MF flag.
        more: bool,
    },
    /// The IPv4 header checksum is wrong.
    #[error("bad IPv4 header checksum {found:#06x}")]
    BadIpChecksum {
        /// The checksum field found.
        found: u16,
    },
    /// The IP payload is not UDP.
    #[error("IP protocol {protocol} is not UDP (17)")]
    NotUdp {
        /// The IPv4 protocol / IPv6 next header found.
        protocol: u8,
    },
    /// UDP destination port other than 4791.
    #[error("UDP destination port {port} is not RoCE v2 (4791)")]
    NotRoce {
        /// The destination port found.
        port: u16,
    },
    /// The IP length does not fit the frame (or is smaller than the IP header).
    #[error("IP length {ip_len} does not fit: {available} bytes from the IP header on")]
    IpLength {
        /// The IP packet length the header claims (IPv4 total length, IPv6 40 + payload).
        ip_len: usize,
        /// Bytes in the frame from the IP header on.
        available: usize,
    },
    /// The UDP length does not equal the IP payload length.
    #[error("UDP length {udp_len} does not match the IP payload length {ip_payload_len}")]
    UdpLength {
        /// The UDP length field.
        udp_len: usize,
        /// The IP payload length.
        ip_payload_len: usize,
    },
    /// A BTH opcode that is not in the RoCE v2 opcode table.
    #[error("unknown BTH opcode {0:#04x}")]
    UnknownOpcode(u8),
    /// BTH transport header version other than 0.
    #[error("BTH TVer {0} (must be 0)")]
    BadTver(u8),
    /// PadCnt does not fit: larger than what follows the headers, or payload + pad not a
    /// multiple of 4.
    #[error("pad count {pad_count} does not fit {available} bytes of payload and pad")]
    PadCount {
        /// The BTH PadCnt.
        pad_count: u8,
        /// Bytes between the last extension header and the ICRC.
        available: usize,
    },
    /// Payload present on an opcode that carries none (READ request, ACK, atomics, CNP).
    #[error("{opcode:?} carries no payload but has {len} bytes")]
    UnexpectedPayload {
        /// The opcode.
        opcode: Opcode,
        /// Payload bytes found (or offered, on emit).
        len: usize,
    },
    /// An AETH syndrome with the reserved bit 7 set or the reserved type 0b10.
    #[error("reserved AETH syndrome {0:#04x}")]
    ReservedSyndrome(u8),
    /// The ICRC on the wire is not the one computed over the frame.
    #[error("ICRC mismatch: computed {expected:#010x}, on the wire {actual:#010x}")]
    IcrcMismatch {
        /// The ICRC computed over the frame.
        expected: u32,
        /// The ICRC found in the frame.
        actual: u32,
    },
    /// On emit: the `Repr`'s extension headers are not the ones its opcode carries.
    #[error("extension headers do not match opcode {0:?}")]
    HeaderMismatch(Opcode),
    /// On emit: the frame would not fit the 16-bit IP / UDP length fields.
    #[error("payload of {0} bytes is too long for one frame")]
    PayloadTooLong(usize),
    /// A run of packets in one buffer ([`crate::wire::GsoRun`]) that describes packets no
    /// sender sends.
    #[error("bad packet run: {reason}")]
    BadGsoRun {
        /// What is wrong with it.
        reason: &'static str,
    },
}
