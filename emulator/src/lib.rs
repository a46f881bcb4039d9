//! A software ConnectX (mlx5) that speaks byte-exact RoCE v2.
//!
//! The device ([`Device`], reached only through [`EmuBus`], the `Bus` its driver uses) has
//! the init segment and UAR doorbells, the command processor, firmware pages and
//! capabilities, and the queue engines: SQ, RQ and SRQ, the CQE and EQE writers with owner
//! bits, arming and overrun, memory-key checks through the IOMMU model, and a RoCE v2
//! transport (requester, responder, completer) whose frames for the device's own GIDs loop
//! back inside its port; other frames go to the port's [`port::Link`] (see
//! [`Device::set_link`]).
//!
//! Underneath is [`wire`]: the RoCE v2 wire formats, checked against real Linux rxe captures.
//!
//! - Ethernet (with an optional 802.1Q tag), IPv4 and IPv6, UDP: smoltcp's zero-copy views
//!   with our own `Repr`s, which keep what a byte-exact RoCE v2 frame needs (IP ID, DSCP/ECN,
//!   DF, the UDP checksum as sent).
//! - The InfiniBand transport headers: BTH, RETH, AETH (with syndrome decoding), AtomicETH,
//!   AtomicAckETH, DETH, ImmDt, IETH and the CNP's reserved block, each a zero-copy view plus
//!   a `Repr` with `parse`, `buffer_len` and `emit`.
//! - The opcode table (RC, UC, UD, CNP) with the headers and payload rules of each opcode.
//! - The ICRC (compute and verify, no allocation) and rxe's UDP source-port formulas.
//! - Whole frames: [`wire::RocePacket`] (a checked view) and [`wire::PacketRepr`] (parse a
//!   frame into headers plus a payload slice; emit one into a caller buffer with lengths,
//!   checksum, pad and ICRC computed).
//!
//! Every parse returns a typed [`wire::WireError`] on malformed input and never panics.
//!
//! Devices meet through [`link`]s: [`link::InProcLink::pair`] in one process,
//! [`link::UdpLink::bind`] across hosts (and to Linux rxe), [`link::TapLink::open`] as an
//! Ethernet endpoint of its own on a Linux TAP interface ([`Device::on_tap`]), any of them
//! wrapped in a seeded [`link::FaultyLink`]; [`Device::with_link`] / [`Device::set_link`]
//! attach one, and
//! [`Device::capture_to`] writes the port's traffic to a pcap file.

mod bar;
mod bus;
mod caps;
mod clock;
mod cmd;
mod cq;
mod ctx;
mod device;
mod doorbells;
mod eq;
mod hca;
pub mod iommu;
mod irq;
pub mod link;
mod mkey;
mod pages;
pub mod port;
mod profile;
mod raw_rq;
mod raw_sq;
mod resources;
mod rq;
mod sq;
mod state;
mod steering;
mod transport;
mod umr;
pub mod wire;

pub use bus::EmuBus;
pub use clock::Clock;
pub use device::{Device, RunMode};
pub use profile::Profile;
pub use state::{Counters, RxDrops, TransportCounters};
