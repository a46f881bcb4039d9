//! The rdma_cm API between the emulated pair emu0 (192.0.2.1) and emu1 (192.0.2.2) in one
//! process: each device's CM agent on its GSI QP, real MADs over the in-process link.

use rnic_cm::cma::ConnParam;
use rnic_cm::rdma_cm::{CmEvent, CmId, Error, EventChannel, EventKind, IdState};
use rnic_cm::wire::ip::PortSpace;
use rnic_verbs::{AccessFlags, QpCap, SendWr, WorkCompletion};
use std::net::SocketAddr;
use std::time::Duration;

const T: Duration = Duration::from_secs(20);

fn next(ch: &EventChannel) -> CmEvent {
    ch.get_event(Some(T)).unwrap().expect("an event in time")
}

fn expect(ch: &EventChannel, kind: EventKind) -> CmEvent {
    let ev = next(ch);
    assert_eq!(ev.kind, kind, "{ev:?}");
    ev
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

#[test]
fn connect_accept_write_disconnect_timewait() {
    let (sch, cch) = (EventChannel::new().unwrap(), EventChannel::new().unwrap());
    let listener = CmId::new(&sch, PortSpace::Tcp);
    listener.bind_addr(addr("192.0.2.2:7174")).unwrap();
    listener.listen(8).unwrap();
    // A second listener on the port: typed error.
    let again = CmId::new(&sch, PortSpace::Tcp);
    again.bind_addr(addr("192.0.2.2:7174")).unwrap();
    assert!(matches!(again.listen(8), Err(Error::AddrInUse(_))));

    let client = CmId::new(&cch, PortSpace::Tcp);
    client
        .resolve_addr(Some(addr("192.0.2.1:0")), addr("192.0.2.2:7174"), T)
        .unwrap();
    expect(&cch, EventKind::AddrResolved).ack();
    // RDMA_OPTION_ID_ACK_TIMEOUT: the QP's local ACK timeout (the server sets its own).
    client.set_ack_timeout(16).unwrap();
    assert!(client.set_ack_timeout(32).is_err());
    client.resolve_route(T).unwrap();
    expect(&cch, EventKind::RouteResolved).ack();
    let cctx = client.context().unwrap();
    let (cpd, ccq) = (cctx.alloc_pd().unwrap(), cctx.create_cq(16, None).unwrap());
    let cqp = client
        .create_qp(&cpd, &ccq, &ccq, QpCap::default())
        .unwrap();
    let conn = ConnParam {
        private_data: b"client hello".to_vec(),
        responder_resources: 2,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        ..ConnParam::default()
    };
    client.connect(&conn).unwrap();

    let req = expect(&sch, EventKind::ConnectRequest);
    assert_eq!(&req.param.private_data[..12], b"client hello");
    assert_eq!(req.param.qp_num, cqp.qp_num());
    // From the server's view: it serves the client's one READ at a time, and may issue
    // two.
    assert_eq!(
        (req.param.responder_resources, req.param.initiator_depth),
        (1, 2)
    );
    let child = req.id.clone();
    assert!(child == req.id && child != listener && req.listen_id.as_ref() == Some(&listener));
    assert_eq!(child.state(), IdState::ConnectRequest);
    assert_eq!(child.peer_addr().unwrap().ip(), addr("192.0.2.1:1").ip());
    let sctx = child.context().unwrap();
    let (spd, scq) = (sctx.alloc_pd().unwrap(), sctx.create_cq(16, None).unwrap());
    let sqp = child.create_qp(&spd, &scq, &scq, QpCap::default()).unwrap();
    child.set_ack_timeout(17).unwrap();
    child
        .accept(&ConnParam {
            private_data: b"server hello".to_vec(),
            responder_resources: 1,
            initiator_depth: 1,
            ..ConnParam::default()
        })
        .unwrap();
    let est = expect(&cch, EventKind::Established);
    assert_eq!(&est.param.private_data[..12], b"server hello");
    expect(&sch, EventKind::Established).ack();
    assert_eq!(client.state(), IdState::Established);
    assert_eq!(
        (cqp.query().unwrap().timeout, sqp.query().unwrap().timeout),
        (16, 17)
    );

    // An RDMA WRITE over the connected QPs.
    let smr = spd
        .reg_mr(64, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)
        .unwrap();
    let cmr = cpd.reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
    cmr.write(0, b"written over the CM's QPs").unwrap();
    let sge = cmr.sge(0, 25).unwrap();
    cqp.post_send(&[SendWr::write(7, &[sge], smr.remote(0)).signaled()])
        .unwrap();
    let mut wc = [WorkCompletion::default(); 1];
    assert_eq!(ccq.poll_blocking(&mut wc, T).unwrap(), 1);
    assert!(wc[0].is_success(), "{:?}", wc[0]);
    let mut got = [0u8; 25];
    smr.read(0, &mut got).unwrap();
    assert_eq!(&got, b"written over the CM's QPs");

    client.disconnect().unwrap();
    expect(&sch, EventKind::Disconnected).ack();
    child.disconnect().unwrap();
    expect(&cch, EventKind::Disconnected).ack();
    expect(&cch, EventKind::TimewaitExit).ack();
    expect(&sch, EventKind::TimewaitExit).ack();
    drop(sqp);
}

#[test]
fn connect_to_a_port_nobody_listens_on_is_rejected_invalid_service_id() {
    let ch = EventChannel::new().unwrap();
    // emu1's CM runs (an id is bound there, listening on another port), as a kernel's
    // always does; nothing listens on port 9.
    let other = CmId::new(&ch, PortSpace::Tcp);
    other.bind_addr(addr("192.0.2.2:10")).unwrap();
    other.listen(1).unwrap();
    let id = CmId::new(&ch, PortSpace::Tcp);
    id.resolve_addr(Some(addr("192.0.2.1:0")), addr("192.0.2.2:9"), T)
        .unwrap();
    expect(&ch, EventKind::AddrResolved);
    id.resolve_route(T).unwrap();
    expect(&ch, EventKind::RouteResolved);
    let ctx = id.context().unwrap();
    let (pd, cq) = (ctx.alloc_pd().unwrap(), ctx.create_cq(4, None).unwrap());
    id.create_qp(&pd, &cq, &cq, QpCap::default()).unwrap();
    id.connect(&ConnParam::default()).unwrap();
    let ev = expect(&ch, EventKind::Rejected);
    assert_eq!(ev.status, 8);
    assert_eq!(id.state(), IdState::Failed);
    // Calls that do not fit the state are refused.
    assert!(matches!(
        id.accept(&ConnParam::default()),
        Err(Error::InvalidState { .. })
    ));
}

#[test]
fn migrate_moves_the_queued_events_and_the_later_ones() {
    let (old, new) = (EventChannel::new().unwrap(), EventChannel::new().unwrap());
    let other = CmId::new(&old, PortSpace::Tcp);
    let id = CmId::new(&old, PortSpace::Tcp);
    other
        .resolve_addr(Some(addr("192.0.2.1:0")), addr("192.0.2.2:7190"), T)
        .unwrap();
    id.resolve_addr(Some(addr("192.0.2.1:0")), addr("192.0.2.2:7190"), T)
        .unwrap();
    id.migrate(&new);
    // The id's queued AddrResolved moved; the other id's stayed.
    let ev = expect(&new, EventKind::AddrResolved);
    assert!(ev.id == id);
    let ev = expect(&old, EventKind::AddrResolved);
    assert!(ev.id == other);
    assert!(old.try_get_event().is_none() && new.try_get_event().is_none());
    id.resolve_route(T).unwrap();
    assert!(expect(&new, EventKind::RouteResolved).id == id);
    assert!(old.try_get_event().is_none());
}

/// A device's agent (and its GSI QP: one per port) is started by the first id bound to the
/// device and stops when the last id goes; an id bound in another thread while the previous
/// agent is still stopping waits for it rather than failing to create a second GSI QP. (The
/// pauses give the threads their turns at varying points.)
#[test]
fn binding_while_the_previous_agent_stops_finds_the_gsi_qp_free() {
    let run = |base: u16, pause: u64| {
        move || {
            let ch = EventChannel::new().unwrap();
            for i in 0..300u16 {
                let id = CmId::new(&ch, PortSpace::Tcp);
                id.bind_addr(addr(&format!("192.0.2.1:{}", base + i)))
                    .unwrap_or_else(|e| panic!("bind {i}: {e}"));
                std::thread::sleep(Duration::from_micros(u64::from(i % 7) * pause));
                drop(id);
                std::thread::sleep(Duration::from_micros(u64::from(i % 5) * pause));
            }
        }
    };
    let a = std::thread::spawn(run(20000, 100));
    let b = std::thread::spawn(run(21000, 130));
    a.join().unwrap();
    b.join().unwrap();
}
