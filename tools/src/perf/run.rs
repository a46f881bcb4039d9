//! Running a perf test: the device and its resources ([`super::res`]), perftest's out-of-band
//! sequence for each test (which hand shakes happen where, from
//! `src/{write,read,send,atomic}_{bw,lat}.c` of perftest 4.5), the measurement ([`super::bw`], [`super::lat`]) and the report.
//!
//! `--loopback` runs the server and the client in two threads of this process, on the
//! emulated pair `emu0` (server) and `emu1` (client), joined by a TCP connection on 127.0.0.1
//! (with `-R`, by rdma_cm between the pair): the same code and the same protocol as two
//! processes; the client's text is printed.
//!
//! With `-R` ([`super::cm`]) the exchanges travel on perftest's comm QP, the test QPs are
//! connected by rdma_cm between the two hand shakes perftest adds for it
//! (`create_rdma_cm_connection`) instead of `ctx_connect`, and disconnected by it at the end.

use super::cm::CommQp;
use super::protocol::{BwReport, Comm, PerfDest};
use super::report::{self, BwResult, RESULT_LINE};
use super::res::Res;
use super::{Conn, PerfArgs, PerfConfig, TestKind, Verb, negotiate, plot};
use crate::error::ToolError;
use crate::oob;
use crate::rdma::{self, EmuOpts, mtu_bytes, mtu_enum};
use std::io::Write as _;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where a side's text goes: stdout, or a buffer (the server of a loopback run).
#[derive(Clone)]
pub enum Out {
    /// Print.
    Stdout,
    /// Keep (shown only if the run fails).
    Buffer(Arc<Mutex<String>>),
}

impl Out {
    /// Writes text.
    pub fn put(&self, s: &str) {
        match self {
            Out::Stdout => {
                let mut o = std::io::stdout().lock();
                let _ = o.write_all(s.as_bytes());
                let _ = o.flush();
            }
            Out::Buffer(b) => b.lock().unwrap_or_else(|e| e.into_inner()).push_str(s),
        }
    }
}

/// Everything one side needs to run.
pub struct SideParams {
    /// The run.
    pub cfg: PerfConfig,
    /// Device name.
    pub dev: String,
    /// Emulator options.
    pub emu: EmuOpts,
    /// Server address (client side).
    pub server: Option<String>,
    /// TCP port.
    pub port: u16,
    /// Peer and progress timeout.
    pub timeout: Duration,
    /// Text sink.
    pub out: Out,
    /// JSON file, if asked.
    pub json: Option<PathBuf>,
    /// SVG file, if asked.
    pub plot: Option<PathBuf>,
    /// The GID index asked with -x.
    pub gid_index: Option<u32>,
    /// `--emu-counters`: print the emulated device's counters after the run.
    pub emu_counters: bool,
}

/// A listening or connecting side, before the connection with the peer exists.
pub enum Tcp {
    /// Server: accept on this listener.
    Listen(TcpListener),
    /// Client: connect to this host.
    Connect(String),
    /// `-R`: no socket; rdma_cm on the port, the client towards this host, the server
    /// (`None`) listening on its device's address.
    RdmaCm(Option<String>),
}

/// Runs one side to the end.
pub fn side(p: &SideParams, tcp: Tcp) -> Result<(), ToolError> {
    let ctx = rdma::open(&p.dev, &p.emu)?;
    let counters = p.emu_counters.then(|| ctx.clone());
    let r = run_side(p, tcp, ctx);
    // After the run, passed or failed: the drops explain a failed one.
    if let Some(ctx) = counters {
        p.out.put(&rdma::format_emu_counters(&p.dev, &ctx));
    }
    r
}

