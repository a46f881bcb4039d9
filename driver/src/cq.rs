//! Completion queues (CREATE_CQ / DESTROY_CQ), polling, arming, and completion channels
//! (an EQ whose interrupt a thread can wait on).
//!
//! The CQE ring lives in DMA memory, every `op_own` initialised to 0xF1 (opcode INVALID,
//! owner 1) as the kernel does; the doorbell record (`set_ci`, arm word) sits on its own
//! cache line after the ring. [`Cq::poll`] takes entry `ci & (N - 1)` when its opcode is not
//! INVALID and its owner bit equals `(ci >> log N) & 1`, reads the body after an acquire
//! fence, validates it against what the driver posted (QPN, opcode, WQE counter, byte count)
//! and turns it into a [`WorkCompletion`]; then a release fence and the new `set_ci`.
//!
//! Concurrency: one thread polls a CQ at a time. A second concurrent [`Cq::poll`] returns
//! [`PollError::Busy`] at once (no spinning); QP creation and destruction, which attach and
//! detach QPs, briefly take the same claim (a poll that meets them returns `Ok(0)`).
//!
//! ```no_run
//! # fn f(hca: std::sync::Arc<rnic_driver::Hca>) -> Result<(), Box<dyn std::error::Error>> {
//! use rnic_driver::cq::{CompChannel, Cq};
//! use rnic_driver::wr::WorkCompletion;
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! let chan = Arc::new(CompChannel::create(&hca, 1)?);
//! let cq = Arc::new(Cq::create(&hca, 256, Some(&chan))?);
//! cq.req_notify(false);
//! let mut cqns = [0u32; 4];
//! if chan.wait(Duration::from_millis(10), &mut cqns)? > 0 {
//!     cq.note_event();
//! }
//! let mut wc = [WorkCompletion::default(); 16];
//! let n = cq.poll(&mut wc)?;
//! for c in &wc[..n] {
//!     println!("wr {} {:?}", c.wr_id, c.status);
//! }
//! # Ok(()) }
//! ```

use crate::cqe::{
    BYTE_CNT, Cqe, GRH, IMM_INVAL_PKEY, OP_OWN, QPN, RQPN, SEND_OPCODE, SYNDROME, VENDOR_ERR_SYND,
    WQE_COUNTER, format_of, opcode_of,
};
use crate::dma::write_be32;
use crate::eq::EventQueue;
use crate::error::DriverError;
use crate::hca::Hca;
use crate::wq::{QpShared, SentWqe, SqSlot, SqTrack, log2_ceil};
use crate::wr::{BadCqe, PollError, WcFlags, WcOpcode, WcStatus, WorkCompletion};
use rnic_hw_regs::DmaRegion;
use rnic_hw_regs::cmd::{CreateCqIn, DestroyCqIn, QueryCqIn};
use rnic_hw_regs::cqe::{
    CQE_FORMAT_COMPRESSED, CQE_OP_OWN_INIT, CQE_SIZE, CqeOpcode, cqe_is_sw_owned,
};
use rnic_hw_regs::ctx::Cqc;
use rnic_hw_regs::doorbell::{
    CQ_ARM_WORD_INIT, CqArmCmd, UAR_CQ_ARM, cq_arm_doorbell, cq_arm_word,
};
use rnic_hw_regs::eqe::EqeEvent;
use std::cell::UnsafeCell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering, fence};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// log2 of a completion channel's EQ entries.
const CHANNEL_LOG_EQ: u8 = 8;

/// Claim states of a CQ's poll state.
const FREE: u8 = 0;
const POLLING: u8 = 1;
const CONTROL: u8 = 2;

/// A completion channel: an EQ that receives the completion events of the CQs created on it
/// and raises interrupt vector `vector` ([`rnic_hw_regs::Bus::wait_irq`],
/// [`rnic_hw_regs::Bus::irq_fd`]).
///
/// ```
/// use rnic_driver::cq::CompChannel;
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
/// # drop((qp, mr));
///
/// let chan = Arc::new(CompChannel::create(&hca, 1)?);
/// let cq = Cq::create(&hca, 16, Some(&chan))?;
/// assert_eq!(cq.query()?.c_eqn(), u32::from(chan.eqn()));
/// assert_eq!(chan.vector(), 1);
/// let mut cqns = [0u32; 4];
/// assert_eq!(chan.wait(Duration::from_millis(1), &mut cqns)?, 0); // CQ not armed
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct CompChannel {
    hca: Arc<Hca>,
    eq: Mutex<Option<EventQueue>>,
    eqn: u8,
    vector: u16,
}

impl CompChannel {
    /// CREATE_EQ with no asynchronous events (completion events go to the EQ a CQ names),
    /// 256 entries, raising `vector`, armed.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let chan = rnic_driver::cq::CompChannel::create(&hca, 2)?;
    /// assert_eq!(chan.vector(), 2);
    /// # Ok(()) }
    /// ```
    pub fn create(hca: &Arc<Hca>, vector: u16) -> Result<CompChannel, DriverError> {
        let uar = hca.uar().ok_or(DriverError::Closed)?;
        let eq = EventQueue::create_on_vector(
            hca.cmdq(),
            &**hca.bus(),
            uar,
            CHANNEL_LOG_EQ,
            &[],
            vector,
        )?;
        Ok(CompChannel {
            hca: hca.clone(),
            eqn: eq.eqn(),
            eq: Mutex::new(Some(eq)),
            vector,
        })
    }

