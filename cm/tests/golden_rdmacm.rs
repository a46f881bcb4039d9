//! The CM MADs of a real rdma_cm exchange between two Linux rxe hosts
//! (`tests/data/pcaps/rdmacm_send.pcap`: REQ, REP, RTU, then DREQ and DREP): each parses to
//! the values the kernel's CM wrote, and emitting the parsed message gives back the 256 bytes
//! byte for byte; and endpoints on either side of that exchange, fed the other side's MADs,
//! answer with the kernel's MADs.

use pcap_file::pcap::PcapReader;
use rnic_cm::cma::{self, ConnParam, RoceRoute};
use rnic_cm::time::Instant;
use rnic_cm::wire::ip::{IpHeader, PortSpace, port_of, service_id};
use rnic_cm::wire::{Drep, Dreq, MAD_LEN, Mad, Rep, Req, Rtu};
use rnic_cm::{Config, Endpoint, Event, MadAddr, State};
use std::net::{IpAddr, Ipv4Addr};

/// Ethernet, IPv4, UDP, BTH and DETH before the MAD of a RoCE v2 UD packet.
const MAD_AT: usize = 14 + 20 + 8 + 12 + 8;

fn mads() -> Vec<[u8; MAD_LEN]> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/pcaps/rdmacm_send.pcap"
    );
    let mut r = PcapReader::new(std::fs::File::open(path).expect("the capture")).unwrap();
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let d = p.unwrap().data;
        // UD SEND Only (opcode 0x64) to QP 1: a MAD.
        if d.len() >= MAD_AT + MAD_LEN && d[42] == 0x64 && d[47..50] == [0, 0, 1] {
            out.push(d[MAD_AT..MAD_AT + MAD_LEN].try_into().unwrap());
        }
    }
    out
}

fn same_bytes(orig: &[u8; MAD_LEN], emit: impl FnOnce(&mut [u8; MAD_LEN])) {
    let mut b = [0u8; MAD_LEN];
    emit(&mut b);
    assert_eq!(&b[..], &orig[..], "re-emitted MAD differs");
}

#[test]
fn the_kernel_cms_mads_parse_and_re_emit_byte_for_byte() {
    let m = mads();
    assert_eq!(m.len(), 10, "2 x (REQ, REP, RTU) and 2 x (DREQ, DREP)");
    let v4 = |a, b, c, d| IpAddr::V4(Ipv4Addr::new(a, b, c, d));

    let hdr = Mad::parse(&m[0]).unwrap();
    assert_eq!(
        (hdr.attr_id, hdr.transaction_id),
        (Req::ATTR_ID, 0x0000_0002_1fb1_8cee)
    );
    let req = Req::parse(&m[0]).unwrap();
    assert_eq!(req.local_comm_id, 0xee8c_b11f);
    assert_eq!(port_of(req.service_id, PortSpace::Tcp), Some(0x4853));
    assert_eq!(req.local_ca_guid, 0x5054_00ff_fe11_0003);
    assert_eq!((req.local_qpn, req.starting_psn), (0x21, 0x80b384));
    assert_eq!((req.responder_resources, req.initiator_depth), (0, 0));
    assert_eq!(
        (
            req.remote_cm_response_timeout,
            req.local_cm_response_timeout
        ),
        (0x14, 0x14)
    );
    assert_eq!(
        (req.retry_count, req.rnr_retry_count, req.max_cm_retries),
        (7, 7, 15)
    );
    assert_eq!(
        (req.partition_key, req.path_mtu, req.transport_service_type),
        (0xffff, 3, 0)
    );
    let p = req.primary;
    assert_eq!((p.local_lid, p.remote_lid), (0xffff, 0xffff));
    assert_eq!(p.local_gid[10..], [0xff, 0xff, 10, 11, 0, 3]);
    assert_eq!(p.remote_gid[10..], [0xff, 0xff, 10, 11, 0, 2]);
    assert_eq!(
        (p.flow_label, p.hop_limit, p.local_ack_timeout),
        (0xb27a9, 0x40, 0x13)
    );
    assert_eq!(req.alternate, Default::default());
    let ip = IpHeader::parse(&req.private_data).unwrap();
    assert_eq!(
        (ip.cma_version, ip.src_port, ip.src, ip.dst),
        (0, 0xddea, v4(10, 11, 0, 3), v4(10, 11, 0, 2))
    );
    same_bytes(&m[0], |b| req.emit(hdr.transaction_id, b));

    let rep = Rep::parse(&m[1]).unwrap();
    assert_eq!(
        (rep.local_comm_id, rep.remote_comm_id),
        (0x6f21_067a, 0xee8c_b11f)
    );
    assert_eq!((rep.local_qpn, rep.starting_psn), (0x21, 0x269d0c));
    assert_eq!(rep.local_ca_guid, 0x5054_00ff_fe11_0002);
    same_bytes(&m[1], |b| {
        rep.emit(Mad::parse(&m[1]).unwrap().transaction_id, b)
    });

    let rtu = Rtu::parse(&m[2]).unwrap();
    assert_eq!(
        (rtu.local_comm_id, rtu.remote_comm_id),
        (0xee8c_b11f, 0x6f21_067a)
    );
    same_bytes(&m[2], |b| rtu.emit(hdr.transaction_id, b));

    let dreq = Dreq::parse(&m[6]).unwrap();
    assert_eq!(
        (
            dreq.local_comm_id,
            dreq.remote_comm_id,
            dreq.remote_qpn_eecn
        ),
        (0xef8c_b11f, 0x6d21_067a, 0x22)
    );
    let tid = Mad::parse(&m[6]).unwrap().transaction_id;
    same_bytes(&m[6], |b| dreq.emit(tid, b));
    let drep = Drep::parse(&m[7]).unwrap();
    assert_eq!(
        (drep.local_comm_id, drep.remote_comm_id),
        (0x6d21_067a, 0xef8c_b11f)
    );
    same_bytes(&m[7], |b| drep.emit(tid, b));

    // Each parser refuses the others' MADs.
    assert!(Rep::parse(&m[0]).is_err());
    assert!(Req::parse(&m[1]).is_err());
}

