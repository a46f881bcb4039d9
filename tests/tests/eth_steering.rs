//! Raw Ethernet through the driver's `eth` API on two emulated devices joined by an
//! in-process link: each steers ARP (ethertype 0x0806) and ICMP to its own IPv4 address into
//! an RQ behind a TIR, and sends frames from an SQ on a TIS; RoCE RC WRITEs between the same
//! ports keep working beside them; bad steering commands come back as the typed driver error
//! with the device's PRM status.

use rnic_driver::eth::{
    EthCompletion, FlowAction, FlowGroup, FlowMatch, FlowRule, FlowTable, RawRq, RawSq, Tir, Tis,
    TransportDomain,
};
use rnic_driver::mr::Mr;
use rnic_driver::pd::Pd;
use rnic_driver::qp::{AddressVector, InitAttr, Mtu, Qp, QpConfig, QpType, RtrAttr, RtsAttr};
use rnic_driver::wr::{
    Access, Payload, PostErrorKind, SendFlags, SendOp, SendWr, Sge, WcStatus, WorkCompletion,
};
use rnic_driver::{DriverError, Hca, HcaConfig, cq::Cq};
use rnic_emulator::link::InProcLink;
use rnic_emulator::{Device, Profile, RunMode};
use rnic_hw_regs::cmd::CmdOpcode;
use rnic_hw_regs::status::CmdStatus;
use std::net::Ipv4Addr;
use std::sync::Arc;

/// Tags the rules put in receive completions.
const TAG_ARP: u32 = 0x0A;
const TAG_ICMP: u32 = 0x1C;

/// One device with its raw queues, steering and an RC QP. Fields drop in declaration order:
/// rules before groups and tables, the queues before the PD, everything before the device.
struct Side {
    rules: Vec<FlowRule>,
    group: Arc<FlowGroup>,
    table: Arc<FlowTable>,
    tir: Arc<Tir>,
    sq: RawSq,
    rq: Arc<RawRq>,
    tis: Arc<Tis>,
    td: Arc<TransportDomain>,
    mr: Mr,
    qp: Qp,
    cq: Arc<Cq>,
    _pd: Arc<Pd>,
    hca: Arc<Hca>,
    dev: Device,
    ip: Ipv4Addr,
}

fn side(ip: Ipv4Addr, mac_last: u8, link: InProcLink) -> Side {
    let profile = Profile {
        mac: [0x02, 0, 0, 0, 0, mac_last],
        ..Profile::default()
    };
    let dev = Device::with_link(profile, RunMode::Deterministic, link);
    let hca = Arc::new(
        Hca::open(
            Arc::new(dev.bus()),
            HcaConfig {
                ipv4: Some(ip),
                ..HcaConfig::default()
            },
        )
        .expect("bring-up"),
    );
    let pd = Arc::new(Pd::alloc(&hca).expect("ALLOC_PD"));
    let cq = Arc::new(Cq::create(&hca, 64, None).expect("CREATE_CQ"));
    let qp = Qp::create(&pd, &QpConfig::new(QpType::Rc, cq.clone(), cq.clone())).expect("QP");
    let mr = Mr::alloc(&pd, 64 * 1024, Access::ALL).expect("MR");
    let td = Arc::new(TransportDomain::alloc(&hca).expect("ALLOC_TRANSPORT_DOMAIN"));
    let tis = Arc::new(Tis::create(&td).expect("CREATE_TIS"));
    let rq = Arc::new(RawRq::create(&pd, 16, 1).expect("CREATE_RQ"));
    let sq = RawSq::create(&pd, &tis, 16).expect("CREATE_SQ");
    let tir = Arc::new(Tir::create(&td, &rq).expect("CREATE_TIR"));
    let table = Arc::new(FlowTable::create(&hca, 4, 0).expect("CREATE_FLOW_TABLE"));
    // One group comparing ethertype, IP protocol and destination IPv4.
    let shape = FlowMatch::new()
        .ethertype(0)
        .ip_protocol(0)
        .dst_ipv4([0; 4]);
    let group = Arc::new(FlowGroup::create(&table, 0, 7, &shape).expect("CREATE_FLOW_GROUP"));
    let arp = FlowMatch::new()
        .ethertype(0x0806)
        .ip_protocol(0)
        .dst_ipv4([0; 4]);
    let icmp = FlowMatch::new()
        .ethertype(0x0800)
        .ip_protocol(1)
        .dst_ipv4(ip.octets());
    let rules = vec![
        FlowRule::create(&group, 0, &arp, FlowAction::Forward(&tir), TAG_ARP).expect("ARP rule"),
        FlowRule::create(&group, 1, &icmp, FlowAction::Forward(&tir), TAG_ICMP).expect("ICMP rule"),
    ];
    table.set_root().expect("SET_FLOW_TABLE_ROOT");
    for k in 0..16 {
        rq.post_recv(k, &[mr.sge(32 * 1024 + k as usize * 1536, 1536)])
            .expect("post receive");
    }
    Side {
        rules,
        group,
        table,
        tir,
        sq,
        rq,
        tis,
        td,
        mr,
        qp,
        cq,
        _pd: pd,
        hca,
        dev,
        ip,
    }
}

