//! Writes the seed corpus (`fuzz/corpus/<target>/`) from the project's own data: frames of
//! the pcaps in `tests/data/pcaps/` (as they are for `wire_parse`; readdressed to the live
//! device's QPs for `rx_frames`), the commands the driver sends during bring-up (recorded
//! from the emulator), WQEs the driver writes, and CQEs / EQEs the device writes.
//!
//! Run from `fuzz/`: `cargo +nightly run --release --example make_corpus`.

use pcap_file::pcap::PcapReader;
use rnic_cm::wire::{MAD_LEN, Mad};
use rnic_driver::cmdq::CommandRecorder;
use rnic_driver::wr::{Payload, RecvWr, SendFlags, SendOp, SendWr};
use rnic_driver::{Hca, HcaConfig};
use rnic_emulator::wire::{
    BthRepr, EthRepr, EthernetAddress, GsoRun, IpRepr, Ipv4Repr, Opcode, PacketRepr, RethRepr,
    Transport, UdpRepr,
};
use rnic_emulator::{Device, RunMode};
use rnic_fuzz::{DEV_IP, LiveDevice, PEER_IP, PEER_MAC, Peer, QKEY, START_PSN, cmd};
use rnic_hw_regs::eqe::{Eqe, EventType};
use std::fs;
use std::path::Path;
use std::sync::Arc;
use zerocopy::IntoBytes;

fn save(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new("corpus").join(target);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join(name), bytes).unwrap();
}

/// The first frames of each pcap (the gzipped one is left out: it repeats the others).
fn pcap_frames() -> Vec<(String, Vec<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut names: Vec<_> = fs::read_dir("../tests/data/pcaps")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pcap"))
        .collect();
    names.sort();
    for p in names {
        let mut r = PcapReader::new(fs::File::open(&p).unwrap()).unwrap();
        let mut frames = Vec::new();
        while let Some(pkt) = r.next_packet() {
            frames.push(pkt.unwrap().data.into_owned());
            if frames.len() == 4 {
                break;
            }
        }
        out.push((
            p.file_stem().unwrap().to_string_lossy().into_owned(),
            frames,
        ));
    }
    out
}

/// Where a CM MAD starts in a RoCE v2 UD frame: Ethernet 14, IPv4 20, UDP 8, BTH 12, DETH 8.
const CM_MAD_AT: usize = 62;

/// Every frame of `tests/data/pcaps/<stem>.pcap`.
fn pcap_frames_all(stem: &str) -> Vec<(String, Vec<Vec<u8>>)> {
    let p = Path::new("../tests/data/pcaps").join(format!("{stem}.pcap"));
    let mut r = PcapReader::new(fs::File::open(&p).unwrap()).unwrap();
    let mut frames = Vec::new();
    while let Some(pkt) = r.next_packet() {
        frames.push(pkt.unwrap().data.into_owned());
    }
    vec![(stem.to_string(), frames)]
}

