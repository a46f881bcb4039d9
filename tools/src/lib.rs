//! The `rnic` command line's library: what the `rnic` binary runs, in modules that can be
//! tested apart from any device.
//!
//! - [`devinfo`]: `rnic devices` / `rnic devinfo`, the text of rdma-core's `ibv_devices` and
//!   `ibv_devinfo`;
//! - [`pingpong`]: `rnic rc-pingpong` / `rnic ud-pingpong`, rdma-core's `ibv_rc_pingpong` and
//!   `ibv_ud_pingpong` (flags, the 52-byte TCP exchange, output lines);
//! - [`perf`]: the perftest-style benchmarks (`write-bw`, ..., `atomic-lat`) with perftest 4.5's
//!   flags, text and out-of-band protocol;
//! - [`cmtest`]: `rnic cmatose` / `rnic udaddy`, librdmacm's `cmatose` (`ucmatose`) and
//!   `udaddy` (RC and UD connections through the connection manager, flags and output);
//! - [`affinity`]: the CPUs a `--loopback` run's two sides are pinned to;
//! - [`args`]: the flags pingpong and perf share (`-d`, `-i`, `--pcap`, `--emu-faults`);
//! - [`device_select`]: device names and `--emu-faults`;
//! - [`oob`]: the out-of-band TCP connection and its fixed-size text messages;
//! - [`rping`]: `rnic rping`, librdmacm's rping (flags, messages, exit statuses) over the
//!   connection manager;
//! - [`cm`]: the one place that talks to the connection manager (rnic-cm's rdma_cm API);
//! - [`rdma`]: the one place that talks to the verbs API, and the helpers perf and pingpong
//!   share.
//!
//! # Using it
//!
//! ```text
//! rnic devices                                  # like ibv_devices
//! rnic devinfo -d emu0 -v                       # like ibv_devinfo -v (limits, GID table)
//! rnic write-bw --loopback                      # server and client in one process (emu0/emu1)
//! rnic write-lat -a --loopback --plot lat.svg   # every size 2 .. 8 MiB, drawn
//!
//! # two processes (or hosts): the server first, then the client with the server's address
//! rnic rc-pingpong -d emu:127.0.0.1 -c
//! rnic rc-pingpong -d emu:127.0.0.2 -c 127.0.0.1
//! rnic write-bw -d emu:10.11.0.1 -x 1               # ib_write_bw -d rxe0 -x 1 10.11.0.1 pairs with it
//! rnic send-bw -d emu:127.0.0.2 --emu-faults loss=0.05,seed=7 --pcap run.pcap 127.0.0.1
//!
//! # the connection manager instead of TCP: librdmacm's rping, perftest's -R
//! rnic rping -s -a 127.0.0.2 -v
//! rnic rping -c -I 127.0.0.1 -a 127.0.0.2 -C 100 -V -v
//! rnic write-bw -R -d emu:127.0.0.2
//! rnic send-lat -R -d emu:127.0.0.1 127.0.0.2
//!
//! # as root: a port of its own on a Linux bridge (TAP rnic0, created if missing, put on br0)
//! rnic rc-pingpong -d emu-tap:rnic0,10.12.0.1/24 -c &
//! ip link set rnic0 master br0
//! ```
//!
//! Without `-d`, a server uses `emu:127.0.0.1` and a client `emu:127.0.0.2` (and says so on
//! stderr). Every wait on the peer is bounded by `--timeout` (30 s by default). Errors are one
//! line on stderr and a non-zero exit (2 for bad arguments, 1 for a failed run).

pub mod affinity;
pub mod args;
pub mod cm;
pub mod cmtest;
pub mod device_select;
pub mod devinfo;
pub mod error;
pub mod oob;
pub mod perf;
pub mod pingpong;
pub mod rdma;
pub mod rping;

pub use error::ToolError;
