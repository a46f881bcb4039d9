//! Writes the seed corpus (`fuzz/corpus/<target>/`) from the project's own data: frames of
//! the pcaps in `tests/data/pcaps/` (as they are for `wire_parse`; readdressed to the live
//! device's QPs for `rx_frames`), the commands the driver sends during bring-up (recorded
//! from the emulator), WQEs the driver writes, and CQEs / EQEs the device writes.
//!
//! Run from `fuzz/`: `cargo +nightly run --release --example make_corpus`.

use pcap_file::pcap::PcapReader;
use rnic_driver::cmdq::CommandRecorder;
use rnic_driver::wr::{Payload, RecvWr, SendFlags, SendOp, SendWr};
use rnic_driver::{Hca, HcaConfig};
use rnic_emulator::wire::{IpRepr, Ipv4Repr, PacketRepr, Transport};
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
}
