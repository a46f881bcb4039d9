//! Connecting QPs for the common case: exchange the endpoint details (QPN, PSN, GID, and the
//! rkey and address of a region) and walk RESET -> INIT -> RTR -> RTS with rc_pingpong's
//! defaults.
//!
//! - Two QPs of one process: [`connect_pair`].
//! - Two processes: one side [`tcp_server`], the other [`tcp_client`] (the exchange of the
//!   pingpong tools over TCP, extended with rkey and address; see [`Endpoint`]).
//!
//! Every wait has a timeout ([`ConnectOptions::io_timeout`]): nothing waits forever.
//!
//! The TCP protocol: the client connects (retrying until the timeout, so it may start before
//! the server) and sends its 78-byte [`Endpoint::to_wire`] message; the server connects its QP
//! to it (RTR, RTS) and replies with its own; the client connects its QP and sends `done\0`,
//! which the server waits for. When either call returns, both QPs are in RTS.

use crate::error::{Error, Result};
use crate::{AccessFlags, AhAttr, Gid, InitAttr, MemoryRegion, Mtu, QpType, QueuePair};
use crate::{RtrAttr, RtsAttr};
use std::hash::{BuildHasher, Hasher};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// The pingpong tools' TCP port.
pub const DEFAULT_PORT: u16 = 18515;

/// The Q_Key the pingpong tools use for UD.
pub const DEFAULT_QKEY: u32 = 0x1111_1111;

/// How to connect. [`Default`] is rc_pingpong's QP attributes.
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
/// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
/// # let (ua, ub) = (pa.create_qp(QpType::Uc, &ca, &ca).build()?, pb.create_qp(QpType::Uc, &cb, &cb).build()?);
/// let opts = ConnectOptions { path_mtu: Some(Mtu::Mtu4096), psn: Some(100), ..ConnectOptions::default() };
/// connect_pair(&ua, &ub, &opts)?;
/// let q = ua.query()?;
/// assert_eq!((q.path_mtu, q.sq_psn), (Some(Mtu::Mtu4096), 100));
/// assert_eq!(ConnectOptions::default().qkey, DEFAULT_QKEY);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectOptions {
    /// Local GID index (`-g`); `None`: the IPv4 GID ([`crate::Context::ipv4_gid_index`]),
    /// else 0.
    pub gid_index: Option<u8>,
    /// Path MTU; `None`: the port's active MTU.
    pub path_mtu: Option<Mtu>,
    /// Our first PSN; `None`: random (24 bits), as rc_pingpong.
    pub psn: Option<u32>,
    /// Remote access allowed on the QP; `None`: everything the QP type allows
    /// (RC: remote write, read and atomic; UC: remote write).
    pub access: Option<AccessFlags>,
    /// Local ACK timeout code (14).
    pub timeout: u8,
    /// Transport retries (7).
    pub retry_cnt: u8,
    /// RNR retries (7 = forever).
    pub rnr_retry: u8,
    /// RNR NAK timer code (12).
    pub min_rnr_timer: u8,
    /// READs / atomics outstanding as requester (1).
    pub max_rd_atomic: u8,
    /// READs / atomics served as responder (1).
    pub max_dest_rd_atomic: u8,
    /// Hop limit (1).
    pub hop_limit: u8,
    /// Service level (0).
    pub sl: u8,
    /// Q_Key of UD QPs.
    pub qkey: u32,
    /// Timeout of each network wait (connect, accept, read, write): 10 s.
    pub io_timeout: Duration,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            gid_index: None,
            path_mtu: None,
            psn: None,
            access: None,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 1,
            max_dest_rd_atomic: 1,
            hop_limit: 1,
            sl: 0,
            qkey: DEFAULT_QKEY,
            io_timeout: Duration::from_secs(10),
        }
    }
}

