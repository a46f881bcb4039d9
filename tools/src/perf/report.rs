//! perftest's text: the header block (`ctx_print_test_info`), the address lines
//! (`ctx_print_pingpong_data`), the bandwidth and latency tables (`print_full_bw_report`,
//! `print_report_lat`) and the JSON report, with perftest's formats
//! (`src/perftest_parameters.h`, `src/perftest_communication.h`).
//!
//! Units: bandwidth in MiB/sec (2^20 bytes, what perftest computes; perftest 4.5 labels it
//! `MB/sec`, later versions `MiB/sec`), or Gb/sec (10^9 bits) with `--report_gbits`; message rate
//! in Mpps; latency in usec.

use super::protocol::PerfDest;
use super::{Conn, PerfConfig, TestKind, Verb};
use std::fmt::Write as _;

/// The dashes row (87).
pub const RESULT_LINE: &str =
    "---------------------------------------------------------------------------------------";

/// The bandwidth table's column header.
pub fn bw_header(gbits: bool) -> String {
    let u = if gbits { "Gb/sec" } else { "MiB/sec" };
    format!(" #bytes     #iterations    BW peak[{u}]    BW average[{u}]   MsgRate[Mpps]")
}

/// The latency table's column header.
pub fn lat_header(duration: bool) -> &'static str {
    if duration {
        " #bytes        #iterations       t_avg[usec]    tps average"
    } else {
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
    }
}

/// C's `%#0Nx`: `0x` and zero-padding to width `n` (the prefix counts), but no prefix for 0.
pub fn c_alt_hex(v: u64, n: usize) -> String {
    if v == 0 {
        format!("{:0n$}", 0, n = n)
    } else {
        format!("0x{:0w$x}", v, w = n.saturating_sub(2))
    }
}

/// perftest's name of the test, its words joined by `sep`: "RDMA_Write Post List BW Test"
/// in the header, "RDMA_Write_Post_List_BW_Test" in the JSON.
fn test_name(cfg: &PerfConfig, sep: &str) -> String {
    let mut words = vec![cfg.title()];
    if cfg.verb == Verb::Atomic {
        words.push(if cfg.atomic_cmp_swap {
            "CMP_AND_SWAP"
        } else {
            "FETCH_AND_ADD"
        });
    }
    match cfg.kind {
        TestKind::Bw => {
            if cfg.bidirectional {
                words.push("Bidirectional");
            }
            if cfg.post_list > 1 {
                words.extend(["Post", "List"]);
            }
            words.push("BW");
        }
        TestKind::Lat => words.push("Latency"),
    }
    words.push("Test");
    words.join(sep)
}

/// The header block printed before the addresses.
pub fn test_info(cfg: &PerfConfig, device: &str, mtu_bytes: u32, server: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{RESULT_LINE}");
    let _ = writeln!(s, "                    {}", test_name(cfg, " "));
    if cfg.events {
        let _ = writeln!(s, " Test with events. Using {device}_comp0");
    }
    let _ = writeln!(s, " Dual-port       : OFF\t\tDevice         : {device}");
    let _ = writeln!(s, " Number of qps   : {}\t\tTransport type : IB", cfg.qps);
    let _ = writeln!(
        s,
        " Connection type : {}\t\tUsing SRQ      : OFF",
        cfg.conn.as_str()
    );
    let _ = writeln!(s, " PCIe relax order: Unsupported");
    let _ = writeln!(s, " ibv_wr* API     : OFF");
    if !server || cfg.bidirectional {
        let _ = writeln!(s, " TX depth        : {}", cfg.tx_depth);
    }
    if cfg.post_list > 1 {
        let _ = writeln!(s, " Post List       : {}", cfg.post_list);
    }
    if cfg.receives() && (server || cfg.bidirectional) {
        let _ = writeln!(s, " RX depth        : {}", cfg.rx_depth);
    }
    if cfg.kind == TestKind::Bw {
        let _ = writeln!(s, " CQ Moderation   : {}", cfg.cq_mod);
    }
    let _ = writeln!(s, " Mtu             : {mtu_bytes}[B]");
    let _ = writeln!(s, " Link type       : Ethernet");
    let _ = writeln!(s, " GID index       : {}", cfg.gid_index);
    if cfg.verb != Verb::Read && cfg.verb != Verb::Atomic {
        let _ = writeln!(s, " Max inline data : {}[B]", cfg.inline_size);
    } else {
        let _ = writeln!(s, " Outstand reads  : {}", cfg.out_reads);
    }
    let on = if cfg.rdma_cm { "ON" } else { "OFF" };
    let _ = writeln!(s, " rdma_cm QPs\t : {on}");
    if cfg.rdma_cm {
        // perftest prints this after the rdma_cm connections are made already.
        let _ = write!(s, " Data ex. method : rdma_cm");
        if server {
            let _ = write!(
                s,
                "\n{RESULT_LINE}\n Waiting for client rdma_cm QP to connect\n Please run the same command with the IB/RoCE interface IP"
            );
        }
        let _ = writeln!(s);
    } else {
        let _ = writeln!(s, " Data ex. method : Ethernet");
    }
    let _ = writeln!(s, "{RESULT_LINE}");
    s
}

