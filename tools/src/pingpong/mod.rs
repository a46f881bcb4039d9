//! `rnic rc-pingpong` and `rnic ud-pingpong`: rdma-core's `ibv_rc_pingpong` /
//! `ibv_ud_pingpong` with their flags, TCP exchange and output.

pub mod exchange;
