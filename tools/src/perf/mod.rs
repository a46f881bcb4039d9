//! The perftest-style benchmarks: `write-bw`, `read-bw`, `send-bw`, `atomic-bw` and the
//! `-lat` counterparts, with perftest's flags, defaults, text and out-of-band protocol.

pub mod bw;
pub mod cm;
pub mod lat;
pub mod negotiate;
pub mod plot;
pub mod protocol;
pub mod report;
pub mod res;
pub mod run;
pub mod validation;

use crate::args::{DeviceArgs, EmuArgs};
use crate::error::ToolError;
use crate::rdma::mtu_enum;
use clap::Args;
use std::path::PathBuf;

/// The operation a test measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// SEND / RECV.
    Send,
    /// RDMA WRITE.
    Write,
    /// RDMA READ.
    Read,
    /// Atomic FETCH_AND_ADD or CMP_AND_SWAP.
    Atomic,
}

impl Verb {
    /// perftest's name (`testsStr`).
    pub fn title(self) -> &'static str {
        match self {
            Verb::Send => "Send",
            Verb::Write => "RDMA_Write",
            Verb::Read => "RDMA_Read",
            Verb::Atomic => "Atomic",
        }
    }

    fn code(self) -> u8 {
        match self {
            Verb::Send => 0,
            Verb::Write => 1,
            Verb::Read => 2,
            Verb::Atomic => 3,
        }
    }
}

/// Bandwidth or latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestKind {
    /// Bandwidth (messages in flight up to the TX depth).
    Bw,
    /// Latency (one message at a time).
    Lat,
}

/// Transport (`-c`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conn {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
}

impl Conn {
    fn code(self) -> u8 {
        match self {
            Conn::Rc => 0,
            Conn::Uc => 1,
            Conn::Ud => 2,
        }
    }
}

/// The most QPs a bandwidth run takes (`-q`): perftest's `MAX_QP_NUM`.
pub const MAX_QPS: u32 = 16384;

