//! Two emulated devices over real UDP sockets on 127.0.0.1 and 127.0.0.2 (port 4791): RC
//! SEND, WRITE, READ and FETCH_ADD, and UD, through the kernel. Frames from an emulated peer
//! carry IP ID 0, so their ICRCs verify exactly (no IP ID solving). A burst of READ
//! responses (16 outstanding 64 KiB READs at MTU 1024: 1024 datagrams back to back) reaches
//! the requester without the kernel dropping any (the link's receive buffer).

mod common;
#[path = "rig/mod.rs"]
mod rig;

use std::net::Ipv4Addr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rig::{Access, Rig, SIGNALED, atomic, data, gid_of, op, raddr, segs};
use rnic_emulator::link::udp::{RCVBUF_BYTES, RX_RING_FRAMES, UdpOffload};
use rnic_emulator::link::{LinkError, UdpLink};
use rnic_hw_regs::cqe::{Cqe64, CqeOpcode};
use rnic_hw_regs::ctx::QpSt;

const IP_A: [u8; 4] = [127, 0, 0, 1];
const IP_B: [u8; 4] = [127, 0, 0, 2];
const MAC_A: [u8; 6] = [2, 0, 0, 0, 1, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 1, 2];

/// The tests of this file bind the same two addresses: one at a time.
static ADDRS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Steps both devices until `cq` (of A when `on_a`, else of B) has a CQE (or 10 s pass).
fn wait(a: &mut Rig, b: &mut Rig, on_a: bool, cq: &mut rig::Cq) -> Cqe64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // Threaded devices run on their own (woken by the UDP reader); the test only steps
        // deterministic ones.
        if a.h.dev.mode() == rnic_emulator::RunMode::Deterministic {
            a.h.dev.step();
            b.h.dev.step();
        }
        let r = if on_a { &mut *a } else { &mut *b };
        if let Some(c) = r.poll(cq) {
            return c;
        }
        assert!(
            Instant::now() < deadline,
            "no completion over UDP: A {:?} B {:?}",
            a.counters(),
            b.counters()
        );
        std::thread::sleep(Duration::from_micros(50));
    }
}

#[test]
fn rc_between_127_0_0_1_and_127_0_0_2() {
    let _one = ADDRS.lock().unwrap_or_else(|e| e.into_inner());
    // Deterministic devices stepped by the test, then threaded ones woken by the link.
    run(false);
    run(true);
}

