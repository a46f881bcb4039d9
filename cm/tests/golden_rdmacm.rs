//! The CM MADs of a real rdma_cm exchange between two Linux rxe hosts
//! (`tests/data/pcaps/rdmacm_send.pcap`: REQ, REP, RTU, then DREQ and DREP): each parses to
//! the values the kernel's CM wrote, and emitting the parsed message gives back the 256 bytes
//! byte for byte.

use pcap_file::pcap::PcapReader;
use rnic_cm::wire::ip::{IpHeader, PortSpace, port_of};
use rnic_cm::wire::{Drep, Dreq, MAD_LEN, Mad, Rep, Req, Rtu};
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
