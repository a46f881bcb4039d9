//! The names a connection goes by: its ID ([`ConnId`]) and the chapter-12 states
//! ([`State`]). Below the endpoint, its events and its errors, which all name them.

/// A connection, named by its local communication ID (the one this endpoint put in its
/// REQ, REP or SIDR REQ, or the request ID of a SIDR REQ it received).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u32);

/// The connection states of IBTA Vol. 1, 12.9 (as `enum ib_cm_state` names them); a
/// listener is not a connection and has no state here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// No connection (only seen on the way out of the table).
    Idle,
    /// Active: REQ sent, waiting for REP.
    ReqSent,
    /// Passive: REQ received, the consumer decides.
    ReqRcvd,
    /// Passive: MRA sent for the REQ.
    MraReqSent,
    /// Active: the REQ was MRAed, waiting longer.
    MraReqRcvd,
    /// Passive: REP sent, waiting for RTU.
    RepSent,
    /// Active: REP received, the consumer readies its QP.
    RepRcvd,
    /// Active: MRA sent for the REP.
    MraRepSent,
    /// Passive: the REP was MRAed, waiting longer.
    MraRepRcvd,
    /// Both sides may send.
    Established,
    /// DREQ sent, waiting for DREP.
    DreqSent,
    /// DREQ received, the consumer answers.
    DreqRcvd,
    /// Disconnected; old packets drain before the IDs and QP are reused.
    Timewait,
    /// SIDR REQ sent, waiting for SIDR REP.
    SidrReqSent,
    /// SIDR REQ received, the consumer answers.
    SidrReqRcvd,
}
