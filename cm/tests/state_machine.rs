//! The chapter-12 state machine end to end: a client and a server endpoint wired to each
//! other in memory with virtual time (tests/common), through connect, reject, disconnect,
//! lost MADs and their retries, MRA, duplicates, stale messages and SIDR.

mod common;

use common::{CLIENT_GUID, CLIENT_QPN, Pair, SERVER_QPN, Side, attr};
use core::time::Duration;
use rnic_cm::cma::{self, RoceRoute};
use rnic_cm::time::{Instant, ack_timeout, iba_time};
use rnic_cm::wire::ip::PortSpace;
use rnic_cm::wire::{Drep, Dreq, MAD_LEN, Mra, Rej, Rep, Req, Rtu, SidrReq};
use rnic_cm::{Config, Endpoint, Event, MadAddr, RecvError, SidrParams, State};

/// rdma_cm's REQ response timeout: twice the packet life time plus the peer's 2^20.
fn req_timeout() -> Duration {
    iba_time(cma::IBOE_PACKET_LIFETIME) * 2 + iba_time(cma::CM_RESPONSE_TIMEOUT)
}

#[test]
fn connect_accept_rtu_establishes_both_sides() {
    let mut p = Pair::new();
    let (c, s) = p.establish();
    assert_eq!(p.client.state(c), Some(State::Established));
    assert_eq!(p.server.state(s), Some(State::Established));
    assert_eq!(p.client.remote(c).unwrap().0, SERVER_QPN);
    assert_eq!(p.server.remote(s).unwrap().0, CLIENT_QPN);
    assert_eq!(p.take_events(Side::Client), [Event::Established { id: c }]);
    assert_eq!(p.take_events(Side::Server), [Event::Established { id: s }]);
    // REQ, REP, RTU once each, no retries, no timers left running.
    let attrs: Vec<u16> = p.wire.iter().map(|s| s.attr).collect();
    assert_eq!(attrs, [Req::ATTR_ID, Rep::ATTR_ID, Rtu::ATTR_ID]);
    assert_eq!((p.client.poll_at(), p.server.poll_at()), (None, None));
    assert_eq!(
        p.client.counters().tx_retries + p.server.counters().tx_retries,
        0
    );
    // The private data crossed: the REQ's after rdma_cm's header, the REP's as is.
    let req = Req::parse(&p.wire[0].mad).unwrap();
    let (h, user) = cma::split_private_data(&req.private_data).unwrap();
    assert_eq!(
        (h.src, h.src_port, &user[..12]),
        (p.route.src.ip(), 56810, &b"client hello"[..])
    );
    let rep = Rep::parse(&p.wire[1].mad).unwrap();
    assert_eq!(&rep.private_data[..12], b"server hello");
    assert_eq!(
        (rep.local_ca_guid, rep.target_ack_delay),
        (common::SERVER_GUID, 15)
    );
}

#[test]
fn reject_with_private_data_reaches_the_client_and_leaves_nothing() {
    let mut p = Pair::new();
    let c = p.connect();
    p.pump();
    let s = p.server_request();
    let now = p.now;
    p.server.reject(now, s, 28, &[], b"not today").unwrap();
    p.pump();
    let evs = p.take_events(Side::Client);
    let [Event::Rejected { id, rej }] = evs.as_slice() else {
        panic!("{evs:?}")
    };
    assert_eq!((*id, rej.reason, rej.message_rejected), (c, 28, 0));
    assert_eq!(&rej.private_data[..9], b"not today");
    assert_eq!((p.client.connections(), p.server.connections()), (0, 0));
    assert_eq!((p.client.poll_at(), p.server.poll_at()), (None, None));
    // Nothing to reject any more.
    assert!(p.server.reject(now, s, 28, &[], &[]).is_err());
}

