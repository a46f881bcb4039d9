//! CM MADs over QP1 between two emulated devices, through the verbs API's [`MadChannel`]:
//! device A sends the REQ the kernel's rdma_cm sent in `tests/data/pcaps/rdmacm_send.pcap`
//! (re-addressed from A to B), B's QP1 receives it byte for byte with the GRH area naming
//! A, from source QP 1, and answers with a REJ "invalid service ID" that A receives. On the
//! in-process pair `emu0` / `emu1` and on a UDP pair (`emu:<IPv4>`, the kernel's UDP).

use pcap_file::pcap::PcapReader;
use rnic_cm::wire::ip::IpHeader;
use rnic_cm::wire::{MAD_LEN, Mad, Method, Rej, RejReason, Req};
use rnic_verbs::*;
use std::net::IpAddr;
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

/// Ethernet, IPv4, UDP, BTH and DETH before the MAD of a RoCE v2 UD packet.
const MAD_AT: usize = 14 + 20 + 8 + 12 + 8;

/// The capture's first MAD to QP 1: the kernel CM's REQ.
fn golden_req() -> [u8; MAD_LEN] {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/pcaps/rdmacm_send.pcap");
    let mut r = PcapReader::new(std::fs::File::open(path).expect("the capture")).unwrap();
    while let Some(p) = r.next_packet() {
        let d = p.unwrap().data;
        // UD SEND Only (opcode 0x64) to QP 1.
        if d.len() >= MAD_AT + MAD_LEN && d[42] == 0x64 && d[47..50] == [0, 0, 1] {
            return d[MAD_AT..MAD_AT + MAD_LEN].try_into().unwrap();
        }
    }
    panic!("no MAD in the capture");
}

/// The golden REQ with its path and rdma_cm addresses moved to `a` -> `b`.
fn readdressed(golden: &[u8; MAD_LEN], a: &Context, b: &Context) -> ([u8; MAD_LEN], Req) {
    let (ga, gb) = (a.query_gid(1, 1).unwrap(), b.query_gid(1, 1).unwrap());
    let mut req = Req::parse(golden).unwrap();
    req.primary.local_gid = ga.0;
    req.primary.remote_gid = gb.0;
    let mut ip = IpHeader::parse(&req.private_data).unwrap();
    let v4 = |g: Gid| IpAddr::from(std::net::Ipv6Addr::from(g.0).to_ipv4_mapped().unwrap());
    (ip.src, ip.dst) = (v4(ga), v4(gb));
    ip.emit(&mut req.private_data).unwrap();
    let tid = Mad::parse(golden).unwrap().transaction_id;
    let mut out = [0u8; MAD_LEN];
    req.emit(tid, &mut out);
    // Only the addresses changed: the rest of the kernel's bytes are as captured.
    let differ = (0..MAD_LEN).filter(|&i| out[i] != golden[i]).count();
    assert!(differ <= 2 * 16 + 2 * 4, "{differ} bytes changed");
    (out, req)
}

fn req_rej_exchange(da: &str, db: &str) {
    let (a, b) = (Context::open(da).unwrap(), Context::open(db).unwrap());
    let mut ma = MadChannel::open(&a, 1, 8).unwrap();
    let mut mb = MadChannel::open(&b, 1, 8).unwrap();
    let (req_mad, req) = readdressed(&golden_req(), &a, &b);

    let to_b = ma
        .create_ah(&AhAttr {
            hop_limit: 64,
            ..AhAttr::new(b.query_gid(1, 1).unwrap(), 1)
        })
        .unwrap();
    ma.send(&to_b, &req_mad).unwrap();
    let got = mb.recv(T).unwrap().expect("B received the REQ");
    assert_eq!(got.mad, req_mad, "byte for byte");
    assert_eq!((got.len, got.src_qp), (MAD_LEN, GSI_QPN));
    assert_eq!(
        (got.sgid, got.dgid),
        (a.query_gid(1, 1).unwrap(), b.query_gid(1, 1).unwrap())
    );
    let hdr = Mad::parse(&got.mad).unwrap();
    assert_eq!((hdr.method, hdr.attr_id), (Method::Send, Req::ATTR_ID));

    // Nothing listens on the service: B rejects the REQ as the kernel's CM does.
    let rej = Rej {
        local_comm_id: 0x1234_5678,
        remote_comm_id: req.local_comm_id,
        message_rejected: 0,
        reason: RejReason::InvalidServiceId.raw(),
        ..Rej::default()
    };
    let mut rej_mad = [0u8; MAD_LEN];
    rej.emit(hdr.transaction_id, &mut rej_mad);
    let back = mb.reply_ah(&got).unwrap();
    mb.send(&back, &rej_mad).unwrap();
    let answer = ma.recv(T).unwrap().expect("A received the REJ");
    assert_eq!((answer.mad, answer.src_qp), (rej_mad, GSI_QPN));
    let r = Rej::parse(&answer.mad).unwrap();
    assert_eq!(
        (r.remote_comm_id, RejReason::from_raw(r.reason)),
        (req.local_comm_id, Some(RejReason::InvalidServiceId))
    );
    assert_eq!(
        Mad::parse(&answer.mad).unwrap().transaction_id,
        hdr.transaction_id
    );
    assert_eq!((ma.send_errors(), mb.send_errors()), (0, 0));
    // Nothing was dropped on the way: both QP1s took every datagram.
    for ctx in [&a, &b] {
        let c = ctx.emulator_counters().expect("emulated");
        assert_eq!(c.rx_dropped, 0, "{}: {:?}", ctx.name(), c.drops);
    }
}

#[test]
fn req_and_rej_over_qp1_in_process() {
    req_rej_exchange("emu0", "emu1");
}

#[test]
fn req_and_rej_over_qp1_on_the_udp_link() {
    req_rej_exchange("emu:127.0.0.61", "emu:127.0.0.62");
}
