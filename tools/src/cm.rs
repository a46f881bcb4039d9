//! The one place the tools talk to the connection manager ([`rnic_cm::rdma_cm`], librdmacm's
//! API over rnic's verbs): waiting for an event within a bound, librdmacm's names and
//! statuses of events (`rdma_event_str`, `event->status`), host names to IPv4 addresses, the
//! address an open device answers to, and why a device behind an address did not open.

use crate::error::ToolError;
use crate::rdma::{self, Context, EmuOpts};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

pub use rnic_cm::cma::ConnParam;
pub use rnic_cm::rdma_cm::{CmEvent, CmId, EventChannel, EventKind, IdState, device_name_for};
pub use rnic_cm::wire::ip::PortSpace;

/// `ETIMEDOUT`: the status the kernel's rdma_cm gives `RDMA_CM_EVENT_UNREACHABLE` (the CM's
/// retries ran out) and `RDMA_CM_EVENT_ADDR_ERROR` (the neighbour did not answer), negated.
pub const ETIMEDOUT: i32 = 110;
/// `EINVAL`: the status of `RDMA_CM_EVENT_CONNECT_ERROR` when the local QP refused the
/// peer's attributes (`cma_rep_recv`'s failed `ibv_modify_qp`), negated.
pub const EINVAL: i32 = 22;

/// librdmacm's `rdma_event_str`.
///
/// ```
/// use rnic_tools::cm::{event_str, EventKind};
/// assert_eq!(event_str(EventKind::Rejected), "RDMA_CM_EVENT_REJECTED");
/// ```
pub fn event_str(kind: EventKind) -> &'static str {
    match kind {
        EventKind::AddrResolved => "RDMA_CM_EVENT_ADDR_RESOLVED",
        EventKind::AddrError => "RDMA_CM_EVENT_ADDR_ERROR",
        EventKind::RouteResolved => "RDMA_CM_EVENT_ROUTE_RESOLVED",
        EventKind::ConnectRequest => "RDMA_CM_EVENT_CONNECT_REQUEST",
        EventKind::ConnectError => "RDMA_CM_EVENT_CONNECT_ERROR",
        EventKind::Unreachable => "RDMA_CM_EVENT_UNREACHABLE",
        EventKind::Rejected => "RDMA_CM_EVENT_REJECTED",
        EventKind::Established => "RDMA_CM_EVENT_ESTABLISHED",
        EventKind::Disconnected => "RDMA_CM_EVENT_DISCONNECTED",
        EventKind::TimewaitExit => "RDMA_CM_EVENT_TIMEWAIT_EXIT",
    }
}

/// `event->status` as librdmacm reports it on RoCE: the REJ's reason for a rejection (8:
/// invalid service ID, nobody listens on the port), `-ETIMEDOUT` for an unreachable peer
/// or an unresolved address, `-EINVAL` for a connect error, 0 otherwise.
pub fn status(ev: &CmEvent) -> i32 {
    match ev.kind {
        EventKind::Rejected => ev.status,
        EventKind::Unreachable | EventKind::AddrError => -ETIMEDOUT,
        EventKind::ConnectError => -EINVAL,
        _ => 0,
    }
}

/// Whether `kind` ends a connection attempt (rping's and perftest's error events).
pub fn is_error(kind: EventKind) -> bool {
    matches!(
        kind,
        EventKind::AddrError
            | EventKind::ConnectError
            | EventKind::Unreachable
            | EventKind::Rejected
    )
}

/// The next event on `ch`, waiting up to `timeout` (`None`: for ever).
pub fn next_event(
    ch: &EventChannel,
    timeout: Option<Duration>,
    what: &str,
) -> Result<CmEvent, ToolError> {
    match ch.get_event(timeout).map_err(cm_err)? {
        Some(ev) => Ok(ev),
        None => Err(ToolError::Timeout(
            timeout.unwrap_or_default(),
            format!("waiting for {what}"),
        )),
    }
}

/// An rdma_cm error as a tool error.
pub fn cm_err(e: rnic_cm::rdma_cm::Error) -> ToolError {
    ToolError::Verbs(e.to_string())
}

/// The QP number of an id's QP: what tells the ids of one channel apart in its events.
pub fn qpn_of(id: &CmId) -> Option<u32> {
    id.qp().map(|q| q.qp_num())
}