    /// The EQ number.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let chan = rnic_driver::cq::CompChannel::create(&hca, 1)?;
    /// assert_ne!(chan.eqn(), hca.eqn()); // an EQ of its own
    /// # Ok(()) }
    /// ```
    pub fn eqn(&self) -> u8 {
        self.eqn
    }

    /// The interrupt vector.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let chan = rnic_driver::cq::CompChannel::create(&hca, 3)?;
    /// assert_eq!(chan.vector(), 3);
    /// # Ok(()) }
    /// ```
    pub fn vector(&self) -> u16 {
        self.vector
    }

    /// An eventfd that becomes readable when the vector fires, if the bus has one.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let chan = rnic_driver::cq::CompChannel::create(&hca, 1)?;
    /// assert_eq!(chan.fd(), None); // the emulated bus has no eventfd (a VfioBus has)
    /// # Ok(()) }
    /// ```
    pub fn fd(&self) -> Option<i32> {
        self.hca.bus().irq_fd(self.vector)
    }

    /// Takes pending completion events into `cqns` (CQ numbers, one per event) and re-arms
    /// the EQ; waits up to `timeout` for the interrupt when none is pending. Returns how
    /// many CQ numbers were written (events beyond `cqns.len()` stay queued).
    ///
    /// ```
    /// use rnic_driver::cq::CompChannel;
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::loopback(Arc::new(dev.bus()))?;
    /// # let av = loopback_av(&hca);
    /// # drop(cq);
    /// let chan = Arc::new(CompChannel::create(&hca, 1)?);
    /// let cq = Arc::new(Cq::create(&hca, 16, Some(&chan))?);
    /// let qp = Qp::create(&pd, &QpConfig::new(QpType::Rc, cq.clone(), cq.clone()))?;
    /// # qp.to_init(&InitAttr::default())?;
    /// # qp.to_rtr(&RtrAttr { path_mtu: Some(Mtu::Mtu1024), dest_qpn: Some(qp.qpn()), av: Some(av), ..RtrAttr::default() })?;
    /// # qp.to_rts(&RtsAttr { timeout: 14, retry_cnt: 7, rnr_retry: 7, ..RtsAttr::default() })?;
    /// cq.req_notify(false);
    /// let wr = SendWr { wr_id: 1, op: SendOp::Write { raddr: mr.addr(), rkey: mr.rkey() }, payload: Payload::Inline(b"x"), flags: SendFlags::SIGNALED, ud: None };
    /// qp.post_send(&[wr])?;
    /// let mut cqns = [0u32; 4];
    /// assert_eq!(chan.wait(Duration::from_secs(10), &mut cqns)?, 1);
    /// assert_eq!(cqns[0], cq.cqn());
    /// cq.note_event();
    /// # Ok(()) }
    /// ```
    pub fn wait(&self, timeout: Duration, cqns: &mut [u32]) -> Result<usize, DriverError> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let n = self.drain(cqns);
            if n > 0 || cqns.is_empty() {
                return Ok(n);
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            // An interrupt counted for events already drained wakes us early: go round.
            if left.is_zero() || !self.hca.bus().wait_irq(self.vector, left)? {
                return Ok(0);
            }
        }
    }

    fn drain(&self, cqns: &mut [u32]) -> usize {
        let mut g = self.eq.lock().unwrap_or_else(|e| e.into_inner());
        let Some(eq) = g.as_mut() else { return 0 };
        let mut n = 0;
        let mut seen = 0;
        // At most one lap of the EQ per call.
        while n < cqns.len() && seen < 1 << CHANNEL_LOG_EQ {
            match eq.next_event() {
                Some(Ok(EqeEvent::Completion { cqn })) => {
                    cqns[n] = cqn;
                    n += 1;
                }
                Some(other) => log::warn!("completion EQ {}: unexpected event {other:?}", self.eqn),
                None => break,
            }
            seen += 1;
        }
        if seen > 0 {
            eq.doorbell(&**self.hca.bus());
        }
        n
    }
}

impl Drop for CompChannel {
    fn drop(&mut self) {
        let eq = self.eq.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(eq) = eq {
            if let Err(e) = eq.destroy(self.hca.cmdq(), &**self.hca.bus()) {
                log::warn!("DESTROY_EQ of completion channel {}: {e}", self.eqn);
            }
        }
    }
}

/// A QP queue attached to a CQ.
#[derive(Debug)]
struct Attached {
    qpn: u32,
    shared: Arc<QpShared>,
    send: bool,
    recv: bool,
}

/// What only the poller touches.
#[derive(Debug)]
struct PollState {
    ci: u32,
    qps: Vec<Attached>,
    last: usize,
}

