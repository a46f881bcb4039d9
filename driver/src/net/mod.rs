//! Address resolution for a port no kernel netdev stands behind: a ConnectX driven through
//! VFIO has no interface the kernel answers ARP for, so this module does what the kernel's
//! neighbour code does for a netdev, over raw Ethernet frames:
//!
//! - [`arp`], [`icmp`], [`ndisc`]: whole-frame `Repr`s (Ethernet + ARP, Ethernet + IPv4 +
//!   ICMPv4 echo, Ethernet + IPv6 + ICMPv6 neighbour solicitation / advertisement) over
//!   smoltcp's `wire` views, each with `parse` and `emit`;
//! - [`responder`]: answers ARP requests and neighbour solicitations for the port's
//!   addresses ([`PortAddrs`]) and ICMPv4 echo requests to them: a pure function from a
//!   received frame to an optional reply written into the caller's buffer, with counters;
//! - [`resolver`]: resolves peers' MACs (ARP / NS requests, retries, a timeout naming the
//!   address that did not answer), keeps a bounded, ageing neighbour table ([`neighbour`])
//!   learned from what arrives, announces the port's addresses (gratuitous ARP, unsolicited
//!   NA), and limits what a flood can make it send.
//!
//! Frames leave through [`FrameTx`], so any queue that sends one Ethernet frame (a raw
//! Ethernet send queue, a test pipe) can carry them. Time is a parameter (nanoseconds on any
//! monotonic clock) so that tests decide it. Nothing here allocates after construction or
//! panics on any input.
//!
//! ```
//! use rnic_driver::net::{PortAddrs, Responder};
//!
//! let mut port = PortAddrs::new([0x02, 0, 0, 0, 0, 1]);
//! port.add_ipv4([10, 0, 0, 1].into(), 24)?;
//! let mut responder = Responder::default();
//! let mut reply = [0u8; 128];
//! assert_eq!(responder.respond(&[0u8; 10], &port, &mut reply), None); // a runt: dropped
//! assert_eq!(responder.counters().short, 1);
//! # Ok::<(), rnic_driver::net::AddrsFull>(())
//! ```

pub mod addrs;
pub mod arp;
pub mod error;
pub mod framing;
pub mod icmp;
pub mod ndisc;
pub mod neighbour;
pub mod resolver;
pub mod responder;

pub use addrs::{AddrsFull, MAX_ADDRS, PortAddrs};
pub use error::{FrameError, ResolveError, TxError};
pub use neighbour::{NeighbourState, NeighbourTable};
pub use resolver::{Resolution, Resolver, ResolverConfig, ResolverCounters};
pub use responder::{NoReply, Responder, ResponderCounters};

/// Something that sends one whole Ethernet frame: a raw Ethernet send queue, or a test's
/// in-memory pipe. The frame is borrowed: the sender copies what it needs before it returns.
///
/// ```
/// use rnic_driver::net::{FrameTx, TxError};
///
/// #[derive(Default)]
/// struct Count(usize);
/// impl FrameTx for Count {
///     fn send_frame(&mut self, _frame: &[u8]) -> Result<(), TxError> {
///         self.0 += 1;
///         Ok(())
///     }
/// }
/// let mut c = Count::default();
/// c.send_frame(&[0; 60])?;
/// assert_eq!(c.0, 1);
/// # Ok::<(), TxError>(())
/// ```
pub trait FrameTx {
    /// Sends `frame`, or says why it could not.
    fn send_frame(&mut self, frame: &[u8]) -> Result<(), TxError>;
}

impl<T: FrameTx + ?Sized> FrameTx for &mut T {
    fn send_frame(&mut self, frame: &[u8]) -> Result<(), TxError> {
        (**self).send_frame(frame)
    }
}