fn run_side(p: &SideParams, tcp: Tcp, ctx: rnic_verbs::Context) -> Result<(), ToolError> {
    let cfg = &p.cfg;
    let client = matches!(tcp, Tcp::Connect(_) | Tcp::RdmaCm(Some(_)));
    let dev_reads = ctx.query_device().max_qp_rd_atom;
    let gid_index = rdma::pick_gid_index(&ctx, p.gid_index)?;
    let port_mtu = rdma::active_mtu(&ctx)?;
    let mut want_mtu = cfg.mtu.and_then(mtu_enum).unwrap_or(port_mtu);
    if want_mtu > port_mtu {
        // perftest's check_link: a path MTU above the port's active MTU is lowered to it.
        p.out.put(&format!(
            "Requested mtu is higher than active mtu \nChanging to active mtu - {port_mtu}\n"
        ));
        want_mtu = port_mtu;
    }
    if !client {
        p.out.put("\n************************************\n* Waiting for client to connect... *\n************************************\n");
    }
    // -R: this device's address and the server's, and the comm QP, which stays connected
    // until the test QPs are disconnected, as perftest's.
    let mut cm_addrs = None;
    let mut comm_qp = None;
    let mut comm = match tcp {
        Tcp::Listen(l) => Comm::new(oob::accept(&l, p.timeout)?, false, p.timeout),
        Tcp::Connect(h) => Comm::new(oob::connect(&h, p.port, p.timeout)?, true, p.timeout),
        Tcp::RdmaCm(server) => {
            let ip = crate::cm::device_ipv4(&ctx)?;
            let qp = match &server {
                Some(h) => {
                    let dst = crate::cm::ipv4_of(h)
                        .map(|a| SocketAddr::new(IpAddr::V4(a), p.port))
                        .map_err(|why| ToolError::Connect(h.clone(), why))?;
                    cm_addrs = Some((ip, Some(dst)));
                    CommQp::connect(ip, dst, cfg.qp_timeout, p.timeout)?
                }
                None => {
                    cm_addrs = Some((ip, None));
                    let me = SocketAddr::new(IpAddr::V4(ip), p.port);
                    CommQp::accept(me, cfg.qps, cfg.qp_timeout, p.timeout)?
                }
            };
            let qp = std::sync::Arc::new(qp);
            comm_qp = Some(qp.clone());
            Comm::over_cm(qp, client, p.timeout)
        }
    };
    comm.exchange_versions(&cfg.perftest_version, &cfg.sig())?;
    comm.check_sys_data(4096, 64)?;
    let mtu = comm.exchange_mtu(want_mtu)?;
    let mtu_b = mtu_bytes(mtu);
    let mut cfg = cfg.clone();
    if cfg.conn == Conn::Ud && cfg.size > u64::from(mtu_b) {
        // perftest: a UD message is one packet, so the size (65536 unless -s says) is the
        // MTU's; with -a it says so on stderr (check_link).
        if cfg.all {
            eprint!(" Max msg size in UD is MTU {mtu_b}\n Changing to this MTU\n");
        }
        cfg.size = u64::from(mtu_b);
    }
    let sizes = cfg.sizes(mtu_b);
    let max_size = sizes.iter().copied().max().unwrap_or(cfg.size);
    cfg.gid_index = gid_index;
    // perftest's ctx_set_out_reads: at most what the device serves as responder.
    cfg.out_reads = cfg.out_reads.min(dev_reads).max(1);
    let mine = negotiate::Params::of(&cfg, mtu_b);
    let negotiated = comm.negotiate(&negotiate::encode(&mine, &ctx.query_device()))?;
    match &negotiated {
        Some(_) => log::info!(
            "perftest parameter negotiation with a peer of version {}: sent and received",
            comm.peer_version
        ),
        None => log::info!(
            "perftest parameter negotiation skipped: peer version {}, ours {}",
            comm.peer_version,
            cfg.perftest_version
        ),
    }
    if let Some(r) = negotiated {
        if let Some(m) = negotiate::mismatch(&mine, &r.params) {
            return Err(ToolError::Mismatch(m.trim_start().to_string()));
        }
        // perftest's compare_ibv_device.
        if cfg.out_reads > r.max_qp_rd_atom {
            p.out.put(
                " out_reads is greater than remote max_qp_rd_atom, using remote max_qp_rd_atom\n",
            );
            cfg.out_reads = r.max_qp_rd_atom.max(1);
        }
    }
    let cfg = &cfg;
    let t = p.timeout;
    let (mut res, conns) = match (&comm_qp, cm_addrs) {
        (Some(q), Some((me, server))) => {
            // create_rdma_cm_connection: a hand shake (perftest's QP messages are still
            // zero), the test QPs' connections, another hand shake.
            let mut res = Res::without_qps(ctx, cfg, max_size, gid_index)?;
            let zero = PerfDest::default();
            comm.hand_shake(&zero, t)?;
            let conns = match server {
                Some(dst) => super::cm::connect_qps(&mut res, cfg, me, dst, t)?,
                None => super::cm::accept_qps(&mut res, cfg, q, t)?,
            };
            comm.hand_shake(&zero, t)?;
            (res, Some(conns))
        }
        _ => (Res::create(ctx, cfg, max_size, gid_index)?, None),
    };
    let mine = res.my_dests(cfg)?;
    p.out.put(&report::test_info(cfg, &p.dev, mtu_b, !client));
    let long = p.timeout * 20 + Duration::from_secs(cfg.duration.unwrap_or(0) * sizes.len() as u64);
    let n = mine.len();
    let lat_extra = cfg.kind == TestKind::Lat && cfg.verb != Verb::Send;
    if lat_extra {
        comm.hand_shake(&mine[0], t)?;
    }
    let mut rem = Vec::with_capacity(n);
    for d in &mine {
        rem.push(comm.hand_shake(d, t)?);
    }
    // With -R the CM connected the QPs already (perftest skips both).
    if conns.is_none() {
        if is_v4(&mine[0].gid) != is_v4(&rem[0].gid) {
            return Err(ToolError::Mismatch(
                "GID types differ (IPv4 and IPv6): use a GID of the same kind (-x)".into(),
            ));
        }
        res.connect(cfg, &mine, &rem, mtu)?;
    }
    let send = cfg.verb == Verb::Send;
    if send {
        comm.hand_shake(&mine[0], t)?;
    }
    let mut text = String::new();
    for d in &mine {
        text.push_str(&report::address_lines("local", d, cfg.verb));
    }
    p.out.put(&text);
    let mut text = String::new();
    for d in &mine {
        let r = comm.hand_shake(d, t)?;
        text.push_str(&report::address_lines("remote", &r, cfg.verb));
    }
    p.out.put(&text);
    if !send {
        comm.hand_shake(&mine[0], t)?;
    }
    let run = Run {
        p,
        cfg,
        res: &res,
        mine: &mine,
        rem: &rem,
        sizes: &sizes,
        client,
        t,
        long,
    };
    let mut got = Collected::default();
    // write-lat ends without a closing hand shake: its connection stays open until the side
    // is done.
    let _open = match cfg.kind {
        TestKind::Bw => {
            run.bw(comm, &mut got)?;
            None
        }
        TestKind::Lat => run.lat(comm, &mut got)?,
    };
    if let Some(c) = conns {
        c.disconnect(!client, t)?;
    }
    drop(comm_qp);
    p.emu.linger();
    write_files(p, cfg, mtu_b, &got)
}

