//! `rnic rping`: librdmacm's `examples/rping.c` on rnic's connection manager: its flags,
//! its messages on stdout and stderr, and its exit statuses, in both roles and as a
//! persistent server (`-P`).
//!
//! The address picks the device, as rdma_cm binds an id to the device that owns the
//! address: 192.0.2.1 and 192.0.2.2 are the in-process pair `emu0` / `emu1`, any other IPv4
//! address the UDP-link device `emu:<IPv4>` ([`crate::cm::device_name_for`]). So two
//! processes ping over the UDP link with, e.g., `rnic rping -s -a 127.0.0.2` and
//! `rnic rping -c -I 127.0.0.1 -a 127.0.0.2`, and either side pairs with the real rping on
//! Linux rxe.
//!
//! What rping reports, rnic reports the same way: a connection the CM refused is
//! `cma event RDMA_CM_EVENT_REJECTED, error 8` and exit status 255 (rping's `exit(-1)`);
//! a taken address `rdma_bind_addr: Address already in use`, 255; bad `-S` / `-C` or no
//! role, rping's line and 22 (`EINVAL`); a host that does not resolve, rping's
//! `getaddrinfo failed` line and 254 (`EAI_NONAME`). What only rnic has (`--timeout` ran
//! out, a device that failed) is a `rnic: ...` line and status 1, as in the other tools.
//!
//! `-d` prints rping's debug lines; where rping prints a C pointer (`%p`), rnic prints what
//! identifies the object here (an id's local address, a QP's number).

use super::session::{CQ_DEPTH, Ended, RQ_DEPTH, SQ_DEPTH, Session};
use super::{BUFSIZE, DEFAULT_PORT, MIN_BUFSIZE};
use crate::args::EmuArgs;
use crate::cm::{self, CmEvent, CmId, ConnParam, EventChannel, EventKind, OpenFailure, PortSpace};
use crate::error::ToolError;
use crate::rdma::{self, EmuOpts};
use clap::ArgAction;
use rnic_verbs::{CompletionQueue, ProtectionDomain, QpCap, QueuePair};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// rping's status for bad arguments (`EINVAL`).
pub const EXIT_EINVAL: u8 = 22;
/// rping's status for a failed connection or run (`exit(-1)`, `return -1` from `main`).
pub const EXIT_FAILED: u8 = 255;
/// rping's status when `-a` / `-I` does not resolve (`EAI_NONAME`, -2).
pub const EXIT_EAI_NONAME: u8 = 254;

/// How long `rdma_resolve_addr` and `rdma_resolve_route` may take (rping's 2000 ms).
const RESOLVE_MS: Duration = Duration::from_millis(2000);
/// How long the client waits for the DREP of its DREQ before it exits; rping does not
/// wait at all (its `client DISCONNECT EVENT...` line comes if the DREP was quick), rnic
/// waits this long so that the line comes whenever the server answers.
const DREP_WAIT: Duration = Duration::from_secs(2);
/// rping's listen backlog.
const BACKLOG: i32 = 3;
/// The server's address without `-a` (rping binds to any; rnic needs a device).
const DEFAULT_SERVER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);
/// rping's `DISCONNECTED` state number, which its "wait for ..." lines print.
const DISCONNECTED: u32 = 10;

/// librdmacm's `atoi` reading of a number: leading blanks, a sign, digits up to the first
/// non-digit; nothing numeric is 0 (so `-S abc` is rping's "Invalid size 0").
fn atoi(s: &str) -> Result<i64, std::convert::Infallible> {
    let t = s.trim_start();
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let n = digits
        .bytes()
        .take_while(u8::is_ascii_digit)
        .fold(0i64, |n, d| {
            n.saturating_mul(10).saturating_add(i64::from(d - b'0'))
        });
    // An int, as C keeps it.
    let n = if neg { -n } else { n };
    Ok(n.clamp(i64::from(i32::MIN), i64::from(i32::MAX)))
}

