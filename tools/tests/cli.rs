//! The `rnic` binary end to end: the loopback table, every perf test with its JSON, two
//! processes over the emulated UDP link (pingpong with `-c` in both roles, write-bw), the
//! pcap of a run, devinfo, and the error paths (bad flags, no such device, a peer that never
//! answers).
//!
//! Each test uses its own TCP port and its own 127.0.0.x addresses for the emulated devices
//! (an `emu:<IPv4>` device binds UDP 4791 on its address), so tests run in parallel.

mod common;
#[path = "common/pcap.rs"]
mod pcap;

use common::{RNIC, heavy, rnic, spawn, text};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rnic-tools-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// The numeric rows of a perftest table (lines starting with a size).
fn rows(out: &str) -> Vec<Vec<f64>> {
    out.lines()
        .filter(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|w| w.parse::<u64>().is_ok())
        })
        .map(|l| {
            l.split_whitespace()
                .filter_map(|w| w.parse::<f64>().ok())
                .collect()
        })
        .collect()
}

#[test]
fn write_bw_loopback_prints_the_table() {
    let _g = heavy();
    let o = rnic(&["write-bw", "--loopback", "-n", "300", "--timeout", "20"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("RDMA_Write BW Test"), "{out}");
    assert!(out.contains(
        " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]"
    ));
    assert!(out.contains(" local address: LID 0000 QPN "), "{out}");
    assert!(out.contains(" GID: 00:00:00:00:00:00:00:00:00:00:255:255:192:00:02:02"));
    let r = rows(&out);
    assert_eq!(r.len(), 1, "{out}");
    assert_eq!(r[0].len(), 5);
    assert_eq!((r[0][0], r[0][1]), (65536.0, 300.0));
    assert!(r[0][2] > 0.0 && r[0][3] > 0.0 && r[0][4] > 0.0, "{out}");
    assert!(r[0][2] >= r[0][3] * 0.99, "peak below average: {out}");
}

#[test]
fn every_perf_test_in_loopback_with_json() {
    let _g = heavy();
    for (cmd, size) in [
        ("write-bw", 4096u64),
        ("read-bw", 4096),
        ("send-bw", 4096),
        ("atomic-bw", 8),
        ("write-lat", 2),
        ("read-lat", 2),
        ("send-lat", 2),
        ("atomic-lat", 8),
    ] {
        let json = tmp(&format!("{cmd}.json"));
        let size_s = size.to_string();
        let o = rnic(&[
            cmd,
            "--loopback",
            "-n",
            "100",
            "-s",
            &size_s,
            "--timeout",
            "20",
            "--out_json_file",
            json.to_str().unwrap(),
        ]);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{cmd}: {out}\n{err}");
        let r = rows(&out);
        assert_eq!(r.len(), 1, "{cmd}: {out}");
        assert_eq!(r[0][0], size as f64, "{cmd}");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let res = &v["results"];
        assert_eq!(res["MsgSize"], size, "{cmd}: {v}");
        if cmd.ends_with("-bw") {
            assert!(out.contains("BW peak[MiB/sec]"), "{cmd}");
            assert_eq!(res["n_iterations"], 100, "{cmd}");
            assert!(res["BW_average"].as_f64().unwrap() > 0.0, "{cmd}: {v}");
            assert!(res["MsgRate"].as_f64().unwrap() > 0.0, "{cmd}: {v}");
        } else {
            assert!(out.contains("t_typical[usec]"), "{cmd}");
            let (min, typ, max) = (
                res["t_min"].as_f64().unwrap(),
                res["t_typical"].as_f64().unwrap(),
                res["t_max"].as_f64().unwrap(),
            );
            assert!(min > 0.0 && min <= typ && typ <= max, "{cmd}: {v}");
        }
        assert!(v["test_info"]["test"].as_str().unwrap().ends_with("_Test"));
    }
}

#[test]
fn sweep_draws_a_plot() {
    let _g = heavy();
    let svg = tmp("sweep.svg");
    let o = rnic(&[
        "write-bw",
        "--loopback",
        "-a",
        "-n",
        "20",
        "--plot",
        svg.to_str().unwrap(),
        "--timeout",
        "20",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let r = rows(&out);
    assert_eq!(r.len(), 23, "{out}");
    assert_eq!(r[0][0], 2.0);
    assert_eq!(r[22][0], 8388608.0);
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
    assert_eq!(s.matches("<circle").count(), 23);
}

#[test]
fn bidirectional_bw_in_loopback() {
    let _g = heavy();
    for args in [
        &["write-bw", "-s", "4096"][..],
        &["read-bw", "-s", "4096"],
        &["send-bw", "-s", "4096"],
        &["send-bw", "-s", "1024", "-c", "UD"],
        &["send-bw", "-s", "4096", "-q", "2"],
        &["send-bw", "-s", "4096", "-e"],
    ] {
        let mut a = vec!["--loopback", "-b", "-n", "200", "--timeout", "20"];
        a.splice(0..0, args.iter().copied());
        let o = rnic(&a);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{args:?}: {out}\n{err}");
        assert!(out.contains("Bidirectional BW Test"), "{args:?}: {out}");
        let r = rows(&out);
        assert_eq!(r.len(), 1, "{args:?}: {out}");
        assert!(
            r[0][2] > 0.0 && r[0][3] > 0.0 && r[0][4] > 0.0,
            "{args:?}: {out}"
        );
    }
}

/// The emulated port's active MTU in bytes, as devinfo prints it.
fn active_mtu_bytes() -> u32 {
    let (out, _) = text(&rnic(&["devinfo", "-d", "emu0"]));
    let line = out
        .lines()
        .find(|l| l.contains("active_mtu:"))
        .expect("devinfo prints active_mtu");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn ud_without_a_size_and_an_mtu_above_the_port_fall_back_as_perftest() {
    let _g = heavy();
    let active = active_mtu_bytes();
    let ok = |args: &str| {
        let o = rnic(&args.split(' ').collect::<Vec<_>>());
        let (out, err) = text(&o);
        assert!(o.status.success(), "{args}: {out}\n{err}");
        out
    };
    // UD without -s: perftest's size (65536) is cut to one packet, the path MTU's.
    let out = ok("send-bw -c UD --loopback -n 100 --timeout 20");
    let r = rows(&out);
    assert_eq!(r.len(), 1, "{out}");
    assert_eq!(r[0][0], f64::from(active), "{out}");
    // -a on UD: sizes up to the MTU, and perftest's two lines on stderr.
    let o = rnic(&[
        "send-bw",
        "-c",
        "UD",
        "-a",
        "--loopback",
        "-n",
        "20",
        "--timeout",
        "20",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert_eq!(
        rows(&out).last().map(|r| r[0]),
        Some(f64::from(active)),
        "{out}"
    );
    assert!(
        err.contains(&format!(
            " Max msg size in UD is MTU {active}\n Changing to this MTU\n"
        )),
        "{err}"
    );
    // -m 4096 above a smaller active MTU: lowered to it, with perftest's two lines.
    let out = ok("write-bw -m 4096 -s 8192 --loopback -n 100");
    let lowered =
        out.contains("Requested mtu is higher than active mtu \nChanging to active mtu - ");
    assert_eq!(lowered, active < 4096, "{out}");
    assert!(
        out.contains(&format!("Mtu             : {active}[B]")),
        "{out}"
    );
}

#[test]
fn bidirectional_send_bw_two_processes() {
    let _g = heavy();
    let side = |dev: &'static str, server: Option<&'static str>| {
        let mut a = vec![
            "send-bw",
            "-b",
            "-d",
            dev,
            "-p",
            "18781",
            "-n",
            "300",
            "-s",
            "8192",
            "--timeout",
            "20",
        ];
        a.extend(server);
        a
    };
    let (s, c) = pair(
        &side("emu:127.0.0.81", None),
        &side("emu:127.0.0.82", Some("127.0.0.1")),
    );
    let (so, co) = both_succeed(&s, &c);
    // Each side prints the sum of both sides' sends: the same figures.
    let (rs, rc) = (rows(&so), rows(&co));
    assert_eq!(rs.len(), 1, "{so}");
    assert_eq!(rs, rc, "{so}\n{co}");
    assert_eq!(rs[0][0], 8192.0);
    assert!(rs[0][3] > 0.0, "{so}");
}

/// The stdout of a server and a client run, after checking that both succeeded.
#[track_caller]
fn both_succeed(s: &Output, c: &Output) -> (String, String) {
    let ((so, se), (co, ce)) = (text(s), text(c));
    assert!(
        s.status.success() && c.status.success(),
        "{so}{se}\n{co}{ce}"
    );
    (so, co)
}

/// Runs a server and then a client of the same command; returns both outputs.
fn pair(server: &[&str], client: &[&str]) -> (Output, Output) {
    let srv = spawn(server);
    // The client retries refused connections, so no sleep is needed; a short one keeps
    // the log order readable.
    std::thread::sleep(Duration::from_millis(100));
    let c = rnic(client);
    let s = srv.wait_with_output().expect("server output");
    (s, c)
}

fn pingpong_both_roles(cmd: &str, port_base: u16, a: &str, b: &str) {
    for (i, (srv_ip, cli_ip)) in [(a, b), (b, a)].into_iter().enumerate() {
        let port = (port_base + i as u16).to_string();
        let sd = format!("emu:{srv_ip}");
        let cd = format!("emu:{cli_ip}");
        let common = ["-c", "-n", "200", "-p", &port, "--timeout", "20"];
        let mut sa = vec![cmd, "-d", &sd];
        sa.extend_from_slice(&common);
        let mut ca = vec![cmd, "-d", &cd];
        ca.extend_from_slice(&common);
        ca.push("127.0.0.1");
        let (s, c) = pair(&sa, &ca);
        let ((so, se), (co, ce)) = (text(&s), text(&c));
        assert!(s.status.success(), "server: {so}\n{se}\nclient: {co}\n{ce}");
        assert!(c.status.success(), "client: {co}\n{ce}\nserver: {so}\n{se}");
        for (o, me, peer) in [(&so, srv_ip, cli_ip), (&co, cli_ip, srv_ip)] {
            assert!(
                o.contains(&format!("GID ::ffff:{me}"))
                    && o.contains(&format!("GID ::ffff:{peer}")),
                "{o}"
            );
            assert!(o.contains("  remote address: LID 0x0000, QPN 0x"), "{o}");
            assert!(o.contains(" iters in "), "{o}");
            assert!(!o.contains("invalid data"), "{o}");
        }
        let size = if cmd == "rc-pingpong" { 4096 } else { 1024 };
        assert!(
            co.contains(&format!("{} bytes in ", size * 200 * 2)),
            "{co}"
        );
    }
}

#[test]
fn rc_pingpong_two_processes_both_roles_with_check() {
    let _g = heavy();
    pingpong_both_roles("rc-pingpong", 18711, "127.0.0.11", "127.0.0.12");
}

#[test]
fn ud_pingpong_two_processes_both_roles_with_check() {
    let _g = heavy();
    pingpong_both_roles("ud-pingpong", 18721, "127.0.0.21", "127.0.0.22");
}

#[test]
fn write_bw_two_processes_and_pcap() {
    let _g = heavy();
    let pcap = tmp("write-bw.pcap");
    let json = tmp("write-bw-2p.json");
    let common = ["-n", "200", "-s", "8192", "--timeout", "20"];
    let (s, c) = pair(
        &emu_args(
            "write-bw",
            "emu:127.0.0.31",
            "18731",
            &[&common[..], &["--pcap", pcap.to_str().unwrap()]].concat(),
        ),
        &emu_args(
            "write-bw",
            "emu:127.0.0.32",
            "18731",
            &[
                &common[..],
                &["--out_json_file", json.to_str().unwrap(), "127.0.0.1"],
            ]
            .concat(),
        ),
    );
    let (so, co) = both_succeed(&s, &c);
    let (rs, rc) = (rows(&so), rows(&co));
    assert_eq!(rs.len(), 1, "{so}");
    assert_eq!(rc.len(), 1, "{co}");
    // The server prints the client's result, exchanged over TCP.
    assert_eq!(rs[0], rc[0]);
    assert!(so.contains("* Waiting for client to connect... *"));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["results"]["n_iterations"], 200);
    // The capture holds RoCE v2 frames; tshark (when installed) finds none malformed.
    let bytes = std::fs::read(&pcap).unwrap();
    assert!(bytes.len() > 200 * 8192, "pcap of {} bytes", bytes.len());
    match Command::new("tshark")
        .args([
            "-r",
            pcap.to_str().unwrap(),
            "-Y",
            "_ws.malformed || _ws.expert.severity == error",
            "-T",
            "fields",
            "-e",
            "frame.number",
        ])
        .output()
    {
        Ok(o) if o.status.success() => {
            let bad = String::from_utf8_lossy(&o.stdout);
            assert!(bad.trim().is_empty(), "malformed frames: {bad}");
            let all = Command::new("tshark")
                .args(["-r", pcap.to_str().unwrap()])
                .output()
                .unwrap();
            let t = String::from_utf8_lossy(&all.stdout);
            assert!(t.contains("RDMA Write"), "{}", &t[..t.len().min(2000)]);
        }
        _ => eprintln!("tshark not available: the pcap was not decoded"),
    }
}

/// perftest 6.28's parameter negotiation between two rnic processes: on when both speak
/// 6.29 (the default), skipped when either side speaks perftest 4.5's 6.06, in both roles;
/// the run passes each way.
#[test]
fn parameter_negotiation_on_and_off_two_processes() {
    let _g = heavy();
    let run = |srv_ver: &str, cli_ver: &str, port: &str| {
        let common = [
            "-n",
            "50",
            "-s",
            "4096",
            "--timeout",
            "20",
            "--perftest-version",
        ];
        let side = |dev: &str, ver: &str, server: Option<&str>| {
            let mut v: Vec<String> = ["write-bw", "-d", dev, "-p", port]
                .iter()
                .chain(common.iter())
                .map(|s| s.to_string())
                .collect();
            v.push(ver.to_string());
            v.extend(server.map(str::to_string));
            Command::new(RNIC)
                .args(&v)
                .env("RUST_LOG", "rnic_tools=info")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("rnic")
        };
        let s = side("emu:127.0.0.91", srv_ver, None);
        std::thread::sleep(Duration::from_millis(100));
        let c = side("emu:127.0.0.92", cli_ver, Some("127.0.0.1"));
        let (c, s) = (c.wait_with_output().unwrap(), s.wait_with_output().unwrap());
        both_succeed(&s, &c);
        (text(&s).1, text(&c).1)
    };
    let (se, ce) = run("6.29", "6.29", "18791");
    for e in [&se, &ce] {
        assert!(
            e.contains("negotiation with a peer of version 6.29: sent and received"),
            "{e}"
        );
    }
    for (srv, cli, port) in [("6.06", "6.29", "18792"), ("6.29", "6.06", "18793")] {
        let (se, ce) = run(srv, cli, port);
        for e in [&se, &ce] {
            assert!(e.contains("negotiation skipped"), "{e}");
        }
    }
    let line = error_line(&["write-bw", "--perftest-version", "5.1"]);
    assert!(line.contains("--perftest-version 5.1"), "{line}");
}

#[test]
fn faults_are_recovered_by_rc() {
    let _g = heavy();
    let common = ["-n", "100", "-c", "--timeout", "30"];
    let (s, c) = pair(
        &emu_args(
            "rc-pingpong",
            "emu:127.0.0.41",
            "18741",
            &[
                &common[..],
                &["--emu-faults", "loss=0.05,dup=0.01,reorder=0.01,seed=7"],
            ]
            .concat(),
        ),
        &emu_args(
            "rc-pingpong",
            "emu:127.0.0.42",
            "18741",
            &[
                &common[..],
                &["--emu-faults", "loss=0.05,seed=8", "127.0.0.1"],
            ]
            .concat(),
        ),
    );
    let (_, co) = both_succeed(&s, &c);
    assert!(co.contains("100 iters in"), "{co}");
}

#[test]
fn devinfo_fields() {
    let o = rnic(&["devinfo", "-d", "emu0", "-v"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    for want in [
        "hca_id:\temu0\n",
        "\ttransport:\t\t\tInfiniBand (0)\n",
        "\tvendor_id:\t\t\t0x02c9\n",
        "\tphys_port_cnt:\t\t\t1\n",
        "\t\tport:\t1\n",
        "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n",
        "\t\t\tlink_layer:\t\tEthernet\n",
        "\tatomic_cap:\t\t\tATOMIC_HCA (1)\n",
        "\tmax_mr_size:\t\t\t0x80000000\n", // the device's log_max_mrw_sz 31
        "\t\t\tGID[  1]:\t\t::ffff:192.0.2.1, RoCE v2\n",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
    let o = rnic(&["devinfo", "-l"]);
    assert!(text(&o).0.contains("HCAs found:\n\temu0\n\temu1\n"));
    let o = rnic(&["devices"]);
    let (out, _) = text(&o);
    assert!(
        out.starts_with("    device          \t   node GUID\n"),
        "{out}"
    );
    assert!(out.contains("    emu0            \t"), "{out}");
}

#[test]
fn rust_log_shows_the_command_dumps() {
    // The binary installs a logger: the driver's command dumps (target rnic_driver::cmd, the
    // kernel's dump_command format) reach stderr when RUST_LOG asks, stdout is unchanged,
    // and nothing is logged when it does not.
    let o = Command::new(RNIC)
        .args(["devinfo", "-d", "emu0"])
        .env("RUST_LOG", "rnic_driver::cmd=trace")
        .stdin(Stdio::null())
        .output()
        .expect("run rnic");
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("hca_id:\temu0\n"), "{out}");
    assert!(
        err.contains("dump command MLX5_CMD_OP_ENABLE_HCA(0x104) INPUT"),
        "no command dump on stderr:\n{err}"
    );
    assert!(err.contains("rnic_driver::cmd"), "{err}");
    let o = rnic(&["devinfo", "-d", "emu0"]);
    assert!(o.status.success());
    assert_eq!(text(&o).1, "", "stderr without RUST_LOG");
}

fn one_line_error(o: &Output) -> String {
    let (out, err) = text(o);
    assert!(!o.status.success(), "succeeded: {out}");
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| !l.starts_with("rnic: no -d given"))
        .collect();
    assert_eq!(lines.len(), 1, "not one line: {err:?}");
    assert!(lines[0].starts_with("rnic: "), "{err}");
    lines[0].to_string()
}

/// Runs `rnic` with `args`, checks it failed with one line, and returns that line.
#[track_caller]
fn error_line(args: &[&str]) -> String {
    one_line_error(&rnic(args))
}

/// `cmd -d <dev> -p <port>`, then `rest`.
fn emu_args<'a>(cmd: &'a str, dev: &'a str, port: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![cmd, "-d", dev, "-p", port];
    a.extend_from_slice(rest);
    a
}

#[test]
fn bad_arguments_are_one_line() {
    for args in [
        vec!["write-bw", "--bogus"],
        vec!["write-bw", "-s", "abc"],
        vec!["write-bw", "-c", "XY", "--loopback"],
        vec!["read-bw", "-c", "UD", "--loopback"],
        vec!["atomic-bw", "-s", "16", "--loopback"],
        vec!["write-bw", "-m", "1500", "--loopback"],
        vec!["write-bw", "--plot", "x.svg", "--loopback"],
        vec!["rc-pingpong", "-m", "100"],
        vec!["rc-pingpong", "-l", "99"],
        vec!["ud-pingpong", "-l", "8"],
        vec!["nosuchcommand"],
        vec!["write-bw", "--emu-faults", "loss=2", "--loopback"],
    ] {
        let o = rnic(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {:?}", text(&o));
        one_line_error(&o);
    }
}

#[test]
fn no_such_device_is_one_line() {
    for args in [
        vec!["devinfo", "-d", "mlx5_7"],
        vec!["devinfo", "-d", "0000:99:00.0"],
        vec!["devinfo", "-d", "rxe0"],
        vec!["write-bw", "-d", "mlx5_7", "-p", "18751"],
    ] {
        let l = error_line(&args);
        assert!(l.contains("device"), "{l}");
    }
}

#[test]
fn a_peer_that_never_answers_times_out() {
    // A TCP server that accepts and then says nothing.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let t = std::thread::spawn(move || {
        let c = l.accept();
        std::thread::sleep(Duration::from_secs(5));
        drop(c);
    });
    for cmd in ["rc-pingpong", "write-bw"] {
        let start = Instant::now();
        let l = error_line(&emu_args(
            cmd,
            "emu:127.0.0.51",
            &port,
            &["--timeout", "2", "127.0.0.1"],
        ));
        assert!(
            l.contains("timed out") || l.contains("closed"),
            "{cmd}: {l}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "{cmd} waited too long"
        );
        if cmd == "rc-pingpong" {
            assert!(l.contains("timed out"), "{l}");
        }
    }
    t.join().unwrap();
    // Nobody listening: the client gives up after its timeout.
    let start = Instant::now();
    let l = error_line(&emu_args(
        "write-lat",
        "emu:127.0.0.52",
        "18761",
        &["--timeout", "1", "127.0.0.1"],
    ));
    assert!(l.contains("couldn't connect"), "{l}");
    assert!(start.elapsed() < Duration::from_secs(10));
    // A server nobody connects to gives up too.
    let l = error_line(&emu_args(
        "send-bw",
        "emu:127.0.0.53",
        "18762",
        &["--timeout", "1"],
    ));
    assert!(l.contains("timed out"), "{l}");
}

#[test]
fn port_in_use_is_one_line() {
    let l = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let line = error_line(&["rc-pingpong", "-d", "emu:127.0.0.61", "-p", &port]);
    assert!(line.contains("address in use"), "{line}");
}

#[test]
fn parameters_that_differ_from_the_peers_are_one_line_on_both_sides() {
    let (s, c) = pair(
        &emu_args(
            "write-bw",
            "emu:127.0.0.71",
            "18771",
            &["-s", "4096", "--timeout", "10"],
        ),
        &emu_args(
            "write-bw",
            "emu:127.0.0.72",
            "18771",
            &["-s", "8192", "--timeout", "10", "127.0.0.1"],
        ),
    );
    for o in [&s, &c] {
        let l = one_line_error(o);
        assert!(
            l.contains("parameters differ from the peer's: message size"),
            "{l}"
        );
    }
    let (s, c) = pair(
        &emu_args("read-bw", "emu:127.0.0.73", "18772", &["--timeout", "10"]),
        &emu_args(
            "write-bw",
            "emu:127.0.0.74",
            "18772",
            &["--timeout", "10", "127.0.0.1"],
        ),
    );
    let l = one_line_error(&c);
    assert!(l.contains("we run write-bw, the peer runs read-bw"), "{l}");
    one_line_error(&s);
}

/// The `--emu-counters` line (`link <dev>/1 <name> <value> ...`) of a run's output, as
/// name/value pairs.
fn emu_counters(out: &str, dev: &str) -> std::collections::HashMap<String, u64> {
    let head = format!("link {dev}/1 ");
    let line = out
        .lines()
        .find(|l| l.starts_with(&head))
        .unwrap_or_else(|| panic!("no counters line for {dev}: {out}"));
    let w: Vec<&str> = line[head.len()..].split_whitespace().collect();
    w.chunks(2)
        .map(|p| (p[0].to_string(), p[1].parse().expect("a count")))
        .collect()
}

/// A two-process write-bw over the UDP link while this test floods the server's address
/// from 127.0.0.43 with 2 x 10^4 one-KiB datagrams whose ICRCs are wrong: the run
/// completes, and `--emu-counters` shows the flood dropped and counted.
#[test]
fn write_bw_under_a_flood_completes_and_emu_counters_show_the_drops() {
    let _g = heavy();
    let flood = std::net::UdpSocket::bind("127.0.0.43:0").expect("bind 127.0.0.43");
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // ACK timeout 1.07 s (-u 18), not perftest's 67 ms: the server (a debug build here)
    // spends tens of microseconds on each flood frame, and on a loaded machine its ACKs can
    // take longer than 8 x 67 ms to come, which ends the run in RetryExcErr before the
    // flood's drops are what is being checked.
    let common = [
        "-n",
        "2000",
        "-s",
        "8192",
        "--timeout",
        "20",
        "-u",
        "18",
        "--emu-counters",
    ];
    let srv = Command::new(RNIC)
        .args(emu_args("write-bw", "emu:127.0.0.41", "18741", &common))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("server");
    // RC WRITE MIDDLE to QP 0x11, PSN 0, 1 KiB, a made-up ICRC.
    let mut dgram = vec![0x07, 0, 0xFF, 0xFF, 0, 0, 0, 0x11, 0, 0, 0, 0];
    dgram.extend_from_slice(&[0x5A; 1024]);
    dgram.extend_from_slice(&[0xDE, 0xAD, 0xBE, 0xEF]);
    let flooder = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut sent = 0u32;
            while sent < 20_000 && !done.load(std::sync::atomic::Ordering::Relaxed) {
                if flood.send_to(&dgram, "127.0.0.41:4791").is_ok() {
                    sent += 1;
                }
                if sent % 500 == 0 {
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
            sent
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    let c = rnic(&emu_args(
        "write-bw",
        "emu:127.0.0.42",
        "18741",
        &[&common[..], &["127.0.0.1"]].concat(),
    ));
    let s = srv.wait_with_output().expect("server output");
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent = flooder.join().expect("flood thread");
    let (so, co) = both_succeed(&s, &c);
    assert_eq!(rows(&co).len(), 1, "{co}");
    println!("{sent} datagrams sent; server: {so}");
    let srv_c = emu_counters(&so, "emu:127.0.0.41");
    let cli_c = emu_counters(&co, "emu:127.0.0.42");
    let drops: u64 = srv_c
        .iter()
        .filter(|(k, _)| k.starts_with("rx_drop_"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(srv_c["rx_dropped"], drops, "{so}");
    let flood_drops = srv_c["rx_drop_bad_icrc"] + srv_c["rx_drop_ring_full"];
    assert!(flood_drops > 0, "{sent} sent: {so}");
    assert!(srv_c["frames_rx"] >= 2000, "{so}");
    assert!(
        cli_c["frames_tx"] >= 2000 && cli_c["rx_dropped"] == 0,
        "{co}"
    );
}

/// The RoCE v2 frames in a capture, in order: BTH opcode, the source address's last byte
/// and the PSN.
fn bth_frames(pcap: &std::path::Path) -> Vec<(u8, u8, u32)> {
    pcap::roce_packets(pcap)
        .iter()
        .map(|p| (p.opcode(), p.src[3], p.psn()))
        .collect()
}

/// `--write_with_imm` and `--send_with_imm` between two rnic processes, negotiating (both
/// speak 6.29) and in perftest 4.5's protocol: each run passes, the capture holds only the
/// with-immediate opcodes (RC WRITE Only with Immediate 0x0b, SEND Only with Immediate 0x05)
/// and ACKs, and a side with the flag refuses a peer without it.
#[test]
fn with_immediate_two_processes() {
    let _g = heavy();
    let cases = [
        ("write-bw", "--write_with_imm", 0x0b_u8, "18801"),
        ("write-lat", "--write_with_imm", 0x0b, "18802"),
        ("send-bw", "--send_with_imm", 0x05, "18803"),
        ("send-lat", "--send_with_imm", 0x05, "18804"),
    ];
    for (cmd, flag, op, port) in cases {
        for ver in ["6.29", "6.06"] {
            let pcap = tmp(&format!("{cmd}-imm-{ver}.pcap"));
            let common = [
                "-n",
                "100",
                "-s",
                "64",
                "--timeout",
                "20",
                flag,
                "--perftest-version",
                ver,
            ];
            let (s, c) = pair(
                &emu_args(
                    cmd,
                    "emu:127.0.0.101",
                    port,
                    &[&common[..], &["--pcap", pcap.to_str().unwrap()]].concat(),
                ),
                &emu_args(
                    cmd,
                    "emu:127.0.0.102",
                    port,
                    &[&common[..], &["127.0.0.1"]].concat(),
                ),
            );
            let (so, co) = both_succeed(&s, &c);
            let title = if flag == "--write_with_imm" {
                "RDMA_Write_imm"
            } else {
                "Send_imm"
            };
            assert!(so.contains(title) && co.contains(title), "{so}");
            let r = rows(&co);
            assert_eq!(r.len(), 1, "{co}");
            assert_eq!(r[0][0], 64.0);
            let frames = bth_frames(&pcap);
            // Distinct (source, PSN): a retransmission (RC under load) is not a new message.
            let data: std::collections::BTreeSet<(u8, u32)> = frames
                .iter()
                .filter(|f| f.0 == op)
                .map(|f| (f.1, f.2))
                .collect();
            // bw: 100 messages one way; lat: 100 each way.
            let want = if cmd.ends_with("lat") { 200 } else { 100 };
            assert_eq!(data.len(), want, "{cmd} {ver}: frames {frames:?}");
            assert!(
                frames.iter().all(|f| f.0 == op || f.0 == 0x11),
                "{cmd}: {frames:?}"
            );
        }
    }
    // A peer without the flag: rnic's own signature names the difference.
    let (s, c) = pair(
        &emu_args(
            "write-bw",
            "emu:127.0.0.101",
            "18805",
            &["-n", "50", "--timeout", "10", "--write_with_imm"],
        ),
        &emu_args(
            "write-bw",
            "emu:127.0.0.102",
            "18805",
            &["-n", "50", "--timeout", "10", "127.0.0.1"],
        ),
    );
    assert!(!s.status.success() && !c.status.success());
    let e = one_line_error(&c);
    assert!(
        e.contains("we run write-bw, the peer runs write-bw with immediate"),
        "{e}"
    );
}
