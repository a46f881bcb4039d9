//! Shared receive queues: CREATE_SRQ / DESTROY_SRQ / QUERY_SRQ and `post_srq_recv`.
//!
//! An SRQ WQE is a 16-byte next segment (`next_wqe_index` at byte 2) followed by data
//! segments. The device consumes posted WQEs along the `next_wqe_index` list, starting at
//! index 0. As rdma-core's mlx5 provider, the driver keeps that list as a free list: it posts
//! into the list's head and never into its tail (a sentinel whose `next_wqe_index` may still
//! change), and a slot whose completion was polled is linked back after the tail. Slots
//! therefore come back in whatever order their completions are polled (QPs on different CQs
//! need not be polled in step), and one slot of the ring is never posted: an SRQ created for
//! `max_wr` receives has a ring of at least `max_wr + 1`.
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

use crate::dma::{read_be32, write_be32};
use crate::error::DriverError;
use crate::pd::Pd;
use crate::wq::{Claim, FREED, LINKED, POSTED, SrqShared, log2_ceil, write_recv};
use crate::wr::{PostError, PostErrorKind, RecvWr};
use rnic_hw_regs::DmaRegion;
use rnic_hw_regs::cmd::{CreateSrqIn, DestroySrqIn, QuerySrqIn};
use rnic_hw_regs::ctx::Srqc;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering, fence};