/// rping's flags (`rping -s|-c [-vVdP] [-S size] [-C count] [-a addr] [-I addr] [-p port]`)
/// and rnic's emulator options.
///
/// ```
/// use clap::Parser;
/// #[derive(Parser)]
/// struct T {
///     #[command(flatten)]
///     a: rnic_tools::rping::run::RpingArgs,
/// }
/// let t = T::try_parse_from(["t", "-c", "-a", "127.0.0.2", "-C", "10", "-Vv", "-S", "x"]).unwrap();
/// assert!(t.a.client && !t.a.server);
/// assert_eq!((t.a.count, t.a.size, t.a.port), (Some(10), Some(0), 7174)); // atoi("x") is 0
/// assert_eq!((t.a.verbose, t.a.validate), (1, 1));
/// // The last of -s and -c wins, as in rping.
/// let t = T::try_parse_from(["t", "-c", "-s"]).unwrap();
/// assert!(t.a.server && !t.a.client);
/// ```
#[derive(Debug, Clone, clap::Args)]
pub struct RpingArgs {
    /// Server side.
    #[arg(short = 's', overrides_with = "client")]
    pub server: bool,
    /// Client side.
    #[arg(short = 'c', overrides_with = "server")]
    pub client: bool,
    /// Address: the server's to listen on (default 127.0.0.1), the client's to connect to. It
    /// picks the device: 192.0.2.1 / 192.0.2.2 are emu0 / emu1 in this process, other IPv4
    /// addresses the UDP-link device emu:<IPv4>.
    #[arg(short = 'a', value_name = "addr")]
    pub addr: Option<String>,
    /// Source address to bind to for client (default: the one the kernel routes from; for
    /// emu0 / emu1, the other one).
    #[arg(short = 'I', value_name = "addr")]
    pub source: Option<String>,
    /// Port (rdma_cm's TCP port space).
    #[arg(short = 'p', value_name = "port", value_parser = atoi, default_value_t = i64::from(DEFAULT_PORT))]
    pub port: i64,
    /// Ping count times (0: for ever).
    #[arg(short = 'C', value_name = "count", value_parser = atoi, allow_negative_numbers = true)]
    pub count: Option<i64>,
    /// Ping data size (26 .. 65535, default 64).
    #[arg(short = 'S', value_name = "size", value_parser = atoi, allow_negative_numbers = true)]
    pub size: Option<i64>,
    /// Display ping data to stdout.
    #[arg(short = 'v', action = ArgAction::Count)]
    pub verbose: u8,
    /// Validate ping data.
    #[arg(short = 'V', action = ArgAction::Count)]
    pub validate: u8,
    /// Debug printfs.
    #[arg(short = 'd', action = ArgAction::Count)]
    pub debug: u8,
    /// Persistent server mode allowing multiple connections.
    #[arg(short = 'P')]
    pub persistent: bool,
    /// `--pcap`, `--emu-faults` (of the device behind the address).
    #[command(flatten)]
    pub emu: EmuArgs,
    /// Seconds to wait for the peer (resolution, the connection, each step of a ping); a
    /// persistent server waits for connections for ever.
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
    /// Emulated devices: print the device's counters after the run (stdout, in `rdma
    /// statistic show`'s layout, as the perf commands do).
    #[arg(long = "emu-counters")]
    pub emu_counters: bool,
}

/// rping's usage text (on stdout), with rnic's command name.
pub const USAGE: &str = "\
rnic rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port]
rnic rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]
\t-c\t\tclient side
\t-I\t\tSource address to bind to for client.
\t-s\t\tserver side.
\t-v\t\tdisplay ping data to stdout
\t-V\t\tvalidate ping data
\t-d\t\tdebug printfs
\t-S size \tping data size
\t-C count\tping count times
\t-a addr\t\taddress
\t-p port\t\tport
\t-P\t\tpersistent server mode allowing multiple connections
";

