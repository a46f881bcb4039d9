//! Work-queue bookkeeping shared by the posters (QP send and receive queues, SRQs) and the
//! CQ poller, as rdma-core's mlx5 provider keeps `struct mlx5_wq`: per WQE slot what was
//! posted (wr_id, length, shape), the producer and consumer counters each side publishes,
//! the one-poster claim, and the receive scatter list both an RQ and an SRQ WQE carry.
//!
//! It imports no object module (QP, SRQ, CQ, posting): they all build on it.

use crate::dma::write_be64;
use crate::wr::{PostErrorKind, Sge, WcOpcode};
use rnic_hw_regs::wqe::{INVALID_LKEY, SendOpcode};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};

/// ceil(log2(n)) for n >= 1.
pub(crate) fn log2_ceil(n: u32) -> u8 {
    // Above 2^31 the next power of two does not fit: 32, which every size check refuses.
    n.max(1)
        .checked_next_power_of_two()
        .map_or(32, u32::trailing_zeros) as u8
}

/// A held claim flag (one poster per queue), released on drop.
pub(crate) struct Claim<'a>(&'a AtomicBool);

impl<'a> Claim<'a> {
    /// Takes `flag`; `None` when another thread holds it.
    #[inline(always)]
    pub(crate) fn take(flag: &'a AtomicBool) -> Option<Claim<'a>> {
        (!flag.swap(true, Ordering::Acquire)).then_some(Claim(flag))
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Send queue tracking shared by the poster and the CQ poller (WQEBB counters, 16 bits
/// significant): per WQE slot the wr_id, the WQE's counter, the counter after it, and
/// the opcode; `pi` is published by the poster, `ci` by the poller. `wr_pi` / `wr_ci` count
/// work requests posted / retired, so that no more than `max_send_wr` are outstanding
/// however few WQEBBs each takes (as mlx5's `sq.head` / `sq.tail` against `max_post`).
#[derive(Debug)]
pub(crate) struct SqTrack {
    pub(crate) slots: Box<[SqSlot]>,
    pub(crate) mask: u16,
    pub(crate) pi: AtomicU32,
    pub(crate) ci: AtomicU32,
    pub(crate) wr_pi: AtomicU32,
    pub(crate) wr_ci: AtomicU32,
}

/// One send WQE slot.
#[derive(Debug, Default)]
pub(crate) struct SqSlot {
    pub(crate) wr_id: AtomicU64,
    /// The slot's [`SentWqe`], one word so that it is stored and loaded in one access.
    sent: AtomicU64,
    /// Posted length (READ and atomics: the local buffer).
    pub(crate) len: AtomicU32,
    /// `wr_pi` after this work request: the poller's `wr_ci` once it retires.
    pub(crate) wr_seq: AtomicU32,
}

impl SqSlot {
    /// Records the WQE posted into this slot (the poster, before it publishes `pi`).
    #[inline(always)]
    pub(crate) fn record(&self, w: SentWqe) {
        self.sent.store(w.0, Ordering::Relaxed);
    }

    /// The WQE recorded in this slot (the poller, after it read `pi`).
    #[inline(always)]
    pub(crate) fn sent(&self) -> SentWqe {
        SentWqe(self.sent.load(Ordering::Relaxed))
    }
}

/// What the poster records of a send WQE for the poller: its counter, the counter after it,
/// the send opcode, and what follows from the opcode (the work completion's opcode, whether
/// the CQE's byte count is the bytes read), as mlx5's `wqe_head` and `wr_data` per slot.
/// One word, so that the poller reads it into one register; the packing is private.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SentWqe(u64);

// Bit positions of the packed word.
const NEXT_SHIFT: u32 = 16;
const OPCODE_SHIFT: u32 = 32;
const WC_OPCODE_SHIFT: u32 = 40;
const READS_SHIFT: u32 = 48;

impl SentWqe {
    /// The WQE at counter `index`, of `opcode`, followed by the WQE at counter `next`.
    #[inline(always)]
    pub(crate) fn new(index: u16, next: u16, opcode: SendOpcode) -> SentWqe {
        // READ and atomics read: their CQE's byte count is what arrived.
        let (wc_opcode, reads) = match opcode {
            SendOpcode::RdmaWrite | SendOpcode::RdmaWriteImm => (WcOpcode::RdmaWrite, false),
            SendOpcode::RdmaRead => (WcOpcode::RdmaRead, true),
            SendOpcode::AtomicCs => (WcOpcode::CompSwap, true),
            SendOpcode::AtomicFa => (WcOpcode::FetchAdd, true),
            _ => (WcOpcode::Send, false),
        };
        SentWqe(
            u64::from(index)
                | (u64::from(next) << NEXT_SHIFT)
                | (u64::from(opcode as u8) << OPCODE_SHIFT)
                | (u64::from(wc_opcode as u8) << WC_OPCODE_SHIFT)
                | (u64::from(reads) << READS_SHIFT),
        )
    }

    /// A UMR WQE at counter `index` that completes as `wc_opcode` (a bind or a local
    /// invalidation: the same send opcode, as mlx5's `wr_data` tells them apart).
    #[inline(always)]
    pub(crate) fn umr(index: u16, next: u16, wc_opcode: WcOpcode) -> SentWqe {
        SentWqe(
            u64::from(index)
                | (u64::from(next) << NEXT_SHIFT)
                | (u64::from(SendOpcode::Umr as u8) << OPCODE_SHIFT)
                | (u64::from(wc_opcode as u8) << WC_OPCODE_SHIFT),
        )
    }

    /// The WQE's counter (`wqe_index`; a CQE's `wqe_counter` names it).
    #[inline(always)]
    pub(crate) fn index(self) -> u16 {
        self.0 as u16
    }

    /// The counter after it: the SQ's `ci` once it retires.
    #[inline(always)]
    pub(crate) fn next(self) -> u16 {
        (self.0 >> NEXT_SHIFT) as u16
    }

    /// The send opcode posted, raw (a good requester CQE's `send_opcode` must match).
    #[inline(always)]
    pub(crate) fn opcode(self) -> u8 {
        (self.0 >> OPCODE_SHIFT) as u8
    }

    /// The work completion's opcode.
    #[inline(always)]
    pub(crate) fn wc_opcode(self) -> WcOpcode {
        match (self.0 >> WC_OPCODE_SHIFT) as u8 {
            1 => WcOpcode::RdmaWrite,
            2 => WcOpcode::RdmaRead,
            3 => WcOpcode::CompSwap,
            4 => WcOpcode::FetchAdd,
            5 => WcOpcode::BindMw,
            6 => WcOpcode::LocalInv,
            _ => WcOpcode::Send,
        }
    }

    /// READ or atomic: a good CQE's byte count is the bytes read.
    #[inline(always)]
    pub(crate) fn reads(self) -> bool {
        (self.0 >> READS_SHIFT) & 1 == 1
    }
}

/// Receive queue tracking: wr_id and posted length per WQE, counters.
#[derive(Debug)]
pub(crate) struct RqTrack {
    pub(crate) wr_id: Box<[AtomicU64]>,
    pub(crate) len: Box<[AtomicU64]>,
    pub(crate) mask: u32,
    pub(crate) pi: AtomicU32,
    pub(crate) ci: AtomicU32,
}

/// What a CQ needs of a QP to complete its work.
#[derive(Debug)]
pub(crate) struct QpShared {
    pub(crate) qpn: u32,
    pub(crate) sq: SqTrack,
    pub(crate) rq: Option<RqTrack>,
    pub(crate) srq: Option<Arc<SrqShared>>,
}

/// SRQ slot states: linked into the device's list and free to post...
pub(crate) const LINKED: u8 = 0;
/// ...posted (the device owns it until its completion is polled)...
pub(crate) const POSTED: u8 = 1;
/// ...or completed and polled, waiting for the poster to link it back.
pub(crate) const FREED: u8 = 2;

/// What CQ pollers need of an SRQ: per slot the wr_id, the posted length and its state.
#[derive(Debug)]
pub(crate) struct SrqShared {
    pub(crate) wr_id: Box<[AtomicU64]>,
    pub(crate) len: Box<[AtomicU64]>,
    pub(crate) state: Box<[AtomicU8]>,
    /// Slots in state `FREED`.
    pub(crate) freed: AtomicU32,
}

impl SrqShared {
    /// The wr_id and length of posted slot `idx`.
    #[inline(always)]
    pub(crate) fn peek(&self, idx: u16) -> Option<(u64, u64)> {
        let i = usize::from(idx);
        if self.state.get(i)?.load(Ordering::Acquire) != POSTED {
            return None;
        }
        Some((
            self.wr_id[i].load(Ordering::Relaxed),
            self.len[i].load(Ordering::Relaxed),
        ))
    }

    /// Slot `idx` completed: the poster may link it back (a slot not posted is left alone).
    #[inline(always)]
    pub(crate) fn free(&self, idx: u16) {
        if let Some(s) = self.state.get(usize::from(idx))
            && s.compare_exchange(POSTED, FREED, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            self.freed.fetch_add(1, Ordering::Release);
        }
    }
}

/// Writes a receive scatter list of at most `max` entries at `base` (terminated by the
/// invalid lkey when shorter); returns the posted length.
#[inline(always)]
pub(crate) fn write_recv(base: *mut u8, max: usize, sgl: &[Sge]) -> Result<u64, PostErrorKind> {
    let n = sgl.iter().filter(|s| s.len != 0).count();
    if n > max {
        return Err(PostErrorKind::TooManySges {
            given: sgl.len(),
            max,
        });
    }
    let mut len = 0u64;
    let mut i = 0;
    for s in sgl.iter().filter(|s| s.len != 0) {
        if s.len > 0x7FFF_FFFF {
            return Err(PostErrorKind::SgeTooLong);
        }
        // SAFETY: `i < max`: the entry is inside the WQE (caller's contract on `base`).
        unsafe {
            write_be64(
                base.add(i * 16),
                (u64::from(s.len) << 32) | u64::from(s.lkey),
            );
            write_be64(base.add(i * 16 + 8), s.addr);
        }
        len += u64::from(s.len);
        i += 1;
    }
    if i < max {
        // SAFETY: as above.
        unsafe {
            write_be64(base.add(i * 16), u64::from(INVALID_LKEY));
            write_be64(base.add(i * 16 + 8), 0);
        }
    }
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the poller reads back is what the poster recorded, and each send opcode brings
    /// its work completion opcode and whether the CQE's byte count is the bytes read.
    #[test]
    fn sent_wqe_reads_back_what_was_recorded() {
        let cases = [
            (SendOpcode::Send, WcOpcode::Send, false),
            (SendOpcode::SendImm, WcOpcode::Send, false),
            (SendOpcode::SendInval, WcOpcode::Send, false),
            (SendOpcode::RdmaWrite, WcOpcode::RdmaWrite, false),
            (SendOpcode::RdmaWriteImm, WcOpcode::RdmaWrite, false),
            (SendOpcode::RdmaRead, WcOpcode::RdmaRead, true),
            (SendOpcode::AtomicCs, WcOpcode::CompSwap, true),
            (SendOpcode::AtomicFa, WcOpcode::FetchAdd, true),
        ];
        let slot = SqSlot::default();
        for (op, wc_op, reads) in cases {
            slot.record(SentWqe::new(0xFFFE, 0x0001, op));
            let w = slot.sent();
            assert_eq!((w.index(), w.next()), (0xFFFE, 0x0001), "{op:?}");
            assert_eq!(w.opcode(), op.raw(), "{op:?}");
            assert_eq!((w.wc_opcode(), w.reads()), (wc_op, reads), "{op:?}");
        }
    }
}
