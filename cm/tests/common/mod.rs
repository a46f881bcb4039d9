//! Two CM endpoints wired to each other in memory, with virtual time and a hook that
//! drops MADs on the way.

#![allow(dead_code, unreachable_pub)]

use rnic_cm::cma::{self, ConnParam, RoceRoute};
use rnic_cm::time::Instant;
use rnic_cm::wire::ip::PortSpace;
use rnic_cm::{Config, ConnId, Endpoint, Event, MadAddr, Transmit};

/// Which endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The active side.
    Client,
    /// The passive side.
    Server,
}

/// A MAD as it went over the wire: when, from which side, its attribute, whether dropped.
#[derive(Debug, Clone)]
pub struct Sent {
    pub at: Instant,
    pub from: Side,
    pub attr: u16,
    pub dropped: bool,
    pub mad: [u8; 256],
}

pub type DropFn = Box<dyn FnMut(Side, &Transmit) -> bool>;

pub struct Pair {
    pub client: Endpoint,
    pub server: Endpoint,
    pub route: RoceRoute,
    pub now: Instant,
    pub drop: DropFn,
    pub wire: Vec<Sent>,
    pub events: Vec<(Instant, Side, Event)>,
}

pub const CLIENT_GUID: u64 = 0x5054_00ff_fe11_0003;
pub const SERVER_GUID: u64 = 0x5054_00ff_fe11_0002;
pub const CLIENT_QPN: u32 = 0x21;
pub const SERVER_QPN: u32 = 0x33;

pub fn attr(mad: &[u8]) -> u16 {
    u16::from_be_bytes([mad[16], mad[17]])
}

impl Pair {
    pub fn new() -> Pair {
        let route = RoceRoute::new(
            "10.11.0.3:56810".parse().unwrap(),
            "10.11.0.2:18515".parse().unwrap(),
        );
        let client = Endpoint::new(Config {
            ca_guid: CLIENT_GUID,
            comm_id_seed: 0x1111_0000,
            ..Config::default()
        });
        let mut server = Endpoint::new(Config {
            ca_guid: SERVER_GUID,
            comm_id_seed: 0x2222_0000,
            ..Config::default()
        });
        server.listen(route.service_id(PortSpace::Tcp)).unwrap();
        server.listen(route.service_id(PortSpace::Udp)).unwrap();
        Pair {
            client,
            server,
            route,
            now: Instant::ZERO,
            drop: Box::new(|_, _| false),
            wire: Vec::new(),
            events: Vec::new(),
        }
    }

    pub fn client_addr(&self) -> MadAddr {
        MadAddr::cm(self.route.src_gid(), 0)
    }

    pub fn server_addr(&self) -> MadAddr {
        MadAddr::cm(self.route.dst_gid(), 0)
    }

    pub fn ep(&mut self, side: Side) -> &mut Endpoint {
        match side {
            Side::Client => &mut self.client,
            Side::Server => &mut self.server,
        }
    }

    /// Moves every queued MAD to the other side (through the drop hook) until none is
    /// left, collecting events.
    pub fn pump(&mut self) {
        loop {
            let mut moved = false;
            for side in [Side::Client, Side::Server] {
                while let Some(t) = self.ep(side).poll_transmit() {
                    moved = true;
                    let dropped = (self.drop)(side, &t);
                    self.wire.push(Sent {
                        at: self.now,
                        from: side,
                        attr: attr(&t.mad),
                        dropped,
                        mad: t.mad,
                    });
                    let (peer, from, expect_to) = match side {
                        Side::Client => (Side::Server, self.client_addr(), self.server_addr()),
                        Side::Server => (Side::Client, self.server_addr(), self.client_addr()),
                    };
                    assert_eq!(t.to, expect_to, "addressed to the peer's CM");
                    if !dropped {
                        let now = self.now;
                        let _ = self.ep(peer).receive(now, from, &t.mad);
                    }
                }
            }
            self.collect();
            if !moved {
                return;
            }
        }
    }

    pub fn collect(&mut self) {
        for side in [Side::Client, Side::Server] {
            while let Some(e) = self.ep(side).poll_event() {
                self.events.push((self.now, side, e));
            }
        }
    }

    /// Advances virtual time to the earliest timer of either side and runs it; false
    /// when no timer runs.
    pub fn step(&mut self) -> bool {
        let next = [self.client.poll_at(), self.server.poll_at()]
            .into_iter()
            .flatten()
            .min();
        let Some(at) = next else { return false };
        self.now = self.now.max(at);
        let now = self.now;
        self.client.poll(now);
        self.server.poll(now);
        self.pump();
        true
    }

    /// Runs timers until `f` holds or no timer is left.
    pub fn run_until(&mut self, mut f: impl FnMut(&Pair) -> bool) {
        self.pump();
        while !f(self) {
            if !self.step() {
                return;
            }
        }
    }

    pub fn take_events(&mut self, side: Side) -> Vec<Event> {
        let (mine, rest): (Vec<_>, Vec<_>) =
            self.events.drain(..).partition(|(_, s, _)| *s == side);
        self.events = rest;
        mine.into_iter().map(|(_, _, e)| e).collect()
    }

    /// The client's REQ to the server's TCP service with default rdma_cm parameters.
    pub fn connect(&mut self) -> ConnId {
        let conn = ConnParam {
            qp_num: CLIENT_QPN,
            retry_count: 7,
            rnr_retry_count: 7,
            private_data: b"client hello".to_vec(),
            ..ConnParam::default()
        };
        let p = cma::connect_params(&self.route, PortSpace::Tcp, &conn, 0x80b384, 15).unwrap();
        let now = self.now;
        self.client.connect(now, &p).unwrap()
    }

    /// The server's id from its ConnectRequest event.
    pub fn server_request(&mut self) -> ConnId {
        let evs = self.take_events(Side::Server);
        match evs.as_slice() {
            [Event::ConnectRequest { id, .. }] => *id,
            other => panic!("expected one ConnectRequest, got {other:?}"),
        }
    }

    pub fn accept(&mut self, id: ConnId) {
        let rep = cma::accept_params(
            &ConnParam {
                qp_num: SERVER_QPN,
                rnr_retry_count: 7,
                private_data: b"server hello".to_vec(),
                ..ConnParam::default()
            },
            0x269d0c,
        )
        .unwrap();
        let now = self.now;
        self.server.accept(now, id, &rep).unwrap();
    }

    /// Connects, accepts and readies: both established. Returns (client id, server id).
    pub fn establish(&mut self) -> (ConnId, ConnId) {
        let c = self.connect();
        self.pump();
        let s = self.server_request();
        self.accept(s);
        self.pump();
        let evs = self.take_events(Side::Client);
        assert!(
            matches!(evs.as_slice(), [Event::ConnectReply { .. }]),
            "{evs:?}"
        );
        self.client.ready_to_use(c, b"rtu").unwrap();
        self.pump();
        (c, s)
    }

    /// How many MADs of `attr` went from `side`, and at which times.
    pub fn sent(&self, side: Side, attr: u16) -> Vec<Instant> {
        self.wire
            .iter()
            .filter(|s| s.from == side && s.attr == attr)
            .map(|s| s.at)
            .collect()
    }
}