#[test]
fn dreq_drep_then_timewait_exit_after_the_timewait() {
    let mut p = Pair::new();
    let (c, s) = p.establish();
    p.take_events(Side::Client);
    p.take_events(Side::Server);
    let t0 = p.now;
    p.client.disconnect(t0, c, b"bye").unwrap();
    p.pump();
    let evs = p.take_events(Side::Server);
    let [Event::DisconnectRequest { id, private_data }] = evs.as_slice() else {
        panic!("{evs:?}")
    };
    assert_eq!((*id, &private_data[..3]), (s, &b"bye"[..]));
    assert_eq!(p.server.state(s), Some(State::DreqRcvd));
    p.server.disconnect_reply(t0, s, &[]).unwrap();
    p.pump();
    assert_eq!(p.take_events(Side::Client), [Event::Disconnected { id: c }]);
    assert_eq!(p.client.state(c), Some(State::Timewait));
    assert_eq!(p.server.state(s), Some(State::Timewait));
    p.run_until(|p| p.client.connections() + p.server.connections() == 0);
    // Timewait is the path's timeout: the REQ's ACK timeout on the server, the ACK
    // timeout recomputed from the REP's target ACK delay on the client.
    let tw = iba_time(ack_timeout(15, cma::IBOE_PACKET_LIFETIME));
    let exits: Vec<_> = p
        .events
        .iter()
        .filter(|(_, _, e)| matches!(e, Event::TimewaitExit { .. }))
        .collect();
    assert_eq!(exits.len(), 2);
    for (at, _, _) in exits {
        assert_eq!(*at, t0 + tw);
    }
}

#[test]
fn lost_reqs_are_retried_at_the_response_timeout_and_the_handshake_completes() {
    let mut p = Pair::new();
    let mut lost = 0;
    p.drop = Box::new(move |side, t| {
        if side == Side::Client && attr(&t.mad) == Req::ATTR_ID && lost < 3 {
            lost += 1;
            return true;
        }
        false
    });
    let c = p.connect();
    p.run_until(|p| !p.events.is_empty());
    let s = p.server_request();
    let t = req_timeout();
    let z = Instant::ZERO;
    assert_eq!(
        p.sent(Side::Client, Req::ATTR_ID),
        [z, z + t, z + t * 2, z + t * 3]
    );
    assert_eq!(p.client.counters().tx_retries, 3);
    p.accept(s);
    p.pump();
    p.client.ready_to_use(c, &[]).unwrap();
    p.pump();
    assert_eq!(p.server.state(s), Some(State::Established));
    // The REQ's retries stopped with the REP.
    assert_eq!(p.client.poll_at(), None);
}

#[test]
fn req_retries_exhausted_send_a_timeout_rej_and_report_unreachable() {
    let mut p = Pair::new();
    p.drop = Box::new(|side, _| side == Side::Client);
    let mut conn = cma::ConnParam {
        qp_num: CLIENT_QPN,
        ..Default::default()
    };
    conn.retry_count = 7;
    let mut params = cma::connect_params(&p.route, PortSpace::Tcp, &conn, 1, 15).unwrap();
    params.req.max_cm_retries = 3;
    let c = p.client.connect(p.now, &params).unwrap();
    p.run_until(|p| p.client.connections() == 0);
    let t = req_timeout();
    let z = Instant::ZERO;
    assert_eq!(
        p.sent(Side::Client, Req::ATTR_ID),
        [z, z + t, z + t * 2, z + t * 3]
    );
    let rejs: Vec<_> = p.wire.iter().filter(|s| s.attr == Rej::ATTR_ID).collect();
    assert_eq!(rejs.len(), 1);
    assert_eq!(rejs[0].at, z + t * 4);
    let rej = Rej::parse(&rejs[0].mad).unwrap();
    assert_eq!(
        (rej.reason, rej.ari().unwrap()),
        (4, &CLIENT_GUID.to_be_bytes()[..])
    );
    assert_eq!(p.take_events(Side::Client), [Event::Unreachable { id: c }]);
    let k = p.client.counters();
    assert_eq!(
        (k.tx_retries, k.timeouts, k.tx_by_attr[0], k.tx_by_attr[2]),
        (3, 1, 4, 1)
    );
}

