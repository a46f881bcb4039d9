//! rdma_cm options and lifetimes between the emulated pair emu0 (192.0.2.1) and emu1
//! (192.0.2.2): the ACK timeout option, and ids that go with their channel. A process of its
//! own, one test: the emulated device hands a destroyed QP's number to the next QP, and a
//! REQ from a QP number the peer's CM still holds (connected or in timewait) is rejected as
//! a stale connection, so connections here must not meet other tests' recycled QPs.

use rnic_cm::cma::ConnParam;
use rnic_cm::rdma_cm::{CmEvent, CmId, EventChannel, EventKind};
use rnic_cm::wire::ip::PortSpace;
use rnic_verbs::QpCap;
use std::net::SocketAddr;
use std::time::Duration;

const T: Duration = Duration::from_secs(20);

fn expect(ch: &EventChannel, kind: EventKind) -> CmEvent {
    let ev = ch.get_event(Some(T)).unwrap().expect("an event in time");
    assert_eq!(ev.kind, kind, "{ev:?}");
    ev
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// A connected pair on `port`: the client's and the server's (child) ids with their QPs, the
/// server's Established event left queued on `sch`. `ack` sets the ACK timeout option on
/// both ids first.
fn connected(port: u16, ack: Option<u8>, sch: &EventChannel, cch: &EventChannel) -> (CmId, CmId) {
    let listener = CmId::new(sch, PortSpace::Tcp);
    listener
        .bind_addr(addr(&format!("192.0.2.2:{port}")))
        .unwrap();
    listener.listen(1).unwrap();
    let client = CmId::new(cch, PortSpace::Tcp);
    let to = addr(&format!("192.0.2.2:{port}"));
    client
        .resolve_addr(Some(addr("192.0.2.1:0")), to, T)
        .unwrap();
    expect(cch, EventKind::AddrResolved);
    if let Some(t) = ack {
        client.set_ack_timeout(t).unwrap();
    }
    client.resolve_route(T).unwrap();
    expect(cch, EventKind::RouteResolved);
    let c = client.context().unwrap();
    let (pd, cq) = (c.alloc_pd().unwrap(), c.create_cq(8, None).unwrap());
    client.create_qp(&pd, &cq, &cq, QpCap::default()).unwrap();
    client.connect(&ConnParam::default()).unwrap();
    let req = expect(sch, EventKind::ConnectRequest);
    let child = req.id.clone();
    if let Some(t) = ack {
        child.set_ack_timeout(t).unwrap();
    }
    let s = child.context().unwrap();
    let (pd, cq) = (s.alloc_pd().unwrap(), s.create_cq(8, None).unwrap());
    child.create_qp(&pd, &cq, &cq, QpCap::default()).unwrap();
    child.accept(&ConnParam::default()).unwrap();
    expect(cch, EventKind::Established);
    (client, child)
}

/// `RDMA_OPTION_ID_ACK_TIMEOUT` (perftest sets 14) replaces the CM's ACK timeout on both
/// sides' QPs; without it the QPs get the one the CM derives from the path. Then: an event
/// left queued holds its id, yet once the last `EventChannel` handle and the ids go, so do
/// the queued events, the ids and their QPs (no cycle through the channel).
#[test]
fn ack_timeout_option_and_ids_that_go_with_their_channel() {
    let (sch, cch) = (EventChannel::new().unwrap(), EventChannel::new().unwrap());
    let (c14, s14) = connected(7175, Some(14), &sch, &cch);
    assert_eq!(c14.qp().unwrap().query().unwrap().timeout, 14);
    assert_eq!(s14.qp().unwrap().query().unwrap().timeout, 14);
    let (sch2, cch2) = (EventChannel::new().unwrap(), EventChannel::new().unwrap());
    let (c, s) = connected(7176, None, &sch2, &cch2);
    assert_ne!(c.qp().unwrap().query().unwrap().timeout, 14);
    assert_ne!(s.qp().unwrap().query().unwrap().timeout, 14);

    let (sch, cch) = (EventChannel::new().unwrap(), EventChannel::new().unwrap());
    let (client, child) = connected(7177, None, &sch, &cch);
    let emu1 = child.context().unwrap();
    let qpn = child.qp().unwrap().qp_num();
    assert!(emu1.emulator().unwrap().qp_state(qpn).is_some());
    // sch still holds the child's Established event.
    drop((child, sch));
    let deadline = std::time::Instant::now() + T;
    while emu1.emulator().unwrap().qp_state(qpn).is_some() {
        assert!(std::time::Instant::now() < deadline, "QP {qpn:#x} stays");
        std::thread::sleep(Duration::from_millis(10));
    }
    drop((client, cch));
}
