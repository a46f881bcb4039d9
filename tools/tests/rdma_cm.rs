//! The commands that connect through the connection manager, end to end: `rnic rping` and
//! the perf commands' `-R`, two processes over the emulated UDP link (both roles, a lossy
//! link, rping's persistent server), the in-process pair for every perf test, and the bad
//! paths (a port nobody listens on, a port taken, rping's argument errors).
//!
//! Each test uses its own addresses in 127.0.0.151 ..= 127.0.0.170 (an `emu:<IPv4>` device
//! binds UDP 4791 on its address), so the tests of this file and `cli.rs` never share a
//! device. A client
//! address is not reused for a new connection to a live server process within its CM's
//! timewait: each process's emulated device numbers its QPs from the same start, and a REQ
//! from a QP number the server's CM still remembers is rejected as a stale connection.

mod common;

use common::{heavy, rnic, spawn, text};
use std::process::Output;
use std::time::Duration;

/// A server started, given time to listen, then a client; both outputs.
fn pair(server: &[&str], client: &[&str]) -> (Output, Output) {
    let s = spawn(server);
    std::thread::sleep(Duration::from_millis(300));
    let c = rnic(client);
    (s.wait_with_output().expect("server output"), c)
}

#[track_caller]
fn both_succeed(s: &Output, c: &Output) -> ((String, String), (String, String)) {
    let (st, ct) = (text(s), text(c));
    assert!(
        s.status.success() && c.status.success(),
        "server {:?}: {}{}\nclient {:?}: {}{}",
        s.status,
        st.0,
        st.1,
        c.status,
        ct.0,
        ct.1
    );
    (st, ct)
}

/// The `--emu-counters` line's value of `name`.
fn counter(out: &str, name: &str) -> u64 {
    let line = out
        .lines()
        .find(|l| l.starts_with("link emu:"))
        .unwrap_or_else(|| panic!("no counters in {out}"));
    let w: Vec<&str> = line.split_whitespace().collect();
    let i = w.iter().position(|x| *x == name).expect("counter name");
    w[i + 1].parse().expect("a number")
}

/// The text rping's client pings with, ping `n` of size 64 (`rping_test_client`).
fn ping_text(n: u32) -> String {
    let prefix = format!("rdma-ping-{n}: ");
    let mut c = b'A' + (n % 58) as u8;
    let mut s = prefix.clone();
    while s.len() < 63 {
        s.push(c as char);
        c = if c >= b'z' { b'A' } else { c + 1 };
    }
    s
}

#[test]
fn rping_two_processes_both_roles_validated_and_verbose() {
    let _g = heavy();
    for (srv, cli) in [
        ("127.0.0.151", "127.0.0.152"),
        ("127.0.0.152", "127.0.0.151"),
    ] {
        let (s, c) = pair(
            &["rping", "-s", "-a", srv, "-v", "--timeout", "20"],
            &[
                "rping",
                "-c",
                "-I",
                cli,
                "-a",
                srv,
                "-C",
                "100",
                "-V",
                "-v",
                "--timeout",
                "20",
            ],
        );
        let ((so, se), (co, ce)) = both_succeed(&s, &c);
        let pings: Vec<&str> = co.lines().collect();
        assert_eq!(pings.len(), 100, "{co}");
        for (n, l) in pings.iter().enumerate() {
            assert_eq!(*l, format!("ping data: {}", ping_text(n as u32)));
        }
        let served: Vec<String> = so.lines().map(|l| l.replacen("server ", "", 1)).collect();
        assert_eq!(served, pings, "{so}");
        assert_eq!(
            se, "server DISCONNECT EVENT...\nwait for RDMA_READ_ADV state 10\n",
            "{se}"
        );
        assert_eq!(ce, "client DISCONNECT EVENT...\n");
    }
}

/// The client's link loses a twentieth of its frames (seeded): the CM's retries and RC's
/// retransmissions carry the connection and the pings through, validated.
#[test]
fn rping_over_a_lossy_link() {
    let _g = heavy();
    let (s, c) = pair(
        &["rping", "-s", "-a", "127.0.0.153", "--timeout", "60"],
        &[
            "rping",
            "-c",
            "-I",
            "127.0.0.154",
            "-a",
            "127.0.0.153",
            "-C",
            "10",
            "-V",
            "--timeout",
            "60",
            "--emu-faults",
            "loss=0.05,seed=3",
            "--emu-counters",
        ],
    );
    let (_, (co, _)) = both_succeed(&s, &c);
    // The client resent what it lost; a lost ACK or READ response shows as a duplicate.
    let resent = ["retransmits", "timeouts", "duplicates"].map(|n| counter(&co, n));
    assert!(resent.iter().sum::<u64>() > 0, "nothing was lost: {co}");
}

