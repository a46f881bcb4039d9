//! The queue engines from the host side: doorbell routing, CQ arming and completion EQEs
//! with interrupts, EQ arming, CQ overrun, IOMMU faults on WQE / CQE / data buffers, and
//! random WQE bytes and doorbells (proptest): no panic, every failure an error CQE or a
//! counted drop.

mod common;
#[path = "rig/mod.rs"]
mod rig;

use std::time::Duration;

use proptest::prelude::*;
use rig::{Access, Rig, SIGNALED, data, op};
use rnic_hw_regs::Bus;
use rnic_hw_regs::cqe::{CqeOpcode, CqeSyndrome};
use rnic_hw_regs::ctx::QpSt;
use rnic_hw_regs::doorbell::{UAR_EQ_UPDATE, eq_doorbell, uar_bar_offset};
use rnic_hw_regs::eqe::EqeEvent;

const MTU: u8 = 1;

#[test]
fn cq_arm_raises_one_completion_event_and_interrupt() {
    let mut r = Rig::new();
    let (mut a, _b, mut ca, _cb) = r.pair(QpSt::Rc, MTU);
    r.arm_ceq();
    r.arm(&mut ca, false);
    assert!(r.poll_ceq().is_none());
    r.post(&mut a, op::NOP, SIGNALED, 0, &[]);
    let e = r.poll_ceq().expect("a completion EQE");
    assert_eq!(e.event(), Ok(EqeEvent::Completion { cqn: ca.cqn }));
    assert_eq!(r.h.bus.wait_irq(1, Duration::ZERO), Ok(true));
    assert_eq!(
        r.h.bus.wait_irq(1, Duration::ZERO),
        Ok(false),
        "one interrupt"
    );
    // Not re-armed: the next CQE raises no event.
    r.post(&mut a, op::NOP, SIGNALED, 0, &[]);
    assert!(r.poll_ceq().is_none());
    assert_eq!(r.one(&mut ca).cqe_opcode(), Ok(CqeOpcode::Req));
    assert_eq!(r.one(&mut ca).cqe_opcode(), Ok(CqeOpcode::Req));
    // Arming with an unconsumed CQE raises the event at once; the EQ was not re-armed, so
    // the EQE comes without an interrupt.
    r.post(&mut a, op::NOP, SIGNALED, 0, &[]);
    r.arm(&mut ca, false);
    let e = r.poll_ceq().expect("an immediate completion EQE");
    assert_eq!(e.event(), Ok(EqeEvent::Completion { cqn: ca.cqn }));
    assert_eq!(r.h.bus.wait_irq(1, Duration::ZERO), Ok(false));
    // Re-arming the EQ with an unconsumed EQE fires at once... after consuming, nothing.
    r.arm_ceq();
    assert_eq!(r.h.bus.wait_irq(1, Duration::ZERO), Ok(false));
}

#[test]
fn solicited_arm_waits_for_a_solicited_or_error_completion() {
    let mut r = Rig::new();
    let (mut a, mut b, _ca, mut cb) = r.pair(QpSt::Rc, MTU);
    let src = r.mr(4096, Access::ALL);
    let dst = r.mr(4096, Access::ALL);
    for _ in 0..3 {
        r.post_recv(&mut b, &[(dst.addr, 64, dst.key)]);
    }
    r.arm_ceq();
    r.arm(&mut cb, true);
    r.post(&mut a, op::SEND, 0, 0, &data(src.addr, 4, src.key));
    assert!(
        r.poll_ceq().is_none(),
        "an unsolicited receive raises nothing"
    );
    let c = r.one(&mut cb);
    assert!(!c.se());
    r.post(&mut a, op::SEND, 0x02, 0, &data(src.addr, 4, src.key));
    let e = r.poll_ceq().expect("solicited completion event");
    assert_eq!(e.event(), Ok(EqeEvent::Completion { cqn: cb.cqn }));
    assert!(r.one(&mut cb).se());
    assert_eq!(r.h.bus.wait_irq(1, Duration::ZERO), Ok(true));
}

