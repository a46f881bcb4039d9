//! The fault campaign between two processes: mixed RC SEND / WRITE / READ / FETCH_ADD from a
//! client to a server, each an emulated device on the UDP link (`emu:<IPv4>`) that injects
//! loss, duplication, reordering and corruption into what it transmits. Both sides draw the
//! same operations from one seed, so the server checks every SEND it receives (bytes, length,
//! order) and the client checks every completion (exactly once, in order), every READ's bytes,
//! every WRITE (read back) and every FETCH_ADD's old value; at the end the server
//! checks the counter is exact.
//!
//! ```text
//! cargo run --release -p rnic-verbs --example fault_campaign -- -n 1000000   # both processes
//! cargo run --release -p rnic-verbs --example fault_campaign -- --server -d emu:127.0.0.221
//! cargo run --release -p rnic-verbs --example fault_campaign -- -d emu:127.0.0.222 127.0.0.221
//! ```
//!
//! Flags: `-n OPS` (100000), `--seed S` (7), `--faults SPEC` (`loss=0.05,dup=0.01,
//! reorder=0.01,corrupt=0.001`, the seed added per side), `-p PORT` (18516), `-d DEV`,
//! `--qp-timeout T` (14: 4.096 us x 2^T, rc_pingpong's).
//! Without `--server` or a server address it starts the server as a child process.

use rnic_emulator::link::SplitMix64;
use rnic_verbs::*;
use std::time::{Duration, Instant};

const BATCH: usize = 64;
const SLOT: usize = 2048;
const MAX_LEN: u64 = 1600;
const WRITE_AREA: usize = BATCH * SLOT;
const READ_AREA: usize = 65536;
/// The server's region: WRITE slots, then the READ area, then the FETCH_ADD counter.
const AREA: usize = WRITE_AREA + READ_AREA + 8;
const COUNTER_START: u64 = 1 << 40;
const T: Duration = Duration::from_secs(120);

struct Args {
    server: bool,
    dev: Option<String>,
    peer: Option<String>,
    port: u16,
    ops: u64,
    seed: u64,
    faults: String,
    timeout: u8,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        server: false,
        dev: None,
        peer: None,
        port: 18516,
        ops: 100_000,
        seed: 7,
        faults: "loss=0.05,dup=0.01,reorder=0.01,corrupt=0.001".into(),
        timeout: 14,
    };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        let mut val = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        let num = |name: &str, v: String| v.parse::<u64>().map_err(|e| format!("{name}: {e}"));
        match x.as_str() {
            "--server" => a.server = true,
            "-d" => a.dev = Some(val("-d")?),
            "-p" => a.port = num("-p", val("-p")?)? as u16,
            "-n" => a.ops = num("-n", val("-n")?)?,
            "--seed" => a.seed = num("--seed", val("--seed")?)?,
            "--faults" => a.faults = val("--faults")?,
            "--qp-timeout" => a.timeout = num("--qp-timeout", val("--qp-timeout")?)? as u8,
            s if !s.starts_with('-') => a.peer = Some(s.to_string()),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(a)
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Send,
    Write,
    Read,
    FetchAdd,
}

/// One operation: its kind, length, the seed of its bytes, a READ offset or FETCH_ADD addend.
#[derive(Clone, Copy)]
struct Op {
    kind: Kind,
    len: usize,
    bytes_seed: u64,
    arg: u64,
}

fn draw(rng: &mut SplitMix64) -> Op {
    let k = rng.below(100);
    let len = rng.below(MAX_LEN + 1) as usize;
    let bytes_seed = rng.next_u64();
    let (kind, arg) = match k {
        0..30 => (Kind::Send, 0),
        30..60 => (Kind::Write, 0),
        60..85 => (Kind::Read, rng.below((READ_AREA - len + 1) as u64)),
        _ => (Kind::FetchAdd, rng.below(1000) + 1),
    };
    Op {
        kind,
        len,
        bytes_seed,
        arg,
    }
}

fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut r = SplitMix64::new(seed);
    (0..len).map(|_| r.next_u64() as u8).collect()
}

fn read_area() -> Vec<u8> {
    (0..READ_AREA).map(|i| (i * 7 + 0x5A) as u8).collect()
}

fn open(dev: &str, faults: &str, seed: u64) -> Result<Context, Box<dyn std::error::Error>> {
    let emu = EmuOptions::default().with_fault_spec(&format!("{faults},seed={seed}"))?;
    Ok(Context::open_with(
        dev,
        &OpenOptions {
            emu,
            ..OpenOptions::default()
        },
    )?)
}

/// The connection: QP retransmission timeout 4.096 us x 2^`timeout` (`--qp-timeout`).
fn options(timeout: u8) -> ConnectOptions {
    ConnectOptions {
        timeout,
        io_timeout: T,
        ..ConnectOptions::default()
    }
}

fn print_counters(role: &str, ctx: &Context) {
    if let Some(f) = ctx.fault_counters() {
        println!("{role}: faults on what it sent: {f}");
    }
    if let Some(c) = ctx.emulator_counters() {
        println!(
            "{role}: frames_tx={} frames_rx={} rx_dropped={} {:?}",
            c.frames_tx, c.frames_rx, c.rx_dropped, c.transport
        );
    }
}

