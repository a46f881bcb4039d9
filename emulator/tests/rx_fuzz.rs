//! Hostile frames into the receive path: random bytes, and valid frames for a live RC QP
//! with random header and payload changes (re-signed with a correct ICRC so they get past
//! the checksum). The device never panics; every frame is either handed to the transport or
//! dropped and counted under exactly one rule.

mod common;
#[path = "rig/mod.rs"]
mod rig;

use proptest::prelude::*;
use rig::{Access, Rig, gid_of};
use rnic_emulator::link::{InProcLink, Link};
use rnic_emulator::wire::{
    AethRepr, AtomicEthRepr, BthRepr, EthRepr, EthernetAddress, IpRepr, Ipv4Repr, Opcode,
    PacketRepr, RethRepr, Syndrome, UdpRepr, icrc,
};
use rnic_hw_regs::ctx::QpSt;

const ME: [u8; 4] = [10, 0, 0, 2];
const PEER: [u8; 4] = [10, 0, 0, 1];

/// A device with a connected RC QP (peer 10.0.0.1, QPN 0x77) and a receive posted, and the
/// test's end of its wire.
fn target() -> (Rig, InProcLink, u32, u32, u64) {
    let mut r = Rig::with_addr(ME, [2, 0, 0, 0, 0, 2]);
    let (wire, end) = InProcLink::pair();
    r.h.dev.set_link(Box::new(end));
    let cq = r.cq(8);
    let mut qp = r.qp(QpSt::Rc, &cq, &cq, 6, 6);
    r.init_qp(&qp, true, true, true);
    r.rtr_rts_to(&qp, 0x77, 1, 100, 7, gid_of(PEER), [2, 0, 0, 0, 0, 1]);
    let mr = r.mr(4096, Access::ALL);
    for _ in 0..8 {
        r.post_recv(&mut qp, &[(mr.addr, 4096, mr.key)]);
    }
    (r, wire, qp.qpn, mr.key, mr.addr)
}

/// A valid frame of `kind` from the peer to `qpn`.
fn template(kind: u8, qpn: u32, psn: u32, rkey: u32, va: u64) -> Vec<u8> {
    let opcode = match kind % 6 {
        0 => Opcode::RcSendOnly,
        1 => Opcode::RcRdmaWriteOnly,
        2 => Opcode::RcRdmaReadRequest,
        3 => Opcode::RcFetchAdd,
        4 => Opcode::RcAcknowledge,
        _ => Opcode::RcRdmaReadResponseOnly,
    };
    let mut repr = PacketRepr::new(
        EthRepr::new(
            EthernetAddress([2, 0, 0, 0, 0, 2]),
            EthernetAddress([2, 0, 0, 0, 0, 1]),
        ),
        IpRepr::V4(Ipv4Repr::new(PEER.into(), ME.into())),
        UdpRepr::new(0xC077),
        BthRepr::new(opcode, qpn, psn),
    );
    let mut payload = vec![0x5A; 64];
    if opcode.has_reth() {
        repr.ext.reth = Some(RethRepr {
            virtual_addr: va,
            rkey,
            dma_len: 64,
        });
        if opcode == Opcode::RcRdmaReadRequest {
            payload.clear();
        }
    }
    if opcode.has_atomic_eth() {
        repr.ext.atomic_eth = Some(AtomicEthRepr {
            virtual_addr: va,
            rkey,
            swap_add: 1,
            compare: 0,
        });
        payload.clear();
    }
    if opcode.has_aeth() {
        repr.ext.aeth = Some(AethRepr {
            syndrome: Syndrome::ACK_NO_CREDITS,
            msn: 1,
        });
        if opcode == Opcode::RcAcknowledge {
            payload.clear();
        }
    }
    repr.bth.ack_req = true;
    let mut b = vec![0u8; repr.buffer_len(payload.len())];
    let n = repr.emit(&mut b, &payload).expect("emit");
    b.truncate(n);
    b
}

/// Re-signs an IPv4 frame's ICRC after a change (where the lengths still make sense).
fn resign(f: &mut [u8]) {
    if f.len() < 14 + 20 + 8 + 12 + 4 {
        return;
    }
    let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
    let end = (14 + total).min(f.len());
    if end < 14 + 20 + 8 + 12 + 4 {
        return;
    }
    if let Ok(c) = icrc::compute(&f[14..end - 4]) {
        f[end - 4..end].copy_from_slice(&c.to_le_bytes());
    }
}

