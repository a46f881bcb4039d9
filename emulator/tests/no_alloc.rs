//! The data path does not allocate: parsing, ICRC verification and emitting a frame run under
//! an allocator that counts this thread's allocations.

mod common;
#[path = "rig/mod.rs"]
mod rig;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use rnic_emulator::wire::{PacketRepr, RocePacket};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counter is a
// const-initialised thread-local `Cell`, which does not allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout (see `alloc`).
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

#[test]
fn parse_verify_emit_do_not_allocate() {
    let mut frames = common::read_frames("rdma_read_multi.pcap");
    frames.extend(common::read_frames("atomic_fadd.pcap"));
    frames.extend(common::read_frames("ud_send.pcap"));
    let mut out = vec![0u8; 2048];
    // The counter sees this thread's allocations.
    let probe = allocations();
    drop(std::hint::black_box(Box::new(1u64)));
    assert_eq!(allocations(), probe + 1);
    let before = allocations();
    for frame in &frames {
        let packet = RocePacket::new_checked(&frame[..]).expect("valid frame");
        packet.verify_icrc().expect("valid ICRC");
        let (repr, payload) = PacketRepr::parse(frame).expect("valid frame");
        let n = repr.emit(&mut out, payload).expect("fits");
        assert!(out[..n] == frame[..]);
    }
    assert_eq!(allocations() - before, 0, "the data path allocated");
}

/// Two devices over the in-process link: once warmed up, a 64 KiB RDMA WRITE at path MTU 256
/// (256 request packets, ACKs, link buffers, CQE), a 64 KiB READ and a three-SGE SEND
/// allocate nothing: frame buffers, WQE segment lists and payload scratch are all recycled.
#[test]
fn steady_state_transfers_do_not_allocate() {
    use rig::net::Net;
    use rig::{Access, SIGNALED, data, op, raddr, segs};
    use rnic_hw_regs::ctx::QpSt;

    let mut n = Net::new();
    let (mut qa, mut qb, mut ca, mut cb) = n.pair(QpSt::Rc, 1, 8, 8, 0);
    let src = n.a.mr(65536, Access::ALL);
    let dst = n.b.mr(65536, Access::ALL);
    let write = segs(&[raddr(dst.addr, dst.key), data(src.addr, 65536, src.key)]);
    let read = segs(&[raddr(dst.addr, dst.key), data(src.addr, 65536, src.key)]);
    let send = segs(&[
        data(src.addr, 100, src.key),
        data(src.addr + 1000, 2000, src.key),
        data(src.addr + 8000, 300, src.key),
    ]);
    n.a.h.dev.set_auto_step(false);
    n.b.h.dev.set_auto_step(false);
    let mut per_round = Vec::new();
    for round in 0..5 {
        n.b.post_recv(&mut qb, &[(dst.addr, 4096, dst.key)]);
        n.a.post(&mut qa, op::WRITE, SIGNALED, 0, &write);
        n.a.post(&mut qa, op::READ, SIGNALED, 0, &read);
        n.a.post(&mut qa, op::SEND, SIGNALED, 0, &send);
        let before = allocations();
        n.settle();
        per_round.push(allocations() - before);
        for _ in 0..3 {
            assert!(n.a.poll(&mut ca).is_some(), "round {round}");
        }
        assert_eq!(n.b.one(&mut cb).byte_cnt(), 2400, "round {round}");
    }
    // The first rounds fill the pools; after that nothing is allocated.
    println!("allocations per round (WRITE + READ + SEND): {per_round:?}");
    assert_eq!(
        per_round[3..],
        [0, 0],
        "allocations per round: {per_round:?}"
    );
}

/// A list of 32 small WRITEs posted with one doorbell, only the last signaled (what
/// `rnic write-bw -s 8 -l 32` posts), allocates nothing once warmed up: every WQE of the list
/// is outstanding at once, and each completed one lends its lists to the next parsed.
#[test]
fn a_posted_list_of_writes_does_not_allocate() {
    use rig::net::Net;
    use rig::{Access, SIGNALED, data, op, raddr, segs};
    use rnic_hw_regs::ctx::QpSt;

    const LIST: usize = 32;
    let mut n = Net::new();
    let (mut qa, _qb, mut ca, _cb) = n.pair(QpSt::Rc, 5, 6, 4, 0);
    let src = n.a.mr(4096, Access::ALL);
    let dst = n.b.mr(4096, Access::ALL);
    let write = segs(&[raddr(dst.addr, dst.key), data(src.addr, 8, src.key)]);
    n.a.h.dev.set_auto_step(false);
    n.b.h.dev.set_auto_step(false);
    let mut per_round = Vec::new();
    for round in 0..6 {
        let mut last = 0;
        for i in 0..LIST {
            let fm_ce_se = if i + 1 == LIST { SIGNALED } else { 0 };
            last = n.a.write_wqe(&mut qa, op::WRITE, fm_ce_se, 0, &write);
        }
        n.a.ring(&mut qa, last);
        let before = allocations();
        n.settle();
        per_round.push(allocations() - before);
        let c = n.a.poll(&mut ca).expect("the signaled WRITE's CQE");
        assert_eq!(c.wqe_counter(), last, "round {round}");
        assert!(
            n.a.poll(&mut ca).is_none(),
            "one CQE per list, round {round}"
        );
    }
    println!("allocations per round (a list of {LIST} WRITEs): {per_round:?}");
    assert_eq!(
        per_round[3..],
        [0, 0, 0],
        "allocations per round: {per_round:?}"
    );
}

