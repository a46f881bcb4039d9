//! Raw Ethernet: the queues and the NIC receive flow steering a ConnectX sends and receives
//! whole Ethernet frames with, beside RoCE (PRM "Ethernet" chapters; Linux mlx5e's objects).
//!
//! - [`TransportDomain`], [`Tis`] and [`Tir`]: the transport objects frames leave and arrive
//!   through (a direct TIR delivers to one RQ).
//! - [`RawSq`] and [`RawRq`]: the SQ and RQ objects, each with a CQ of its own. A send is one
//!   WQE: control segment, Ethernet segment with the frame's first bytes inline (at least the
//!   18-byte L2 header a ConnectX-4 requires), data segments with the rest.
//! - [`FlowTable`], [`FlowGroup`], [`FlowRule`] and [`FlowMatch`]: NIC RX flow tables whose
//!   rules match on destination MAC, ethertype, IP protocol and destination IPv4 and
//!   forward to a TIR (or drop). Frames that are not RoCE v2 for the device go through them.
//!
//! Posting and polling allocate nothing and take no lock: one poster and one poller per
//! queue at a time (`Busy` otherwise), as the RDMA queues.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use rnic_driver::eth::{FlowAction, FlowGroup, FlowMatch, FlowRule, FlowTable, RawRq, Tir, TransportDomain};
//! use std::sync::Arc;
//! # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
//! # let hca = Arc::new(rnic_driver::Hca::open(Arc::new(dev.bus()), Default::default())?);
//! # let pd = Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
//! let td = Arc::new(TransportDomain::alloc(&hca)?);
//! let rq = Arc::new(RawRq::create(&pd, 16, 1)?);
//! let tir = Arc::new(Tir::create(&td, &rq)?);
//! let table = Arc::new(FlowTable::create(&hca, 4, 0)?);
//! let arp = FlowMatch::new().ethertype(0x0806);
//! let group = Arc::new(FlowGroup::create(&table, 0, 3, &arp)?);
//! let _rule = FlowRule::create(&group, 0, &arp, FlowAction::Forward(&tir), 7)?;
//! table.set_root()?;
//! # Ok(()) }
//! ```

mod flow;
mod objects;
mod queue;

pub use flow::{FlowAction, FlowGroup, FlowMatch, FlowRule, FlowTable};
pub use objects::{Tir, Tis, TransportDomain};
pub use queue::{EthCompletion, RAW_SEND_MAX_INLINE, RAW_SEND_MAX_SGE, RawRq, RawSq};
