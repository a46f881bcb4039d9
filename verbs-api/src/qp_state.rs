//! [`QpState`] (`enum ibv_qp_state`): a room of its own so that both the QP and the errors
//! that name a QP's state ([`crate::Error::InvalidTransition`], [`crate::Error::WrongQpState`])
//! use it without importing each other.
//!
//! It is not the driver's `rnic_driver::qp::QpState` (which is the PRM's QPC `state` code, from
//! hw-regs): ibverbs numbers the states differently (SQD 4, SQE 5 against the PRM's SQD 7,
//! SQER 4) and names them `RESET` / `SQE`, and verbs users compare with and print the ibverbs
//! values. `QpState::from_driver` is the one conversion.
//!
//! The rules this API checks a QP's state against before it asks the device are here too:
//! which state each [`Transition`] starts from, and which states accept posts. The state they
//! are checked against is the driver's record (`rnic_driver::qp::Qp::state`), the one
//! software copy; the device keeps the real one.

use rnic_driver::qp as dqp;
use std::fmt;

/// QP state (`enum ibv_qp_state`, same values).
///
/// ```
/// use rnic_verbs::QpState;
///
/// assert_eq!(QpState::Rts as u32, 3); // IBV_QPS_RTS
/// assert_eq!(QpState::Err.to_string(), "ERR");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpState {
    /// IBV_QPS_RESET (0).
    Reset = 0,
    /// IBV_QPS_INIT (1).
    Init = 1,
    /// IBV_QPS_RTR (2): ready to receive.
    Rtr = 2,
    /// IBV_QPS_RTS (3): ready to send.
    Rts = 3,
    /// IBV_QPS_SQD (4): send queue drained.
    Sqd = 4,
    /// IBV_QPS_SQE (5): send queue error.
    Sqe = 5,
    /// IBV_QPS_ERR (6).
    Err = 6,
}

impl QpState {
    /// The device's state (QUERY_QP) in ibverbs' terms.
    pub(crate) fn from_driver(s: dqp::QpState) -> QpState {
        match s {
            dqp::QpState::Rst => QpState::Reset,
            dqp::QpState::Init => QpState::Init,
            dqp::QpState::Rtr => QpState::Rtr,
            dqp::QpState::Rts => QpState::Rts,
            dqp::QpState::Sqer => QpState::Sqe,
            dqp::QpState::Err => QpState::Err,
            dqp::QpState::Sqd => QpState::Sqd,
        }
    }
}

impl QpState {
    /// Whether `ibv_post_send` takes work requests in this state: from RTS on; in SQE and
    /// ERR the device completes them flushed, the usual way to drain a QP.
    #[inline]
    pub(crate) const fn accepts_sends(self) -> bool {
        !matches!(self, QpState::Reset | QpState::Init | QpState::Rtr)
    }

    /// Why a send was refused (for [`crate::Error::WrongQpState`]).
    pub(crate) const SENDS_ACCEPTED: &str =
        "sends are accepted from RTS on (flushed in SQE and ERR)";

    /// Whether `ibv_post_recv` takes work requests in this state: all but RESET (receives
    /// may be posted before connecting; flushed in ERR).
    #[inline]
    pub(crate) const fn accepts_recvs(self) -> bool {
        !matches!(self, QpState::Reset)
    }

    /// Why a receive was refused (for [`crate::Error::WrongQpState`]).
    pub(crate) const RECVS_ACCEPTED: &str = "receives are accepted from INIT on (flushed in ERR)";
}

/// An `ibv_modify_qp` transition that starts from one state (to ERR and to RESET start from
/// any, and are not listed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transition {
    /// RESET -> INIT.
    RstToInit,
    /// INIT -> RTR.
    InitToRtr,
    /// RTR -> RTS.
    RtrToRts,
    /// RTS -> RTS.
    RtsToRts,
    /// SQE -> RTS.
    SqeToRts,
}

impl Transition {
    /// The state the transition starts from.
    pub(crate) const fn from(self) -> QpState {
        match self {
            Transition::RstToInit => QpState::Reset,
            Transition::InitToRtr => QpState::Init,
            Transition::RtrToRts => QpState::Rtr,
            Transition::RtsToRts => QpState::Rts,
            Transition::SqeToRts => QpState::Sqe,
        }
    }

    /// The state it leads to.
    pub(crate) const fn to(self) -> QpState {
        match self {
            Transition::RstToInit => QpState::Init,
            Transition::InitToRtr => QpState::Rtr,
            Transition::RtrToRts | Transition::RtsToRts | Transition::SqeToRts => QpState::Rts,
        }
    }
}

impl fmt::Display for QpState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QpState::Reset => "RESET",
            QpState::Init => "INIT",
            QpState::Rtr => "RTR",
            QpState::Rts => "RTS",
            QpState::Sqd => "SQD",
            QpState::Sqe => "SQE",
            QpState::Err => "ERR",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [QpState; 7] = [
        QpState::Reset,
        QpState::Init,
        QpState::Rtr,
        QpState::Rts,
        QpState::Sqd,
        QpState::Sqe,
        QpState::Err,
    ];

    #[test]
    fn posts_are_accepted_where_the_docs_say() {
        let sends: Vec<_> = ALL.into_iter().filter(|s| s.accepts_sends()).collect();
        let recvs: Vec<_> = ALL.into_iter().filter(|s| s.accepts_recvs()).collect();
        use QpState::*;
        assert_eq!(sends, [Rts, Sqd, Sqe, Err]);
        assert_eq!(recvs, [Init, Rtr, Rts, Sqd, Sqe, Err]);
    }
}
