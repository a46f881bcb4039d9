//! A server and a client that connect through the connection manager (rnic-cm's rdma_cm
//! API), exchange private data on the way, and run RDMA WRITEs over the connection:
//!
//! 1. the server binds to its address and listens; the client resolves the server's address
//!    and route, creates its QP on the id and connects, its REQ carrying a greeting as
//!    private data (after rdma_cm's IP header);
//! 2. the server takes the ConnectRequest, prints the greeting, registers a buffer the client
//!    may write, creates its QP and accepts: its REP carries the buffer's address, rkey and
//!    size (16 bytes, big-endian, as rping's `struct rping_rdma_info`) and a greeting back;
//! 3. once Established, the client RDMA WRITEs one line per write into the server's buffer,
//!    then a WRITE with immediate (no data, the count as immediate) that completes a receive
//!    on the server: the server prints what was written;
//! 4. the client disconnects (DREQ), the server answers (DREP); both print the events.
//!
//! ```text
//! cargo run -p rnic-cm --example cm_write                            # emu0 -> emu1, this process
//! cargo run -p rnic-cm --example cm_write -- server 127.0.0.1:7471   # a server on emu:127.0.0.1
//! cargo run -p rnic-cm --example cm_write -- client 127.0.0.1:7471 127.0.0.2 [WRITES]
//! ```
//!
//! The address picks the device (`rdma_cm::device_name_for`): 192.0.2.1 / 192.0.2.2 are the
//! in-process pair emu0 / emu1, any other IPv4 address the UDP-link device `emu:<IPv4>`, so
//! the two processes above talk over UDP on 127.0.0.x (either side can be a librdmacm peer on
//! Linux rxe that speaks the same private data).

use rnic_cm::cma::ConnParam;
use rnic_cm::rdma_cm::{CmEvent, CmId, EventChannel, EventKind};
use rnic_cm::wire::ip::PortSpace;
use rnic_verbs::{AccessFlags, QpCap, RecvWr, RemoteAddr, SendWr, WcOpcode, WorkCompletion};
use std::net::SocketAddr;
use std::time::Duration;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// How long any step waits for the peer.
const T: Duration = Duration::from_secs(20);
/// Bytes of the server's buffer each write fills.
const SLOT: usize = 64;
/// The most writes the server's buffer takes.
const MAX_WRITES: u32 = 16;

fn next(ch: &EventChannel, who: &str, want: EventKind) -> Result<CmEvent> {
    let ev = ch
        .get_event(Some(T))?
        .ok_or_else(|| format!("{who}: no {want:?} event within {T:?}"))?;
    println!("{who}: event {:?}", ev.kind);
    if ev.kind != want {
        return Err(format!(
            "{who}: {:?} (status {}) instead of {want:?}",
            ev.kind, ev.status
        )
        .into());
    }
    Ok(ev)
}

/// The text of private data up to its first NUL (the CM pads it with zeros).
fn text(data: &[u8]) -> String {
    let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    String::from_utf8_lossy(&data[..end]).into_owned()
}

/// Binds to `addr`, serves one client, returns when it disconnected.
fn server(addr: SocketAddr, ready: Option<std::sync::mpsc::Sender<()>>) -> Result<()> {
    let ch = EventChannel::new()?;
    let listener = CmId::new(&ch, PortSpace::Tcp);
    listener.bind_addr(addr)?;
    listener.listen(1)?;
    println!("server: listening on {addr}");
    if let Some(r) = ready {
        let _ = r.send(());
    }
    let req = next(&ch, "server", EventKind::ConnectRequest)?;
    let child = req.id.clone();
    println!(
        "server: request from {} (QP {:#x}): {:?}",
        child.peer_addr().map_or("?".into(), |a| a.to_string()),
        req.param.qp_num,
        text(&req.param.private_data)
    );
    let ctx = child.context().ok_or("server: the id has no device")?;
    let pd = ctx.alloc_pd()?;
    let cq = ctx.create_cq(16, None)?;
    let qp = child.create_qp(&pd, &cq, &cq, QpCap::default())?;
    let len = SLOT * MAX_WRITES as usize;
    let buf = pd.reg_mr(len, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)?;
    // A WRITE with immediate consumes a receive: the client's "done".
    qp.post_recv(&[RecvWr::new(1, &[])])?;
    let mut rep = Vec::new();
    rep.extend_from_slice(&buf.addr().to_be_bytes());
    rep.extend_from_slice(&buf.rkey().to_be_bytes());
    rep.extend_from_slice(&(len as u32).to_be_bytes());
    rep.extend_from_slice(b"hello from the cm_write server");
    child.accept(&ConnParam {
        private_data: rep,
        ..ConnParam::default()
    })?;
    println!(
        "server: accepted with QP {:#x}, buffer {:#x} rkey {:#x} ({len} bytes) in the REP",
        qp.qp_num(),
        buf.addr(),
        buf.rkey()
    );
    next(&ch, "server", EventKind::Established)?;
    let mut wc = [WorkCompletion::default(); 1];
    if cq.poll_blocking(&mut wc, T)? == 0 {
        return Err("server: the client's WRITE with immediate never came".into());
    }
    if !wc[0].is_success() || wc[0].opcode() != WcOpcode::RecvRdmaWithImm {
        return Err(format!("server: {:?} {:?}", wc[0].opcode(), wc[0].status()).into());
    }
    let writes = wc[0].imm_data().unwrap_or(0).min(MAX_WRITES);
    println!("server: WRITE with immediate {writes}: the buffer holds");
    for i in 0..writes as usize {
        println!("server:   [{i}] {}", text(&buf.to_vec(i * SLOT, SLOT)?));
    }
    next(&ch, "server", EventKind::Disconnected)?;
    child.disconnect()?;
    println!("server: disconnected");
    Ok(())
}

