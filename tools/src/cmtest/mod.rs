//! librdmacm's connection tests, `rnic cmatose` and `rnic udaddy`: rdma-core's
//! `librdmacm/examples/cmatose.c` (installed as `ucmatose`) and `udaddy.c`, with their flags,
//! their output lines, their order of work on the wire and their return status, so that
//! either pairs with the C program in both roles.
//!
//! Both are event-driven in the same way (`struct cmatest`): a client resolves the address
//! and route of `-c` ids and connects each; a server listens and takes `-c` connection
//! requests; then each side moves `-C` messages of `-S` bytes over every connection and
//! prints what it does. The C programs' return value is the process's exit status (its low
//! 8 bits), printed as `return status N`.
//!
//! - [`cmatose`]: RC connections (port space TCP, or IB with `-P ib`), REQ / REP / RTU,
//!   SENDs both ways, then the server disconnects;
//! - [`udaddy`]: UD "connections" (port space UDP): SIDR REQ / REP, SENDs with immediate
//!   both ways, the server answering to what the first message's GRH and immediate say.
//!
//! What rnic adds: every wait on the peer is bounded by `--timeout` (the C programs wait
//! forever); a side waiting on its own CM (a connect, its own disconnect) waits for the CM's
//! answer, which its retries bound. A server without `-b` listens on 127.0.0.1 (the emulated
//! device `emu:127.0.0.1`), as rnic's other servers do, where the C program listens on every
//! device. `--pcap` and `--emu-faults` apply to the device of the local address.

pub mod cmatose;
pub mod udaddy;

use crate::args::EmuArgs;
use crate::error::ToolError;
use crate::rdma;
use clap::Args;
use rnic_cm::rdma_cm::{self, CmEvent, EventChannel};
use rnic_verbs::{CompletionQueue, Context, WorkCompletion};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

/// `-ENOMEM`: what the C programs return when a connection request finds no free node.
pub const ENOMEM: i32 = -12;
/// `-EINVAL`.
pub const EINVAL: i32 = -22;
/// `ETIMEDOUT`: the errno of a wait on the peer that ran out (rnic's bound); the CQ polls
/// return it negated, as the C programs return a failed poll's value.
pub const ETIMEDOUT: i32 = 110;

/// The flags both programs have (the C programs' `getopt` letters), and rnic's own.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// Run as the client, connecting to this server (a name or an address); without it, run
    /// as the server.
    #[arg(short = 's', value_name = "server_address")]
    pub server: Option<String>,
    /// The local address to bind to (it picks the device: 192.0.2.1 / .2 the in-process pair,
    /// another IPv4 address the emulated device emu:<IPv4>).
    #[arg(short = 'b', value_name = "bind_address")]
    pub bind: Option<String>,
    /// Address format: name, ip, ipv6 (both numeric) or gid.
    #[arg(short = 'f', value_name = "address_format")]
    pub address_format: Option<String>,
    /// Connections to make (client) or take (server).
    #[arg(short = 'c', value_name = "connections", default_value_t = 1)]
    pub connections: u32,
    /// Messages each way over each connection.
    #[arg(short = 'C', value_name = "message_count", default_value_t = 10)]
    pub message_count: u32,
    /// Bytes of each message.
    #[arg(short = 'S', value_name = "message_size", default_value_t = 100)]
    pub message_size: u32,
    /// Type of service of the route (e.g. 0x10; as C's strtoul, base from the prefix).
    #[arg(short = 't', value_name = "type_of_service", value_parser = parse_c_u8)]
    pub tos: Option<u8>,
    /// rnic: seconds to wait for the peer at each step before giving up.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub timeout: u64,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub emu: EmuArgs,
}

/// A number as C's `strtoul(s, NULL, 0)` reads it (`0x` hex, `0` octal, else decimal),
/// kept to its low 8 bits as the C programs' `(uint8_t)` cast does.
///
/// ```
/// use rnic_tools::cmtest::parse_c_u8;
/// assert_eq!(parse_c_u8("0x10"), Ok(16));
/// assert_eq!(parse_c_u8("010"), Ok(8));
/// assert_eq!(parse_c_u8("260"), Ok(4));
/// assert!(parse_c_u8("ten").is_err());
/// ```
pub fn parse_c_u8(s: &str) -> Result<u8, String> {
    parse_c_long(s).map(|v| v as u8)
}

