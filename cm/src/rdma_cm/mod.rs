//! An rdma_cm-shaped API over the verbs layer (librdmacm's `rdma_cma.h`): an
//! [`EventChannel`], [`CmId`]s that bind, resolve, listen, connect, accept, reject and
//! disconnect, events by name ([`EventKind`]), and `create_qp`, whose RC QP the id moves to
//! RTS from the CM's attributes.
//!
//! Why here and not in verbs: the CM is a client of verbs (it needs QP1, address handles
//! and QPs), as librdmacm is of libibverbs; putting it in `rnic-cm` keeps verbs free of
//! the protocol and the protocol's state machine ([`crate::Endpoint`]) free of I/O. Each
//! device gets one agent (its GSI QP, the endpoint and a thread; see `agent`), shared by
//! every id bound to the device.
//!
//! Rooms: `error`; `addr` (the device behind an address); `channel` (events); `agent`
//! (the per-device CM thread); `id` (the ids and how events reach them).

mod addr;
mod agent;
mod channel;
mod error;
mod id;
mod id_state;

pub use addr::{device_name_for, source_for};
pub use channel::{CmEvent, EventChannel, EventKind, UdParam};
pub use error::{Error, Result};
pub use id::CmId;
pub use id_state::IdState;
