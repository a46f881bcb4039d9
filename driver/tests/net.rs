//! The `net` module end to end: two ports back to back through an in-memory frame pipe
//! (resolve -> request -> reply -> learned, for IPv4 and IPv6; ping; a silent peer), and
//! random bytes through the responder and the resolver (no panic, bounded memory).

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use rnic_driver::net::arp::ArpFrame;
use rnic_driver::net::icmp::{EchoFrame, EchoKind};
use rnic_driver::net::ndisc::NdFrame;
use rnic_driver::net::{
    FrameTx, NeighbourState, PortAddrs, Resolution, ResolveError, Resolver, ResolverConfig,
    Responder, TxError,
};

const S: u64 = 1_000_000_000;

/// One direction of the wire: frames in order.
#[derive(Default)]
struct Pipe(VecDeque<Vec<u8>>);

impl FrameTx for Pipe {
    fn send_frame(&mut self, frame: &[u8]) -> Result<(), TxError> {
        self.0.push_back(frame.to_vec());
        Ok(())
    }
}

/// A port with its responder and resolver, and the pipe out of it.
struct Station {
    port: PortAddrs,
    responder: Responder,
    resolver: Resolver,
    out: Pipe,
}

impl Station {
    fn new(last: u8) -> Station {
        let mut port = PortAddrs::new([2, 0, 0, 0, 0, last]);
        port.add_ipv4(Ipv4Addr::new(10, 0, 0, last), 24).unwrap();
        port.add_ipv6(Ipv6Addr::new(0xFE80, 0, 0, 0, 0, 0, 0, last.into()))
            .unwrap();
        Station {
            port,
            responder: Responder::default(),
            resolver: Resolver::new(ResolverConfig::default()),
            out: Pipe::default(),
        }
    }

    /// A frame arrives: learned from, and answered.
    fn receive(&mut self, frame: &[u8], now: u64) {
        self.resolver.learn(frame, &self.port, now);
        let mut reply = [0u8; 1600];
        if let Some(n) = self.responder.respond(frame, &self.port, &mut reply) {
            self.out.send_frame(&reply[..n]).unwrap();
        }
    }

    fn resolve(&mut self, ip: IpAddr, now: u64) -> Result<Resolution, ResolveError> {
        self.resolver.resolve(ip, &self.port, now, &mut self.out)
    }
}

/// Moves frames both ways until the wire is quiet; returns how many crossed.
fn pump(a: &mut Station, b: &mut Station, now: u64) -> usize {
    let mut n = 0;
    loop {
        if let Some(f) = a.out.0.pop_front() {
            b.receive(&f, now);
        } else if let Some(f) = b.out.0.pop_front() {
            a.receive(&f, now);
        } else {
            return n;
        }
        n += 1;
    }
}

#[test]
fn ipv4_resolve_request_reply_learned() {
    let (mut a, mut b) = (Station::new(1), Station::new(2));
    let b_ip = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
    assert_eq!(a.resolve(b_ip, 0), Ok(Resolution::Pending));
    assert_eq!(pump(&mut a, &mut b, 1), 2, "a request and its reply");
    assert_eq!(a.resolve(b_ip, 2), Ok(Resolution::Mac(b.port.mac())));
    assert_eq!(b.responder.counters().arp_replies, 1);
    // B learned A from A's request: the MAC at once, with a unicast confirmation (the entry
    // is stale: heard, not answered), which A answers.
    let a_ip = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    assert_eq!(b.resolve(a_ip, 3), Ok(Resolution::Mac(a.port.mac())));
    assert_eq!(b.out.0.len(), 1);
    assert_eq!(ArpFrame::parse(&b.out.0[0]).unwrap().eth_dst, a.port.mac());
    assert_eq!(pump(&mut a, &mut b, 4), 2);
    let st = b.resolver.table().get(a_ip).unwrap().state;
    assert!(
        matches!(
            st,
            NeighbourState::Reachable {
                confirmed_ns: 4,
                ..
            }
        ),
        "{st:?}"
    );
}

