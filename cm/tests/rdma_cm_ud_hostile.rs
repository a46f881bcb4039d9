//! Hostile SIDR MADs against a live CM agent: emu0 sends raw MADs from its own GSI QP (no
//! CM runs there) to emu1, where a UD id listens. Malformed ones are counted and dropped,
//! requests for nothing or with a private-data header that does not parse are refused with
//! the SIDR REP status the spec names, a repeat of a pending request is dropped, and the
//! agent still answers a good request afterwards. A process of its own: emu0's QP1 must be
//! free for the raw channel.

use rnic_cm::cma::{self, ConnParam, RoceRoute};
use rnic_cm::rdma_cm::{CmId, EventChannel, EventKind};
use rnic_cm::wire::ip::PortSpace;
use rnic_cm::wire::{MAD_LEN, SidrRep, SidrReq};
use rnic_verbs::{AhAttr, Context, Gid, MadChannel};
use std::time::Duration;

const T: Duration = Duration::from_secs(20);

/// The SIDR REP emu0 receives next.
fn reply(ch: &mut MadChannel) -> SidrRep {
    let m = ch.recv(T).unwrap().expect("a SIDR REP in time");
    SidrRep::parse(&m.mad[..m.len]).unwrap()
}

#[test]
fn malformed_sidr_mads_are_counted_and_dropped_and_refusals_carry_the_status() {
    let sch = EventChannel::new().unwrap();
    let listener = CmId::new(&sch, PortSpace::Udp);
    listener
        .bind_addr("192.0.2.2:7174".parse().unwrap())
        .unwrap();
    listener.listen(4).unwrap();

    let a = Context::open("emu0").unwrap();
    let mut ch = MadChannel::open(&a, 1, 16).unwrap();
    let sgid = u8::try_from(a.ipv4_gid_index().unwrap()).unwrap();
    let to = ch
        .create_ah(&AhAttr::new(Gid::from_ipv4([192, 0, 2, 2].into()), sgid))
        .unwrap();
    let route = RoceRoute::new(
        "192.0.2.1:40000".parse().unwrap(),
        "192.0.2.2:7174".parse().unwrap(),
    );
    let good = |request_id: u32| {
        let mut req = cma::sidr_params(&route, PortSpace::Udp, b"hi").unwrap().req;
        req.request_id = request_id;
        let mut mad = [0u8; MAD_LEN];
        req.emit(u64::from(request_id), &mut mad);
        mad
    };

    // Malformed: a SIDR REP whose additional information passes its 72 bytes, a SIDR REQ
    // of another class version. Unsupported: a SIDR REQ with method GetResp.
    let mut rep = [0u8; MAD_LEN];
    SidrRep {
        request_id: 5,
        additional_information_length: 200,
        ..SidrRep::default()
    }
    .emit(5, &mut rep);
    ch.send(&to, &rep).unwrap();
    let mut m = good(6);
    m[2] = 1;
    ch.send(&to, &m).unwrap();
    let mut m = good(7);
    m[3] = 0x81;
    ch.send(&to, &m).unwrap();
    // Unmatched: a well-formed SIDR REP for a request nobody made.
    let mut rep = [0u8; MAD_LEN];
    SidrRep {
        request_id: 8,
        ..SidrRep::default()
    }
    .emit(8, &mut rep);
    ch.send(&to, &rep).unwrap();

    // Nothing listens on port 9: status 1 (service ID not supported).
    let mut req = SidrReq::parse(&good(9)).unwrap();
    req.service_id =
        RoceRoute::new(route.src, "192.0.2.2:9".parse().unwrap()).service_id(PortSpace::Udp);
    let mut m = [0u8; MAD_LEN];
    req.emit(9, &mut m);
    ch.send(&to, &m).unwrap();
    let r = reply(&mut ch);
    assert_eq!((r.request_id, r.status), (9, 1));

    // rdma_cm's header in the private data does not parse (IP version 5): rejected (2).
    let mut m = good(10);
    m[24 + 16 + 1] = 0x50;
    ch.send(&to, &m).unwrap();
    let r = reply(&mut ch);
    assert_eq!((r.request_id, r.status), (10, 2));

    // A good request, sent twice: one ConnectRequest, the repeat dropped; accepted.
    ch.send(&to, &good(11)).unwrap();
    ch.send(&to, &good(11)).unwrap();
    let ev = sch.get_event(Some(T)).unwrap().expect("a ConnectRequest");
    assert_eq!(ev.kind, EventKind::ConnectRequest);
    assert_eq!(&ev.ud.as_ref().unwrap().private_data[..2], b"hi");
    // The repeat is taken before the answer goes out: give the agent a moment to see it.
    let deadline = std::time::Instant::now() + T;
    while listener.cm_counters().unwrap().rx_mads < 8 {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent took fewer MADs"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    ev.id
        .accept(&ConnParam {
            qp_num: 0x123,
            ..ConnParam::default()
        })
        .unwrap();
    let r = reply(&mut ch);
    assert_eq!(
        (r.request_id, r.status, r.qpn, r.qkey),
        (11, 0, 0x123, cma::UDP_QKEY)
    );
    assert!(
        sch.get_event(Some(Duration::from_millis(200)))
            .unwrap()
            .is_none()
    );

    let k = listener.cm_counters().unwrap();
    assert_eq!(k.rx_mads, 8, "{k:?}");
    assert_eq!(
        (
            k.rx_malformed,
            k.rx_unsupported,
            k.rx_unmatched,
            k.rx_rejected,
            k.rx_duplicates,
            k.rx_handled
        ),
        (2, 1, 1, 1, 1, 2),
        "{k:?}"
    );
    assert_eq!(k.rx_outcomes(), k.rx_mads);
}