/// The checked options of one run.
#[derive(Debug, Clone)]
struct Opts {
    port: u16,
    count: Option<u32>,
    size: u32,
    verbose: bool,
    validate: bool,
    debug: bool,
    timeout: Duration,
    emu: EmuOpts,
    emu_counters: bool,
}

/// Ends the run with `status` (what was to say is said).
fn exit(status: u8) -> ToolError {
    ToolError::Exit(status)
}

/// rping's `perror(call)` line for a refused call, and its failure status.
fn perror(call: &str, why: &str) -> ToolError {
    eprintln!("{call}: {why}");
    exit(EXIT_FAILED)
}

/// rping's line for an error event (its CM thread's `exit(-1)`).
fn cma_event_error(ev: &CmEvent) -> ToolError {
    eprintln!(
        "cma event {}, error {}",
        cm::event_str(ev.kind),
        cm::status(ev)
    );
    exit(EXIT_FAILED)
}

/// `rnic rping`.
pub fn main(a: &RpingArgs) -> Result<(), ToolError> {
    let mut bad = false;
    let size = a.size.unwrap_or(i64::from(super::DEFAULT_SIZE));
    if !(i64::from(MIN_BUFSIZE)..i64::from(BUFSIZE)).contains(&size) {
        eprintln!("Invalid size {size} (valid range is {MIN_BUFSIZE} to {BUFSIZE})");
        bad = true;
    }
    let count = a.count.unwrap_or(0);
    if count < 0 {
        eprintln!("Invalid count {count}");
        bad = true;
    }
    if bad {
        return Err(exit(EXIT_EINVAL));
    }
    if !a.server && !a.client {
        print!("{USAGE}");
        return Err(exit(EXIT_EINVAL));
    }
    if a.timeout == 0 || a.timeout > 86_400 {
        return Err(ToolError::Usage(format!(
            "--timeout must be 1 .. 86400 seconds (got {})",
            a.timeout
        )));
    }
    let o = Opts {
        // htobe16(atoi(optarg)): the low 16 bits.
        port: a.port as u16,
        count: (count > 0).then_some(count as u32),
        size: size as u32,
        verbose: a.verbose > 0,
        validate: a.validate > 0,
        debug: a.debug > 0,
        timeout: Duration::from_secs(a.timeout),
        emu: a.emu.opts()?,
        emu_counters: a.emu_counters,
    };
    if o.debug {
        println!("port {}", o.port);
        println!("{}", if a.server { "server" } else { "client" });
        if a.size.is_some() {
            println!("size {}", o.size);
        }
        if a.count.is_some() {
            println!("count {count}");
        }
        if o.verbose {
            println!("verbose");
        }
        if o.validate {
            println!("validate data");
        }
    }
    let addr = a.addr.as_deref().map(address).transpose()?;
    if a.server {
        let addr = match addr {
            Some(IpAddr::V4(v4)) if !v4.is_unspecified() => IpAddr::V4(v4),
            Some(IpAddr::V6(v6)) if !v6.is_unspecified() => IpAddr::V6(v6),
            _ => {
                eprintln!(
                    "rnic: no -a given: listening on {DEFAULT_SERVER} (the emulated device emu:{DEFAULT_SERVER})"
                );
                IpAddr::V4(DEFAULT_SERVER)
            }
        };
        server(addr, a.persistent, &o)
    } else {
        let Some(dst) = addr else {
            print!("{USAGE}");
            return Err(exit(EXIT_EINVAL));
        };
        let src = match a.source.as_deref().map(address).transpose()? {
            Some(s) => s,
            None => default_source(dst),
        };
        client(src, dst, &o)
    }
}

/// `-a` / `-I` as rping's `get_addr` reads it (IPv4 first: rnic's devices are IPv4).
fn address(host: &str) -> Result<IpAddr, ToolError> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(ip);
    }
    cm::ipv4_of(host).map(IpAddr::V4).map_err(|why| {
        println!("getaddrinfo failed ({why}) - invalid hostname or IP address");
        exit(EXIT_EAI_NONAME)
    })
}