#[test]
fn ipv6_resolve_solicit_advert_learned() {
    let (mut a, mut b) = (Station::new(1), Station::new(2));
    let b_ip = IpAddr::V6("fe80::2".parse().unwrap());
    assert_eq!(a.resolve(b_ip, 0), Ok(Resolution::Pending));
    assert_eq!(pump(&mut a, &mut b, 1), 2);
    assert_eq!(a.resolve(b_ip, 2), Ok(Resolution::Mac(b.port.mac())));
    assert_eq!(b.responder.counters().nd_adverts, 1);
    let st = a.resolver.table().get(b_ip).unwrap().state;
    assert!(matches!(st, NeighbourState::Reachable { .. }), "{st:?}");
}

#[test]
fn ping_across_the_pipe() {
    let (a, mut b) = (Station::new(1), Station::new(2));
    let (a_ip, b_ip) = ([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
    let req = EchoFrame::request(
        a.port.mac(),
        b.port.mac(),
        a_ip,
        b_ip,
        1,
        42,
        b"are you there",
    );
    let mut f = [0u8; 128];
    let n = req.emit(&mut f).unwrap();
    b.receive(&f[..n], 0);
    let reply = b.out.0.pop_front().expect("B answers the ping");
    let r = EchoFrame::parse(&reply).unwrap();
    assert_eq!(
        (r.kind, r.seq_no, r.data, r.dst_ip),
        (EchoKind::Reply, 42, &b"are you there"[..], req.src_ip)
    );
}

#[test]
fn a_silent_peer_times_out_by_name() {
    let mut a = Station::new(1);
    let ghost = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 99));
    assert_eq!(a.resolve(ghost, 0), Ok(Resolution::Pending));
    let mut t = 0;
    while t < 5 * S {
        t += S / 4;
        a.resolver.poll(&a.port, t, &mut a.out);
    }
    assert_eq!(a.out.0.len(), 3, "three requests, nobody there");
    let e = a.resolve(ghost, t).unwrap_err();
    assert_eq!(
        e,
        ResolveError::Unanswered {
            ip: ghost,
            attempts: 3
        }
    );
    assert_eq!(
        e.to_string(),
        "10.0.0.99 did not answer 3 address resolution requests"
    );
}

#[test]
fn an_announcement_moves_a_peer_that_changed_its_mac() {
    let (mut a, mut b) = (Station::new(1), Station::new(2));
    let b_ip = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
    a.resolve(b_ip, 0).unwrap();
    pump(&mut a, &mut b, 0);
    // B comes back with another NIC (same address, a new MAC) and announces itself.
    let mut b2 = Station::new(2);
    b2.port = PortAddrs::new([2, 0, 0, 0, 0, 0x22]);
    b2.port.add_ipv4([10, 0, 0, 2].into(), 24).unwrap();
    assert_eq!(b2.resolver.announce(&b2.port, &mut b2.out), 1);
    pump(&mut a, &mut b2, S);
    assert_eq!(
        a.resolve(b_ip, S),
        Ok(Resolution::Mac([2, 0, 0, 0, 0, 0x22]))
    );
}

/// Writes one frame into a buffer, returning its length.
type Emit<'a> = dyn Fn(&mut [u8]) -> usize + 'a;

/// Valid frames of every kind the module reads, to mutate.
fn seeds() -> Vec<Vec<u8>> {
    let us = [2, 0, 0, 0, 0, 1];
    let peer = [2, 0, 0, 0, 0, 2];
    let (v6_peer, v6_us) = ("fe80::2".parse().unwrap(), "fe80::1".parse().unwrap());
    let (v4_peer, v4_us) = ([10, 0, 0, 2].into(), [10, 0, 0, 1].into());
    let echo = EchoFrame::request(peer, us, v4_peer, v4_us, 1, 1, &[7; 40]);
    let request = ArpFrame::request(peer, [10, 0, 0, 2].into(), [10, 0, 0, 1].into());
    let reply = ArpFrame::request(us, [10, 0, 0, 1].into(), [10, 0, 0, 2].into()).reply_from(peer);
    let emitted: [&Emit<'_>; 5] = [
        &|b| request.emit(b).unwrap(),
        &|b| reply.emit(b).unwrap(),
        &|b| NdFrame::solicit(peer, v6_peer, v6_us).emit(b).unwrap(),
        &|b| NdFrame::unsolicited_advert(peer, v6_peer).emit(b).unwrap(),
        &|b| echo.emit(b).unwrap(),
    ];
    emitted
        .iter()
        .map(|emit| {
            let mut b = vec![0u8; 200];
            let n = emit(&mut b);
            b.truncate(n);
            b
        })
        .collect()
}