/// One `local address:` / `remote address:` line and its `GID:` line.
pub fn address_lines(side: &str, d: &PerfDest, verb: Verb) -> String {
    let mut s = format!(
        " {side} address: LID {} QPN {} PSN {}",
        c_alt_hex(u64::from(d.lid), 4),
        c_alt_hex(u64::from(d.qpn), 6),
        c_alt_hex(u64::from(d.psn), 6)
    );
    if verb == Verb::Read {
        let _ = write!(s, " OUT {}", c_alt_hex(u64::from(d.out_reads), 4));
    }
    if verb == Verb::Read || verb == Verb::Write {
        let _ = write!(
            s,
            " RKey {} VAddr {}",
            c_alt_hex(u64::from(d.rkey), 8),
            c_alt_hex(d.vaddr, 16)
        );
    }
    s.push('\n');
    let g: Vec<String> = d.gid.iter().map(|b| format!("{b:02}")).collect();
    let _ = writeln!(s, " GID: {}", g.join(":"));
    s
}

/// A bandwidth result.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BwResult {
    /// Message size.
    pub size: u64,
    /// Messages counted.
    pub iters: u64,
    /// Peak bandwidth (unit per `gbits`).
    pub bw_peak: f64,
    /// Average bandwidth.
    pub bw_avg: f64,
    /// Message rate, Mpps.
    pub msg_rate: f64,
}

/// Bytes per report unit: MiB (2^20) or Gb (10^9 bits = 125,000,000 bytes).
pub fn unit_factor(gbits: bool) -> f64 {
    if gbits { 125_000_000.0 } else { 1_048_576.0 }
}

impl BwResult {
    /// Computes the result from per-message post and completion times (in seconds from the
    /// start), as perftest's `print_report_bw` does: the average over the whole run, and the
    /// peak as the best per-message time of any window that starts at a post and ends at a
    /// signalled completion.
    pub fn compute(
        size: u64,
        posted: &[f64],
        completed: &[f64],
        cq_mod: usize,
        post_list: usize,
        gbits: bool,
    ) -> BwResult {
        let n = posted.len().min(completed.len());
        if n == 0 {
            return BwResult {
                size,
                ..BwResult::default()
            };
        }
        let factor = unit_factor(gbits);
        // With several QPs completions can come out of post order: message j's time is when
        // it and every message posted before it had completed (a running maximum).
        let mut done: Vec<f64> = completed[..n].to_vec();
        for j in 1..n {
            if done[j] < done[j - 1] {
                done[j] = done[j - 1];
            }
        }
        let completed = &done[..];
        let total = (completed[n - 1] - posted[0]).max(1e-9);
        let mut opt = total;
        let cq_mod = cq_mod.max(1);
        let mut i = 0;
        // Bounded work: at most ~4M window evaluations.
        let step_i = post_list.max(1).max(n * n / cq_mod / 4_000_000);
        while i < n {
            let mut j = (i + 1).div_ceil(cq_mod) * cq_mod - 1;
            while j < n {
                let t = (completed[j] - posted[i]) / (j - i + 1) as f64;
                if t > 0.0 && t < opt {
                    opt = t;
                }
                j += cq_mod;
            }
            if n % cq_mod != 0 {
                let j = n - 1;
                let t = (completed[j] - posted[i]) / (j - i + 1) as f64;
                if t > 0.0 && t < opt {
                    opt = t;
                }
            }
            i += step_i;
        }
        BwResult {
            size,
            iters: n as u64,
            bw_peak: size as f64 / opt / factor,
            bw_avg: size as f64 * n as f64 / total / factor,
            msg_rate: n as f64 / total / 1e6,
        }
    }