/// One side of a connection, as the other side needs it.
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
/// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
/// let mr = pb.reg_mr(64, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)?;
/// // What emu1 tells its peer: QPN, PSN, GID and a region to WRITE to.
/// let e = Endpoint::local(&qb, Some(&mr), &ConnectOptions::default())?;
/// assert_eq!((e.qpn, e.gid, e.rkey), (qb.qp_num(), b.query_gid(1, 1)?, mr.rkey()));
/// assert_eq!(Endpoint::from_wire(&e.to_wire())?, e);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Endpoint {
    /// LID (0 on RoCE).
    pub lid: u16,
    /// QP number.
    pub qpn: u32,
    /// First PSN it sends.
    pub psn: u32,
    /// Its GID.
    pub gid: Gid,
    /// rkey of its region (0 without one).
    pub rkey: u32,
    /// Address of its region (0 without one).
    pub addr: u64,
}

/// Length of [`Endpoint::to_wire`].
pub const WIRE_LEN: usize = 78;
/// Length of the pingpong tools' message ([`Endpoint::to_pingpong`]).
pub const PINGPONG_LEN: usize = 52;

impl Endpoint {
    /// The local endpoint of `qp` with GID index and PSN from `opts` and the region `mr`.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(8, None)?);
    /// let qp = pd.create_qp(QpType::Rc, &cq, &cq).build()?;
    /// let opts = ConnectOptions { psn: Some(0x1234), gid_index: Some(0), ..ConnectOptions::default() };
    /// let e = Endpoint::local(&qp, None, &opts)?;
    /// assert_eq!((e.psn, e.gid, e.rkey), (0x1234, ctx.query_gid(1, 0)?, 0));
    /// # Ok(()) }
    /// ```
    pub fn local(
        qp: &QueuePair,
        mr: Option<&MemoryRegion>,
        opts: &ConnectOptions,
    ) -> Result<Endpoint> {
        let ctx = qp.pd().context();
        let idx = gid_index(ctx, opts);
        Ok(Endpoint {
            lid: 0,
            qpn: qp.qp_num(),
            psn: opts.psn.unwrap_or_else(random_psn) & 0xFF_FFFF,
            gid: ctx.query_gid(1, u32::from(idx))?,
            rkey: mr.map_or(0, MemoryRegion::rkey),
            addr: mr.map_or(0, MemoryRegion::addr),
        })
    }

    /// The helper's message: `LID:QPN:PSN:RKEY:VADDR:GID` as
    /// `%04x:%06x:%06x:%08x:%016x:<32 hex digits>` and a NUL, 78 bytes.
    ///
    /// ```
    /// use rnic_verbs::{Endpoint, Gid};
    /// use std::net::Ipv4Addr;
    ///
    /// let e = Endpoint { lid: 0, qpn: 0x11, psn: 0x3a5b2c,
    ///     gid: Gid::from_ipv4(Ipv4Addr::new(192, 168, 1, 10)), rkey: 0x1234, addr: 0x7f00_0000_1000 };
    /// let w = e.to_wire();
    /// assert_eq!(&w[..33], b"0000:000011:3a5b2c:00001234:00007");
    /// assert_eq!(Endpoint::from_wire(&w).unwrap(), e);
    /// ```
    pub fn to_wire(&self) -> [u8; WIRE_LEN] {
        let s = format!(
            "{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:{}",
            self.lid,
            self.qpn & 0xFF_FFFF,
            self.psn & 0xFF_FFFF,
            self.rkey,
            self.addr,
            self.gid.to_hex()
        );
        let mut w = [0u8; WIRE_LEN];
        w[..s.len()].copy_from_slice(s.as_bytes());
        w
    }