/// The client's source without `-I`: the other device of the emulated pair, else the
/// address the kernel routes `dst` from (what `rdma_resolve_addr` with no source picks).
fn default_source(dst: IpAddr) -> IpAddr {
    let pair = [Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::new(192, 0, 2, 2)];
    if let IpAddr::V4(v4) = dst
        && let Some(i) = pair.iter().position(|p| *p == v4)
    {
        return IpAddr::V4(pair[1 - i]);
    }
    std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| {
            s.connect(SocketAddr::new(dst, 9))?;
            s.local_addr()
        })
        .map_or(dst, |a| a.ip())
}

/// Opens the device behind `ip` for `call` with the emulator options, or says why not as
/// rping would (`call: Address already in use`, `call: Cannot assign requested address`).
fn open(ip: IpAddr, call: &str, o: &Opts) -> Result<rdma::Context, ToolError> {
    let IpAddr::V4(v4) = ip else {
        return Err(perror(call, "Cannot assign requested address"));
    };
    match cm::open_device_for(v4, &o.emu) {
        Ok(ctx) => Ok(ctx),
        Err(OpenFailure::AddrInUse) => Err(perror(call, "Address already in use")),
        Err(OpenFailure::NotAvailable(e)) => {
            log::info!("{call}: {e}");
            Err(perror(call, "Cannot assign requested address"))
        }
        Err(OpenFailure::Other(e)) => Err(e),
    }
}

/// What `-d` names an id by (rping prints its pointer).
fn id_name(id: &CmId) -> String {
    id.local_addr()
        .map_or_else(|| "-".into(), |a| a.to_string())
}

/// `-d`'s line for an event (`rping_cma_event_handler`'s first line).
fn debug_event(o: &Opts, ev: &CmEvent, parent: bool) {
    if o.debug {
        println!(
            "cma_event type {} cma_id {} ({})",
            cm::event_str(ev.kind),
            id_name(&ev.id),
            if parent { "parent" } else { "child" }
        );
    }
}