    /// perftest's `REPORT_FMT` line (`REPORT_FMT_EXT` for tiny Gb/sec values).
    pub fn line(&self, gbits: bool) -> String {
        if gbits && self.bw_avg < 0.1 {
            format!(
                " {:<7}    {}           {:<7.6}            {:<7.6}            {:<7.6}",
                self.size, self.iters, self.bw_peak, self.bw_avg, self.msg_rate
            )
        } else {
            format!(
                " {:<7}    {:<10}       {:<7.2}            {:<7.2}\t\t   {:<7.6}",
                self.size, self.iters, self.bw_peak, self.bw_avg, self.msg_rate
            )
        }
    }

    /// JSON object of the result (perftest's keys).
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "MsgSize": self.size,
            "n_iterations": self.iters,
            "BW_peak": round(self.bw_peak, 2),
            "BW_average": round(self.bw_avg, 2),
            "MsgRate": round(self.msg_rate, 6),
        })
    }
}

fn round(x: f64, digits: i32) -> f64 {
    let p = 10f64.powi(digits);
    (x * p).round() / p
}

/// A latency result, computed as perftest's `print_report_lat` does.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LatResult {
    /// Message size.
    pub size: u64,
    /// Iterations run.
    pub iters: u64,
    /// Minimum, usec.
    pub t_min: f64,
    /// Maximum after dropping the two largest samples, usec.
    pub t_max: f64,
    /// Median, usec.
    pub t_typical: f64,
    /// Mean, usec.
    pub t_avg: f64,
    /// Standard deviation, usec.
    pub t_stdev: f64,
    /// 99th percentile, usec.
    pub p99: f64,
    /// 99.9th percentile, usec.
    pub p999: f64,
}

impl LatResult {
    /// From the samples (usec, already divided by the RTT factor): sorted, the two largest
    /// dropped (`LAT_MEASURE_TAIL`), median as perftest's `get_median`, percentiles at
    /// `ceil(n * 0.99)` and `ceil(n * 0.999)` of the trimmed count.
    pub fn compute(size: u64, iters: u64, samples: &[f64]) -> LatResult {
        let mut d: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        d.sort_by(f64::total_cmp);
        if d.is_empty() {
            return LatResult {
                size,
                iters,
                ..LatResult::default()
            };
        }
        let full = d.len();
        let m = if full > 2 { full - 2 } else { full };
        let median = if m == 1 {
            d[0]
        } else if (m - 1) % 2 == 1 {
            (d[m / 2] + d[m / 2 - 1]) / 2.0
        } else {
            d[m / 2]
        };
        let avg = d[..m].iter().sum::<f64>() / m as f64;
        let var = d[..m].iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / m as f64;
        let at = |q: f64| d[((m as f64 * q).ceil() as usize).min(full - 1)];
        LatResult {
            size,
            iters,
            t_min: d[0],
            t_max: d[m.min(full - 1)],
            t_typical: median,
            t_avg: avg,
            t_stdev: var.sqrt(),
            p99: at(0.99),
            p999: at(0.999),
        }
    }

    /// perftest's `REPORT_FMT_LAT` line.
    pub fn line(&self) -> String {
        format!(
            " {:<7} {}          {:<7.2}        {:<7.2}      {:<7.2}  \t       {:<7.2}     \t{:<7.2}\t\t{:<7.2} \t\t{:<7.2}",
            self.size,
            self.iters,
            self.t_min,
            self.t_max,
            self.t_typical,
            self.t_avg,
            self.t_stdev,
            self.p99,
            self.p999
        )
    }