fn feed(r: &Rig, wire: &mut InProcLink, frames: &[Vec<u8>]) {
    let before = r.counters();
    for f in frames {
        wire.transmit(f);
    }
    rig::settle_and_account(r, wire, &before, frames.len() as u64);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_are_dropped_and_counted(frames in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 1..32)) {
        let (r, mut wire, ..) = target();
        feed(&r, &mut wire, &frames);
        let c = r.counters();
        prop_assert_eq!(c.rx_dropped, frames.len() as u64);
        prop_assert_eq!(c.frames_rx, 0);
    }

    #[test]
    fn mutated_valid_frames_never_panic(
        muts in prop::collection::vec((any::<u8>(), 0u32..8, prop::collection::vec((0usize..140, any::<u8>()), 0..4), any::<bool>(), 0usize..8), 1..32)
    ) {
        let (r, mut wire, qpn, rkey, va) = target();
        let frames: Vec<Vec<u8>> = muts
            .iter()
            .map(|(kind, dpsn, edits, sign, cut)| {
                let mut f = template(*kind, qpn, 100 + dpsn, rkey, va);
                for &(at, v) in edits {
                    let i = at % f.len();
                    f[i] = v;
                }
                if *sign {
                    resign(&mut f);
                }
                let keep = f.len().saturating_sub(*cut * 4);
                f.truncate(keep);
                f
            })
            .collect();
        feed(&r, &mut wire, &frames);
    }
}

#[test]
fn each_receive_rule_has_its_counter() {
    let (r, mut wire, qpn, rkey, va) = target();
    let good = template(0, qpn, 100, rkey, va);
    let mut bad_icrc = good.clone();
    let last = bad_icrc.len() - 1;
    bad_icrc[last] ^= 1;
    let mut wrong_ip = template(0, qpn, 100, rkey, va);
    wrong_ip[14 + 19] = 9; // destination 10.0.0.9
    let mut peer = template(0, qpn, 100, rkey, va);
    peer[14 + 15] = 7; // source 10.0.0.7
    let mut pkey = template(0, qpn, 100, rkey, va);
    pkey[14 + 20 + 8 + 2] = 0x00; // P_Key 0x00FF
    for f in [&mut wrong_ip, &mut peer, &mut pkey] {
        f[14 + 10] = 0;
        f[14 + 11] = 0;
        let sum = {
            let ip = &f[14..34];
            let mut s = 0u32;
            for (i, w) in ip.chunks(2).enumerate() {
                if i != 5 {
                    s += u32::from(u16::from_be_bytes([w[0], w[1]]));
                }
            }
            while s > 0xFFFF {
                s = (s & 0xFFFF) + (s >> 16);
            }
            !(s as u16)
        };
        f[24..26].copy_from_slice(&sum.to_be_bytes());
        resign(f);
    }
    let unknown = template(0, 0x999, 100, rkey, va);
    let zero = template(0, 0, 100, rkey, va);
    let ahead = template(0, qpn, 150, rkey, va);
    let stale_ack = template(4, qpn, 5, rkey, va);
    feed(
        &r,
        &mut wire,
        &[
            vec![1, 2, 3],
            bad_icrc,
            wrong_ip,
            peer,
            pkey,
            unknown,
            zero,
            good.clone(),
            ahead.clone(),
            ahead,
            stale_ack,
        ],
    );
    let d = r.counters().drops;
    println!("{d:?}");
    assert_eq!(d.malformed, 1);
    assert_eq!(d.bad_icrc, 1);
    assert_eq!(d.not_our_ip, 1);
    assert_eq!(d.peer_mismatch, 1);
    assert_eq!(d.pkey, 1);
    assert_eq!(d.unknown_qp, 1);
    assert_eq!(d.dest_qp_zero, 1);
    assert_eq!(
        d.out_of_sequence, 2,
        "one NAK, then dropped until the expected PSN"
    );
    assert_eq!(d.stale_response, 1);
    assert_eq!(r.counters().rx_dropped, 10);
}

/// A request from the peer with `opcode` at `psn`, RETH / AtomicETH from the arguments.
fn request(
    opcode: Opcode,
    qpn: u32,
    psn: u32,
    reth: Option<RethRepr>,
    atomic: Option<AtomicEthRepr>,
) -> Vec<u8> {
    let mut repr = PacketRepr::new(
        EthRepr::new(
            EthernetAddress([2, 0, 0, 0, 0, 2]),
            EthernetAddress([2, 0, 0, 0, 0, 1]),
        ),
        IpRepr::V4(Ipv4Repr::new(PEER.into(), ME.into())),
        UdpRepr::new(0xC077),
        BthRepr::new(opcode, qpn, psn),
    );
    repr.bth.ack_req = true;
    repr.ext.reth = reth;
    repr.ext.atomic_eth = atomic;
    let mut b = vec![0u8; repr.buffer_len(0)];
    let n = repr.emit(&mut b, &[]).expect("emit");
    b.truncate(n);
    b
}

