//! The mlx5 driver for ConnectX NICs over [`rnic_hw_regs::Bus`].
//!
//! - [`cmdq`]: the command interface client (slots, tokens, mailbox chains, doorbell,
//!   polling, typed errors), with kernel-format command dumps at `trace` level ([`trace`]);
//! - [`hca`]: bring-up and teardown of a device ([`Hca::open`], [`Hca::close`]), firmware pages
//!   ([`pages`]), the event queue ([`eq`]), UAR pages ([`uar`]) and health monitoring
//!   ([`health`]);
//! - [`vfio`]: [`vfio::VfioBus`], the [`Bus`](rnic_hw_regs::Bus) of a real device behind
//!   Linux VFIO.
//!
//! Nothing here knows whether the bus is a real ConnectX or the emulator.

pub mod cmdq;
mod dma;
pub mod eq;
pub mod error;
pub mod hca;
pub mod health;
pub mod pages;
pub mod trace;
pub mod uar;
pub mod vfio;

pub use error::DriverError;
pub use hca::{Hca, HcaConfig};