/// perftest's command-line flags (the subset rnic implements, with perftest's names).
#[derive(Debug, Clone, Args)]
pub struct PerfArgs {
    /// Server address (client side); without it, wait for a client.
    pub server: Option<String>,
    /// `-d`, `-i`.
    #[command(flatten)]
    pub dev: DeviceArgs,
    /// GID index (default: the IPv4 RoCE v2 GID).
    #[arg(short = 'x', long = "gid-index")]
    pub gid_index: Option<u32>,
    /// TCP port of the out-of-band exchange.
    #[arg(short = 'p', long = "port", default_value_t = 18515)]
    pub port: u16,
    /// Message size (default 65536 for BW, 2 for latency, 8 for atomics).
    #[arg(short = 's', long = "size")]
    pub size: Option<u64>,
    /// Run sizes 2 .. 2^23.
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    /// Iterations (default 1000; 5000 for write BW).
    #[arg(short = 'n', long = "iters")]
    pub iters: Option<u64>,
    /// Run for this many seconds instead of a number of iterations.
    #[arg(short = 'D', long = "duration")]
    pub duration: Option<u64>,
    /// With -D: seconds at the start and at the end of the run left out of the measurement
    /// (default: a quarter of the duration, as perftest).
    #[arg(long = "margin")]
    pub margin: Option<u64>,
    /// Connection type: RC, UC or UD.
    #[arg(short = 'c', long = "connection", default_value = "RC")]
    pub connection: String,
    /// Number of QPs.
    #[arg(short = 'q', long = "qp", default_value_t = 1)]
    pub qps: u32,
    /// TX depth (default 128 for BW, 1 for latency).
    #[arg(short = 't', long = "tx-depth")]
    pub tx_depth: Option<u32>,
    /// RX depth (default 512 for send, 1 otherwise).
    #[arg(short = 'r', long = "rx-depth")]
    pub rx_depth: Option<u32>,
    /// CQ moderation: a signalled completion every N messages.
    #[arg(short = 'Q', long = "cq-mod")]
    pub cq_mod: Option<u32>,
    /// Post list: work requests per post (one doorbell).
    #[arg(short = 'l', long = "post_list", default_value_t = 1)]
    pub post_list: u32,
    /// Max inline data size (default 0 for BW; 220 write / 236 send / 188 UD for latency).
    #[arg(short = 'I', long = "inline_size")]
    pub inline_size: Option<u32>,
    /// Path MTU: 256, 512, 1024, 2048 or 4096 (default: the port's active MTU).
    #[arg(short = 'm', long = "mtu")]
    pub mtu: Option<u32>,
    /// Bidirectional (BW tests).
    #[arg(short = 'b', long = "bidirectional")]
    pub bidirectional: bool,
    /// Ignore the CPU frequency warning (accepted for compatibility; rnic uses a monotonic clock).
    #[arg(short = 'F', long = "CPU-freq")]
    pub cpu_freq: bool,
    /// Wait on completion events instead of busy polling.
    #[arg(short = 'e', long = "events")]
    pub events: bool,
    /// Outstanding reads/atomics (default: the device's maximum, up to 16).
    #[arg(short = 'o', long = "outs")]
    pub outs: Option<u32>,
    /// Atomic type: FETCH_AND_ADD or CMP_AND_SWAP.
    #[arg(short = 'A', long = "atomic_type", default_value = "FETCH_AND_ADD")]
    pub atomic_type: String,
    /// Report bandwidth in Gb/sec instead of MiB/sec.
    #[arg(long = "report_gbits")]
    pub report_gbits: bool,
    /// Write the results as JSON (to --out_json_file, default perftest_out.json).
    #[arg(long = "out_json")]
    pub out_json: bool,
    /// The JSON results file.
    #[arg(long = "out_json_file")]
    pub out_json_file: Option<PathBuf>,
    /// Run server and client in this process on the emulated pair emu0 / emu1 (each side
    /// pinned to a CPU of its own when the process may use two).
    #[arg(long)]
    pub loopback: bool,
    /// With -a: draw the sweep as an SVG chart.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// `--pcap`, `--emu-faults`.
    #[command(flatten)]
    pub emu: EmuArgs,
    /// Seconds to wait for the peer (connection, each exchange) and for progress of a run.
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
    /// Emulated devices: print the device's counters (frames, drops per rule, transport
    /// events) after the run, in `rdma statistic show`'s layout.
    #[arg(long = "emu-counters")]
    pub emu_counters: bool,
    /// The perftest version to speak (its version string): 6.28 and newer negotiate the
    /// test parameters with a peer that is as new; `6.06` speaks perftest 4.5's protocol
    /// only.
    #[arg(long = "perftest-version", value_name = "X.YY", default_value = protocol::VERSION)]
    pub perftest_version: String,
    /// Accepted for perftest's command lines: rnic has one posting path.
    #[arg(long = "use_old_post_send")]
    pub use_old_post_send: bool,
    /// write-bw / write-lat: RDMA WRITE with immediate; the target posts receives and takes
    /// a completion (with the immediate) for every message.
    #[arg(long = "write_with_imm")]
    pub write_with_imm: bool,
    /// send-bw / send-lat: SEND with immediate; every receive completes with it.
    #[arg(long = "send_with_imm")]
    pub send_with_imm: bool,
    /// perftest 6.29's data validation (write-bw / read-bw): refused after perftest's own
    /// checks, because rnic does not implement its protocol (see the README).
    #[arg(long = "data_validation")]
    pub data_validation: bool,
    /// Connect the QPs with rdma_cm (the connection manager) and exchange everything over
    /// its connection instead of TCP, as perftest's -R: on the port -p; the server listens on
    /// its device's address, the client connects from its device's address to the server's.
    #[arg(short = 'R', long = "rdma_cm")]
    pub rdma_cm: bool,
    /// The QPs' local ACK timeout, 4.096 us x 2^timeout (perftest's -u; 0 to 31): the wait
    /// for an ACK before a retransmission, at most 8 per packet (`--retry_count` 7).
    #[arg(short = 'u', long = "qp_timeout", default_value_t = DEF_QP_TIME,
          value_parser = clap::value_parser!(u8).range(0..=31))]
    pub qp_timeout: u8,
}

/// perftest's `DEF_QP_TIME`: the default of `-u` (about 67 ms).
pub const DEF_QP_TIME: u8 = 14;

