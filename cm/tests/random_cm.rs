//! Random MADs, random well-formed CM messages with IDs drawn from the live connections
//! and from nowhere, random consumer calls and random time steps, into a listening and a
//! connecting endpoint wired to each other (some MADs lost): nothing panics, every
//! received MAD lands in exactly one outcome counter, and every MAD queued is counted.

use core::time::Duration;
use proptest::prelude::*;
use rnic_cm::cma::{self, ConnParam, RoceRoute};
use rnic_cm::time::Instant;
use rnic_cm::wire::ip::PortSpace;
use rnic_cm::wire::{
    CM_CLASS, CM_CLASS_VERSION, Drep, Dreq, MAD_LEN, Mra, Rej, Rep, Req, Rtu, SidrRep, SidrReq,
};
use rnic_cm::{Config, ConnId, Endpoint, Event, MadAddr};

#[derive(Debug, Clone)]
enum Op {
    /// Random bytes to one side, the CM header made valid or not.
    Raw {
        to_server: bool,
        bytes: Vec<u8>,
        valid_header: bool,
        attr: u16,
    },
    /// A well-formed message of kind `kind` with fields from `seed`.
    Msg {
        to_server: bool,
        kind: u8,
        seed: u64,
    },
    /// A consumer call on a live connection.
    Call { what: u8, seed: u64 },
    /// Virtual time passes; timers run.
    Wait { nanos: u64 },
    /// The network moves what is queued; `lose` in 256 lost.
    Deliver { lose: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (
            any::<bool>(),
            proptest::collection::vec(any::<u8>(), 0..300),
            any::<bool>(),
            prop_oneof![0x0010u16..=0x001A, any::<u16>()]
        )
            .prop_map(|(to_server, bytes, valid_header, attr)| Op::Raw {
                to_server,
                bytes,
                valid_header,
                attr
            }),
        (any::<bool>(), 0u8..9, any::<u64>()).prop_map(|(to_server, kind, seed)| Op::Msg {
            to_server,
            kind,
            seed
        }),
        (0u8..11, any::<u64>()).prop_map(|(what, seed)| Op::Call { what, seed }),
        (0u64..20_000_000_000).prop_map(|nanos| Op::Wait { nanos }),
        any::<u8>().prop_map(|lose| Op::Deliver { lose }),
    ]
}

