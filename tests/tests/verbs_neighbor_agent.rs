//! The emulated pair opened with rnic's own neighbour agent and no `add_neighbor`: each side
//! resolves the other by ARP (emu0's capture shows the exchange, and tshark decodes it),
//! RC and UD traffic run over the resolved path, and a GID nobody answers for is the typed
//! error naming it after the resolver's retries.
//!
//! One test: the pair is one per process, and every step needs both ends.

use rnic_verbs::*;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(10);

fn poll_one(cq: &CompletionQueue) -> WorkCompletion {
    let mut wc = [WorkCompletion::default(); 1];
    assert_eq!(
        cq.poll_blocking(&mut wc, T).expect("poll"),
        1,
        "no completion"
    );
    wc[0]
}

#[test]
fn the_pair_resolves_by_arp_and_runs_rc_and_ud() {
    let pcap = std::env::temp_dir().join(format!("rnic-verbs-agent-{}.pcap", std::process::id()));
    let with_agent = |pcap: Option<std::path::PathBuf>| OpenOptions {
        neighbor_agent: true,
        emu: EmuOptions {
            pcap,
            ..EmuOptions::default()
        },
        ..OpenOptions::default()
    };
    let a = Context::open_with("emu0", &with_agent(Some(pcap.clone()))).expect("emu0");
    let b = Context::open_with("emu1", &with_agent(None)).expect("emu1");
    let gid_b = b.query_gid(1, 1).unwrap();

    // RC: connect_pair resolves each side's path through its agent.
    let (pa, pb) = (a.alloc_pd().unwrap(), b.alloc_pd().unwrap());
    let (ca, cb) = (
        a.create_cq(16, None).unwrap(),
        b.create_cq(16, None).unwrap(),
    );
    let qa = pa.create_qp(QpType::Rc, &ca, &ca).build().unwrap();
    let qb = pb.create_qp(QpType::Rc, &cb, &cb).build().unwrap();
    connect_pair(&qa, &qb, &ConnectOptions::default()).expect("connect_pair");
    let ka = a.neighbor_agent_counters().expect("emu0 runs an agent");
    let kb = b.neighbor_agent_counters().expect("emu1 runs an agent");
    assert_eq!(ka.resolver.requests, 1, "emu0 asked for emu1: {ka:?}");
    assert_eq!(kb.responder.arp_replies, 1, "emu1 answered: {kb:?}");
    // emu1 learned emu0 from the request: its own resolution needed no ARP.
    assert_eq!(kb.resolver.requests, 0, "{kb:?}");
    assert_eq!(a.resolve_mac(&gid_b).unwrap(), b.mac());

    let src = pa.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let dst = pb.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    src.write(0, b"resolved by arp").unwrap();
    qb.post_recv(&[RecvWr::new(7, &[dst.sge(0, 64).unwrap()])])
        .unwrap();
    qa.post_send(&[SendWr::send(1, &[src.sge(0, 15).unwrap()]).signaled()])
        .unwrap();
    assert!(poll_one(&ca).is_success());
    let w = poll_one(&cb);
    assert_eq!((w.status(), w.byte_len()), (WcStatus::Success, 15));
    assert_eq!(dst.to_vec(0, 15).unwrap(), b"resolved by arp");

    // UD: the address handle's MAC comes from the agent's table.
    let (ua, ub) = (
        pa.create_qp(QpType::Ud, &ca, &ca).build().unwrap(),
        pb.create_qp(QpType::Ud, &cb, &cb).build().unwrap(),
    );
    connect_pair(&ua, &ub, &ConnectOptions::default()).expect("UD to RTS");
    let ah = pa.create_ah(&AhAttr::new(gid_b, 1)).unwrap();
    assert_eq!(ah.dmac(), b.mac());
    ub.post_recv(&[RecvWr::new(9, &[dst.sge(0, 40 + 64).unwrap()])])
        .unwrap();
    ua.post_send(&[SendWr::send(2, &[src.sge(0, 15).unwrap()])
        .ud(&ah, ub.qp_num(), DEFAULT_QKEY)
        .signaled()])
        .unwrap();
    assert!(poll_one(&ca).is_success());
    let w = poll_one(&cb);
    assert_eq!(
        (w.status(), w.wr_id(), w.byte_len()),
        (WcStatus::Success, 9, 40 + 15)
    );

    // A GID on the subnet that nobody holds: the typed error after the 3 requests.
    let ghost = Gid::from_ipv4([192, 0, 2, 99].into());
    let t0 = Instant::now();
    let e = a.resolve_mac(&ghost).unwrap_err();
    assert!(
        matches!(&e, Error::Unresolved { gid, .. } if *gid == ghost),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(text.contains("192.0.2.99 did not answer 3"), "{text}");
    assert!(t0.elapsed() >= Duration::from_secs(2), "{:?}", t0.elapsed());
    assert!(pa.create_ah(&AhAttr::new(ghost, 1)).is_err());
    // add_neighbor stays the override.
    a.add_neighbor(ghost, [2, 0, 0, 0, 0, 0x99]);
    assert_eq!(a.resolve_mac(&ghost).unwrap(), [2, 0, 0, 0, 0, 0x99]);

    let frames = a.stop_capture().unwrap();
    assert!(frames >= 6, "{frames} frames");
    let fields = ["arp.opcode", "arp.src.proto_ipv4", "arp.dst.proto_ipv4"];
    let lines = rnic_tests::tshark_fields(&pcap, "arp", &fields);
    std::fs::remove_file(&pcap).ok();
    let Some(lines) = lines else { return };
    for want in [
        "1\t192.0.2.1\t192.0.2.2",  // emu0 asks for emu1
        "2\t192.0.2.2\t192.0.2.1",  // emu1 answers
        "1\t192.0.2.1\t192.0.2.99", // the requests nobody answered
    ] {
        assert!(lines.iter().any(|l| l == want), "{want:?} not in {lines:?}");
    }
    let ghost_requests = lines.iter().filter(|l| l.ends_with("192.0.2.99")).count();
    assert_eq!(ghost_requests, 3, "{lines:?}");
}