/// The resolved configuration of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct PerfConfig {
    /// The operation.
    pub verb: Verb,
    /// Bandwidth or latency.
    pub kind: TestKind,
    /// Transport.
    pub conn: Conn,
    /// Message size (the largest with `-a`).
    pub size: u64,
    /// `-a`.
    pub all: bool,
    /// Iterations (ignored with a duration).
    pub iters: u64,
    /// `-D` seconds.
    pub duration: Option<u64>,
    /// With `-D`: seconds not measured at each end of the run (`--margin`, default D/4).
    pub margin: u64,
    /// QPs.
    pub qps: u32,
    /// TX depth.
    pub tx_depth: u32,
    /// RX depth.
    pub rx_depth: u32,
    /// CQ moderation.
    pub cq_mod: u32,
    /// Post list.
    pub post_list: u32,
    /// Inline size.
    pub inline_size: u32,
    /// Requested MTU in bytes (None: the port's).
    pub mtu: Option<u32>,
    /// `-b`.
    pub bidirectional: bool,
    /// `-e`.
    pub events: bool,
    /// Outstanding reads.
    pub out_reads: u32,
    /// CMP_AND_SWAP rather than FETCH_AND_ADD.
    pub atomic_cmp_swap: bool,
    /// GID index (resolved once the device is open).
    pub gid_index: u32,
    /// Gb/sec.
    pub gbits: bool,
    /// The perftest version string rnic sends (`--perftest-version`).
    pub perftest_version: String,
    /// WRITE or SEND with immediate (`--write_with_imm`, `--send_with_imm`: perftest's verbs
    /// `WRITE_IMM`, `SEND_IMM`).
    pub imm: bool,
    /// `-R`: rdma_cm connects the QPs and carries the exchanges.
    pub rdma_cm: bool,
    /// `-u`: the QPs' local ACK timeout (exponent).
    pub qp_timeout: u8,
}

/// The largest `-a` size: 2^23 (perftest's `MAX_SIZE`).
pub const MAX_SIZE: u64 = 1 << 23;

