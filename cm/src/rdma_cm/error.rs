//! The one error type of the rdma_cm API: a refused call, named by what refused it.

use crate::error::CmError;
use crate::rdma_cm::id_state::IdState;
use std::net::{IpAddr, SocketAddr};

/// Why an rdma_cm call failed; the id is as it was before the call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A verb the call made failed (creating or moving the QP, opening the device).
    #[error(transparent)]
    Verbs(#[from] rnic_verbs::Error),
    /// The CM state machine refused the request.
    #[error(transparent)]
    Cm(#[from] CmError),
    /// The call does not fit the id's state.
    #[error("{call}: the id is in state {state:?}")]
    InvalidState {
        /// The call (librdmacm's name).
        call: &'static str,
        /// The id's state.
        state: IdState,
    },
    /// Another id listens on this address's port in the port space already (`EADDRINUSE`).
    #[error("{0}: another id listens on this port")]
    AddrInUse(SocketAddr),
    /// A parameter the call cannot use.
    #[error("{call}: {why}")]
    InvalidArgument {
        /// The call.
        call: &'static str,
        /// What is wrong.
        why: String,
    },
    /// No device of this process stands behind the address.
    #[error("no RDMA device for address {0}")]
    NoDevice(IpAddr),
    /// A system call failed (the event channel's eventfd).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
}

/// The result of an rdma_cm call.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The errno librdmacm would leave for this failure (its calls return -1 and set
    /// `errno`): `EADDRINUSE` for [`Error::AddrInUse`], `ENODEV` for [`Error::NoDevice`],
    /// `ENOMEM` when communication IDs run out, the OS error of [`Error::Io`], `EINVAL`
    /// otherwise.
    ///
    /// ```
    /// use rnic_cm::rdma_cm::Error;
    /// assert_eq!(Error::NoDevice("::1".parse().unwrap()).errno(), 19);
    /// assert_eq!(Error::AddrInUse("10.0.0.1:7471".parse().unwrap()).errno(), 98);
    /// ```
    pub fn errno(&self) -> i32 {
        match self {
            Error::AddrInUse(_) | Error::Cm(CmError::AlreadyListening(_)) => libc::EADDRINUSE,
            Error::NoDevice(_) => libc::ENODEV,
            Error::Cm(CmError::NoCommId) => libc::ENOMEM,
            Error::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
            Error::Verbs(_)
            | Error::Cm(_)
            | Error::InvalidState { .. }
            | Error::InvalidArgument { .. } => libc::EINVAL,
        }
    }

    pub(crate) fn invalid(call: &'static str, why: impl Into<String>) -> Error {
        Error::InvalidArgument {
            call,
            why: why.into(),
        }
    }
}