/// `rping_setup_qp`: the PD, the CQ both queues share and the RC QP with rping's depths.
fn setup_qp(
    id: &CmId,
    o: &Opts,
) -> Result<(ProtectionDomain, CompletionQueue, Arc<QueuePair>), ToolError> {
    let ctx = id
        .context()
        .ok_or_else(|| ToolError::Verbs("rdma_cm: the id has no device".into()))?;
    let pd = ctx.alloc_pd().map_err(rdma::verr)?;
    let cq = ctx.create_cq(CQ_DEPTH, None).map_err(rdma::verr)?;
    let cap = QpCap {
        max_send_wr: SQ_DEPTH,
        max_recv_wr: RQ_DEPTH,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let qp = id.create_qp(&pd, &cq, &cq, cap).map_err(cm::cm_err)?;
    if o.debug {
        println!("created pd");
        println!("created cq");
        println!("created qp {:#x}", qp.qp_num());
    }
    Ok((pd, cq, qp))
}

/// rping's connection parameters (`rping_init_conn_param`): one READ each way, seven
/// retries, RNR retries for ever.
fn conn_param() -> ConnParam {
    ConnParam {
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        ..ConnParam::default()
    }
}

/// The session's error as rping prints it, then `rping <role> failed: -1`.
fn session_failed(role: &str, e: &ToolError) -> ToolError {
    match e {
        ToolError::DataCheck(m) | ToolError::Protocol(m) => eprintln!("{m}"),
        e => eprintln!("{e}"),
    }
    eprintln!("rping {role} failed: -1");
    exit(EXIT_FAILED)
}

/// `--emu-counters`: the device's counters once the run is over, passed or failed.
fn counters_after<T>(ctx: &rdma::Context, o: &Opts, r: T) -> T {
    if o.emu_counters {
        print!("{}", rdma::format_emu_counters(ctx.name(), ctx));
    }
    r
}

/// rping's client (`rping_run_client`).
fn client(src: IpAddr, dst: IpAddr, o: &Opts) -> Result<(), ToolError> {
    let ctx = open(src, "rdma_resolve_addr", o)?;
    let r = client_on(src, dst, o);
    counters_after(&ctx, o, r)
}

fn client_on(src: IpAddr, dst: IpAddr, o: &Opts) -> Result<(), ToolError> {
    let ch = EventChannel::new().map_err(cm::cm_err)?;
    let id = CmId::new(&ch, PortSpace::Tcp);
    if o.debug {
        println!("created cm_id");
    }
    let to = SocketAddr::new(dst, o.port);
    if let Err(e) = id.resolve_addr(Some(SocketAddr::new(src, 0)), to, RESOLVE_MS) {
        return Err(perror("rdma_resolve_addr", &e.to_string()));
    }
    loop {
        let ev = cm::next_event(&ch, Some(o.timeout), "the address and route of the server")?;
        debug_event(o, &ev, true);
        match ev.kind {
            EventKind::AddrResolved => {
                if let Err(e) = id.resolve_route(RESOLVE_MS) {
                    return Err(perror("rdma_resolve_route", &e.to_string()));
                }
            }
            EventKind::RouteResolved => break,
            k if cm::is_error(k) => return Err(cma_event_error(&ev)),
            k => eprintln!("unhandled event: {}, ignoring", cm::event_str(k)),
        }
    }
    if o.debug {
        println!("rdma_resolve_addr - rdma_resolve_route successful");
    }
    let (pd, cq, qp) = setup_qp(&id, o)?;
    let mut s = Session::new(&pd, &qp, &cq, o.size, true, o.timeout)?;
    s.set_debug(o.debug);
    if o.debug {
        println!("allocated & registered buffers...");
    }
    id.connect(&conn_param())
        .map_err(|e| perror("rdma_connect", &e.to_string()))?;
    loop {
        let ev = cm::next_event(&ch, Some(o.timeout), "the server's answer (REP)")?;
        debug_event(o, &ev, true);
        match ev.kind {
            EventKind::Established => break,
            k if cm::is_error(k) => return Err(cma_event_error(&ev)),
            k => eprintln!("unhandled event: {}, ignoring", cm::event_str(k)),
        }
    }
    if o.debug {
        println!("ESTABLISHED");
        println!("rdma_connect successful");
    }
    let ended = s.client(o.count, o.validate, o.verbose, &mut std::io::stdout());
    match ended {
        Ok(Ended {
            disconnected_in: None,
            ..
        }) => {
            let _ = id.disconnect();
            if wait_disconnected(&ch, &qp, DREP_WAIT) {
                eprintln!("client DISCONNECT EVENT...");
            }
            Ok(())
        }
        Ok(Ended {
            disconnected_in: Some(state),
            ..
        }) => {
            // The server went first: rping returns 0 once it saw the DISCONNECTED event.
            if wait_disconnected(&ch, &qp, o.timeout) {
                eprintln!("client DISCONNECT EVENT...");
            }
            eprintln!("wait for {state} state {DISCONNECTED}");
            let _ = id.disconnect();
            Ok(())
        }
        Err(e) => {
            let err = session_failed("client", &e);
            let _ = id.disconnect();
            Err(err)
        }
    }
}

/// Waits up to `wait` for the Disconnected event of the connection whose QP is `qp` (its
/// DREQ or DREP came); other events on the channel are passed over (another client's
/// request is rejected: this server serves one).
fn wait_disconnected(ch: &EventChannel, qp: &QueuePair, wait: Duration) -> bool {
    let deadline = std::time::Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match ch.get_event(Some(left)) {
            Ok(Some(ev)) if ev.kind == EventKind::ConnectRequest => {
                let _ = ev.id.reject(&[]);
            }
            Ok(Some(ev)) => {
                if ev.kind == EventKind::Disconnected && cm::qpn_of(&ev.id) == Some(qp.qp_num()) {
                    return true;
                }
            }
            Ok(None) | Err(_) => return false,
        }
    }
}