impl PerfConfig {
    /// Resolves flags and perftest's defaults and dependencies (`init_perftest_params`,
    /// `force_dependecies`).
    pub fn from_args(verb: Verb, kind: TestKind, a: &PerfArgs) -> Result<PerfConfig, ToolError> {
        let usage = |m: String| Err(ToolError::Usage(m));
        let conn = match a.connection.to_ascii_uppercase().as_str() {
            "RC" => Conn::Rc,
            "UC" => Conn::Uc,
            "UD" => Conn::Ud,
            other => return usage(format!("unknown connection type `{other}` (RC, UC or UD)")),
        };
        if conn == Conn::Ud && verb != Verb::Send {
            return usage(format!(
                "{} is not possible over UD (only send)",
                verb.title()
            ));
        }
        if conn == Conn::Uc && matches!(verb, Verb::Read | Verb::Atomic) {
            return usage(format!("{} is not possible over UC", verb.title()));
        }
        // perftest_parameters.c: the flags turn WRITE into WRITE_IMM and SEND into SEND_IMM,
        // and only there.
        if a.write_with_imm && verb != Verb::Write {
            return usage(
                "Write_with_imm can only be used with write_lat and write_bw tests".into(),
            );
        }
        if a.send_with_imm && verb != Verb::Send {
            return usage("Send_with_imm can only be used with send_lat and send_bw tests".into());
        }
        let imm = a.write_with_imm || a.send_with_imm;
        // perftest_parameters.c's rules for -R, and rnic's one (no UD port space yet).
        if a.rdma_cm && conn == Conn::Uc {
            return usage("UC is not supported in librdmacm".into());
        }
        if a.rdma_cm && conn == Conn::Ud {
            return usage(
                "-R with UD needs rdma_cm's UDP port space (SIDR), which rnic's connection \
                 manager does not offer yet"
                    .into(),
            );
        }
        let v = &a.perftest_version;
        if v.len() != 4
            || v.parse::<f64>()
                .map_or(true, |x| x < protocol::MIN_PEER_VERSION)
        {
            return usage(format!(
                "--perftest-version {v}: a version X.YY from {} (e.g. {} or {})",
                protocol::MIN_PEER_VERSION,
                protocol::OLD_VERSION,
                protocol::VERSION
            ));
        }
        let atomic_cmp_swap = match a.atomic_type.as_str() {
            "FETCH_AND_ADD" => false,
            "CMP_AND_SWAP" => true,
            other => {
                return usage(format!(
                    "unknown atomic type `{other}` (FETCH_AND_ADD or CMP_AND_SWAP)"
                ));
            }
        };
        let mut size = match (verb, a.size) {
            (Verb::Atomic, Some(s)) if s != 8 => {
                return usage("atomic operations are 8 bytes (-s 8)".into());
            }
            (Verb::Atomic, _) => 8,
            (_, Some(s)) => s,
            (_, None) if kind == TestKind::Bw => 65536,
            (_, None) => 2,
        };
        if size == 0 || size > u64::from(u32::MAX) {
            return usage(format!("message size {size} is out of range (1 .. 2^32-1)"));
        }
        if a.all && verb == Verb::Atomic {
            return usage("-a does not apply to atomic tests".into());
        }
        if a.all && a.duration.is_some() {
            return usage("-a and -D cannot go together".into());
        }
        if a.events && a.duration.is_some() {
            return usage("-D does not work with events (-e), as in perftest".into());
        }
        let iters = a
            .iters
            .unwrap_or(if kind == TestKind::Bw && verb == Verb::Write {
                5000
            } else {
                1000
            });
        if iters < 5 {
            return usage(format!("iterations must be at least 5 (got {iters})"));
        }
        if iters > 100_000_000 {
            return usage(format!("iterations must be at most 10^8 (got {iters})"));
        }
        if let Some(d) = a.duration
            && !(1..=86_400).contains(&d)
        {
            return usage(format!("-D must be 1 .. 86400 seconds (got {d})"));
        }
        let margin = match (a.duration, a.margin) {
            (None, Some(_)) => return usage("--margin applies to -D runs".into()),
            (None, None) => 0,
            (Some(d), None) => d / 4,
            (Some(d), Some(m)) if m.saturating_mul(2) >= d => {
                return usage(format!(
                    "--margin {m} leaves nothing of -D {d} to measure (2 x margin must be less)"
                ));
            }
            (Some(_), Some(m)) => m,
        };
        if a.timeout == 0 || a.timeout > 86_400 {
            return usage(format!(
                "--timeout must be 1 .. 86400 seconds (got {})",
                a.timeout
            ));
        }
        // perftest's MIN_QP_NUM .. MAX_QP_NUM, and its rule that latency runs use one QP.
        if a.qps == 0 || a.qps > MAX_QPS {
            return usage(format!(
                "number of QPs must be 1 .. {MAX_QPS} (got {})",
                a.qps
            ));
        }
        if a.qps > 1 && kind == TestKind::Lat {
            return usage("multiple QPs (-q) are only available on BW tests".into());
        }
        if a.post_list == 0 || a.post_list > 64 {
            return usage(format!("post list must be 1 .. 64 (got {})", a.post_list));
        }
        if a.bidirectional && kind == TestKind::Lat {
            return usage("-b applies to BW tests".into());
        }
        let mtu = match a.mtu {
            None => None,
            Some(m) if mtu_enum(m).is_some() => Some(m),
            Some(m) => return usage(format!("invalid MTU {m} (256, 512, 1024, 2048 or 4096)")),
        };
        let mut tx_depth = a
            .tx_depth
            .unwrap_or(if kind == TestKind::Bw { 128 } else { 1 });
        // The side that receives: every SEND, and the target of a WRITE with immediate.
        let receives = verb == Verb::Send || imm;
        let mut rx_depth = a.rx_depth.unwrap_or(if receives { 512 } else { 1 });
        if tx_depth == 0 || rx_depth == 0 || tx_depth > 8192 || rx_depth > 8192 {
            return usage("TX and RX depths must be 1 .. 8192".into());
        }
        if a.duration.is_none() {
            tx_depth = tx_depth.min(iters as u32);
            if receives {
                rx_depth = rx_depth.min(iters as u32);
            }
        }
        if a.post_list > tx_depth {
            return usage(format!(
                "post list {} is larger than the TX depth {tx_depth}",
                a.post_list
            ));
        }
        let req_cq_mod = a.cq_mod.is_some();
        let mut cq_mod = a.cq_mod.unwrap_or(100).max(1);
        if size > 8192 && conn != Conn::Ud && !a.all && !a.events && !req_cq_mod {
            cq_mod = 1;
        }
        if a.post_list > 1 && !req_cq_mod {
            cq_mod = a.post_list;
        }
        cq_mod = cq_mod.min(tx_depth).max(1);
        let inline_size = match (verb, a.inline_size) {
            (Verb::Read | Verb::Atomic, _) => 0,
            (_, Some(i)) => i,
            (Verb::Write, None) if kind == TestKind::Lat => 220,
            (Verb::Send, None) if kind == TestKind::Lat && conn == Conn::Ud => 188,
            (Verb::Send, None) if kind == TestKind::Lat => 236,
            _ => 0,
        };
        if a.data_validation {
            validation::check(verb, kind, conn, a, tx_depth)?;
        }
        if a.all {
            size = MAX_SIZE;
        }
        Ok(PerfConfig {
            verb,
            kind,
            conn,
            size,
            all: a.all,
            iters,
            duration: a.duration,
            margin,
            qps: a.qps,
            tx_depth,
            rx_depth,
            cq_mod,
            post_list: a.post_list,
            inline_size,
            mtu,
            bidirectional: a.bidirectional,
            events: a.events,
            out_reads: a.outs.unwrap_or(16).clamp(1, 16),
            atomic_cmp_swap,
            gid_index: a.gid_index.unwrap_or(1),
            gbits: a.report_gbits,
            perftest_version: a.perftest_version.clone(),
            imm,
            rdma_cm: a.rdma_cm,
            qp_timeout: a.qp_timeout,
        })
    }