fn main() {
    let pcaps = pcap_frames();
    // wire_parse: the frames as captured.
    for (name, frames) in &pcaps {
        for (i, f) in frames.iter().enumerate() {
            save("wire_parse", &format!("{name}-{i}"), f);
        }
    }

    // rx_frames: the same frames from the live device's peer to its QPs.
    let d = LiveDevice::new(Peer::Remote);
    let mac = d.hca.mac();
    for (name, frames) in &pcaps {
        let first_psn = frames
            .iter()
            .find_map(|f| PacketRepr::parse_unverified(f).ok().map(|(r, _)| r.bth.psn));
        for (i, f) in frames.iter().enumerate() {
            let Ok((mut r, payload)) = PacketRepr::parse_unverified(f) else {
                continue;
            };
            let target = match r.bth.opcode.transport() {
                Transport::Rc => &d.rc,
                Transport::Uc => &d.uc,
                Transport::Ud => &d.ud,
                Transport::Cnp => &d.rc,
            };
            r.eth.dst = rnic_emulator::wire::EthernetAddress(mac);
            r.eth.src = rnic_emulator::wire::EthernetAddress(PEER_MAC);
            r.eth.ethertype = rnic_emulator::wire::EthernetProtocol::Ipv4;
            r.ip = IpRepr::V4(Ipv4Repr::new(PEER_IP, DEV_IP));
            r.bth.dest_qp = target.qp.qpn();
            r.bth.psn =
                START_PSN.wrapping_add(r.bth.psn.wrapping_sub(first_psn.unwrap_or(0))) & 0xFF_FFFF;
            if let Some(deth) = r.ext.deth.as_mut() {
                deth.qkey = QKEY;
            }
            if let Some(reth) = r.ext.reth.as_mut() {
                reth.virtual_addr = d.mr.addr();
                reth.rkey = d.mr.rkey();
                reth.dma_len = reth.dma_len.min(1024);
            }
            if let Some(a) = r.ext.atomic_eth.as_mut() {
                a.virtual_addr = d.mr.addr();
                a.rkey = d.mr.rkey();
            }
            let mut buf = vec![0u8; r.buffer_len(payload.len())];
            if let Ok(n) = r.emit(&mut buf, payload) {
                save("rx_frames", &format!("{name}-{i}"), &buf[..n]);
            }
        }
    }

    // rx_runs: runs of a WRITE and of a SEND to the RC and UC QPs, as an in-process peer
    // sends them (path MTU 1024): two and three packets ending the message, two MIDDLEs,
    // and a run whose last packet asks for an ACK mid-message.
    for (qp_name, t) in [("rc", &d.rc), ("uc", &d.uc)] {
        let uc = qp_name == "uc";
        for (first, last, mid_end, name) in [
            (
                Opcode::RcRdmaWriteFirst,
                Opcode::RcRdmaWriteLast,
                false,
                "write",
            ),
            (Opcode::RcSendFirst, Opcode::RcSendLast, false, "send"),
            (
                Opcode::RcRdmaWriteMiddle,
                Opcode::RcRdmaWriteMiddle,
                true,
                "write_middle",
            ),
        ] {
            for count in [2u16, 3] {
                let code = |o: Opcode| {
                    Opcode::from_u8(o.as_u8() + if uc { 0x20 } else { 0 }).expect("UC opcode")
                };
                let mut r = PacketRepr::new(
                    EthRepr::new(EthernetAddress(mac), EthernetAddress(PEER_MAC)),
                    IpRepr::V4(Ipv4Repr::new(PEER_IP, DEV_IP)),
                    UdpRepr::new(0xC0DE),
                    BthRepr::new(code(first), t.qp.qpn(), START_PSN),
                );
                let payload = if mid_end {
                    usize::from(count) * 1024
                } else {
                    usize::from(count - 1) * 1024 + 100
                };
                if r.bth.opcode.has_reth() {
                    r.ext.reth = Some(RethRepr {
                        virtual_addr: d.mr.addr(),
                        rkey: d.mr.rkey(),
                        dma_len: payload as u32,
                    });
                }
                let mut buf = vec![0u8; r.buffer_len(1024)];
                r.emit(&mut buf, &[0x5A; 1024]).expect("emit");
                buf.truncate(r.header_len());
                buf.resize(r.header_len() + payload, 0x5A);
                let run = GsoRun {
                    count,
                    mss: 1024,
                    last_opcode: code(last),
                    last_ack_req: !uc,
                    last_solicited: false,
                };
                let input = rnic_fuzz::rx::run_input(&run, &buf);
                save("rx_runs", &format!("{qp_name}-{name}-{count}"), &input);
            }
        }
    }

    // cmd_mailbox: the driver's bring-up on the command target's device profile, as
    // records; the whole sequence, and its prefixes up to each of the first commands.
    let dev = Device::new(cmd::profile(), RunMode::Deterministic);
    let rec = Arc::new(CommandRecorder::default());
    let cfg = HcaConfig {
        ipv4: Some(DEV_IP),
        observer: Some(rec.clone()),
        ..HcaConfig::default()
    };
    let hca = Hca::open(Arc::new(dev.bus()), cfg).expect("bring-up");
    drop(hca);
    let mut all = Vec::new();
    for (i, c) in rec.take().iter().enumerate() {
        let out_len = u32::from_be_bytes(c.entry_in[0x38..0x3C].try_into().unwrap()) as usize;
        let r = cmd::record(&c.input, out_len, 0);
        save("cmd_mailbox", &format!("{i:02}-{}", c.opcode), &r);
        all.extend_from_slice(&r);
        if i < 12 {
            save("cmd_mailbox", &format!("upto-{i:02}"), &all);
        }
    }
    save("cmd_mailbox", "bring-up", &all);

    // posted_wqes: WQEs the driver writes (the device does not run meanwhile).
    let d = LiveDevice::new(Peer::Itself);
    d.dev.set_auto_step(false);
    let sge = [d.mr.sge(0, 64)];
    let ops = [
        ("send", SendOp::Send),
        ("send_imm", SendOp::SendImm { imm: 0x1234 }),
        (
            "write",
            SendOp::Write {
                raddr: d.mr.addr(),
                rkey: d.mr.rkey(),
            },
        ),
        (
            "write_imm",
            SendOp::WriteImm {
                raddr: d.mr.addr(),
                rkey: d.mr.rkey(),
                imm: 5,
            },
        ),
        (
            "read",
            SendOp::Read {
                raddr: d.mr.addr(),
                rkey: d.mr.rkey(),
            },
        ),
    ];
    for (sel, t) in d.targets().iter().enumerate().take(2) {
        for (name, op) in ops {
            let wr = SendWr {
                wr_id: 1,
                op,
                payload: Payload::Sgl(&sge),
                flags: SendFlags::SIGNALED,
                ud: None,
            };
            if t.qp.post_send(&[wr]).is_err() {
                continue;
            }
            let (sq, _, _) = t.qp.sq_ring();
            let mut bytes = vec![sel as u8];
            // SAFETY: the first 128 bytes of the live SQ ring; volatile reads.
            bytes.extend((0..128).map(|k| unsafe { sq.as_ptr().add(k).read_volatile() }));
            save("posted_wqes", &format!("{sel}-{name}"), &bytes);
            // Commands need a running device.
            d.dev.set_auto_step(true);
            t.qp.to_reset().unwrap();
            rnic_fuzz::connect(&t.qp, Peer::Itself, d.hca.mac());
            d.dev.set_auto_step(false);
        }
    }
    let wr = SendWr {
        wr_id: 2,
        op: SendOp::Send,
        payload: Payload::Inline(b"inline!"),
        flags: SendFlags::SIGNALED,
        ud: Some(rnic_driver::wr::UdDest {
            ah: &d.self_ah,
            remote_qpn: d.ud.qp.qpn(),
            remote_qkey: QKEY,
        }),
    };
    d.ud.qp.post_send(&[wr]).unwrap();
    let (sq, _, _) = d.ud.qp.sq_ring();
    let mut bytes = vec![2u8];
    // SAFETY: as above.
    bytes.extend((0..128).map(|k| unsafe { sq.as_ptr().add(k).read_volatile() }));
    save("posted_wqes", "2-ud_send_inline", &bytes);
    // Receive WQEs the driver writes (selector bit 7: the RQ).
    for (sel, t) in d.targets().iter().enumerate() {
        let rsge = [d.mr.sge(0, 512), d.mr.sge(1024, 512)];
        for (name, sgl) in [("one", &rsge[..1]), ("two", &rsge[..])] {
            d.dev.set_auto_step(true);
            t.qp.to_reset().unwrap();
            rnic_fuzz::connect(&t.qp, Peer::Itself, d.hca.mac());
            d.dev.set_auto_step(false);
            t.qp.post_recv(&[RecvWr { wr_id: 3, sgl }]).unwrap();
            let (rq, _, stride) = t.qp.rq_ring();
            let mut bytes = vec![0x80 | sel as u8];
            // SAFETY: the first receive WQE of the live RQ ring; volatile reads.
            bytes.extend((0..stride).map(|k| unsafe { rq.as_ptr().add(k).read_volatile() }));
            save("posted_wqes", &format!("{sel}-recv_{name}"), &bytes);
        }
    }
    d.dev.set_auto_step(true);

    // hostile_cqe_eqe: CQEs the device really writes (a SEND to itself and its receive),
    // and EQEs of the events the driver subscribes to.
    let d = LiveDevice::new(Peer::Itself);
    let t = &d.rc;
    let sge = [d.mr.sge(0, 64)];
    t.qp.post_recv(&[RecvWr {
        wr_id: 7,
        sgl: &sge,
    }])
    .unwrap();
    t.qp.post_send(&[SendWr {
        wr_id: 9,
        op: SendOp::Send,
        payload: Payload::Sgl(&sge),
        flags: SendFlags::SIGNALED,
        ud: None,
    }])
    .unwrap();
    d.dev.step();
    let mut records = Vec::new();
    for (kind, cq) in [(0u8, &t.send_cq), (1u8, &t.recv_cq)] {
        let (ring, _) = cq.cqe_ring();
        let ci = cq.consumer_index() as usize % cq.capacity() as usize;
        let mut r = vec![kind];
        // SAFETY: one entry of the live CQ ring; volatile reads.
        r.extend((0..64).map(|k| unsafe { ring.as_ptr().add(ci * 64 + k).read_volatile() }));
        save("hostile_cqe_eqe", &format!("cqe-{kind}"), &r);
        records.extend_from_slice(&r);
    }
    save("hostile_cqe_eqe", "cqe-both", &records);
    for (i, ty) in [
        EventType::PortChange,
        EventType::PageRequest,
        EventType::CqError,
        EventType::WqCatasError,
    ]
    .into_iter()
    .enumerate()
    {
        let mut e = Eqe::of(ty);
        if ty == EventType::PageRequest {
            e.set_num_pages_signed(2);
        }
        for kind in [2u8, 3] {
            let mut r = vec![kind];
            r.extend_from_slice(e.as_bytes());
            save("hostile_cqe_eqe", &format!("eqe-{kind}-{i}"), &r);
        }
    }

    // cm_mads: the CM MADs of rdma_cm's exchange as captured (a UD packet's payload: the
    // MAD starts after Ethernet, IPv4, UDP, BTH and DETH, at byte 62).
    let mut mads = 0;
    for (name, frames) in pcap_frames_all("rdmacm_send") {
        for (i, f) in frames.iter().enumerate() {
            if f.len() >= CM_MAD_AT + MAD_LEN && Mad::parse(&f[CM_MAD_AT..]).is_ok() {
                save(
                    "cm_mads",
                    &format!("{name}-{i}"),
                    &f[CM_MAD_AT..CM_MAD_AT + MAD_LEN],
                );
                mads += 1;
            }
        }
    }
    assert!(mads > 0, "no CM MAD in rdmacm_send.pcap");

    // arp_icmp: frames the driver's own emitters write, as a peer would send them to the
    // fuzzed port, one per input and all in one sequence with resolutions and time.
    use rnic_driver::net::arp::ArpFrame;
    use rnic_driver::net::icmp::{EchoFrame, EchoKind};
    use rnic_driver::net::ndisc::NdFrame;
    use rnic_fuzz::net::{PORT_MAC, PORT_V4, PORT_V6, frame_record};
    let peer_mac = [0x02, 0, 0, 0, 0, 2];
    let peer_v4 = std::net::Ipv4Addr::new(10, 0, 0, 2);
    let peer_v6 = std::net::Ipv6Addr::new(0xFE80, 0, 0, 0, 0, 0, 0, 2);
    let mut frames: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut emit = |name, f: &dyn Fn(&mut [u8]) -> Result<usize, rnic_driver::net::FrameError>| {
        let mut b = [0u8; 256];
        let n = f(&mut b).expect("emit");
        frames.push((name, b[..n].to_vec()));
    };
    emit("arp-request", &|b| {
        ArpFrame::request(peer_mac, peer_v4, PORT_V4[0]).emit(b)
    });
    emit("arp-reply", &|b| {
        ArpFrame::request(PORT_MAC, PORT_V4[0], peer_v4)
            .reply_from(peer_mac)
            .emit(b)
    });
    emit("arp-gratuitous", &|b| {
        ArpFrame::gratuitous(peer_mac, peer_v4).emit(b)
    });
    emit("echo-request", &|b| {
        EchoFrame {
            eth_dst: PORT_MAC,
            eth_src: peer_mac,
            src_ip: peer_v4,
            dst_ip: PORT_V4[1],
            kind: EchoKind::Request,
            ident: 7,
            seq_no: 1,
            ttl: 64,
            data: b"abcdefgh",
        }
        .emit(b)
    });
    emit("nd-solicit", &|b| {
        NdFrame::solicit(peer_mac, peer_v6, PORT_V6[0]).emit(b)
    });
    emit("nd-advert", &|b| {
        NdFrame::solicit(PORT_MAC, PORT_V6[0], peer_v6)
            .advert_from(peer_mac)
            .emit(b)
    });
    let mut seq = Vec::new();
    for (name, f) in &frames {
        let r = frame_record(f);
        save("arp_icmp", name, &r);
        seq.extend_from_slice(&r);
    }
    // Resolve 10.0.0.2 and fe80::2, time (retransmits), the answers, time (ageing), announce.
    seq.extend_from_slice(&[1, 0, 2, 1, 1, 2, 2, 0x64, 0]);
    seq.extend_from_slice(&frame_record(&frames[1].1));
    seq.extend_from_slice(&frame_record(&frames[5].1));
    seq.extend_from_slice(&[1, 0, 2, 2, 0x10, 0x27, 3]);
    save("arp_icmp", "sequence", &seq);

    // raw_sq_wqes: send WQEs the driver writes into a raw SQ (the device does not run).
    {
        use rnic_driver::eth::{RawSq, Tis, TransportDomain};
        let d = LiveDevice::new(Peer::Itself);
        let td = Arc::new(TransportDomain::alloc(&d.hca).unwrap());
        let tis = Arc::new(Tis::create(&td).unwrap());
        let mut frame = [0u8; 60];
        frame[..6].copy_from_slice(&PEER_MAC);
        frame[6..12].copy_from_slice(&d.hca.mac());
        frame[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let sge = [d.mr.sge(0, 100)];
        let cases: [(&str, &[u8], &[rnic_driver::wr::Sge]); 3] = [
            ("inline", &frame, &[]),
            ("l2-header-and-sge", &frame[..18], &sge),
            ("two-sends", &frame[..18], &sge),
        ];
        for (name, headers, sgl) in cases {
            let sq = RawSq::create(&d.pd, &tis, rnic_fuzz::raw::SQ_SENDS).unwrap();
            d.dev.set_auto_step(false);
            sq.post_send(1, headers, sgl, true).unwrap();
            if name == "two-sends" {
                sq.post_send(2, &frame, &[], true).unwrap();
            }
            let (ring, _, _) = sq.sq_ring();
            let mut bytes = vec![0u8];
            // SAFETY: the first four WQEBBs of the live SQ ring; volatile reads.
            bytes.extend((0..256).map(|k| unsafe { ring.as_ptr().add(k).read_volatile() }));
            save("raw_sq_wqes", name, &bytes);
            d.dev.set_auto_step(true);
            d.dev.step();
        }
    }
}