    /// Parses [`Endpoint::to_wire`]'s message.
    ///
    /// ```
    /// use rnic_verbs::{Endpoint, Error};
    ///
    /// let msg = b"0000:000011:000001:00000abc:0000000000001000:00000000000000000000ffffc0000202\0";
    /// let e = Endpoint::from_wire(msg).unwrap();
    /// assert_eq!((e.qpn, e.rkey, e.addr), (0x11, 0xabc, 0x1000));
    /// assert!(matches!(Endpoint::from_wire(b"0000:11\0"), Err(Error::Protocol(_))));
    /// ```
    pub fn from_wire(b: &[u8]) -> Result<Endpoint> {
        let s = text(b)?;
        let f: Vec<&str> = s.split(':').collect();
        if f.len() != 6 {
            return Err(Error::Protocol(format!("expected 6 fields, got {s:?}")));
        }
        Ok(Endpoint {
            lid: hex(f[0], "LID")? as u16,
            qpn: hex(f[1], "QPN")? as u32,
            psn: hex(f[2], "PSN")? as u32,
            rkey: hex(f[3], "RKEY")? as u32,
            addr: hex(f[4], "VADDR")?,
            gid: Gid::from_hex(f[5])
                .ok_or_else(|| Error::Protocol(format!("bad GID {:?}", f[5])))?,
        })
    }

    /// ibv_rc_pingpong's / ibv_ud_pingpong's message: `%04x:%06x:%06x:%s` (LID, QPN, PSN,
    /// GID as 32 hex digits) and a NUL, exactly 52 bytes (no rkey or address).
    ///
    /// ```
    /// use rnic_verbs::{Endpoint, Gid};
    ///
    /// let w = b"0000:000011:3a5b2c:00000000000000000000ffffc0a8010a\0";
    /// let e = Endpoint::from_pingpong(w).unwrap();
    /// assert_eq!((e.qpn, e.psn), (0x11, 0x3a5b2c));
    /// assert_eq!(&e.to_pingpong(), w);
    /// ```
    pub fn to_pingpong(&self) -> [u8; PINGPONG_LEN] {
        let s = format!(
            "{:04x}:{:06x}:{:06x}:{}",
            self.lid,
            self.qpn & 0xFF_FFFF,
            self.psn & 0xFF_FFFF,
            self.gid.to_hex()
        );
        let mut w = [0u8; PINGPONG_LEN];
        w[..s.len()].copy_from_slice(s.as_bytes());
        w
    }

    /// Parses the pingpong tools' 52-byte message.
    ///
    /// ```
    /// use rnic_verbs::Endpoint;
    ///
    /// let e = Endpoint::from_pingpong(b"0000:0000a1:abcdef:00000000000000000000ffffc0000201\0").unwrap();
    /// assert_eq!((e.qpn, e.psn, e.gid.to_string()), (0xa1, 0xabcdef, "::ffff:192.0.2.1".into()));
    /// assert_eq!(e.rkey, 0); // the pingpong tools send no region
    /// ```
    pub fn from_pingpong(b: &[u8]) -> Result<Endpoint> {
        let s = text(b)?;
        let f: Vec<&str> = s.split(':').collect();
        if f.len() != 4 {
            return Err(Error::Protocol(format!("expected 4 fields, got {s:?}")));
        }
        Ok(Endpoint {
            lid: hex(f[0], "LID")? as u16,
            qpn: hex(f[1], "QPN")? as u32,
            psn: hex(f[2], "PSN")? as u32,
            gid: Gid::from_hex(f[3])
                .ok_or_else(|| Error::Protocol(format!("bad GID {:?}", f[3])))?,
            rkey: 0,
            addr: 0,
        })
    }

    /// The remote buffer it advertised.
    ///
    /// ```
    /// use rnic_verbs::{Endpoint, RemoteAddr};
    ///
    /// let e = Endpoint { rkey: 0x77, addr: 0x10_0000, ..Endpoint::default() };
    /// assert_eq!(e.remote().offset(8), RemoteAddr { addr: 0x10_0008, rkey: 0x77 });
    /// ```
    pub fn remote(&self) -> crate::RemoteAddr {
        crate::RemoteAddr {
            addr: self.addr,
            rkey: self.rkey,
        }
    }
}

fn text(b: &[u8]) -> Result<&str> {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    std::str::from_utf8(&b[..end]).map_err(|_| Error::Protocol("message is not ASCII".into()))
}

fn hex(s: &str, what: &str) -> Result<u64> {
    u64::from_str_radix(s, 16).map_err(|_| Error::Protocol(format!("bad {what} {s:?}")))
}

