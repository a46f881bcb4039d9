//! A hostile device: impossible CQEs written into the CQ ring through host memory (as a
//! broken or malicious device would write them), a hung firmware, a raised health syndrome
//! and a dead PCI link. The driver returns typed errors and never panics.

#[path = "driver_fixture.rs"]
mod fixture;

use fixture::*;
use rnic_driver::cq::Cq;
use rnic_driver::mr::Mr;
use rnic_driver::qp::{Mtu, Qp, QpConfig, QpType};
use rnic_driver::wr::*;
use rnic_driver::{DriverError, HcaConfig};
use rnic_emulator::RunMode;
use rnic_hw_regs::init_seg::HealthSyndrome;
use std::time::Duration;

/// Writes `cqe` (64 bytes, `op_own` included but its owner bit replaced) as the entry the
/// CQ's consumer will look at next, body first and `op_own` last, as a device does.
fn inject(cq: &Cq, cqe: &[u8; 64]) {
    let (ring, len) = cq.cqe_ring();
    let n = cq.capacity();
    let ci = cq.consumer_index();
    let off = (ci % n) as usize * 64;
    assert!(off + 64 <= len);
    let owner = ((ci / n) & 1) as u8;
    // SAFETY: the entry is inside the live CQ ring; volatile byte writes, no reference.
    unsafe {
        let p = ring.as_ptr().add(off);
        for (i, b) in cqe[..63].iter().enumerate() {
            p.add(i).write_volatile(*b);
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        p.add(63).write_volatile((cqe[63] & !1) | owner);
    }
}

fn cqe(opcode: u8, qpn: u32, send_op: u8, counter: u16, byte_cnt: u32) -> [u8; 64] {
    let mut c = [0u8; 64];
    c[0x2C..0x30].copy_from_slice(&byte_cnt.to_be_bytes());
    c[0x38..0x3C].copy_from_slice(&((u32::from(send_op) << 24) | qpn).to_be_bytes());
    c[0x3C..0x3E].copy_from_slice(&counter.to_be_bytes());
    c[0x3F] = opcode << 4;
    c
}

#[track_caller]
fn bad(cq: &Cq) -> BadCqe {
    let mut wc = [WorkCompletion::default(); 4];
    match cq.poll(&mut wc) {
        Err(PollError::BadCqe { what, .. }) => what,
        other => panic!("expected a bad CQE, got {other:?} {:?}", &wc[..1]),
    }
}

/// Injects `cqe` into `cq` and returns the typed error polling it gives (see [`bad`]).
#[track_caller]
fn inject_bad(cq: &Cq, cqe: &[u8; 64]) -> BadCqe {
    inject(cq, cqe);
    bad(cq)
}

#[test]
fn impossible_cqes_are_typed_errors() {
    let fx = open(RunMode::Deterministic);
    let (a, b, ca, cb) = fx.pair(QpType::Rc, Mtu::Mtu1024);
    let mr = Mr::alloc(&fx.pd, 4096, Access::ALL).unwrap();
    // Nothing outstanding: every CQE is impossible.
    assert_eq!(
        inject_bad(&ca, &cqe(0x0, 0xABCDE, 0x0A, 0, 0)),
        BadCqe::UnknownQpn
    );
    assert_eq!(
        inject_bad(&ca, &cqe(0x7, a.qpn(), 0, 0, 0)),
        BadCqe::UnknownOpcode(7)
    );
    let mut compressed = cqe(0x0, a.qpn(), 0x0A, 0, 0);
    compressed[0x3F] |= 3 << 2;
    inject(&ca, &compressed);
    assert_eq!(bad(&ca), BadCqe::Compressed);
    assert_eq!(
        inject_bad(&ca, &cqe(0x0, a.qpn(), 0x0A, 0, 0)),
        BadCqe::WqeCounterOutOfRange(0)
    );
    assert_eq!(
        inject_bad(&ca, &cqe(0x2, a.qpn(), 0, 0, 0)),
        BadCqe::RecvCounterOutOfRange(0)
    );
    // A receive CQE on the send-only CQ of another QP.
    assert_eq!(
        inject_bad(&ca, &cqe(0x2, b.qpn(), 0, 0, 0)),
        BadCqe::UnknownQpn
    );

    // With real work outstanding (the device does not run: auto-step off).
    fx.dev.set_auto_step(false);
    let sgl = [mr.sge(0, 16)];
    let read = SendOp::Read {
        raddr: mr.addr(),
        rkey: mr.rkey(),
    };
    a.post_send(&[SendWr {
        wr_id: 1,
        op: read,
        payload: Payload::Sgl(&sgl),
        flags: SendFlags::SIGNALED,
        ud: None,
    }])
    .unwrap();
    b.post_recv(&[RecvWr {
        wr_id: 2,
        sgl: &[mr.sge(0, 16)],
    }])
    .unwrap();
    assert_eq!(
        inject_bad(&ca, &cqe(0x0, a.qpn(), 0x08, 0, 16)),
        BadCqe::SendOpcodeMismatch {
            posted: 0x10,
            cqe: 0x08
        }
    );
    assert_eq!(
        inject_bad(&ca, &cqe(0x0, a.qpn(), 0x10, 1, 16)),
        BadCqe::WqeCounterOutOfRange(1)
    );
    assert_eq!(
        inject_bad(&ca, &cqe(0x0, a.qpn(), 0x10, 0, 17)),
        BadCqe::ByteCountTooLarge {
            byte_cnt: 17,
            posted: 16
        }
    );
    assert_eq!(
        inject_bad(&cb, &cqe(0x2, b.qpn(), 0, 0, 1000)),
        BadCqe::ByteCountTooLarge {
            byte_cnt: 1000,
            posted: 16
        }
    );
    assert_eq!(
        inject_bad(&cb, &cqe(0x2, b.qpn(), 0, 5, 8)),
        BadCqe::RecvCounterOutOfRange(5)
    );
    // The right CQEs still complete the work.
    inject(&ca, &cqe(0x0, a.qpn(), 0x10, 0, 16));
    inject(&cb, &cqe(0x3, b.qpn(), 0, 0, 8));
    let c = poll_one(&ca);
    assert_eq!((c.wr_id, c.opcode, c.byte_len), (1, WcOpcode::RdmaRead, 16));
    let r = poll_one(&cb);
    assert_eq!((r.wr_id, r.byte_len), (2, 8));
    assert!(r.flags.contains(WcFlags::WITH_IMM));
    // An error CQE with a syndrome the PRM does not define.
    b.post_recv(&[RecvWr { wr_id: 3, sgl: &[] }]).unwrap();
    let mut e = cqe(0xE, b.qpn(), 0, 1, 0);
    e[0x37] = 0x77;
    e[0x36] = 0x42;
    inject(&cb, &e);
    let r = poll_one(&cb);
    assert_eq!(
        (r.wr_id, r.status, r.vendor_err),
        (3, WcStatus::GeneralErr, 0x42)
    );
    // Good completions before a bad one are returned first; the bad one on the next call.
    b.post_recv(&[RecvWr { wr_id: 4, sgl: &[] }]).unwrap();
    inject(&cb, &cqe(0x2, b.qpn(), 0, 2, 0));
    let mut wc = [WorkCompletion::default(); 4];
    // Two entries at once: the second is garbage.
    {
        let ci = cb.consumer_index();
        let (ring, _) = cb.cqe_ring();
        let n = cb.capacity();
        let g = cqe(0x9, b.qpn(), 0, 0, 0);
        let off = ((ci + 1) % n) as usize * 64;
        // SAFETY: inside the live ring.
        unsafe {
            for (i, byte) in g.iter().enumerate() {
                let v = if i == 63 {
                    (byte & !1) | (((ci + 1) / n) & 1) as u8
                } else {
                    *byte
                };
                ring.as_ptr().add(off + i).write_volatile(v);
            }
        }
    }
    assert_eq!(cb.poll(&mut wc), Ok(1));
    assert_eq!(wc[0].wr_id, 4);
    assert_eq!(bad(&cb), BadCqe::UnknownOpcode(9));
    assert_eq!(cb.poll(&mut wc), Ok(0));
    fx.dev.set_auto_step(true);
}

#[test]
fn random_cqes_never_panic() {
    let fx = open(RunMode::Deterministic);
    let (a, b, ca, _cb) = fx.pair(QpType::Rc, Mtu::Mtu1024);
    let mr = Mr::alloc(&fx.pd, 4096, Access::ALL).unwrap();
    fx.dev.set_auto_step(false);
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let qpns = [a.qpn(), b.qpn(), 0, 0xFF_FFFF];
    let (mut ok, mut errs) = (0, 0);
    for i in 0..20_000u32 {
        if i % 64 == 0 {
            // Keep some work outstanding so that some random CQEs look plausible.
            let sgl = [mr.sge(0, 8)];
            let _ = a.post_send(&[SendWr {
                wr_id: u64::from(i),
                op: SendOp::Send,
                payload: Payload::Sgl(&sgl),
                flags: SendFlags::SIGNALED,
                ud: None,
            }]);
            fx.dev.step();
        }
        let mut c = [0u8; 64];
        for chunk in c.chunks_mut(8) {
            chunk.copy_from_slice(&next().to_ne_bytes());
        }
        if i % 2 == 0 {
            let q = qpns[(next() % 4) as usize];
            c[0x39..0x3C].copy_from_slice(&q.to_be_bytes()[1..]);
            c[0x3C] = 0;
            c[0x3D] = (next() % 4) as u8;
        }
        if c[0x3F] >> 4 == 0xF {
            c[0x3F] &= 0x7F;
        }
        inject(&ca, &c);
        let mut wc = [WorkCompletion::default(); 2];
        match ca.poll(&mut wc) {
            Ok(_) => ok += 1,
            Err(PollError::BadCqe { .. }) => errs += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(errs > 15_000, "{ok} ok, {errs} errors");
    fx.dev.set_auto_step(true);
}

/// The fixture's device with a 300 ms command timeout.
fn open_300ms(mode: RunMode) -> Fx {
    open_with(
        mode,
        HcaConfig {
            ipv4: Some(IP),
            cmd_timeout: Duration::from_millis(300),
            ..HcaConfig::default()
        },
    )
}

#[test]
fn hung_firmware_and_health_syndromes_are_errors() {
    for mode in MODES {
        log_warnings();
        let fx = open_300ms(mode);
        let (a, b, ca, cb) = fx.pair(QpType::Rc, Mtu::Mtu1024);
        let mr = Mr::alloc(&fx.pd, 4096, Access::ALL).unwrap();
        fx.dev.hang_firmware();
        let e = Cq::create(&fx.hca, 16, None).unwrap_err();
        assert!(
            matches!(
                e,
                DriverError::Timeout { .. } | DriverError::DeviceFatal { .. }
            ),
            "{e}"
        );
        let e = Qp::create(&fx.pd, &QpConfig::new(QpType::Rc, ca.clone(), ca.clone())).unwrap_err();
        assert!(
            e.opcode().is_some() || matches!(e, DriverError::DeviceFatal { .. }),
            "{e}"
        );
        // The data path needs no firmware: posts go in, nothing completes.
        let sgl = [mr.sge(0, 8)];
        a.post_send(&[SendWr {
            wr_id: 1,
            op: SendOp::Send,
            payload: Payload::Sgl(&sgl),
            flags: SendFlags::SIGNALED,
            ud: None,
        }])
        .unwrap();
        assert_empty(&ca);
        // Destroying returns the error; memory the device may still use is leaked, not freed.
        assert!(b.destroy().is_err());
        assert!(a.to_err().is_err());
        drop((a, ca, cb, mr));
    }
    for mode in MODES {
        let fx = open_300ms(mode);
        let (a, _b, ca, _cb) = fx.pair(QpType::Rc, Mtu::Mtu1024);
        fx.dev.raise_health_syndrome(HealthSyndrome::HwFatal);
        let e = fx.hca.check_health().unwrap_err();
        assert!(matches!(e, DriverError::DeviceFatal { .. }), "{e}");
        // Whatever the device still does, nothing panics.
        let _ = Cq::create(&fx.hca, 16, None);
        let _ = a.query();
        let mut wc = [WorkCompletion::default(); 4];
        let _ = ca.poll(&mut wc);
    }
    let fx = open_with(
        RunMode::Deterministic,
        HcaConfig {
            ipv4: Some(IP),
            cmd_timeout: Duration::from_millis(300),
            ..HcaConfig::default()
        },
    );
    let (a, _b, _ca, _cb) = fx.pair(QpType::Rc, Mtu::Mtu1024);
    fx.dev.kill_pci_link();
    let e = a.query().unwrap_err();
    assert!(
        matches!(
            e,
            DriverError::Timeout { .. } | DriverError::DeviceFatal { .. }
        ),
        "{e}"
    );
    assert!(fx.hca.check_health().is_err());
}
