//! Asynchronous events (`ibv_get_async_event`): errors and state changes the device reports
//! outside work completions.

use rnic_hw_regs::eqe::{EqeEvent, EventType};
use std::fmt;

/// An asynchronous event (`enum ibv_event_type`, with the affected object's number), from
/// [`crate::Context::get_async_event`].
///
/// ```
/// use rnic_verbs::AsyncEvent;
///
/// let e = AsyncEvent::CqErr { cqn: 5, syndrome: 1 };
/// assert_eq!(e.to_string(), "IBV_EVENT_CQ_ERR (CQ 0x5, syndrome 1)");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AsyncEvent {
    /// IBV_EVENT_CQ_ERR: a CQ overran (more completions than entries) or failed.
    CqErr {
        /// The CQ.
        cqn: u32,
        /// The device's syndrome (1: overrun, 2: access violation).
        syndrome: u8,
    },
    /// IBV_EVENT_QP_FATAL: a work queue catastrophic error; the QP is in ERR.
    QpFatal {
        /// The QP.
        qpn: u32,
    },
    /// IBV_EVENT_QP_REQ_ERR: an invalid request arrived at the QP (responder error).
    QpReqErr {
        /// The QP.
        qpn: u32,
    },
    /// IBV_EVENT_QP_ACCESS_ERR: a remote access violation at the QP (responder error).
    QpAccessErr {
        /// The QP.
        qpn: u32,
    },
    /// IBV_EVENT_COMM_EST: the first packet arrived at a QP in RTR.
    CommEst {
        /// The QP.
        qpn: u32,
    },
    /// IBV_EVENT_SQ_DRAINED.
    SqDrained {
        /// The QP.
        qpn: u32,
    },
    /// IBV_EVENT_PATH_MIG.
    PathMig {
        /// The QP.
        qpn: u32,
    },
    /// IBV_EVENT_PATH_MIG_ERR.
    PathMigErr {
        /// The QP.
        qpn: u32,
    },
    /// IBV_EVENT_SRQ_ERR.
    SrqErr {
        /// The SRQ.
        srqn: u32,
    },
    /// IBV_EVENT_SRQ_LIMIT_REACHED.
    SrqLimitReached {
        /// The SRQ.
        srqn: u32,
    },
    /// IBV_EVENT_QP_LAST_WQE_REACHED (a QP on an SRQ that went to ERR).
    QpLastWqeReached {
        /// The QP.
        qpn: u32,
    },
    /// IBV_EVENT_PORT_ACTIVE.
    PortActive {
        /// The port.
        port: u8,
    },
    /// IBV_EVENT_PORT_ERR.
    PortErr {
        /// The port.
        port: u8,
    },
    /// IBV_EVENT_DEVICE_FATAL.
    DeviceFatal,
}

impl AsyncEvent {
    /// The event a decoded EQE stands for (completion, command and page events are not
    /// asynchronous events).
    pub(crate) fn from_eqe(e: &EqeEvent) -> Option<AsyncEvent> {
        Some(match *e {
            EqeEvent::CqError { cqn, syndrome } => AsyncEvent::CqErr { cqn, syndrome },
            EqeEvent::Qp { kind, qpn } => match kind {
                EventType::WqCatasError => AsyncEvent::QpFatal { qpn },
                EventType::WqInvalReqError => AsyncEvent::QpReqErr { qpn },
                EventType::WqAccessError => AsyncEvent::QpAccessErr { qpn },
                EventType::CommEst => AsyncEvent::CommEst { qpn },
                EventType::SqDrained => AsyncEvent::SqDrained { qpn },
                EventType::PathMig => AsyncEvent::PathMig { qpn },
                EventType::PathMigFailed => AsyncEvent::PathMigErr { qpn },
                EventType::SrqCatasError => AsyncEvent::SrqErr { srqn: qpn },
                EventType::SrqRqLimit => AsyncEvent::SrqLimitReached { srqn: qpn },
                EventType::SrqLastWqe => AsyncEvent::QpLastWqeReached { qpn },
                _ => return None,
            },
            EqeEvent::PortChange { sub_type, port } => match sub_type {
                4 => AsyncEvent::PortActive { port },
                _ => AsyncEvent::PortErr { port },
            },
            EqeEvent::Other(EventType::InternalError) => AsyncEvent::DeviceFatal,
            _ => return None,
        })
    }

    /// The C name (`IBV_EVENT_CQ_ERR`, ...).
    ///
    /// ```
    /// use rnic_verbs::AsyncEvent;
    ///
    /// assert_eq!(AsyncEvent::QpFatal { qpn: 3 }.name(), "IBV_EVENT_QP_FATAL");
    /// assert_eq!(AsyncEvent::DeviceFatal.name(), "IBV_EVENT_DEVICE_FATAL");
    /// ```
    pub const fn name(&self) -> &'static str {
        match self {
            AsyncEvent::CqErr { .. } => "IBV_EVENT_CQ_ERR",
            AsyncEvent::QpFatal { .. } => "IBV_EVENT_QP_FATAL",
            AsyncEvent::QpReqErr { .. } => "IBV_EVENT_QP_REQ_ERR",
            AsyncEvent::QpAccessErr { .. } => "IBV_EVENT_QP_ACCESS_ERR",
            AsyncEvent::CommEst { .. } => "IBV_EVENT_COMM_EST",
            AsyncEvent::SqDrained { .. } => "IBV_EVENT_SQ_DRAINED",
            AsyncEvent::PathMig { .. } => "IBV_EVENT_PATH_MIG",
            AsyncEvent::PathMigErr { .. } => "IBV_EVENT_PATH_MIG_ERR",
            AsyncEvent::SrqErr { .. } => "IBV_EVENT_SRQ_ERR",
            AsyncEvent::SrqLimitReached { .. } => "IBV_EVENT_SRQ_LIMIT_REACHED",
            AsyncEvent::QpLastWqeReached { .. } => "IBV_EVENT_QP_LAST_WQE_REACHED",
            AsyncEvent::PortActive { .. } => "IBV_EVENT_PORT_ACTIVE",
            AsyncEvent::PortErr { .. } => "IBV_EVENT_PORT_ERR",
            AsyncEvent::DeviceFatal => "IBV_EVENT_DEVICE_FATAL",
        }
    }
}

impl fmt::Display for AsyncEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())?;
        match *self {
            AsyncEvent::CqErr { cqn, syndrome } => write!(f, " (CQ {cqn:#x}, syndrome {syndrome})"),
            AsyncEvent::QpFatal { qpn }
            | AsyncEvent::QpReqErr { qpn }
            | AsyncEvent::QpAccessErr { qpn }
            | AsyncEvent::CommEst { qpn }
            | AsyncEvent::SqDrained { qpn }
            | AsyncEvent::PathMig { qpn }
            | AsyncEvent::PathMigErr { qpn }
            | AsyncEvent::QpLastWqeReached { qpn } => write!(f, " (QP {qpn:#x})"),
            AsyncEvent::SrqErr { srqn } | AsyncEvent::SrqLimitReached { srqn } => {
                write!(f, " (SRQ {srqn:#x})")
            }
            AsyncEvent::PortActive { port } | AsyncEvent::PortErr { port } => {
                write!(f, " (port {port})")
            }
            AsyncEvent::DeviceFatal => Ok(()),
        }
    }
}
