//! Leak cycles (its own process, one test, so nothing else opens devices or threads meanwhile):
//! every object is created and destroyed many times on an emulated device, and afterwards the
//! device holds the firmware pages and DMA mappings it held before, the process has the file
//! descriptors and threads it had before, and resident memory has stayed flat.
//!
//! `RNIC_LEAK_CYCLES` sets the number of object cycles (default 4,200, past the 4,095 interrupt
//! vectors of an emulated device, so a channel that kept its vector would fail; the context
//! open/close cycles are a tenth of it); `cargo test --release -p rnic-verbs --test verbs_leaks --
//! --nocapture` with `RNIC_LEAK_CYCLES=10000` is the full run.

mod common;

use common::*;
use rnic_verbs::*;

/// What the process and the device hold at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Held {
    pages: usize,
    mappings: usize,
    fds: usize,
    threads: usize,
}

fn count_dir(path: &str) -> usize {
    std::fs::read_dir(path).map(|d| d.count()).unwrap_or(0)
}

/// `VmRSS` from `/proc/self/status`, in KiB.
/// The process's (fds, threads), once the threads it has joined are gone from
/// `/proc/self/task`: `pthread_join` returns when the kernel clears the thread's tid, a moment
/// before it reaps the task, so on a loaded machine a joined thread can still be listed. Waits
/// (up to 2 s) for the count to come down to `expect`'s, and returns what it sees then.
fn fds_and_threads_settled(expect: (usize, usize)) -> (usize, usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        let now = (count_dir("/proc/self/fd"), count_dir("/proc/self/task"));
        if now.1 <= expect.1 || std::time::Instant::now() >= deadline {
            return now;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// What the device and the process hold; `threads_at_most` lets joined threads be reaped
/// first (see [`fds_and_threads_settled`]).
fn held(ctx: &Context, threads_at_most: usize) -> Held {
    let dev = ctx.emulator().expect("an emulated device");
    let (fds, threads) = fds_and_threads_settled((0, threads_at_most));
    Held {
        pages: dev.pages_held(),
        mappings: dev.dma_mappings(),
        fds,
        threads,
    }
}

fn cycles() -> usize {
    std::env::var("RNIC_LEAK_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4_200)
}

/// One cycle of every object a context makes, each taken one step into use and dropped.
fn object_cycle(ctx: &Context, peer_gid: Gid) {
    let pd = ctx.alloc_pd().expect("alloc_pd");
    let mr = pd.reg_mr(4096, all()).expect("reg_mr");
    let ch = ctx.create_comp_channel().expect("create_comp_channel");
    let cq = ctx.create_cq(16, Some(&ch)).expect("create_cq");
    cq.req_notify(false).expect("req_notify_cq");
    let srq = pd.create_srq(16, 1).expect("create_srq");
    srq.post_recv(&[RecvWr::new(1, &[mr.sge(0, 64).unwrap()])])
        .expect("post_srq_recv");
    let init = InitAttr {
        qkey: Some(DEFAULT_QKEY),
        access: rw(),
        ..InitAttr::default()
    };
    for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
        let qp = pd.create_qp(t, &cq, &cq).build().expect("create_qp");
        let init = InitAttr {
            qkey: (t == QpType::Ud).then_some(DEFAULT_QKEY),
            access: if t == QpType::Ud {
                AccessFlags::empty()
            } else {
                init.access
            },
            ..init
        };
        qp.to_init(&init).expect("to_init");
        qp.post_recv(&[RecvWr::new(2, &[mr.sge(64, 64).unwrap()])])
            .expect("post_recv");
    }
    let on_srq = pd
        .create_qp(QpType::Rc, &cq, &cq)
        .srq(&srq)
        .build()
        .expect("create_qp on an SRQ");
    drop(on_srq);
    let ah = pd.create_ah(&AhAttr::new(peer_gid, 1)).expect("create_ah");
    drop((ah, srq, cq, ch, mr, pd));
}

#[test]
fn create_destroy_cycles_leave_nothing_behind() {
    let n = cycles();
    let peer = Context::open("emu1").expect("open emu1");
    let peer_gid = peer.query_gid(1, 1).expect("emu1's IPv4 GID");
    let ctx = Context::open("emu0").expect("open emu0");

    // Warm up once: first-use allocations (thread-locals, the allocator's pools) are not leaks.
    object_cycle(&ctx, peer_gid);
    let before = held(&ctx, usize::MAX);
    let rss_before = rss_kib();
    let start = std::time::Instant::now();
    for _ in 0..n {
        object_cycle(&ctx, peer_gid);
    }
    let after = held(&ctx, before.threads);
    let rss_after = rss_kib();
    println!(
        "leaks: {n} object cycles (PD, MR, channel, CQ, SRQ, RC/UC/UD QPs, RC QP on the SRQ, AH) in {:.1?}: {before:?} -> {after:?}, RSS {rss_before} -> {rss_after} KiB",
        start.elapsed()
    );
    assert_eq!(before, after, "an object cycle left something behind");
    // Flat: well under a byte per object created, after the warm-up.
    assert!(
        rss_after <= rss_before + 2048,
        "RSS grew {rss_before} -> {rss_after} KiB over {n} cycles"
    );

    // Context open/close: the last handle closes the device, so the process is what we look
    // at; emu1 stays open so each emu0 is linked to a live partner.
    drop(ctx);
    let opens = std::env::var("RNIC_LEAK_CONTEXT_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or((n / 10).max(1));
    let context_cycle = || {
        let ctx = Context::open("emu0").expect("open emu0");
        object_cycle(&ctx, peer_gid);
        let dev = ctx.emulator().expect("emulated");
        assert!(dev.pages_held() > 0, "an open device holds firmware pages");
    };
    // Warm-up: each device's threads make the allocator set up its per-thread arenas, which
    // it keeps; a quarter of the cycles (at least 25) reaches that plateau.
    let warm = (opens / 4).max(25);
    for _ in 0..warm {
        context_cycle();
    }
    let proc_before = (count_dir("/proc/self/fd"), count_dir("/proc/self/task"));
    let rss_before = rss_kib();
    let start = std::time::Instant::now();
    for _ in 0..opens {
        context_cycle();
    }
    let proc_after = fds_and_threads_settled(proc_before);
    let rss_after = rss_kib();
    println!(
        "leaks: {opens} context open/close cycles (after {} to warm up) in {:.1?}: (fds, threads) {proc_before:?} -> {proc_after:?}, RSS {rss_before} -> {rss_after} KiB",
        warm,
        start.elapsed()
    );
    assert_eq!(
        proc_before, proc_after,
        "a context cycle left an fd or a thread"
    );
    assert!(
        rss_after <= rss_before + 2048,
        "RSS grew {rss_before} -> {rss_after} KiB over {opens} context cycles"
    );
    // The reopened device still works with its partner.
    drop(peer);
    let a = side("emu0", QpType::Rc);
    let b = side("emu1", QpType::Rc);
    connect_pair(&a.qp, &b.qp, &ConnectOptions::default()).expect("connect");
    write_inline_and_check(&a, &b, b"still here");
}