/// A number as C's `strtol(s, NULL, 0)` reads it.
///
/// ```
/// assert_eq!(rnic_tools::cmtest::parse_c_long("0x111"), Ok(0x111));
/// assert_eq!(rnic_tools::cmtest::parse_c_long("-2"), Ok(-2));
/// ```
pub fn parse_c_long(s: &str) -> Result<i64, String> {
    let t = s.trim();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let v = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        i64::from_str_radix(h, 16)
    } else if t.len() > 1 && t.starts_with('0') {
        i64::from_str_radix(&t[1..], 8)
    } else {
        t.parse::<i64>()
    }
    .map_err(|_| format!("`{s}` is not a number"))?;
    Ok(if neg { -v } else { v })
}

/// How `-f` asks for addresses (`rdma_addrinfo` hints).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrFormat {
    /// Names or numbers (the default).
    Name,
    /// Numeric only (`RAI_NUMERICHOST`): `ip` and `ipv6`.
    Numeric,
    /// GIDs (`AF_IB`), which RoCE addressing by IP does not serve.
    Gid,
}

impl AddrFormat {
    /// `-f`'s value as the C programs read it (a prefix test; an unknown one warns on stderr
    /// and means names).
    ///
    /// ```
    /// use rnic_tools::cmtest::AddrFormat;
    /// assert_eq!(AddrFormat::from_flag(Some("ipv6")), AddrFormat::Numeric);
    /// assert_eq!(AddrFormat::from_flag(None), AddrFormat::Name);
    /// ```
    pub fn from_flag(f: Option<&str>) -> AddrFormat {
        let Some(f) = f else {
            return AddrFormat::Name;
        };
        let starts = |p: &str| f.len() >= p.len() && f[..p.len()].eq_ignore_ascii_case(p);
        if starts("ip") {
            AddrFormat::Numeric
        } else if starts("gid") {
            AddrFormat::Gid
        } else {
            if !starts("name") {
                eprintln!("Warning: unknown address format");
            }
            AddrFormat::Name
        }
    }
}

/// `rdma_getaddrinfo`'s failures, as `gai_strerror` names them, with the (negative) code
/// the C programs return.
fn gai_error(code: i32) -> (i32, &'static str) {
    match code {
        -6 => (-6, "ai_family not supported"),
        _ => (-2, "Name or service not known"),
    }
}

/// `host:port` as `rdma_getaddrinfo` resolves it: a numeric address, or (formats other than
/// numeric) a name, IPv4 results first (rnic's devices are IPv4).
fn resolve(host: &str, port: u16, format: AddrFormat) -> Result<SocketAddr, i32> {
    match format {
        AddrFormat::Gid => return Err(-6),
        AddrFormat::Numeric => {
            return host
                .parse::<IpAddr>()
                .map(|ip| SocketAddr::new(ip, port))
                .map_err(|_| -2);
        }
        AddrFormat::Name => {}
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    let all: Vec<SocketAddr> = (host, port).to_socket_addrs().map_err(|_| -2)?.collect();
    all.iter()
        .find(|a| a.is_ipv4())
        .or(all.first())
        .copied()
        .ok_or(-2)
}

/// What `get_rdma_addr` (the examples' `common.c`) gives: the local address to bind or
/// resolve from, and the server's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RdmaAddr {
    /// The source (client: `-b`, if given) or the address to listen on (server).
    pub src: Option<SocketAddr>,
    /// The server (client only).
    pub dst: Option<SocketAddr>,
}

/// `get_rdma_addr(src, dst, port, hints)`: a server resolves `-b` (or listens on rnic's
/// default server address) with the port; a client resolves `-b` without a port and the
/// server with it. A failure prints `rdma_getaddrinfo error: ...` on stdout, as the C
/// programs do, and gives their return value.
pub fn get_rdma_addr(
    a: &CommonArgs,
    port: u16,
    format: AddrFormat,
    tool: &str,
) -> Result<RdmaAddr, i32> {
    let fail = |code: i32| {
        let (code, text) = gai_error(code);
        println!("rdma_getaddrinfo error: {text}");
        code
    };
    match &a.server {
        None => {
            let src = match &a.bind {
                Some(b) => resolve(b, port, format).map_err(fail)?,
                None => {
                    eprintln!(
                        "rnic {tool}: no -b given: listening on 127.0.0.1 (the emulated device emu:127.0.0.1)"
                    );
                    SocketAddr::from(([127, 0, 0, 1], port))
                }
            };
            Ok(RdmaAddr {
                src: Some(src),
                dst: None,
            })
        }
        Some(s) => {
            let src = match &a.bind {
                Some(b) => Some(resolve(b, 0, format).map_err(fail)?),
                None => None,
            };
            let dst = resolve(s, port, format).map_err(fail)?;
            Ok(RdmaAddr {
                src,
                dst: Some(dst),
            })
        }
    }
}