/// A random 24-bit PSN (no RNG dependency: the standard library's random hasher keys).
fn random_psn() -> u32 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    (h.finish() as u32) & 0xFF_FFFF
}

fn gid_index(ctx: &crate::Context, opts: &ConnectOptions) -> u8 {
    opts.gid_index
        .or_else(|| ctx.ipv4_gid_index().and_then(|i| u8::try_from(i).ok()))
        .unwrap_or(0)
}

/// Walks `qp` from RESET (or INIT) to RTS towards `remote`, with `local.psn` as our first PSN
/// and `opts`' attributes. UD QPs ignore `remote` (their destination is per work request).
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> {
/// # let ctx = Context::open("emu0")?;
/// # let b = Context::open("emu1")?;
/// # let (pa, pb, ca, cb) = (ctx.alloc_pd()?, b.alloc_pd()?, ctx.create_cq(8, None)?, b.create_cq(8, None)?);
/// # let (qa, qb) = (pa.create_qp(QpType::Rc, &ca, &ca).build()?, pb.create_qp(QpType::Rc, &cb, &cb).build()?);
/// // What connect_pair does; across processes the endpoints travel over the network.
/// let opts = ConnectOptions::default();
/// let (ea, eb) = (Endpoint::local(&qa, None, &opts)?, Endpoint::local(&qb, None, &opts)?);
/// connect_qp(&qa, &ea, &eb, &opts)?;
/// connect_qp(&qb, &eb, &ea, &opts)?;
/// assert_eq!((qa.state(), qa.query()?.rq_psn), (QpState::Rts, eb.psn));
/// # Ok(()) }
/// ```
pub fn connect_qp(
    qp: &QueuePair,
    local: &Endpoint,
    remote: &Endpoint,
    opts: &ConnectOptions,
) -> Result<()> {
    let ctx = qp.pd().context();
    let t = qp.qp_type();
    let access = opts.access.unwrap_or(match t {
        QpType::Rc => {
            AccessFlags::LOCAL_WRITE
                | AccessFlags::REMOTE_WRITE
                | AccessFlags::REMOTE_READ
                | AccessFlags::REMOTE_ATOMIC
        }
        QpType::Uc => AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
        QpType::Ud | QpType::Gsi => AccessFlags::empty(),
    });
    if qp.state() == crate::QpState::Reset {
        qp.to_init(&InitAttr {
            access,
            // GSI: the driver's GSI Q_Key.
            qkey: (t == QpType::Ud).then_some(opts.qkey),
            ..InitAttr::default()
        })?;
    }
    let mut rtr = RtrAttr {
        max_dest_rd_atomic: opts.max_dest_rd_atomic,
        min_rnr_timer: opts.min_rnr_timer,
        ..RtrAttr::default()
    };
    if !t.is_datagram() {
        let mtu = match opts.path_mtu {
            Some(m) => m,
            None => ctx.query_port(1)?.active_mtu,
        };
        rtr.path_mtu = Some(mtu);
        rtr.dest_qp_num = Some(remote.qpn);
        rtr.rq_psn = remote.psn & 0xFF_FFFF;
        rtr.ah_attr = Some(AhAttr {
            hop_limit: opts.hop_limit,
            sl: opts.sl,
            ..AhAttr::new(remote.gid, gid_index(ctx, opts))
        });
    }
    qp.to_rtr(&rtr)?;
    qp.to_rts(&RtsAttr {
        sq_psn: local.psn & 0xFF_FFFF,
        timeout: opts.timeout,
        retry_cnt: opts.retry_cnt,
        rnr_retry: opts.rnr_retry,
        max_rd_atomic: opts.max_rd_atomic,
    })
}

/// Connects two QPs of this process to each other (each to RTS), e.g. on `emu0` and `emu1`.
///
/// ```
/// use rnic_verbs::{connect_pair, ConnectOptions, Context, QpState, QpType};
///
/// # fn main() -> Result<(), rnic_verbs::Error> {
/// let (a, b) = (Context::open("emu0")?, Context::open("emu1")?);
/// let (pa, pb) = (a.alloc_pd()?, b.alloc_pd()?);
/// let (ca, cb) = (a.create_cq(16, None)?, b.create_cq(16, None)?);
/// let qa = pa.create_qp(QpType::Rc, &ca, &ca).build()?;
/// let qb = pb.create_qp(QpType::Rc, &cb, &cb).build()?;
/// connect_pair(&qa, &qb, &ConnectOptions::default())?;
/// assert_eq!((qa.state(), qb.state()), (QpState::Rts, QpState::Rts));
/// # Ok(()) }
/// ```
pub fn connect_pair(a: &QueuePair, b: &QueuePair, opts: &ConnectOptions) -> Result<()> {
    if a.qp_type() != b.qp_type() {
        return Err(Error::invalid(
            "connect_pair",
            format!("QP types differ: {:?} and {:?}", a.qp_type(), b.qp_type()),
        ));
    }
    let ea = Endpoint::local(a, None, opts)?;
    let eb = Endpoint::local(b, None, opts)?;
    connect_qp(a, &ea, &eb, opts)?;
    connect_qp(b, &eb, &ea, opts)
}

fn timed_out(what: &str, after: Duration) -> Error {
    Error::Timeout {
        what: what.into(),
        after,
    }
}

fn io_err(what: &'static str, timeout: Duration) -> impl Fn(std::io::Error) -> Error {
    move |e| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => timed_out(what, timeout),
        _ => Error::Io {
            what: what.into(),
            source: e,
        },
    }
}