#[test]
fn rep_retries_exhausted_reject_the_established_client_with_timeout() {
    let mut p = Pair::new();
    // RTUs never arrive; the client keeps answering the REP's retries with RTUs.
    p.drop = Box::new(|side, t| side == Side::Client && attr(&t.mad) == Rtu::ATTR_ID);
    let (c, s) = p.establish();
    assert_eq!(p.server.state(s), Some(State::RepSent));
    p.run_until(|p| p.server.connections() == 0);
    // The REP waits the REQ's Local CM Response Timeout, Max CM Retries (15) times.
    let reps = p.sent(Side::Server, Rep::ATTR_ID);
    assert_eq!(reps.len(), 16);
    let t = iba_time(cma::CM_RESPONSE_TIMEOUT);
    for (i, at) in reps.iter().enumerate() {
        assert_eq!(*at, Instant::ZERO + t * i as u32);
    }
    assert_eq!(
        p.sent(Side::Client, Rtu::ATTR_ID).len(),
        16,
        "each duplicate REP gets the RTU again"
    );
    assert_eq!(p.client.counters().rx_duplicates, 15);
    let evs = p.take_events(Side::Client);
    assert!(
        evs.iter()
            .any(|e| matches!(e, Event::Rejected { id, rej } if *id == c && rej.reason == 4)),
        "{evs:?}"
    );
    assert_eq!(p.client.state(c), Some(State::Timewait));
}

#[test]
fn mra_stops_the_retries_and_extends_the_wait() {
    let mut p = Pair::new();
    let c = p.connect();
    p.pump();
    let s = p.server_request();
    p.server.mra(s, 22, &[], false).unwrap();
    p.pump();
    assert_eq!(
        p.take_events(Side::Client),
        [Event::MraReceived {
            id: c,
            service_timeout: 22
        }]
    );
    assert_eq!(p.client.state(c), Some(State::MraReqRcvd));
    // The wait is the service time plus the path's timeout, and no REQ is resent.
    let deadline = Instant::ZERO + iba_time(22) + iba_time(cma::IBOE_PACKET_LIFETIME + 1);
    assert_eq!(p.client.poll_at(), Some(deadline));
    p.now = Instant::from_nanos(deadline.as_nanos() - 1);
    p.client.poll(p.now);
    p.server.poll(p.now);
    p.pump();
    assert_eq!(p.sent(Side::Client, Req::ATTR_ID).len(), 1);
    // The server accepts late, still in time.
    p.accept(s);
    p.pump();
    p.client.ready_to_use(c, &[]).unwrap();
    p.pump();
    assert_eq!(p.server.state(s), Some(State::Established));
}

#[test]
fn mra_wait_running_out_is_unreachable() {
    let mut p = Pair::new();
    let c = p.connect();
    p.pump();
    let s = p.server_request();
    p.server.mra(s, 10, &[], false).unwrap();
    p.pump();
    p.take_events(Side::Client);
    p.run_until(|p| p.client.connections() == 0);
    let at = Instant::ZERO + iba_time(10) + iba_time(cma::IBOE_PACKET_LIFETIME + 1);
    assert_eq!(
        p.events[0],
        (at, Side::Client, Event::Unreachable { id: c })
    );
    // The server got the timeout REJ and dropped the request.
    assert!(p.events.iter().any(|(_, side, e)| *side == Side::Server
        && matches!(e, Event::Rejected { rej, .. } if rej.reason == 4)));
    assert_eq!(p.server.connections(), 0);
}

/// Delivers `mad` to `side` as if sent by the other side.
fn inject(p: &mut Pair, to: Side, mad: &[u8]) -> Result<(), RecvError> {
    let from = match to {
        Side::Server => p.client_addr(),
        Side::Client => p.server_addr(),
    };
    let now = p.now;
    p.ep(to).receive(now, from, mad)
}

