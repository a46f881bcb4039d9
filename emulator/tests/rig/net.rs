//! Two emulated devices joined by a link (in-process, optionally faulty), each with its own
//! host rig, and a settle loop that steps both and moves virtual time to the next timer.

use std::sync::Arc;

use rnic_emulator::link::{FaultConfig, FaultStats, FaultyLink, InProcLink, Link};
use rnic_hw_regs::ctx::QpSt;

use super::{Cq, Qp, Rig, gid_of};

pub(crate) const IP_A: [u8; 4] = [10, 0, 0, 1];
pub(crate) const IP_B: [u8; 4] = [10, 0, 0, 2];
pub(crate) const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 0xA];
pub(crate) const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 0xB];

/// Two devices on one wire.
pub(crate) struct Net {
    pub(crate) a: Rig,
    pub(crate) b: Rig,
    /// Fault counters of A's and B's transmit side, when faulty.
    pub(crate) faults: Option<(Arc<FaultStats>, Arc<FaultStats>)>,
}

/// An in-process end that carries no runs of packets ([`Link::takes_runs`] false): every
/// packet travels as a frame of its own, as on any link but the in-process pair.
#[derive(Debug)]
pub(crate) struct NoRuns(pub(crate) InProcLink);

impl Link for NoRuns {
    fn transmit(&mut self, frame: &[u8]) {
        self.0.transmit(frame);
    }
    fn transmit_owned(&mut self, frame: Vec<u8>) -> Vec<u8> {
        self.0.transmit_owned(frame)
    }
    fn receive(&mut self, buf: &mut Vec<u8>) -> bool {
        self.0.receive(buf)
    }
    fn takes_unsealed(&self) -> bool {
        self.0.takes_unsealed()
    }
    fn transmit_unsealed(&mut self, frame: Vec<u8>) -> Vec<u8> {
        self.0.transmit_unsealed(frame)
    }
    fn receive_unsealed(&mut self, buf: &mut Vec<u8>) -> Option<bool> {
        self.0.receive_unsealed(buf)
    }
    fn attach(&mut self, env: &rnic_emulator::link::LinkEnv) {
        self.0.attach(env);
    }
    fn rx_drops(&self) -> rnic_emulator::link::LinkRxDrops {
        self.0.rx_drops()
    }
}

impl Net {
    /// A lossless in-process wire.
    pub(crate) fn new() -> Net {
        Net::build(None)
    }

    /// A lossless in-process wire whose ends carry every packet as a frame of its own
    /// ([`NoRuns`]): what [`Net::new`] does, without runs of packets in one buffer.
    pub(crate) fn without_runs() -> Net {
        let a = Rig::with_addr(IP_A, MAC_A);
        let b = Rig::with_addr(IP_B, MAC_B);
        let (la, lb) = InProcLink::pair();
        a.h.dev.set_link(Box::new(NoRuns(la)));
        b.h.dev.set_link(Box::new(NoRuns(lb)));
        Net { a, b, faults: None }
    }

    /// A wire with `cfg`'s faults in both directions (B's side seeded with `seed + 1`).
    pub(crate) fn faulty(cfg: FaultConfig) -> Net {
        Net::build(Some(cfg))
    }

    fn build(cfg: Option<FaultConfig>) -> Net {
        let a = Rig::with_addr(IP_A, MAC_A);
        let b = Rig::with_addr(IP_B, MAC_B);
        let (la, lb) = InProcLink::pair();
        let faults = match cfg {
            Some(cfg) => {
                let fa = FaultyLink::new(la, cfg);
                let fb = FaultyLink::new(
                    lb,
                    FaultConfig {
                        seed: cfg.seed.wrapping_add(1),
                        ..cfg
                    },
                );
                let stats = (fa.stats(), fb.stats());
                a.h.dev.set_link(Box::new(fa));
                b.h.dev.set_link(Box::new(fb));
                Some(stats)
            }
            None => {
                a.h.dev.set_link(Box::new(la) as Box<dyn Link>);
                b.h.dev.set_link(Box::new(lb));
                None
            }
        };
        Net { a, b, faults }
    }

    /// Steps both devices until neither has work; when both are idle with a timer armed
    /// (retransmission, RNR wait, a delayed frame), moves virtual time to it. Returns the
    /// virtual time that passed, in ns.
    pub(crate) fn settle(&self) -> u64 {
        let (da, db) = (&self.a.h.dev, &self.b.h.dev);
        let start = da.now_ns();
        for _ in 0..10_000_000 {
            if da.step() + db.step() != 0 {
                continue;
            }
            let next = [da.next_timer_ns(), db.next_timer_ns()]
                .into_iter()
                .flatten()
                .min();
            match next {
                None => return da.now_ns() - start,
                Some(t) => {
                    let d = t.saturating_sub(da.now_ns()).max(1);
                    da.advance(std::time::Duration::from_nanos(d));
                    db.advance(std::time::Duration::from_nanos(d));
                }
            }
        }
        panic!("the devices never settled");
    }

    /// A connected RC (or UC) pair, A's QP to B's, path MTU code `mtu`, all access flags,
    /// `2^log_sq` WQEBBs and `2^log_rq` receive WQEs, RNR retry `rnr_retry`, PSNs near the
    /// 24-bit wrap so every test crosses it.
    pub(crate) fn pair(
        &mut self,
        st: QpSt,
        mtu: u8,
        log_sq: u8,
        log_rq: u8,
        rnr_retry: u8,
    ) -> (Qp, Qp, Cq, Cq) {
        let ca = self.a.cq(11);
        let cb = self.b.cq(11);
        let qa = self.a.qp(st, &ca, &ca, log_sq, log_rq);
        let qb = self.b.qp(st, &cb, &cb, log_sq, log_rq);
        self.a.init_qp(&qa, true, true, true);
        self.b.init_qp(&qb, true, true, true);
        let (psn_a, psn_b) = (0xFF_FF00, 0xFF_FFF0);
        self.a.rtr_to(&qa, qb.qpn, mtu, psn_b, gid_of(IP_B), MAC_B);
        self.b.rtr_to(&qb, qa.qpn, mtu, psn_a, gid_of(IP_A), MAC_A);
        self.a.rts(&qa, psn_a, rnr_retry);
        self.b.rts(&qb, psn_b, rnr_retry);
        (qa, qb, ca, cb)
    }
}