/// A completion queue.
///
/// A loopback RC QP writes into its own memory region; the requester completion is polled:
///
/// ```
///
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let Fixture { hca, pd, cq, qp, mr } = Fixture::loopback(Arc::new(dev.bus()))?;
/// let data = mr.sge(0, 5);
/// mr.write(0, b"hello");
/// let wr = SendWr {
///     wr_id: 7,
///     op: SendOp::Write { raddr: mr.addr() + 100, rkey: mr.rkey() },
///     payload: Payload::Sgl(&[data]),
///     flags: SendFlags::SIGNALED,
///     ud: None,
/// };
/// qp.post_send(&[wr])?;
/// let wc = wait(&cq); // polls `cq.poll` with a deadline
/// assert_eq!((wc.wr_id, wc.status, wc.opcode), (7, WcStatus::Success, WcOpcode::RdmaWrite));
/// assert_eq!(cq.consumer_index(), 1);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Cq {
    hca: Arc<Hca>,
    channel: Option<Arc<CompChannel>>,
    bus: crate::dma::BusHandle,
    buf: Option<DmaRegion>,
    cqes: NonNull<u8>,
    dbrec: NonNull<u8>,
    cqn: u32,
    log_size: u8,
    uar_off: usize,
    claim: AtomicU8,
    st: UnsafeCell<PollState>,
    ci_mirror: AtomicU32,
    arm_sn: AtomicU32,
    done: bool,
}

// SAFETY: the raw pointers point into the CQ's own DMA region (valid while `buf` is held);
// the poll state in the `UnsafeCell` is only touched by the holder of the `claim` flag
// (acquired with an acquire CAS, released with a release store), so moving the handle or
// sharing it between threads creates no data race.
unsafe impl Send for Cq {}
// SAFETY: see `Send`.
unsafe impl Sync for Cq {}