/// A port nobody listens on (the server's CM runs, on another port): rping's REJ line
/// and status 255; the server then serves the next client as if nothing happened. A second
/// server on the taken address and port: rping's address-in-use line and status 255.
#[test]
fn rping_rejected_and_address_in_use() {
    let _g = heavy();
    let server = spawn(&[
        "rping",
        "-s",
        "-a",
        "127.0.0.155",
        "-p",
        "7300",
        "--timeout",
        "20",
    ]);
    std::thread::sleep(Duration::from_millis(300));
    let c = rnic(&[
        "rping",
        "-c",
        "-I",
        "127.0.0.156",
        "-a",
        "127.0.0.155",
        "-p",
        "7301",
        "-C",
        "1",
        "--timeout",
        "20",
    ]);
    assert_eq!(c.status.code(), Some(255), "{:?}", text(&c));
    assert_eq!(
        text(&c),
        (
            String::new(),
            "cma event RDMA_CM_EVENT_REJECTED, error 8\n".into()
        )
    );
    let again = rnic(&["rping", "-s", "-a", "127.0.0.155", "-p", "7300"]);
    assert_eq!(again.status.code(), Some(255), "{:?}", text(&again));
    assert_eq!(text(&again).1, "rdma_bind_addr: Address already in use\n");
    let c = rnic(&[
        "rping",
        "-c",
        "-I",
        "127.0.0.157",
        "-a",
        "127.0.0.155",
        "-p",
        "7300",
        "-C",
        "3",
        "-V",
        "--timeout",
        "20",
    ]);
    let s = server.wait_with_output().unwrap();
    both_succeed(&s, &c);
}

#[test]
fn rping_argument_errors_as_rping() {
    let o = rnic(&["rping"]);
    assert_eq!(o.status.code(), Some(22));
    assert!(
        text(&o).0.starts_with("rnic rping -s [-vVd]"),
        "{:?}",
        text(&o)
    );
    let o = rnic(&["rping", "-c", "-S", "25", "-C", "-1", "-a", "127.0.0.1"]);
    assert_eq!(o.status.code(), Some(22));
    assert_eq!(
        text(&o).1,
        "Invalid size 25 (valid range is 26 to 65536)\nInvalid count -1\n"
    );
    let o = rnic(&["rping", "-c", "-S", "65536", "-a", "127.0.0.1"]);
    assert_eq!(o.status.code(), Some(22));
    let o = rnic(&["rping", "-c", "-a", "no-such-host.invalid"]);
    assert_eq!(o.status.code(), Some(254));
    assert!(
        text(&o).0.starts_with("getaddrinfo failed ("),
        "{:?}",
        text(&o)
    );
    // A client needs the server's address.
    let o = rnic(&["rping", "-c"]);
    assert_eq!(o.status.code(), Some(22));
}

/// `rnic <test> -R` in both roles over the UDP link: perftest's comm QP carries the
/// exchanges, rdma_cm connects the test QPs; the tables say so.
fn perf_rdma_cm_both_roles(cmd: &str, a: &str, b: &str, extra: &[&str]) {
    for (srv, cli) in [(a, b), (b, a)] {
        let sd = format!("emu:{srv}");
        let cd = format!("emu:{cli}");
        let mut sa = vec![cmd, "-R", "-d", &sd, "--timeout", "20"];
        sa.extend_from_slice(extra);
        let mut ca = sa.clone();
        ca[3] = &cd;
        ca.push(srv);
        let (s, c) = pair(&sa, &ca);
        let ((so, _), (co, _)) = both_succeed(&s, &c);
        for o in [&so, &co] {
            assert!(o.contains(" rdma_cm QPs\t : ON\n"), "{o}");
            assert!(o.contains(" Data ex. method : rdma_cm"), "{o}");
            // The QP messages came over the comm QP (binary), printed as perftest does.
            assert!(
                o.contains(" local address: LID 0000 QPN 0x")
                    && o.contains(" remote address: LID 0000 QPN 0x"),
                "{o}"
            );
        }
        assert!(
            so.contains(" Waiting for client rdma_cm QP to connect\n"),
            "{so}"
        );
        // A result row (its first field a size) on both sides.
        for o in [&so, &co] {
            assert!(
                o.lines().any(|l| l
                    .split_whitespace()
                    .next()
                    .is_some_and(|w| w.parse::<u64>().is_ok())),
                "{o}"
            );
        }
    }
}