#[test]
fn duplicate_reqs_are_dropped_or_answered_with_the_mra_or_rep() {
    let mut p = Pair::new();
    p.connect();
    p.pump();
    let req = p.wire[0].mad;
    let s = p.server_request();
    // In REQ_RCVD: dropped.
    assert_eq!(
        inject(&mut p, Side::Server, &req),
        Err(RecvError::Duplicate(s))
    );
    assert_eq!(p.server.poll_transmit(), None);
    // After a delayed MRA (rdma_cm's): the duplicate gets the MRA.
    p.server
        .mra(s, cma::MRA_SERVICE_TIMEOUT, &[], true)
        .unwrap();
    assert_eq!(p.server.poll_transmit(), None);
    assert_eq!(
        inject(&mut p, Side::Server, &req),
        Err(RecvError::Duplicate(s))
    );
    let mra = Mra::parse(&p.server.poll_transmit().unwrap().mad).unwrap();
    assert_eq!(
        (mra.message_mraed, mra.service_timeout, mra.remote_comm_id),
        (0, 24, req_id(&req))
    );
    // After the REP: the duplicate gets the REP again.
    p.accept(s);
    let rep = p.server.poll_transmit().unwrap();
    assert_eq!(
        inject(&mut p, Side::Server, &req),
        Err(RecvError::Duplicate(s))
    );
    assert_eq!(p.server.poll_transmit(), Some(rep));
    assert_eq!(p.server.counters().rx_duplicates, 3);
    assert_eq!(p.server.connections(), 1);
}

fn req_id(req: &[u8]) -> u32 {
    Req::parse(req).unwrap().local_comm_id
}

#[test]
fn stale_rep_in_timewait_gets_rej_stale_and_dup_dreq_gets_drep() {
    let mut p = Pair::new();
    let (c, s) = p.establish();
    let rep = p.wire[1].mad;
    let now = p.now;
    p.client.disconnect(now, c, &[]).unwrap();
    p.pump();
    p.server.disconnect_reply(now, s, b"drep pd").unwrap();
    p.pump();
    let dreq = p.wire.iter().find(|w| w.attr == Dreq::ATTR_ID).unwrap().mad;
    assert_eq!(p.client.state(c), Some(State::Timewait));
    // The old REP again, in timewait: stale connection.
    assert_eq!(
        inject(&mut p, Side::Client, &rep),
        Err(RecvError::Refused(10))
    );
    let rej = Rej::parse(&p.client.poll_transmit().unwrap().mad).unwrap();
    assert_eq!((rej.reason, rej.local_comm_id), (10, c.0));
    // The DREQ again, in timewait: the same DREP.
    assert_eq!(
        inject(&mut p, Side::Server, &dreq),
        Err(RecvError::Duplicate(s))
    );
    let drep = Drep::parse(&p.server.poll_transmit().unwrap().mad).unwrap();
    assert_eq!(
        (drep.local_comm_id, &drep.private_data[..7]),
        (s.0, &b"drep pd"[..])
    );
    // A DREQ for nothing known: a DREP all the same, counted as unmatched.
    let stray = Dreq {
        local_comm_id: 7,
        remote_comm_id: 8,
        ..Dreq::default()
    };
    let mut m = [0u8; MAD_LEN];
    stray.emit(5, &mut m);
    assert_eq!(
        inject(&mut p, Side::Server, &m),
        Err(RecvError::Unmatched(8))
    );
    let d = Drep::parse(&p.server.poll_transmit().unwrap().mad).unwrap();
    assert_eq!((d.local_comm_id, d.remote_comm_id), (8, 7));
}