    /// Whether this side's peer sends it messages that consume receives: SEND, or WRITE with
    /// immediate (each takes a receive WQE and completes with the immediate).
    pub fn receives(&self) -> bool {
        self.verb == Verb::Send || self.imm
    }

    /// perftest's name of the test (`testsStr`): the verb's, `RDMA_Write_imm` / `Send_imm`
    /// with immediate.
    pub fn title(&self) -> &'static str {
        match (self.verb, self.imm) {
            (Verb::Write, true) => "RDMA_Write_imm",
            (Verb::Send, true) => "Send_imm",
            (v, _) => v.title(),
        }
    }

    /// The sizes to run: the one size, or 2 .. 2^23 with `-a` (UD: up to the MTU).
    pub fn sizes(&self, mtu_bytes: u32) -> Vec<u64> {
        if !self.all {
            return vec![self.size];
        }
        let max = if self.conn == Conn::Ud {
            u64::from(mtu_bytes)
        } else {
            MAX_SIZE
        };
        (1..24).map(|i| 1u64 << i).filter(|&s| s <= max).collect()
    }

    /// The signature rnic sends after its version string.
    pub fn sig(&self) -> protocol::TestSig {
        protocol::TestSig {
            test: self.verb.code() * 2
                + u8::from(self.kind == TestKind::Lat)
                + if self.imm { protocol::SIG_IMM } else { 0 },
            conn: self.conn.code(),
            size: if self.all { u32::MAX } else { self.size as u32 },
            iters: if self.duration.is_some() {
                0
            } else {
                self.iters as u32
            },
        }
    }
}