fn run(threaded: bool) {
    let (la, lb) = match (
        UdpLink::bind(Ipv4Addr::from(IP_A)),
        UdpLink::bind(Ipv4Addr::from(IP_B)),
    ) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e @ LinkError::AddrInUse(_)), _) | (_, Err(e @ LinkError::AddrInUse(_))) => {
            println!("skipped: {e} (another RoCE v2 endpoint runs here)");
            return;
        }
        (Err(e), _) | (_, Err(e)) => panic!("bind: {e}"),
    };
    let stats_a = la.stats();
    let (mut ra, mut rb) = if threaded {
        (Rig::threaded(IP_A, MAC_A), Rig::threaded(IP_B, MAC_B))
    } else {
        (Rig::with_addr(IP_A, MAC_A), Rig::with_addr(IP_B, MAC_B))
    };
    ra.h.dev.set_link(Box::new(la));
    rb.h.dev.set_link(Box::new(lb));
    let mut ca = ra.cq(6);
    let mut cb = rb.cq(6);
    let mut qa = ra.qp(QpSt::Rc, &ca, &ca, 6, 6);
    let mut qb = rb.qp(QpSt::Rc, &cb, &cb, 6, 6);
    ra.init_qp(&qa, true, true, true);
    rb.init_qp(&qb, true, true, true);
    ra.rtr_rts_to(&qa, qb.qpn, 3, 0x10, 0, gid_of(IP_B), MAC_B);
    rb.rtr_rts_to(&qb, qa.qpn, 3, 0x10, 0, gid_of(IP_A), MAC_A);
    let src = ra.mr(16384, Access::ALL);
    let dst = rb.mr(16384, Access::ALL);
    let msg: Vec<u8> = (0..5000u32).map(|i| (i * 13 + 1) as u8).collect();
    ra.fill(&src, 0, &msg);

    let rc = rb.post_recv(&mut qb, &[(dst.addr, 8192, dst.key)]);
    let w = ra.post(
        &mut qa,
        op::SEND,
        SIGNALED,
        0,
        &data(src.addr, 5000, src.key),
    );
    let c = wait(&mut ra, &mut rb, true, &mut ca);
    assert_eq!((c.cqe_opcode(), c.wqe_counter()), (Ok(CqeOpcode::Req), w));
    let c = wait(&mut ra, &mut rb, false, &mut cb);
    assert_eq!(
        (c.cqe_opcode(), c.wqe_counter(), c.byte_cnt()),
        (Ok(CqeOpcode::RespSend), rc, 5000)
    );
    assert_eq!(rb.read(&dst, 0, 5000), msg);

    let w = ra.post(
        &mut qa,
        op::WRITE,
        SIGNALED,
        0,
        &segs(&[
            raddr(dst.addr + 8192, dst.key),
            data(src.addr, 5000, src.key),
        ]),
    );
    assert_eq!(wait(&mut ra, &mut rb, true, &mut ca).wqe_counter(), w);
    assert_eq!(rb.read(&dst, 8192, 5000), msg);

    ra.fill(&src, 8192, &[0; 5000]);
    let w = ra.post(
        &mut qa,
        op::READ,
        SIGNALED,
        0,
        &segs(&[
            raddr(dst.addr + 8192, dst.key),
            data(src.addr + 8192, 5000, src.key),
        ]),
    );
    let c = wait(&mut ra, &mut rb, true, &mut ca);
    assert_eq!((c.wqe_counter(), c.byte_cnt()), (w, 5000));
    assert_eq!(ra.read(&src, 8192, 5000), msg);

    rb.fill(&dst, 16000, &41u64.to_be_bytes());
    ra.post(
        &mut qa,
        op::FA,
        SIGNALED,
        0,
        &segs(&[
            raddr(dst.addr + 16000, dst.key),
            atomic(1, 0),
            data(src.addr + 16000, 8, src.key),
        ]),
    );
    assert_eq!(
        wait(&mut ra, &mut rb, true, &mut ca).cqe_opcode(),
        Ok(CqeOpcode::Req)
    );
    assert_eq!(ra.read(&src, 16000, 8), 41u64.to_be_bytes());
    assert_eq!(rb.read(&dst, 16000, 8), 42u64.to_be_bytes());

    let (a, b) = (ra.counters(), rb.counters());
    assert_eq!(a.rx_dropped + b.rx_dropped, 0, "{a:?} {b:?}");
    assert_eq!(
        a.transport.icrc_ip_id_solved + b.transport.icrc_ip_id_solved,
        0,
        "the kernel sent IP ID 0: ICRCs verified exactly"
    );
    let sent = stats_a.sent.load(std::sync::atomic::Ordering::Relaxed);
    assert!(sent >= 11, "A sent {sent} datagrams");
    assert_eq!(
        stats_a
            .sport_fallbacks
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}

/// Binds the two links, both using `offload` (None: what [`UdpLink::bind`] chooses), or
/// says why the test is skipped.
fn bind_pair_with(offload: Option<UdpOffload>) -> Option<(UdpLink, UdpLink)> {
    let bind = |ip: [u8; 4]| match offload {
        Some(o) => UdpLink::bind_with(Ipv4Addr::from(ip), RX_RING_FRAMES, o),
        None => UdpLink::bind(Ipv4Addr::from(ip)),
    };
    match (bind(IP_A), bind(IP_B)) {
        (Ok(a), Ok(b)) => Some((a, b)),
        (Err(e @ LinkError::AddrInUse(_)), _) | (_, Err(e @ LinkError::AddrInUse(_))) => {
            println!("skipped: {e} (another RoCE v2 endpoint runs here)");
            None
        }
        (Err(e), _) | (_, Err(e)) => panic!("bind: {e}"),
    }
}

/// 16 outstanding 64 KiB READs at MTU 1024, A reading from B: B's responder sends 1024
/// READ responses as fast as it can, 1024 datagrams queued on A's socket at worst. With
/// the kernel's default receive buffer (208 KiB, ~90 such datagrams) the kernel dropped
/// some (counted by `SO_RXQ_OVFL`), and every drop cost a go-back-N retry. Repeated, with
/// threaded devices (as the rnic tool runs them) and with deterministic ones stepped by the
/// test.
#[test]
fn a_burst_of_read_responses_is_not_dropped_by_the_socket() {
    let _one = ADDRS.lock().unwrap_or_else(|e| e.into_inner());
    for threaded in [true, false] {
        for round in 0..3 {
            if !read_burst(threaded, round, None) {
                return;
            }
        }
    }
}

