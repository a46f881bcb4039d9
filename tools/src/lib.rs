//! The `rnic` command line's library: what the `rnic` binary runs, in modules that can be
//! tested apart from any device.
//!
//! - [`devinfo`]: `rnic devices` / `rnic devinfo`, the text of rdma-core's `ibv_devices` and
//!   `ibv_devinfo`;
//! - [`pingpong`]: `rnic rc-pingpong` / `rnic ud-pingpong`, rdma-core's `ibv_rc_pingpong` and
//!   `ibv_ud_pingpong` (flags, the 52-byte TCP exchange, output lines);
//! - [`perf`]: the perftest-style benchmarks (`write-bw`, ..., `atomic-lat`) with perftest 4.5's
//!   flags, text and out-of-band protocol;
//! - [`device_select`]: device names and `--emu-faults`;
//! - [`rdma`]: the one place that talks to the verbs API.

pub mod device_select;
pub mod devinfo;
pub mod error;
pub mod perf;
pub mod pingpong;
pub mod rdma;

pub use error::ToolError;