/// The kernel's two hosts: the client 10.11.0.3 (port 56810) and the server 10.11.0.2
/// (rping's port 18515), their CA GUIDs, and their CMs' first communication IDs (the
/// endpoints' seeds are chosen so that their first IDs are the kernel's).
const CLIENT_GUID: u64 = 0x5054_00ff_fe11_0003;
const SERVER_GUID: u64 = 0x5054_00ff_fe11_0002;

fn route() -> RoceRoute {
    RoceRoute::new(
        "10.11.0.3:56810".parse().unwrap(),
        "10.11.0.2:18515".parse().unwrap(),
    )
}

/// The endpoint's first communication ID is the counter 1, byte-swapped, mixed with the
/// seed: this seed makes it `first`.
fn seed_for(first: u32) -> u32 {
    first ^ 1u32.swap_bytes()
}

/// `mad` (a REP, RTU, DREQ or DREP) with the communication ID at `byte` of the message
/// set to `id`.
fn with_comm_id(mad: &[u8; MAD_LEN], byte: usize, id: u32) -> [u8; MAD_LEN] {
    let mut m = *mad;
    m[24 + byte..24 + byte + 4].copy_from_slice(&id.to_be_bytes());
    m
}

#[test]
fn a_passive_endpoint_answers_the_kernels_mads_as_the_kernel_did() {
    let m = mads();
    let r = route();
    let client = MadAddr::cm(r.src_gid(), 0);
    let mut ep = Endpoint::new(Config {
        ca_guid: SERVER_GUID,
        ack_delay: 15,
        comm_id_seed: seed_for(0x6f21_067a),
        tid_high: 0,
    });
    ep.listen(service_id(PortSpace::Tcp, 18515)).unwrap();
    let now = Instant::ZERO;
    let accept = |qp_num, psn| {
        cma::accept_params(
            &ConnParam {
                qp_num,
                rnr_retry_count: 7,
                ..ConnParam::default()
            },
            psn,
        )
        .unwrap()
    };

    // First connection: the REQ, answered by a REP identical to the kernel's, then the RTU.
    ep.receive(now, client, &m[0]).unwrap();
    let Some(Event::ConnectRequest { id: a, from, req }) = ep.poll_event() else {
        panic!("no ConnectRequest")
    };
    assert_eq!((a.0, from), (0x6f21_067a, client));
    let (hdr, _) = cma::split_private_data(&req.private_data).unwrap();
    assert_eq!(
        (hdr.src, hdr.dst, hdr.src_port),
        (r.src.ip(), r.dst.ip(), 56810)
    );
    ep.accept(now, a, &accept(0x21, 0x269d0c)).unwrap();
    let rep = ep.poll_transmit().unwrap();
    assert_eq!(rep.to, client);
    assert_eq!(rep.mad, m[1], "REP differs from the kernel's");
    ep.receive(now, client, &m[2]).unwrap();
    assert_eq!(ep.poll_event(), Some(Event::Established { id: a }));

    // Second connection: our ID is not the kernel's; every other field is.
    ep.receive(now, client, &m[3]).unwrap();
    let Some(Event::ConnectRequest { id: b, .. }) = ep.poll_event() else {
        panic!("no second ConnectRequest")
    };
    ep.accept(now, b, &accept(0x22, 0x8af782)).unwrap();
    let rep = ep.poll_transmit().unwrap();
    assert_eq!(rep.mad, with_comm_id(&m[4], 0, b.0));
    // The client's RTU and DREQ, addressed to our ID.
    ep.receive(now, client, &with_comm_id(&m[5], 4, b.0))
        .unwrap();
    assert_eq!(ep.poll_event(), Some(Event::Established { id: b }));
    ep.receive(now, client, &with_comm_id(&m[6], 4, b.0))
        .unwrap();
    assert!(matches!(ep.poll_event(), Some(Event::DisconnectRequest { id, .. }) if id == b));
    ep.disconnect_reply(now, b, &[]).unwrap();
    assert_eq!(ep.poll_transmit().unwrap().mad, with_comm_id(&m[7], 0, b.0));

    // The first connection's DREQ: the DREP is the kernel's, byte for byte.
    ep.receive(now, client, &m[8]).unwrap();
    assert!(matches!(ep.poll_event(), Some(Event::DisconnectRequest { id, .. }) if id == a));
    ep.disconnect_reply(now, a, &[]).unwrap();
    assert_eq!(ep.poll_transmit().unwrap().mad, m[9]);
    assert_eq!(
        (ep.state(a), ep.state(b)),
        (Some(State::Timewait), Some(State::Timewait))
    );
    let k = ep.counters();
    assert_eq!((k.rx_mads, k.rx_handled), (6, 6));
}