/// A connected side, ready to measure: what the test loops need.
struct Run<'a> {
    p: &'a SideParams,
    cfg: &'a PerfConfig,
    res: &'a Res,
    mine: &'a [PerfDest],
    rem: &'a [PerfDest],
    sizes: &'a [u64],
    client: bool,
    /// The timeout of a hand shake.
    t: Duration,
    /// The timeout of a hand shake that waits for the peer's whole run.
    long: Duration,
}

/// What the runs produced: each size's JSON, and the points to plot.
#[derive(Default)]
struct Collected {
    results: Vec<serde_json::Value>,
    points: Vec<(u64, f64)>,
}

impl Run<'_> {
    /// The bandwidth tests: each size measured, and the reports exchanged as perftest does.
    fn bw(&self, mut comm: Comm, got: &mut Collected) -> Result<(), ToolError> {
        let Run {
            p,
            cfg,
            res,
            mine,
            rem,
            sizes,
            client,
            t,
            long,
        } = *self;
        let Collected { results, points } = got;
        p.out.put(&format!(
            "{RESULT_LINE}\n{}\n",
            report::bw_header(cfg.gbits)
        ));
        if cfg.receives() {
            // Both sides measure: the client its sends, the server its receives; with -b
            // each side sends and receives, and prints the sum of both sides' sends. A WRITE
            // with immediate runs the same way (perftest's write_bw.c for WRITE_IMM).
            for &size in sizes {
                if !client || cfg.bidirectional {
                    super::bw::post_recvs(res, cfg, size)?;
                }
                comm.hand_shake(&mine[0], t)?;
                let r = if cfg.bidirectional {
                    let r = super::bw::run_bidir_send(res, cfg, size, rem, t)?;
                    let theirs = comm.xchg_bw_report(&to_report(&r))?;
                    with_peer(&r, &theirs)
                } else if client {
                    super::bw::run_client(res, cfg, size, rem, t)?
                } else {
                    super::bw::run_server_recv(res, cfg, size, t)?
                };
                p.out.put(&format!("{}\n", r.line(cfg.gbits)));
                results.push(r.json());
                points.push((size, r.bw_avg));
                if cfg.all {
                    comm.hand_shake(&mine[0], t)?;
                }
            }
            p.out.put(&format!("{RESULT_LINE}\n"));
            comm.close(&mine[0])?;
        } else if cfg.bidirectional {
            for &size in sizes {
                comm.hand_shake(&mine[0], t)?;
                let r = super::bw::run_client(res, cfg, size, rem, t)?;
                if cfg.all {
                    comm.hand_shake(&mine[0], long)?;
                }
                let theirs = comm.xchg_bw_report(&to_report(&r))?;
                let sum = with_peer(&r, &theirs);
                p.out.put(&format!("{}\n", sum.line(cfg.gbits)));
                results.push(sum.json());
                points.push((size, sum.bw_avg));
            }
            p.out.put(&format!("{RESULT_LINE}\n"));
            comm.close(&mine[0])?;
        } else if client {
            let mut last = BwResult::default();
            for &size in sizes {
                let r = super::bw::run_client(res, cfg, size, rem, t)?;
                p.out.put(&format!("{}\n", r.line(cfg.gbits)));
                results.push(r.json());
                points.push((size, r.bw_avg));
                last = r;
            }
            p.out.put(&format!("{RESULT_LINE}\n"));
            comm.hand_shake(&mine[0], long)?;
            comm.xchg_bw_report(&to_report(&last))?;
            comm.close(&mine[0])?;
        } else {
            // The server serves the client's WRITEs / READs / atomics and prints its
            // report (perftest prints the client's last result on the server).
            comm.hand_shake(&mine[0], long)?;
            let theirs = comm.xchg_bw_report(&BwReport::default())?;
            let r = from_report(&theirs);
            p.out.put(&format!("{}\n", r.line(cfg.gbits)));
            results.push(r.json());
            comm.close(&mine[0])?;
            p.out.put(&format!("{RESULT_LINE}\n"));
        }
        Ok(())
    }

    /// The latency tests: each size measured on this side. Returns the connection if the
    /// test does not close it (write-lat).
    fn lat(&self, mut comm: Comm, got: &mut Collected) -> Result<Option<Comm>, ToolError> {
        let Run {
            p,
            cfg,
            res,
            mine,
            rem,
            sizes,
            client,
            t,
            long,
        } = *self;
        let Collected { results, points } = got;
        p.out.put(&format!(
            "{RESULT_LINE}\n{}\n",
            report::lat_header(cfg.duration.is_some())
        ));
        match cfg.verb {
            Verb::Write if !cfg.imm => {
                for &size in sizes {
                    let line = super::lat::run_write(res, cfg, size, rem, client, t)?;
                    p.out.put(&format!("{}\n", line.0));
                    results.push(line.1);
                    points.push((size, line.2));
                }
                p.out.put(&format!("{RESULT_LINE}\n"));
                return Ok(Some(comm));
            }
            Verb::Send | Verb::Write => {
                // send_lat.c, and write_lat.c for WRITE_IMM: the receives posted, a hand
                // shake, then the ping-pong of completions; WRITE_IMM ends without the
                // closing exchange, as WRITE does.
                for &size in sizes {
                    super::bw::post_recvs(res, cfg, size)?;
                    comm.hand_shake(&mine[0], t)?;
                    let line = super::lat::run_send(res, cfg, size, rem, client, t)?;
                    p.out.put(&format!("{}\n", line.0));
                    results.push(line.1);
                    points.push((size, line.2));
                }
                p.out.put(&format!("{RESULT_LINE}\n"));
                if cfg.verb == Verb::Write {
                    return Ok(Some(comm));
                }
                comm.close(&mine[0])?;
            }
            Verb::Read | Verb::Atomic => {
                if client {
                    for &size in sizes {
                        let line = super::lat::run_read_atomic(res, cfg, size, rem, t)?;
                        p.out.put(&format!("{}\n", line.0));
                        results.push(line.1);
                        points.push((size, line.2));
                    }
                    p.out.put(&format!("{RESULT_LINE}\n"));
                    comm.close(&mine[0])?;
                } else {
                    comm.close_within(&mine[0], long)?;
                    p.out.put(&format!("{RESULT_LINE}\n"));
                }
            }
        }
        Ok(None)
    }
}

