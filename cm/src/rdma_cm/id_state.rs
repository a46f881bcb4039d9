//! [`IdState`]: a room of its own so that the errors can name an id's state without
//! importing the ids.

/// Where an id is (after librdmacm's `enum rdma_cm_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdState {
    /// Created, nothing bound.
    Idle,
    /// Bound to a local address ([`CmId::bind_addr`](crate::rdma_cm::CmId::bind_addr)).
    Bound,
    /// The destination is resolved.
    AddrResolved,
    /// The route is resolved.
    RouteResolved,
    /// Listening.
    Listen,
    /// REQ sent, waiting for the REP.
    Connect,
    /// A REQ arrived (a ConnectRequest event's id), waiting for accept or reject.
    ConnectRequest,
    /// REP sent, waiting for the RTU.
    Accepted,
    /// Connected.
    Established,
    /// Rejected, unreachable or refused: the connection is gone.
    Failed,
    /// Disconnected (in or past timewait).
    Disconnected,
}
