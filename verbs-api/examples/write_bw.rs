//! A write-bandwidth program (ib_write_bw-like, one process): RDMA WRITEs from `emu0` to
//! `emu1` with many in flight, posted in lists (one doorbell each) and signaled every
//! `CQ_MOD`-th; completions polled in batches. Neither loop allocates.
//!
//! ```text
//! cargo run --release -p rnic-verbs --example write_bw                 # 64 KiB x 5000
//! cargo run --release -p rnic-verbs --example write_bw -- -s 8 -n 100000 -l 32
//! cargo run --release -p rnic-verbs --example write_bw -- -a            # 2 B .. 8 MiB
//! ```
//!
//! Flags: `-s SIZE` (65536), `-n ITERS` (5000), `-t TX_DEPTH` (128), `-l POST_LIST` (1),
//! `-a` (all sizes), `-d A -D B` (devices, default emu0 and emu1).

use rnic_verbs::*;
use std::time::{Duration, Instant};

/// Every `CQ_MOD`-th WRITE is signaled (perftest's CQ moderation).
const CQ_MOD: u64 = 64;

struct Args {
    size: usize,
    iters: u64,
    tx_depth: u64,
    post_list: usize,
    all: bool,
    dev_a: String,
    dev_b: String,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        size: 65536,
        iters: 5000,
        tx_depth: 128,
        post_list: 1,
        all: false,
        dev_a: "emu0".into(),
        dev_b: "emu1".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        let mut val = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match x.as_str() {
            "-s" => a.size = val("-s")?.parse().map_err(|e| format!("-s: {e}"))?,
            "-n" => a.iters = val("-n")?.parse().map_err(|e| format!("-n: {e}"))?,
            "-t" => a.tx_depth = val("-t")?.parse().map_err(|e| format!("-t: {e}"))?,
            "-l" => a.post_list = val("-l")?.parse().map_err(|e| format!("-l: {e}"))?,
            "-a" => a.all = true,
            "-d" => a.dev_a = val("-d")?,
            "-D" => a.dev_b = val("-D")?,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if a.size == 0 || a.size > 8 << 20 || a.iters == 0 || a.post_list == 0 || a.post_list > 64 {
        return Err("sizes 1..=8 MiB, at least 1 iteration, post lists of 1..=64".into());
    }
    a.tx_depth = a.tx_depth.max(CQ_MOD).max(a.post_list as u64);
    Ok(a)
}

/// Runs `iters` WRITEs of `size` bytes; returns the elapsed time.
fn run_size(
    a: &Args,
    qp: &QueuePair,
    cq: &CompletionQueue,
    src: &MemoryRegion,
    dst: RemoteAddr,
    size: usize,
) -> Result<Duration, Error> {
    let sgl = [src.sge(0, size as u32)?];
    let mut wrs = [SendWr::write(0, &sgl, dst); 64];
    let mut wc = [WorkCompletion::default(); 16];
    let (mut posted, mut done) = (0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(60);
    let start = Instant::now();
    while done < a.iters {
        // Fill the send queue up to the TX depth, a post list at a time.
        while posted < a.iters && posted - done + a.post_list as u64 <= a.tx_depth {
            let n = (a.post_list as u64).min(a.iters - posted) as usize;
            for (k, w) in wrs[..n].iter_mut().enumerate() {
                let id = posted + k as u64 + 1;
                let mut wr = SendWr::write(id, &sgl, dst);
                if id % CQ_MOD == 0 || id == a.iters {
                    wr = wr.signaled();
                }
                *w = wr;
            }
            qp.post_send(&wrs[..n])?;
            posted += n as u64;
        }
        let n = cq.poll(&mut wc)?;
        if n == 0 {
            // An emulated NIC runs on this machine's CPUs: leave them to it.
            std::thread::yield_now();
        }
        for c in &wc[..n] {
            if !c.is_success() {
                return Err(Error::Protocol(format!(
                    "WRITE {} failed: {}",
                    c.wr_id(),
                    c.status()
                )));
            }
            // A signaled completion retires every WRITE up to it.
            done = c.wr_id();
        }
        if Instant::now() > deadline {
            return Err(Error::Timeout {
                what: format!("{size}-byte WRITEs ({done} of {} done)", a.iters),
                after: Duration::from_secs(60),
            });
        }
    }
    Ok(start.elapsed())
}

fn main() {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("write_bw: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&a) {
        eprintln!("write_bw: {e}");
        std::process::exit(1);
    }
}

fn run(a: &Args) -> Result<(), Error> {
    let (ca, cb) = (Context::open(&a.dev_a)?, Context::open(&a.dev_b)?);
    let (pa, pb) = (ca.alloc_pd()?, cb.alloc_pd()?);
    let cq_a = ca.create_cq(a.tx_depth as u32 * 2, None)?;
    let cq_b = cb.create_cq(16, None)?;
    let qa = pa
        .create_qp(QpType::Rc, &cq_a, &cq_a)
        .max_send_wr(a.tx_depth as u32)
        .build()?;
    let qb = pb.create_qp(QpType::Rc, &cq_b, &cq_b).build()?;
    connect_pair(
        &qa,
        &qb,
        &ConnectOptions {
            path_mtu: Some(Mtu::Mtu4096),
            ..ConnectOptions::default()
        },
    )?;
    let max = if a.all { 8 << 20 } else { a.size };
    let src = pa.reg_mr(max, AccessFlags::LOCAL_WRITE)?;
    let dst = pb.reg_mr(max, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)?;
    println!(
        "                    RDMA_Write BW Test ({} -> {})",
        a.dev_a, a.dev_b
    );
    println!(" #bytes     #iterations    BW average[MiB/sec]   MsgRate[Mpps]");
    let sizes: Vec<usize> = if a.all {
        (1..=23).map(|k| 1usize << k).collect()
    } else {
        vec![a.size]
    };
    for size in sizes {
        let t = run_size(a, &qa, &cq_a, &src, dst.remote(0), size)?.as_secs_f64();
        let bytes = size as f64 * a.iters as f64;
        println!(
            " {size:<10} {:<14} {:<21.2} {:.6}",
            a.iters,
            bytes / t / f64::from(1u32 << 20),
            a.iters as f64 / t / 1e6
        );
    }
    Ok(())
}
