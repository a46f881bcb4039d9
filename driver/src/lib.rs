//! The mlx5 driver for ConnectX NICs over [`rnic_hw_regs::Bus`].
//!
//! - [`cmdq`]: the command interface client (slots, tokens, mailbox chains, doorbell,
//!   polling, typed errors), with kernel-format command dumps at `trace` level ([`trace`]);
//! - [`hca`]: bring-up and teardown of a device ([`Hca::open`], [`Hca::close`]), firmware pages
//!   ([`pages`]), the event queue ([`eq`]), UAR pages ([`uar`]) and health monitoring
//!   ([`health`]);
//! - [`vfio`]: [`vfio::VfioBus`], the [`Bus`](rnic_hw_regs::Bus) of a real device behind
//!   Linux VFIO, and the discovery of ConnectX functions bound to vfio-pci.
//!
//! - objects: protection domains ([`pd`]), memory regions as MTT MKeys ([`mr`]), completion
//!   queues and completion channels ([`cq`]), RC / UC / UD queue pairs ([`qp`]), shared
//!   receive queues ([`srq`]) and UD address handles ([`ah`]); each holds `Arc`s of what it
//!   depends on and is destroyed on drop (or with `destroy()`, which returns errors);
//! - the data path ([`post`], [`cq::Cq::poll`], [`wr`]): posting and polling without
//!   allocation, locks or system calls, over the work-queue bookkeeping (`wq`) the QP, SRQ
//!   and CQ share and the CQE field reads (`cqe`) the CQ polls with.
//! - [`net`]: what a kernel netdev would do for the port's addresses: ARP / neighbour
//!   discovery / ICMP echo answers, and a neighbour resolver with a bounded, ageing table,
//!   over any sender of one Ethernet frame ([`net::FrameTx`]).
//!
//! Nothing here knows whether the bus is a real ConnectX or the emulator.
//!
//! Bringing up a real device (needs a ConnectX bound to vfio-pci, so not run here):
//!
//! ```no_run
//! use rnic_driver::vfio::{discovery, VfioBus, VfioOptions};
//! use rnic_driver::{Hca, HcaConfig};
//! use std::net::Ipv4Addr;
//! use std::path::Path;
//! use std::sync::Arc;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let funcs = discovery::connectx_vfio_functions(Path::new(discovery::SYSFS_PCI_DEVICES));
//! let func = funcs.first().ok_or("no ConnectX bound to vfio-pci")?;
//! let bus = Arc::new(VfioBus::open(&func.address, VfioOptions::default())?);
//! let hca = Hca::open(
//!     bus,
//!     HcaConfig { ipv4: Some(Ipv4Addr::new(192, 0, 2, 1)), ..HcaConfig::default() },
//! )?;
//! println!("firmware {}, MAC {:02x?}, {} pages", hca.fw_version(), hca.mac(), hca.pages_held());
//! hca.check_health()?;
//! hca.process_events()?; // serve page requests
//! hca.close()?; // every firmware page comes back
//! # Ok(())
//! # }
//! ```

#[macro_use]
mod teardown;

pub mod ah;
pub mod cmdq;
pub mod cq;
mod cqe;
mod dma;
#[doc(hidden)]
pub mod doc_fixture;
pub mod eq;
pub mod error;
pub mod eth;
pub mod hca;
pub mod health;
mod key_variants;
pub mod mr;
pub mod mw;
pub mod net;
pub mod pages;
pub mod pd;
pub mod port_agent;
pub mod post;
pub mod qp;
pub mod srq;
pub mod trace;
pub mod uar;
pub mod vfio;
mod wq;
pub mod wr;

pub use error::DriverError;
pub use hca::{Hca, HcaConfig};