/// What the responder sent back: (opcode, PSN, payload length, atomic original value).
fn answers(wire: &mut InProcLink) -> Vec<(Opcode, u32, usize, Option<u64>)> {
    let mut out = Vec::new();
    let mut v = Vec::new();
    while wire.receive(&mut out) {
        let (p, payload) = PacketRepr::parse(&out).expect("valid");
        v.push((
            p.bth.opcode,
            p.bth.psn,
            payload.len(),
            p.ext.atomic_ack_eth.map(|a| a.orig_data),
        ));
    }
    v
}

/// Duplicates at the responder, as rxe sends them: a duplicate atomic gets the saved original
/// value without executing twice; a duplicate READ is read again from its PSN (also for the
/// remaining part only); a duplicate READ outside the saved resources is dropped.
#[test]
fn duplicate_atomics_replay_and_duplicate_reads_reread() {
    let (r, mut wire, qpn, rkey, va) = target();
    let fa = |psn| {
        request(
            Opcode::RcFetchAdd,
            qpn,
            psn,
            None,
            Some(AtomicEthRepr {
                virtual_addr: va + 1024,
                rkey,
                swap_add: 5,
                compare: 0,
            }),
        )
    };
    // FETCH_ADD at 100, then its duplicate.
    wire.transmit(&fa(100));
    wire.transmit(&fa(100));
    while r.h.dev.step() != 0 {}
    let a = answers(&mut wire);
    assert_eq!(a.len(), 2);
    assert_eq!(
        (a[0].0, a[0].1, a[0].3),
        (Opcode::RcAtomicAcknowledge, 100, Some(0))
    );
    assert_eq!(a[1], a[0], "the replay carries the saved original value");
    // (Executed once: the target is read back below.)
    // READ of 600 bytes at 101 (3 responses at MTU 256: 101, 102, 103).
    let read = |psn, off: u64, len: u32| {
        request(
            Opcode::RcRdmaReadRequest,
            qpn,
            psn,
            Some(RethRepr {
                virtual_addr: va + off,
                rkey,
                dma_len: len,
            }),
            None,
        )
    };
    wire.transmit(&read(101, 0, 600));
    while r.h.dev.step() != 0 {}
    let a = answers(&mut wire);
    let ops: Vec<(Opcode, u32, usize)> = a.iter().map(|x| (x.0, x.1, x.2)).collect();
    assert_eq!(
        ops,
        [
            (Opcode::RcRdmaReadResponseFirst, 101, 256),
            (Opcode::RcRdmaReadResponseMiddle, 102, 256),
            (Opcode::RcRdmaReadResponseLast, 103, 88),
        ]
    );
    // The requester lost 102 and 103: it asks again for the remaining 344 bytes at 102.
    wire.transmit(&read(102, 256, 344));
    // And repeats the whole READ.
    wire.transmit(&read(101, 0, 600));
    while r.h.dev.step() != 0 {}
    let ops: Vec<(Opcode, u32, usize)> =
        answers(&mut wire).iter().map(|x| (x.0, x.1, x.2)).collect();
    assert_eq!(
        ops,
        [
            (Opcode::RcRdmaReadResponseFirst, 102, 256),
            (Opcode::RcRdmaReadResponseLast, 103, 88),
            (Opcode::RcRdmaReadResponseFirst, 101, 256),
            (Opcode::RcRdmaReadResponseMiddle, 102, 256),
            (Opcode::RcRdmaReadResponseLast, 103, 88),
        ]
    );
    // A duplicate READ that is not a subset of the saved one is dropped.
    wire.transmit(&read(102, 0, 4000));
    // The atomic's target holds 5: read it.
    wire.transmit(&read(104, 1024, 8));
    while r.h.dev.step() != 0 {}
    let mut out = Vec::new();
    assert!(wire.receive(&mut out));
    let (p, payload) = PacketRepr::parse(&out).expect("valid");
    assert_eq!(
        (p.bth.opcode, p.bth.psn),
        (Opcode::RcRdmaReadResponseOnly, 104)
    );
    assert_eq!(payload, 5u64.to_be_bytes(), "executed once");
    let c = r.counters();
    assert_eq!(c.drops.stale_duplicate, 1);
    assert_eq!(c.transport.duplicates, 3);
}
