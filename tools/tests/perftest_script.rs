//! `rnic write-bw` and `rnic read-lat` as servers, driven over TCP by a script of what
//! perftest 4.5's `ib_write_bw` / `ib_read_lat` clients send and expect, byte for byte (from
//! `src/write_bw.c`, `src/read_lat.c` and `src/perftest_communication.c`). The server side of
//! these tests is passive on the RDMA side, so the script needs no QP: this checks the
//! out-of-band sequence rnic speaks against the real tool's, not against rnic itself.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const RNIC: &str = env!("CARGO_BIN_EXE_rnic");

/// perftest's `KEY_PRINT_FMT_GID` message: 107 characters and a NUL.
fn key_msg(qpn: u32, psn: u32, rkey: u32, vaddr: u64, gid: [u8; 16]) -> [u8; 108] {
    let mut s = format!(
        "{:04x}:{:04x}:{qpn:06x}:{psn:06x}:{rkey:08x}:{vaddr:016x}:",
        0, 16
    );
    for b in gid {
        s.push_str(&format!("{b:02x}:"));
    }
    s.push_str(&format!("{:08x}:", 0));
    assert_eq!(s.len(), 107);
    let mut m = [0u8; 108];
    m[..107].copy_from_slice(s.as_bytes());
    m
}

/// `rnic <tool>` as the server on `dev`, listening on `port`, its output captured.
fn server(tool: &str, dev: &str, port: u16, timeout: &str) -> Child {
    Command::new(RNIC)
        .args([
            tool,
            "-d",
            dev,
            "-p",
            &port.to_string(),
            "--timeout",
            timeout,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn connect(port: u16) -> TcpStream {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => {
                s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                return s;
            }
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("connect: {e}"),
        }
    }
}

/// Client side of `ctx_xchg_data`: write ours, read theirs.
fn xchg(s: &mut TcpStream, mine: &[u8]) -> Vec<u8> {
    s.write_all(mine).unwrap();
    let mut r = vec![0u8; mine.len()];
    s.read_exact(&mut r).unwrap();
    r
}

/// The closing `"done"` exchange both sides send after the last hand shake.
fn close(s: &mut TcpStream) {
    s.write_all(b"done\0").unwrap();
    let mut done = [0u8; 5];
    s.read_exact(&mut done).unwrap();
    assert_eq!(&done, b"done\0");
}

fn gid_v4(a: [u8; 4]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&a);
    g
}

/// Versions, system data and MTU, as perftest's client of version `version` does them, and
/// from 6.28 on the parameter negotiation with the block `ours`; returns the server's
/// version bytes and, when negotiated, its block.
fn preamble(s: &mut TcpStream, version: &[u8; 4], ours: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut v = [0u8; 16];
    v[..4].copy_from_slice(version);
    let theirs = xchg(s, &v);
    // rnic speaks perftest 6.29 by default (older perftest reads only the number).
    assert_eq!(&theirs[..5], b"6.29\0", "{theirs:?}");
    assert_eq!(xchg(s, &4096i32.to_be_bytes()), 4096i32.to_be_bytes());
    assert_eq!(xchg(s, &64i32.to_be_bytes()), 64i32.to_be_bytes());
    // The MTU enum as text, 2 bytes: rxe's 1024 is "3"; the server answers its own, 4096
    // ("5") on lo, and both go on with the smaller.
    assert_eq!(xchg(s, b"3\0"), b"5\0");
    let negotiated = if version.as_slice() >= b"6.28".as_slice() {
        xchg(s, ours)
    } else {
        Vec::new()
    };
    (theirs, negotiated)
}

/// `struct perftest_parameters_negotiate` (320 bytes with HAVE_MLX5DV) as perftest 6.29's
/// `ib_write_bw` with default flags fills it, by the C struct's offsets: seven big-endian
/// ints (test_method, connection_type, verb WRITE = 2, tst BW = 1, atomicType,
/// test_type, report_fmt MBS = 1), size at 32 and iters at 40 (big-endian u64), num_of_qps
/// at 52, duration at 56, the raw ibv_device_attr at 80 (max_qp_rd_atom at 80 + 144, host
/// order), the mlx5dv comp mask at 312.
fn write_bw_block() -> [u8; 320] {
    let mut b = [0u8; 320];
    let int =
        |b: &mut [u8; 320], at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_be_bytes());
    int(&mut b, 8, 2);
    int(&mut b, 12, 1);
    int(&mut b, 24, 1);
    b[32..40].copy_from_slice(&65536u64.to_be_bytes());
    b[40..48].copy_from_slice(&5000u64.to_be_bytes());
    int(&mut b, 52, 1);
    int(&mut b, 56, 5);
    b[80 + 144..80 + 148].copy_from_slice(&8u32.to_ne_bytes());
    b
}

