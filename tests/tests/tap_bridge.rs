//! Two emulated ConnectX devices, each on its own Linux TAP interface, the two TAPs on one
//! Linux bridge: the real driver connects an RC pair across them and SENDs both ways, so every
//! frame (requests and ACKs) crosses the kernel's bridge as whole Ethernet frames, and each
//! receiving port checks the ICRC against the real headers; and the same through the verbs
//! API with two `emu-tap:` devices. Needs root (CAP_NET_ADMIN),
//! `/dev/net/tun` and iproute2's `ip`; skips with the reason printed otherwise.

#[path = "driver_fixture.rs"]
mod fixture;

use fixture::*;
use rnic_driver::HcaConfig;
use rnic_driver::cq::Cq;
use rnic_driver::mr::Mr;
use rnic_driver::qp::{AddressVector, Mtu, Qp, QpConfig, QpType};
use rnic_driver::wr::*;
use rnic_emulator::link::TapStats;
use rnic_emulator::{Device, Profile, RunMode};
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Runs `ip args`; the error says what failed.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Whether this process may create interfaces: `CAP_NET_ADMIN` (bit 12) in its effective
/// capabilities.
fn has_net_admin() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 12) != 0)
}

/// Why the test cannot run here, if it cannot.
fn skip_reason() -> Option<String> {
    if !has_net_admin() {
        return Some("no CAP_NET_ADMIN (TAPs and bridges need it: run as root)".into());
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Some("no /dev/net/tun".into());
    }
    ip(&["-V"]).err()
}

/// The bridge, deleted when the test ends (the TAPs go with their devices).
struct Bridge(String);

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = ip(&["link", "del", &self.0]);
    }
}

/// Turns IPv6 off on `ifname` (so the kernel sends no solicitations of its own).
fn quiet(ifname: &str) {
    let _ = std::fs::write(
        format!("/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6"),
        "1",
    );
}

/// A device on a new TAP `ifname`, its port on `bridge`, with `mac` and IPv4 `addr`.
fn station(ifname: &str, bridge: &str, mac: [u8; 6], addr: Ipv4Addr) -> (Fx, Arc<TapStats>) {
    let profile = Profile {
        mac,
        ..Profile::default()
    };
    let (dev, stats): (Device, _) =
        Device::on_tap(profile, RunMode::Threaded, ifname).expect("a device on a new TAP");
    quiet(ifname);
    ip(&["link", "set", ifname, "master", bridge, "up"]).expect("TAP on the bridge");
    let cfg = HcaConfig {
        ipv4: Some(addr),
        ..HcaConfig::default()
    };
    (open_on(dev, cfg), stats)
}

/// A 3000-byte SEND from `from` to `to` (completion queues and memory regions in the same
/// order), checked at both ends.
fn send_across(from: &Qp, to: &Qp, (cf, ct): (&Cq, &Cq), (mf, mt): (&Mr, &Mr), seed: u8) {
    let msg = pattern(3000, seed);
    mf.write(0, &msg);
    to.post_recv(&[RecvWr {
        wr_id: 7,
        sgl: &[mt.sge(4096, 4096)],
    }])
    .unwrap();
    from.post_send(&[SendWr {
        wr_id: 8,
        op: SendOp::Send,
        payload: Payload::Sgl(&[mf.sge(0, 3000)]),
        flags: SendFlags::SIGNALED,
        ud: None,
    }])
    .unwrap();
    let s = poll_one(cf);
    assert_eq!((s.status, s.wr_id), (WcStatus::Success, 8), "{s:?}");
    let r = poll_one(ct);
    assert_eq!((r.status, r.byte_len), (WcStatus::Success, 3000), "{r:?}");
    let mut got = vec![0u8; 3000];
    mt.read(4096, &mut got);
    assert_eq!(got, msg);
}

/// The path to `fx`'s IPv4 GID at its MAC.
fn path_to(fx: &Fx) -> AddressVector {
    AddressVector {
        dmac: fx.hca.mac(),
        ..fx.self_av()
    }
}

/// A new bridge (up, IPv6 off) named for this process and `which`, or `None` (the reason
/// printed) where the test cannot run.
fn bridge(which: char) -> Option<(Bridge, u32)> {
    if let Some(why) = skip_reason() {
        eprintln!("skipping: {why}");
        return None;
    }
    let tag = std::process::id() % 100_000;
    let bridge = Bridge(format!("rnbr{which}{tag}"));
    ip(&["link", "add", &bridge.0, "type", "bridge"]).expect("a bridge");
    quiet(&bridge.0);
    ip(&["link", "set", &bridge.0, "up"]).expect("bridge up");
    Some((bridge, tag))
}