/// A shared receive queue.
///
/// Two loopback receives through an SRQ: the QP takes its receive WQEs from it.
///
/// ```
/// use rnic_driver::srq::Srq;
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
/// # drop(qp);
/// let srq = Arc::new(Srq::create(&pd, 16, 1)?);
/// let cfg = QpConfig { srq: Some(srq.clone()), ..QpConfig::new(QpType::Rc, cq.clone(), cq.clone()) };
/// let qp = Qp::create(&pd, &cfg)?;
/// # qp.to_init(&InitAttr { access: Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC, ..InitAttr::default() })?;
/// # let av = loopback_av(&hca);
/// # qp.to_rtr(&RtrAttr { path_mtu: Some(Mtu::Mtu1024), dest_qpn: Some(qp.qpn()), av: Some(av), max_dest_rd_atomic: 4, ..RtrAttr::default() })?;
/// # qp.to_rts(&RtsAttr { timeout: 14, retry_cnt: 7, rnr_retry: 7, max_rd_atomic: 4, ..RtsAttr::default() })?;
/// srq.post_recv(&[RecvWr { wr_id: 1, sgl: &[mr.sge(0, 64)] }, RecvWr { wr_id: 2, sgl: &[mr.sge(64, 64)] }])?;
/// qp.post_send(&[SendWr { wr_id: 3, op: SendOp::Send, payload: Payload::Inline(b"abc"), flags: SendFlags::NONE, ud: None }])?;
/// let wc = wait(&cq);
/// assert_eq!((wc.wr_id, wc.opcode, wc.byte_len), (1, WcOpcode::Recv, 3));
/// let err = qp.post_recv(&[]).unwrap_err(); // no RQ of its own: the SRQ is its receive queue
/// assert_eq!(err.kind, PostErrorKind::OpNotSupported);
/// # Ok(()) }
/// ```
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
    /// WQEs posted (the doorbell record's counter).
    pi: AtomicU32,
    /// The free list's head (the next slot to post) and tail (the sentinel); only the
    /// poster holding `claim` touches them.
    head: AtomicU32,
    tail: AtomicU32,
    /// Where the next search for `FREED` slots starts.
    scan: AtomicU32,
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
    ///
    /// ```
    /// use rnic_driver::{DriverError, srq::Srq};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// let srq = Srq::create(&pd, 100, 2)?;
    /// assert!(srq.capacity() >= 100);
    /// assert!(matches!(Srq::create(&pd, 16, 1 << 20), Err(DriverError::InvalidArgument(_))));
    /// # Ok(()) }
    /// ```
    pub fn create(pd: &Arc<Pd>, max_wr: u32, max_sge: u32) -> Result<Srq, DriverError> {
        let hca = pd.hca();
        let g = &hca.caps().general;
        if max_wr == 0 {
            return Err(DriverError::InvalidArgument(
                "max_wr must be at least 1".into(),
            ));
        }
        let stride = (16 + 16 * max_sge.max(1) as usize).next_power_of_two();
        if stride > usize::from(g.max_wqe_sz_rq()) {
            return Err(DriverError::InvalidArgument(format!(
                "SRQ WQEs of {max_sge} SGEs: the device allows {} bytes",
                g.max_wqe_sz_rq()
            )));
        }
        // One more than asked: the free list's tail is never posted.
        let log = log2_ceil(max_wr.max(1).saturating_add(1));
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
        let pas = crate::dma::page_addresses(&buf, ring);
        let out = match hca.cmdq().exec(&cmd, &pas, &mut []) {
            Ok(o) => o,
            Err(e) => {
                return Err(crate::dma::release_after_failed_create(
                    &*bus,
                    buf,
                    e,
                    "CREATE_SRQ",
                ));
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
            // The list as created: 0 -> 1 -> ... -> n - 1.
            head: AtomicU32::new(0),
            tail: AtomicU32::new(n as u32 - 1),
            scan: AtomicU32::new(0),
            claim: AtomicBool::new(false),
            shared: Arc::new(SrqShared {
                wr_id: (0..n).map(|_| AtomicU64::new(0)).collect(),
                len: (0..n).map(|_| AtomicU64::new(0)).collect(),
                state: (0..n).map(|_| AtomicU8::new(LINKED)).collect(),
                freed: AtomicU32::new(0),
            }),
            done: false,
        })
    }

    /// The SRQ number.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// let a = rnic_driver::srq::Srq::create(&pd, 8, 1)?;
    /// let b = rnic_driver::srq::Srq::create(&pd, 8, 1)?;
    /// assert_ne!(a.srqn(), b.srqn());
    /// # Ok(()) }
    /// ```
    pub fn srqn(&self) -> u32 {
        self.srqn
    }

    /// How many receives can be posted at once (the ring size less the list's sentinel).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// let srq = rnic_driver::srq::Srq::create(&pd, 16, 1)?;
    /// assert!(srq.capacity() >= 16); // a ring of at least 17: one slot is the list's sentinel
    /// # Ok(()) }
    /// ```
    pub fn capacity(&self) -> u32 {
        self.mask
    }

    /// SGEs per receive.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// let srq = rnic_driver::srq::Srq::create(&pd, 16, 3)?;
    /// assert!(srq.max_sge() >= 3);
    /// # Ok(()) }
    /// ```
    pub fn max_sge(&self) -> usize {
        self.max_sge
    }

    /// The PD.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// let srq = rnic_driver::srq::Srq::create(&pd, 16, 1)?;
    /// assert_eq!(srq.pd().pdn(), srq.query()?.pd());
    /// # Ok(()) }
    /// ```
    pub fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }

    pub(crate) fn shared(&self) -> &Arc<SrqShared> {
        &self.shared
    }

    /// QUERY_SRQ: the SRQ context as the device reports it.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// let srq = rnic_driver::srq::Srq::create(&pd, 16, 1)?;
    /// let srqc = srq.query()?;
    /// assert_eq!((srqc.pd(), 1 << srqc.log_srq_size()), (pd.pdn(), srq.capacity() + 1));
    /// # Ok(()) }
    /// ```
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

    /// Posts receive work requests (`post_srq_recv`): each into the free list's head, then
    /// the WQE counter into the doorbell record.
    ///
    /// ```
    /// use rnic_driver::srq::Srq;
    /// use rnic_driver::wr::{PostErrorKind, RecvWr};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// # let mr = rnic_driver::mr::Mr::alloc(&pd, 4096, rnic_driver::wr::Access::LOCAL_WRITE)?;
    /// let srq = Srq::create(&pd, 2, 1)?;
    /// let wr = RecvWr { wr_id: 1, sgl: &[mr.sge(0, 64)] };
    /// let wrs = vec![wr; srq.capacity() as usize + 1];
    /// let err = srq.post_recv(&wrs).unwrap_err();
    /// assert_eq!((err.index, err.kind), (srq.capacity() as usize, PostErrorKind::QueueFull));
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn post_recv(&self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        let Some(_claim) = Claim::take(&self.claim) else {
            return Err(PostError {
                index: 0,
                kind: PostErrorKind::Busy,
            });
        };
        if self.pd.hca().is_dead() {
            return Err(PostError {
                index: 0,
                kind: PostErrorKind::DeviceFatal,
            });
        }
        let start = self.pi.load(Ordering::Relaxed);
        let mut pi = start;
        let mut head = self.head.load(Ordering::Relaxed) as usize;
        let mut tail = self.tail.load(Ordering::Relaxed) as usize;
        let mut err = None;
        for (index, wr) in wrs.iter().enumerate() {
            if head == tail {
                self.link_freed(&mut tail);
            }
            if head == tail {
                err = Some(PostError {
                    index,
                    kind: PostErrorKind::QueueFull,
                });
                break;
            }
            let slot = head;
            // SAFETY: slot < size; data segments follow the 16-byte next segment.
            let base = unsafe { self.wqe(slot).add(16) };
            match write_recv(base, self.max_sge, wr.sgl) {
                Ok(len) => {
                    self.shared.wr_id[slot].store(wr.wr_id, Ordering::Relaxed);
                    self.shared.len[slot].store(len, Ordering::Relaxed);
                    self.shared.state[slot].store(POSTED, Ordering::Release);
                    // SAFETY: the WQE is inside the ring; its first dword holds
                    // next_wqe_index in the low 16 bits (bytes 2..4).
                    head = (unsafe { read_be32(self.wqe(slot)) } & self.mask) as usize;
                    pi = pi.wrapping_add(1);
                }
                Err(kind) => {
                    err = Some(PostError { index, kind });
                    break;
                }
            }
        }
        self.head.store(head as u32, Ordering::Relaxed);
        self.tail.store(tail as u32, Ordering::Relaxed);
        if pi != start {
            self.pi.store(pi, Ordering::Relaxed);
            fence(Ordering::Release);
            // SAFETY: the doorbell record is inside the live region.
            unsafe { write_be32(self.dbrec.as_ptr(), pi & 0xFFFF) };
        }
        match err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The address of WQE `slot` (wrapped to the ring).
    fn wqe(&self, slot: usize) -> *mut u8 {
        let slot = slot & self.mask as usize;
        // SAFETY: slot <= mask, so the offset is inside the ring of the live region.
        unsafe { self.base.as_ptr().add(slot * self.stride) }
    }

    /// Links the slots whose completions were polled after the list's `tail`, one search of
    /// the ring at most (only when the list has run out; the poster holds `claim`).
    fn link_freed(&self, tail: &mut usize) {
        let want = self.shared.freed.load(Ordering::Acquire);
        if want == 0 {
            return;
        }
        let mut cursor = self.scan.load(Ordering::Relaxed) as usize;
        let mut linked = 0;
        for _ in 0..=self.mask {
            if linked == want {
                break;
            }
            let i = cursor;
            cursor = (cursor + 1) & self.mask as usize;
            if self.shared.state[i].load(Ordering::Acquire) == FREED {
                self.shared.state[i].store(LINKED, Ordering::Relaxed);
                // SAFETY: inside the ring. The tail was never posted, so the device has not
                // followed its next_wqe_index yet.
                unsafe { write_be32(self.wqe(*tail), i as u32) };
                *tail = i;
                linked += 1;
            }
        }
        self.shared.freed.fetch_sub(linked, Ordering::AcqRel);
        self.scan.store(cursor as u32, Ordering::Relaxed);
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
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// let srq = rnic_driver::srq::Srq::create(&pd, 16, 1)?;
    /// assert!(srq.destroy().is_ok()); // DESTROY_SRQ, ring freed
    /// # Ok(()) }
    /// ```
    pub fn destroy(mut self) -> Result<(), DriverError> {
        self.teardown()
    }
}

drop_by_teardown!(Srq, "SRQ", srqn);