/// rping's server (`rping_run_server`, `rping_run_persistent_server`).
fn server(addr: IpAddr, persistent: bool, o: &Opts) -> Result<(), ToolError> {
    let ctx = open(addr, "rdma_bind_addr", o)?;
    let r = server_on(addr, persistent, o);
    counters_after(&ctx, o, r)
}

fn server_on(addr: IpAddr, persistent: bool, o: &Opts) -> Result<(), ToolError> {
    let ch = EventChannel::new().map_err(cm::cm_err)?;
    let listener = CmId::new(&ch, PortSpace::Tcp);
    if o.debug {
        println!("created cm_id");
    }
    listener
        .bind_addr(SocketAddr::new(addr, o.port))
        .map_err(|e| perror("rdma_bind_addr", &e.to_string()))?;
    if o.debug {
        println!("rdma_bind_addr successful");
        println!("rdma_listen");
    }
    match listener.listen(BACKLOG) {
        Ok(()) => {}
        // The kernel finds the port taken at rdma_bind_addr already; rping says so there.
        Err(rnic_cm::rdma_cm::Error::AddrInUse(_)) => {
            return Err(perror("rdma_bind_addr", "Address already in use"));
        }
        Err(e) => return Err(perror("rdma_listen", &e.to_string())),
    }
    if persistent {
        return persistent_server(&ch, o);
    }
    let req = loop {
        let ev = cm::next_event(&ch, Some(o.timeout), "a client's connection request")?;
        debug_event(o, &ev, false);
        match ev.kind {
            EventKind::ConnectRequest => break ev,
            k => eprintln!("unhandled event: {}, ignoring", cm::event_str(k)),
        }
    };
    let child = req.id.clone();
    let (pd, cq, qp) = setup_qp(&child, o).inspect_err(|_| {
        let _ = child.reject(&[]);
    })?;
    let qpn = qp.qp_num();
    // This server serves one client: another's request is rejected, other ids' events
    // passed over.
    let mut next = |wait: Duration| loop {
        let ev = cm::next_event(&ch, Some(wait), "the client")?;
        if ev.kind == EventKind::ConnectRequest {
            let _ = ev.id.reject(&[]);
        } else if cm::qpn_of(&ev.id) == Some(qpn) {
            return Ok(ev);
        }
    };
    serve_one(&child, &req.param, (&pd, &cq, &qp), &mut next, o)
}

/// Accepts `child` (a ConnectRequest's id whose QP is made) and serves its pings until the
/// client disconnects (`rping_accept`, `rping_test_server`, `rping_disconnect`). `next`
/// gives the connection's events (`Established`, `Disconnected`), waiting up to its
/// argument.
fn serve_one(
    child: &CmId,
    req: &ConnParam,
    (pd, cq, qp): (&ProtectionDomain, &CompletionQueue, &QueuePair),
    next: &mut dyn FnMut(Duration) -> Result<CmEvent, ToolError>,
    o: &Opts,
) -> Result<(), ToolError> {
    let mut s = Session::new(pd, qp, cq, o.size, false, o.timeout)?;
    s.set_debug(o.debug);
    if o.debug {
        println!("accepting client connection request");
    }
    // rping accepts with no parameters: librdmacm answers the REQ's READ depths with its
    // own, seven retries and RNR retries for ever.
    let accept = ConnParam {
        responder_resources: req.initiator_depth,
        initiator_depth: req.responder_resources,
        ..conn_param()
    };
    child
        .accept(&accept)
        .map_err(|e| perror("rdma_accept", &e.to_string()))?;
    loop {
        let ev = next(o.timeout)?;
        debug_event(o, &ev, false);
        match ev.kind {
            EventKind::Established => break,
            k if cm::is_error(k) => {
                eprintln!("cma event {}, error {}", cm::event_str(k), cm::status(&ev));
                eprintln!("wait for CONNECTED state 11");
                eprintln!("connect error -1");
                return Err(exit(EXIT_FAILED));
            }
            k => eprintln!("unhandled event: {}, ignoring", cm::event_str(k)),
        }
    }
    if o.debug {
        println!("ESTABLISHED");
    }
    match s.server(o.verbose, &mut std::io::stdout()) {
        Ok(Ended {
            disconnected_in, ..
        }) => {
            // The receive flushed: the DREQ came. rping's CM thread reports its event first,
            // then its loop finds the state changed.
            let state = disconnected_in.unwrap_or("RDMA_READ_ADV");
            loop {
                let ev = next(o.timeout)?;
                debug_event(o, &ev, false);
                if ev.kind == EventKind::Disconnected {
                    break;
                }
            }
            eprintln!("server DISCONNECT EVENT...");
            eprintln!("wait for {state} state {DISCONNECTED}");
            // The DREP.
            let _ = child.disconnect();
            Ok(())
        }
        Err(e) => {
            let err = session_failed("server", &e);
            let _ = child.disconnect();
            Err(err)
        }
    }
}