#[test]
fn rc_sends_cross_a_linux_bridge_between_two_taps() {
    let Some((bridge, tag)) = bridge('d') else {
        return;
    };
    let (a, tap_a) = station(
        &format!("rnta{tag}"),
        &bridge.0,
        [0x02, 0x52, 0, 0, 0, 0xA1],
        Ipv4Addr::new(10, 77, 0, 1),
    );
    let (b, tap_b) = station(
        &format!("rntb{tag}"),
        &bridge.0,
        [0x02, 0x52, 0, 0, 0, 0xB2],
        Ipv4Addr::new(10, 77, 0, 2),
    );
    let (ca, cb) = (a.cq(64), b.cq(64));
    let qa = Qp::create(&a.pd, &QpConfig::new(QpType::Rc, ca.clone(), ca.clone())).unwrap();
    let qb = Qp::create(&b.pd, &QpConfig::new(QpType::Rc, cb.clone(), cb.clone())).unwrap();
    a.connect_via(&qa, qb.qpn(), Mtu::Mtu1024, path_to(&b));
    b.connect_via(&qb, qa.qpn(), Mtu::Mtu1024, path_to(&a));
    let (ma, mb) = (
        Mr::alloc(&a.pd, 8192, Access::ALL).unwrap(),
        Mr::alloc(&b.pd, 8192, Access::ALL).unwrap(),
    );
    // 3000 bytes: three packets at MTU 1024, each acknowledged across the bridge.
    send_across(&qa, &qb, (&ca, &cb), (&ma, &mb), 1);
    send_across(&qb, &qa, (&cb, &ca), (&mb, &ma), 2);
    for fx in [&a, &b] {
        let c = fx.dev.counters();
        let solved = c.transport.icrc_ip_id_solved;
        assert_eq!(
            (c.drops.bad_icrc, solved),
            (0, 0),
            "ICRC checked exactly: {c:?}"
        );
    }
    // Each side wrote its three data packets and read the other's (and the ACKs) off its TAP.
    for t in [&tap_a, &tap_b] {
        let (sent, received) = (
            t.sent.load(Ordering::Relaxed),
            t.received.load(Ordering::Relaxed),
        );
        assert!(
            sent >= 4 && received >= 4,
            "sent {sent}, received {received}"
        );
        assert_eq!(t.tx_errors.load(Ordering::Relaxed), 0);
    }
}

#[test]
fn emu_tap_devices_connect_through_verbs_across_a_bridge() {
    use rnic_verbs::{
        AccessFlags, ConnectOptions, Context, Mtu, QpType, RecvWr, SendWr, WcStatus,
        WorkCompletion, connect_pair,
    };
    let Some((bridge, tag)) = bridge('v') else {
        return;
    };
    let (ta, tb) = (format!("rnva{tag}"), format!("rnvb{tag}"));
    let na = format!("emu-tap:{ta},10.78.0.1/24");
    let a = Context::open(&na).expect("open an emu-tap device as root");
    let b = Context::open(&format!("emu-tap:{tb},10.78.0.2/24")).unwrap();
    assert_eq!(a.name(), na, "the canonical name is the one given");
    assert!(
        rnic_verbs::devices().iter().any(|d| d.name == na),
        "listed while open"
    );
    for t in [&ta, &tb] {
        quiet(t);
        ip(&["link", "set", t, "master", &bridge.0]).expect("TAP on the bridge");
    }
    let port = a.query_port(1).unwrap();
    assert_eq!(
        port.active_mtu,
        Mtu::Mtu1024,
        "a 1500-byte TAP: active MTU 1024"
    );
    let (pa, pb) = (a.alloc_pd().unwrap(), b.alloc_pd().unwrap());
    let (ca, cb) = (a.create_cq(8, None).unwrap(), b.create_cq(8, None).unwrap());
    let qa = pa.create_qp(QpType::Rc, &ca, &ca).build().unwrap();
    let qb = pb.create_qp(QpType::Rc, &cb, &cb).build().unwrap();
    connect_pair(&qa, &qb, &ConnectOptions::default()).unwrap();
    let (ma, mb) = (
        pa.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap(),
        pb.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap(),
    );
    let msg = pattern(2500, 9);
    ma.write(0, &msg).unwrap();
    qb.post_recv(&[RecvWr::new(1, &[mb.sge_all().unwrap()])])
        .unwrap();
    qa.post_send(&[SendWr::send(2, &[ma.sge(0, 2500).unwrap()]).signaled()])
        .unwrap();
    let t = std::time::Duration::from_secs(10);
    let mut wc = [WorkCompletion::default(); 1];
    assert_eq!(ca.poll_blocking(&mut wc, t).unwrap(), 1);
    assert_eq!(wc[0].status(), WcStatus::Success, "{:?}", wc[0]);
    assert_eq!(cb.poll_blocking(&mut wc, t).unwrap(), 1);
    assert_eq!(
        (wc[0].status(), wc[0].byte_len()),
        (WcStatus::Success, 2500)
    );
    let mut got = vec![0u8; 2500];
    mb.read(0, &mut got).unwrap();
    assert_eq!(got, msg);
}