#[test]
fn eq_owner_bits_follow_the_passes() {
    let mut r = Rig::new();
    let (mut a, _b, mut ca, _cb) = r.pair(QpSt::Rc, MTU);
    // 64-entry EQ: 70 events wrap it; the host consumes as it goes and updates the index.
    for i in 0..70u32 {
        r.arm(&mut ca, false);
        r.post(&mut a, op::NOP, SIGNALED, 0, &[]);
        r.one(&mut ca);
        let slot = r.ceq_ci & 63;
        let raw = r.h.read_mem(r.ceq_buf + u64::from(slot) * 64, 64);
        assert_eq!(raw[63] & 1, ((i >> 6) & 1) as u8, "owner bit of EQE {i}");
        assert!(r.poll_ceq().is_some());
        r.h.bus.write32(
            uar_bar_offset(r.up.uar) + UAR_EQ_UPDATE,
            eq_doorbell(r.ceq, r.ceq_ci),
        );
    }
    assert_eq!(r.counters().eq_overruns, 0);
}

#[test]
fn a_full_eq_drops_events_instead_of_overwriting() {
    let mut r = Rig::new();
    let (mut a, _b, mut ca, _cb) = r.pair(QpSt::Rc, MTU);
    for _ in 0..65 {
        r.arm(&mut ca, false);
        r.post(&mut a, op::NOP, SIGNALED, 0, &[]);
        r.one(&mut ca);
    }
    assert_eq!(
        r.counters().eq_overruns,
        1,
        "the 65th EQE found the EQ full"
    );
    for _ in 0..64 {
        assert!(r.poll_ceq().is_some());
    }
    assert!(r.poll_ceq().is_none());
}

#[test]
fn cq_owner_bits_and_overrun() {
    let mut r = Rig::new();
    let mut cq = r.cq(2);
    let mut a = r.qp(QpSt::Rc, &cq, &cq, 6, 6);
    let peer_cq = r.cq(6);
    let b = r.qp(QpSt::Rc, &peer_cq, &peer_cq, 6, 6);
    r.init_qp(&a, true, true, true);
    r.init_qp(&b, true, true, true);
    r.rtr_rts(&a, b.qpn, MTU, 0, 0);
    // Three passes over a 4-entry CQ, consuming as we go: owner bits alternate.
    for i in 0..12u32 {
        let w = r.post(&mut a, op::NOP, SIGNALED, 0, &[]);
        let slot = u64::from(i & 3);
        let raw = r.h.read_mem(cq.buf + slot * 64, 64);
        assert_eq!(raw[63] & 1, ((i >> 2) & 1) as u8, "owner bit of CQE {i}");
        let c = r.one(&mut cq);
        assert_eq!(c.wqe_counter(), w);
    }
    // Four unconsumed CQEs fill it; the fifth overruns: not written, counted, CQ in error.
    for _ in 0..5 {
        r.post(&mut a, op::NOP, SIGNALED, 0, &[]);
    }
    assert_eq!(r.counters().cq_overruns, 1);
    let e = r.poll_aeq().expect("a CQ error EQE on the async EQ");
    assert_eq!(
        e.event(),
        Ok(EqeEvent::CqError {
            cqn: cq.cqn,
            syndrome: 0x01
        }),
        "overrun syndrome"
    );
    assert!(r.poll_aeq().is_none());
    for k in 0..4 {
        assert_eq!(
            r.one(&mut cq).wqe_counter(),
            12 + k,
            "the four CQEs are intact"
        );
    }
    assert!(r.poll(&mut cq).is_none());
    r.post(&mut a, op::NOP, SIGNALED, 0, &[]);
    assert!(
        r.poll(&mut cq).is_none(),
        "a CQ in error writes nothing more"
    );
    assert!(r.counters().cqes_dropped >= 2);
}