fn prepare(s: &TcpStream, t: Duration) -> Result<()> {
    s.set_nonblocking(false)
        .and_then(|()| s.set_read_timeout(Some(t)))
        .and_then(|()| s.set_write_timeout(Some(t)))
        .and_then(|()| s.set_nodelay(true))
        .map_err(Error::io("connection exchange: socket options"))
}

/// The server side: listens on `bind` (e.g. `0.0.0.0:18515`), takes one client, exchanges
/// endpoints, connects `qp` (to RTS) and waits for the client's `done`. `mr` is the region
/// whose rkey and address the peer gets. Returns the peer's endpoint.
///
/// ```no_run
/// # use rnic_verbs::*; fn main() -> Result<(), Error> {
/// // Waits for a client on another host (e.g. `ibv_rc_pingpong`-style `rnic` tools).
/// let ctx = Context::open("mlx5_0")?;
/// # let (pd, cq) = (ctx.alloc_pd()?, ctx.create_cq(64, None)?);
/// let qp = pd.create_qp(QpType::Rc, &cq, &cq).build()?;
/// let mr = pd.reg_mr(1 << 20, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)?;
/// let peer = tcp_server(&qp, Some(&mr), ("0.0.0.0", DEFAULT_PORT), &ConnectOptions::default())?;
/// assert_eq!(qp.query()?.dest_qp_num, peer.qpn);
/// # Ok(()) }
/// ```
pub fn tcp_server(
    qp: &QueuePair,
    mr: Option<&MemoryRegion>,
    bind: impl ToSocketAddrs,
    opts: &ConnectOptions,
) -> Result<Endpoint> {
    let listener = TcpListener::bind(bind).map_err(Error::io("connection exchange: bind"))?;
    tcp_server_on(qp, mr, &listener, opts)
}