#[test]
fn an_active_endpoint_sends_the_kernels_req_rtu_and_dreq() {
    let m = mads();
    let r = route();
    let server = MadAddr::cm(r.dst_gid(), 0);
    let mut ep = Endpoint::new(Config {
        ca_guid: CLIENT_GUID,
        ack_delay: 15,
        comm_id_seed: seed_for(0xee8c_b11f),
        tid_high: 2,
    });
    let conn = ConnParam {
        qp_num: 0x21,
        retry_count: 7,
        rnr_retry_count: 7,
        ..ConnParam::default()
    };
    let p = cma::connect_params(&r, PortSpace::Tcp, &conn, 0x80b384, 15).unwrap();
    let now = Instant::ZERO;
    let id = ep.connect(now, &p).unwrap();
    let req = ep.poll_transmit().unwrap();
    assert_eq!(req.to, server);
    assert_eq!(req.mad, m[0], "REQ differs from the kernel's");
    ep.receive(now, server, &m[1]).unwrap();
    assert!(matches!(ep.poll_event(), Some(Event::ConnectReply { id: i, .. }) if i == id));
    ep.ready_to_use(id, &[]).unwrap();
    assert_eq!(ep.poll_transmit().unwrap().mad, m[2]);
    assert_eq!(ep.poll_event(), Some(Event::Established { id }));
    ep.disconnect(now, id, &[]).unwrap();
    assert_eq!(ep.poll_transmit().unwrap().mad, m[8]);
    ep.receive(now, server, &m[9]).unwrap();
    assert_eq!(ep.poll_event(), Some(Event::Disconnected { id }));
    assert_eq!(ep.state(id), Some(State::Timewait));
}

/// The first RC request (no ACK or READ response: those carry the requester's PSNs) each
/// host sent: (source IPv4's last byte, PSN).
fn first_rc_psns() -> Vec<(u8, u32)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/pcaps/rdmacm_send.pcap"
    );
    let mut r = PcapReader::new(std::fs::File::open(path).expect("the capture")).unwrap();
    let mut out: Vec<(u8, u32)> = Vec::new();
    while let Some(p) = r.next_packet() {
        let d = p.unwrap().data;
        let (src, op) = (d[29], d[42]);
        // RC opcodes are 0x00..0x1f (0x0d..0x12: READ responses and ACKs); UD (the MADs) 0x64.
        let request = op < 0x20 && !(0x0d..=0x12).contains(&op);
        if request && !out.iter().any(|&(s, _)| s == src) {
            out.push((src, u32::from_be_bytes([0, d[51], d[52], d[53]])));
        }
    }
    out
}

/// Which PSN each side sends from: the kernel's QPs sent from the Starting PSN of the
/// *other* side's REQ or REP, and `cma::qp_psns` (what rnic's rdma_cm ids program their
/// QPs with) says the same.
#[test]
fn each_side_sends_from_the_starting_psn_the_other_side_announced() {
    let m = mads();
    let (req, rep) = (Req::parse(&m[0]).unwrap(), Rep::parse(&m[1]).unwrap());
    let firsts = first_rc_psns();
    // 10.11.0.3 is the active side (its REQ), 10.11.0.2 the passive one (its REP).
    let active = firsts
        .iter()
        .find(|&&(s, _)| s == 3)
        .expect("RC from the client")
        .1;
    let passive = firsts
        .iter()
        .find(|&&(s, _)| s == 2)
        .expect("RC from the server")
        .1;
    assert_eq!((active, passive), (rep.starting_psn, req.starting_psn));
    let a = cma::qp_psns(req.starting_psn, rep.starting_psn);
    let p = cma::qp_psns(rep.starting_psn, req.starting_psn);
    assert_eq!((a.sq_psn, a.rq_psn), (active, passive));
    assert_eq!((p.sq_psn, p.rq_psn), (passive, active));
}