fn fuzz_port() -> PortAddrs {
    let mut p = PortAddrs::new([2, 0, 0, 0, 0, 1]);
    p.add_ipv4([10, 0, 0, 1].into(), 24).unwrap();
    p.add_ipv6("fe80::1".parse().unwrap()).unwrap();
    p
}

/// A reply is a frame the module itself parses back.
fn parses_back(reply: &[u8]) -> bool {
    ArpFrame::parse(reply).is_ok()
        || NdFrame::parse(reply).is_ok()
        || EchoFrame::parse(reply).is_ok()
}

/// Counts frames without keeping them.
#[derive(Default)]
struct Count(usize);

impl FrameTx for Count {
    fn send_frame(&mut self, _: &[u8]) -> Result<(), TxError> {
        self.0 += 1;
        Ok(())
    }
}

/// `frame` through a responder (a reply buffer of `out_len` bytes) and a resolver with a
/// table of `capacity`: a reply fits and parses back, the table stays within its bound.
fn feed(frame: &[u8], out_len: usize, capacity: usize) -> Result<(), TestCaseError> {
    let port = fuzz_port();
    let mut out = vec![0u8; out_len];
    if let Some(n) = Responder::default().respond(frame, &port, &mut out) {
        prop_assert!(n <= out_len);
        prop_assert!(parses_back(&out[..n]));
    }
    let mut r = Resolver::new(ResolverConfig {
        capacity,
        ..ResolverConfig::default()
    });
    r.learn(frame, &port, 0);
    prop_assert!(r.table().len() <= capacity);
    Ok(())
}

proptest! {
    #[test]
    fn random_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
        out_len in 0usize..300,
    ) {
        feed(&bytes, out_len, 8)?;
    }

    #[test]
    fn mutated_frames_never_panic(
        seed in 0usize..5,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
        cut in any::<usize>(),
    ) {
        let mut f = seeds()[seed].clone();
        for (at, v) in edits {
            let i = at % f.len();
            f[i] = v;
        }
        f.truncate(cut % (f.len() + 1));
        feed(&f, 256, 4)?;
    }

    /// Any interleaving of resolves, frames and time: the table and the pending
    /// resolutions stay within their bounds, and no call sends more than it may.
    #[test]
    fn the_resolver_stays_bounded(
        ops in proptest::collection::vec((0u8..4, any::<u8>(), 0u64..3_000_000_000), 1..200),
    ) {
        let port = fuzz_port();
        let cfg = ResolverConfig { capacity: 8, max_pending: 3, ..ResolverConfig::default() };
        let mut r = Resolver::new(cfg);
        let mut wire = Count::default();
        let seeds = seeds();
        let mut now = 0u64;
        for (op, x, dt) in ops {
            now += dt;
            let before = wire.0;
            match op {
                0 => {
                    let ip = IpAddr::V4(Ipv4Addr::new(10, 0, 0, x % 16));
                    let _ = r.resolve(ip, &port, now, &mut wire);
                    prop_assert!(wire.0 - before <= 1, "one request per resolve at most");
                }
                1 => {
                    let ip = Ipv6Addr::new(0xFE80, 0, 0, 0, 0, 0, 0, u16::from(x % 16));
                    let _ = r.resolve(IpAddr::V6(ip), &port, now, &mut wire);
                    prop_assert!(wire.0 - before <= 1);
                }
                2 => {
                    let mut f = seeds[usize::from(x) % seeds.len()].clone();
                    let i = usize::from(x) * 7 % f.len();
                    f[i] ^= x;
                    r.learn(&f, &port, now);
                }
                _ => {
                    let sent = r.poll(&port, now, &mut wire);
                    prop_assert!(sent <= r.table().len());
                }
            }
            prop_assert!(r.table().len() <= cfg.capacity);
            let pending = r
                .table()
                .iter()
                .filter(|e| matches!(e.state, NeighbourState::Incomplete(_)))
                .count();
            prop_assert!(pending <= cfg.max_pending);
        }
    }
}
