//! Shared receive queues: CREATE_SRQ / DESTROY_SRQ / QUERY_SRQ and `post_srq_recv`.
//!
//! An SRQ WQE is a 16-byte next segment (`next_wqe_index` at byte 2) followed by data
//! segments. The driver links the WQEs into a ring once (WQE i points at i + 1) and posts in
//! ring order: the device consumes WQEs along that list in the order they were posted, and
//! a slot is reused once its completion was polled (a slot still in use at the head makes
//! the SRQ report full, even if later ones are free).
//!
//! One thread posts at a time ([`PostErrorKind::Busy`] otherwise); completions are taken
//! by the CQ pollers of the QPs using the SRQ.
//!
//! ```no_run
//! # fn f(pd: std::sync::Arc<rnic_driver::pd::Pd>, mr: &rnic_driver::mr::Mr) -> Result<(), Box<dyn std::error::Error>> {
//! use rnic_driver::srq::Srq;
//! use rnic_driver::wr::RecvWr;
//!
//! let srq = Srq::create(&pd, 128, 2)?;
//! srq.post_recv(&[RecvWr { wr_id: 9, sgl: &[mr.sge(0, 1024)] }])?;
//! # Ok(()) }
//! ```

use crate::cq::log2_ceil;
use crate::dma::write_be32;
use crate::error::DriverError;
use crate::pd::Pd;
use crate::post::write_recv;
use crate::wr::{PostError, PostErrorKind, RecvWr};
use rnic_hw_regs::DmaRegion;
use rnic_hw_regs::cmd::{CreateSrqIn, DestroySrqIn, QuerySrqIn};
use rnic_hw_regs::ctx::Srqc;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering, fence};

const PAGE: usize = 4096;

/// What CQ pollers need of an SRQ: per slot the wr_id, the posted length and whether it is
/// posted.
#[derive(Debug)]
pub(crate) struct SrqShared {
    wr_id: Box<[AtomicU64]>,
    len: Box<[AtomicU64]>,
    busy: Box<[AtomicBool]>,
}

impl SrqShared {
    /// The wr_id and length of posted slot `idx`.
    #[inline(always)]
    pub(crate) fn peek(&self, idx: u16) -> Option<(u64, u64)> {
        let i = usize::from(idx);
        if !self.busy.get(i)?.load(Ordering::Acquire) {
            return None;
        }
        Some((
            self.wr_id[i].load(Ordering::Relaxed),
            self.len[i].load(Ordering::Relaxed),
        ))
    }

    /// Makes slot `idx` free again.
    #[inline(always)]
    pub(crate) fn free(&self, idx: u16) {
        if let Some(b) = self.busy.get(usize::from(idx)) {
            b.store(false, Ordering::Release);
        }
    }
}

/// A shared receive queue.
#[derive(Debug)]
pub struct Srq {
    pd: Arc<Pd>,
    bus: crate::dma::BusHandle,
    srqn: u32,
    buf: Option<DmaRegion>,
    base: NonNull<u8>,
    dbrec: NonNull<u8>,
    stride: usize,
    mask: u32,
    max_sge: usize,
    pi: AtomicU32,
    claim: AtomicBool,
    shared: Arc<SrqShared>,
    done: bool,
}

// SAFETY: the raw pointers point into the SRQ's own DMA region (held in `buf`); posting is
// serialised by the `claim` flag, completion state is atomic.
unsafe impl Send for Srq {}
// SAFETY: see `Send`.
unsafe impl Sync for Srq {}

