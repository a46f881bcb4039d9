//! An ibv_rc_pingpong-like program: SENDs bounce between two RC QPs that connected through
//! the TCP exchange ([`rnic_verbs::tcp_server`] / [`rnic_verbs::tcp_client`]).
//!
//! ```text
//! cargo run -p rnic-verbs --example rc_pingpong                  # both sides, emu0 <-> emu1
//! cargo run -p rnic-verbs --example rc_pingpong -- -d emu:127.0.0.1             # server
//! cargo run -p rnic-verbs --example rc_pingpong -- -d emu:127.0.0.2 127.0.0.1   # client
//! ```
//!
//! Flags: `-d DEV`, `-p PORT` (18515), `-s SIZE` (4096), `-n ITERS` (1000), `-c` (check the
//! contents), `-e` (wait on completion events instead of polling).

use rnic_verbs::*;
use std::net::TcpListener;
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
struct Args {
    dev: Option<String>,
    port: u16,
    size: usize,
    iters: u64,
    check: bool,
    events: bool,
    server: Option<String>,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        dev: None,
        port: DEFAULT_PORT,
        size: 4096,
        iters: 1000,
        check: false,
        events: false,
        server: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        let mut val = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match x.as_str() {
            "-d" => a.dev = Some(val("-d")?),
            "-p" => a.port = val("-p")?.parse().map_err(|e| format!("-p: {e}"))?,
            "-s" => a.size = val("-s")?.parse().map_err(|e| format!("-s: {e}"))?,
            "-n" => a.iters = val("-n")?.parse().map_err(|e| format!("-n: {e}"))?,
            "-c" => a.check = true,
            "-e" => a.events = true,
            s if !s.starts_with('-') => a.server = Some(s.to_string()),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if a.size == 0 || a.size > 1 << 30 {
        return Err("-s must be 1..=2^30".into());
    }
    Ok(a)
}

/// Waits for one successful completion: polling, or (`-e`) through the completion channel.
fn wait_one(cq: &CompletionQueue, events: bool) -> Result<WorkCompletion, Error> {
    let mut wc = [WorkCompletion::default(); 1];
    let limit = Duration::from_secs(10);
    let deadline = Instant::now() + limit;
    loop {
        let mut got = cq.poll(&mut wc)?;
        if got == 0 && events {
            if let Some(ch) = cq.channel() {
                cq.req_notify(false)?;
                // Poll again after arming: a completion may have come in between.
                got = cq.poll(&mut wc)?;
                if got == 0 {
                    let _ = ch.get_cq_event(Some(Duration::from_millis(100)))?;
                }
            }
        }
        if got == 1 {
            if !wc[0].is_success() {
                return Err(Error::Protocol(format!(
                    "work completion {} failed: {} ({})",
                    wc[0].wr_id(),
                    wc[0].status(),
                    wc[0].status().name()
                )));
            }
            return Ok(wc[0]);
        }
        // An emulated NIC runs on this machine's CPUs: leave them to it between polls.
        std::thread::yield_now();
        if Instant::now() > deadline {
            return Err(Error::Timeout {
                what: "waiting for a completion".into(),
                after: limit,
            });
        }
    }
}

fn run(a: &Args, dev: &str, server: bool, listener: Option<TcpListener>) -> Result<(), Error> {
    let ctx = Context::open(dev)?;
    let chan = if a.events {
        Some(ctx.create_comp_channel()?)
    } else {
        None
    };
    let pd = ctx.alloc_pd()?;
    let cq = ctx.create_cq(1024, chan.as_ref())?;
    let qp = pd
        .create_qp(QpType::Rc, &cq, &cq)
        .max_send_wr(16)
        .max_recv_wr(16)
        .build()?;
    let buf = pd.reg_mr(a.size, AccessFlags::LOCAL_WRITE)?;
    let sgl = [buf.sge(0, a.size as u32)?];
    qp.to_init(&InitAttr::default())?;
    qp.post_recv(&[RecvWr::new(0, &sgl)])?;
    let opts = ConnectOptions {
        access: Some(AccessFlags::empty()),
        path_mtu: Some(Mtu::Mtu1024),
        ..ConnectOptions::default()
    };
    let remote = if let Some(l) = &listener {
        tcp_server_on(&qp, None, l, &opts)?
    } else if server {
        tcp_server(&qp, None, ("0.0.0.0", a.port), &opts)?
    } else {
        let host = a.server.clone().unwrap_or_else(|| "127.0.0.1".into());
        tcp_client(&qp, None, (host.as_str(), a.port), &opts)?
    };
    let q = qp.query()?;
    println!(
        "  local address:  LID 0x0000, QPN {:#08x}, PSN {:#08x}, GID {}",
        qp.qp_num(),
        q.sq_psn,
        ctx.query_gid(1, ctx.ipv4_gid_index().unwrap_or(0))?
    );
    println!(
        "  remote address: LID 0x{:04x}, QPN {:#08x}, PSN {:#08x}, GID {}",
        remote.lid, remote.qpn, remote.psn, remote.gid
    );
    let start = Instant::now();
    for i in 0..a.iters {
        // The client sends first; each side answers what it received.
        let send = |i: u64| -> Result<(), Error> {
            if a.check {
                let fill = vec![(i as u8).wrapping_add(u8::from(server)); a.size];
                buf.write(0, &fill)?;
            }
            qp.post_send(&[SendWr::send(1, &sgl).signaled()])?;
            wait_one(&cq, a.events)?;
            Ok(())
        };
        let recv = |i: u64| -> Result<(), Error> {
            let w = wait_one(&cq, a.events)?;
            if w.opcode() != WcOpcode::Recv {
                return Err(Error::Protocol(format!("unexpected {:?}", w.opcode())));
            }
            if a.check {
                let expect = (i as u8).wrapping_add(u8::from(!server));
                let got = buf.to_vec(0, a.size)?;
                if got.iter().any(|&b| b != expect) {
                    return Err(Error::Protocol(format!("iteration {i}: bad contents")));
                }
            }
            qp.post_recv(&[RecvWr::new(0, &sgl)])?;
            Ok(())
        };
        if server {
            recv(i)?;
            send(i)?;
        } else {
            send(i)?;
            recv(i)?;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let bytes = 2 * a.size as u64 * a.iters;
    println!(
        "{bytes} bytes in {secs:.2} seconds = {:.2} Mbit/sec",
        bytes as f64 * 8.0 / secs / 1e6
    );
    println!(
        "{} iters in {secs:.2} seconds = {:.2} usec/iter",
        a.iters,
        secs * 1e6 / a.iters as f64
    );
    Ok(())
}

fn main() {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("rc_pingpong: {e}");
            std::process::exit(2);
        }
    };
    let r = match (&a.dev, &a.server) {
        // No device: both sides in this process, on the emulated pair.
        (None, None) => {
            // A port of our own on loopback, so the example never meets a busy 18515.
            let listener = TcpListener::bind("127.0.0.1:0").expect("binding a TCP port");
            let mut c = a.clone();
            c.port = listener.local_addr().map(|x| x.port()).unwrap_or(a.port);
            let s = a.clone();
            let server = std::thread::spawn(move || run(&s, "emu0", true, Some(listener)));
            let client = run(&c, "emu1", false, None);
            server
                .join()
                .unwrap_or_else(|_| Err(Error::Protocol("server thread panicked".into())))
                .and(client)
        }
        (dev, server) => run(&a, dev.as_deref().unwrap_or("emu0"), server.is_none(), None),
    };
    if let Err(e) = r {
        eprintln!("rc_pingpong: {e}");
        std::process::exit(1);
    }
}
