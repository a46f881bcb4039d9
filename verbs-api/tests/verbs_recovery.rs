//! A device that dies under the verbs API (its own process: it closes and reopens emu0):
//! `IBV_EVENT_DEVICE_FATAL` once, every outstanding work request flushed, every later verb a
//! typed error, the objects dropped without hanging, and a reopened device talks again.

mod common;

use common::*;
use rnic_hw_regs::init_seg::HealthSyndrome;
use rnic_verbs::*;
use std::time::Duration;

#[test]
fn a_fatal_device_flushes_refuses_and_reopens() {
    let (a, b) = pair(QpType::Rc);
    write_inline_and_check(&a, &b, b"before");
    let buf = a.pd.reg_mr(64, rw()).unwrap();
    a.qp.post_recv(&[RecvWr::new(7, &[buf.sge(0, 64).unwrap()])])
        .unwrap();

    a.ctx
        .emulator()
        .expect("emulated")
        .raise_health_syndrome(HealthSyndrome::IriscNotResponding);
    assert_eq!(
        a.ctx.get_async_event(T).unwrap(),
        Some(AsyncEvent::DeviceFatal)
    );
    let dead = |e: &Error| {
        matches!(
            e,
            Error::Driver {
                source: rnic_driver::DriverError::DeviceFatal { .. },
                ..
            }
        )
    };
    assert!(dead(&a.ctx.get_async_event(Duration::ZERO).unwrap_err()));

    // The receive posted before comes back flushed; the peer is untouched.
    let wc = poll_one(&a.cq);
    assert_eq!((wc.wr_id(), wc.status()), (7, WcStatus::WrFlushErr));
    assert_empty(&a.cq);
    assert_eq!(a.qp.state(), QpState::Err);
    let e =
        a.qp.post_send(&[SendWr::send(8, &[buf.sge(0, 8).unwrap()]).signaled()])
            .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Post {
                kind: PostErrorKind::DeviceFatal,
                ..
            }
        ),
        "{e}"
    );
    assert!(dead(&a.ctx.alloc_pd().unwrap_err()));
    assert!(dead(&a.ctx.create_cq(4, None).unwrap_err()));
    assert!(dead(&a.qp.query().unwrap_err()));
    drop((buf, a));

    // emu0 closed with its last handle; opened again, it is a new device.
    b.qp.reset().unwrap();
    let a = side("emu0", QpType::Rc);
    assert!(a.ctx.get_async_event(Duration::ZERO).unwrap().is_none());
    connect_pair(&a.qp, &b.qp, &ConnectOptions::default()).unwrap();
    write_inline_and_check(&a, &b, b"after");
}
