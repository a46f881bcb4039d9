//! `rnic cmatose` and `rnic udaddy` in two processes over the emulated UDP link: both roles,
//! the C programs' output lines and return status, the CM MADs and data on the wire in their
//! order (from a capture), and the failures the C programs report (rejected, unreachable,
//! a message larger than the MTU, IPoIB on RoCE, no client in time).
//!
//! Each test has its own 127.0.0.14x / 127.0.0.16x addresses (an `emu:<IPv4>` device binds
//! UDP 4791 on its address), so tests run in parallel.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const RNIC: &str = env!("CARGO_BIN_EXE_rnic");

/// The runs that move data go one at a time (emulated devices are threads of the
/// processes; on a small machine several at once starve each other).
static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn heavy() -> std::sync::MutexGuard<'static, ()> {
    HEAVY.lock().unwrap_or_else(|e| e.into_inner())
}

fn rnic(args: &[&str]) -> Output {
    Command::new(RNIC)
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run rnic")
}

/// A server started first, then the client; both outputs.
fn pair(server: &[&str], client: &[&str]) -> (Output, Output) {
    let srv = Command::new(RNIC)
        .args(server)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("server");
    // The server must listen before the client's request comes (a REQ or SIDR REQ for a
    // port nobody listens on is refused at once).
    std::thread::sleep(Duration::from_millis(700));
    let c = rnic(client);
    let s = srv.wait_with_output().expect("server output");
    (s, c)
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn lines(o: &Output) -> Vec<String> {
    out(o).lines().map(str::to_owned).collect()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rnic-cmtest-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// cmatose.c's lines, in order.
const CMATOSE_SERVER: &[&str] = &[
    "cmatose: starting server",
    "initiating data transfers",
    "completing sends",
    "receiving data transfers",
    "data transfers complete",
    "cmatose: disconnecting",
    "disconnected",
    "test complete",
    "return status 0",
];
const CMATOSE_CLIENT: &[&str] = &[
    "cmatose: starting client",
    "cmatose: connecting",
    "receiving data transfers",
    "sending replies",
    "data transfers complete",
    "test complete",
    "return status 0",
];
/// udaddy.c's lines, in order.
const UDADDY_SERVER: &[&str] = &[
    "udaddy: starting server",
    "receiving data transfers",
    "sending replies",
    "data transfers complete",
    "test complete",
    "return status 0",
];
const UDADDY_CLIENT: &[&str] = &[
    "udaddy: starting client",
    "udaddy: connecting",
    "initiating data transfers",
    "receiving data transfers",
    "data transfers complete",
    "test complete",
    "return status 0",
];

fn check(o: &Output, want: &[&str], who: &str, peer: &Output) {
    assert_eq!(
        lines(o),
        want,
        "{who}:\n{}{}\npeer:\n{}{}",
        out(o),
        err(o),
        out(peer),
        err(peer)
    );
    assert!(o.status.success(), "{who}: {:?}", o.status);
}

/// A RoCE v2 frame of a capture: BTH opcode, destination QP, and what follows the BTH.
struct Frame {
    opcode: u8,
    dest_qp: u32,
    rest: Vec<u8>,
}

/// The RoCE v2 frames (Ethernet, IPv4, UDP 4791) of a pcap file, in order.
fn roce_frames(pcap: &std::path::Path) -> Vec<Frame> {
    let b = std::fs::read(pcap).unwrap();
    let be = b[0] == 0xa1;
    let u32_at = |at: usize| {
        let w: [u8; 4] = b[at..at + 4].try_into().unwrap();
        if be {
            u32::from_be_bytes(w)
        } else {
            u32::from_le_bytes(w)
        }
    };
    let (mut at, mut frames) = (24, Vec::new());
    while at + 16 <= b.len() {
        let len = u32_at(at + 8) as usize;
        let f = &b[at + 16..(at + 16 + len).min(b.len())];
        at += 16 + len;
        if f.len() < 14 + 20 || f[12..14] != [0x08, 0x00] {
            continue;
        }
        let udp = 14 + usize::from(f[14] & 0x0f) * 4;
        if f.get(udp + 2..udp + 4) != Some(&[0x12, 0xb7][..]) || f.len() < udp + 8 + 12 {
            continue;
        }
        let bth = &f[udp + 8..];
        frames.push(Frame {
            opcode: bth[0],
            dest_qp: u32::from_be_bytes([0, bth[5], bth[6], bth[7]]),
            // Less the 4-byte ICRC.
            rest: bth[12..bth.len().saturating_sub(4)].to_vec(),
        });
    }
    frames
}

/// The CM MADs of a capture by attribute (UD to QP 1: DETH, then the MAD).
fn cm_attrs(frames: &[Frame]) -> Vec<u16> {
    frames
        .iter()
        .filter(|f| f.dest_qp == 1 && f.rest.len() >= 8 + 24)
        .map(|f| u16::from_be_bytes([f.rest[8 + 16], f.rest[8 + 17]]))
        .collect()
}

const REQ: u16 = 0x0010;
const REJ: u16 = 0x0012;
const REP: u16 = 0x0013;
const RTU: u16 = 0x0014;
const DREQ: u16 = 0x0015;
const DREP: u16 = 0x0016;
const SIDR_REQ: u16 = 0x0017;
const SIDR_REP: u16 = 0x0018;

#[test]
fn cmatose_two_processes_both_roles_and_the_wire() {
    let _g = heavy();
    let (a, b) = ("127.0.0.141", "127.0.0.142");
    for (srv, cli) in [(a, b), (b, a)] {
        let pcap = tmp(&format!("cmatose-{cli}.pcap"));
        let pcap_s = pcap.to_str().unwrap();
        let (s, c) = pair(
            &[
                "cmatose",
                "-b",
                srv,
                "-C",
                "20",
                "-S",
                "3000",
                "--timeout",
                "30",
            ],
            &[
                "cmatose", "-s", srv, "-b", cli, "-C", "20", "-S", "3000", "--pcap", pcap_s,
            ],
        );
        check(&s, CMATOSE_SERVER, "server", &c);
        check(&c, CMATOSE_CLIENT, "client", &s);
        let frames = roce_frames(&pcap);
        // REQ, REP, RTU, then the data, then the server's DREQ and the client's DREP.
        assert_eq!(cm_attrs(&frames), [REQ, REP, RTU, DREQ, DREP]);
        // 20 SENDs of 3000 bytes each way: First, Middle, Last at a 1024-byte MTU (RC SEND
        // First 0x00, Middle 0x01, Last 0x02), 60 packets each way.
        let sends = frames.iter().filter(|f| f.opcode <= 0x02).count();
        assert_eq!(sends, 2 * 20 * 3, "{sends} SEND packets");
    }
}

#[test]
fn cmatose_several_connections_and_options() {
    let _g = heavy();
    let (srv, cli) = ("127.0.0.143", "127.0.0.144");
    let (s, c) = pair(
        &[
            "cmatose", "-b", srv, "-c", "3", "-C", "4", "-S", "64", "-p", "7600", "-a", "16", "-m",
        ],
        &[
            "cmatose", "-s", srv, "-b", cli, "-c", "3", "-C", "4", "-S", "64", "-p", "7600", "-t",
            "0x20", "-m",
        ],
    );
    let mut server: Vec<&str> = CMATOSE_SERVER.to_vec();
    server.insert(5, "migrating to new event channel");
    let mut client: Vec<&str> = CMATOSE_CLIENT.to_vec();
    client.insert(5, "migrating to new event channel");
    check(&s, &server, "server", &c);
    check(&c, &client, "client", &s);
}

#[test]
fn udaddy_two_processes_both_roles_and_the_wire() {
    let _g = heavy();
    let (a, b) = ("127.0.0.145", "127.0.0.146");
    for (srv, cli) in [(a, b), (b, a)] {
        let pcap = tmp(&format!("udaddy-{cli}.pcap"));
        let pcap_s = pcap.to_str().unwrap();
        let (s, c) = pair(
            &[
                "udaddy",
                "-b",
                srv,
                "-C",
                "15",
                "-S",
                "1000",
                "--timeout",
                "30",
            ],
            &[
                "udaddy", "-s", srv, "-b", cli, "-C", "15", "-S", "1000", "--pcap", pcap_s,
            ],
        );
        check(&s, UDADDY_SERVER, "server", &c);
        check(&c, UDADDY_CLIENT, "client", &s);
        let frames = roce_frames(&pcap);
        // SIDR REQ, SIDR REP; no connection to end.
        assert_eq!(cm_attrs(&frames), [SIDR_REQ, SIDR_REP]);
        // UD SEND Only with Immediate (0x65): 15 each way, after the SIDR REP, each with the
        // DETH's Q_Key 0x01234567 and 1000 bytes after DETH and immediate.
        let sends: Vec<&Frame> = frames.iter().filter(|f| f.opcode == 0x65).collect();
        assert_eq!(sends.len(), 30);
        for f in &sends {
            assert_eq!(f.rest[..4], [0x01, 0x23, 0x45, 0x67]);
            assert_eq!(f.rest.len(), 8 + 4 + 1000);
        }
        // The immediate is the sender's QPN (DETH source QP).
        let f = sends[0];
        assert_eq!(f.rest[5..8], f.rest[9..12]);
        assert_eq!(f.rest[8], 0);
    }
}

#[test]
fn several_udaddy_connections() {
    let _g = heavy();
    let (srv, cli) = ("127.0.0.147", "127.0.0.148");
    let (s, c) = pair(
        &["udaddy", "-b", srv, "-c", "3", "-C", "5"],
        &[
            "udaddy", "-s", srv, "-b", cli, "-c", "3", "-C", "5", "-P", "udp",
        ],
    );
    check(&s, UDADDY_SERVER, "server", &c);
    check(&c, UDADDY_CLIENT, "client", &s);
}

#[test]
fn refusals_print_the_event_and_return_its_status() {
    let (srv, cli) = ("127.0.0.161", "127.0.0.162");
    // A udaddy server on UDP 7174; cmatose asks for TCP 7174: REJ, invalid service ID (8).
    let pcap = tmp("refused.pcap");
    let (s, c) = pair(
        &["udaddy", "-b", srv, "--timeout", "8"],
        &[
            "cmatose",
            "-s",
            srv,
            "-b",
            cli,
            "-p",
            "7174",
            "--pcap",
            pcap.to_str().unwrap(),
        ],
    );
    assert_eq!(
        lines(&c),
        [
            "cmatose: starting client",
            "cmatose: connecting",
            "cmatose: event: RDMA_CM_EVENT_REJECTED, error: 8",
            "test complete",
            "return status 8",
        ],
        "{}",
        err(&c)
    );
    assert_eq!(c.status.code(), Some(8));
    assert_eq!(cm_attrs(&roce_frames(&pcap)), [REQ, REJ]);
    // The server's wait for a client ends at its --timeout.
    assert_eq!(s.status.code(), Some(110), "{}{}", out(&s), err(&s));
    assert!(
        err(&s).contains("udaddy: rdma_get_cm_event: Connection timed out"),
        "{}",
        err(&s)
    );
    assert!(
        out(&s).ends_with("test complete\nreturn status 110\n"),
        "{}",
        out(&s)
    );

    // A cmatose server on TCP 7471; udaddy asks for UDP 7174: SIDR REP status 1 (service
    // ID not supported), reported as RDMA_CM_EVENT_UNREACHABLE.
    let (srv, cli) = ("127.0.0.163", "127.0.0.164");
    let (s, c) = pair(
        &["cmatose", "-b", srv, "--timeout", "8"],
        &["udaddy", "-s", srv, "-b", cli],
    );
    assert_eq!(
        lines(&c),
        [
            "udaddy: starting client",
            "udaddy: connecting",
            "udaddy: event: RDMA_CM_EVENT_UNREACHABLE, error: 1",
            "test complete",
            "return status 1",
        ],
        "{}",
        err(&c)
    );
    assert_eq!(c.status.code(), Some(1));
    assert!(
        err(&s).contains(
            "cmatose: failure in rdma_get_cm_event in connect events: Connection timed out"
        ),
        "{}",
        err(&s)
    );
    assert_eq!(s.status.code(), Some(110));
}

#[test]
fn local_failures_are_the_c_programs_lines() {
    // A message larger than the port's MTU (1024 on the emulated device): -EINVAL, before
    // any MAD (the route resolves locally).
    let o = rnic(&[
        "udaddy",
        "-s",
        "127.0.0.165",
        "-b",
        "127.0.0.166",
        "-S",
        "5000",
    ]);
    assert_eq!(
        lines(&o),
        [
            "udaddy: starting client",
            "udaddy: connecting",
            "udaddy: message_size 5000 is larger than active mtu 1024",
            "test complete",
            "return status -22",
        ],
        "{}",
        err(&o)
    );
    assert_eq!(o.status.code(), Some(234));
    // IPoIB's port space needs an InfiniBand port: EINVAL from the address resolution.
    let o = rnic(&[
        "udaddy",
        "-s",
        "127.0.0.165",
        "-b",
        "127.0.0.166",
        "-P",
        "ipoib",
    ]);
    assert!(
        err(&o).starts_with("udaddy: failure getting addr: Invalid argument"),
        "{}",
        err(&o)
    );
    assert!(
        out(&o).ends_with("test complete\nreturn status -1\n"),
        "{}",
        out(&o)
    );
    assert_eq!(o.status.code(), Some(255));
    // An unknown name: rdma_getaddrinfo's error.
    let o = rnic(&["cmatose", "-s", "no-such-host.invalid", "-f", "name"]);
    assert!(
        out(&o).contains("rdma_getaddrinfo error: Name or service not known"),
        "{}",
        out(&o)
    );
    assert_eq!(o.status.code(), Some(254));
    // A port space udaddy has no UD for: a usage error of rnic's.
    let o = rnic(&["udaddy", "-p", "0x106"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("carries no UD QPs"), "{}", err(&o));
}