impl Cq {
    /// Creates a CQ of at least `min_cqes` entries (a power of two), its completion events
    /// going to `channel` (else to the HCA's asynchronous EQ, where an armed CQ's events come
    /// out of [`Hca::process_events`]).
    ///
    /// ```
    /// use rnic_driver::{DriverError, cq::Cq};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let cq = Cq::create(&hca, 100, None)?;
    /// assert_eq!(cq.capacity(), 128); // rounded up to a power of two
    /// let too_big = Cq::create(&hca, 1 << 30, None).unwrap_err();
    /// assert!(matches!(too_big, DriverError::InvalidArgument(_)));
    /// # Ok(()) }
    /// ```
    pub fn create(
        hca: &Arc<Hca>,
        min_cqes: u32,
        channel: Option<&Arc<CompChannel>>,
    ) -> Result<Cq, DriverError> {
        let log_size = log2_ceil(min_cqes.max(2));
        let max = hca.caps().general.log_max_cq_sz();
        if log_size > max {
            return Err(DriverError::InvalidArgument(format!(
                "CQ of {min_cqes} entries: the device allows 2^{max}"
            )));
        }
        let uar = hca.uar().ok_or(DriverError::Closed)?;
        let bus = crate::dma::BusHandle(hca.bus().clone());
        let ring = CQE_SIZE << log_size;
        let buf = bus.alloc_dma(ring + 64)?;
        let base = buf.vaddr.as_ptr();
        for i in 0..1usize << log_size {
            // SAFETY: `i * 64 + 63 < ring <= buf.len`; volatile, no reference.
            unsafe {
                base.add(i * CQE_SIZE + OP_OWN)
                    .write_volatile(CQE_OP_OWN_INIT)
            };
        }
        // SAFETY: `ring` is 64-byte aligned and `ring + 8 <= buf.len`.
        let dbrec = unsafe { base.add(ring) };
        // SAFETY: as above.
        unsafe {
            write_be32(dbrec, 0);
            write_be32(dbrec.add(4), CQ_ARM_WORD_INIT);
        }
        let mut cmd = CreateCqIn::new_cmd();
        {
            let c: &mut Cqc = cmd.cq_context_mut();
            c.set_cqe_sz(0);
            c.set_log_cq_size(log_size);
            c.set_uar_page(uar.index());
            c.set_c_eqn(u32::from(channel.map_or(hca.eqn(), |c| c.eqn())));
            c.set_log_page_size(0);
            c.set_page_offset(0);
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
                    "CREATE_CQ",
                ));
            }
        };
        let cqes = buf.vaddr;
        Ok(Cq {
            hca: hca.clone(),
            channel: channel.cloned(),
            uar_off: uar.bar_offset(),
            bus,
            cqes,
            // SAFETY: inside the region (see above), so not null.
            dbrec: unsafe { NonNull::new_unchecked(dbrec) },
            buf: Some(buf),
            cqn: out.cqn(),
            log_size,
            claim: AtomicU8::new(FREE),
            st: UnsafeCell::new(PollState {
                ci: 0,
                qps: Vec::new(),
                last: 0,
            }),
            ci_mirror: AtomicU32::new(0),
            arm_sn: AtomicU32::new(0),
            done: false,
        })
    }

    /// The CQ number.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let a = rnic_driver::cq::Cq::create(&hca, 16, None)?;
    /// let b = rnic_driver::cq::Cq::create(&hca, 16, None)?;
    /// assert_ne!(a.cqn(), b.cqn());
    /// # Ok(()) }
    /// ```
    pub fn cqn(&self) -> u32 {
        self.cqn
    }

    /// Number of entries.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let cq = rnic_driver::cq::Cq::create(&hca, 1, None)?;
    /// assert_eq!(cq.capacity(), 2); // at least two entries
    /// # Ok(()) }
    /// ```
    pub fn capacity(&self) -> u32 {
        1 << self.log_size
    }

    /// The consumer index: CQEs consumed so far (a wrapping 32-bit counter; the doorbell
    /// record's `set_ci` carries its low 24 bits).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let cq = rnic_driver::cq::Cq::create(&hca, 16, None)?;
    /// assert_eq!(cq.consumer_index(), 0); // nothing consumed yet
    /// # Ok(()) }
    /// ```
    pub fn consumer_index(&self) -> u32 {
        self.ci_mirror.load(Ordering::Relaxed)
    }

    /// The completion channel, if any.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let cq = rnic_driver::cq::Cq::create(&hca, 16, None)?;
    /// assert!(cq.channel().is_none());
    /// # Ok(()) }
    /// ```
    pub fn channel(&self) -> Option<&Arc<CompChannel>> {
        self.channel.as_ref()
    }

    /// The CQE ring in host memory (`capacity() * 64` bytes): for diagnostics and
    /// fault-injection tests. The device writes it at any time; touch it only with volatile
    /// accesses, and only while the CQ exists.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let cq = rnic_driver::cq::Cq::create(&hca, 16, None)?;
    /// let (ring, bytes) = cq.cqe_ring();
    /// assert_eq!(bytes, 16 * 64);
    /// // SAFETY: inside the live ring; volatile. Every entry starts as INVALID, owner 1.
    /// assert_eq!(unsafe { ring.as_ptr().add(63).read_volatile() }, 0xF1);
    /// # Ok(()) }
    /// ```
    pub fn cqe_ring(&self) -> (NonNull<u8>, usize) {
        (self.cqes, CQE_SIZE << self.log_size)
    }

    /// QUERY_CQ: the CQ context as the device reports it.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let cq = rnic_driver::cq::Cq::create(&hca, 64, None)?;
    /// assert_eq!(cq.query()?.log_cq_size(), 6);
    /// # Ok(()) }
    /// ```
    pub fn query(&self) -> Result<Cqc, DriverError> {
        let mut i = QueryCqIn::new_cmd();
        i.set_cqn(self.cqn);
        Ok(*self.hca.cmdq().exec(&i, &[], &mut [])?.cq_context())
    }

    /// Requests a completion event on the next completion (or, with `solicited_only`, the
    /// next solicited or error completion): the arm word (sequence number, command, consumer
    /// index) into the doorbell record, then the 64-bit `{arm word, cqn}` doorbell at
    /// UAR + 0x20. The event arrives on the CQ's [`CompChannel`].
    ///
    /// A CQ without a channel reports its completion event to the HCA's event queue:
    ///
    /// ```
    ///
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::loopback(Arc::new(dev.bus()))?;
    /// cq.req_notify(false);
    /// let wr = SendWr { wr_id: 1, op: SendOp::Write { raddr: mr.addr(), rkey: mr.rkey() }, payload: Payload::Inline(b"x"), flags: SendFlags::SIGNALED, ud: None };
    /// qp.post_send(&[wr])?;
    /// assert_eq!(wait(&cq).status, WcStatus::Success);
    /// let events = hca.process_events()?;
    /// assert_eq!(events.len(), 1); // the completion event of `cq`
    /// cq.note_event();
    /// # Ok(()) }
    /// ```
    pub fn req_notify(&self, solicited_only: bool) {
        let cmd = if solicited_only {
            CqArmCmd::Solicited
        } else {
            CqArmCmd::NextCompletion
        };
        let sn = self.arm_sn.load(Ordering::Relaxed);
        let ci = self.ci_mirror.load(Ordering::Acquire);
        let word = cq_arm_word(sn, cmd, ci);
        // SAFETY: the doorbell record is inside the CQ's live region, 4-byte aligned.
        unsafe { write_be32(self.dbrec.as_ptr().add(4), word) };
        fence(Ordering::SeqCst);
        self.bus
            .write64(self.uar_off + UAR_CQ_ARM, cq_arm_doorbell(word, self.cqn));
    }

    /// Counts a completion event delivered for this CQ (the arm sequence number moves on,
    /// as `ibv_get_cq_event` does through the provider).
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::loopback(Arc::new(dev.bus()))?;
    /// # let wr = SendWr { wr_id: 1, op: SendOp::Write { raddr: mr.addr(), rkey: mr.rkey() }, payload: Payload::Inline(b"x"), flags: SendFlags::SIGNALED, ud: None };
    /// for _ in 0..2 {
    ///     cq.req_notify(false);
    ///     qp.post_send(&[wr])?;
    ///     wait(&cq);
    ///     assert_eq!(hca.process_events()?.len(), 1); // one event per arming
    ///     cq.note_event(); // taken: the next arm carries the next sequence number
    /// }
    /// # Ok(()) }
    /// ```
    pub fn note_event(&self) {
        self.arm_sn.fetch_add(1, Ordering::Relaxed);
    }

    /// Runs `f` on the poll state with the claim held for a control operation (spinning
    /// with `yield_now` while a poll holds it: not on the data path).
    fn control<R>(&self, f: impl FnOnce(&mut PollState, &Self) -> R) -> R {
        while self
            .claim
            .compare_exchange(FREE, CONTROL, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::thread::yield_now();
        }
        // SAFETY: the claim is held (see the `Send` impl).
        let r = f(unsafe { &mut *self.st.get() }, self);
        self.claim.store(FREE, Ordering::Release);
        r
    }

    /// Attaches a QP's send and/or receive queue (QP creation).
    pub(crate) fn attach(&self, shared: &Arc<QpShared>, send: bool, recv: bool) {
        self.control(|st, _| {
            if let Some(a) = st.qps.iter_mut().find(|a| a.qpn == shared.qpn) {
                a.send |= send;
                a.recv |= recv;
                a.shared = shared.clone();
            } else {
                st.qps.push(Attached {
                    qpn: shared.qpn,
                    shared: shared.clone(),
                    send,
                    recv,
                });
            }
        });
    }

    /// Removes the CQEs of QP `qpn` from the ring (moving later CQEs up, as rdma-core's
    /// `__mlx5_cq_clean` does; SRQ receives they held are freed) and, with `detach`, forgets
    /// the QP. QP destruction and reset call it.
    pub(crate) fn clean(&self, qpn: u32, detach: bool) {
        self.control(|st, cq| {
            let n = 1u32 << cq.log_size;
            let mut pi = st.ci;
            while pi.wrapping_sub(st.ci) < n && cq.owned_at(pi) {
                pi = pi.wrapping_add(1);
            }
            let srq = st
                .qps
                .iter()
                .find(|a| a.qpn == qpn)
                .and_then(|a| a.shared.srq.clone());
            let mut freed = 0u32;
            let mut idx = pi;
            while idx != st.ci {
                idx = idx.wrapping_sub(1);
                let e = cq.cqe_at(idx);
                if e.get(QPN) == qpn {
                    if let (Some(srq), true) = (&srq, is_responder(opcode_of(e.op_own()))) {
                        srq.free(e.get(WQE_COUNTER));
                    }
                    freed += 1;
                } else if freed > 0 {
                    // SAFETY: both entries are owned by software (between ci and the first
                    // hardware-owned entry).
                    unsafe { cq.cqe_at(idx.wrapping_add(freed)).move_from(e) };
                }
            }
            if freed > 0 {
                st.ci = st.ci.wrapping_add(freed);
                fence(Ordering::Release);
                // SAFETY: the doorbell record is inside the region.
                unsafe { write_be32(cq.dbrec.as_ptr(), st.ci & 0xFF_FFFF) };
                cq.ci_mirror.store(st.ci, Ordering::Release);
            }
            if detach {
                st.qps.retain(|a| a.qpn != qpn);
                st.last = 0;
            }
        });
    }

    /// The entry consumer index `ci` names.
    #[inline(always)]
    fn cqe_at(&self, ci: u32) -> Cqe {
        let idx = (ci & ((1u32 << self.log_size) - 1)) as usize;
        // SAFETY: `idx < 2^log_size`, so the entry is inside the ring, which lives (and
        // stays 64-byte aligned) as long as `self`.
        unsafe { Cqe::at(self.cqes.as_ptr().add(idx * CQE_SIZE)) }
    }

    #[inline(always)]
    fn owned_at(&self, ci: u32) -> bool {
        cqe_is_sw_owned(self.cqe_at(ci).op_own(), ci, self.log_size)
    }

    /// Polls up to `wc.len()` completions into `wc`; returns how many. An impossible CQE
    /// is returned as [`PollError::BadCqe`] (consumed, so the next poll goes on), after the
    /// good completions before it were returned by an earlier call.
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::loopback(Arc::new(dev.bus()))?;
    /// qp.post_send(&[SendWr { wr_id: 3, op: SendOp::Write { raddr: mr.addr(), rkey: mr.rkey() }, payload: Payload::Inline(b"abc"), flags: SendFlags::SIGNALED, ud: None }])?;
    /// let mut wc = [WorkCompletion::default(); 16];
    /// let deadline = Instant::now() + Duration::from_secs(10);
    /// let n = loop {
    ///     match cq.poll(&mut wc)? {
    ///         0 if Instant::now() < deadline => std::thread::yield_now(),
    ///         n => break n,
    ///     }
    /// };
    /// assert_eq!((n, wc[0].wr_id, wc[0].status), (1, 3, WcStatus::Success));
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn poll(&self, wc: &mut [WorkCompletion]) -> Result<usize, PollError> {
        self.with_poll_claim(|st| self.poll_claimed(st, wc))
    }

    /// Runs `f` with the poll state, holding the poll claim: 0 polled while a control
    /// operation (clean) holds it, `Busy` while another poller does.
    #[inline(always)]
    fn with_poll_claim(
        &self,
        f: impl FnOnce(&mut PollState) -> Result<usize, PollError>,
    ) -> Result<usize, PollError> {
        match self
            .claim
            .compare_exchange(FREE, POLLING, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => {}
            Err(CONTROL) => return Ok(0),
            Err(_) => return Err(PollError::Busy),
        }
        // SAFETY: the claim is held.
        let st = unsafe { &mut *self.st.get() };
        let r = f(st);
        self.claim.store(FREE, Ordering::Release);
        r
    }

    #[inline]
    fn poll_claimed(
        &self,
        st: &mut PollState,
        wc: &mut [WorkCompletion],
    ) -> Result<usize, PollError> {
        if self.hca.is_dead() {
            return Ok(flush_outstanding(st, wc));
        }
        self.drain(st, wc.len(), |st, cqe, op_own, n| {
            parse(st, cqe, op_own, &mut wc[n])
        })
    }

    /// Takes up to `max` software-owned CQEs in order, handing each to `each` (with the
    /// poll state, the entry, its `op_own` byte and how many were taken before it), then
    /// writes the consumer index once. An entry `each` refuses is consumed and returned as
    /// [`PollError::BadCqe`] when it is the first, else left for the next call.
    #[inline(always)]
    fn drain(
        &self,
        st: &mut PollState,
        max: usize,
        mut each: impl FnMut(&mut PollState, Cqe, u8, usize) -> Result<(), (u32, BadCqe)>,
    ) -> Result<usize, PollError> {
        let start = st.ci;
        let mut n = 0;
        let mut res = Ok(());
        while n < max {
            let cqe = self.cqe_at(st.ci);
            let op_own = cqe.op_own();
            if !cqe_is_sw_owned(op_own, st.ci, self.log_size) {
                break;
            }
            // The body only after the owner byte says the entry is ours.
            fence(Ordering::Acquire);
            match each(st, cqe, op_own, n) {
                Ok(()) => {
                    n += 1;
                    st.ci = st.ci.wrapping_add(1);
                }
                Err((qpn, what)) => {
                    if n == 0 {
                        res = Err(PollError::BadCqe {
                            ci: st.ci,
                            qpn,
                            what,
                        });
                        st.ci = st.ci.wrapping_add(1);
                    }
                    break;
                }
            }
        }
        if st.ci != start {
            // Every read of the consumed entries before the device may reuse them.
            fence(Ordering::Release);
            // SAFETY: the doorbell record is inside the region.
            unsafe { write_be32(self.dbrec.as_ptr(), st.ci & 0xFF_FFFF) };
            self.ci_mirror.store(st.ci, Ordering::Release);
        }
        res.map(|()| n)
    }

    /// Polls up to `out.len()` CQEs of a CQ no QP uses (the raw Ethernet queues' own CQs,
    /// see [`crate::eth`]), handing each to `each` with its `op_own` byte and the completion
    /// to fill; `each` refuses an impossible entry with the QPN field and what is wrong.
    /// Once the device is dead its ring is not read (what it writes is not trusted):
    /// `flush(out)` fills `out` with flush completions of the queue's outstanding work
    /// instead (the queue tracks its WQEs; this CQ does not), under the same poll claim.
    pub(crate) fn poll_raw<T>(
        &self,
        out: &mut [T],
        mut each: impl FnMut(Cqe, u8, &mut T) -> Result<(), (u32, BadCqe)>,
        flush: impl FnOnce(&mut [T]) -> usize,
    ) -> Result<usize, PollError> {
        if self.hca.is_dead() {
            return self.with_poll_claim(|_| Ok(flush(out)));
        }
        let max = out.len();
        self.with_poll_claim(|st| {
            self.drain(st, max, |_, cqe, op_own, n| each(cqe, op_own, &mut out[n]))
        })
    }

    fn teardown(&mut self) -> Result<(), DriverError> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        let mut i = DestroyCqIn::new_cmd();
        i.set_cqn(self.cqn);
        let r = self.hca.cmdq().exec(&i, &[], &mut []);
        crate::dma::release_after_destroy(&*self.bus, &mut self.buf, r, "DESTROY_CQ", self.cqn)
    }

    /// DESTROY_CQ and frees the ring (leaked if the device did not answer).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let cq = rnic_driver::cq::Cq::create(&hca, 16, None)?;
    /// assert!(cq.destroy().is_ok()); // DESTROY_CQ, ring freed
    /// # Ok(()) }
    /// ```
    pub fn destroy(mut self) -> Result<(), DriverError> {
        self.teardown()
    }
}

