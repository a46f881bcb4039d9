//! A verbs-compatible safe Rust API over the rnic mlx5 driver.
//!
//! Not yet implemented: this crate is an empty placeholder until the verbs-api issue.