/// `-P`: every connection request served by a thread of its own, for ever; the events of
/// each connection routed to its thread by its QP number.
fn persistent_server(ch: &EventChannel, o: &Opts) -> Result<(), ToolError> {
    type Routes = Mutex<HashMap<u32, mpsc::Sender<CmEvent>>>;
    fn routes_of(r: &Routes) -> std::sync::MutexGuard<'_, HashMap<u32, mpsc::Sender<CmEvent>>> {
        r.lock().unwrap_or_else(|e| e.into_inner())
    }
    // Each thread takes its route out when it ends.
    let routes: Arc<Routes> = Arc::default();
    loop {
        let ev = cm::next_event(ch, None, "a connection request")?;
        if ev.kind != EventKind::ConnectRequest {
            let tx = cm::qpn_of(&ev.id).and_then(|q| routes_of(&routes).get(&q).cloned());
            if let Some(tx) = tx {
                let _ = tx.send(ev);
            }
            continue;
        }
        debug_event(o, &ev, false);
        let child = ev.id.clone();
        let (pd, cq, qp) = match setup_qp(&child, o) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("setup_qp failed: {e}");
                let _ = child.reject(&[]);
                continue;
            }
        };
        let qpn = qp.qp_num();
        let (tx, rx) = mpsc::channel();
        routes_of(&routes).insert(qpn, tx);
        let (o, param, routes) = (o.clone(), ev.param.clone(), routes.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("rping server {qpn:#x}"))
            .spawn(move || {
                let mut next = |wait: Duration| {
                    rx.recv_timeout(wait)
                        .map_err(|_| ToolError::Timeout(wait, "waiting for the client".into()))
                };
                match serve_one(&child, &param, (&pd, &cq, &qp), &mut next, &o) {
                    Ok(()) | Err(ToolError::Exit(_)) => {}
                    Err(e) => eprintln!("rnic: {e}"),
                }
                routes_of(&routes).remove(&qpn);
            });
        if let Err(e) = spawned {
            eprintln!("pthread_create: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atoi_reads_as_c_does() {
        let n = |s| atoi(s).unwrap();
        assert_eq!(n("64"), 64);
        assert_eq!(n("  -3x"), -3);
        assert_eq!(n("+7"), 7);
        assert_eq!(n("abc"), 0);
        assert_eq!(n(""), 0);
        assert_eq!(n("99999999999999"), i64::from(i32::MAX));
    }

    #[test]
    fn the_pair_pings_itself_and_the_route_picks_a_source() {
        assert_eq!(
            default_source("192.0.2.2".parse().unwrap()),
            "192.0.2.1".parse::<IpAddr>().unwrap()
        );
        assert_eq!(
            default_source("192.0.2.1".parse().unwrap()),
            "192.0.2.2".parse::<IpAddr>().unwrap()
        );
        assert_eq!(
            default_source("127.0.0.2".parse().unwrap()),
            "127.0.0.1".parse::<IpAddr>().unwrap()
        );
    }
}
