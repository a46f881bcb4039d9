//! The errors of the [`crate::net`] module: a frame that does not parse or does not fit, a
//! peer that does not answer, a frame that could not be sent.

use std::net::IpAddr;

/// Why a frame could not be parsed as, or emitted into, one of the `net` frames.
///
/// ```
/// use rnic_driver::net::arp::ArpFrame;
/// use rnic_driver::net::FrameError;
///
/// let mut f = [0u8; 20];
/// f[12..14].copy_from_slice(&[0x08, 0x06]); // ARP, cut short
/// assert_eq!(ArpFrame::parse(&f), Err(FrameError::Short));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Shorter than its headers say it is (or than the smallest such frame).
    #[error("frame too short for its headers")]
    Short,
    /// The right protocol, but a field is wrong: a bad checksum, length, hardware type,
    /// hop limit, or an option that does not parse.
    #[error("malformed frame")]
    Malformed,
    /// Not this kind of frame (another EtherType, IP protocol, ICMP type or ARP opcode, a
    /// VLAN tag, an IP fragment).
    #[error("not a frame of this kind")]
    Unsupported,
    /// The output buffer is too small for the frame.
    #[error("output buffer too small")]
    BufferTooSmall,
}

/// A frame could not be sent ([`super::FrameTx::send_frame`]).
///
/// ```
/// use rnic_driver::net::TxError;
///
/// assert_eq!(TxError("send queue full").to_string(), "frame not sent: send queue full");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("frame not sent: {0}")]
pub struct TxError(pub &'static str);

/// Why [`super::Resolver::resolve`] has no MAC to give.
///
/// ```
/// use rnic_driver::net::ResolveError;
/// use std::net::Ipv4Addr;
///
/// let e = ResolveError::Unanswered { ip: Ipv4Addr::new(10, 0, 0, 9).into(), attempts: 3 };
/// assert_eq!(e.to_string(), "10.0.0.9 did not answer 3 address resolution requests");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// Nobody answered the requests for `ip` (it is held as failed for a while, so callers
    /// that retry at once do not flood the link).
    #[error("{ip} did not answer {attempts} address resolution requests")]
    Unanswered {
        /// The address.
        ip: IpAddr,
        /// Requests sent.
        attempts: u8,
    },
    /// As many resolutions are in progress as the resolver allows.
    #[error("cannot resolve {ip}: too many resolutions in progress")]
    TooManyPending {
        /// The address.
        ip: IpAddr,
    },
    /// The port has no address of `ip`'s family to send a request from.
    #[error("cannot resolve {ip}: the port has no address of its family")]
    NoSourceAddress {
        /// The address.
        ip: IpAddr,
    },
    /// Not an address a neighbour can have (unspecified, multicast, broadcast, loopback) or
    /// one of the port's own.
    #[error("{ip} is not a neighbour's address")]
    NotNeighbour {
        /// The address.
        ip: IpAddr,
    },
    /// The request could not be sent.
    #[error("cannot resolve {ip}: {source}")]
    Tx {
        /// The address.
        ip: IpAddr,
        /// What the sender said.
        source: TxError,
    },
}
