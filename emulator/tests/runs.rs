//! Runs of packets in one buffer on an in-process link nothing observes
//! ([`rnic_emulator::wire::GsoRun`]): the same results as the packets one by one, the same
//! bytes for whoever takes frames as frames, and hostile runs dropped and counted.

mod common;
#[path = "rig/mod.rs"]
mod rig;

use proptest::prelude::*;
use rig::net::{IP_A, IP_B, MAC_A, MAC_B, Net, NoRuns};
use rig::{Access, Rig, SIGNALED, data_for, gid_of, op, raddr, segs};
use rnic_emulator::link::{FrameForm, InProcLink, Link};
use rnic_emulator::wire::{
    BthRepr, EthRepr, EthernetAddress, GsoRun, IpRepr, Ipv4Repr, Opcode, PacketRepr, RethRepr,
    RocePacket, UdpRepr,
};
use rnic_hw_regs::ctx::QpSt;

const MTU_CODE: u8 = 3;
const MTU: usize = 1024;
/// Around the MTU (a LAST of 1, 3 and 4 bytes: a run of two needs 4), a run's limit and
/// beyond, a message of many runs.
const SIZES: [usize; 11] = [
    1,
    MTU,
    MTU + 1,
    MTU + 3,
    MTU + 4,
    2 * MTU,
    3 * MTU + 17,
    64 * MTU,
    64 * MTU + 1,
    100_000,
    1 << 20,
];

/// The solicited event flag of a send WQE's control segment (`fm_ce_se` bit 1).
const SOLICITED: u8 = 0x02;

/// What an exchange leaves behind: every completion (opcode, byte count, WQE counter,
/// immediate, solicited event) on both sides, the receiver's memory after each message, and
/// both devices' counters.
#[derive(Debug, PartialEq)]
struct Outcome {
    cqes: Vec<(u8, u32, u16, u32, bool)>,
    memory: Vec<Vec<u8>>,
    counters: (String, String),
}

/// Every SEND and WRITE flavour the transport `st` has, at each of [`SIZES`], from A to B,
/// every other message with the solicited event flag.
fn exchange(mut n: Net, st: QpSt) -> Outcome {
    let (mut qa, mut qb, mut ca, mut cb) = n.pair(st, MTU_CODE, 8, 8, 7);
    let cap = (1 << 20) + 4096;
    let src = n.a.mr(cap, Access::ALL);
    let dst = n.b.mr(cap, Access::ALL);
    let mut out = Outcome {
        cqes: Vec::new(),
        memory: Vec::new(),
        counters: (String::new(), String::new()),
    };
    let ops: &[u8] = if st == QpSt::Rc {
        &[
            op::SEND,
            op::SEND_IMM,
            op::SEND_INVAL,
            op::WRITE,
            op::WRITE_IMM,
        ]
    } else {
        &[op::SEND, op::SEND_IMM, op::WRITE, op::WRITE_IMM]
    };
    for (k, &len) in SIZES.iter().enumerate() {
        let msg: Vec<u8> = (0..len).map(|i| (i * 7 + k) as u8).collect();
        n.a.fill(&src, 0, &msg);
        for &opcode in ops {
            n.b.fill(&dst, 0, &vec![0xEE; len + 1]);
            let sg = data_for(src.addr, len, src.key);
            let (imm, wqe) = match opcode {
                op::SEND | op::SEND_IMM | op::SEND_INVAL => {
                    n.b.post_recv(&mut qb, &[(dst.addr, cap as u32, dst.key)]);
                    let imm = if opcode == op::SEND_INVAL {
                        n.b.mr(64, Access::ALL).key
                    } else {
                        0xA000_0000 | len as u32
                    };
                    (imm, sg)
                }
                _ => {
                    if opcode == op::WRITE_IMM {
                        n.b.post_recv(&mut qb, &[]);
                    }
                    (0x1234, segs(&[raddr(dst.addr, dst.key), sg]))
                }
            };
            let se = if out.memory.len() % 2 == 0 {
                SOLICITED
            } else {
                0
            };
            n.a.post(&mut qa, opcode, SIGNALED | se, imm, &wqe);
            n.settle();
            for (rig, cq) in [(&mut n.a, &mut ca), (&mut n.b, &mut cb)] {
                while let Some(c) = rig.poll(cq) {
                    out.cqes.push((
                        c.opcode(),
                        c.byte_cnt(),
                        c.wqe_counter(),
                        c.imm_inval_pkey(),
                        c.se(),
                    ));
                }
            }
            out.memory.push(n.b.read(&dst, 0, len + 1));
        }
    }
    out.counters = (
        format!("{:?}", n.a.counters()),
        format!("{:?}", n.b.counters()),
    );
    out
}

