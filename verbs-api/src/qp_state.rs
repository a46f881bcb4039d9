//! [`QpState`] (`enum ibv_qp_state`): a room of its own so that both the QP and the errors
//! that name a QP's state ([`crate::Error::InvalidTransition`], [`crate::Error::WrongQpState`])
//! use it without importing each other.
//!
//! It is not the driver's `rnic_driver::qp::QpState` (which is the PRM's QPC `state` code, from
//! hw-regs): ibverbs numbers the states differently (SQD 4, SQE 5 against the PRM's SQD 7,
//! SQER 4) and names them `RESET` / `SQE`, and verbs users compare with and print the ibverbs
//! values. `QpState::from_driver` is the one conversion.

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
    /// From the value stored by `as u8` (the QP's cached state).
    pub(crate) fn from_u8(v: u8) -> QpState {
        match v {
            0 => QpState::Reset,
            1 => QpState::Init,
            2 => QpState::Rtr,
            3 => QpState::Rts,
            4 => QpState::Sqd,
            5 => QpState::Sqe,
            _ => QpState::Err,
        }
    }

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
