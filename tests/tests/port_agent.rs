//! The driver's port agent on two emulated devices joined by an in-process link, stepped by
//! hand: each resolves the other by ARP (the capture shows the exchange and tshark decodes
//! it), answers pings, gives the typed error for an address that never answers, and counts
//! a flood of bad ARP frames without answering or learning from them.

use rnic_driver::eth::{EthCompletion, RawSq, Tis, TransportDomain};
use rnic_driver::mr::Mr;
use rnic_driver::net::arp::ArpFrame;
use rnic_driver::net::icmp::EchoFrame;
use rnic_driver::net::{Resolution, ResolveError};
use rnic_driver::pd::Pd;
use rnic_driver::port_agent::{PortAgent, PortAgentConfig, port_addrs};
use rnic_driver::wr::Access;
use rnic_driver::{Hca, HcaConfig};
use rnic_emulator::link::InProcLink;
use rnic_emulator::{Device, Profile, RunMode};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

const SECOND: u64 = 1_000_000_000;

/// One device with its agent and a raw SQ of the test's own (to send what a stranger would).
struct Side {
    agent: PortAgent,
    sq: RawSq,
    _tis: Arc<Tis>,
    mr: Mr,
    _pd: Arc<Pd>,
    hca: Arc<Hca>,
    dev: Device,
    ip: Ipv4Addr,
}

fn side(ip: Ipv4Addr, mac_last: u8, link: InProcLink, pcap: Option<&std::path::Path>) -> Side {
    let profile = Profile {
        mac: [0x02, 0, 0, 0, 0, mac_last],
        ..Profile::default()
    };
    let dev = Device::with_link(profile, RunMode::Deterministic, link);
    if let Some(p) = pcap {
        dev.capture_to(p).expect("capture");
    }
    let cfg = HcaConfig {
        ipv4: Some(ip),
        ..HcaConfig::default()
    };
    let hca = Arc::new(Hca::open(Arc::new(dev.bus()), cfg).expect("bring-up"));
    let pd = Arc::new(Pd::alloc(&hca).expect("ALLOC_PD"));
    let agent = PortAgent::start(&pd, port_addrs(&hca, 24), PortAgentConfig::default())
        .expect("the agent's objects");
    let tis = Arc::new(Tis::create(&Arc::new(TransportDomain::alloc(&hca).unwrap())).unwrap());
    let sq = RawSq::create(&pd, &tis, 16).expect("CREATE_SQ");
    let mr = Mr::alloc(&pd, 4096, Access::LOCAL_WRITE).expect("MR");
    Side {
        agent,
        sq,
        _tis: tis,
        mr,
        _pd: pd,
        hca,
        dev,
        ip,
    }
}

fn pair(pcap: Option<&std::path::Path>) -> (Side, Side) {
    let (la, lb) = InProcLink::pair();
    let a = side(Ipv4Addr::new(10, 0, 0, 1), 1, la, pcap);
    let b = side(Ipv4Addr::new(10, 0, 0, 2), 2, lb, None);
    (a, b)
}

/// Runs both devices and both agents at `now` until nothing moves.
fn settle(a: &mut Side, b: &mut Side, now: u64) {
    for _ in 0..64 {
        let moved = a.dev.step() + b.dev.step() + a.agent.poll(now) + b.agent.poll(now);
        if moved == 0 {
            return;
        }
    }
}

/// Sends `f` from the test's own SQ of `s` (the first 18 bytes inline).
fn inject(s: &Side, f: &[u8]) {
    s.mr.write(0, &f[18..]);
    s.sq.post_send(0, &f[..18], &[s.mr.sge(0, (f.len() - 18) as u32)], true)
        .expect("post_send");
    s.dev.step();
    let mut wc = [EthCompletion::default(); 4];
    s.sq.poll(&mut wc).expect("poll SQ");
}

fn resolve_by_arp(a: &mut Side, b: &mut Side) -> [u8; 6] {
    let ip = IpAddr::V4(b.ip);
    assert_eq!(a.agent.resolve(ip, 0), Ok(Resolution::Pending));
    settle(a, b, 0);
    match a.agent.resolve(ip, 0) {
        Ok(Resolution::Mac(m)) => m,
        other => panic!("{ip} not resolved: {other:?}"),
    }
}

#[test]
fn two_agents_resolve_each_other_by_arp() {
    let (mut a, mut b) = pair(None);
    settle(&mut a, &mut b, 0);
    assert_eq!(resolve_by_arp(&mut a, &mut b), b.hca.mac());
    assert_eq!(b.agent.counters().responder.arp_replies, 1);
    // B learned A from the request it answered: no ARP of its own needed.
    let back = b.agent.resolve(IpAddr::V4(a.ip), 0);
    assert_eq!(back, Ok(Resolution::Mac(a.hca.mac())));
    assert_eq!(b.agent.counters().resolver.requests, 0);
    assert_eq!(a.agent.counters().resolver.requests, 1);
    assert_eq!(
        a.agent.counters().rx_errors + b.agent.counters().rx_errors,
        0
    );
}

