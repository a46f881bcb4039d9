//! The READ requester against a test-side responder that answers as Linux rxe does: a READ
//! whose responses were partly lost is reissued for the remaining bytes (a new READ request
//! at the first missing PSN), and rxe, finding the original request in its resources, replays
//! it from that PSN continuing the original opcode sequence: READ_RESPONSE_MIDDLE ..
//! READ_RESPONSE_LAST, never FIRST (rxe_resp.c: a duplicate READ not at the resource's first
//! PSN is replayed in state "replay"). A responder that executes the retry as a new READ
//! (FIRST .. LAST, or ONLY) must be accepted too. Both must complete the READ with the right
//! data, without running the retry count out (the interop failure `read-bw-rnic-client`:
//! RetryExcErr after rxe answered each retry with MIDDLE .. LAST).

mod common;
#[path = "rig/mod.rs"]
mod rig;

use std::collections::{HashSet, VecDeque};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rig::{Access, Rig, SIGNALED, data, gid_of, op, raddr, segs};
use rnic_emulator::port::Link;
use rnic_emulator::wire::{
    AethRepr, BthRepr, EthRepr, EthernetAddress, IpRepr, Ipv4Repr, Opcode, PacketRepr, Position,
    Syndrome, UdpRepr,
};
use rnic_hw_regs::cqe::CqeOpcode;
use rnic_hw_regs::ctx::QpSt;

const IP_DEV: [u8; 4] = [10, 0, 0, 1];
const MAC_DEV: [u8; 6] = [2, 0, 0, 0, 0, 0xA];
const IP_PEER: [u8; 4] = [10, 0, 0, 2];
const MAC_PEER: [u8; 6] = [2, 0, 0, 0, 0, 0xB];
/// The peer's QPN and the address and key of its memory.
const PEER_QPN: u32 = 0x77;
const PEER_VA: u64 = 0x7f00_0000_0000;
const PEER_RKEY: u32 = 0x1234;
const MTU: usize = 1024;
/// The device's path MTU code for 1024 bytes.
const MTU_CODE: u8 = 3;

/// How the peer answers a READ request that repeats part of one it already executed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Replay {
    /// As rxe: from the request's PSN, continuing the original sequence (MIDDLE / LAST
    /// unless the request is at the original's first PSN).
    Continue,
    /// As a new READ: FIRST .. LAST, or ONLY.
    Restart,
}

/// A READ the peer executed (rxe's `resp_res`).
#[derive(Clone, Copy, Debug)]
struct Res {
    first_psn: u32,
    npkts: u32,
}

/// The peer's state, shared with the test.
#[derive(Debug)]
struct PeerState {
    replay: Replay,
    /// The device's QPN (responses go there).
    dev_qpn: u32,
    /// The peer's memory at `PEER_VA`.
    mem: Vec<u8>,
    /// Response PSNs lost the first time they are sent (a retry gets through).
    lose: HashSet<u32>,
    /// READ requests seen: (PSN, length, duplicate).
    requests: Vec<(u32, u32, bool)>,
    /// Responses sent (and not lost), in order: (index of the request, opcode, PSN).
    sent: Vec<(usize, Opcode, u32)>,
    res: Vec<Res>,
    to_dev: VecDeque<Vec<u8>>,
    msn: u32,
}

/// The peer's end of the wire: frames the device transmits are answered at once.
#[derive(Debug)]
struct Peer(Arc<Mutex<PeerState>>);

impl PeerState {
    /// What the peer saw and sent (for failure messages).
    fn summary(&self) -> String {
        format!(
            "requests (psn, len, dup) {:x?}; responses (request, opcode, psn) {:x?}",
            self.requests, self.sent
        )
    }

