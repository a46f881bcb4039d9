//! Capture: a device writes its wire traffic to a pcap file (Ethernet link type) that tshark
//! decodes as RRoCE with no malformed frame. Skips with a printed reason when tshark is not
//! installed (`apt-get install tshark`).

mod common;
#[path = "rig/mod.rs"]
mod rig;

use std::process::Command;

use rig::net::Net;
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