#[test]
fn the_capture_shows_the_arp_exchange_and_tshark_decodes_it() {
    let pcap = std::env::temp_dir().join(format!("rnic-port-agent-{}.pcap", std::process::id()));
    let (mut a, mut b) = pair(Some(&pcap));
    settle(&mut a, &mut b, 0);
    resolve_by_arp(&mut a, &mut b);
    let frames = a.dev.stop_capture().expect("stop capture");
    // A's gratuitous ARP and its advert, B's (arriving), the request and the reply.
    assert!(frames >= 4, "{frames} frames captured");
    let fields = [
        "arp.opcode",
        "arp.src.proto_ipv4",
        "arp.dst.proto_ipv4",
        "arp.src.hw_mac",
    ];
    let lines = rnic_tests::tshark_fields(&pcap, "arp", &fields);
    std::fs::remove_file(&pcap).ok();
    let Some(lines) = lines else { return };
    let request = "1\t10.0.0.1\t10.0.0.2\t02:00:00:00:00:01";
    let reply = "2\t10.0.0.2\t10.0.0.1\t02:00:00:00:00:02";
    let gratuitous = "1\t10.0.0.1\t10.0.0.1\t02:00:00:00:00:01";
    for want in [gratuitous, request, reply] {
        assert!(
            lines.iter().any(|l| l == want),
            "{want:?} not in tshark's {lines:?}"
        );
    }
}

#[test]
fn a_ping_is_answered() {
    let (mut a, mut b) = pair(None);
    settle(&mut a, &mut b, 0);
    let b_mac = resolve_by_arp(&mut a, &mut b);
    let data = [0x5Au8; 56];
    let unsupported = a.agent.counters().responder.unsupported;
    for seq in 1..=5 {
        let req = EchoFrame::request(a.hca.mac(), b_mac, a.ip, b.ip, 0x77, seq, &data);
        let mut f = [0u8; 128];
        let n = req.emit(&mut f).expect("emit");
        inject(&a, &f[..n]);
        settle(&mut a, &mut b, 0);
    }
    assert_eq!(b.agent.counters().responder.echo_replies, 5);
    // The replies came back to A's agent (steered to A's address), which answers none.
    assert_eq!(a.agent.counters().responder.unsupported - unsupported, 5);
    // An echo to an address that is not B's is not steered to B's agent at all.
    let stray = EchoFrame::request(a.hca.mac(), b_mac, a.ip, [10, 0, 0, 77].into(), 1, 1, &data);
    let mut f = [0u8; 128];
    let n = stray.emit(&mut f).expect("emit");
    let before = b.agent.counters().rx_frames;
    inject(&a, &f[..n]);
    settle(&mut a, &mut b, 0);
    assert_eq!(b.agent.counters().rx_frames, before);
}

#[test]
fn an_address_that_never_answers_is_the_typed_error_after_the_retries() {
    let (mut a, mut b) = pair(None);
    settle(&mut a, &mut b, 0);
    let ghost = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 99));
    assert_eq!(a.agent.resolve(ghost, 0), Ok(Resolution::Pending));
    for s in 1..=3 {
        settle(&mut a, &mut b, s * SECOND);
    }
    let e = a.agent.resolve(ghost, 3 * SECOND);
    let named = matches!(e, Err(ResolveError::Unanswered { ip, attempts: 3 }) if ip == ghost);
    assert!(named, "{e:?}");
    let c = a.agent.counters().resolver;
    assert_eq!((c.requests, c.retries, c.timeouts), (1, 2, 1));
    // B saw the three requests and answered none (not its address).
    assert_eq!(b.agent.counters().responder.arp_replies, 0);
}

#[test]
fn a_flood_of_bad_arp_frames_is_counted_and_bounded() {
    let (mut a, mut b) = pair(None);
    settle(&mut a, &mut b, 0);
    let sent_before = b.agent.counters().tx_frames;
    let mut f = [0u8; 60];
    for k in 0..600u32 {
        let who = Ipv4Addr::from(0x0A00_1000 + k);
        match k % 3 {
            // A request about a stranger: well formed, not for B.
            0 => {
                ArpFrame::request(a.hca.mac(), who, Ipv4Addr::new(10, 0, 0, 200))
                    .emit(&mut f)
                    .unwrap();
            }
            // A request for B from a broadcast sender MAC: impossible.
            1 => {
                ArpFrame::request([0xFF; 6], who, b.ip)
                    .emit(&mut f)
                    .unwrap();
            }
            // A malformed one: hardware address length 7.
            _ => {
                ArpFrame::request(a.hca.mac(), who, b.ip)
                    .emit(&mut f)
                    .unwrap();
                f[18] = 7;
            }
        }
        inject(&a, &f);
        if k % 16 == 15 {
            settle(&mut a, &mut b, 0);
        }
    }
    settle(&mut a, &mut b, 0);
    let c = b.agent.counters();
    // A announced itself before B's steering existed: B received the flood only.
    assert_eq!(c.rx_frames, 600, "{c:?}");
    let r = c.responder;
    assert_eq!(r.not_for_us + r.malformed, 600, "{r:?}");
    assert!(r.malformed >= 200, "{r:?}");
    assert_eq!(r.arp_replies, 0);
    assert_eq!(c.tx_frames, sent_before, "the flood made B send nothing");
    assert!(
        b.agent.resolver().table().is_empty(),
        "strangers taught B nothing"
    );
}
