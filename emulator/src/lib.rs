//! A software ConnectX (mlx5) that speaks byte-exact RoCE v2.
//!
//! What exists today is [`wire`]: the RoCE v2 wire formats (Ethernet, IPv4/IPv6, UDP, the
//! InfiniBand transport headers, ICRC) as zero-copy packet views with parsed `Repr`s. The
//! device model (registers, command processor, queues) and the transport arrive with later
//! issues.

pub mod wire;
