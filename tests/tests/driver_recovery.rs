//! Recovery from a dead device: the driver declares it dead (a health syndrome, firmware that
//! stopped, a dead PCI link), reports the fatal event once, returns every outstanding work
//! request as a `WR_FLUSH_ERR` completion, refuses every later call with a typed error,
//! drops the objects without hanging, and after a function-level reset a new bring-up on the
//! same device runs traffic again.

#[path = "driver_fixture.rs"]
mod driver_fixture;

use driver_fixture::*;
use rnic_driver::health::FatalReason;
use rnic_driver::mr::Mr;
use rnic_driver::pd::Pd;
use rnic_driver::qp::{Mtu, Qp, QpConfig, QpState, QpType};
use rnic_driver::wr::{Access, PostErrorKind, RecvWr, SendFlags, SendOp, WcOpcode, WcStatus};
use rnic_driver::{DriverError, Hca, HcaConfig};
use rnic_emulator::RunMode;
use rnic_hw_regs::Bus;
use rnic_hw_regs::eqe::{EqeEvent, EventType};
use rnic_hw_regs::init_seg::HealthSyndrome;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One SEND from `a` to `b` and its two completions: the device works.
fn traffic(a: &Qp, b: &Qp, ca: &rnic_driver::cq::Cq, cb: &rnic_driver::cq::Cq, mr: &Mr) {
    mr.write(0, b"alive");
    b.post_recv(&[RecvWr {
        wr_id: 90,
        sgl: &[mr.sge(64, 64)],
    }])
    .unwrap();
    a.post_send(&[send_wr(
        91,
        SendOp::Send,
        &[mr.sge(0, 5)],
        SendFlags::SIGNALED,
    )])
    .unwrap();
    assert!(poll_one(ca).status == WcStatus::Success);
    let wc = poll_one(cb);
    assert_eq!(
        (wc.status, wc.wr_id, wc.byte_len),
        (WcStatus::Success, 90, 5)
    );
    let mut got = [0u8; 5];
    mr.read(64, &mut got);
    assert_eq!(&got, b"alive");
}

