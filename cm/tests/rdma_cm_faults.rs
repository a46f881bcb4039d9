//! The rdma_cm handshake over a lossy link: emu0 (the client) loses a share of what it
//! transmits (seeded, reproducible); the CM's retries carry REQ and RTU through, and the
//! connection is established and ends on both sides. A process of its own: fault options
//! apply when a device is created.

mod live;

use live::{expect, listener, open_lossy, resolved};
use rnic_cm::cma::ConnParam;
use rnic_cm::rdma_cm::{EventChannel, EventKind};
use rnic_cm::wire::ip::PortSpace;
use rnic_verbs::QpCap;
use std::time::Duration;

/// Above rdma_cm's REQ retry interval (4.3 s + twice 1.07 s) a few times over.
const T: Duration = Duration::from_secs(60);

#[test]
fn handshake_completes_through_lost_mads() {
    let a = open_lossy("emu0", "loss=0.5,seed=3");
    let (sch, cch) = (EventChannel::new().unwrap(), EventChannel::new().unwrap());
    let _listener = listener(&sch, PortSpace::Tcp, "192.0.2.2:7174");
    let src = "192.0.2.1:0".parse().ok();
    let client = resolved(&cch, PortSpace::Tcp, src, "192.0.2.2:7174", T);
    let (pd, cq) = (a.alloc_pd().unwrap(), a.create_cq(8, None).unwrap());
    client.create_qp(&pd, &cq, &cq, QpCap::default()).unwrap();
    client.connect(&ConnParam::default()).unwrap();
    let req = expect(&sch, EventKind::ConnectRequest, T);
    let b = req.id.context().unwrap();
    let (pb, cb) = (b.alloc_pd().unwrap(), b.create_cq(8, None).unwrap());
    req.id.create_qp(&pb, &cb, &cb, QpCap::default()).unwrap();
    req.id.accept(&ConnParam::default()).unwrap();
    expect(&cch, EventKind::Established, T);
    expect(&sch, EventKind::Established, T);
    let f = a.fault_counters().unwrap();
    eprintln!("emu0 link faults: {f:?}");
    assert!(f.lost > 0, "the link lost nothing: {f:?}");
}