drop_by_teardown!(Cq, "CQ", cqn);

// CQE opcodes (`op_own` 7:4) as raw nibbles: the poll path matches the nibble directly (a
// jump table), which measured faster than decoding it into `Option<CqeOpcode>` first.
const OP_REQ: u8 = CqeOpcode::Req.raw();
const OP_REQ_ERR: u8 = CqeOpcode::ReqErr.raw();
const OP_RESP_WR_IMM: u8 = CqeOpcode::RespWrImm.raw();
const OP_RESP_SEND: u8 = CqeOpcode::RespSend.raw();
const OP_RESP_SEND_IMM: u8 = CqeOpcode::RespSendImm.raw();
const OP_RESP_SEND_INV: u8 = CqeOpcode::RespSendInv.raw();
const OP_RESP_ERR: u8 = CqeOpcode::RespErr.raw();

/// Whether a CQE of raw `opcode` completes a receive (responder CQEs, the error one
/// included).
#[inline(always)]
fn is_responder(opcode: u8) -> bool {
    matches!(
        opcode,
        OP_RESP_WR_IMM | OP_RESP_SEND | OP_RESP_SEND_IMM | OP_RESP_SEND_INV | OP_RESP_ERR
    )
}

/// Turns `cqe` into the work completion `out`, retiring the WQEs it completes; on an
/// impossible CQE returns the QPN and what is wrong (nothing retired, `out` untouched).
///
/// As rdma-core's `mlx5_parse_cqe`: the QP is found, then the raw opcode picks a good
/// requester, a good responder or an error completion, the last out of line. Each path
/// writes `out` itself once it knows the completion is good, so that no completion is
/// built apart and copied.
#[inline(always)]
fn parse(
    st: &mut PollState,
    cqe: Cqe,
    op_own: u8,
    out: &mut WorkCompletion,
) -> Result<(), (u32, BadCqe)> {
    let (qpn, send_op) = cqe.get2(QPN, SEND_OPCODE);
    if format_of(op_own) == CQE_FORMAT_COMPRESSED {
        return Err((qpn, BadCqe::Compressed));
    }
    let a = match st.qps.get(st.last) {
        Some(a) if a.qpn == qpn => a,
        _ => match st.qps.iter().position(|a| a.qpn == qpn) {
            Some(i) => {
                st.last = i;
                &st.qps[i]
            }
            None => return Err((qpn, BadCqe::UnknownQpn)),
        },
    };
    let r = match opcode_of(op_own) {
        OP_REQ => good_req(a, cqe, send_op, out),
        op @ (OP_RESP_WR_IMM | OP_RESP_SEND | OP_RESP_SEND_IMM | OP_RESP_SEND_INV) => {
            good_resp(a, cqe, op, out)
        }
        op @ (OP_REQ_ERR | OP_RESP_ERR) => error_cqe(a, cqe, op, out),
        other => Err(BadCqe::UnknownOpcode(other)),
    };
    r.map_err(|what| (qpn, what))
}