#[test]
fn a_health_syndrome_flushes_everything_and_a_function_reset_brings_the_device_back() {
    let fx = open(RunMode::Deterministic);
    let (a, b, ca, cb) = fx.pair(QpType::Rc, Mtu::Mtu1024);
    let Fx { pd, hca, bus, dev } = fx;
    let mr = Mr::alloc(
        &pd,
        4096,
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
    )
    .unwrap();
    traffic(&a, &b, &ca, &cb, &mr);

    // Work the device will never do: it is not stepped, then it dies.
    dev.set_auto_step(false);
    let sgl = [mr.sge(0, 8)];
    let remote = SendOp::Write {
        raddr: mr.addr() + 512,
        rkey: mr.rkey(),
    };
    a.post_send(&[
        send_wr(1, remote, &sgl, SendFlags::empty()),
        send_wr(2, SendOp::Send, &sgl, SendFlags::SIGNALED),
        send_wr(
            3,
            SendOp::Read {
                raddr: mr.addr(),
                rkey: mr.rkey(),
            },
            &sgl,
            SendFlags::SIGNALED,
        ),
    ])
    .unwrap();
    for id in [10, 11] {
        a.post_recv(&[RecvWr {
            wr_id: id,
            sgl: &sgl,
        }])
        .unwrap();
    }
    b.post_recv(&[RecvWr {
        wr_id: 20,
        sgl: &sgl,
    }])
    .unwrap();
    dev.raise_health_syndrome(HealthSyndrome::FwCrc);

    // Reported once as the fatal event, then as the error.
    assert_eq!(
        hca.process_events().unwrap(),
        vec![EqeEvent::Other(EventType::InternalError)]
    );
    let fatal = |e: &DriverError| {
        matches!(
            e,
            DriverError::DeviceFatal {
                reason: FatalReason::HealthSyndrome { .. }
            }
        )
    };
    assert!(fatal(&hca.process_events().unwrap_err()));
    assert!(fatal(&hca.check_health().unwrap_err()));
    assert!(hca.fatal_reason().is_some());

    // Every outstanding work request, oldest first, flushed; nothing more after them.
    let got: Vec<_> = poll_n(&ca, 5)
        .iter()
        .map(|w| (w.wr_id, w.status, w.opcode, w.qp_num))
        .collect();
    let flush = WcStatus::WrFlushErr;
    assert_eq!(
        got,
        vec![
            (1, flush, WcOpcode::RdmaWrite, a.qpn()),
            (2, flush, WcOpcode::Send, a.qpn()),
            (3, flush, WcOpcode::RdmaRead, a.qpn()),
            (10, flush, WcOpcode::Recv, a.qpn()),
            (11, flush, WcOpcode::Recv, a.qpn()),
        ]
    );
    let wc = poll_one(&cb);
    assert_eq!((wc.wr_id, wc.status, wc.qp_num), (20, flush, b.qpn()));
    assert_empty(&ca);
    assert_empty(&cb);

    // Every later call: a typed error, at once (no command reaches the device).
    assert_eq!((a.state(), b.state()), (QpState::Err, QpState::Err));
    let e = a
        .post_send(&[send_wr(4, SendOp::Send, &sgl, SendFlags::SIGNALED)])
        .unwrap_err();
    assert_eq!((e.index, e.kind), (0, PostErrorKind::DeviceFatal));
    let e = a
        .post_recv(&[RecvWr {
            wr_id: 12,
            sgl: &sgl,
        }])
        .unwrap_err();
    assert_eq!(e.kind, PostErrorKind::DeviceFatal);
    let started = Instant::now();
    assert!(fatal(&a.query().unwrap_err()));
    assert!(fatal(
        &Qp::create(&pd, &QpConfig::new(QpType::Rc, ca.clone(), ca.clone())).unwrap_err()
    ));
    assert!(fatal(&Pd::alloc(&hca).unwrap_err()));
    assert!(fatal(&Mr::alloc(&pd, 64, Access::LOCAL_WRITE).unwrap_err()));
    // The users' objects go without waiting on the device.
    drop((a, b, ca, cb, mr, pd));
    let hca = Arc::try_unwrap(hca).expect("the last handle");
    assert!(
        hca.close().is_err(),
        "a dead device's teardown is incomplete"
    );
    println!(
        "dead-device calls and teardown took {:?}",
        started.elapsed()
    );

    // A function-level reset, a new bring-up on the same device, traffic again.
    dev.set_auto_step(true);
    bus.function_reset().expect("FLR");
    let hca = Arc::new(
        Hca::open(
            bus.clone(),
            HcaConfig {
                ipv4: Some(IP),
                ..HcaConfig::default()
            },
        )
        .expect("bring-up after the reset"),
    );
    let pd = Arc::new(Pd::alloc(&hca).unwrap());
    let fx = Fx {
        pd: pd.clone(),
        hca: hca.clone(),
        bus,
        dev,
    };
    let (a, b, ca, cb) = fx.pair(QpType::Rc, Mtu::Mtu1024);
    let mr = Mr::alloc(&pd, 4096, Access::LOCAL_WRITE).unwrap();
    traffic(&a, &b, &ca, &cb, &mr);
    assert!(hca.check_health().is_ok());
    drop((a, b, ca, cb, mr, pd, hca));
}

/// Firmware that stops: the health counter stands still, the health check declares the
/// device dead, and work posted before is flushed.
#[test]
fn hung_firmware_is_declared_dead_by_the_health_counter() {
    let fx = open_with(
        RunMode::Threaded,
        HcaConfig {
            ipv4: Some(IP),
            health_interval: Duration::from_millis(5),
            ..HcaConfig::default()
        },
    );
    let (a, b, ca, _cb) = fx.pair(QpType::Rc, Mtu::Mtu1024);
    fx.dev.hang_firmware();
    let deadline = Instant::now() + Duration::from_secs(10);
    let reason = loop {
        match fx.hca.check_health() {
            Err(DriverError::DeviceFatal { reason }) => break reason,
            Err(e) => panic!("{e}"),
            Ok(()) => {
                assert!(Instant::now() < deadline, "the hang was never noticed");
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    };
    assert!(
        matches!(reason, FatalReason::HealthCounterStuck { .. }),
        "{reason}"
    );
    // Posting is refused; nothing was outstanding, so nothing is flushed.
    let sgl = [];
    assert_eq!(
        a.post_send(&[send_wr(1, SendOp::Send, &sgl, SendFlags::SIGNALED)])
            .unwrap_err()
            .kind,
        PostErrorKind::DeviceFatal
    );
    assert_empty(&ca);
    drop((a, b));
}

/// A dead PCI link: every register reads all ones; the check says so, and no reset brings
/// the function back.
#[test]
fn a_dead_pci_link_is_fatal_and_cannot_be_reset() {
    let Fx { pd, hca, bus, dev } = open(RunMode::Deterministic);
    dev.kill_pci_link();
    assert!(matches!(
        Pd::alloc(&hca),
        Err(DriverError::DeviceFatal { .. })
    ));
    drop((pd, hca));
    assert_eq!(
        bus.function_reset(),
        Err(rnic_hw_regs::BusError::DeviceLost)
    );
}
