//! ConnectX (mlx5) hardware layouts: everything that crosses the PCI bus between the mlx5
//! driver and the device, named as in the PRM and Linux's `mlx5_ifc.h`.
//!
//! Every structure is a [zerocopy] view over its big-endian bytes. Command and context
//! layouts are declared with `prm_layout!` as lists of named PRM fields (byte offset of the
//! dword, high bit, low bit), which gives each field a typed getter and setter and records
//! the field in [`PrmLayout::FIELDS`], so tests check every field against `mlx5_ifc.h`.
//!
//! ```
//! use rnic_hw_regs::ctx::Qpc;
//! use rnic_hw_regs::PrmLayout;
//! use zerocopy::FromZeros;
//!
//! let mut qpc = Qpc::new_zeroed();
//! qpc.set_mtu(3); // 1024 bytes
//! qpc.set_remote_qpn(0x11);
//! assert_eq!(qpc.mtu(), 3);
//! assert_eq!(Qpc::SIZE, 0xE8);
//! ```
//!
//! The crate is `no_std` and allocation-free, so appliances and firmware-side tools can use it.
#![no_std]

#[macro_use]
pub mod layout;

pub mod bus;
pub mod caps;
pub mod catalog;
pub mod cmd;
pub mod cmdq;
pub mod cqe;
pub mod ctx;
pub mod doorbell;
pub mod eqe;
pub mod init_seg;
pub mod roce;
pub mod status;
pub mod umr;
pub mod wqe;

pub use bus::{Bus, BusError, DmaRegion};
pub use layout::{DwordField, FieldDesc, FieldKind, FieldValue, PrmLayout};