/// [`tcp_server`] on a listener the caller bound (to learn its port before the client runs).
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
/// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
/// # let (sa, sb) = (pa.create_qp(QpType::Rc, &ca, &ca).build()?, pb.create_qp(QpType::Rc, &cb, &cb).build()?);
/// let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
/// let port = listener.local_addr().expect("bound").port(); // tell the client
/// # let client = std::thread::spawn(move || tcp_client(&sb, None, ("127.0.0.1", port), &ConnectOptions::default()));
/// let peer = tcp_server_on(&sa, None, &listener, &ConnectOptions::default())?;
/// # let _ = client.join().unwrap()?;
/// assert_eq!(sa.query()?.dest_qp_num, peer.qpn);
/// assert_eq!(sa.state(), QpState::Rts);
/// # Ok(()) }
/// ```
pub fn tcp_server_on(
    qp: &QueuePair,
    mr: Option<&MemoryRegion>,
    listener: &TcpListener,
    opts: &ConnectOptions,
) -> Result<Endpoint> {
    let t = opts.io_timeout;
    listener
        .set_nonblocking(true)
        .map_err(Error::io("connection exchange: listen"))?;
    // `None` (a timeout past what `Instant` holds, `Duration::MAX`): no deadline.
    let deadline = Instant::now().checked_add(t);
    let mut s = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(timed_out("connection exchange: waiting for a client", t));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(Error::io("connection exchange: accept")(e)),
        }
    };
    prepare(&s, t)?;
    let mut buf = [0u8; WIRE_LEN];
    s.read_exact(&mut buf).map_err(io_err(
        "connection exchange: reading the client's endpoint",
        t,
    ))?;
    let remote = Endpoint::from_wire(&buf)?;
    let local = Endpoint::local(qp, mr, opts)?;
    connect_qp(qp, &local, &remote, opts)?;
    s.write_all(&local.to_wire())
        .map_err(io_err("connection exchange: sending our endpoint", t))?;
    let mut done = [0u8; 5];
    s.read_exact(&mut done).map_err(io_err(
        "connection exchange: waiting for the client's done",
        t,
    ))?;
    if &done != b"done\0" {
        return Err(Error::Protocol(format!("expected \"done\", got {done:?}")));
    }
    Ok(remote)
}

/// The client side: connects to `server` (retrying until [`ConnectOptions::io_timeout`]),
/// exchanges endpoints, connects `qp` (to RTS) and sends `done`. Returns the server's
/// endpoint.
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
/// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
/// # let (sa, sb) = (pa.create_qp(QpType::Rc, &ca, &ca).build()?, pb.create_qp(QpType::Rc, &cb, &cb).build()?);
/// # let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
/// # let port = listener.local_addr().unwrap().port();
/// # let server = std::thread::spawn(move || tcp_server_on(&sa, None, &listener, &ConnectOptions::default()));
/// let server_ep = tcp_client(&sb, None, ("127.0.0.1", port), &ConnectOptions::default())?;
/// # let client_ep = server.join().unwrap()?;
/// assert_eq!(sb.query()?.dest_qp_num, server_ep.qpn);
/// assert_eq!(client_ep.qpn, sb.qp_num()); // what the server learnt about us
/// # Ok(()) }
/// ```
pub fn tcp_client(
    qp: &QueuePair,
    mr: Option<&MemoryRegion>,
    server: impl ToSocketAddrs,
    opts: &ConnectOptions,
) -> Result<Endpoint> {
    let t = opts.io_timeout;
    let addrs: Vec<SocketAddr> = server
        .to_socket_addrs()
        .map_err(Error::io("connection exchange: resolving the server"))?
        .collect();
    // `None` (a timeout past what `Instant` holds, `Duration::MAX`): no deadline.
    let deadline = Instant::now().checked_add(t);
    let mut s = 'found: loop {
        for a in &addrs {
            let left = deadline.map_or(t, |d| d.saturating_duration_since(Instant::now()));
            if let Ok(s) = TcpStream::connect_timeout(a, left.max(Duration::from_millis(1))) {
                break 'found s;
            }
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(timed_out(
                "connection exchange: connecting to the server",
                t,
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    prepare(&s, t)?;
    let local = Endpoint::local(qp, mr, opts)?;
    s.write_all(&local.to_wire())
        .map_err(io_err("connection exchange: sending our endpoint", t))?;
    let mut buf = [0u8; WIRE_LEN];
    s.read_exact(&mut buf).map_err(io_err(
        "connection exchange: reading the server's endpoint",
        t,
    ))?;
    let remote = Endpoint::from_wire(&buf)?;
    connect_qp(qp, &local, &remote, opts)?;
    s.write_all(b"done\0")
        .map_err(io_err("connection exchange: sending done", t))?;
    Ok(remote)
}
