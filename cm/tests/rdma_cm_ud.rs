//! UD through rdma_cm (port space UDP, SIDR) between the emulated pair emu0 (192.0.2.1) and
//! emu1 (192.0.2.2) in one process: the SIDR REQ / REP handshake through each device's CM
//! agent, then UD messages both ways with what the events carry (QPN, Q_Key, address).

use rnic_cm::cma::{self, ConnParam};
use rnic_cm::rdma_cm::{CmEvent, CmId, EventChannel, EventKind, IdState};
use rnic_cm::wire::ip::PortSpace;
use rnic_verbs::{
    AccessFlags, AhAttr, MemoryRegion, QpCap, QpType, QueuePair, RecvWr, SendWr, WcOpcode,
    WorkCompletion,
};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

const T: Duration = Duration::from_secs(20);
/// The GRH area in front of every UD payload received.
const GRH: usize = 40;

fn expect(ch: &EventChannel, kind: EventKind) -> CmEvent {
    let ev = ch.get_event(Some(T)).unwrap().expect("an event in time");
    assert_eq!(ev.kind, kind, "{ev:?}");
    ev
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn cap() -> QpCap {
    QpCap {
        max_send_wr: 8,
        max_recv_wr: 8,
        max_send_sge: 1,
        max_recv_sge: 1,
        ..QpCap::default()
    }
}

/// One side's UD QP and a buffer (GRH area + 64 bytes) with a receive posted into it.
struct Side {
    qp: Arc<QueuePair>,
    cq: rnic_verbs::CompletionQueue,
    mr: MemoryRegion,
}

impl Side {
    fn new(id: &CmId) -> Side {
        let ctx = id.context().unwrap();
        let (pd, cq) = (ctx.alloc_pd().unwrap(), ctx.create_cq(16, None).unwrap());
        let qp = id.create_qp(&pd, &cq, &cq, cap()).unwrap();
        let mr = pd.reg_mr(GRH + 64, AccessFlags::LOCAL_WRITE).unwrap();
        let sge = [mr.sge(0, (GRH + 64) as u32).unwrap()];
        qp.post_recv(&[RecvWr::new(1, &sge)]).unwrap();
        Side { qp, cq, mr }
    }

    fn poll(&self) -> WorkCompletion {
        let mut wc = [WorkCompletion::default(); 1];
        assert_eq!(self.cq.poll_blocking(&mut wc, T).unwrap(), 1);
        assert!(wc[0].is_success(), "{:?}", wc[0]);
        wc[0]
    }
}

/// A client UDP id on emu0 with its route to `dst` resolved.
fn client(ch: &EventChannel, dst: &str) -> CmId {
    let id = CmId::new(ch, PortSpace::Udp);
    // No source given: the other one of the pair (as the route to it would say).
    id.resolve_addr(None, addr(dst), T).unwrap();
    expect(ch, EventKind::AddrResolved);
    assert_eq!(id.local_addr().unwrap().ip(), addr("192.0.2.1:0").ip());
    id.resolve_route(T).unwrap();
    expect(ch, EventKind::RouteResolved);
    id
}

#[test]
fn sidr_accept_gives_the_service_qp_and_ud_messages_flow_both_ways() {
    let (sch, cch) = (EventChannel::new().unwrap(), EventChannel::new().unwrap());
    let listener = CmId::new(&sch, PortSpace::Udp);
    assert_eq!(listener.qp_type(), QpType::Ud);
    listener.bind_addr(addr("192.0.2.2:7174")).unwrap();
    listener.listen(8).unwrap();

    let id = client(&cch, "192.0.2.2:7174");
    let c = Side::new(&id);
    assert_eq!(c.qp.qp_type(), QpType::Ud);
    let q = c.qp.query().unwrap();
    assert_eq!(
        (q.qp_state, q.qkey, q.sq_psn),
        (rnic_verbs::QpState::Rts, cma::UDP_QKEY, 0)
    );
    id.connect(&ConnParam {
        private_data: b"ud?".to_vec(),
        ..ConnParam::default()
    })
    .unwrap();

    let req = expect(&sch, EventKind::ConnectRequest);
    let ud = req.ud.clone().expect("param.ud of a UD id");
    assert_eq!(ud.private_data.len(), cma::SIDR_REQ_USER_DATA_LEN);
    assert_eq!(&ud.private_data[..3], b"ud?");
    let child = req.id.clone();
    assert_eq!(child.state(), IdState::ConnectRequest);
    assert_eq!(child.peer_addr(), id.local_addr());
    let s = Side::new(&child);
    child
        .accept(&ConnParam {
            private_data: b"ud!".to_vec(),
            ..ConnParam::default()
        })
        .unwrap();
    assert_eq!(child.state(), IdState::Established);

    let est = expect(&cch, EventKind::Established);
    let ud = est.ud.expect("param.ud");
    assert_eq!((ud.qp_num, ud.qkey), (s.qp.qp_num(), cma::UDP_QKEY));
    assert_eq!(&ud.private_data[..3], b"ud!");
    let ah_attr = ud.ah_attr.expect("an address to send with");
    assert_eq!(id.state(), IdState::Established);

    // Client -> server: SEND with immediate (the client's QPN, as udaddy sends).
    let cpd = c.qp.pd().clone();
    let ah = cpd.create_ah(&ah_attr).unwrap();
    c.mr.write(GRH, b"to the service").unwrap();
    let sge = [c.mr.sge(GRH, 14).unwrap()];
    let wr = SendWr::send_with_imm(2, &sge, c.qp.qp_num())
        .signaled()
        .ud(&ah, ud.qp_num, ud.qkey);
    c.qp.post_send(&[wr]).unwrap();
    assert_eq!(c.poll().opcode(), WcOpcode::Send);
    let got = s.poll();
    assert_eq!(
        (got.opcode(), got.byte_len(), got.imm_data(), got.src_qp()),
        (
            WcOpcode::Recv,
            (GRH + 14) as u32,
            Some(c.qp.qp_num()),
            c.qp.qp_num()
        )
    );
    assert_eq!(s.mr.to_vec(GRH, 14).unwrap(), b"to the service");

    // Server -> client: back to the sender, from the GRH of what came in.
    let sctx = child.context().unwrap();
    let back = AhAttr::from_grh(&sctx, &s.mr.to_vec(0, GRH).unwrap()).unwrap();
    assert_eq!(
        Some(back.dgid),
        req.ud.and_then(|u| u.ah_attr).map(|a| a.dgid)
    );
    let sah = s.qp.pd().create_ah(&back).unwrap();
    s.mr.write(GRH, b"and back").unwrap();
    let sge = [s.mr.sge(GRH, 8).unwrap()];
    let qkey = s.qp.query().unwrap().qkey;
    let wr = SendWr::send(3, &sge).ud(&sah, got.src_qp(), qkey);
    s.qp.post_send(&[wr]).unwrap();
    let got = c.poll();
    assert_eq!(
        (got.opcode(), got.byte_len()),
        (WcOpcode::Recv, (GRH + 8) as u32)
    );
    assert_eq!(c.mr.to_vec(GRH, 8).unwrap(), b"and back");

    // A UD id has no connection: disconnect only moves the QP to error.
    id.disconnect().unwrap();
    assert_eq!(id.state(), IdState::Disconnected);
    assert_eq!(c.qp.state(), rnic_verbs::QpState::Err);
    assert!(
        cch.get_event(Some(Duration::from_millis(200)))
            .unwrap()
            .is_none()
    );
    let k = id.cm_counters().unwrap();
    assert_eq!(k.rx_outcomes(), k.rx_mads);
}

#[test]
fn sidr_reject_is_unreachable_with_status_2_and_the_private_data() {
    let (sch, cch) = (EventChannel::new().unwrap(), EventChannel::new().unwrap());
    let listener = CmId::new(&sch, PortSpace::Udp);
    listener.bind_addr(addr("192.0.2.2:7175")).unwrap();
    listener.listen(8).unwrap();
    let id = client(&cch, "192.0.2.2:7175");
    // No QP needed to ask.
    id.connect(&ConnParam::default()).unwrap();
    let req = expect(&sch, EventKind::ConnectRequest);
    req.id.reject(b"not you").unwrap();
    assert_eq!(req.id.state(), IdState::Failed);
    let ev = expect(&cch, EventKind::Unreachable);
    assert_eq!(ev.status, 2);
    assert_eq!(&ev.ud.unwrap().private_data[..7], b"not you");
    assert_eq!(id.state(), IdState::Failed);
}

#[test]
fn sidr_to_a_port_nobody_listens_on_is_unreachable_service_id_not_supported() {
    let (sch, cch) = (EventChannel::new().unwrap(), EventChannel::new().unwrap());
    // emu1's CM runs (an id listens there on another port), as a kernel's always does.
    let other = CmId::new(&sch, PortSpace::Udp);
    other.bind_addr(addr("192.0.2.2:7176")).unwrap();
    other.listen(1).unwrap();
    let id = client(&cch, "192.0.2.2:7177");
    id.connect(&ConnParam::default()).unwrap();
    let ev = expect(&cch, EventKind::Unreachable);
    // IBTA table 120: 1, the service ID is not supported.
    assert_eq!(ev.status, 1);
    // A TCP listener on the port does not serve UD either.
    let tcp = CmId::new(&sch, PortSpace::Tcp);
    tcp.bind_addr(addr("192.0.2.2:7178")).unwrap();
    tcp.listen(1).unwrap();
    let id = client(&cch, "192.0.2.2:7178");
    id.connect(&ConnParam::default()).unwrap();
    // The TCP listener's service ID is of another port space: no UDP service there.
    assert_eq!(expect(&cch, EventKind::Unreachable).status, 1);
    assert!(
        sch.get_event(Some(Duration::from_millis(200)))
            .unwrap()
            .is_none()
    );
}

#[test]
fn ud_calls_out_of_order_and_ipoib_are_typed_errors() {
    let ch = EventChannel::new().unwrap();
    let id = CmId::new(&ch, PortSpace::Udp);
    assert!(matches!(
        id.connect(&ConnParam::default()),
        Err(rnic_cm::rdma_cm::Error::InvalidState { .. })
    ));
    let ipoib = CmId::new(&ch, PortSpace::Ipoib);
    assert!(matches!(
        ipoib.bind_addr(addr("192.0.2.1:1")),
        Err(rnic_cm::rdma_cm::Error::InvalidArgument { .. })
    ));
    // Too much private data for a SIDR REQ (216 - 36 bytes of rdma_cm's header).
    let id = client(&ch, "192.0.2.2:7179");
    assert!(matches!(
        id.connect(&ConnParam {
            private_data: vec![0; cma::SIDR_REQ_USER_DATA_LEN + 1],
            ..ConnParam::default()
        }),
        Err(rnic_cm::rdma_cm::Error::Cm(_))
    ));
    assert_eq!(id.state(), IdState::RouteResolved);
    assert!(matches!(
        id.disconnect(),
        Err(rnic_cm::rdma_cm::Error::InvalidState { .. })
    ));
}
