//! The connection helper over TCP between two threads on `emu:127.0.0.1` and `emu:127.0.0.2`
//! (whose ports are UDP sockets: the packets really cross the kernel), the completion
//! channel's file descriptor under poll(2), and emulated-device options (faults, capture).

mod common;

use common::*;
use rnic_verbs::*;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::sync::mpsc;
use std::time::Duration;

/// A side's "I am done" to its peer, and the peer's to it.
type Done = (mpsc::Sender<()>, mpsc::Receiver<()>);

/// One side's run: connect over TCP, then a SEND each way and an RDMA WRITE into the
/// peer's advertised region; returns what the peer wrote into ours. `done` tells the peer this side has finished, and hears when the peer has.
fn run_side(dev: &str, server: Option<TcpListener>, port: u16, done: &Done) -> Vec<u8> {
    let s = side(dev, QpType::Rc);
    let mr = s.pd.reg_mr(4096, all()).unwrap();
    let r = [mr.sge(0, 64).unwrap()];
    // Receive posted before connecting (INIT is enough), as rc_pingpong does.
    s.qp.to_init(&InitAttr {
        access: AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
        ..InitAttr::default()
    })
    .unwrap();
    s.qp.post_recv(&[RecvWr::new(1, &r)]).unwrap();
    let opts = ConnectOptions {
        io_timeout: Duration::from_secs(20),
        ..ConnectOptions::default()
    };
    let peer = match &server {
        Some(l) => tcp_server_on(&s.qp, Some(&mr), l, &opts).unwrap(),
        None => tcp_client(&s.qp, Some(&mr), ("127.0.0.1", port), &opts).unwrap(),
    };
    assert_eq!(s.qp.state(), QpState::Rts);
    assert_ne!(peer.rkey, 0);
    let me = s.ctx.query_gid(1, 1).unwrap();
    assert_ne!(peer.gid, me);
    let msg = format!("from {dev}");
    s.qp.post_send(&[
        SendWr::send(2, &[]).inline(msg.as_bytes()).signaled(),
        SendWr::write(3, &[], peer.remote().offset(1024))
            .inline(msg.as_bytes())
            .signaled(),
    ])
    .unwrap();
    let w = poll_n(&s.cq, 3);
    assert!(w.iter().all(WorkCompletion::is_success), "{w:?}");
    let recv = w.iter().find(|w| w.opcode() == WcOpcode::Recv).unwrap();
    let got = mr.to_vec(0, recv.byte_len() as usize).unwrap();
    // Wait until the peer's WRITE landed too.
    let deadline = std::time::Instant::now() + T;
    while mr.to_vec(1024, 4).unwrap() != b"from" {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(1));
    }
    // Keep the QP alive until the peer is done with it too (a peer that failed never says
    // so: its thread's panic fails the test after the timeout).
    let _ = done.0.send(());
    let _ = done.1.recv_timeout(T);
    got
}

#[test]
fn tcp_exchange_between_two_threads_over_the_udp_link() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (to_client, from_server) = mpsc::channel();
    let (to_server, from_client) = mpsc::channel();
    let server = std::thread::spawn(move || {
        let done = (to_client, from_client);
        run_side("emu:127.0.0.1", Some(listener), port, &done)
    });
    let client = run_side("emu:127.0.0.2", None, port, &(to_server, from_server));
    let server = server.join().unwrap();
    assert_eq!(client, b"from emu:127.0.0.1");
    assert_eq!(server, b"from emu:127.0.0.2");
}

#[test]
fn tcp_timeouts_are_typed() {
    let s = side("emu0", QpType::Rc);
    let opts = ConnectOptions {
        io_timeout: Duration::from_millis(200),
        ..ConnectOptions::default()
    };
    // Nobody listens on this port (bound and dropped).
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = tcp_client(&s.qp, None, ("127.0.0.1", port), &opts).unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    // No client comes.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let e = tcp_server_on(&s.qp, None, &l, &opts).unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    // A client that says something else.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        use std::io::Write;
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.write_all(&[b'z'; WIRE_LEN]).unwrap();
        std::thread::sleep(Duration::from_millis(300));
    });
    let e = tcp_server_on(&s.qp, None, &l, &opts).unwrap_err();
    assert!(matches!(e, Error::Protocol(_)), "{e}");
    t.join().unwrap();
}