/// Tests' helper: the configuration `args` (perftest flags) give, as the command line would.
#[cfg(test)]
pub(crate) fn config_from(
    verb: Verb,
    kind: TestKind,
    args: &[&str],
) -> Result<PerfConfig, ToolError> {
    use clap::Parser;
    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: PerfArgs,
    }
    let mut v = vec!["t"];
    v.extend_from_slice(args);
    PerfConfig::from_args(verb, kind, &T::try_parse_from(v).unwrap().a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(verb: Verb, kind: TestKind, args: &[&str]) -> Result<PerfConfig, ToolError> {
        config_from(verb, kind, args)
    }

    #[test]
    fn qp_timeout_as_perftest() {
        assert_eq!(cfg(Verb::Write, TestKind::Bw, &[]).unwrap().qp_timeout, 14);
        let c = cfg(Verb::Send, TestKind::Lat, &["-R", "-u", "18"]).unwrap();
        assert_eq!((c.rdma_cm, c.qp_timeout), (true, 18));
        assert!(cfg(Verb::Write, TestKind::Bw, &["--qp_timeout", "31"]).is_ok());
        // Above 31 the 5-bit field cannot hold it: a usage error before anything runs.
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            a: PerfArgs,
        }
        assert!(T::try_parse_from(["t", "-u", "32"]).is_err());
    }

    #[test]
    fn perftest_defaults() {
        let c = cfg(Verb::Write, TestKind::Bw, &[]).unwrap();
        assert_eq!(
            (c.size, c.iters, c.tx_depth, c.cq_mod, c.inline_size),
            (65536, 5000, 128, 1, 0)
        );
        let c = cfg(Verb::Write, TestKind::Bw, &["-s", "8"]).unwrap();
        assert_eq!(c.cq_mod, 100);
        let c = cfg(Verb::Read, TestKind::Bw, &[]).unwrap();
        assert_eq!(c.iters, 1000);
        let c = cfg(Verb::Send, TestKind::Bw, &["-s", "64"]).unwrap();
        assert_eq!((c.rx_depth, c.tx_depth), (512, 128));
        let c = cfg(Verb::Write, TestKind::Lat, &[]).unwrap();
        assert_eq!(
            (c.size, c.iters, c.tx_depth, c.inline_size),
            (2, 1000, 1, 220)
        );
        let c = cfg(Verb::Send, TestKind::Lat, &["-c", "UD"]).unwrap();
        assert_eq!(c.inline_size, 188);
        let c = cfg(Verb::Atomic, TestKind::Bw, &[]).unwrap();
        assert_eq!((c.size, c.inline_size), (8, 0));
        let c = cfg(Verb::Write, TestKind::Bw, &["-a"]).unwrap();
        assert_eq!(c.sizes(1024).len(), 23);
        assert_eq!(c.sizes(1024)[22], MAX_SIZE);
    }

    #[test]
    fn qp_counts_as_perftest() {
        assert!(cfg(Verb::Write, TestKind::Bw, &["-q", "16384"]).is_ok());
        assert!(cfg(Verb::Write, TestKind::Bw, &["-q", "16385"]).is_err());
        assert!(cfg(Verb::Write, TestKind::Bw, &["-q", "0"]).is_err());
        assert!(cfg(Verb::Send, TestKind::Lat, &["-q", "2"]).is_err());
        assert!(cfg(Verb::Send, TestKind::Lat, &["-q", "1"]).is_ok());
    }

    #[test]
    fn bad_combinations() {
        assert!(cfg(Verb::Write, TestKind::Bw, &["-c", "XX"]).is_err());
        assert!(cfg(Verb::Read, TestKind::Bw, &["-c", "UD"]).is_err());
        assert!(cfg(Verb::Atomic, TestKind::Bw, &["-s", "16"]).is_err());
        assert!(cfg(Verb::Write, TestKind::Bw, &["-n", "2"]).is_err());
        assert!(cfg(Verb::Write, TestKind::Bw, &["-m", "1500"]).is_err());
        assert!(cfg(Verb::Write, TestKind::Lat, &["-b"]).is_err());
        assert!(cfg(Verb::Write, TestKind::Bw, &["-s", "0"]).is_err());
        assert!(cfg(Verb::Write, TestKind::Bw, &["-D", "18446744073709551615"]).is_err());
        assert!(cfg(Verb::Write, TestKind::Bw, &["-n", "18446744073709551615"]).is_err());
        assert!(
            cfg(
                Verb::Write,
                TestKind::Bw,
                &["--timeout", "18446744073709551615"]
            )
            .is_err()
        );
        assert!(cfg(Verb::Write, TestKind::Bw, &["-t", "4294967295"]).is_err());
        assert!(cfg(Verb::Write, TestKind::Bw, &["--margin", "1"]).is_err());
        assert!(cfg(Verb::Write, TestKind::Bw, &["-D", "4", "-e"]).is_err());
        assert!(cfg(Verb::Write, TestKind::Bw, &["-D", "4", "--margin", "2"]).is_err());
    }

    /// perftest's rules for the with-immediate flags (which tests take them, its messages) and
    /// what they change: the verb perftest negotiates, the receiving side's RX depth, the
    /// test's name.
    #[test]
    fn with_immediate_as_perftest() {
        let msg = |verb, kind, args: &[&str]| match cfg(verb, kind, args) {
            Err(ToolError::Usage(m)) => m,
            other => panic!("{other:?}"),
        };
        for (verb, kind) in [
            (Verb::Send, TestKind::Bw),
            (Verb::Read, TestKind::Bw),
            (Verb::Atomic, TestKind::Lat),
        ] {
            assert_eq!(
                msg(verb, kind, &["--write_with_imm"]),
                "Write_with_imm can only be used with write_lat and write_bw tests"
            );
        }
        for verb in [Verb::Write, Verb::Read, Verb::Atomic] {
            assert_eq!(
                msg(verb, TestKind::Lat, &["--send_with_imm"]),
                "Send_with_imm can only be used with send_lat and send_bw tests"
            );
        }
        assert!(cfg(Verb::Write, TestKind::Bw, &["--write_with_imm", "-c", "UD"]).is_err());
        let mtu = 1024;
        for (verb, kind, flag, code, title) in [
            (
                Verb::Write,
                TestKind::Bw,
                "--write_with_imm",
                3,
                "RDMA_Write_imm",
            ),
            (
                Verb::Write,
                TestKind::Lat,
                "--write_with_imm",
                3,
                "RDMA_Write_imm",
            ),
            (Verb::Send, TestKind::Bw, "--send_with_imm", 1, "Send_imm"),
            (Verb::Send, TestKind::Lat, "--send_with_imm", 1, "Send_imm"),
        ] {
            let c = cfg(verb, kind, &[flag]).unwrap();
            assert!(c.imm && c.receives(), "{flag}");
            assert_eq!(c.title(), title);
            assert_eq!(negotiate::Params::of(&c, mtu).verb, code);
            assert_eq!(negotiate::Params::of(&c, mtu).use_write_with_imm, 0);
            assert_eq!(c.rx_depth, 512, "perftest's DEF_RX_SEND");
            assert_eq!(c.sig().test, cfg(verb, kind, &[]).unwrap().sig().test + 8);
        }
        let plain = cfg(Verb::Write, TestKind::Bw, &[]).unwrap();
        assert!(!plain.imm && !plain.receives());
        assert_eq!(negotiate::Params::of(&plain, mtu).verb, 2);
        let c = cfg(
            Verb::Write,
            TestKind::Lat,
            &["--write_with_imm", "-n", "100"],
        )
        .unwrap();
        assert_eq!(c.rx_depth, 100, "RX depth capped at the iterations");
        // UC takes WRITE with immediate (RC and UC only); -b and -a too.
        assert!(
            cfg(
                Verb::Write,
                TestKind::Bw,
                &["--write_with_imm", "-c", "UC", "-b", "-a"]
            )
            .is_ok()
        );
    }

    #[test]
    fn rdma_cm_as_perftest() {
        let c = cfg(Verb::Write, TestKind::Bw, &["-R"]).unwrap();
        assert!(c.rdma_cm);
        assert_eq!(negotiate::Params::of(&c, 1024).use_rdma_cm, 1);
        assert_eq!(
            negotiate::Params::of(&cfg(Verb::Write, TestKind::Bw, &[]).unwrap(), 1024).use_rdma_cm,
            0
        );
        let msg = |args: &[&str]| match cfg(Verb::Send, TestKind::Lat, args) {
            Err(ToolError::Usage(m)) => m,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            msg(&["--rdma_cm", "-c", "UC"]),
            "UC is not supported in librdmacm"
        );
        assert!(msg(&["-R", "-c", "UD"]).contains("SIDR"));
    }

    #[test]
    fn duration_margins() {
        let margin = |args: &[&str]| cfg(Verb::Write, TestKind::Bw, args).unwrap().margin;
        assert_eq!(margin(&[]), 0);
        assert_eq!(margin(&["-D", "5"]), 1);
        assert_eq!(margin(&["-D", "3"]), 0);
        assert_eq!(margin(&["-D", "20"]), 5);
        assert_eq!(margin(&["-D", "5", "--margin", "2"]), 2);
    }
}
