//! In-process RDMA between two threaded emulated devices (each on its own device thread,
//! woken by doorbells and by link traffic), the host side played by the test rig:
//!
//! - `write_bw/64KiB`: RDMA WRITE bandwidth with 64 KiB messages, 16 in flight, path MTU
//!   4096 (criterion's throughput is the payload rate).
//! - `write_bw/memcpy_64KiB`: a 64 KiB `copy_from_slice` between two buffers in cache, the
//!   physical limit of a WRITE (one copy per byte); after the group the bench prints the
//!   WRITE's bandwidth as a fraction of it (means over every sample of both, one run).
//! - `write_bw/memcpy_64KiB_128_slots`: the same copy, cycling through the buffers of 128
//!   QPs as `rnic write-bw -q 128` lays them out (a local and a target slot per QP on each
//!   side; the copies touch 128 x 64 KiB on each side, 16 MiB in all, beyond this
//!   machine's L2). Its bandwidth as a fraction of the in-cache copy's is what the memory
//!   hierarchy alone leaves `-q 128` of `-q 1` at one copy per byte; the bench prints it.
//! - `send_lat/2B_half_rtt`: a 2-byte SEND ping-pong; the time reported per iteration is half
//!   a round trip (RTT/2), as perftest's latency tools report.
//!
//! Run: `cargo bench -p rnic-emulator --bench inproc`.

#![allow(missing_docs, unreachable_pub)]

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/rig/mod.rs"]
mod rig;

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rig::net::{IP_A, IP_B, MAC_A, MAC_B};
use rig::{Access, Cq, Qp, Rig, SIGNALED, data, gid_of, op, raddr, segs};
use rnic_emulator::link::InProcLink;
use rnic_hw_regs::ctx::QpSt;

struct Pair {
    a: Rig,
    b: Rig,
    qa: Qp,
    qb: Qp,
    ca: Cq,
    cb: Cq,
}

fn pair() -> Pair {
    let mut a = Rig::threaded(IP_A, MAC_A);
    let mut b = Rig::threaded(IP_B, MAC_B);
    let (la, lb) = InProcLink::pair();
    a.h.dev.set_link(Box::new(la));
    b.h.dev.set_link(Box::new(lb));
    let ca = a.cq(11);
    let cb = b.cq(11);
    let qa = a.qp(QpSt::Rc, &ca, &ca, 8, 8);
    let qb = b.qp(QpSt::Rc, &cb, &cb, 8, 8);
    a.init_qp(&qa, true, true, true);
    b.init_qp(&qb, true, true, true);
    a.rtr_rts_to(&qa, qb.qpn, 5, 0, 7, gid_of(IP_B), MAC_B);
    b.rtr_rts_to(&qb, qa.qpn, 5, 0, 7, gid_of(IP_A), MAC_A);
    Pair {
        a,
        b,
        qa,
        qb,
        ca,
        cb,
    }
}

/// Polls `cq` until a CQE arrives, yielding the CPU between polls (two cores carry the host
/// and both device threads).
fn spin_poll(r: &mut Rig, cq: &mut Cq) -> rnic_hw_regs::cqe::Cqe64 {
    let start = Instant::now();
    let mut n = 0u32;
    loop {
        if let Some(c) = r.poll(cq) {
            return c;
        }
        n = n.wrapping_add(1);
        if n % 4096 == 0 {
            assert!(start.elapsed() < Duration::from_secs(10), "no completion");
        }
        std::thread::yield_now();
    }
}

/// Nanoseconds and iterations over every sample a bench function ran, for a ratio of means.
struct Tally {
    ns: AtomicU64,
    iters: AtomicU64,
}

impl Tally {
    const fn new() -> Tally {
        Tally {
            ns: AtomicU64::new(0),
            iters: AtomicU64::new(0),
        }
    }

    fn add(&self, d: Duration, iters: u64) -> Duration {
        self.ns.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
        self.iters.fetch_add(iters, Ordering::Relaxed);
        d
    }

    fn mean_ns(&self) -> f64 {
        self.ns.load(Ordering::Relaxed) as f64 / self.iters.load(Ordering::Relaxed).max(1) as f64
    }
}

static WRITE: Tally = Tally::new();
static MEMCPY: Tally = Tally::new();
static MEMCPY_SLOTS: Tally = Tally::new();