/// A dead device's completions, made by the driver: every work request still outstanding on
/// the QPs attached to this CQ (send queues of which it is the send CQ, receive queues of
/// which it is the receive CQ), oldest first, as a `WR_FLUSH_ERR` completion, as the device
/// would have flushed them had it moved the QPs to the error state. The ring is not read:
/// what a dead device writes there is not trusted. Receives posted to an SRQ stay with the
/// SRQ (the verbs rule: an SRQ's WQEs are not flushed by a QP's error).
#[cold]
#[inline(never)]
fn flush_outstanding(st: &mut PollState, wc: &mut [WorkCompletion]) -> usize {
    let mut n = 0;
    for a in &st.qps {
        let flushed = |wr_id, opcode| WorkCompletion {
            wr_id,
            status: WcStatus::WrFlushErr,
            opcode,
            qp_num: a.qpn,
            ..WorkCompletion::default()
        };
        let sq = &a.shared.sq;
        while a.send && n < wc.len() {
            let ci = sq.ci.load(Ordering::Relaxed) as u16;
            if ci == sq.pi.load(Ordering::Acquire) as u16 {
                break;
            }
            let slot = &sq.slots[usize::from(ci & sq.mask)];
            let w = slot.sent();
            if w.index() != ci {
                break; // not a WQE the poster recorded: nothing more to flush here
            }
            wc[n] = flushed(slot.wr_id.load(Ordering::Relaxed), w.wc_opcode());
            n += 1;
            retire_sent(sq, slot, w);
        }
        let rq = a
            .shared
            .rq
            .as_ref()
            .filter(|_| a.recv && a.shared.srq.is_none());
        while let Some(rq) = rq {
            let ci = rq.ci.load(Ordering::Relaxed);
            if n == wc.len() || ci == rq.pi.load(Ordering::Acquire) {
                break;
            }
            wc[n] = flushed(
                rq.wr_id[(ci & rq.mask) as usize].load(Ordering::Relaxed),
                WcOpcode::Recv,
            );
            n += 1;
            rq.ci.store(ci.wrapping_add(1), Ordering::Release);
        }
    }
    n
}