#[test]
fn stray_doorbells_are_counted_and_dropped() {
    let mut r = Rig::new();
    let (mut a, _b, mut ca, _cb) = r.pair(QpSt::Rc, MTU);
    let uar = uar_bar_offset(r.up.uar);
    let before = r.counters().bad_doorbells;
    let w = r.write_wqe(&mut a, op::NOP, SIGNALED, 0, &[]);
    r.h.write_mem(a.dbr + 4, &u32::from(a.sq_pi).to_be_bytes());
    let good = u64::from(u32::from(w) << 8) << 32 | u64::from(a.qpn << 8 | 1);
    // Unknown QP, a 32-bit send doorbell, an unknown offset, an unknown EQ and CQ, an
    // unallocated UAR page, and the right QP on another UAR page.
    r.h.bus
        .write64(uar + 0x800, u64::from(0x00FF_FFFFu32 << 8 | 1));
    r.h.bus.write32(uar + 0x800, good as u32);
    r.h.bus.write64(uar + 0x100, good);
    r.h.bus.write32(uar + 0x40, eq_doorbell(0xEE, 0));
    r.h.bus.write64(uar + 0x20, 0x0FFF_FFFF);
    r.h.bus.write64(uar_bar_offset(r.up.uar + 5) + 0x800, good);
    let other = r.h.alloc_uar();
    r.h.bus.write64(uar_bar_offset(other) + 0x800, good);
    assert_eq!(r.counters().bad_doorbells - before, 7);
    assert!(r.poll(&mut ca).is_none(), "none of them ran the WQE");
    r.h.bus.write64(uar + 0x900, good);
    assert_eq!(r.one(&mut ca).wqe_counter(), w);
}

/// Frees the host region that holds `iova` (the device's later accesses fault).
fn unmap(r: &mut Rig, iova: u64) {
    let pos =
        r.h.regions
            .iter()
            .position(|g| iova >= g.iova && iova < g.iova + g.len as u64)
            .expect("a region");
    let g = r.h.regions.swap_remove(pos);
    r.h.bus.free_dma(g).expect("free");
}

