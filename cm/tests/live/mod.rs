//! What the tests of the live rdma_cm API (CM agents on emulated devices) share: waiting for
//! an event of a kind, a device whose link loses frames, a listening id, an id with its
//! address and route resolved.

#![allow(dead_code, unreachable_pub)]

use rnic_cm::rdma_cm::{CmEvent, CmId, EventChannel, EventKind};
use rnic_cm::wire::ip::PortSpace;
use rnic_verbs::{Context, EmuOptions, OpenOptions};
use std::net::SocketAddr;
use std::time::Duration;

/// The next event on `ch` within `within`, which must be of `kind`.
pub fn expect(ch: &EventChannel, kind: EventKind, within: Duration) -> CmEvent {
    let ev = ch
        .get_event(Some(within))
        .unwrap()
        .expect("an event in time");
    assert_eq!(ev.kind, kind, "{ev:?}");
    ev
}

/// Opens emulated device `name` with fault injection `spec` on its link, before the CM
/// does (fault options apply when a device is created, so: first in its process).
pub fn open_lossy(name: &str, spec: &str) -> Context {
    let emu = EmuOptions::default().with_fault_spec(spec).unwrap();
    Context::open_with(
        name,
        &OpenOptions {
            emu,
            ..OpenOptions::default()
        },
    )
    .unwrap()
}

/// An id of `ps` on `ch` listening on `addr`.
pub fn listener(ch: &EventChannel, ps: PortSpace, addr: &str) -> CmId {
    let id = CmId::new(ch, ps);
    id.bind_addr(addr.parse().unwrap()).unwrap();
    id.listen(1).unwrap();
    id
}

/// An id of `ps` on `ch` with its address (from `src`, or the route's source) and its route
/// to `dst` resolved, both events taken.
pub fn resolved(
    ch: &EventChannel,
    ps: PortSpace,
    src: Option<SocketAddr>,
    dst: &str,
    within: Duration,
) -> CmId {
    let id = CmId::new(ch, ps);
    id.resolve_addr(src, dst.parse().unwrap(), within).unwrap();
    expect(ch, EventKind::AddrResolved, within);
    id.resolve_route(within).unwrap();
    expect(ch, EventKind::RouteResolved, within);
    id
}
