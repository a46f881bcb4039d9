//! The per-QP transport state (requester, completer and responder) that makes RC reliable:
//! the send WQEs in flight, the responder's message in progress and its READ / atomic
//! resources, retry state. Data only: `crate::transport` runs on it.

use std::collections::VecDeque;

use super::{RecvWqe, SendWqe};
use crate::wire::psn::psn_cmp;

/// What kind of message the responder is in the middle of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MsgKind {
    /// SEND (any flavour).
    Send,
    /// RDMA WRITE (any flavour).
    Write,
}

/// The responder's multi-packet message in progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct InMsg {
    /// SEND or WRITE.
    pub kind: MsgKind,
    /// The receive WQE a SEND consumed.
    pub recv: Option<RecvWqe>,
    /// Bytes received so far.
    pub off: u64,
    /// WRITE target from the RETH.
    pub va: u64,
    /// WRITE rkey.
    pub rkey: u32,
    /// WRITE length from the RETH.
    pub dma_len: u64,
}

/// What a READ / atomic resource saved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ResKind {
    /// A READ of `len` bytes at `va` under `rkey`.
    Read {
        /// Remote address.
        va: u64,
        /// R_Key.
        rkey: u32,
        /// Length.
        len: u64,
    },
    /// An atomic and the original value it returned.
    Atomic(u64),
}

/// A responder READ / atomic resource (rxe's `resp_res`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RdRes {
    /// First PSN of the request.
    pub first_psn: u32,
    /// Last PSN it covers (READ: one per response packet).
    pub last_psn: u32,
    /// What it was.
    pub kind: ResKind,
}

/// READ responses being generated: packets `next..n` of the response to a READ of `len`
/// bytes at `va`, the first at PSN `psn0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReadJob {
    /// Remote address of the first response byte.
    pub va: u64,
    /// R_Key.
    pub rkey: u32,
    /// Bytes.
    pub len: u64,
    /// PSN of response packet 0.
    pub psn0: u32,
    /// Packets in all.
    pub n: u32,
    /// The next packet to send.
    pub next: u32,
    /// MSN for the AETHs.
    pub msn: u32,
}

/// Responder state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RespState {
    /// The message in progress.
    pub msg: Option<InMsg>,
    /// A receive WQE a UC message took and lost before it completed (a gap, a bad packet):
    /// UC drops the message without completing the WQE, so the next message uses it (as
    /// rxe keeps its receive WQE at the queue's head until a message completes it).
    pub spare_recv: Option<RecvWqe>,
    /// A PSN sequence NAK was sent and the expected PSN has not arrived since.
    pub nak_sent: bool,
    /// READ and atomic resources, oldest first, at most `2^log_rra_max` (for duplicates).
    pub rd_res: VecDeque<RdRes>,
    /// READ responses left to send, oldest first.
    pub reads: VecDeque<ReadJob>,
    /// A coalesced ACK owed: (PSN, MSN).
    pub ack_pending: Option<(u32, u32)>,
    /// The communication-established event was raised (first packet received in RTR).
    pub comm_est: bool,
}

/// Per-QP transport state (requester, completer and responder).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct QpTransport {
    /// Send WQEs parsed and not yet completed, oldest first.
    pub sq: VecDeque<SendWqe>,
    /// Completed send WQEs kept for their lists' capacity: the SQ engine parses the next
    /// WQEs into them, so a steady stream of WQEs allocates nothing.
    pub spare: Vec<SendWqe>,
    /// Responder state.
    pub resp: RespState,
    /// An RNR NAK asked to resend from `.1` once the clock reaches `.0` (ns).
    pub rnr_wait: Option<(u64, u32)>,
    /// RNR retries left in this attempt (7 = infinite); loaded from the QP at first use.
    pub rnr_left: Option<u8>,
    /// Transport retries left (PSN sequence NAKs).
    pub retry_left: Option<u8>,
    /// When the local ACK timeout fires (device clock, ns), if armed.
    pub retx_at: Option<u64>,
    /// A response gap (lost READ response) already triggered a retry from this PSN.
    pub gap_retry: Option<u32>,
    /// The oldest PSN not yet acknowledged (RC); `None` until the requester first sends,
    /// then advanced by ACKs and responses. The requester keeps at most [`WINDOW`] PSNs
    /// beyond it in flight.
    pub una: Option<u32>,
    /// One past the highest PSN the RC requester has sent; with `una`, the PSNs this QP
    /// holds of the device's budget ([`QpTransport::in_flight`]).
    pub sent_end: Option<u32>,
}

impl QpTransport {
    /// The earliest of the QP's transport timers (RNR wait, local ACK timeout), if armed:
    /// its key in [`crate::resources::TimerQueue`].
    pub(crate) fn deadline(&self) -> Option<u64> {
        match (self.rnr_wait, self.retx_at) {
            (Some((a, _)), Some(b)) => Some(a.min(b)),
            (Some((a, _)), None) => Some(a),
            (None, b) => b,
        }
    }

    /// The RC PSNs sent and not yet acknowledged (at most [`WINDOW`]).
    pub(crate) fn in_flight(&self) -> u32 {
        match (self.sent_end, self.una) {
            (Some(end), Some(una)) => (psn_cmp(end, una) >> 8).clamp(0, WINDOW as i32) as u32,
            _ => 0,
        }
    }
}

/// PSNs the RC requester may have unacknowledged (as rxe: sending stalls beyond 128).
pub(crate) const WINDOW: u32 = 128;

/// Moves the oldest unacknowledged PSN up to `psn` (never back).
pub(crate) fn advance_una(tr: &mut QpTransport, psn: u32) {
    match tr.una {
        Some(u) if psn_cmp(psn, u) <= 0 => {}
        _ => tr.una = Some(psn),
    }
}