fn server(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let ctx = open(
        a.dev.as_deref().unwrap_or("emu:127.0.0.221"),
        &a.faults,
        a.seed ^ 0xB,
    )?;
    let pd = ctx.alloc_pd()?;
    let cq = ctx.create_cq(4 * BATCH as u32, None)?;
    let qp = pd
        .create_qp(QpType::Rc, &cq, &cq)
        .max_recv_wr(BATCH as u32)
        .max_send_wr(4)
        .build()?;
    let area = pd.reg_mr(AREA, AccessFlags::all())?;
    area.write(WRITE_AREA, &read_area())?;
    area.write_u64(WRITE_AREA + READ_AREA, COUNTER_START)?;
    let rbuf = pd.reg_mr(BATCH * SLOT, AccessFlags::LOCAL_WRITE)?;
    let post = |slot: usize| -> Result<(), Error> {
        qp.post_recv(&[RecvWr::new(
            slot as u64,
            &[rbuf.sge(slot * SLOT, SLOT as u32)?],
        )])
    };
    tcp_server(&qp, Some(&area), ("0.0.0.0", a.port), &options(a.timeout))?;
    // Receives are accepted from RTR on; a SEND that comes first is RNR-NAKed and retried.
    for slot in 0..BATCH {
        post(slot)?;
    }
    // The SENDs the client will make, in order, then its final SEND of the expected counter.
    let mut rng = SplitMix64::new(a.seed);
    let mut sends = Vec::new();
    let mut counter = COUNTER_START;
    for _ in 0..a.ops {
        let op = draw(&mut rng);
        match op.kind {
            Kind::Send => sends.push(op),
            Kind::FetchAdd => counter += op.arg,
            _ => {}
        }
    }
    let mut wc = [WorkCompletion::default(); 1];
    for (i, op) in sends.iter().enumerate() {
        if cq.poll_blocking(&mut wc, T)? == 0 {
            return Err(format!("SEND {i} of {} never arrived", sends.len()).into());
        }
        let slot = i % BATCH;
        let w = &wc[0];
        if !w.is_success() || w.wr_id() != slot as u64 || w.byte_len() as usize != op.len {
            return Err(format!(
                "SEND {i}: {:?} wr_id {} len {}",
                w.status(),
                w.wr_id(),
                w.byte_len()
            )
            .into());
        }
        if rbuf.to_vec(slot * SLOT, op.len)? != bytes(op.len, op.bytes_seed) {
            return Err(format!("SEND {i}: the bytes differ").into());
        }
        post(slot)?;
    }
    if cq.poll_blocking(&mut wc, T)? == 0 || !wc[0].is_success() {
        return Err("the final SEND never arrived".into());
    }
    let slot = sends.len() % BATCH;
    let told = rbuf.read_u64(slot * SLOT)?;
    let now = area.read_u64(WRITE_AREA + READ_AREA)?;
    if now != counter || told != counter {
        return Err(format!("counter {now:#x}, client {told:#x}, expected {counter:#x}").into());
    }
    println!(
        "server: {} SENDs checked, counter exact ({counter:#x})",
        sends.len()
    );
    // Stay up while the final ACK (or its retransmission) reaches the client.
    std::thread::sleep(Duration::from_secs(2));
    print_counters("server", &ctx);
    Ok(())
}