impl Srq {
    /// CREATE_SRQ with at least `max_wr` WQEs of `max_sge` SGEs.
    pub fn create(pd: &Arc<Pd>, max_wr: u32, max_sge: u32) -> Result<Srq, DriverError> {
        let hca = pd.hca();
        let g = &hca.caps().general;
        let stride = (16 + 16 * max_sge.max(1) as usize).next_power_of_two();
        if stride > usize::from(g.max_wqe_sz_rq()) {
            return Err(DriverError::InvalidArgument(format!(
                "SRQ WQEs of {max_sge} SGEs: the device allows {} bytes",
                g.max_wqe_sz_rq()
            )));
        }
        let log = log2_ceil(max_wr.max(2));
        if log > g.log_max_srq_sz() || log > 15 {
            return Err(DriverError::InvalidArgument(format!(
                "SRQ of {max_wr} WQEs: the device allows 2^{}",
                g.log_max_srq_sz()
            )));
        }
        let n = 1usize << log;
        let ring = stride * n;
        let bus = crate::dma::BusHandle(hca.bus().clone());
        let buf = bus.alloc_dma(ring + 64)?;
        let base = buf.vaddr.as_ptr();
        for i in 0..n {
            // SAFETY: inside the ring; next_wqe_index is the BE16 at byte 2 of the WQE.
            unsafe { write_be32(base.add(i * stride), ((i + 1) & (n - 1)) as u32) };
        }
        // SAFETY: `ring + 8 <= buf.len`.
        let dbrec = unsafe { base.add(ring) };
        // SAFETY: as above.
        unsafe { write_be32(dbrec, 0) };
        let mut cmd = CreateSrqIn::new_cmd();
        {
            let c: &mut Srqc = cmd.srq_context_entry_mut();
            c.set_log_srq_size(log);
            c.set_log_rq_stride(stride.trailing_zeros() as u8 - 4);
            c.set_pd(pd.pdn());
            c.set_log_page_size(0);
            c.set_dbr_addr(buf.iova + ring as u64);
        }
        let pas: Vec<u8> = (0..ring.div_ceil(PAGE))
            .flat_map(|i| (buf.iova + (i * PAGE) as u64).to_be_bytes())
            .collect();
        let out = match hca.cmdq().exec(&cmd, &pas, &mut []) {
            Ok(o) => o,
            Err(e) => {
                if e.device_answered() {
                    bus.free_dma(buf)?;
                } else {
                    // Not handed back to the bus: the region stays mapped (leaked).
                    let _leaked = buf;
                }
                return Err(e);
            }
        };
        Ok(Srq {
            pd: pd.clone(),
            bus,
            srqn: out.srqn(),
            base: buf.vaddr,
            // SAFETY: inside the region.
            dbrec: unsafe { NonNull::new_unchecked(dbrec) },
            buf: Some(buf),
            stride,
            mask: n as u32 - 1,
            max_sge: (stride - 16) / 16,
            pi: AtomicU32::new(0),
            claim: AtomicBool::new(false),
            shared: Arc::new(SrqShared {
                wr_id: (0..n).map(|_| AtomicU64::new(0)).collect(),
                len: (0..n).map(|_| AtomicU64::new(0)).collect(),
                busy: (0..n).map(|_| AtomicBool::new(false)).collect(),
            }),
            done: false,
        })
    }

    /// The SRQ number.
    pub fn srqn(&self) -> u32 {
        self.srqn
    }

    /// Number of WQEs.
    pub fn capacity(&self) -> u32 {
        self.mask + 1
    }

    /// SGEs per receive.
    pub fn max_sge(&self) -> usize {
        self.max_sge
    }

    /// The PD.
    pub fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }

    pub(crate) fn shared(&self) -> &Arc<SrqShared> {
        &self.shared
    }

    /// QUERY_SRQ: the SRQ context as the device reports it.
    pub fn query(&self) -> Result<Srqc, DriverError> {
        let mut i = QuerySrqIn::new_cmd();
        i.set_srqn(self.srqn);
        Ok(*self
            .pd
            .hca()
            .cmdq()
            .exec(&i, &[], &mut [])?
            .srq_context_entry())
    }

    /// Posts receive work requests (`post_srq_recv`): WQEs in ring order, then the WQE
    /// counter into the doorbell record.
    #[inline]
    pub fn post_recv(&self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        if self.claim.swap(true, Ordering::Acquire) {
            return Err(PostError {
                index: 0,
                kind: PostErrorKind::Busy,
            });
        }
        let start = self.pi.load(Ordering::Relaxed);
        let mut pi = start;
        let mut err = None;
        for (index, wr) in wrs.iter().enumerate() {
            let slot = (pi & self.mask) as usize;
            if self.shared.busy[slot].load(Ordering::Acquire) {
                err = Some(PostError {
                    index,
                    kind: PostErrorKind::QueueFull,
                });
                break;
            }
            // SAFETY: slot < size; data segments follow the 16-byte next segment.
            let base = unsafe { self.base.as_ptr().add(slot * self.stride + 16) };
            match write_recv(base, self.max_sge, wr.sgl) {
                Ok(len) => {
                    self.shared.wr_id[slot].store(wr.wr_id, Ordering::Relaxed);
                    self.shared.len[slot].store(len, Ordering::Relaxed);
                    self.shared.busy[slot].store(true, Ordering::Release);
                    pi = pi.wrapping_add(1);
                }
                Err(kind) => {
                    err = Some(PostError { index, kind });
                    break;
                }
            }
        }
        if pi != start {
            self.pi.store(pi, Ordering::Relaxed);
            fence(Ordering::Release);
            // SAFETY: the doorbell record is inside the live region.
            unsafe { write_be32(self.dbrec.as_ptr(), pi & 0xFFFF) };
        }
        self.claim.store(false, Ordering::Release);
        match err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn teardown(&mut self) -> Result<(), DriverError> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        let mut i = DestroySrqIn::new_cmd();
        i.set_srqn(self.srqn);
        let r = self.pd.hca().cmdq().exec(&i, &[], &mut []);
        crate::dma::release_after_destroy(&*self.bus, &mut self.buf, r, "DESTROY_SRQ", self.srqn)
    }

    /// DESTROY_SRQ and frees the ring.
    pub fn destroy(mut self) -> Result<(), DriverError> {
        self.teardown()
    }
}

impl Drop for Srq {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            log::warn!("destroying SRQ {:#x} on drop: {e}", self.srqn);
        }
    }
}