    fn respond(&mut self, frame: &[u8]) {
        let (req, _) = PacketRepr::parse(frame).expect("the device's frames verify");
        assert_eq!(req.bth.opcode, Opcode::RcRdmaReadRequest, "only READs here");
        assert_eq!(req.bth.dest_qp, PEER_QPN);
        let reth = req.ext.reth.expect("a RETH");
        assert_eq!(reth.rkey, PEER_RKEY);
        let psn = req.bth.psn;
        let len = reth.dma_len;
        let n = (len as usize).div_ceil(MTU).max(1) as u32;
        let dup = self
            .res
            .iter()
            .find(|r| psn.wrapping_sub(r.first_psn) & 0xFF_FFFF < r.npkts)
            .copied();
        self.requests.push((psn, len, dup.is_some()));
        // A replay not at the original's first PSN continues the original sequence.
        let continues = self.replay == Replay::Continue && dup.is_some_and(|r| r.first_psn != psn);
        if dup.is_none() {
            self.msn = self.msn.wrapping_add(1);
            self.res.push(Res {
                first_psn: psn,
                npkts: n,
            });
        }
        let off0 = (reth.virtual_addr - PEER_VA) as usize;
        for k in 0..n {
            let last = k + 1 == n;
            let opcode = match (k == 0 && !continues, last) {
                (true, true) => Opcode::RcRdmaReadResponseOnly,
                (true, false) => Opcode::RcRdmaReadResponseFirst,
                (false, false) => Opcode::RcRdmaReadResponseMiddle,
                (false, true) => Opcode::RcRdmaReadResponseLast,
            };
            let rpsn = psn.wrapping_add(k) & 0xFF_FFFF;
            if self.lose.remove(&rpsn) {
                continue;
            }
            let a = off0 + k as usize * MTU;
            let b = (off0 + len as usize).min(a + MTU);
            let payload = self.mem[a..b].to_vec();
            let mut r = PacketRepr::new(
                EthRepr::new(EthernetAddress(MAC_DEV), EthernetAddress(MAC_PEER)),
                IpRepr::V4(Ipv4Repr::new(
                    Ipv4Addr::from(IP_PEER),
                    Ipv4Addr::from(IP_DEV),
                )),
                UdpRepr::new(0xC077),
                BthRepr::new(opcode, self.dev_qpn, rpsn),
            );
            if opcode.position() != Position::Middle {
                r.ext.aeth = Some(AethRepr {
                    syndrome: Syndrome::ACK_NO_CREDITS,
                    msn: self.msn,
                });
            }
            let mut f = vec![0u8; r.buffer_len(payload.len())];
            let used = r.emit(&mut f, &payload).expect("emit");
            f.truncate(used);
            self.sent.push((self.requests.len() - 1, opcode, rpsn));
            self.to_dev.push_back(f);
        }
    }
}

impl Link for Peer {
    fn transmit(&mut self, frame: &[u8]) {
        self.0.lock().unwrap().respond(frame);
    }

    fn receive(&mut self, buf: &mut Vec<u8>) -> bool {
        match self.0.lock().unwrap().to_dev.pop_front() {
            Some(f) => {
                buf.clear();
                buf.extend_from_slice(&f);
                true
            }
            None => false,
        }
    }
}

/// Steps the device until it is idle, moving virtual time to its timers (retransmission).
fn settle(r: &Rig) {
    let d = &r.h.dev;
    for _ in 0..1_000_000 {
        if d.step() != 0 {
            continue;
        }
        match d.next_timer_ns() {
            None => return,
            Some(t) => d.advance(Duration::from_nanos(t.saturating_sub(d.now_ns()).max(1))),
        }
    }
    panic!("the device never settled");
}

/// What one scenario did.
#[derive(Debug)]
struct Outcome {
    requests: Vec<(u32, u32, bool)>,
    sent: Vec<(usize, Opcode, u32)>,
    counters: rnic_emulator::Counters,
}

/// Posts READs of `sizes` bytes (back to back in the peer's memory) with the response PSNs
/// at offsets `lose` (from the first READ's first PSN) lost once; checks every READ
/// completes successfully with the peer's data.
fn scenario(replay: Replay, sizes: &[usize], lose: &[u32]) -> Outcome {
    let mut r = Rig::with_addr(IP_DEV, MAC_DEV);
    let total: usize = sizes.iter().sum();
    let mem: Vec<u8> = (0..total).map(|i| (i * 7 + i / 251) as u8).collect();
    let psn0 = 0xFF_FFF8; // the responses cross the 24-bit wrap
    let state = Arc::new(Mutex::new(PeerState {
        replay,
        dev_qpn: 0,
        mem: mem.clone(),
        lose: lose.iter().map(|k| (psn0 + k) & 0xFF_FFFF).collect(),
        requests: Vec::new(),
        sent: Vec::new(),
        res: Vec::new(),
        to_dev: VecDeque::new(),
        msn: 0,
    }));
    r.h.dev.set_link(Box::new(Peer(Arc::clone(&state))));
    let mut cq = r.cq(6);
    let mut qp = r.qp(QpSt::Rc, &cq, &cq, 6, 6);
    state.lock().unwrap().dev_qpn = qp.qpn;
    r.init_qp(&qp, true, true, true);
    r.rtr_rts_to(&qp, PEER_QPN, MTU_CODE, psn0, 0, gid_of(IP_PEER), MAC_PEER);
    let local = r.mr(total, Access::ALL);
    let mut wqes = Vec::new();
    let mut off = 0;
    for &n in sizes {
        wqes.push(r.write_wqe(
            &mut qp,
            op::READ,
            SIGNALED,
            0,
            &segs(&[
                raddr(PEER_VA + off as u64, PEER_RKEY),
                data(local.addr + off as u64, n as u32, local.key),
            ]),
        ));
        off += n;
    }
    let last = *wqes.last().expect("a READ");
    r.ring(&mut qp, last);
    settle(&r);
    for (i, &w) in wqes.iter().enumerate() {
        let c = r.poll(&mut cq).unwrap_or_else(|| {
            panic!(
                "{replay:?}: READ {i} did not complete: {}",
                state.lock().unwrap().summary()
            )
        });
        assert_eq!(
            (c.cqe_opcode(), c.wqe_counter(), c.byte_cnt() as usize),
            (Ok(CqeOpcode::Req), w, sizes[i]),
            "{replay:?}: READ {i}: syndrome {:?}; peer {}",
            c.syndrome(),
            state.lock().unwrap().summary()
        );
    }
    assert!(r.poll(&mut cq).is_none());
    assert_eq!(r.read(&local, 0, total), mem, "{replay:?}: the data read");
    let st = state.lock().unwrap();
    assert!(st.lose.is_empty(), "every planned loss happened");
    Outcome {
        requests: st.requests.clone(),
        sent: st.sent.clone(),
        counters: r.counters(),
    }
}