/// The send queue of `a` and the slot of the WQE at `counter`, which must be outstanding.
#[inline(always)]
fn sent(a: &Attached, counter: u16) -> Result<(&SqTrack, &SqSlot, SentWqe), BadCqe> {
    if !a.send {
        return Err(BadCqe::UnknownQpn);
    }
    let sq = &a.shared.sq;
    let pi = sq.pi.load(Ordering::Acquire) as u16;
    let ci = sq.ci.load(Ordering::Relaxed) as u16;
    if counter.wrapping_sub(ci) >= pi.wrapping_sub(ci) {
        return Err(BadCqe::WqeCounterOutOfRange(counter));
    }
    let slot = &sq.slots[usize::from(counter & sq.mask)];
    let w = slot.sent();
    if w.index() != counter {
        return Err(BadCqe::WqeCounterOutOfRange(counter));
    }
    Ok((sq, slot, w))
}

/// Retires the send WQE `w` in `slot` and the unsignaled ones before it.
#[inline(always)]
fn retire_sent(sq: &SqTrack, slot: &SqSlot, w: SentWqe) {
    sq.wr_ci
        .store(slot.wr_seq.load(Ordering::Relaxed), Ordering::Release);
    sq.ci.store(u32::from(w.next()), Ordering::Release);
}

/// The wr_id and posted length of the receive at `counter` (the QP's RQ or its SRQ), which
/// must be outstanding.
#[inline(always)]
fn received(a: &Attached, counter: u16) -> Result<(u64, u64), BadCqe> {
    if !a.recv {
        return Err(BadCqe::UnknownQpn);
    }
    if let Some(srq) = &a.shared.srq {
        return srq
            .peek(counter)
            .ok_or(BadCqe::RecvCounterOutOfRange(counter));
    }
    let Some(rq) = &a.shared.rq else {
        return Err(BadCqe::UnknownQpn);
    };
    let ci = rq.ci.load(Ordering::Relaxed);
    let pi = rq.pi.load(Ordering::Acquire);
    if ci == pi || counter != ci as u16 {
        return Err(BadCqe::RecvCounterOutOfRange(counter));
    }
    let i = (ci & rq.mask) as usize;
    Ok((
        rq.wr_id[i].load(Ordering::Relaxed),
        rq.len[i].load(Ordering::Relaxed),
    ))
}