/// The JSON report and the plot, if asked.
fn write_files(
    p: &SideParams,
    cfg: &PerfConfig,
    mtu_b: u32,
    got: &Collected,
) -> Result<(), ToolError> {
    let Collected { results, points } = got;
    if let Some(path) = &p.json {
        let doc = report::json_report(cfg, &p.dev, mtu_b, results);
        let text = serde_json::to_string_pretty(&doc).map_err(|e| ToolError::Io(e.to_string()))?;
        std::fs::write(path, text + "\n")
            .map_err(|e| ToolError::io(&format!("writing {}", path.display()), e))?;
    }
    if let Some(path) = &p.plot
        && !points.is_empty()
    {
        let (title, ylab) = match cfg.kind {
            TestKind::Bw => (
                format!("{} BW ({})", cfg.title(), p.dev),
                format!(
                    "BW average [{}]",
                    if cfg.gbits { "Gb/sec" } else { "MiB/sec" }
                ),
            ),
            TestKind::Lat => (
                format!("{} latency ({})", cfg.title(), p.dev),
                "t_typical [usec]".to_string(),
            ),
        };
        std::fs::write(path, plot::svg(&title, &ylab, points))
            .map_err(|e| ToolError::io(&format!("writing {}", path.display()), e))?;
    }
    Ok(())
}