#[test]
fn a_new_req_from_a_qp_still_in_timewait_is_stale() {
    let mut p = Pair::new();
    let (c, s) = p.establish();
    let now = p.now;
    p.client.disconnect(now, c, &[]).unwrap();
    p.pump();
    p.server.disconnect_reply(now, s, &[]).unwrap();
    p.pump();
    // A fresh REQ (new communication ID) from the same QP before the server's timewait ends.
    let mut req = Req::parse(&p.wire[0].mad).unwrap();
    req.local_comm_id ^= 0x5a5a;
    let mut m = [0u8; MAD_LEN];
    req.emit(77, &mut m);
    assert_eq!(
        inject(&mut p, Side::Server, &m),
        Err(RecvError::Refused(10))
    );
    let rej = Rej::parse(&p.server.poll_transmit().unwrap().mad).unwrap();
    assert_eq!(
        (rej.reason, rej.remote_comm_id, rej.message_rejected),
        (10, req.local_comm_id, 0)
    );
}

#[test]
fn req_for_an_unlistened_service_is_rejected_with_invalid_service_id() {
    let mut p = Pair::new();
    p.server
        .unlisten(p.route.service_id(PortSpace::Tcp))
        .unwrap();
    let c = p.connect();
    p.pump();
    let evs = p.take_events(Side::Client);
    let [Event::Rejected { id, rej }] = evs.as_slice() else {
        panic!("{evs:?}")
    };
    assert_eq!((*id, rej.reason, rej.message_rejected), (c, 8, 0));
    assert_eq!(p.server.counters().rx_rejected, 1);
    assert_eq!((p.client.connections(), p.server.connections()), (0, 0));
    assert!(p.server.listen(5).is_ok());
    assert!(p.server.listen(5).is_err(), "a port already listening");
}

#[test]
fn sidr_req_rep_round_trip_and_refusal() {
    let mut p = Pair::new();
    let sp = cma::sidr_params(&p.route, PortSpace::Udp, b"ud?").unwrap();
    let c = p.client.sidr_request(p.now, &sp).unwrap();
    p.pump();
    let evs = p.take_events(Side::Server);
    let [Event::SidrRequest { id, req, .. }] = evs.as_slice() else {
        panic!("{evs:?}")
    };
    let s = *id;
    assert_eq!(req.service_id, p.route.service_id(PortSpace::Udp));
    assert_eq!(
        &cma::split_private_data(&req.private_data).unwrap().1[..3],
        b"ud?"
    );
    // A duplicate while the consumer decides: dropped.
    let dup = p.wire[0].mad;
    assert_eq!(
        inject(&mut p, Side::Server, &dup),
        Err(RecvError::Duplicate(s))
    );
    p.server
        .sidr_reply(s, &cma::sidr_accept(0x99, 0, b"ud!").unwrap())
        .unwrap();
    p.pump();
    let evs = p.take_events(Side::Client);
    let [Event::SidrReply { id, rep }] = evs.as_slice() else {
        panic!("{evs:?}")
    };
    assert_eq!(
        (*id, rep.status, rep.qpn, rep.qkey),
        (c, 0, 0x99, cma::UDP_QKEY)
    );
    assert_eq!(&rep.private_data[..3], b"ud!");
    assert_eq!((p.client.connections(), p.server.connections()), (0, 0));

    // Nothing on that port: status 1.
    let other = RoceRoute::new(p.route.src, "10.11.0.2:9".parse().unwrap());
    let sp = cma::sidr_params(&other, PortSpace::Udp, &[]).unwrap();
    let c = p.client.sidr_request(p.now, &sp).unwrap();
    p.pump();
    let evs = p.take_events(Side::Client);
    let [Event::SidrReply { id, rep }] = evs.as_slice() else {
        panic!("{evs:?}")
    };
    assert_eq!((*id, rep.status), (c, 1));
}