fn bench(c: &mut Criterion) {
    const MSG: usize = 64 * 1024;
    const DEPTH: u64 = 16;
    let mut p = pair();
    let src = p.a.mr(MSG, Access::ALL);
    let dst = p.b.mr(MSG, Access::ALL);
    p.a.fill(&src, 0, &vec![0x5A; MSG]);
    let wqe = segs(&[
        raddr(dst.addr, dst.key),
        data(src.addr, MSG as u32, src.key),
    ]);
    let mut g = c.benchmark_group("write_bw");
    g.throughput(Throughput::Bytes(MSG as u64));
    g.sample_size(20).measurement_time(Duration::from_secs(5));
    g.bench_function("64KiB", |bch| {
        bch.iter_custom(|iters| {
            let start = Instant::now();
            let (mut posted, mut done) = (0u64, 0u64);
            while done < iters {
                while posted < iters && posted - done < DEPTH {
                    p.a.post(&mut p.qa, op::WRITE, SIGNALED, 0, &wqe);
                    posted += 1;
                }
                let cqe = spin_poll(&mut p.a, &mut p.ca);
                assert_eq!(cqe.cqe_opcode(), Ok(rnic_hw_regs::cqe::CqeOpcode::Req));
                done += 1;
            }
            WRITE.add(start.elapsed(), iters)
        })
    });
    let from = vec![0x5Au8; MSG];
    let mut to = vec![0u8; MSG];
    g.bench_function("memcpy_64KiB", |bch| {
        bch.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                black_box(&mut to[..]).copy_from_slice(black_box(&from[..]));
            }
            MEMCPY.add(start.elapsed(), iters)
        })
    });
    // `rnic write-bw`'s layout (tools' `perf::res`): per QP, a local then a target slot of
    // the message plus a GRH, 64-byte aligned; the client's local slot goes to the server's
    // target slot.
    const QPS: usize = 128;
    const SLOT: usize = (MSG + rnic_hw_regs::roce::GRH_LEN).next_multiple_of(64);
    let client = vec![0x5Au8; 2 * SLOT * QPS];
    let mut server = vec![0u8; 2 * SLOT * QPS];
    g.bench_function("memcpy_64KiB_128_slots", |bch| {
        bch.iter_custom(|iters| {
            let start = Instant::now();
            for i in 0..iters as usize {
                let at = (i % QPS) * 2 * SLOT;
                black_box(&mut server[at + SLOT..at + SLOT + MSG])
                    .copy_from_slice(black_box(&client[at..at + MSG]));
            }
            MEMCPY_SLOTS.add(start.elapsed(), iters)
        })
    });
    g.finish();
    assert_eq!(p.b.read(&dst, MSG - 4, 4), [0x5A; 4]);
    println!(
        "write_bw/64KiB: {:.1} us per WRITE, memcpy {:.2} us: the WRITE moves {:.2}% of memcpy's bandwidth",
        WRITE.mean_ns() / 1e3,
        MEMCPY.mean_ns() / 1e3,
        100.0 * MEMCPY.mean_ns() / WRITE.mean_ns()
    );
    println!(
        "write_bw/memcpy_64KiB_128_slots: {:.2} us per copy: {:.2}% of the in-cache copy's bandwidth",
        MEMCPY_SLOTS.mean_ns() / 1e3,
        100.0 * MEMCPY.mean_ns() / MEMCPY_SLOTS.mean_ns()
    );

    let mut p = pair();
    let ma = p.a.mr(64, Access::ALL);
    let mb = p.b.mr(64, Access::ALL);
    p.a.fill(&ma, 0, b"hi");
    p.b.fill(&mb, 0, b"ho");
    let mut g = c.benchmark_group("send_lat");
    g.sample_size(20).measurement_time(Duration::from_secs(5));
    g.bench_function("2B_half_rtt", |bch| {
        bch.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                p.b.post_recv(&mut p.qb, &[(mb.addr + 32, 32, mb.key)]);
                p.a.post_recv(&mut p.qa, &[(ma.addr + 32, 32, ma.key)]);
                p.a.post(&mut p.qa, op::SEND, SIGNALED, 0, &data(ma.addr, 2, ma.key));
                // B sees the ping (its receive CQE; the SEND's own CQE may come first on A).
                loop {
                    let c = spin_poll(&mut p.b, &mut p.cb);
                    if c.cqe_opcode() == Ok(rnic_hw_regs::cqe::CqeOpcode::RespSend) {
                        break;
                    }
                }
                p.b.post(&mut p.qb, op::SEND, SIGNALED, 0, &data(mb.addr, 2, mb.key));
                let mut got_pong = false;
                let mut got_req = false;
                while !(got_pong && got_req) {
                    let c = spin_poll(&mut p.a, &mut p.ca);
                    match c.cqe_opcode() {
                        Ok(rnic_hw_regs::cqe::CqeOpcode::RespSend) => got_pong = true,
                        _ => got_req = true,
                    }
                }
                // B's requester CQE for the pong.
                let _ = spin_poll(&mut p.b, &mut p.cb);
            }
            start.elapsed() / 2
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