/// The same READ burst with neither offload (the plain path a kernel without them takes)
/// and with GSO and GRO both (the responses leave in GSO sends the kernel cuts at frame
/// boundaries and arrive in GRO buffers the reader cuts back): every response arrives as
/// its own frame, and every ICRC verifies without solving an IP ID.
#[test]
fn a_burst_of_read_responses_arrives_whole_with_each_offload() {
    let _one = ADDRS.lock().unwrap_or_else(|e| e.into_inner());
    let all = UdpOffload {
        gro: true,
        gso: true,
    };
    for (round, offload) in [UdpOffload::PLAIN, all].into_iter().enumerate() {
        for threaded in [true, false] {
            if !read_burst(threaded, round as u32, Some(offload)) {
                return;
            }
        }
    }
}

fn read_burst(threaded: bool, round: u32, offload: Option<UdpOffload>) -> bool {
    const READS: usize = 16;
    const LEN: usize = 64 * 1024;
    let Some((la, lb)) = bind_pair_with(offload) else {
        return false;
    };
    if let Some(o) = offload {
        println!(
            "offload asked {o:?}, in use {:?} / {:?}",
            la.offload(),
            lb.offload()
        );
    }
    let (stats_a, stats_b) = (la.stats(), lb.stats());
    let rcvbuf = stats_a.rcvbuf_bytes.load(Ordering::Relaxed);
    let (mut ra, mut rb) = if threaded {
        (Rig::threaded(IP_A, MAC_A), Rig::threaded(IP_B, MAC_B))
    } else {
        (Rig::with_addr(IP_A, MAC_A), Rig::with_addr(IP_B, MAC_B))
    };
    // 16 READs outstanding at A, 16 responder resources at B.
    ra.log_rd_atomic = 4;
    rb.log_rd_atomic = 4;
    ra.h.dev.set_link(Box::new(la));
    rb.h.dev.set_link(Box::new(lb));
    let mut ca = ra.cq(6);
    let cb = rb.cq(6);
    let mut qa = ra.qp(QpSt::Rc, &ca, &ca, 7, 6);
    let qb = rb.qp(QpSt::Rc, &cb, &cb, 6, 6);
    ra.init_qp(&qa, true, true, true);
    rb.init_qp(&qb, true, true, true);
    ra.rtr_rts_to(&qa, qb.qpn, 3, 0x10, 0, gid_of(IP_B), MAC_B);
    rb.rtr_rts_to(&qb, qa.qpn, 3, 0x10, 0, gid_of(IP_A), MAC_A);
    let local = ra.mr(READS * LEN, Access::ALL);
    let remote = rb.mr(READS * LEN, Access::ALL);
    let content: Vec<u8> = (0..READS * LEN)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0] ^ round as u8)
        .collect();
    rb.fill(&remote, 0, &content);
    let mut wqes = Vec::new();
    for i in 0..READS {
        let off = (i * LEN) as u64;
        wqes.push(ra.write_wqe(
            &mut qa,
            op::READ,
            SIGNALED,
            0,
            &segs(&[
                raddr(remote.addr + off, remote.key),
                data(local.addr + off, LEN as u32, local.key),
            ]),
        ));
    }
    let last = *wqes.last().expect("READs");
    ra.ring(&mut qa, last);
    let mut done = Vec::new();
    for _ in 0..READS {
        let c = wait(&mut ra, &mut rb, true, &mut ca);
        done.push((c.cqe_opcode(), c.wqe_counter(), c.byte_cnt() as usize));
    }
    let want: Vec<_> = wqes.iter().map(|&w| (Ok(CqeOpcode::Req), w, LEN)).collect();
    assert_eq!(done, want);
    assert!(ra.read(&local, 0, READS * LEN) == content, "the data read");
    let (a, b) = (ra.counters(), rb.counters());
    let drops = stats_a.socket_drops.load(Ordering::Relaxed);
    let received = stats_a.received.load(Ordering::Relaxed);
    println!(
        "threaded {threaded} round {round}: A received {received} datagrams, socket drops \
         {drops}, receive buffer {rcvbuf} B; A retransmits {}, timeouts {}; B duplicates {}",
        a.transport.retransmits, a.transport.timeouts, b.transport.duplicates
    );
    assert_eq!(stats_b.socket_drops.load(Ordering::Relaxed), 0);
    if rcvbuf < 2 * RCVBUF_BYTES as u64 {
        // Not privileged and net.core.rmem_max below what the link asks: the kernel may
        // drop; the READs still complete (above), by retries.
        println!(
            "note: receive buffer {rcvbuf} B (not the {RCVBUF_BYTES} B asked, x2): drops not asserted"
        );
        return true;
    }
    assert_eq!(drops, 0, "datagrams the kernel dropped on A's socket");
    assert_eq!(
        received,
        (READS * LEN / 1024) as u64,
        "exactly the responses"
    );
    assert_eq!(
        (
            a.transport.retransmits,
            a.transport.timeouts,
            b.transport.duplicates
        ),
        (0, 0, 0),
        "no retry: {a:?}"
    );
    assert_eq!(a.rx_dropped, 0, "{a:?}");
    assert_eq!(
        a.transport.icrc_ip_id_solved + b.transport.icrc_ip_id_solved,
        0,
        "emulated peers: every ICRC verified at IP ID 0"
    );
    println!(
        "B sent {} datagrams in {} send calls; A received them in {} receive calls",
        stats_b.sent.load(Ordering::Relaxed),
        stats_b.send_calls.load(Ordering::Relaxed),
        stats_a.recv_calls.load(Ordering::Relaxed)
    );
    true
}