#[test]
fn pingpong_message_round_trip() {
    let e = Endpoint {
        lid: 0,
        qpn: 0xabc,
        psn: 0x123456,
        gid: Gid::from_ipv4(std::net::Ipv4Addr::new(10, 11, 0, 2)),
        rkey: 0,
        addr: 0,
    };
    let w = e.to_pingpong();
    assert_eq!(w.len(), 52);
    assert_eq!(w[51], 0);
    assert_eq!(Endpoint::from_pingpong(&w).unwrap(), e);
    assert!(Endpoint::from_pingpong(b"garbage").is_err());
    assert!(Endpoint::from_wire(b"0000:zz").is_err());
}

#[test]
fn completion_channel_fd_becomes_readable() {
    let a = Context::open("emu0").unwrap();
    let pd = a.alloc_pd().unwrap();
    let chan = a.create_comp_channel().unwrap();
    let cq = a.create_cq(16, Some(&chan)).unwrap();
    let b = side("emu1", QpType::Rc);
    let qp = pd.create_qp(QpType::Rc, &cq, &cq).build().unwrap();
    connect_pair(&qp, &b.qp, &ConnectOptions::default()).unwrap();
    let dst = b.pd.reg_mr(64, rw()).unwrap();
    let poll_fd = |ms: i32| {
        let mut p = libc::pollfd {
            fd: chan.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, ms) };
        assert!(r >= 0);
        r > 0 && p.revents & libc::POLLIN != 0
    };
    cq.req_notify(false).unwrap();
    assert!(!poll_fd(20), "readable before any completion");
    qp.post_send(&[SendWr::write(1, &[], dst.remote(0))
        .inline(b"fd")
        .signaled()])
        .unwrap();
    assert!(poll_fd(10_000), "the fd never became readable");
    let ev = chan
        .get_cq_event(Some(Duration::ZERO))
        .unwrap()
        .expect("event");
    assert_eq!(ev.cqn(), cq.cqn());
    assert!(!poll_fd(0), "the event consumed the signal");
    assert_eq!(poll_one(&cq).wr_id(), 1);
}

#[test]
fn emulated_options_faults_and_capture() {
    let dir = std::env::temp_dir().join(format!("rnic-verbs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("a.pcap");
    let opts = OpenOptions {
        emu: EmuOptions {
            pcap: Some(pcap.clone()),
            ..EmuOptions::default()
        }
        .with_fault_spec("loss=0.05,seed=7")
        .unwrap(),
        ..OpenOptions::default()
    };
    // Addresses of their own, so other tests' devices are not in the way.
    let ca = Context::open_with("emu:127.0.77.1", &opts).unwrap();
    let a = side("emu:127.0.77.1", QpType::Rc);
    assert!(a.ctx.same_device(&ca));
    let b = side("emu:127.0.77.2", QpType::Rc);
    // rc_pingpong's ACK timeout (14: 67 ms): long enough that a slow (debug) build's
    // retransmitted burst is ACKed before the timer fires again.
    connect_pair(&a.qp, &b.qp, &ConnectOptions::default()).unwrap();
    let dst = b.pd.reg_mr(64 * 1024, rw()).unwrap();
    let src = a.pd.reg_mr(64 * 1024, AccessFlags::LOCAL_WRITE).unwrap();
    let data = pattern(64 * 1024, 9);
    src.write(0, &data).unwrap();
    let s = [src.sge_all().unwrap()];
    for i in 0..4 {
        a.qp.post_send(&[SendWr::write(i, &s, dst.remote(0)).signaled()])
            .unwrap();
        let w = poll_one(&a.cq);
        assert_eq!(
            w.status(),
            WcStatus::Success,
            "RC recovers from loss: {w:?}"
        );
    }
    assert_eq!(dst.to_vec(0, data.len()).unwrap(), data);
    let f = ca.fault_counters().expect("fault counters");
    assert!(f.lost > 0, "{f}");
    assert!(b.ctx.fault_counters().is_none());
    let frames = ca.stop_capture().unwrap();
    assert!(frames > 0);
    let len = std::fs::metadata(&pcap).unwrap().len();
    assert!(len > 24, "pcap of {len} bytes");
    let _ = std::fs::remove_dir_all(&dir);
}