fn connect(s: &Side, peer: &Side) {
    s.qp.to_init(&InitAttr {
        access: Access::REMOTE_WRITE,
        ..InitAttr::default()
    })
    .expect("RST2INIT");
    let av = AddressVector {
        sgid_index: 1,
        dgid: peer.hca.gid(1).expect("IPv4 GID").gid,
        dmac: peer.hca.mac(),
        hop_limit: 64,
        ..AddressVector::default()
    };
    s.qp.to_rtr(&RtrAttr {
        path_mtu: Some(Mtu::Mtu1024),
        dest_qpn: Some(peer.qp.qpn()),
        rq_psn: 0,
        av: Some(av),
        max_dest_rd_atomic: 1,
        min_rnr_timer: 1,
    })
    .expect("INIT2RTR");
    s.qp.to_rts(&RtsAttr {
        sq_psn: 0,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        max_rd_atomic: 1,
    })
    .expect("RTR2RTS");
}

fn settle(a: &Side, b: &Side) {
    for _ in 0..64 {
        if a.dev.step() + b.dev.step() == 0 {
            return;
        }
    }
}

/// An Ethernet frame from `src` to `dst` of `ethertype` with `payload`, padded to 60 bytes.
fn frame(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f.resize(f.len().max(60), 0);
    f
}

fn arp_request(from: &Side, to: &Side) -> Vec<u8> {
    let mut p = vec![0, 1, 8, 0, 6, 4, 0, 1];
    p.extend_from_slice(&from.hca.mac());
    p.extend_from_slice(&from.ip.octets());
    p.extend_from_slice(&[0; 6]);
    p.extend_from_slice(&to.ip.octets());
    frame([0xFF; 6], from.hca.mac(), 0x0806, &p)
}

fn icmp_echo(from: &Side, to: &Side, seq: u16) -> Vec<u8> {
    let mut icmp = vec![8, 0, 0, 0, 0x12, 0x34];
    icmp.extend_from_slice(&seq.to_be_bytes());
    icmp.extend_from_slice(b"rnic raw ethernet");
    let total = (20 + icmp.len()) as u16;
    let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 1, 0, 0];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&from.ip.octets());
    ip.extend_from_slice(&to.ip.octets());
    ip.extend_from_slice(&icmp);
    frame(to.hca.mac(), from.hca.mac(), 0x0800, &ip)
}

/// Sends `f` from `s`: the first 18 bytes inline, the rest from the MR.
fn send(s: &Side, wr_id: u64, f: &[u8]) {
    s.mr.write(0, &f[18..]);
    s.sq.post_send(wr_id, &f[..18], &[s.mr.sge(0, (f.len() - 18) as u32)], true)
        .expect("post_send");
}

fn poll_rq(s: &Side) -> Vec<EthCompletion> {
    let mut wc = [EthCompletion::default(); 8];
    let n = s.rq.poll(&mut wc).expect("poll RQ");
    wc[..n].to_vec()
}

#[test]
fn arp_and_icmp_frames_cross_the_link_while_rc_writes_keep_working() {
    let (la, lb) = InProcLink::pair();
    let a = side(Ipv4Addr::new(192, 0, 2, 1), 1, la);
    let b = side(Ipv4Addr::new(192, 0, 2, 2), 2, lb);
    connect(&a, &b);
    connect(&b, &a);

    let arp = arp_request(&a, &b);
    let ping = icmp_echo(&a, &b, 1);
    send(&a, 1, &arp);
    send(&a, 2, &ping);
    // A WRITE between the same ports, interleaved with the raw frames.
    a.mr.write(4096, b"over RoCE");
    let wr = SendWr {
        wr_id: 9,
        op: SendOp::Write {
            raddr: b.mr.addr() + 8192,
            rkey: b.mr.rkey(),
        },
        payload: Payload::Sgl(&[a.mr.sge(4096, 9)]),
        flags: SendFlags::SIGNALED,
        ud: None,
    };
    a.qp.post_send(&[wr]).expect("post WRITE");
    // An ICMP frame to an address the rules do not name: dropped by B's steering.
    let mut stray = icmp_echo(&a, &b, 2);
    stray[33] = 99;
    send(&a, 3, &stray);
    settle(&a, &b);

    let mut sent = [EthCompletion::default(); 4];
    assert_eq!(a.sq.poll(&mut sent).expect("poll SQ"), 3);
    assert_eq!(
        sent[..3]
            .iter()
            .map(|c| (c.wr_id, c.status))
            .collect::<Vec<_>>(),
        [
            (1, WcStatus::Success),
            (2, WcStatus::Success),
            (3, WcStatus::Success)
        ]
    );
    let got = poll_rq(&b);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!((got[0].wr_id, got[0].flow_tag), (0, TAG_ARP));
    assert_eq!(got[0].byte_len as usize, arp.len());
    assert_eq!((got[1].wr_id, got[1].flow_tag), (1, TAG_ICMP));
    assert_eq!(got[1].byte_len as usize, ping.len());
    assert_eq!(got[1].l3_hdr_type, 2, "IPv4");
    let mut buf = vec![0u8; arp.len()];
    b.mr.read(32 * 1024, &mut buf);
    assert_eq!(buf, arp);
    let mut buf = vec![0u8; ping.len()];
    b.mr.read(32 * 1024 + 1536, &mut buf);
    assert_eq!(buf, ping);

    let mut wc = [WorkCompletion::default(); 2];
    assert_eq!(a.cq.poll(&mut wc).expect("poll CQ"), 1);
    assert_eq!((wc[0].wr_id, wc[0].status), (9, WcStatus::Success));
    let mut back = [0u8; 9];
    b.mr.read(8192, &mut back);
    assert_eq!(&back, b"over RoCE");

    let c = b.dev.counters();
    assert_eq!(c.raw_rx, 2);
    assert_eq!(c.drops.steering_no_match, 1, "{:?}", c.drops);
    assert_eq!(c.rx_dropped, 1);

    // B answers: the echo reply back to A's ICMP rule.
    let reply = icmp_echo(&b, &a, 1);
    send(&b, 7, &reply);
    settle(&a, &b);
    let got = poll_rq(&a);
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].flow_tag, got[0].byte_len as usize),
        (TAG_ICMP, reply.len())
    );
    drop((a, b));
}