#[test]
fn iommu_faults_on_data_wqe_cqe_and_doorbell_record_never_crash() {
    // Data buffer: a local access error.
    let mut r = Rig::new();
    let (mut a, mut b, mut ca, mut cb) = r.pair(QpSt::Rc, MTU);
    let src = r.mr(4096, Access::ALL);
    let dst = r.mr(4096, Access::ALL);
    unmap(&mut r, src.iova);
    r.post_recv(&mut b, &[(dst.addr, 64, dst.key)]);
    let w = r.post(&mut a, op::SEND, SIGNALED, 0, &data(src.addr, 8, src.key));
    let c = r.one(&mut ca);
    assert_eq!(c.error_syndrome(), Ok(CqeSyndrome::LocalAccess));
    assert_eq!(c.wqe_counter(), w);
    assert!(r.counters().iommu_faults >= 1);
    assert!(r.poll(&mut cb).is_none());

    // Receive buffer at the responder: the receive WQE fails, the requester gets a NAK.
    let mut r = Rig::new();
    let (mut a, mut b, mut ca, mut cb) = r.pair(QpSt::Rc, MTU);
    let src = r.mr(4096, Access::ALL);
    let dst = r.mr(4096, Access::ALL);
    unmap(&mut r, dst.iova);
    let rc = r.post_recv(&mut b, &[(dst.addr, 64, dst.key)]);
    r.post(&mut a, op::SEND, SIGNALED, 0, &data(src.addr, 8, src.key));
    let c = r.one(&mut cb);
    assert_eq!(c.error_syndrome(), Ok(CqeSyndrome::LocalAccess));
    assert_eq!(c.wqe_counter(), rc);
    assert_eq!(r.one(&mut ca).error_syndrome(), Ok(CqeSyndrome::RemoteOp));

    // WQE buffer: the doorbell's WQE cannot be read: local QP operation error.
    let mut r = Rig::new();
    let (mut a, _b, mut ca, _cb) = r.pair(QpSt::Rc, MTU);
    let w = r.write_wqe(&mut a, op::NOP, SIGNALED, 0, &[]);
    let faults = r.counters().iommu_faults;
    unmap(&mut r, a.buf);
    let value = u64::from(u32::from(w) << 8) << 32 | u64::from(a.qpn << 8 | 1);
    r.ring_with(&mut a, value);
    let c = r.one(&mut ca);
    assert_eq!(c.error_syndrome(), Ok(CqeSyndrome::LocalQpOp));
    assert!(r.counters().iommu_faults > faults);

    // CQ buffer: the CQE is dropped and counted; the CQ enters error (access violation).
    let mut r = Rig::new();
    let (mut a, _b, ca, _cb) = r.pair(QpSt::Rc, MTU);
    unmap(&mut r, ca.buf);
    let dropped = r.counters().cqes_dropped;
    r.post(&mut a, op::NOP, SIGNALED, 0, &[]);
    assert_eq!(r.counters().cqes_dropped, dropped + 1);
    assert_eq!(
        r.poll_aeq().map(|e| e.event()),
        Some(Ok(EqeEvent::CqError {
            cqn: ca.cqn,
            syndrome: 0x02
        }))
    );
    r.post(&mut a, op::NOP, SIGNALED, 0, &[]);
    assert_eq!(r.counters().cqes_dropped, dropped + 2);

    // Doorbell record: the send counter cannot be read; nothing runs.
    let mut r = Rig::new();
    let (mut a, _b, mut ca, _cb) = r.pair(QpSt::Rc, MTU);
    let w = r.write_wqe(&mut a, op::NOP, SIGNALED, 0, &[]);
    unmap(&mut r, a.dbr);
    let faults = r.counters().iommu_faults;
    let value = u64::from(u32::from(w) << 8) << 32 | u64::from(a.qpn << 8 | 1);
    let off = uar_bar_offset(r.up.uar) + 0x800;
    r.h.bus.write64(off, value);
    assert!(r.counters().iommu_faults > faults);
    assert!(r.poll(&mut ca).is_none());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    /// Random WQE bytes (any opcode, DS, segments, keys) after a valid control prefix or
    /// not: the device never panics, and the WQE ends as a CQE (success or error) or a
    /// counted drop; the QP keeps answering (a signaled NOP afterwards completes, possibly
    /// flushed).
    #[test]
    fn random_wqe_bytes(
        bytes in proptest::collection::vec(any::<u8>(), 64..=256),
        keep_ctrl in any::<bool>(),
        st in prop_oneof![Just(QpSt::Rc), Just(QpSt::Uc), Just(QpSt::Ud)],
        posted in 1u16..=4,
    ) {
        let mut r = Rig::new();
        let (mut a, mut b, mut ca, _cb) = if st == QpSt::Ud {
            r.ud_pair(MTU, 0)
        } else {
            r.pair(st, MTU)
        };
        let m = r.mr(4096, Access::ALL);
        r.post_recv(&mut b, &[(m.addr, 4096, m.key)]);
        let mut wqe = bytes.clone();
        wqe.resize(usize::from(posted) * 64, 0);
        if keep_ctrl {
            // A plausible control segment: right index and QPN, random opcode and DS.
            wqe[1..3].copy_from_slice(&a.sq_pi.to_be_bytes());
            let ds = u32::from(bytes[7] & 0x3F);
            wqe[4..8].copy_from_slice(&(a.qpn << 8 | ds).to_be_bytes());
        }
        let before = r.counters();
        let index = r.write_raw_wqe(&mut a, &wqe);
        let dw0 = u32::from_be_bytes([wqe[0], wqe[1], wqe[2], wqe[3]]);
        let value = u64::from(dw0) << 32 | u64::from(a.qpn << 8 | u32::from(wqe[7] & 0x3F));
        r.ring_with(&mut a, value);
        r.h.dev.step();
        let mut cqes = Vec::new();
        while let Some(c) = r.poll(&mut ca) {
            cqes.push(c);
        }
        let after = r.counters();
        let signaled = wqe[11] & 0x08 != 0;
        if cqes.is_empty() && after.bad_doorbells == before.bad_doorbells {
            // Only an unsignaled success may complete silently.
            prop_assert!(!signaled || after.cqes_dropped > before.cqes_dropped);
        }
        for c in &cqes {
            let op = c.cqe_opcode();
            prop_assert!(op == Ok(CqeOpcode::Req) || op == Ok(CqeOpcode::ReqErr), "{:?}", c);
            if op == Ok(CqeOpcode::ReqErr) {
                prop_assert!(c.error_syndrome().is_ok());
            }
        }
        let _ = index;
        // The QP still answers: a signaled NOP at the device's next index (the host's count
        // may differ from the device's when the random DS disagrees, which the device
        // reports as an error CQE rather than trusting).
        let w = r.write_wqe(&mut a, op::NOP, SIGNALED, 0, &[]);
        r.ring(&mut a, w);
        r.h.dev.step();
        let mut seen = 0;
        while r.poll(&mut ca).is_some() {
            seen += 1;
        }
        prop_assert!(seen >= 1 || r.counters().bad_doorbells > after.bad_doorbells);
    }

    /// Well-formed WQEs of every RC opcode with hostile contents: addresses anywhere in the
    /// 64-bit space under a whole-space PA key (IOMMU faults, wrap-arounds), lengths up to
    /// 2 GiB, keys valid or not. No panic; every WQE completes (signaled) and a failure is
    /// an error CQE followed by flushes.
    #[test]
    fn hostile_wqe_contents(
        ops in proptest::collection::vec(
            (
                prop_oneof![
                    Just(op::SEND), Just(op::SEND_IMM), Just(op::WRITE), Just(op::WRITE_IMM),
                    Just(op::READ), Just(op::CS), Just(op::FA), Just(op::NOP)
                ],
                any::<u64>(),
                any::<u64>(),
                prop_oneof![Just(0u32), Just(1), Just(8), Just(300), Just(4096), any::<u32>()],
                0u8..4,
            ),
            1..6,
        ),
    ) {
        let mut r = Rig::new();
        let (mut a, mut b, mut ca, mut cb) = r.pair(QpSt::Rc, MTU);
        let whole = r.mr_whole(Access::ALL);
        let m = r.mr(8192, Access::ALL);
        for _ in 0..8 {
            r.post_recv(&mut b, &[(m.addr, 8192, m.key)]);
        }
        let mut last = 0;
        let mut n = 0;
        for (opcode, laddr, raddr_, len, key_sel) in ops {
            let key = |sel: u8| match sel {
                0 => whole,
                1 => m.key,
                2 => m.key ^ 0x0100,
                _ => 0x100,
            };
            let len = if matches!(opcode, op::CS | op::FA) { 8 } else { len & 0x7FFF_FFFF };
            let mut s = Vec::new();
            if !matches!(opcode, op::SEND | op::SEND_IMM | op::NOP) {
                s.extend_from_slice(&rig::raddr(raddr_, key(key_sel ^ 1)));
            }
            if matches!(opcode, op::CS | op::FA) {
                s.extend_from_slice(&rig::atomic(1, 2));
            }
            if opcode != op::NOP {
                s.extend_from_slice(&data(laddr, len, key(key_sel)));
            }
            last = r.write_wqe(&mut a, opcode, SIGNALED, 7, &s);
            n += 1;
        }
        r.ring(&mut a, last);
        r.h.dev.step();
        let mut got = 0;
        let mut failed = false;
        while let Some(c) = r.poll(&mut ca) {
            got += 1;
            match c.cqe_opcode() {
                Ok(CqeOpcode::Req) => prop_assert!(!failed, "success after a failure"),
                Ok(CqeOpcode::ReqErr) => {
                    let s = c.error_syndrome();
                    prop_assert!(s.is_ok());
                    if failed {
                        prop_assert_eq!(s, Ok(CqeSyndrome::WrFlush));
                    }
                    failed = true;
                }
                other => prop_assert!(false, "unexpected {:?}", other),
            }
        }
        prop_assert_eq!(got, n, "every signaled WQE completes");
        while r.poll(&mut cb).is_some() {}
    }

    /// Random values at random UAR offsets and widths: no panic, and an unknown target is
    /// counted.
    #[test]
    fn random_doorbells(writes in proptest::collection::vec((0usize..0x1000, any::<u64>(), any::<bool>()), 1..32)) {
        let mut r = Rig::new();
        let (_a, _b, _ca, _cb) = r.pair(QpSt::Rc, MTU);
        let uar = uar_bar_offset(r.up.uar);
        for (off, value, wide) in writes {
            if wide {
                r.h.bus.write64(uar + (off & !7), value);
            } else {
                r.h.bus.write32(uar + (off & !3), value as u32);
            }
        }
        r.h.dev.step();
    }
}
