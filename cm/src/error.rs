//! The endpoint's errors: [`CmError`] for a caller's request it cannot carry out,
//! [`RecvError`] for a received MAD it did not take (each also counted).

use crate::state::{ConnId, State};
use crate::wire::WireError;

/// Why a call on the endpoint failed; nothing changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CmError {
    /// No such connection (never was, or already gone).
    #[error("no connection {0:?}")]
    UnknownId(ConnId),
    /// The call does not fit the connection's state.
    #[error("connection {id:?} is in state {state:?}")]
    InvalidState {
        /// The connection.
        id: ConnId,
        /// Its state.
        state: State,
    },
    /// Another listener has this service ID.
    #[error("service ID {0:#018x} already has a listener")]
    AlreadyListening(u64),
    /// Nothing listens on this service ID.
    #[error("nothing listens on service ID {0:#018x}")]
    NotListening(u64),
    /// Private data or ARI longer than the message's room.
    #[error("{what} of {len} bytes exceeds {max}")]
    TooLong {
        /// Which field.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The room.
        max: usize,
    },
    /// A parameter out of its field's range (named).
    #[error("{0} out of range")]
    InvalidParam(&'static str),
    /// Every communication ID is in use.
    #[error("no free communication ID")]
    NoCommId,
}

/// Why a received MAD was not taken by the state machine. Each kind has its counter in
/// [`Counters`](crate::Counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecvError {
    /// Not a CM message (`rx_malformed`).
    #[error("malformed CM MAD: {0}")]
    Malformed(#[from] WireError),
    /// A CM MAD this CM does not serve (`rx_unsupported`).
    #[error("unsupported CM MAD: method {method:#04x}, attribute {attr_id:#06x}")]
    Unsupported {
        /// The MAD's method.
        method: u8,
        /// Its attribute.
        attr_id: u16,
    },
    /// For no known connection (`rx_unmatched`).
    #[error("no connection for communication ID {0:#010x}")]
    Unmatched(u32),
    /// A repeat (`rx_duplicates`).
    #[error("duplicate for {0:?}")]
    Duplicate(ConnId),
    /// Not expected in the connection's state (`rx_unexpected`).
    #[error("unexpected for {id:?} in state {state:?}")]
    Unexpected {
        /// The connection.
        id: ConnId,
        /// Its state.
        state: State,
    },
    /// Answered with a REJ (or a failing SIDR REP) of this reason (`rx_rejected`).
    #[error("refused with reason {0}")]
    Refused(u16),
}
