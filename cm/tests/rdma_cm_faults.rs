//! The rdma_cm handshake over a lossy link: emu0 (the client) loses a share of what it
//! transmits (seeded, reproducible); the CM's retries carry REQ and RTU through, and the
//! connection is established and ends on both sides. A process of its own: fault options
//! apply when a device is created.

use rnic_cm::cma::ConnParam;
use rnic_cm::rdma_cm::{CmEvent, CmId, EventChannel, EventKind};
use rnic_cm::wire::ip::PortSpace;
use rnic_verbs::{Context, EmuOptions, OpenOptions, QpCap};
use std::time::Duration;

/// Above rdma_cm's REQ retry interval (4.3 s + twice 1.07 s) a few times over.
const T: Duration = Duration::from_secs(60);

fn expect(ch: &EventChannel, kind: EventKind) -> CmEvent {
    let ev = ch.get_event(Some(T)).unwrap().expect("an event in time");
    assert_eq!(ev.kind, kind, "{ev:?}");
    ev
}

#[test]
fn handshake_completes_through_lost_mads() {
    let emu = EmuOptions::default()
        .with_fault_spec("loss=0.5,seed=3")
        .unwrap();
    let a = Context::open_with(
        "emu0",
        &OpenOptions {
            emu,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    let (sch, cch) = (EventChannel::new().unwrap(), EventChannel::new().unwrap());
    let listener = CmId::new(&sch, PortSpace::Tcp);
    listener
        .bind_addr("192.0.2.2:7174".parse().unwrap())
        .unwrap();
    listener.listen(1).unwrap();
    let client = CmId::new(&cch, PortSpace::Tcp);
    let (src, dst) = (
        "192.0.2.1:0".parse().ok(),
        "192.0.2.2:7174".parse().unwrap(),
    );
    client.resolve_addr(src, dst, T).unwrap();
    expect(&cch, EventKind::AddrResolved);
    client.resolve_route(T).unwrap();
    expect(&cch, EventKind::RouteResolved);
    let (pd, cq) = (a.alloc_pd().unwrap(), a.create_cq(8, None).unwrap());
    client.create_qp(&pd, &cq, &cq, QpCap::default()).unwrap();
    client.connect(&ConnParam::default()).unwrap();
    let req = expect(&sch, EventKind::ConnectRequest);
    let b = req.id.context().unwrap();
    let (pb, cb) = (b.alloc_pd().unwrap(), b.create_cq(8, None).unwrap());
    req.id.create_qp(&pb, &cb, &cb, QpCap::default()).unwrap();
    req.id.accept(&ConnParam::default()).unwrap();
    expect(&cch, EventKind::Established);
    expect(&sch, EventKind::Established);
    let f = a.fault_counters().unwrap();
    eprintln!("emu0 link faults: {f:?}");
    assert!(f.lost > 0, "the link lost nothing: {f:?}");
}