    /// JSON object of the result (perftest's keys).
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "MsgSize": self.size,
            "n_iterations": self.iters,
            "t_min": round(self.t_min, 2),
            "t_max": round(self.t_max, 2),
            "t_typical": round(self.t_typical, 2),
            "t_avg": round(self.t_avg, 2),
            "t_stdev": round(self.t_stdev, 2),
            "percentile_99": round(self.p99, 2),
            "percentile_99.9": round(self.p999, 2),
        })
    }
}

/// A latency result of a duration run (`REPORT_FMT_LAT_DUR`).
pub fn lat_duration_line(size: u64, iters: u64, t_avg: f64, tps: f64) -> String {
    format!(" {size:<7}       {iters}            {t_avg:<7.2}        {tps:<7.2}")
}

/// The JSON report: `test_info` (perftest's keys) and `results` (the last size) plus, for
/// `-a`, every size in `sweep`.
pub fn json_report(
    cfg: &PerfConfig,
    device: &str,
    mtu_bytes: u32,
    results: &[serde_json::Value],
) -> serde_json::Value {
    let test = test_name(cfg, "_");
    let mut info = serde_json::json!({
        "test": test,
        "Dual_port": "OFF",
        "Device": device,
        "Number_of_qps": cfg.qps,
        "Transport_type": "IB",
        "Connection_type": cfg.conn.as_str(),
        "Using_SRQ": "OFF",
        "TX_depth": cfg.tx_depth,
        "Mtu": mtu_bytes,
        "Link_type": "Ethernet",
        "GID_index": cfg.gid_index,
        "rdma_cm_QPs": if cfg.rdma_cm { "ON" } else { "OFF" },
        "Data_ex_method": if cfg.rdma_cm { "rdma_cm" } else { "Ethernet" },
    });
    if cfg.kind == TestKind::Bw {
        info["CQ_Moderation"] = cfg.cq_mod.into();
    }
    if cfg.verb == Verb::Read || cfg.verb == Verb::Atomic {
        info["Outstand_reads"] = cfg.out_reads.into();
    } else {
        info["Max_inline_data"] = cfg.inline_size.into();
    }
    let mut v = serde_json::json!({
        "test_info": info,
        "results": results.last().cloned().unwrap_or(serde_json::Value::Null),
    });
    if results.len() > 1 {
        v["sweep"] = serde_json::Value::Array(results.to_vec());
    }
    v
}

/// Connection type name.
impl Conn {
    /// perftest's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Conn::Rc => "RC",
            Conn::Uc => "UC",
            Conn::Ud => "UD",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::PerfArgs;
    use super::*;
    use clap::Parser;

    #[test]
    fn headers_golden() {
        assert_eq!(RESULT_LINE.len(), 87);
        assert_eq!(
            bw_header(false),
            " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]"
        );
        assert_eq!(
            bw_header(true),
            " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
        );
        assert!(lat_header(false).starts_with(" #bytes #iterations    t_min[usec]    t_max[usec]"));
    }

    #[test]
    fn bw_line_golden() {
        let r = BwResult {
            size: 65536,
            iters: 5000,
            bw_peak: 11495.123,
            bw_avg: 11490.5,
            msg_rate: 0.183848,
        };
        // REPORT_FMT " %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t   %-7.6lf"
        assert_eq!(
            r.line(false),
            " 65536      5000             11495.12            11490.50\t\t   0.183848"
        );
        let small = BwResult {
            size: 2,
            iters: 1000,
            bw_peak: 0.05,
            bw_avg: 0.04,
            msg_rate: 2.5,
        };
        assert_eq!(
            small.line(true),
            " 2          1000           0.050000            0.040000            2.500000"
        );
    }

    #[test]
    fn lat_line_golden() {
        let r = LatResult {
            size: 2,
            iters: 1000,
            t_min: 1.0,
            t_max: 2.5,
            t_typical: 1.25,
            t_avg: 1.3,
            t_stdev: 0.1,
            p99: 2.0,
            p999: 2.5,
        };
        assert_eq!(
            r.line(),
            " 2       1000          1.00           2.50         1.25     \t       1.30        \t0.10   \t\t2.00    \t\t2.50   "
        );
    }

