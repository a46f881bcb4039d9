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

use crate::dma::{read_be32, read_byte, write_be32};
use crate::eq::EventQueue;
use crate::error::DriverError;
use crate::hca::Hca;
use crate::wq::{QpShared, log2_ceil};
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

// Byte offsets of the CQE dwords read here: the fields of `rnic_hw_regs::cqe::Cqe64`, read
// one volatile dword at a time from the ring instead of copying the entry out.
/// `grh` (29:28) and `rqpn` (23:0).
const CQE_RQPN: usize = 0x18;
/// `imm_inval_pkey`.
const CQE_IMM: usize = 0x24;
/// `byte_cnt`.
const CQE_BYTE_CNT: usize = 0x2C;
/// `vendor_err_synd` (15:8) and `syndrome` (7:0).
const CQE_SYNDROME: usize = 0x34;
/// `send_opcode` (31:24) and `qpn` (23:0).
const CQE_QPN: usize = 0x38;
/// `wqe_counter` (31:16), then the `op_own` byte.
const CQE_WQE_COUNTER: usize = 0x3C;
/// `op_own`: opcode (7:4), format (3:2), owner (0); the device writes it last.
const CQE_OP_OWN: usize = CQE_SIZE - 1;

/// log2 of a completion channel's EQ entries.
const CHANNEL_LOG_EQ: u8 = 8;

/// Claim states of a CQ's poll state.
const FREE: u8 = 0;
const POLLING: u8 = 1;
const CONTROL: u8 = 2;