/// The IPv4 address of `host` (a dotted quad or a name), as `getaddrinfo` with `AF_INET`
/// finds it; the error is `gai_strerror`'s text.
///
/// ```
/// use rnic_tools::cm::ipv4_of;
/// assert_eq!(ipv4_of("127.0.0.9").unwrap(), std::net::Ipv4Addr::new(127, 0, 0, 9));
/// assert!(ipv4_of("no such host.invalid").is_err());
/// ```
pub fn ipv4_of(host: &str) -> Result<Ipv4Addr, String> {
    if let Ok(a) = host.parse::<Ipv4Addr>() {
        return Ok(a);
    }
    let not_known = || "Name or service not known".to_string();
    (host, 0)
        .to_socket_addrs()
        .map_err(|_| not_known())?
        .find_map(|a| match a.ip() {
            IpAddr::V4(v4) => Some(v4),
            IpAddr::V6(_) => None,
        })
        .ok_or_else(not_known)
}

/// The IPv4 address an open device answers to (its IPv4 RoCE v2 GID), checked to be one the
/// connection manager maps back to the same device (an `rdma_bind_addr` to it lands there).
pub fn device_ipv4(ctx: &Context) -> Result<Ipv4Addr, ToolError> {
    let ip = ctx
        .ipv4_gid_index()
        .and_then(|i| ctx.query_gid(1, i).ok())
        .and_then(|g| g.ipv4())
        .ok_or_else(|| {
            ToolError::Usage(format!(
                "rdma_cm: {} has no IPv4 address to bind to",
                ctx.name()
            ))
        })?;
    match device_name_for(IpAddr::V4(ip)) {
        Ok(n) if n == ctx.name() => Ok(ip),
        _ => Err(ToolError::Usage(format!(
            "rdma_cm: {} is not the device rnic's connection manager finds behind its address \
             {ip} (it uses emu0, emu1 and emu:<IPv4> devices)",
            ctx.name()
        ))),
    }
}

/// Why the device behind `ip` did not open.
#[derive(Debug)]
pub enum OpenFailure {
    /// Another process holds the address (an `emu:<IPv4>` device binds UDP 4791 on it):
    /// what the kernel's `rdma_bind_addr` reports as `EADDRINUSE`.
    AddrInUse,
    /// No device can stand behind the address (`EADDRNOTAVAIL`).
    NotAvailable(ToolError),
    /// Anything else.
    Other(ToolError),
}

/// Opens the device behind `ip` with the emulator options (`--pcap`, `--emu-faults`), so that
/// the connection manager, which opens it by the same name, uses it with them.
pub fn open_device_for(ip: Ipv4Addr, emu: &EmuOpts) -> Result<Context, OpenFailure> {
    let name = device_name_for(IpAddr::V4(ip))
        .map_err(|e| OpenFailure::NotAvailable(ToolError::Usage(e.to_string())))?;
    rdma::open(&name, emu).map_err(|e| {
        // The verbs error names the link's failure in words only: ask the kernel whether
        // the address's RoCE port is taken.
        let udp = name.starts_with("emu:")
            && std::net::UdpSocket::bind(SocketAddr::new(IpAddr::V4(ip), 4791))
                .is_err_and(|b| b.kind() == std::io::ErrorKind::AddrInUse);
        match e {
            _ if udp => OpenFailure::AddrInUse,
            ToolError::NoSuchDevice(..) => OpenFailure::NotAvailable(e),
            e => OpenFailure::Other(e),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_as_librdmacm() {
        let ch = EventChannel::new().unwrap();
        let id = CmId::new(&ch, PortSpace::Tcp);
        let ev = |kind, status| CmEvent {
            kind,
            id: id.clone(),
            listen_id: None,
            status,
            param: ConnParam::default(),
            ud: None,
        };
        assert_eq!(status(&ev(EventKind::Rejected, 8)), 8);
        assert_eq!(status(&ev(EventKind::Unreachable, 0)), -110);
        assert_eq!(status(&ev(EventKind::AddrError, 0)), -110);
        assert_eq!(status(&ev(EventKind::Established, 0)), 0);
        assert!(is_error(EventKind::Rejected) && !is_error(EventKind::Disconnected));
    }

    #[test]
    fn an_address_held_by_another_socket_is_in_use() {
        let held = std::net::UdpSocket::bind("127.0.0.139:4791").unwrap();
        let ip = Ipv4Addr::new(127, 0, 0, 139);
        assert!(matches!(
            open_device_for(ip, &EmuOpts::default()),
            Err(OpenFailure::AddrInUse)
        ));
        drop(held);
        let ctx = open_device_for(ip, &EmuOpts::default()).unwrap();
        assert_eq!(device_ipv4(&ctx).unwrap(), ip);
        assert!(matches!(
            open_device_for(Ipv4Addr::UNSPECIFIED, &EmuOpts::default()),
            Err(OpenFailure::NotAvailable(_))
        ));
    }
}
