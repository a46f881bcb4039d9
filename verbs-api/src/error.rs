//! The one error type of the verbs API: every variant says which verb failed and why.

use crate::qp_state::QpState;
use rnic_driver::DriverError;
use rnic_driver::wr::{PollError, PostError, PostErrorKind};
use std::time::Duration;

/// `Result` with [`Error`].
///
/// ```
/// fn first_gid(name: &str) -> rnic_verbs::Result<rnic_verbs::Gid> {
///     rnic_verbs::Context::open(name)?.query_gid(1, 0)
/// }
/// assert!(first_gid("emu0").is_ok());
/// assert!(first_gid("no-such-device").is_err());
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong in a verb.
///
/// `verb` fields name the ibverbs function the call corresponds to (`ibv_post_send`,
/// `ibv_modify_qp`, ...), so an error message points at the man page that explains it:
///
/// ```
/// use rnic_verbs::{Error, QpState};
///
/// let e = Error::InvalidTransition { qpn: 0x11, from: QpState::Reset, to: QpState::Rtr };
/// assert_eq!(e.to_string(), "ibv_modify_qp on QP 0x11: RESET -> RTR is not a valid transition");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The driver (or the device behind it) refused or failed the verb.
    #[error("{verb}: {source}")]
    Driver {
        /// The verb.
        verb: &'static str,
        /// What the driver reported (a command status, a timeout, a bus error, ...).
        #[source]
        source: DriverError,
    },
    /// No device has this name (see [`crate::devices`] for the names there are).
    #[error("ibv_open_device: no such device {name:?}: {why}")]
    NoSuchDevice {
        /// The name asked for.
        name: String,
        /// Why it was not found.
        why: String,
    },
    /// A caller-supplied value is out of range or inconsistent.
    #[error("{verb}: invalid argument: {why}")]
    InvalidArgument {
        /// The verb.
        verb: &'static str,
        /// What is wrong.
        why: String,
    },
    /// A QP transition that the QP state machine does not allow from the current state.
    #[error("ibv_modify_qp on QP {qpn:#x}: {from} -> {to} is not a valid transition")]
    InvalidTransition {
        /// The QP.
        qpn: u32,
        /// The state the QP is in.
        from: QpState,
        /// The state asked for.
        to: QpState,
    },
    /// A QP attribute is missing, or wrong for this QP type or transition.
    #[error("ibv_modify_qp on QP {qpn:#x} ({transition}): attribute {attr}: {why}")]
    QpAttr {
        /// The QP.
        qpn: u32,
        /// The transition (`RST2INIT`, `INIT2RTR`, `RTR2RTS`, `RTS2RTS`).
        transition: &'static str,
        /// The attribute's name as in `struct ibv_qp_attr` (`path_mtu`, `dest_qp_num`,
        /// `ah_attr`, `qkey`, ...).
        attr: &'static str,
        /// What is wrong with it.
        why: String,
    },
    /// Posting to a QP whose state does not accept work requests on that queue.
    #[error("{verb} on QP {qpn:#x}: the QP is in state {state}, {why}")]
    WrongQpState {
        /// `ibv_post_send` or `ibv_post_recv`.
        verb: &'static str,
        /// The QP.
        qpn: u32,
        /// Its state (as last set or queried through this API).
        state: QpState,
        /// Which states the queue accepts work in.
        why: &'static str,
    },
    /// A work request could not be posted. The requests before `index` were posted (ibverbs'
    /// `bad_wr` is `wrs[index]`).
    #[error("{verb} on QP {qpn:#x}: work request {index}: {kind:?}")]
    Post {
        /// `ibv_post_send`, `ibv_post_recv` or `ibv_post_srq_recv`.
        verb: &'static str,
        /// The QP (or SRQ) number.
        qpn: u32,
        /// Index of the first work request not posted.
        index: usize,
        /// What is wrong with it.
        kind: PostErrorKind,
    },
    /// Polling a CQ failed (another thread polls it, or the device wrote an impossible CQE).
    #[error("ibv_poll_cq on CQ {cqn:#x}: {source}")]
    Poll {
        /// The CQ.
        cqn: u32,
        /// What happened.
        #[source]
        source: PollError,
    },
    /// An object cannot be destroyed while others still use it (a CQ a QP uses, a PD with
    /// MRs, ...). Ownership makes this the only way to see it: drop the users first.
    #[error("{verb}: still in use by {users} other handle(s)")]
    InUse {
        /// The destroy verb.
        verb: &'static str,
        /// Other handles (QPs, MRs, clones) holding the object.
        users: usize,
    },
    /// The operation is not available on this device or build.
    #[error("{verb}: not supported: {why}")]
    Unsupported {
        /// The verb.
        verb: &'static str,
        /// What is missing.
        why: String,
    },
    /// An offset and length outside a memory region.
    #[error("{verb}: {len} bytes at offset {offset} are outside the region of {region_len} bytes")]
    OutOfBounds {
        /// The accessor (`MemoryRegion::read`, `MemoryRegion::sge`, ...).
        verb: &'static str,
        /// Offset asked for.
        offset: usize,
        /// Length asked for.
        len: usize,
        /// The region's length.
        region_len: usize,
    },
    /// An I/O error of the connection helper or of a completion channel's file descriptor.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// No MAC for a GID: rnic's own address resolution (a device without a kernel netdev)
    /// got no answer for it, or cannot ask (no address of its family on the port, ...).
    #[error("address resolution of GID {gid}: {why}")]
    Unresolved {
        /// The GID whose MAC was asked for.
        gid: crate::Gid,
        /// Why there is none (names the address that did not answer).
        why: String,
    },
    /// Something did not happen within its timeout.
    #[error("{what}: timed out after {after:?}")]
    Timeout {
        /// What was waited for.
        what: String,
        /// How long.
        after: Duration,
    },
    /// The peer of a connection exchange sent something this side cannot use.
    #[error("connection exchange: {0}")]
    Protocol(String),
    /// A work completion with an error status where the call needed a good one (a
    /// [`crate::MadChannel`] receive flushed because its QP went to ERR).
    #[error("{verb}: work request {wr_id} completed with {status:?}")]
    Completion {
        /// The call.
        verb: &'static str,
        /// The work request's id.
        wr_id: u64,
        /// Its status.
        status: crate::WcStatus,
    },
}

