//! Capture: a device writes its wire traffic to a pcap file (Ethernet link type) that tshark
//! decodes as RRoCE with no malformed frame. Skips with a printed reason when tshark is not
//! installed (`apt-get install tshark`).

mod common;
#[path = "rig/mod.rs"]
mod rig;

use std::process::Command;

use rig::net::{self, Net};
use rig::{Access, SIGNALED, atomic, data, op, raddr, segs};
use rnic_hw_regs::ctx::QpSt;

/// tshark with `flags` on the capture at `path`, dissecting UDP 4791 as RoCE v2 (not its
/// heuristics, not RPC-over-RDMA).
fn tshark(flags: &[&str], path: &std::path::Path) -> std::io::Result<std::process::Output> {
    Command::new("tshark")
        .args(flags)
        .arg("-r")
        .arg(path)
        .args([
            "-o",
            "infiniband.try_heuristic_first:FALSE",
            "--disable-protocol",
            "rpcordma",
        ])
        .output()
}

#[test]
fn capture_decodes_as_rroce_without_malformed_frames() {
    let path = std::env::temp_dir().join(format!("rnic-capture-{}.pcap", std::process::id()));
    let mut n = Net::new();
    let (mut qa, mut qb, mut ca, _cb) = n.pair(QpSt::Rc, 3, 8, 8, 0);
    n.a.h.dev.capture_to(&path).expect("capture file");
    let src = n.a.mr(16384, Access::ALL);
    let dst = n.b.mr(16384, Access::ALL);
    let victim = n.b.mr(64, Access::ALL);
    n.a.fill(&src, 0, &[0x42; 16384]);
    for _ in 0..3 {
        n.b.post_recv(&mut qb, &[(dst.addr, 8192, dst.key)]);
    }
    n.b.post_recv(&mut qb, &[]);
    let sg = data(src.addr, 3000, src.key);
    let ops: Vec<(u8, u32, Vec<u8>)> = vec![
        (op::SEND, 0, sg.clone()),
        (op::SEND_IMM, 7, data(src.addr, 10, src.key)),
        (op::SEND_INVAL, victim.key, data(src.addr, 1, src.key)),
        (op::WRITE, 0, segs(&[raddr(dst.addr, dst.key), sg.clone()])),
        (
            op::WRITE_IMM,
            9,
            segs(&[raddr(dst.addr, dst.key), data(src.addr, 100, src.key)]),
        ),
        (op::READ, 0, segs(&[raddr(dst.addr, dst.key), sg.clone()])),
        (
            op::READ,
            0,
            segs(&[raddr(dst.addr, dst.key), data(src.addr, 5, src.key)]),
        ),
        (
            op::FA,
            0,
            segs(&[
                raddr(dst.addr + 8192, dst.key),
                atomic(1, 0),
                data(src.addr, 8, src.key),
            ]),
        ),
        (
            op::CS,
            0,
            segs(&[
                raddr(dst.addr + 8192, dst.key),
                atomic(5, 1),
                data(src.addr, 8, src.key),
            ]),
        ),
    ];
    for (opcode, imm, s) in &ops {
        n.a.post(&mut qa, *opcode, SIGNALED, *imm, s);
        n.settle();
        assert_eq!(
            n.a.one(&mut ca).cqe_opcode(),
            Ok(rnic_hw_regs::cqe::CqeOpcode::Req)
        );
    }
    let frames = n.a.h.dev.stop_capture().expect("flush");
    assert!(frames >= 20, "{frames} frames captured");
    let out = match tshark(&["-n"], &path) {
        Ok(o) => o,
        Err(e) => {
            println!("skipped: tshark is not installed here ({e})");
            let _ = std::fs::remove_file(&path);
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len() as u64, frames, "one line per frame");
    assert!(!text.contains("Malformed"), "malformed frames:\n{text}");
    assert!(
        lines.iter().all(|l| l.contains("RRoCE")),
        "every frame is RRoCE"
    );
    for want in [
        "Send First",
        "Send Last",
        "Send Only Immediate",
        "Send Only Invalidate",
        "RDMA Write First",
        "RDMA Write Only Immediate",
        "RDMA Read Request",
        "RDMA Read Response First",
        "RDMA Read Response Only",
        "Acknowledge",
        "Fetch Add",
        "Compare Swap",
        "Atomic Acknowledge",
    ] {
        assert!(text.contains(want), "tshark shows {want:?}");
    }
    // The full dissection has no malformed or error expert item either.
    let full = tshark(&["-n", "-V"], &path).expect("tshark ran before");
    let full = String::from_utf8_lossy(&full.stdout);
    assert!(!full.contains("Malformed") && !full.contains("[Severity level: Error]"));
    assert!(full.matches("InfiniBand").count() as u64 >= frames);
    let _ = std::fs::remove_file(&path);
}

/// On an in-process link the devices leave the ICRC out of frames nothing observes; a
/// capture is an observer: every frame it holds, sent or received, at either end, carries a
/// correct ICRC (the capturing end seals what it receives, and sends sealed).
#[test]
fn an_in_process_capture_has_a_correct_icrc_on_every_frame() {
    use rnic_emulator::wire::RocePacket;
    for capture_on_a in [true, false] {
        let path = std::env::temp_dir().join(format!(
            "rnic-capture-icrc-{}-{capture_on_a}.pcap",
            std::process::id()
        ));
        let mut n = Net::new();
        let (mut qa, _qb, mut ca, _cb) = n.pair(QpSt::Rc, 3, 8, 8, 0);
        let dev = if capture_on_a { &n.a.h.dev } else { &n.b.h.dev };
        dev.capture_to(&path).expect("capture file");
        let src = n.a.mr(16384, Access::ALL);
        let dst = n.b.mr(16384, Access::ALL);
        n.a.fill(&src, 0, &[0x5A; 16384]);
        let sg = data(src.addr, 8000, src.key);
        for opcode in [op::WRITE, op::READ] {
            n.a.post(
                &mut qa,
                opcode,
                SIGNALED,
                0,
                &segs(&[raddr(dst.addr, dst.key), sg.clone()]),
            );
            n.settle();
            assert_eq!(
                n.a.one(&mut ca).cqe_opcode(),
                Ok(rnic_hw_regs::cqe::CqeOpcode::Req)
            );
        }
        let dev = if capture_on_a { &n.a.h.dev } else { &n.b.h.dev };
        let count = dev.stop_capture().expect("flush");
        let frames = common::read_frames_at(&path);
        assert_eq!(frames.len() as u64, count);
        // 8 WRITE packets and 8 READ responses from their senders, a READ request, ACKs.
        assert!(frames.len() >= 18, "{} frames", frames.len());
        for (i, f) in frames.iter().enumerate() {
            let p = RocePacket::new_checked(&f[..]).unwrap_or_else(|e| panic!("frame {i}: {e}"));
            p.verify_icrc()
                .unwrap_or_else(|e| panic!("frame {i} (capture on A: {capture_on_a}): {e}"));
        }
        // Both directions are in the capture: what this end sent and what it received.
        let from_a = frames.iter().filter(|f| f[26..30] == net::IP_A).count();
        assert!(
            from_a > 0 && from_a < frames.len(),
            "{from_a} of {}",
            frames.len()
        );
        let _ = std::fs::remove_file(&path);
    }
}

/// A link with faults is never given a frame without its ICRC: a frame it corrupts is still
/// caught by the receiver's ICRC check, dropped and counted, and writes nothing.
#[test]
fn a_frame_corrupted_on_a_faulty_in_process_link_is_dropped_and_counted() {
    let cfg = "corrupt=1,seed=3".parse().expect("fault spec");
    let mut n = Net::faulty(cfg);
    let (mut qa, _qb, _ca, _cb) = n.pair(QpSt::Rc, 3, 8, 8, 0);
    let src = n.a.mr(4096, Access::ALL);
    let dst = n.b.mr(4096, Access::ALL);
    n.a.fill(&src, 0, &[0x77; 4096]);
    n.a.post(
        &mut qa,
        op::WRITE,
        SIGNALED,
        0,
        &segs(&[raddr(dst.addr, dst.key), data(src.addr, 4096, src.key)]),
    );
    // The first transmission only: no time passes, so no retransmission.
    for _ in 0..4 {
        n.a.h.dev.step();
        n.b.h.dev.step();
    }
    let corrupted = n.faults.as_ref().expect("faulty").0.snapshot().corrupted;
    assert_eq!(corrupted, 4, "four 1 KiB WRITE packets, each corrupted");
    let c = n.b.h.dev.counters();
    assert_eq!(c.frames_rx, 0, "no corrupted frame is accepted");
    assert_eq!(c.rx_dropped, corrupted, "each is dropped and counted");
    assert!(c.drops.bad_icrc >= 1, "{:?}", c.drops);
    assert_eq!(n.b.read(&dst, 0, 4096), vec![0u8; 4096]);
}