/// Opens the device of `local` with `--pcap` / `--emu-faults` before the CM does (rdma_cm
/// then finds it open under its name, options and all); nothing to do without them.
pub fn preopen(
    emu: &EmuArgs,
    local: Option<SocketAddr>,
    dst: Option<SocketAddr>,
) -> Result<Option<Context>, ToolError> {
    let opts = emu.opts()?;
    if emu.pcap.is_none() && emu.emu_faults.is_none() {
        return Ok(None);
    }
    let ip = match (local, dst) {
        (Some(l), _) => l.ip(),
        (None, Some(d)) => rdma_cm::source_for(d.ip()).map_err(|e| cm_err("source address", e))?,
        (None, None) => return Ok(None),
    };
    let name = rdma_cm::device_name_for(ip).map_err(|e| cm_err("device", e))?;
    rdma::open(&name, &opts).map(Some)
}

fn cm_err(what: &str, e: rdma_cm::Error) -> ToolError {
    ToolError::Usage(format!("{what}: {e}"))
}

/// `strerror(errno)`: the system's text for an errno, without the "(os error N)" Rust adds.
///
/// ```
/// assert_eq!(rnic_tools::cmtest::strerror(22), "Invalid argument");
/// ```
pub fn strerror(errno: i32) -> String {
    let full = std::io::Error::from_raw_os_error(errno).to_string();
    match full.rfind(" (os error") {
        Some(i) => full[..i].to_string(),
        None => full,
    }
}

/// `perror(what)` for a failed rdma_cm call: `what: <strerror(errno)>` on stderr, with
/// rnic's reason after it; returns the C call's -1.
pub fn perror(what: &str, e: &rdma_cm::Error) -> i32 {
    eprintln!("{what}: {} ({e})", strerror(e.errno()));
    -1
}

/// Waits for the next CM event: up to `timeout` when it is the peer's to cause one, with no
/// bound when the local CM's retries end the wait (`None`). `Err` is the C programs'
/// `errno` after a failed `rdma_get_cm_event` (`ETIMEDOUT` when the peer did not act).
pub fn get_event(ch: &EventChannel, timeout: Option<Duration>) -> Result<CmEvent, i32> {
    match ch.get_event(timeout) {
        Ok(Some(ev)) => Ok(ev),
        Ok(None) => Err(ETIMEDOUT),
        Err(e) => Err(e.errno()),
    }
}

/// Polls `cq` for `count` completions (`poll_cqs`, 8 at a time), up to `timeout`; the
/// C programs count completions whatever their status (a failed one is logged here).
/// `first` sees the first completion of the first batch that returned any.
/// `Err(-ETIMEDOUT)` when they do not all come in time.
pub fn poll_count(
    cq: &CompletionQueue,
    count: u32,
    timeout: Duration,
    mut first: impl FnMut(&WorkCompletion) -> Result<(), i32>,
) -> Result<(), i32> {
    let deadline = Instant::now() + timeout;
    let mut wc = [WorkCompletion::default(); 8];
    let (mut done, mut spins, mut seen) = (0u32, 0u32, false);
    while done < count {
        let n = cq.poll(&mut wc).map_err(|e| {
            log::warn!("poll: {e}");
            EINVAL
        })?;
        if n == 0 {
            if Instant::now() >= deadline {
                return Err(-ETIMEDOUT);
            }
            rdma::idle(&mut spins);
            continue;
        }
        if !seen {
            seen = true;
            first(&wc[0])?;
        }
        for w in &wc[..n] {
            if !w.is_success() {
                log::warn!("{}", rdma::wc_error(w, "completion"));
            }
        }
        done += n as u32;
    }
    Ok(())
}

/// The exit of a run: the C program's return value, printed as `return status N`, becomes
/// the exit status (its low 8 bits, as `exit(ret)`).
pub fn finish(ret: i32) -> Result<(), ToolError> {
    println!("return status {ret}");
    if ret == 0 {
        Ok(())
    } else {
        Err(ToolError::Exit(ret as u8))
    }
}
