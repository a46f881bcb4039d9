//! SIDR over a lossy link: emu0 (the client) loses a share of what it transmits (seeded,
//! reproducible), its first SIDR REQ among it; the CM resends it after rdma_cm's 4.096 s
//! SIDR timeout and the UD service resolves. A process of its own: fault options apply when
//! a device is created.

use rnic_cm::cma::{self, ConnParam};
use rnic_cm::rdma_cm::{CmEvent, CmId, EventChannel, EventKind};
use rnic_cm::wire::ip::PortSpace;
use rnic_verbs::{Context, EmuOptions, OpenOptions};
use std::time::Duration;

/// rdma_cm's SIDR timeout (4.096 s) a few times over.
const T: Duration = Duration::from_secs(40);

fn expect(ch: &EventChannel, kind: EventKind) -> CmEvent {
    let ev = ch.get_event(Some(T)).unwrap().expect("an event in time");
    assert_eq!(ev.kind, kind, "{ev:?}");
    ev
}

#[test]
fn sidr_resolves_through_lost_mads() {
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
    let listener = CmId::new(&sch, PortSpace::Udp);
    listener
        .bind_addr("192.0.2.2:7174".parse().unwrap())
        .unwrap();
    listener.listen(1).unwrap();
    let client = CmId::new(&cch, PortSpace::Udp);
    let (src, dst) = (
        "192.0.2.1:0".parse().ok(),
        "192.0.2.2:7174".parse().unwrap(),
    );
    client.resolve_addr(src, dst, T).unwrap();
    expect(&cch, EventKind::AddrResolved);
    client.resolve_route(T).unwrap();
    expect(&cch, EventKind::RouteResolved);
    client.connect(&ConnParam::default()).unwrap();
    let req = expect(&sch, EventKind::ConnectRequest);
    req.id
        .accept(&ConnParam {
            qp_num: 0x77,
            ..ConnParam::default()
        })
        .unwrap();
    let est = expect(&cch, EventKind::Established);
    let ud = est.ud.unwrap();
    assert_eq!((ud.qp_num, ud.qkey), (0x77, cma::UDP_QKEY));
    let f = a.fault_counters().unwrap();
    let k = client.cm_counters().unwrap();
    eprintln!("emu0 link faults: {f:?}; emu0's CM: {k:?}");
    assert!(f.lost > 0, "the link lost nothing: {f:?}");
    // Every frame emu0 sent was a SIDR REQ (attribute 0x0017), every lost one resent after
    // the timeout; one SIDR REP (0x0018) came back.
    assert_eq!((k.tx_retries, k.tx_by_attr[7]), (f.lost, f.frames), "{k:?}");
    assert_eq!(k.rx_by_attr[8], 1, "{k:?}");
}