/// A completion channel: an EQ that receives the completion events of the CQs created on it
/// and raises interrupt vector `vector` ([`Bus::wait_irq`], [`Bus::irq_fd`]).
///
/// ```
/// use rnic_driver::cq::CompChannel;
/// # use rnic_driver::{cq::Cq, mr::Mr, pd::Pd, qp::*, wr::*, Hca, HcaConfig};
/// # use std::{sync::Arc, time::{Duration, Instant}};
/// # fn wait(cq: &Cq) -> WorkCompletion { let t = Instant::now(); let mut wc = [WorkCompletion::default()];
/// #     while cq.poll(&mut wc) != Ok(1) { assert!(t.elapsed() < Duration::from_secs(10)); std::thread::yield_now(); } wc[0] }
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let hca = Arc::new(Hca::open(Arc::new(dev.bus()), HcaConfig { ipv4: Some([192, 0, 2, 1].into()), ..HcaConfig::default() })?);
/// # let (pd, cq) = (Arc::new(Pd::alloc(&hca)?), Arc::new(Cq::create(&hca, 64, None)?));
/// # let (qp, mr) = (Qp::create(&pd, &QpConfig::new(QpType::Rc, cq.clone(), cq.clone()))?, Mr::alloc(&pd, 4096, Access::ALL)?);
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
    /// # use rnic_driver::{cq::Cq, mr::Mr, pd::Pd, qp::*, wr::*, Hca, HcaConfig};
    /// # use std::{sync::Arc, time::{Duration, Instant}};
    /// # fn wait(cq: &Cq) -> WorkCompletion { let t = Instant::now(); let mut wc = [WorkCompletion::default()];
    /// #     while cq.poll(&mut wc) != Ok(1) { assert!(t.elapsed() < Duration::from_secs(10)); std::thread::yield_now(); } wc[0] }
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = Arc::new(Hca::open(Arc::new(dev.bus()), HcaConfig { ipv4: Some([192, 0, 2, 1].into()), ..HcaConfig::default() })?);
    /// # let (pd, cq) = (Arc::new(Pd::alloc(&hca)?), Arc::new(Cq::create(&hca, 64, None)?));
    /// # let (qp, mr) = (Qp::create(&pd, &QpConfig::new(QpType::Rc, cq.clone(), cq.clone()))?, Mr::alloc(&pd, 4096, Access::ALL)?);
    /// # qp.to_init(&InitAttr { access: Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC, ..InitAttr::default() })?;
    /// # let av = AddressVector { sgid_index: 1, dgid: hca.gids()[1].gid, dmac: hca.mac(), ..AddressVector::default() };
    /// # qp.to_rtr(&RtrAttr { path_mtu: Some(Mtu::Mtu1024), dest_qpn: Some(qp.qpn()), av: Some(av), max_dest_rd_atomic: 4, ..RtrAttr::default() })?;
    /// # qp.to_rts(&RtsAttr { timeout: 14, retry_cnt: 7, rnr_retry: 7, max_rd_atomic: 4, ..RtsAttr::default() })?;
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
/// # use rnic_driver::{cq::Cq, mr::Mr, pd::Pd, qp::*, wr::*, Hca, HcaConfig};
/// # use std::{sync::Arc, time::{Duration, Instant}};
/// # fn wait(cq: &Cq) -> WorkCompletion { let t = Instant::now(); let mut wc = [WorkCompletion::default()];
/// #     while cq.poll(&mut wc) != Ok(1) { assert!(t.elapsed() < Duration::from_secs(10)); std::thread::yield_now(); } wc[0] }
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let hca = Arc::new(Hca::open(Arc::new(dev.bus()), HcaConfig { ipv4: Some([192, 0, 2, 1].into()), ..HcaConfig::default() })?);
/// # let (pd, cq) = (Arc::new(Pd::alloc(&hca)?), Arc::new(Cq::create(&hca, 64, None)?));
/// # let (qp, mr) = (Qp::create(&pd, &QpConfig::new(QpType::Rc, cq.clone(), cq.clone()))?, Mr::alloc(&pd, 4096, Access::ALL)?);
/// # qp.to_init(&InitAttr { access: Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC, ..InitAttr::default() })?;
/// # let av = AddressVector { sgid_index: 1, dgid: hca.gids()[1].gid, dmac: hca.mac(), ..AddressVector::default() };
/// # qp.to_rtr(&RtrAttr { path_mtu: Some(Mtu::Mtu1024), dest_qpn: Some(qp.qpn()), av: Some(av), max_dest_rd_atomic: 4, ..RtrAttr::default() })?;
/// # qp.to_rts(&RtsAttr { timeout: 14, retry_cnt: 7, rnr_retry: 7, max_rd_atomic: 4, ..RtsAttr::default() })?;
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
                base.add(i * CQE_SIZE + CQE_OP_OWN)
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
    /// # use rnic_driver::{cq::Cq, mr::Mr, pd::Pd, qp::*, wr::*, Hca, HcaConfig};
    /// # use std::{sync::Arc, time::{Duration, Instant}};
    /// # fn wait(cq: &Cq) -> WorkCompletion { let t = Instant::now(); let mut wc = [WorkCompletion::default()];
    /// #     while cq.poll(&mut wc) != Ok(1) { assert!(t.elapsed() < Duration::from_secs(10)); std::thread::yield_now(); } wc[0] }
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = Arc::new(Hca::open(Arc::new(dev.bus()), HcaConfig { ipv4: Some([192, 0, 2, 1].into()), ..HcaConfig::default() })?);
    /// # let (pd, cq) = (Arc::new(Pd::alloc(&hca)?), Arc::new(Cq::create(&hca, 64, None)?));
    /// # let (qp, mr) = (Qp::create(&pd, &QpConfig::new(QpType::Rc, cq.clone(), cq.clone()))?, Mr::alloc(&pd, 4096, Access::ALL)?);
    /// # qp.to_init(&InitAttr { access: Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC, ..InitAttr::default() })?;
    /// # let av = AddressVector { sgid_index: 1, dgid: hca.gids()[1].gid, dmac: hca.mac(), ..AddressVector::default() };
    /// # qp.to_rtr(&RtrAttr { path_mtu: Some(Mtu::Mtu1024), dest_qpn: Some(qp.qpn()), av: Some(av), max_dest_rd_atomic: 4, ..RtrAttr::default() })?;
    /// # qp.to_rts(&RtsAttr { timeout: 14, retry_cnt: 7, rnr_retry: 7, max_rd_atomic: 4, ..RtsAttr::default() })?;
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
    /// # use rnic_driver::{cq::Cq, mr::Mr, pd::Pd, qp::*, wr::*, Hca, HcaConfig};
    /// # use std::{sync::Arc, time::{Duration, Instant}};
    /// # fn wait(cq: &Cq) -> WorkCompletion { let t = Instant::now(); let mut wc = [WorkCompletion::default()];
    /// #     while cq.poll(&mut wc) != Ok(1) { assert!(t.elapsed() < Duration::from_secs(10)); std::thread::yield_now(); } wc[0] }
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = Arc::new(Hca::open(Arc::new(dev.bus()), HcaConfig { ipv4: Some([192, 0, 2, 1].into()), ..HcaConfig::default() })?);
    /// # let (pd, cq) = (Arc::new(Pd::alloc(&hca)?), Arc::new(Cq::create(&hca, 64, None)?));
    /// # let (qp, mr) = (Qp::create(&pd, &QpConfig::new(QpType::Rc, cq.clone(), cq.clone()))?, Mr::alloc(&pd, 4096, Access::ALL)?);
    /// # qp.to_init(&InitAttr { access: Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC, ..InitAttr::default() })?;
    /// # let av = AddressVector { sgid_index: 1, dgid: hca.gids()[1].gid, dmac: hca.mac(), ..AddressVector::default() };
    /// # qp.to_rtr(&RtrAttr { path_mtu: Some(Mtu::Mtu1024), dest_qpn: Some(qp.qpn()), av: Some(av), max_dest_rd_atomic: 4, ..RtrAttr::default() })?;
    /// # qp.to_rts(&RtsAttr { timeout: 14, retry_cnt: 7, rnr_retry: 7, max_rd_atomic: 4, ..RtsAttr::default() })?;
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
                let p = cq.cqe_ptr(idx);
                // SAFETY: inside the ring.
                let w38 = unsafe { read_be32(p.add(CQE_QPN)) };
                if w38 & 0xFF_FFFF == qpn {
                    // SAFETY: inside the ring.
                    let op = unsafe { read_byte(p.add(CQE_OP_OWN)) } >> 4;
                    if let (Some(srq), true) = (&srq, is_responder(op)) {
                        // SAFETY: inside the ring.
                        let w = (unsafe { read_be32(p.add(CQE_WQE_COUNTER)) } >> 16) as u16;
                        srq.free(w);
                    }
                    freed += 1;
                } else if freed > 0 {
                    let dst = cq.cqe_ptr(idx.wrapping_add(freed));
                    // SAFETY: both entries are inside the ring and owned by software
                    // (between ci and the first hardware-owned entry).
                    unsafe {
                        let owner = read_byte(dst.add(CQE_OP_OWN)) & 1;
                        for k in 0..CQE_OP_OWN {
                            dst.add(k).write_volatile(p.add(k).read_volatile());
                        }
                        let src_own = read_byte(p.add(CQE_OP_OWN));
                        dst.add(CQE_OP_OWN).write_volatile((src_own & !1) | owner);
                    }
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

    #[inline(always)]
    fn cqe_ptr(&self, ci: u32) -> *mut u8 {
        let idx = (ci & ((1u32 << self.log_size) - 1)) as usize;
        // SAFETY: `idx < 2^log_size`, so the entry is inside the ring.
        unsafe { self.cqes.as_ptr().add(idx * CQE_SIZE) }
    }

    #[inline(always)]
    fn owned_at(&self, ci: u32) -> bool {
        // SAFETY: inside the ring.
        let op_own = unsafe { read_byte(self.cqe_ptr(ci).add(CQE_OP_OWN)) };
        cqe_is_sw_owned(op_own, ci, self.log_size)
    }

    /// Polls up to `wc.len()` completions into `wc`; returns how many. An impossible CQE
    /// is returned as [`PollError::BadCqe`] (consumed, so the next poll goes on), after the
    /// good completions before it were returned by an earlier call.
    ///
    /// ```
    /// # use rnic_driver::{cq::Cq, mr::Mr, pd::Pd, qp::*, wr::*, Hca, HcaConfig};
    /// # use std::{sync::Arc, time::{Duration, Instant}};
    /// # fn wait(cq: &Cq) -> WorkCompletion { let t = Instant::now(); let mut wc = [WorkCompletion::default()];
    /// #     while cq.poll(&mut wc) != Ok(1) { assert!(t.elapsed() < Duration::from_secs(10)); std::thread::yield_now(); } wc[0] }
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = Arc::new(Hca::open(Arc::new(dev.bus()), HcaConfig { ipv4: Some([192, 0, 2, 1].into()), ..HcaConfig::default() })?);
    /// # let (pd, cq) = (Arc::new(Pd::alloc(&hca)?), Arc::new(Cq::create(&hca, 64, None)?));
    /// # let (qp, mr) = (Qp::create(&pd, &QpConfig::new(QpType::Rc, cq.clone(), cq.clone()))?, Mr::alloc(&pd, 4096, Access::ALL)?);
    /// # qp.to_init(&InitAttr { access: Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC, ..InitAttr::default() })?;
    /// # let av = AddressVector { sgid_index: 1, dgid: hca.gids()[1].gid, dmac: hca.mac(), ..AddressVector::default() };
    /// # qp.to_rtr(&RtrAttr { path_mtu: Some(Mtu::Mtu1024), dest_qpn: Some(qp.qpn()), av: Some(av), max_dest_rd_atomic: 4, ..RtrAttr::default() })?;
    /// # qp.to_rts(&RtsAttr { timeout: 14, retry_cnt: 7, rnr_retry: 7, max_rd_atomic: 4, ..RtsAttr::default() })?;
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
        let r = self.poll_claimed(st, wc);
        self.claim.store(FREE, Ordering::Release);
        r
    }

    #[inline]
    fn poll_claimed(
        &self,
        st: &mut PollState,
        wc: &mut [WorkCompletion],
    ) -> Result<usize, PollError> {
        let start = st.ci;
        let mut n = 0;
        let mut res = Ok(());
        while n < wc.len() {
            let p = self.cqe_ptr(st.ci);
            // SAFETY: inside the ring.
            let op_own = unsafe { read_byte(p.add(CQE_OP_OWN)) };
            if !cqe_is_sw_owned(op_own, st.ci, self.log_size) {
                break;
            }
            // The body only after the owner byte says the entry is ours.
            fence(Ordering::Acquire);
            match parse(st, p, op_own) {
                Ok(c) => {
                    wc[n] = c;
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

impl Drop for Cq {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            log::warn!("destroying CQ {:#x} on drop: {e}", self.cqn);
        }
    }
}

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

/// Turns the CQE at `p` into a work completion, retiring the WQEs it completes; on an
/// impossible CQE returns the QPN and what is wrong (nothing retired).
#[inline(always)]
fn parse(st: &mut PollState, p: *mut u8, op_own: u8) -> Result<WorkCompletion, (u32, BadCqe)> {
    // SAFETY: `p` points at a 64-byte CQE inside the ring (caller), and every offset read
    // below is < 64 and 4-byte aligned; volatile reads, no reference.
    let rd = |off: usize| unsafe { read_be32(p.add(off)) };
    let w38 = rd(CQE_QPN);
    let qpn = w38 & 0xFF_FFFF;
    let opcode = op_own >> 4;
    if (op_own >> 2) & 3 == CQE_FORMAT_COMPRESSED {
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
    let counter = (rd(CQE_WQE_COUNTER) >> 16) as u16;
    let byte_cnt = rd(CQE_BYTE_CNT);
    let mut wc = WorkCompletion {
        qp_num: qpn,
        ..WorkCompletion::default()
    };
    let error = matches!(opcode, OP_REQ_ERR | OP_RESP_ERR);
    if error {
        let w34 = rd(CQE_SYNDROME);
        wc.status = WcStatus::from_syndrome(w34 as u8);
        wc.vendor_err = (w34 >> 8) as u8;
    }
    match opcode {
        OP_REQ | OP_REQ_ERR => {
            if !a.send {
                return Err((qpn, BadCqe::UnknownQpn));
            }
            let sq = &a.shared.sq;
            let pi = sq.pi.load(Ordering::Acquire) as u16;
            let ci = sq.ci.load(Ordering::Relaxed) as u16;
            if counter.wrapping_sub(ci) >= pi.wrapping_sub(ci) {
                return Err((qpn, BadCqe::WqeCounterOutOfRange(counter)));
            }
            let slot = &sq.slots[usize::from(counter & sq.mask)];
            let w = slot.sent();
            if w.index() != counter {
                return Err((qpn, BadCqe::WqeCounterOutOfRange(counter)));
            }
            let posted = w.opcode();
            let len = slot.len.load(Ordering::Relaxed);
            let send_op = (w38 >> 24) as u8;
            if opcode == OP_REQ && send_op != posted {
                return Err((
                    qpn,
                    BadCqe::SendOpcodeMismatch {
                        posted,
                        cqe: send_op,
                    },
                ));
            }
            wc.opcode = w.wc_opcode();
            wc.byte_len = len;
            if w.reads() && !error {
                if byte_cnt > len {
                    return Err((
                        qpn,
                        BadCqe::ByteCountTooLarge {
                            byte_cnt,
                            posted: u64::from(len),
                        },
                    ));
                }
                wc.byte_len = byte_cnt;
            }
            wc.wr_id = slot.wr_id.load(Ordering::Relaxed);
            sq.wr_ci
                .store(slot.wr_seq.load(Ordering::Relaxed), Ordering::Release);
            sq.ci.store(u32::from(w.next()), Ordering::Release);
            Ok(wc)
        }
        OP_RESP_WR_IMM | OP_RESP_SEND | OP_RESP_SEND_IMM | OP_RESP_SEND_INV | OP_RESP_ERR => {
            if !a.recv {
                return Err((qpn, BadCqe::UnknownQpn));
            }
            let posted_len;
            if let Some(srq) = &a.shared.srq {
                let Some((wr_id, len)) = srq.peek(counter) else {
                    return Err((qpn, BadCqe::RecvCounterOutOfRange(counter)));
                };
                posted_len = len;
                wc.wr_id = wr_id;
            } else {
                let Some(rq) = &a.shared.rq else {
                    return Err((qpn, BadCqe::UnknownQpn));
                };
                let ci = rq.ci.load(Ordering::Relaxed);
                let pi = rq.pi.load(Ordering::Acquire);
                if ci == pi || counter != ci as u16 {
                    return Err((qpn, BadCqe::RecvCounterOutOfRange(counter)));
                }
                let i = (ci & rq.mask) as usize;
                posted_len = rq.len[i].load(Ordering::Relaxed);
                wc.wr_id = rq.wr_id[i].load(Ordering::Relaxed);
            }
            wc.opcode = WcOpcode::Recv;
            if !error {
                let w18 = rd(CQE_RQPN);
                let imm = rd(CQE_IMM);
                if opcode != OP_RESP_WR_IMM && u64::from(byte_cnt) > posted_len {
                    return Err((
                        qpn,
                        BadCqe::ByteCountTooLarge {
                            byte_cnt,
                            posted: posted_len,
                        },
                    ));
                }
                wc.byte_len = byte_cnt;
                wc.src_qp = w18 & 0xFF_FFFF;
                if (w18 >> 28) & 3 != 0 {
                    wc.flags = wc.flags.with(WcFlags::GRH);
                }
                match opcode {
                    OP_RESP_WR_IMM => {
                        wc.opcode = WcOpcode::RecvRdmaWithImm;
                        wc.imm = imm;
                        wc.flags = wc.flags.with(WcFlags::WITH_IMM);
                    }
                    OP_RESP_SEND_IMM => {
                        wc.imm = imm;
                        wc.flags = wc.flags.with(WcFlags::WITH_IMM);
                    }
                    OP_RESP_SEND_INV => {
                        wc.invalidated_rkey = imm;
                        wc.flags = wc.flags.with(WcFlags::WITH_INV);
                    }
                    _ => {}
                }
            }
            // Retire the receive.
            if let Some(srq) = &a.shared.srq {
                srq.free(counter);
            } else if let Some(rq) = &a.shared.rq {
                rq.ci.store(
                    rq.ci.load(Ordering::Relaxed).wrapping_add(1),
                    Ordering::Release,
                );
            }
            Ok(wc)
        }
        other => Err((qpn, BadCqe::UnknownOpcode(other))),
    }
}