fn field(msg: &[u8], i: usize) -> u64 {
    let text = std::str::from_utf8(&msg[..107]).unwrap();
    u64::from_str_radix(text.split(':').nth(i).unwrap(), 16).unwrap()
}

#[test]
fn write_bw_server_follows_perftest_client_script() {
    let port = 18781u16;
    let srv = server("write-bw", "emu:127.0.0.81", port, "20");
    let mut s = connect(port);
    // A perftest 6.29 client: the parameter block crosses, and the server's says the same
    // test (any differing field would be a mismatch that ends perftest).
    let ours = write_bw_block();
    let (_, theirs) = preamble(&mut s, b"6.29", &ours);
    assert_eq!(theirs.len(), 320);
    assert_eq!(theirs[..80], ours[..80], "the test parameters");
    let max_qp_rd_atom = u32::from_ne_bytes(theirs[80 + 144..80 + 148].try_into().unwrap());
    assert!(max_qp_rd_atom >= 1, "the server's device attributes");
    assert_eq!(&theirs[80..82], b"14", "fw_ver starts the attributes");
    let me = key_msg(
        0x123,
        0xabcdef,
        0x4242,
        0x7f00_0000_1000,
        gid_v4([127, 0, 0, 82]),
    );
    // Per QP: the addresses; then again after ctx_connect; then the barrier after RTR.
    let theirs = xchg(&mut s, &me);
    assert_eq!(theirs.len(), 108);
    assert_eq!(theirs[107], 0);
    assert_eq!(field(&theirs, 0), 0, "LID");
    // 16, capped by the client's max_qp_rd_atom of 8 (perftest's compare_ibv_device).
    assert_eq!(field(&theirs, 1), 8, "OUT_READS");
    assert!(field(&theirs, 2) > 0, "QPN");
    let gid: Vec<u64> = (6..22).map(|i| field(&theirs, i)).collect();
    assert_eq!(
        gid,
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 81]
    );
    assert_eq!(xchg(&mut s, &me), theirs);
    assert_eq!(xchg(&mut s, &me), theirs);
    // (the client runs here) then: hand shake, the BW report, the closing hand shake, "done".
    assert_eq!(xchg(&mut s, &me), theirs);
    let size = xchg(&mut s, &65536u64.to_be_bytes());
    let iters = xchg(&mut s, &5000u64.to_be_bytes());
    for x in [1234.5f64, 1000.25, 0.016] {
        xchg(&mut s, &x.to_bits().to_be_bytes());
    }
    // The server sends its own (empty) report.
    assert_eq!(size, 0u64.to_be_bytes());
    assert_eq!(iters, 0u64.to_be_bytes());
    assert_eq!(xchg(&mut s, &me), theirs);
    close(&mut s);
    let out = srv.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The server prints the client's result, in perftest's REPORT_FMT.
    assert!(
        text.contains(" 65536      5000             1234.50            1000.25\t\t   0.016000"),
        "{text}"
    );
    assert!(
        text.contains(
            " remote address: LID 0000 QPN 0x0123 PSN 0xabcdef RKey 0x004242 VAddr 0x007f0000001000"
        ),
        "{text}"
    );
}

#[test]
fn read_lat_server_follows_perftest_client_script() {
    let port = 18782u16;
    let srv = server("read-lat", "emu:127.0.0.83", port, "20");
    let mut s = connect(port);
    // A perftest 4.5 client (6.06): no negotiation, the QP messages follow the MTU.
    preamble(&mut s, b"6.06", &[]);
    let me = key_msg(0x77, 0x1, 0x99, 0x1000, gid_v4([127, 0, 0, 84]));
    // Latency tests: one extra hand shake first, then per QP twice, then the barrier.
    let first = xchg(&mut s, &me);
    for _ in 0..3 {
        assert_eq!(xchg(&mut s, &me), first);
    }
    // read_lat's server closes at once: its hand shake waits for the client's (after the
    // run), then "done".
    assert_eq!(xchg(&mut s, &me), first);
    close(&mut s);
    let out = srv.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_perftest_peer_older_than_5_70_is_refused() {
    let port = 18783u16;
    let srv = server("write-bw", "emu:127.0.0.85", port, "5");
    let mut s = connect(port);
    let mut v = [0u8; 16];
    v[..4].copy_from_slice(b"5.60");
    xchg(&mut s, &v);
    let out = srv.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("older than 5.7"), "{err}");
}