/// The responses the peer sent for the (last) duplicate request at `psn`, the reissue.
fn replay_of(o: &Outcome, psn: u32) -> Vec<Opcode> {
    let req = o
        .requests
        .iter()
        .rposition(|&(p, _, dup)| p == psn && dup)
        .unwrap_or_else(|| panic!("no reissue at {psn:#x}: {o:?}"));
    o.sent
        .iter()
        .filter(|(r, _, _)| *r == req)
        .map(|(_, op, _)| *op)
        .collect()
}

/// One 16 KiB READ (16 responses) whose 6th response is lost: the completer sees the gap at
/// the 7th, reissues the READ at the 6th PSN for 11 KiB, and the peer answers MIDDLE ..
/// LAST (rxe) or FIRST .. LAST.
#[test]
fn a_read_reissued_mid_message_accepts_the_continued_sequence() {
    for replay in [Replay::Continue, Replay::Restart] {
        let o = scenario(replay, &[16 * MTU], &[5]);
        let reissue = (0xFF_FFF8 + 5) & 0xFF_FFFF;
        assert_eq!(
            o.requests,
            vec![(0xFF_FFF8, 16 * 1024, false), (reissue, 11 * 1024, true)],
            "{replay:?}: one reissue, at the first missing PSN, for the rest"
        );
        let ops = replay_of(&o, reissue);
        let first = match replay {
            Replay::Continue => Opcode::RcRdmaReadResponseMiddle,
            Replay::Restart => Opcode::RcRdmaReadResponseFirst,
        };
        assert_eq!(ops.first(), Some(&first), "{replay:?}: {o:?}");
        assert_eq!(ops.last(), Some(&Opcode::RcRdmaReadResponseLast));
        let t = &o.counters.transport;
        assert_eq!(
            (t.retransmits, t.timeouts),
            (1, 0),
            "{replay:?}: the gap retry alone, no timeout: {t:?}"
        );
    }
}

/// The last response of a READ is lost: nothing after it shows the gap, the ACK timeout
/// reissues the READ for its last packet, and the peer answers LAST (rxe) or ONLY.
#[test]
fn a_read_reissued_for_its_last_packet_accepts_last_or_only() {
    for replay in [Replay::Continue, Replay::Restart] {
        let o = scenario(replay, &[4 * MTU], &[3]);
        let reissue = (0xFF_FFF8 + 3) & 0xFF_FFFF;
        assert_eq!(o.requests.last(), Some(&(reissue, 1024, true)), "{o:?}");
        let want = match replay {
            Replay::Continue => Opcode::RcRdmaReadResponseLast,
            Replay::Restart => Opcode::RcRdmaReadResponseOnly,
        };
        assert_eq!(replay_of(&o, reissue), vec![want], "{replay:?}");
        let t = &o.counters.transport;
        assert_eq!((t.retransmits, t.timeouts), (1, 1), "{replay:?}: {t:?}");
    }
}

/// Four outstanding READs of 16, 8, 5 and 3 KiB (one partial packet): the first loses its
/// LAST, the second its 4th response. The gap in the second reissues it mid-message (and
/// the later READs whole, go-back-N); the first's LAST comes back after the ACK timeout.
/// Every replay that starts mid-message continues the original sequence (rxe).
#[test]
fn outstanding_reads_with_losses_in_two_of_them_complete() {
    for replay in [Replay::Continue, Replay::Restart] {
        let sizes = [16 * MTU, 8 * MTU, 5 * MTU, 2 * MTU + 100];
        let o = scenario(replay, &sizes, &[15, 16 + 3]);
        let dups: Vec<_> = o.requests.iter().filter(|r| r.2).collect();
        let second_reissue = (0xFF_FFF8 + 16 + 3) & 0xFF_FFFF;
        assert!(
            dups.contains(&&(second_reissue, 5 * 1024, true)),
            "{replay:?}: {:?}",
            o.requests
        );
        if replay == Replay::Continue {
            assert_eq!(
                replay_of(&o, second_reissue).first(),
                Some(&Opcode::RcRdmaReadResponseMiddle)
            );
        }
        assert!(o.counters.transport.retransmits >= 2, "{:?}", o.counters);
    }
}