fn client(a: &Args, peer: &str) -> Result<(), Box<dyn std::error::Error>> {
    let ctx = open(
        a.dev.as_deref().unwrap_or("emu:127.0.0.222"),
        &a.faults,
        a.seed ^ 0xA,
    )?;
    let pd = ctx.alloc_pd()?;
    let cq = ctx.create_cq(4 * BATCH as u32, None)?;
    let qp = pd
        .create_qp(QpType::Rc, &cq, &cq)
        .max_send_wr(BATCH as u32 + 1)
        .build()?;
    let src = pd.reg_mr(BATCH * SLOT, AccessFlags::LOCAL_WRITE)?;
    let back = pd.reg_mr(BATCH * SLOT, AccessFlags::LOCAL_WRITE)?;
    let check = pd.reg_mr(WRITE_AREA, AccessFlags::LOCAL_WRITE)?;
    let remote = tcp_client(&qp, None, (peer, a.port), &options(a.timeout))?;
    let at = |off: usize| RemoteAddr {
        addr: remote.addr + off as u64,
        rkey: remote.rkey,
    };
    let reads = read_area();
    let mut rng = SplitMix64::new(a.seed);
    let mut counter = COUNTER_START;
    let (mut n, mut done, mut moved) = ([0u64; 4], 0u64, 0u64);
    let mut wc = vec![WorkCompletion::default(); BATCH];
    let start = Instant::now();
    while done < a.ops {
        let ops: Vec<Op> = (0..(a.ops - done).min(BATCH as u64))
            .map(|_| draw(&mut rng))
            .collect();
        for (i, op) in ops.iter().enumerate() {
            let slot = i * SLOT;
            let sge = |mr: &MemoryRegion, len: usize| mr.sge(slot, len as u32);
            n[op.kind as usize] += 1;
            moved += op.len as u64;
            let id = i as u64;
            match op.kind {
                Kind::Send | Kind::Write => {
                    src.write(slot, &bytes(op.len, op.bytes_seed))?;
                    let sgl = [sge(&src, op.len)?];
                    let wr = if op.kind == Kind::Send {
                        SendWr::send(id, &sgl)
                    } else {
                        SendWr::write(id, &sgl, at(slot))
                    };
                    qp.post_send(&[wr.signaled()])?;
                }
                Kind::Read => {
                    let sgl = [sge(&back, op.len)?];
                    let wr = SendWr::read(id, &sgl, at(WRITE_AREA + op.arg as usize));
                    qp.post_send(&[wr.signaled()])?;
                }
                Kind::FetchAdd => {
                    let local = sge(&back, 8)?;
                    let wr = SendWr::fetch_add(id, &local, at(WRITE_AREA + READ_AREA), op.arg);
                    qp.post_send(&[wr.signaled()])?;
                }
            }
        }
        if cq.poll_blocking(&mut wc[..ops.len()], T)? != ops.len() {
            return Err(format!("ops {done}..: not all completed").into());
        }
        for (i, (op, w)) in ops.iter().zip(&wc).enumerate() {
            let k = done + i as u64;
            if !w.is_success() || w.wr_id() != i as u64 {
                return Err(format!(
                    "op {k}: {:?}, wr_id {} (expected {i})",
                    w.status(),
                    w.wr_id()
                )
                .into());
            }
            let slot = i * SLOT;
            match op.kind {
                Kind::Read if back.to_vec(slot, op.len)? != reads[op.arg as usize..][..op.len] => {
                    return Err(format!("READ {k}: the bytes differ").into());
                }
                Kind::FetchAdd => {
                    let old = back.read_u64(slot)?;
                    if old != counter {
                        return Err(
                            format!("FETCH_ADD {k}: {old:#x}, expected {counter:#x}").into()
                        );
                    }
                    counter += op.arg;
                }
                _ => {}
            }
        }
        if cq.poll(&mut wc[..1])? != 0 {
            return Err(format!("ops {done}..: a completion too many").into());
        }
        // The batch's WRITEs, each read back (small READs: a lost response costs one
        // retransmission of a packet or two, not of a long READ).
        let writes: Vec<usize> = (0..ops.len())
            .filter(|&i| ops[i].kind == Kind::Write)
            .collect();
        for &i in &writes {
            let sgl = [check.sge(i * SLOT, ops[i].len as u32)?];
            qp.post_send(&[SendWr::read(i as u64, &sgl, at(i * SLOT)).signaled()])?;
        }
        if cq.poll_blocking(&mut wc[..writes.len()], T)? != writes.len() {
            return Err(format!("ops {done}..: a read-back never completed").into());
        }
        for (&i, w) in writes.iter().zip(&wc) {
            let op = &ops[i];
            if !w.is_success() || w.wr_id() != i as u64 {
                return Err(
                    format!("WRITE {} read-back: {:?}", done + i as u64, w.status()).into(),
                );
            }
            if check.to_vec(i * SLOT, op.len)? != bytes(op.len, op.bytes_seed) {
                return Err(format!("WRITE {}: the bytes differ", done + i as u64).into());
            }
        }
        done += ops.len() as u64;
    }
    // Tell the server the counter it should hold.
    src.write_u64(0, counter)?;
    let sgl = [src.sge(0, 8)?];
    qp.post_send(&[SendWr::send(u64::MAX, &sgl).signaled()])?;
    if cq.poll_blocking(&mut wc[..1], T)? != 1 || !wc[0].is_success() {
        return Err("the final SEND failed".into());
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "client: {done} ops (sends={} writes={} reads={} atomics={}, {moved} bytes) in {secs:.1} s ({:.0} ops/s), every one completed once, in order, checked",
        n[0],
        n[1],
        n[2],
        n[3],
        done as f64 / secs
    );
    print_counters("client", &ctx);
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = parse().map_err(|e| format!("fault_campaign: {e}"))?;
    if a.server {
        return server(&a);
    }
    if let Some(peer) = &a.peer {
        return client(&a, peer);
    }
    // Both roles: the server in a child process.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut child = std::process::Command::new(std::env::current_exe()?)
        .args(["--server", "-d", "emu:127.0.0.221", "-p", &port.to_string()])
        .args(["-n", &a.ops.to_string(), "--seed", &a.seed.to_string()])
        .args([
            "--faults",
            &a.faults,
            "--qp-timeout",
            &a.timeout.to_string(),
        ])
        .spawn()?;
    let a = Args { port, ..a };
    let result = client(&a, "127.0.0.221");
    let status = child.wait()?;
    result?;
    if !status.success() {
        return Err(format!("the server process failed: {status}").into());
    }
    Ok(())
}