#[test]
fn sidr_retries_exhausted_are_unreachable() {
    let mut ep = Endpoint::new(Config::default());
    let p = SidrParams {
        to: MadAddr::cm([9; 16], 0),
        req: SidrReq {
            service_id: 1,
            ..SidrReq::default()
        },
        timeout: Duration::from_millis(10),
        max_cm_retries: 2,
    };
    let id = ep.sidr_request(Instant::ZERO, &p).unwrap();
    let mut times = vec![Instant::ZERO];
    assert!(ep.poll_transmit().is_some());
    while let Some(at) = ep.poll_at() {
        ep.poll(at);
        if ep.poll_transmit().is_some() {
            times.push(at);
        }
    }
    let ms = |n| Instant::ZERO + Duration::from_millis(n);
    assert_eq!(times, [ms(0), ms(10), ms(20)]);
    assert_eq!(ep.poll_event(), Some(Event::Unreachable { id }));
    assert_eq!(ep.counters().timeouts, 1);
}

#[test]
fn malformed_and_unsupported_mads_are_typed_errors_and_counted() {
    let mut p = Pair::new();
    let (c, _) = p.establish();
    let good = p.wire[2].mad; // an RTU
    let from = p.client_addr();
    let mut ep = Endpoint::new(Config::default());
    let now = Instant::ZERO;
    let mut bad = |f: &dyn Fn(&mut [u8; MAD_LEN])| {
        let mut m = good;
        f(&mut m);
        ep.receive(now, from, &m)
    };
    use rnic_cm::wire::WireError::*;
    assert_eq!(
        bad(&|m| m[0] = 2),
        Err(RecvError::Malformed(BaseVersion(2)))
    );
    assert_eq!(
        bad(&|m| m[1] = 0x81),
        Err(RecvError::Malformed(Class(0x81)))
    );
    assert_eq!(
        bad(&|m| m[2] = 1),
        Err(RecvError::Malformed(ClassVersion(1)))
    );
    assert_eq!(
        bad(&|m| m[17] = 0x30),
        Err(RecvError::Malformed(UnknownAttribute(0x30)))
    );
    assert!(matches!(
        bad(&|m| m[3] = 1),
        Err(RecvError::Unsupported { method: 1, .. })
    ));
    assert!(matches!(
        bad(&|m| m[17] = 0x19),
        Err(RecvError::Unsupported { attr_id: 0x19, .. })
    ));
    // A REJ whose ARI length passes its room.
    let mut rej = [0u8; MAD_LEN];
    Rej {
        rejected_info_length: 73,
        ..Rej::default()
    }
    .emit(1, &mut rej);
    assert!(matches!(
        ep.receive(now, from, &rej),
        Err(RecvError::Malformed(Length { .. }))
    ));
    assert_eq!(
        ep.receive(now, from, &good[..100]),
        Err(RecvError::Malformed(Short { len: 100 }))
    );
    // A well-formed RTU for nobody.
    let rtu = Rtu::parse(&good).unwrap();
    assert_eq!(rtu.local_comm_id, c.0);
    assert_eq!(
        ep.receive(now, from, &good),
        Err(RecvError::Unmatched(rtu.remote_comm_id))
    );
    let k = ep.counters();
    assert_eq!(
        (k.rx_mads, k.rx_malformed, k.rx_unsupported, k.rx_unmatched),
        (9, 6, 2, 1)
    );
    assert_eq!(k.rx_outcomes(), k.rx_mads);
    assert_eq!(k.rx_by_attr.iter().sum::<u64>(), 1);
}