fn is_v4(g: &[u8; 16]) -> bool {
    g[..10].iter().all(|&b| b == 0) && g[10] == 0xff && g[11] == 0xff
}

/// A `-b` total: this side's result with the peer's rates added (size and count are ours).
fn with_peer(r: &BwResult, theirs: &BwReport) -> BwResult {
    BwResult {
        bw_peak: r.bw_peak + theirs.bw_peak,
        bw_avg: r.bw_avg + theirs.bw_avg,
        msg_rate: r.msg_rate + theirs.msg_rate,
        ..*r
    }
}

/// The peer's report as a result to print.
fn from_report(r: &BwReport) -> BwResult {
    BwResult {
        size: r.size,
        iters: r.iters,
        bw_peak: r.bw_peak,
        bw_avg: r.bw_avg,
        msg_rate: r.msg_rate,
    }
}

fn to_report(r: &BwResult) -> BwReport {
    BwReport {
        size: r.size,
        iters: r.iters,
        bw_peak: r.bw_peak,
        bw_avg: r.bw_avg,
        msg_rate: r.msg_rate,
    }
}

/// `rnic <test>`: one side, or both with `--loopback`.
pub fn main(verb: Verb, kind: TestKind, a: &PerfArgs) -> Result<(), ToolError> {
    let cfg = PerfConfig::from_args(verb, kind, a)?;
    if a.plot.is_some() && !a.all {
        return Err(ToolError::Usage("--plot draws a sweep: it needs -a".into()));
    }
    a.dev.check_port()?;
    let emu = a.emu.opts()?;
    let timeout = Duration::from_secs(a.timeout.max(1));
    let json = a
        .out_json_file
        .clone()
        .or_else(|| a.out_json.then(|| PathBuf::from("perftest_out.json")));
    let params =
        |dev: String, server: Option<String>, port: u16, out: Out, emu: EmuOpts| SideParams {
            cfg: cfg.clone(),
            dev,
            emu,
            server,
            port,
            timeout,
            out,
            json: json.clone(),
            plot: a.plot.clone(),
            gid_index: a.gid_index,
            emu_counters: a.emu_counters,
        };
    if a.loopback {
        if a.server.is_some() || a.dev.device.is_some() {
            return Err(ToolError::Usage(
                "--loopback runs both sides on emu0 / emu1: give no server address and no -d"
                    .into(),
            ));
        }
        // -R: rdma_cm from emu1 to emu0's address on the port; else a TCP port of its own.
        let (server_side, client_side, port) = if a.rdma_cm {
            let emu0 = rnic_verbs::DeviceName::EmuPair(0)
                .emulated_ip()
                .map(|ip| ip.to_string())
                .unwrap_or_default();
            (Tcp::RdmaCm(None), Tcp::RdmaCm(Some(emu0)), a.port)
        } else {
            let l = TcpListener::bind("127.0.0.1:0")
                .map_err(|e| ToolError::io("loopback listener", e))?;
            let port = l
                .local_addr()
                .map_err(|e| ToolError::io("loopback listener", e))?
                .port();
            (Tcp::Listen(l), Tcp::Connect("127.0.0.1".into()), port)
        };
        let buf = Arc::new(Mutex::new(String::new()));
        // emu0's capture holds both directions of the pair's link.
        let mut sp = params(
            "emu0".into(),
            None,
            port,
            Out::Buffer(buf.clone()),
            emu.clone(),
        );
        sp.json = None;
        sp.plot = None;
        let cpus = crate::affinity::two_cpus();
        let server = std::thread::spawn(move || {
            if let Some((_, cpu)) = cpus {
                crate::affinity::pin_current_thread(cpu);
            }
            side(&sp, server_side)
        });
        // The client runs in this thread (the device threads its side starts inherit the pin).
        if let Some((cpu, _)) = cpus {
            crate::affinity::pin_current_thread(cpu);
        }
        let client_emu = EmuOpts {
            pcap: None,
            faults: emu.faults.clone(),
        };
        let cp = params(
            "emu1".into(),
            Some("127.0.0.1".into()),
            port,
            Out::Stdout,
            client_emu,
        );
        let cr = side(&cp, client_side);
        let sr = server
            .join()
            .unwrap_or_else(|_| Err(ToolError::Verbs("the server thread panicked".into())));
        return match (cr, sr) {
            (Err(e), _) => Err(e),
            (Ok(()), Err(e)) => Err(ToolError::Verbs(format!("loopback server side: {e}"))),
            (Ok(()), Ok(())) => Ok(()),
        };
    }
    let client = a.server.is_some();
    let tcp = match (&a.server, a.rdma_cm) {
        (server, true) => Tcp::RdmaCm(server.clone()),
        (Some(h), false) => Tcp::Connect(h.clone()),
        (None, false) => Tcp::Listen(oob::listen(a.port)?),
    };
    let dev = a.dev.name(client);
    side(
        &params(dev, a.server.clone(), a.port, Out::Stdout, emu),
        tcp,
    )
}