/// Resident memory of this process, bytes (`/proc/self/statm`).
fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .expect("resident")
        .parse()
        .expect("pages");
    pages * 4096
}

/// An attacker on 127.0.0.3 floods B with 2 x 10^4 one-KiB datagrams whose ICRCs are bad
/// while A WRITEs to B over RC (threaded devices, as the tool runs them). B's receive ring
/// never holds more than its capacity, the flood is dropped and counted (bad ICRC, or a
/// full ring), memory stays bounded, and every WRITE completes with the right bytes.
#[test]
fn a_flood_of_bad_icrcs_is_dropped_and_counted_while_rc_flows() {
    use rnic_emulator::wire::{
        BthRepr, EthRepr, EthernetAddress, IpRepr, Ipv4Repr, Opcode, PacketRepr, UdpRepr,
    };
    const FLOOD: u64 = 20_000;
    const LEN: usize = 256 * 1024;
    let _one = ADDRS.lock().unwrap_or_else(|e| e.into_inner());
    // B's ring is 1024 frames, not RX_RING_FRAMES: a legitimate frame waits behind at most
    // a ring of junk, and a debug build on a loaded machine (~15 us a frame) must stay well
    // inside the 67 ms ACK timeout (a release build takes ~1 us a frame).
    const RING: usize = 1024;
    let (la, lb) = match (
        UdpLink::bind(Ipv4Addr::from(IP_A)),
        UdpLink::bind_with_ring(Ipv4Addr::from(IP_B), RING),
    ) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e @ LinkError::AddrInUse(_)), _) | (_, Err(e @ LinkError::AddrInUse(_))) => {
            println!("skipped: {e} (another RoCE v2 endpoint runs here)");
            return;
        }
        (Err(e), _) | (_, Err(e)) => panic!("bind: {e}"),
    };
    let attacker = match std::net::UdpSocket::bind("127.0.0.3:0") {
        Ok(s) => s,
        Err(e) => {
            println!("skipped: cannot bind 127.0.0.3: {e}");
            return;
        }
    };
    let stats_b = lb.stats();
    let (mut ra, mut rb) = (Rig::threaded(IP_A, MAC_A), Rig::threaded(IP_B, MAC_B));
    ra.h.dev.set_link(Box::new(la));
    rb.h.dev.set_link(Box::new(lb));
    let mut ca = ra.cq(6);
    let cb = rb.cq(6);
    let mut qa = ra.qp(QpSt::Rc, &ca, &ca, 6, 6);
    let qb = rb.qp(QpSt::Rc, &cb, &cb, 6, 6);
    ra.init_qp(&qa, true, true, true);
    rb.init_qp(&qb, true, true, true);
    ra.rtr_rts_to(&qa, qb.qpn, 3, 0x10, 0, gid_of(IP_B), MAC_B);
    rb.rtr_rts_to(&qb, qa.qpn, 3, 0x10, 0, gid_of(IP_A), MAC_A);
    let src = ra.mr(LEN, Access::ALL);
    let dst = rb.mr(LEN, Access::ALL);

    // RC WRITEs to B's QP from 127.0.0.3, 1 KiB each, one ICRC bit flipped: they pass
    // every structural check and cost B an ICRC check each.
    let repr = PacketRepr::new(
        EthRepr::new(EthernetAddress([2; 6]), EthernetAddress(MAC_B)),
        IpRepr::V4(Ipv4Repr::new(
            Ipv4Addr::new(127, 0, 0, 3),
            Ipv4Addr::from(IP_B),
        )),
        UdpRepr::new(0xC000),
        BthRepr::new(Opcode::RcRdmaWriteMiddle, qb.qpn, 0x10),
    );
    let mut frame = vec![0u8; repr.buffer_len(1024)];
    let n = repr.emit(&mut frame, &[0x5A; 1024]).expect("emit");
    frame.truncate(n);
    frame[n - 1] ^= 1;
    let dgram = frame[42..].to_vec();
    assert_eq!(dgram.len(), 12 + 1024 + 4);

    let rss_before = rss_bytes();
    let flood = std::thread::spawn(move || {
        let mut sent = 0u64;
        for i in 0..FLOOD {
            if attacker.send_to(&dgram, "127.0.0.2:4791").is_ok() {
                sent += 1;
            }
            if i % 2000 == 1999 {
                // Spread over a few tens of milliseconds so it overlaps the WRITEs.
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        sent
    });
    let mut rounds = 0u32;
    loop {
        let content: Vec<u8> = (0..LEN)
            .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[1] ^ rounds as u8)
            .collect();
        ra.fill(&src, 0, &content);
        let w = ra.post(
            &mut qa,
            op::WRITE,
            SIGNALED,
            0,
            &segs(&[
                raddr(dst.addr, dst.key),
                data(src.addr, LEN as u32, src.key),
            ]),
        );
        let c = wait(&mut ra, &mut rb, true, &mut ca);
        assert_eq!(
            (c.cqe_opcode(), c.wqe_counter()),
            (Ok(CqeOpcode::Req), w),
            "WRITE {rounds} under the flood: syndrome {:?}, A {:?}, B {:?}",
            c.error_syndrome(),
            ra.counters(),
            rb.counters()
        );
        assert!(
            rb.read(&dst, 0, LEN) == content,
            "the bytes of WRITE {rounds}"
        );
        rounds += 1;
        if flood.is_finished() || rounds == 200 {
            break;
        }
    }
    let sent = flood.join().expect("flood thread");
    // Let B take what is still queued.
    let deadline = Instant::now() + Duration::from_secs(10);
    let received = loop {
        let b = rb.counters();
        let seen = stats_b.received.load(Ordering::Relaxed);
        if b.frames_rx + b.drops.bad_icrc + b.drops.ring_full >= seen || Instant::now() >= deadline
        {
            break seen;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let rss_after = rss_bytes();
    let b = rb.counters();
    let high = stats_b.ring_high_water.load(Ordering::Relaxed);
    let buffers = stats_b.ring_buffers.load(Ordering::Relaxed);
    let socket_drops = stats_b.socket_drops.load(Ordering::Relaxed);
    println!(
        "{rounds} WRITEs of {LEN} B during a flood of {sent}: B bad_icrc {}, ring_full {}, \
         socket drops {socket_drops}, ring high water {high} of {RING}, buffers \
         {buffers}, RSS {} -> {} KiB; A retransmits {}",
        b.drops.bad_icrc,
        b.drops.ring_full,
        rss_before >> 10,
        rss_after >> 10,
        ra.counters().transport.retransmits
    );
    assert!(rounds >= 1);
    // Every datagram B's link took was handed to the transport or dropped and counted:
    // a bad ICRC, or a full ring (which may have hit some of A's frames too: A retried;
    // the frames after such a gap are then the transport's out-of-sequence drops). The
    // kernel's own drops, if any, never reached the link.
    assert_eq!(
        b.frames_rx + b.drops.bad_icrc + b.drops.ring_full,
        received,
        "{b:?}"
    );
    assert_eq!(b.rx_dropped, b.drops.total(), "{b:?}");
    assert!(b.drops.bad_icrc > 0 && b.drops.bad_icrc <= sent, "{b:?}");
    assert_eq!(
        b.transport.icrc_ip_id_solved, 0,
        "no ID solves a flipped ICRC bit"
    );
    assert!(
        high <= RING as u64 && buffers <= RING as u64,
        "{high} {buffers}"
    );
    assert!(
        rss_after < rss_before + (64 << 20),
        "RSS grew from {rss_before} to {rss_after}"
    );
}