#[test]
fn destroy_ends_a_connection_in_any_state_with_the_message_it_needs() {
    // Established: one DREQ, then timewait.
    let mut p = Pair::new();
    let (c, s) = p.establish();
    p.take_events(Side::Server);
    let now = p.now;
    p.client.destroy(now, c).unwrap();
    p.pump();
    assert_eq!(p.client.state(c), Some(State::Timewait));
    assert!(
        matches!(p.take_events(Side::Server).as_slice(), [Event::DisconnectRequest { id, .. }] if *id == s)
    );
    // Destroying the server's side answers the DREQ.
    p.server.destroy(now, s).unwrap();
    p.pump();
    assert_eq!(p.server.state(s), Some(State::Timewait));
    assert_eq!(p.sent(Side::Server, Drep::ATTR_ID).len(), 1);

    // REQ sent, no answer yet: a timeout REJ reaches the server, which drops the request.
    let mut p = Pair::new();
    let c = p.connect();
    p.pump();
    let s = p.server_request();
    let now = p.now;
    p.client.destroy(now, c).unwrap();
    p.pump();
    assert_eq!(p.client.connections(), 0);
    let evs = p.take_events(Side::Server);
    assert!(
        matches!(evs.as_slice(), [Event::Rejected { id, rej }] if *id == s && rej.reason == 4),
        "{evs:?}"
    );
    assert_eq!(p.server.connections(), 0);
    assert_eq!(
        p.client.destroy(now, c),
        Err(rnic_cm::CmError::UnknownId(c))
    );
}

#[test]
fn a_req_from_the_qp_of_an_established_connection_is_stale_and_ends_it() {
    let mut p = Pair::new();
    let (_, s) = p.establish();
    let mut req = Req::parse(&p.wire[0].mad).unwrap();
    req.local_comm_id ^= 0x77;
    let mut m = [0u8; MAD_LEN];
    req.emit(78, &mut m);
    assert_eq!(
        inject(&mut p, Side::Server, &m),
        Err(RecvError::Refused(10))
    );
    let rej = Rej::parse(&p.server.poll_transmit().unwrap().mad).unwrap();
    assert_eq!(rej.reason, 10);
    let dreq = Dreq::parse(&p.server.poll_transmit().unwrap().mad).unwrap();
    assert_eq!(
        (dreq.local_comm_id, dreq.remote_qpn_eecn),
        (s.0, CLIENT_QPN)
    );
    assert_eq!(p.server.state(s), Some(State::DreqSent));
}

#[test]
fn a_req_for_rd_is_rejected_with_invalid_transport_type() {
    let mut p = Pair::new();
    let mut req = Req {
        service_id: p.route.service_id(PortSpace::Tcp),
        transport_service_type: 3,
        local_comm_id: 42,
        ..Req::default()
    };
    req.local_ca_guid = CLIENT_GUID;
    let mut m = [0u8; MAD_LEN];
    req.emit(1, &mut m);
    assert_eq!(inject(&mut p, Side::Server, &m), Err(RecvError::Refused(9)));
    assert_eq!(p.server.connections(), 0);
}

#[test]
fn the_client_mras_the_rep_and_the_server_waits() {
    let mut p = Pair::new();
    let c = p.connect();
    p.pump();
    let s = p.server_request();
    p.accept(s);
    p.pump();
    p.take_events(Side::Client);
    p.client.mra(c, 12, b"wait", false).unwrap();
    p.pump();
    assert_eq!(p.server.state(s), Some(State::MraRepRcvd));
    assert_eq!(
        p.take_events(Side::Server),
        [Event::MraReceived {
            id: s,
            service_timeout: 12
        }]
    );
    // A duplicate REP (the server's retry crossing the MRA) gets the MRA again.
    let rep = p.wire.iter().find(|w| w.attr == Rep::ATTR_ID).unwrap().mad;
    assert_eq!(
        inject(&mut p, Side::Client, &rep),
        Err(RecvError::Duplicate(c))
    );
    let mra = Mra::parse(&p.client.poll_transmit().unwrap().mad).unwrap();
    assert_eq!(
        (mra.message_mraed, &mra.private_data[..4]),
        (1, &b"wait"[..])
    );
    p.client.ready_to_use(c, &[]).unwrap();
    p.pump();
    assert_eq!(p.server.state(s), Some(State::Established));
    assert_eq!(p.server.poll_at(), None);
}
