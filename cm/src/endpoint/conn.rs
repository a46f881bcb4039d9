//! One connection's (or SIDR request's) record: its chapter-12 state, IDs, the peer, and
//! the one timer it runs at a time.

use crate::event::MadAddr;
use crate::state::State;
use crate::time::Instant;
use crate::wire::MAD_LEN;
use core::time::Duration;

/// The one timer a connection runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Timer {
    /// Resend `mad` at `at` while `left` retries remain, then give up.
    Retry {
        at: Instant,
        mad: Box<[u8; MAD_LEN]>,
        left: u8,
        timeout: Duration,
    },
    /// The peer MRAed: give up at `at` unless its answer comes first.
    MraWait { at: Instant },
    /// Leave timewait at `at`.
    Timewait { at: Instant },
}

impl Timer {
    pub(crate) fn at(&self) -> Instant {
        match self {
            Timer::Retry { at, .. } | Timer::MraWait { at } | Timer::Timewait { at } => *at,
        }
    }
}

/// A connection's record.
#[derive(Debug, Clone)]
pub(crate) struct Conn {
    pub(crate) state: State,
    /// The peer's communication ID (0 until known).
    pub(crate) remote_id: u32,
    pub(crate) remote_ca_guid: u64,
    pub(crate) remote_qpn: u32,
    pub(crate) local_qpn: u32,
    /// The transaction ID answers carry (the REQ's, or the DREQ's once one is received).
    pub(crate) tid: u64,
    pub(crate) peer: MadAddr,
    pub(crate) service_id: u64,
    /// The path's timeout (encoded): packet life time + 1, then the REP's ACK timeout;
    /// MRA waits and timewait are made of it.
    pub(crate) av_timeout: u8,
    /// How long to wait for an answer before resending.
    pub(crate) response_timeout: Duration,
    pub(crate) max_cm_retries: u8,
    pub(crate) timer: Option<Timer>,
    /// The last REP, RTU, MRA or DREP sent, which a duplicate of what it answered gets
    /// again.
    pub(crate) last_reply: Option<Box<[u8; MAD_LEN]>>,
    /// In the remote ID / remote QPN tables (duplicate and stale detection).
    pub(crate) in_remote_tables: bool,
}

impl Conn {
    pub(crate) fn new(state: State, peer: MadAddr, tid: u64) -> Conn {
        Conn {
            state,
            remote_id: 0,
            remote_ca_guid: 0,
            remote_qpn: 0,
            local_qpn: 0,
            tid,
            peer,
            service_id: 0,
            av_timeout: 0,
            response_timeout: Duration::ZERO,
            max_cm_retries: 0,
            timer: None,
            last_reply: None,
            in_remote_tables: false,
        }
    }
}
