//! The InfiniBand Communication Manager (IBTA Vol. 1, chapter 12) for rnic, as rdma_cm uses it
//! on RoCE v2: CM messages are MADs of management class 0x07 in UD packets to QP 1 with Q_Key
//! 0x80010000.
//!
//! This crate is a client of the verbs layer, as librdmacm is of libibverbs. It holds:
//! - [`wire`]: the MAD common header and every CM message (REQ, MRA, REJ, REP, RTU, DREQ,
//!   DREP, SIDR REQ, SIDR REP), each a typed `Repr` that parses and emits the 256-byte MAD
//!   byte for byte, and rdma_cm's service IDs and IP private-data header;
//! - [`Endpoint`]: the chapter-12 state machine of one port, both sides, with SIDR, sans-IO
//!   (the caller passes time, received MADs and their source, and takes MADs to send and
//!   [`Event`]s out);
//! - [`cma`]: rdma_cm's conventions for the REQ, REP and SIDR REQ it sends on RoCE v2;
//! - [`rdma_cm`]: the librdmacm-shaped API (event channel, CM ids, `create_qp`; RC
//!   connections, UD services through SIDR) over the verbs layer, with one CM agent per
//!   device on its GSI QP; with the `tokio` feature, events awaited. It lives here, not in verbs,
//!   because the CM is a client of verbs as librdmacm is of libibverbs.
//!
//! ```
//! use rnic_cm::{cma, Config, Endpoint, Event, MadAddr, time::Instant, wire::ip::PortSpace};
//!
//! let (mut client, mut server) = (Endpoint::new(Config { ca_guid: 1, ..Config::default() }),
//!                                 Endpoint::new(Config { ca_guid: 2, ..Config::default() }));
//! let route = cma::RoceRoute::new("10.0.0.1:40000".parse().unwrap(), "10.0.0.2:18515".parse().unwrap());
//! server.listen(route.service_id(PortSpace::Tcp)).unwrap();
//! let conn = cma::ConnParam { qp_num: 0x11, ..cma::ConnParam::default() };
//! let p = cma::connect_params(&route, PortSpace::Tcp, &conn, 0x1234, client.config().ack_delay).unwrap();
//! let now = Instant::ZERO;
//! client.connect(now, &p).unwrap();
//! // The network: the client's REQ to the server.
//! let req = client.poll_transmit().unwrap();
//! server.receive(now, MadAddr::cm(route.src_gid(), 0), &req.mad).unwrap();
//! assert!(matches!(server.poll_event(), Some(Event::ConnectRequest { .. })));
//! ```

pub mod cma;
pub mod counters;
pub mod endpoint;
pub mod error;
pub mod event;
pub mod rdma_cm;
pub mod state;
pub mod time;
pub mod wire;

pub use counters::Counters;
pub use endpoint::{AcceptParams, Config, ConnectParams, Endpoint, SidrParams};
pub use error::{CmError, RecvError};
pub use event::{Event, MadAddr, Transmit};
pub use state::{ConnId, State};