    #[test]
    fn alt_hex_like_c() {
        assert_eq!(c_alt_hex(0, 4), "0000");
        assert_eq!(c_alt_hex(0x11, 6), "0x0011");
        assert_eq!(c_alt_hex(0x3a5b2c, 6), "0x3a5b2c");
        assert_eq!(c_alt_hex(0x1234, 8), "0x001234");
    }

    #[test]
    fn address_line_golden() {
        let d = PerfDest {
            lid: 0,
            out_reads: 16,
            qpn: 0x11,
            psn: 0x3a5b2c,
            rkey: 0x1234,
            vaddr: 0x7f00_0000_1000,
            gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 10, 11, 0, 1],
            srqn: 0,
        };
        assert_eq!(
            address_lines("local", &d, Verb::Write),
            " local address: LID 0000 QPN 0x0011 PSN 0x3a5b2c RKey 0x001234 VAddr 0x007f0000001000\n \
             GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:11:00:01\n"
        );
        assert!(address_lines("remote", &d, Verb::Read).contains(" OUT 0x10 RKey"));
        assert!(!address_lines("remote", &d, Verb::Send).contains("RKey"));
    }

    #[test]
    fn lat_stats() {
        let s: Vec<f64> = (1..=100).map(f64::from).collect();
        let r = LatResult::compute(2, 101, &s);
        assert_eq!(r.t_min, 1.0);
        assert_eq!(r.t_max, 99.0); // 98 kept, index 98
        assert_eq!(r.t_typical, 49.5); // (d[49] + d[48]) / 2
        assert!((r.t_avg - 49.5).abs() < 1e-9);
        assert_eq!(r.p99, 99.0);
    }

    #[test]
    fn bw_compute() {
        // 10 messages of 1 MiB, one per ms: 1000 MiB/s average, 1e-2 Mpps... per message.
        let posted: Vec<f64> = (0..10).map(|i| f64::from(i) * 1e-3).collect();
        let completed: Vec<f64> = (1..=10).map(|i| f64::from(i) * 1e-3).collect();
        let r = BwResult::compute(1 << 20, &posted, &completed, 1, 1, false);
        assert!((r.bw_avg - 1000.0).abs() < 1e-6, "{r:?}");
        assert!((r.bw_peak - 1000.0).abs() < 1e-6, "{r:?}");
        assert!((r.msg_rate - 0.001).abs() < 1e-9);
        // Out-of-order completions (several QPs) never make the peak exceed what was sent.
        let mut shuffled = completed.clone();
        shuffled.swap(0, 8);
        let r = BwResult::compute(1 << 20, &posted, &shuffled, 1, 1, false);
        assert!(r.bw_peak <= 1000.0 + 1e-6, "{r:?}");
    }

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: PerfArgs,
    }

    fn names(verb: Verb, kind: TestKind, args: &[&str]) -> (String, String) {
        let mut v = vec!["t"];
        v.extend_from_slice(args);
        let cfg = PerfConfig::from_args(verb, kind, &T::try_parse_from(v).unwrap().a).unwrap();
        let header = test_info(&cfg, "emu0", 1024, true);
        let title = header.lines().nth(1).unwrap().to_string();
        let json = json_report(&cfg, "emu0", 1024, &[]);
        (
            title,
            json["test_info"]["test"].as_str().unwrap().to_string(),
        )
    }

    #[test]
    fn the_test_name_in_the_header_and_the_json() {
        assert_eq!(
            names(Verb::Write, TestKind::Bw, &["-b", "-l", "4"]),
            (
                "                    RDMA_Write Bidirectional Post List BW Test".to_string(),
                "RDMA_Write_Bidirectional_Post_List_BW_Test".to_string()
            )
        );
        assert_eq!(
            names(Verb::Atomic, TestKind::Lat, &["-A", "CMP_AND_SWAP"]),
            (
                "                    Atomic CMP_AND_SWAP Latency Test".to_string(),
                "Atomic_CMP_AND_SWAP_Latency_Test".to_string()
            )
        );
        assert_eq!(
            names(Verb::Send, TestKind::Bw, &[]),
            (
                "                    Send BW Test".to_string(),
                "Send_BW_Test".to_string()
            )
        );
    }
}
