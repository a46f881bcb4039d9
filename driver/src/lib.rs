//! The mlx5 driver for ConnectX NICs over [`rnic_hw_regs::Bus`].
//!
//! Not yet implemented: the command interface, bring-up, objects and data path arrive with
//! the driver issue. This crate is an empty placeholder in the workspace until then.