/// Connects from `src` to the server at `dst`, WRITEs `writes` lines, disconnects.
fn client(src: SocketAddr, dst: SocketAddr, writes: u32) -> Result<()> {
    let ch = EventChannel::new()?;
    let id = CmId::new(&ch, PortSpace::Tcp);
    id.resolve_addr(Some(src), dst, T)?;
    next(&ch, "client", EventKind::AddrResolved)?;
    id.resolve_route(T)?;
    next(&ch, "client", EventKind::RouteResolved)?;
    let ctx = id.context().ok_or("client: the id has no device")?;
    let pd = ctx.alloc_pd()?;
    let cq = ctx.create_cq(16, None)?;
    let qp = id.create_qp(&pd, &cq, &cq, QpCap::default())?;
    let hello = format!("hello from the cm_write client: {writes} writes");
    id.connect(&ConnParam {
        private_data: hello.into_bytes(),
        retry_count: 7,
        rnr_retry_count: 7,
        ..ConnParam::default()
    })?;
    println!("client: REQ sent from QP {:#x}", qp.qp_num());
    let est = next(&ch, "client", EventKind::Established)?;
    let rep = &est.param.private_data;
    if rep.len() < 16 {
        return Err("client: the REP carries no buffer".into());
    }
    let word = |r: std::ops::Range<usize>| rep[r].iter().fold(0u64, |v, b| v << 8 | u64::from(*b));
    let (addr, rkey, len) = (word(0..8), word(8..12) as u32, word(12..16) as usize);
    println!(
        "client: the server's buffer {addr:#x} rkey {rkey:#x} ({len} bytes); it says {:?}",
        text(&rep[16..])
    );
    let mr = pd.reg_mr(SLOT, AccessFlags::LOCAL_WRITE)?;
    let remote = RemoteAddr { addr, rkey };
    let mut wc = [WorkCompletion::default(); 1];
    let me = id.local_addr().unwrap_or(src);
    let writes = writes.min((len / SLOT) as u32);
    for i in 0..writes {
        let line = format!("write {i} from {me} over rdma_cm");
        mr.fill(0, SLOT, 0)?;
        mr.write(0, line.as_bytes())?;
        let at = remote.offset(u64::from(i) * SLOT as u64);
        qp.post_send(&[SendWr::write(u64::from(i), &[mr.sge(0, SLOT as u32)?], at).signaled()])?;
        if cq.poll_blocking(&mut wc, T)? == 0 || !wc[0].is_success() {
            return Err(format!("client: write {i}: {:?}", wc[0].status()).into());
        }
        println!("client: RDMA WRITE {i} done: {line:?}");
    }
    qp.post_send(&[SendWr::write_with_imm(99, &[], remote, writes).signaled()])?;
    if cq.poll_blocking(&mut wc, T)? == 0 || !wc[0].is_success() {
        return Err(format!("client: the WRITE with immediate: {:?}", wc[0].status()).into());
    }
    println!("client: WRITE with immediate {writes} done");
    id.disconnect()?;
    next(&ch, "client", EventKind::Disconnected)?;
    println!("client: disconnected");
    Ok(())
}

fn addr(s: &str, port: u16) -> Result<SocketAddr> {
    match s.parse::<SocketAddr>() {
        Ok(a) => Ok(a),
        Err(_) => Ok(SocketAddr::new(s.parse()?, port)),
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    match a[..] {
        [] => {
            // Both sides in this process: the server on emu1, the client on emu0.
            let (tx, rx) = std::sync::mpsc::channel();
            let srv = std::thread::spawn(move || server(addr("192.0.2.2:7471", 0)?, Some(tx)));
            rx.recv_timeout(T)
                .map_err(|_| "the server did not start listening")?;
            client(addr("192.0.2.1:0", 0)?, addr("192.0.2.2:7471", 0)?, 4)?;
            srv.join().map_err(|_| "the server thread panicked")?
        }
        ["server", at] => server(addr(at, 7471)?, None),
        ["client", to, from] => client(addr(from, 0)?, addr(to, 7471)?, 4),
        ["client", to, from, n] => client(addr(from, 0)?, addr(to, 7471)?, n.parse()?),
        _ => Err(
            "usage: cm_write [server ADDR[:PORT] | client SERVER[:PORT] SOURCE [WRITES]]".into(),
        ),
    }
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cm_write: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