/// splitmix64: fields from a seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[(self.next() % v.len() as u64) as usize]
    }
    fn small(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

struct World {
    client: Endpoint,
    server: Endpoint,
    route: RoceRoute,
    now: Instant,
    /// IDs seen on either side (live or gone), with the side that owns them.
    ids: Vec<(bool, u32)>,
    taken: [u64; 2],
    rng: Rng,
}

impl World {
    fn ep(&mut self, server: bool) -> &mut Endpoint {
        if server {
            &mut self.server
        } else {
            &mut self.client
        }
    }

    fn addr(&self, server: bool) -> MadAddr {
        MadAddr::cm(
            if server {
                self.route.dst_gid()
            } else {
                self.route.src_gid()
            },
            0,
        )
    }

    fn id(&mut self) -> u32 {
        let mut pool: Vec<u32> = self.ids.iter().map(|(_, id)| *id).collect();
        pool.extend([0, 1, 0xffff_ffff, self.rng.next() as u32]);
        self.rng.pick(&pool)
    }

    /// A connection to call on: mostly one seen, on its own side.
    fn owned_id(&mut self) -> (bool, ConnId) {
        if !self.ids.is_empty() && self.rng.small(5) != 0 {
            let (server, id) = self.rng.pick(&self.ids);
            return (server, ConnId(id));
        }
        (self.rng.next() & 1 == 1, ConnId(self.rng.next() as u32))
    }

    fn message(&mut self, kind: u8, seed: u64) -> [u8; MAD_LEN] {
        self.rng = Rng(seed);
        let (a, b) = (self.id(), self.id());
        let guids = [0x1111, 0x2222, self.rng.next()];
        let guid = self.rng.pick(&guids);
        let qpn = self.rng.pick(&[0x21, 0x33, 0x44]);
        let sids = [
            self.route.service_id(PortSpace::Tcp),
            self.route.service_id(PortSpace::Udp),
            self.rng.next(),
        ];
        let sid = self.rng.pick(&sids);
        let tid = self.rng.next();
        let small = self.rng.small(32) as u8;
        let mut m = [0u8; MAD_LEN];
        match kind {
            0 => Req {
                local_comm_id: a,
                service_id: sid,
                local_ca_guid: guid,
                local_qpn: qpn,
                transport_service_type: small % 4,
                max_cm_retries: small % 16,
                local_cm_response_timeout: small,
                primary: rnic_cm::wire::Path {
                    local_ack_timeout: small,
                    ..Default::default()
                },
                ..Req::default()
            }
            .emit(tid, &mut m),
            1 => Mra {
                local_comm_id: a,
                remote_comm_id: b,
                message_mraed: small % 4,
                service_timeout: small,
                ..Mra::default()
            }
            .emit(tid, &mut m),
            2 => {
                let mut rej = Rej {
                    local_comm_id: a,
                    remote_comm_id: b,
                    message_rejected: small % 4,
                    reason: self.rng.pick(&[4, 8, 10, 28, u16::from(small)]),
                    rejected_info_length: self.rng.small(80) as u8,
                    ..Rej::default()
                };
                rej.ari[..8].copy_from_slice(&guid.to_be_bytes());
                rej.emit(tid, &mut m)
            }
            3 => Rep {
                local_comm_id: a,
                remote_comm_id: b,
                local_qpn: qpn,
                local_ca_guid: guid,
                target_ack_delay: small,
                ..Rep::default()
            }
            .emit(tid, &mut m),
            4 => Rtu {
                local_comm_id: a,
                remote_comm_id: b,
                ..Rtu::default()
            }
            .emit(tid, &mut m),
            5 => Dreq {
                local_comm_id: a,
                remote_comm_id: b,
                remote_qpn_eecn: qpn,
                ..Dreq::default()
            }
            .emit(tid, &mut m),
            6 => Drep {
                local_comm_id: a,
                remote_comm_id: b,
                ..Drep::default()
            }
            .emit(tid, &mut m),
            7 => SidrReq {
                request_id: a,
                service_id: sid,
                ..SidrReq::default()
            }
            .emit(tid, &mut m),
            _ => SidrRep {
                request_id: a,
                qpn,
                additional_information_length: self.rng.small(80) as u8,
                ..SidrRep::default()
            }
            .emit(tid, &mut m),
        }
        m
    }

    fn call(&mut self, what: u8, seed: u64) {
        self.rng = Rng(seed);
        let (server, id) = self.owned_id();
        let now = self.now;
        let conn = ConnParam {
            qp_num: 0x21,
            ..ConnParam::default()
        };
        let ep = if server {
            &mut self.server
        } else {
            &mut self.client
        };
        // Errors are fine (wrong state, unknown id); panics are not.
        let r = match what {
            0 => cma::connect_params(&self.route, PortSpace::Tcp, &conn, 5, 15).and_then(|p| {
                self.client
                    .connect(now, &p)
                    .map(|i| self.ids.push((false, i.0)))
            }),
            1 => cma::accept_params(&conn, 9).and_then(|r| ep.accept(now, id, &r)),
            2 => ep.reject(now, id, 28, &[1, 2], b"no"),
            3 => ep.mra(id, (seed % 32) as u8, &[], seed & 64 != 0),
            4 => ep.ready_to_use(id, &[]),
            5 => ep.disconnect(now, id, &[]),
            6 => ep.disconnect_reply(now, id, &[]),
            7 => cma::sidr_params(&self.route, PortSpace::Udp, &[]).and_then(|p| {
                self.client
                    .sidr_request(now, &p)
                    .map(|i| self.ids.push((false, i.0)))
            }),
            8 => cma::sidr_accept(0x44, 0, &[]).and_then(|r| ep.sidr_reply(id, &r)),
            9 => ep.notify_established(id),
            _ => ep.destroy(now, id),
        };
        let _ = r;
    }

    fn deliver(&mut self, lose: u8) {
        for _ in 0..64 {
            let mut moved = false;
            for server in [false, true] {
                while let Some(t) = self.ep(server).poll_transmit() {
                    moved = true;
                    self.taken[usize::from(server)] += 1;
                    if (self.rng.next() & 0xff) as u8 >= lose {
                        let (now, from) = (self.now, self.addr(server));
                        let _ = self.ep(!server).receive(now, from, &t.mad);
                    }
                }
            }
            self.events();
            if !moved {
                break;
            }
        }
    }

    /// Takes the events out; half of them get the answer a well-behaved consumer gives, so
    /// connections get established and torn down, not only refused.
    fn events(&mut self) {
        for server in [false, true] {
            while let Some(e) = self.ep(server).poll_event() {
                if let Event::ConnectRequest { id, .. } | Event::SidrRequest { id, .. } = &e {
                    self.ids.push((server, id.0));
                }
                if std::env::var_os("CM_STATS").is_some() {
                    eprintln!(
                        "EVENT {}",
                        format!("{e:?}").split([' ', '{']).next().unwrap_or("")
                    );
                }
                if self.rng.next() & 1 == 0 {
                    continue;
                }
                let now = self.now;
                let conn = ConnParam {
                    qp_num: 0x33,
                    ..ConnParam::default()
                };
                let ep = self.ep(server);
                let _ = match e {
                    Event::ConnectRequest { id, .. } => {
                        cma::accept_params(&conn, 3).and_then(|r| ep.accept(now, id, &r))
                    }
                    Event::ConnectReply { id, .. } => ep.ready_to_use(id, &[]),
                    Event::DisconnectRequest { id, .. } => ep.disconnect_reply(now, id, &[]),
                    Event::SidrRequest { id, .. } => {
                        cma::sidr_accept(0x33, 0, &[]).and_then(|r| ep.sidr_reply(id, &r))
                    }
                    Event::Established { id } => ep.disconnect(now, id, &[]),
                    _ => Ok(()),
                };
            }
        }
    }

    fn check(&self) -> Result<(), TestCaseError> {
        for (i, ep) in [&self.client, &self.server].into_iter().enumerate() {
            let k = ep.counters();
            prop_assert_eq!(k.rx_outcomes(), k.rx_mads);
            prop_assert_eq!(
                k.rx_by_attr.iter().sum::<u64>(),
                k.rx_mads - k.rx_malformed - k.rx_unsupported
            );
            prop_assert!(k.tx_total() >= self.taken[i]);
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
    #[test]
    fn random_traffic_never_panics_and_the_counters_add_up(ops in proptest::collection::vec(op(), 1..80)) {
        let route = RoceRoute::new("10.11.0.3:56810".parse().unwrap(), "10.11.0.2:18515".parse().unwrap());
        let mut server = Endpoint::new(Config { ca_guid: 0x2222, ..Config::default() });
        server.listen(route.service_id(PortSpace::Tcp)).unwrap();
        server.listen(route.service_id(PortSpace::Udp)).unwrap();
        let client = Endpoint::new(Config { ca_guid: 0x1111, comm_id_seed: 0xabcd, ..Config::default() });
        let mut w = World { client, server, route, now: Instant::ZERO, ids: Vec::new(), taken: [0; 2], rng: Rng(7) };
        for op in ops {
            match op {
                Op::Raw { to_server, mut bytes, valid_header, attr } => {
                    if valid_header && bytes.len() >= 24 {
                        bytes[0] = 1;
                        bytes[1] = CM_CLASS;
                        bytes[2] = CM_CLASS_VERSION;
                        bytes[3] = 3;
                        bytes[16..18].copy_from_slice(&attr.to_be_bytes());
                    }
                    let (now, from) = (w.now, w.addr(!to_server));
                    let _ = w.ep(to_server).receive(now, from, &bytes);
                }
                Op::Msg { to_server, kind, seed } => {
                    let m = w.message(kind, seed);
                    let (now, from) = (w.now, w.addr(!to_server));
                    let _ = w.ep(to_server).receive(now, from, &m);
                }
                Op::Call { what, seed } => w.call(what, seed),
                Op::Wait { nanos } => {
                    w.now = w.now + Duration::from_nanos(nanos);
                    let now = w.now;
                    w.client.poll(now);
                    w.server.poll(now);
                }
                Op::Deliver { lose } => w.deliver(lose),
            }
            w.events();
            w.check()?;
        }
        // Whatever state it ended in, time drains every connection: timewait ends, retries
        // run out, SIDR requests give up; only consumer-owned states stay.
        w.deliver(0);
        for _ in 0..10_000 {
            let next = [w.client.poll_at(), w.server.poll_at()].into_iter().flatten().min();
            let Some(at) = next else { break };
            w.now = w.now.max(at);
            let now = w.now;
            w.client.poll(now);
            w.server.poll(now);
            w.deliver(0);
            w.check()?;
        }
        prop_assert_eq!((w.client.poll_at(), w.server.poll_at()), (None, None));
    }
}