/// A wire that carries runs and one that carries every packet alone leave the same memory,
/// the same completions and the same counters (frames counted per packet either way).
#[test]
fn runs_and_single_packets_give_the_same_results() {
    for st in [QpSt::Rc, QpSt::Uc] {
        let with = exchange(Net::new(), st);
        let without = exchange(Net::without_runs(), st);
        assert!(
            with.cqes.len() >= 2 * SIZES.len(),
            "{st:?}: {}",
            with.cqes.len()
        );
        assert_eq!(with.cqes, without.cqes, "{st:?}: completions");
        assert_eq!(with.memory, without.memory, "{st:?}: memory");
        assert_eq!(with.counters, without.counters, "{st:?}: counters");
    }
}

/// A device whose RC QP sends to QPN 0x77 at B, and the test's end of its wire.
fn sender(link: impl FnOnce(InProcLink) -> Box<dyn Link>) -> (Rig, InProcLink, rig::Qp, rig::Mr) {
    let mut r = Rig::with_addr(IP_A, MAC_A);
    let (mine, theirs) = InProcLink::pair();
    r.h.dev.set_link(link(mine));
    let cq = r.cq(8);
    let qp = r.qp(QpSt::Rc, &cq, &cq, 8, 4);
    r.init_qp(&qp, true, true, true);
    r.rtr_rts_to(&qp, 0x77, MTU_CODE, 0xFF_FFF0, 7, gid_of(IP_B), MAC_B);
    let mr = r.mr(1 << 20, Access::ALL);
    let pattern: Vec<u8> = (0..1 << 20).map(|i: usize| (i * 13) as u8).collect();
    r.fill(&mr, 0, &pattern);
    (r, theirs, qp, mr)
}

/// What A sends for a WRITE and a SEND of `len` bytes, as the far end takes frames (cut
/// into packets, sealed), and the forms in which they reached it.
fn sent(len: usize, runs: bool) -> (Vec<Vec<u8>>, Vec<FrameForm>) {
    let link = |l: InProcLink| -> Box<dyn Link> {
        if runs {
            Box::new(l)
        } else {
            Box::new(NoRuns(l))
        }
    };
    let mut frames = Vec::new();
    let mut forms = Vec::new();
    for take_forms in [false, true] {
        let (mut r, mut far, mut qp, mr) = sender(link);
        let wqe = segs(&[raddr(0x10_0000, 0x99), data_for(mr.addr, len, mr.key)]);
        r.post(&mut qp, op::WRITE, SIGNALED, 0, &wqe);
        r.post(
            &mut qp,
            op::SEND,
            SIGNALED,
            0,
            &data_for(mr.addr, len, mr.key),
        );
        let mut buf = Vec::new();
        if take_forms {
            while let Some(form) = far.receive_form(&mut buf) {
                forms.push(form);
            }
        } else {
            while far.receive(&mut buf) {
                frames.push(buf.clone());
            }
        }
    }
    (frames, forms)
}