#[test]
fn bad_steering_calls_give_the_typed_error_with_the_prm_status() {
    let (la, _lb) = InProcLink::pair();
    let a = side(Ipv4Addr::new(192, 0, 2, 1), 1, la);
    let status = |e: DriverError| match e {
        DriverError::Command { opcode, status, .. } => (opcode, status),
        other => panic!("not a command error: {other}"),
    };
    // A group overlapping the existing one.
    let e = FlowGroup::create(&a.table, 4, 9, &FlowMatch::new()).unwrap_err();
    assert_eq!(status(e), (CmdOpcode::CreateFlowGroup, CmdStatus::BadParam));
    // A rule at an index already taken, and one with a value outside the group's criteria.
    let arp = FlowMatch::new()
        .ethertype(0x0806)
        .ip_protocol(0)
        .dst_ipv4([0; 4]);
    let e = FlowRule::create(&a.group, 0, &arp, FlowAction::Drop, 0).unwrap_err();
    assert_eq!(
        status(e),
        (CmdOpcode::SetFlowTableEntry, CmdStatus::BadParam)
    );
    let wider = arp.dmac([2, 0, 0, 0, 0, 1]);
    let e = FlowRule::create(&a.group, 5, &wider, FlowAction::Drop, 0).unwrap_err();
    assert_eq!(
        status(e),
        (CmdOpcode::SetFlowTableEntry, CmdStatus::BadParam)
    );
    // A table beyond the device's size.
    let e = FlowTable::create(&a.hca, 40, 0).unwrap_err();
    assert_eq!(status(e), (CmdOpcode::CreateFlowTable, CmdStatus::BadSize));
    // The driver's own checks: fewer than the L2 header inline.
    let e =
        a.sq.post_send(1, &[0; 14], &[a.mr.sge(0, 46)], true)
            .unwrap_err();
    assert_eq!(e.kind, PostErrorKind::InlineTooShort { given: 14, min: 18 });
    // A data segment under a key that does not exist: an error completion, and the SQ, now
    // in ERR, flushes what follows.
    let bad = Sge {
        addr: a.mr.addr(),
        len: 46,
        lkey: a.mr.lkey() ^ 0xFFFF_FF00,
    };
    a.sq.post_send(2, &[0xFF; 18], &[bad], false)
        .expect("posted");
    a.sq.post_send(3, &[0xFF; 18], &[a.mr.sge(0, 46)], true)
        .expect("posted");
    let mut wc = [EthCompletion::default(); 4];
    assert_eq!(a.sq.poll(&mut wc).expect("poll SQ"), 2);
    assert_eq!((wc[0].wr_id, wc[0].status), (2, WcStatus::LocProtErr));
    assert_eq!((wc[1].wr_id, wc[1].status), (3, WcStatus::WrFlushErr));
    // Rules on a second group of their own, then everything torn down in order by drop.
    let g2 = Arc::new(
        FlowGroup::create(&a.table, 8, 15, &FlowMatch::new().dmac([0; 6])).expect("group"),
    );
    let r = FlowRule::create(
        &g2,
        8,
        &FlowMatch::new().dmac([0xFF; 6]),
        FlowAction::Drop,
        0,
    )
    .expect("drop rule");
    drop(r);
    drop(g2);
    // Every object's drop destroys it without a command failing, in the order the
    // references allow (entries, groups, the root and its table, TIR, queues, TIS, domain).
    let errors = a.dev.counters().command_errors;
    let Side {
        rules,
        group,
        table,
        tir,
        sq,
        rq,
        tis,
        td,
        dev,
        ..
    } = a;
    drop((rules, group, table, tir, sq, rq, tis, td));
    assert_eq!(dev.counters().command_errors, errors);
}