impl Error {
    /// A driver error raised by `verb`.
    pub(crate) fn driver(verb: &'static str) -> impl FnOnce(DriverError) -> Error {
        move |source| match source {
            DriverError::QpAttr {
                qpn,
                transition,
                attr,
                why,
            } => Error::QpAttr {
                qpn,
                transition,
                attr,
                why,
            },
            source => Error::Driver { verb, source },
        }
    }

    /// A driver error raised by a creating verb (`ibv_create_qp`, `ibv_create_srq`): the
    /// driver checks the creation limits, and its refusal is the verb's invalid argument.
    pub(crate) fn create(verb: &'static str) -> impl FnOnce(DriverError) -> Error {
        move |source| match source {
            DriverError::InvalidArgument(why) => Error::invalid(verb, why),
            source => Error::driver(verb)(source),
        }
    }

    /// A post verb's refusal of a work request list, on QP (or SRQ) `qpn`.
    pub(crate) fn post(verb: &'static str, qpn: u32) -> impl FnOnce(PostError) -> Error {
        move |e| Error::Post {
            verb,
            qpn,
            index: e.index,
            kind: e.kind,
        }
    }

    pub(crate) fn invalid(verb: &'static str, why: impl Into<String>) -> Error {
        Error::InvalidArgument {
            verb,
            why: why.into(),
        }
    }

    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let what = what.into();
        move |source| Error::Io { what, source }
    }
}