/// Whoever takes frames as frames gets the packets the device sends without runs, byte for
/// byte (sealed); the far end saw runs, and one frame for each packet of them.
#[test]
fn a_run_taken_as_frames_is_the_packets_sent_alone() {
    for len in [MTU + 4, 3 * MTU + 17, 64 * MTU, 100_000] {
        let (cut, forms) = sent(len, true);
        let (alone, alone_forms) = sent(len, false);
        assert_eq!(cut.len(), alone.len(), "{len}: packets");
        for (i, (c, a)) in cut.iter().zip(&alone).enumerate() {
            assert_eq!(c, a, "{len}: packet {i}");
            RocePacket::new_checked(&c[..])
                .and_then(|p| p.verify_icrc())
                .unwrap_or_else(|e| panic!("{len}: packet {i}: {e}"));
        }
        let runs: Vec<GsoRun> = forms
            .iter()
            .filter_map(|f| match f {
                FrameForm::Run(r) => Some(*r),
                _ => None,
            })
            .collect();
        assert!(!runs.is_empty(), "{len}: no run was sent");
        let packets: usize = forms
            .iter()
            .map(|f| match f {
                FrameForm::Run(r) => usize::from(r.count),
                _ => 1,
            })
            .sum();
        assert_eq!(packets, alone.len(), "{len}: the runs' packets");
        assert!(
            alone_forms.iter().all(|f| !matches!(f, FrameForm::Run(_))),
            "{len}: a wire without runs carried one"
        );
    }
}

/// A device with a connected RC QP at path MTU 256 (peer 10.0.0.1 QPN 0x77, expected PSN
/// 100) and a receive posted, and the test's end of its wire.
fn target() -> (Rig, InProcLink, u32, u32, u64) {
    let mut r = Rig::with_addr(IP_B, MAC_B);
    let (wire, end) = InProcLink::pair();
    r.h.dev.set_link(Box::new(end));
    let cq = r.cq(8);
    let mut qp = r.qp(QpSt::Rc, &cq, &cq, 6, 6);
    r.init_qp(&qp, true, true, true);
    r.rtr_rts_to(&qp, 0x77, 1, 100, 7, gid_of(IP_A), MAC_A);
    let mr = r.mr(1 << 16, Access::ALL);
    for _ in 0..8 {
        r.post_recv(&mut qp, &[(mr.addr, 1 << 16, mr.key)]);
    }
    (r, wire, qp.qpn, mr.key, mr.addr)
}

/// A run from the peer to `qpn`: its buffer (first packet's headers, then `payload` bytes)
/// and its description, for `count` packets of 256 bytes starting with `first`.
fn run_frame(
    first: Opcode,
    qpn: u32,
    psn: u32,
    rkey: u32,
    va: u64,
    count: u16,
    payload: usize,
) -> (Vec<u8>, GsoRun) {
    let mut repr = PacketRepr::new(
        EthRepr::new(EthernetAddress(MAC_B), EthernetAddress(MAC_A)),
        IpRepr::V4(Ipv4Repr::new(IP_A.into(), IP_B.into())),
        UdpRepr::new(0xC077),
        BthRepr::new(first, qpn, psn),
    );
    if first.has_reth() {
        repr.ext.reth = Some(RethRepr {
            virtual_addr: va,
            rkey,
            dma_len: payload as u32,
        });
    }
    let mut b = vec![0u8; repr.buffer_len(256)];
    repr.emit(&mut b, &[0x5A; 256]).expect("emit");
    b.truncate(repr.header_len());
    b.resize(repr.header_len() + payload, 0x5A);
    let last = if first.has_reth() {
        Opcode::RcRdmaWriteLast
    } else {
        Opcode::RcSendLast
    };
    (
        b,
        GsoRun {
            count,
            mss: 256,
            last_opcode: last,
            last_ack_req: true,
            last_solicited: false,
        },
    )
}

/// Sends `runs` to the device and checks the accounting: every drop under one rule, and
/// every packet of every run (a run that describes none: itself) received or dropped.
fn feed(r: &Rig, wire: &mut InProcLink, runs: Vec<(Vec<u8>, GsoRun)>) {
    let before = r.counters();
    let packets: u64 = runs
        .iter()
        .map(|(_, run)| u64::from(run.count.max(1)))
        .sum();
    for (b, run) in runs {
        wire.transmit_run(b, run);
    }
    rig::settle_and_account(r, wire, &before, packets);
}

