//! `rnic cmatose` and `rnic udaddy` in two processes over the emulated UDP link: both roles,
//! the C programs' output lines and return status, the CM MADs and data on the wire in their
//! order (from a capture), and the failures the C programs report (rejected, unreachable,
//! a message larger than the MTU, IPoIB on RoCE, no client in time).
//!
//! Each test has its own 127.0.0.14x / 127.0.0.16x addresses (an `emu:<IPv4>` device binds
//! UDP 4791 on its address), so tests run in parallel.

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

mod common;
#[path = "common/pcap.rs"]
mod pcap;

use common::{heavy, rnic, spawn, text};
use pcap::{RocePacket, roce_packets};

/// A server started first, then the client; both outputs.
fn pair(server: &[&str], client: &[&str]) -> (Output, Output) {
    let srv = spawn(server);
    // The server must listen before the client's request comes (a REQ or SIDR REQ for a
    // port nobody listens on is refused at once).
    std::thread::sleep(Duration::from_millis(700));
    let c = rnic(client);
    let s = srv.wait_with_output().expect("server output");
    (s, c)
}

fn out(o: &Output) -> String {
    text(o).0
}

fn err(o: &Output) -> String {
    text(o).1
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

/// A run that failed as the C program does: `says` on stderr, then `test complete` and
/// `return status N` as its last lines, and N's low 8 bits as the exit status.
fn failed(o: &Output, says: &str, status: i32) {
    assert!(err(o).contains(says), "{}", err(o));
    let end = format!("test complete\nreturn status {status}\n");
    assert!(out(o).ends_with(&end), "{}", out(o));
    assert_eq!(o.status.code(), Some(i32::from(status as u8)));
}

/// The CM MADs of a capture by attribute (UD to QP 1: DETH, then the MAD).
fn cm_attrs(frames: &[RocePacket]) -> Vec<u16> {
    frames
        .iter()
        .filter(|f| f.dest_qp() == 1 && f.rest().len() >= 8 + 24)
        .map(|f| u16::from_be_bytes([f.rest()[8 + 16], f.rest()[8 + 17]]))
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

/// `cmd` between `a` and `b` in both roles with `-C count -S size`, the client capturing:
/// both sides print `lines` (server, client) and succeed; returns each run's frames.
fn both_roles(
    cmd: &str,
    (a, b): (&str, &str),
    (count, size): (&str, &str),
    lines: (&[&str], &[&str]),
) -> Vec<Vec<RocePacket>> {
    let mut runs = Vec::new();
    for (srv, cli) in [(a, b), (b, a)] {
        let pcap = tmp(&format!("{cmd}-{cli}.pcap"));
        let pcap_s = pcap.to_str().unwrap();
        let flags = ["-C", count, "-S", size];
        let mut server = vec![cmd, "-b", srv, "--timeout", "30"];
        server.extend(flags);
        let mut client = vec![cmd, "-s", srv, "-b", cli, "--pcap", pcap_s];
        client.extend(flags);
        let (s, c) = pair(&server, &client);
        check(&s, lines.0, "server", &c);
        check(&c, lines.1, "client", &s);
        runs.push(roce_packets(&pcap));
    }
    runs
}

#[test]
fn cmatose_two_processes_both_roles_and_the_wire() {
    let _g = heavy();
    let lines = (CMATOSE_SERVER, CMATOSE_CLIENT);
    let addrs = ("127.0.0.141", "127.0.0.142");
    for frames in both_roles("cmatose", addrs, ("20", "12000"), lines) {
        // REQ, REP, RTU, then the data, then the server's DREQ and the client's DREP.
        assert_eq!(cm_attrs(&frames), [REQ, REP, RTU, DREQ, DREP]);
        // 20 SENDs of 12000 bytes each way: First, Middle, Last at the 4096-byte MTU of a port
        // on lo (RC SEND First 0x00, Middle 0x01, Last 0x02), 60 packets each way.
        let sends = frames.iter().filter(|f| f.opcode() <= 0x02).count();
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
    let lines = (UDADDY_SERVER, UDADDY_CLIENT);
    let addrs = ("127.0.0.145", "127.0.0.146");
    for frames in both_roles("udaddy", addrs, ("15", "1000"), lines) {
        // SIDR REQ, SIDR REP; no connection to end.
        assert_eq!(cm_attrs(&frames), [SIDR_REQ, SIDR_REP]);
        // UD SEND Only with Immediate (0x65): 15 each way, after the SIDR REP, each with the
        // DETH's Q_Key 0x01234567 and 1000 bytes after DETH and immediate.
        let sends: Vec<&RocePacket> = frames.iter().filter(|f| f.opcode() == 0x65).collect();
        assert_eq!(sends.len(), 30);
        for f in &sends {
            assert_eq!(f.rest()[..4], [0x01, 0x23, 0x45, 0x67]);
            assert_eq!(f.rest().len(), 8 + 4 + 1000);
        }
        // The immediate is the sender's QPN (DETH source QP).
        let f = sends[0];
        assert_eq!(f.rest()[5..8], f.rest()[9..12]);
        assert_eq!(f.rest()[8], 0);
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
    assert_eq!(cm_attrs(&roce_packets(&pcap)), [REQ, REJ]);
    // The server's wait for a client ends at its --timeout.
    let says = "udaddy: failure in rdma_get_cm_event in connect events: Connection timed out";
    failed(&s, says, 110);

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
    let says = "cmatose: failure in rdma_get_cm_event in connect events: Connection timed out";
    failed(&s, says, 110);
}

#[test]
fn local_failures_are_the_c_programs_lines() {
    // A message larger than the port's MTU (4096 on an emulated device on lo): -EINVAL, before
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
            "udaddy: message_size 5000 is larger than active mtu 4096",
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
    failed(&o, "udaddy: failure getting addr: Invalid argument", -1);
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