#[test]
fn write_bw_rdma_cm_two_processes_both_roles() {
    let _g = heavy();
    perf_rdma_cm_both_roles(
        "write-bw",
        "127.0.0.158",
        "127.0.0.159",
        &["-n", "200", "-s", "8192", "-q", "2"],
    );
}

/// As perftest 4.5 (6.06) speaks it: no negotiation, 56-byte QP messages on the comm QP
/// (write-bw above runs 6.29's: the negotiation over the comm QP, 64-byte messages).
#[test]
fn send_lat_rdma_cm_two_processes_both_roles() {
    let _g = heavy();
    perf_rdma_cm_both_roles(
        "send-lat",
        "127.0.0.160",
        "127.0.0.161",
        &["-n", "200", "--perftest-version", "6.06"],
    );
}

/// `-R` through a link losing a fiftieth of the client's frames: perftest's ACK timeout
/// (14, set through rdma_cm) brings the run through.
///
/// The client's last frame is the DREP to the server's DREQ, and it exits after sending it:
/// when that DREP is lost, nobody answers the server's resent DREQs, and its CM reports
/// the disconnection only when their retries run out, 16 x 4.3 s (rdma_cm's response
/// timeout 20, 15 retries) after the first. The server's `--timeout` waits that long, as
/// perftest's server would (it waits for the DISCONNECTED event without a limit).
#[test]
fn write_bw_rdma_cm_over_a_lossy_link() {
    let _g = heavy();
    let common = ["-R", "-n", "200", "-s", "8192"];
    let mut sa = vec!["write-bw", "-d", "emu:127.0.0.162", "--timeout", "90"];
    sa.extend_from_slice(&common);
    let mut ca = vec!["write-bw", "-d", "emu:127.0.0.163", "--timeout", "30"];
    ca.extend_from_slice(&common);
    ca.extend_from_slice(&[
        "--emu-faults",
        "loss=0.02,seed=5",
        "--emu-counters",
        "127.0.0.162",
    ]);
    let (s, c) = pair(&sa, &ca);
    let (_, (co, _)) = both_succeed(&s, &c);
    assert!(counter(&co, "retransmits") > 0, "nothing was lost: {co}");
}

/// Every perf test with `-R` on the in-process pair (emu0 / emu1).
#[test]
fn every_perf_test_with_rdma_cm_in_loopback() {
    let _g = heavy();
    for cmd in [
        "write-bw",
        "read-bw",
        "send-bw",
        "atomic-bw",
        "write-lat",
        "read-lat",
        "send-lat",
        "atomic-lat",
    ] {
        let o = rnic(&[cmd, "--loopback", "-R", "-n", "50", "--timeout", "20"]);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{cmd}: {out}{err}");
        assert!(out.contains(" Data ex. method : rdma_cm"), "{cmd}: {out}");
    }
}

/// `-R` with a server nobody connects to, and with UC (which librdmacm does not do).
#[test]
fn rdma_cm_errors_are_one_line() {
    let o = rnic(&["write-bw", "-R", "-c", "UC", "--loopback"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(text(&o).1, "rnic: UC is not supported in librdmacm\n");
    let o = rnic(&["send-bw", "-R", "-d", "emu:127.0.0.164", "--timeout", "1"]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o).1;
    assert!(
        err.ends_with("timed out after 1s waiting for the client's rdma_cm connection\n"),
        "{err}"
    );
}

/// `-P`: one server process serves a client, then two at once (each from an address of its
/// own), until it is stopped.
#[test]
fn rping_persistent_server() {
    let _g = heavy();
    let mut server = spawn(&["rping", "-s", "-P", "-a", "127.0.0.167", "-v"]);
    std::thread::sleep(Duration::from_millis(300));
    let client = |from: &'static str| {
        move || {
            rnic(&[
                "rping",
                "-c",
                "-I",
                from,
                "-a",
                "127.0.0.167",
                "-C",
                "20",
                "-V",
                "--timeout",
                "20",
            ])
        }
    };
    let first = client("127.0.0.168")();
    let both = [
        std::thread::spawn(client("127.0.0.169")),
        std::thread::spawn(client("127.0.0.170")),
    ]
    .map(|t| t.join().unwrap());
    server.kill().unwrap();
    let s = server.wait_with_output().unwrap();
    for c in std::iter::once(&first).chain(&both) {
        assert!(c.status.success(), "{:?}", text(c));
    }
    let (so, se) = text(&s);
    assert_eq!(so.lines().count(), 60, "{so}");
    assert_eq!(
        se.matches("server DISCONNECT EVENT...\n").count(),
        3,
        "{se}"
    );
}