/// Raw Ethernet once warmed up: an SQ object sending an ICMP frame to the device's own
/// address (so it loops back through the port), flow steering matching it, and the RQ
/// delivery with its CQE allocate nothing; frame buffers and segment lists are recycled.
#[test]
fn raw_send_steer_and_deliver_do_not_allocate() {
    use rig::Access;
    use rig::eth::{Eth, ME_MAC, eth_frame, ethertype_proto, ipv4, ring_sq, sq, write_send};
    use rnic_hw_regs::ctx::{WqState, destination_type};

    let mut e = Eth::new();
    let mut rq = e.rq(3);
    assert!(e.modify_rq(&rq, WqState::Rst, WqState::Rdy).is_ok());
    let (tirn, table, g) = e.steer_to(rq.rqn, 2, 1, &ethertype_proto(0xFFFF, 0xFF));
    let tir = Some((destination_type::TIR, tirn));
    assert!(
        e.fte(table, 0, g, &ethertype_proto(0x0800, 1), tir, 3)
            .is_ok()
    );
    assert!(e.root(table).is_ok());
    let mut s = sq(&mut e);
    let mr = e.r.mr(4096, Access::ALL);
    let frame = eth_frame(
        ME_MAC,
        0x0800,
        &ipv4(1, [10, 0, 0, 2], &[8, 0, 0, 0, 0, 1, 0, 1]),
    );
    e.r.h.dev.set_auto_step(false);
    let mut per_round = Vec::new();
    for round in 0..6 {
        e.post(&mut rq, 0, 256);
        let first = write_send(&mut e, &mut s, &frame, 18, &mr);
        let before = allocations();
        ring_sq(&mut e, first);
        per_round.push(allocations() - before);
        assert_eq!(
            e.r.one(&mut s.cq).wqe_counter(),
            s.pi.wrapping_sub(1),
            "round {round}"
        );
        assert_eq!(
            e.r.one(&mut rq.cq).byte_cnt() as usize,
            frame.len(),
            "round {round}"
        );
    }
    println!("allocations per round (raw send + steer + deliver): {per_round:?}");
    assert_eq!(
        per_round[3..],
        [0, 0, 0],
        "allocations per round: {per_round:?}"
    );
}

/// The UDP link's batches: once warmed up (the flow's socket bound, the buffer pool full),
/// queueing 100 frames (no copy, a buffer handed back for each), sending them in batches
/// (`sendmmsg`, the headers on the stack), a borrowed frame sent at once, and taking the
/// frames off the receiving link's ring allocate nothing on the device's side.
#[test]
fn udp_batches_do_not_allocate() {
    use rnic_emulator::link::udp::{RX_RING_FRAMES, UdpOffload};
    use rnic_emulator::link::{Link, LinkError, UdpLink};
    use rnic_emulator::wire::{
        BthRepr, EthRepr, EthernetAddress, IpRepr, Ipv4Repr, Opcode, UdpRepr,
    };
    use std::net::Ipv4Addr;
    use std::time::{Duration, Instant};

    let (ip_a, ip_b) = (Ipv4Addr::new(127, 0, 0, 61), Ipv4Addr::new(127, 0, 0, 62));
    let bind = |ip| UdpLink::bind_with(ip, RX_RING_FRAMES, UdpOffload::default());
    let (mut a, mut b) = match (bind(ip_a), bind(ip_b)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e @ LinkError::AddrInUse(_)), _) | (_, Err(e @ LinkError::AddrInUse(_))) => {
            println!("skipped: {e}");
            return;
        }
        (Err(e), _) | (_, Err(e)) => panic!("bind: {e}"),
    };
    let repr = PacketRepr::new(
        EthRepr::new(EthernetAddress([2; 6]), EthernetAddress([4; 6])),
        IpRepr::V4(Ipv4Repr::new(ip_a, ip_b)),
        UdpRepr::new(0xC300),
        BthRepr::new(Opcode::RcSendOnly, 0x11, 0),
    );
    let mut frame = vec![0u8; repr.buffer_len(1024)];
    let n = repr.emit(&mut frame, &[5; 1024]).expect("emit");
    frame.truncate(n);
    let (stats_b, mut rx) = (b.stats(), Vec::with_capacity(9000));
    let mut spares: Vec<Vec<u8>> = (0..128).map(|_| Vec::with_capacity(4096)).collect();
    let mut per_round = Vec::new();
    for round in 0..5u64 {
        let before = allocations();
        for _ in 0..100 {
            let mut f = spares.pop().expect("a buffer");
            f.clear();
            f.extend_from_slice(&frame);
            spares.push(a.transmit_owned(f));
        }
        a.flush();
        a.transmit(&frame);
        let mut got = 0;
        let deadline = Instant::now() + Duration::from_secs(10);
        while got < 101 {
            if b.receive(&mut rx) {
                got += 1;
            } else {
                assert!(Instant::now() < deadline, "round {round}: {stats_b:?}");
                std::thread::yield_now();
            }
        }
        per_round.push(allocations() - before);
    }
    println!("allocations per round (101 frames each way): {per_round:?}");
    assert_eq!(
        per_round[2..],
        [0, 0, 0],
        "allocations per round: {per_round:?}"
    );
}