/// Good runs: a WRITE of three packets and a SEND of two are received as five packets.
#[test]
fn a_good_run_is_received_as_its_packets() {
    let (r, mut wire, qpn, rkey, va) = target();
    let write = run_frame(Opcode::RcRdmaWriteFirst, qpn, 100, rkey, va, 3, 700);
    let send = run_frame(Opcode::RcSendFirst, qpn, 103, rkey, va, 2, 300);
    feed(&r, &mut wire, vec![write, send]);
    let c = r.counters();
    assert_eq!((c.frames_rx, c.rx_dropped), (5, 0), "{c:?}");
    assert_eq!(c.transport.acks_tx, 1, "one coalesced ACK for the burst");
}

/// A run whose description no sender makes is dropped whole, each packet counted as
/// malformed; one for a QP that does not exist, each packet as unknown_qp; one with a PSN
/// ahead, one NAK and each packet as out of sequence.
#[test]
fn bad_runs_are_dropped_per_packet_under_their_rules() {
    let (r, mut wire, qpn, rkey, va) = target();
    let (b, mut run) = run_frame(Opcode::RcRdmaWriteFirst, qpn, 100, rkey, va, 3, 700);
    run.mss = 300;
    let unknown = run_frame(Opcode::RcSendFirst, 0x999, 100, rkey, va, 2, 300);
    let ahead = run_frame(Opcode::RcSendFirst, qpn, 150, rkey, va, 4, 1000);
    feed(&r, &mut wire, vec![(b, run), unknown, ahead]);
    let d = r.counters().drops;
    assert_eq!(
        (d.malformed, d.unknown_qp, d.out_of_sequence),
        (3, 2, 4),
        "{d:?}"
    );
    assert_eq!(r.counters().transport.naks_tx, 1);
}

fn any_opcode() -> impl Strategy<Value = Opcode> {
    (0u8..=255).prop_filter_map("an opcode", Opcode::from_u8)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random bytes with a random description: never a panic, always dropped and counted.
    #[test]
    fn random_runs_are_dropped_and_counted(
        runs in prop::collection::vec(
            (prop::collection::vec(any::<u8>(), 0..600), any::<u16>(), any::<u16>(), any_opcode(), any::<bool>(), any::<bool>()),
            1..16,
        )
    ) {
        let (r, mut wire, ..) = target();
        let runs: Vec<_> = runs
            .into_iter()
            .map(|(b, count, mss, last, ack, se)| {
                (b, GsoRun { count, mss, last_opcode: last, last_ack_req: ack, last_solicited: se })
            })
            .collect();
        feed(&r, &mut wire, runs);
        prop_assert_eq!(r.counters().frames_rx, 0);
    }

    /// Valid runs with their description or bytes changed at random: never a panic, every
    /// packet received or dropped under one rule.
    #[test]
    fn mutated_runs_never_panic(
        muts in prop::collection::vec(
            (any::<bool>(), 0u32..8, 2u16..6, prop::collection::vec((0usize..200, any::<u8>()), 0..4),
             any::<u16>(), any_opcode(), 0usize..1400),
            1..16,
        )
    ) {
        let (r, mut wire, qpn, rkey, va) = target();
        let runs: Vec<_> = muts
            .into_iter()
            .map(|(write, dpsn, count, edits, mss, last, len)| {
                let first = if write { Opcode::RcRdmaWriteFirst } else { Opcode::RcSendFirst };
                let (mut b, mut run) = run_frame(first, qpn, 100 + dpsn, rkey, va, count, len.max(257));
                for (at, v) in edits {
                    let i = at % b.len();
                    b[i] = v;
                }
                if mss % 3 == 0 {
                    run.mss = mss;
                }
                if mss % 5 == 0 {
                    run.last_opcode = last;
                }
                (b, run)
            })
            .collect();
        feed(&r, &mut wire, runs);
    }
}