/// Retires the receive at `counter`.
#[inline(always)]
fn retire_received(a: &Attached, counter: u16) {
    if let Some(srq) = &a.shared.srq {
        srq.free(counter);
    } else if let Some(rq) = &a.shared.rq {
        rq.ci.store(
            rq.ci.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Release,
        );
    }
}

/// A good requester CQE (`REQ`, carrying `send_op`): the send WQE it names, checked against
/// what was posted.
#[inline(always)]
fn good_req(a: &Attached, cqe: Cqe, send_op: u8, out: &mut WorkCompletion) -> Result<(), BadCqe> {
    let counter = cqe.get(WQE_COUNTER);
    let (sq, slot, w) = sent(a, counter)?;
    if send_op != w.opcode() {
        return Err(BadCqe::SendOpcodeMismatch {
            posted: w.opcode(),
            cqe: send_op,
        });
    }
    let mut byte_len = slot.len.load(Ordering::Relaxed);
    if w.reads() {
        let byte_cnt = cqe.get(BYTE_CNT);
        if byte_cnt > byte_len {
            return Err(BadCqe::ByteCountTooLarge {
                byte_cnt,
                posted: u64::from(byte_len),
            });
        }
        byte_len = byte_cnt;
    }
    *out = WorkCompletion {
        wr_id: slot.wr_id.load(Ordering::Relaxed),
        opcode: w.wc_opcode(),
        byte_len,
        qp_num: a.qpn,
        ..WorkCompletion::default()
    };
    retire_sent(sq, slot, w);
    Ok(())
}

/// A good responder CQE (`RESP_*` of raw `opcode`): the receive it consumed, its length,
/// source and immediate data.
#[inline(always)]
fn good_resp(a: &Attached, cqe: Cqe, opcode: u8, out: &mut WorkCompletion) -> Result<(), BadCqe> {
    let counter = cqe.get(WQE_COUNTER);
    let (wr_id, posted_len) = received(a, counter)?;
    let byte_cnt = cqe.get(BYTE_CNT);
    if opcode != OP_RESP_WR_IMM && u64::from(byte_cnt) > posted_len {
        return Err(BadCqe::ByteCountTooLarge {
            byte_cnt,
            posted: posted_len,
        });
    }
    let (src_qp, grh) = cqe.get2(RQPN, GRH);
    let mut wc = WorkCompletion {
        wr_id,
        opcode: WcOpcode::Recv,
        byte_len: byte_cnt,
        qp_num: a.qpn,
        src_qp,
        ..WorkCompletion::default()
    };
    if grh != 0 {
        wc.flags = wc.flags.with(WcFlags::GRH);
    }
    match opcode {
        OP_RESP_WR_IMM => {
            wc.opcode = WcOpcode::RecvRdmaWithImm;
            wc.imm = cqe.get(IMM_INVAL_PKEY);
            wc.flags = wc.flags.with(WcFlags::WITH_IMM);
        }
        OP_RESP_SEND_IMM => {
            wc.imm = cqe.get(IMM_INVAL_PKEY);
            wc.flags = wc.flags.with(WcFlags::WITH_IMM);
        }
        OP_RESP_SEND_INV => {
            wc.invalidated_rkey = cqe.get(IMM_INVAL_PKEY);
            wc.flags = wc.flags.with(WcFlags::WITH_INV);
        }
        _ => {}
    }
    *out = wc;
    retire_received(a, counter);
    Ok(())
}

/// An error CQE (`REQ_ERR`, `RESP_ERR`, raw `opcode`): the status from the syndrome, the
/// WQE it names retired (a send WQE reports its posted length and opcode, a receive none).
/// Out of line and cold, so that the good paths stay a straight line.
#[cold]
#[inline(never)]
fn error_cqe(a: &Attached, cqe: Cqe, opcode: u8, out: &mut WorkCompletion) -> Result<(), BadCqe> {
    let (syndrome, vendor_err) = cqe.get2(SYNDROME, VENDOR_ERR_SYND);
    let mut wc = WorkCompletion {
        status: WcStatus::from_syndrome(syndrome),
        vendor_err,
        qp_num: a.qpn,
        ..WorkCompletion::default()
    };
    let counter = cqe.get(WQE_COUNTER);
    if opcode == OP_REQ_ERR {
        let (sq, slot, w) = sent(a, counter)?;
        wc.opcode = w.wc_opcode();
        wc.byte_len = slot.len.load(Ordering::Relaxed);
        wc.wr_id = slot.wr_id.load(Ordering::Relaxed);
        *out = wc;
        retire_sent(sq, slot, w);
    } else {
        let (wr_id, _) = received(a, counter)?;
        wc.wr_id = wr_id;
        wc.opcode = WcOpcode::Recv;
        *out = wc;
        retire_received(a, counter);
    }
    Ok(())
}
