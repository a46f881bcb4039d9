//! The raw Ethernet queues: [`RawRq`] (CREATE_RQ, receive WQEs of data segments) and
//! [`RawSq`] (CREATE_SQ on a TIS, send WQEs of control + Ethernet + data segments), each
//! moved to RDY at creation and polled through a CQ of its own.

use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering, fence};

use rnic_hw_regs::DmaRegion;
use rnic_hw_regs::cmd::{CreateRqIn, CreateSqIn, DestroyRqIn, DestroySqIn, ModifyRqIn, ModifySqIn};
use rnic_hw_regs::ctx::{WqState, WqType, inline_mode};
use rnic_hw_regs::doorbell::send_doorbell_offset;
use rnic_hw_regs::wqe::{
    CE_CQ_UPDATE, DS_SIZE, ETH_L2_INLINE_HEADER_SIZE, ETH_SEG_INLINE_START, MAX_DS, SendOpcode,
    WQEBB, ds_to_wqebbs, eth_seg_ds,
};

use super::Tis;
use crate::cq::Cq;
use crate::cqe::{
    BYTE_CNT, CVLAN_PRESENT, Cqe, L3_HDR_TYPE, L4_HDR_TYPE, QPN, SYNDROME, VLAN_INFO, WQE_COUNTER,
    opcode_of,
};
use crate::dma::{write_be32, write_be64};
use crate::error::DriverError;
use crate::pd::Pd;
use crate::wq::{Claim, log2_ceil, write_recv};
use crate::wr::{BadCqe, PollError, PostError, PostErrorKind, Sge, WcStatus};

/// CQE opcodes the raw queues' CQs carry.
const OP_REQ: u8 = 0x0;
const OP_RESP_SEND: u8 = 0x2;
const OP_REQ_ERR: u8 = 0xD;
const OP_RESP_ERR: u8 = 0xE;
/// Data segments a raw send carries at most.
pub const RAW_SEND_MAX_SGE: usize = 4;
/// Frame bytes a raw send inlines at most (the WQE stays within 4 WQEBBs with
/// [`RAW_SEND_MAX_SGE`] data segments).
pub const RAW_SEND_MAX_INLINE: usize =
    4 * WQEBB - DS_SIZE - ETH_SEG_INLINE_START - RAW_SEND_MAX_SGE * DS_SIZE;
/// WQEBBs a raw send takes at most.
const MAX_SEND_WQEBBS: u32 = 4;

/// A completion of a raw queue.
///
/// ```
/// let c = rnic_driver::eth::EthCompletion::default();
/// assert_eq!((c.wr_id, c.byte_len, c.vlan_tci), (0, 0, None));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EthCompletion {
    /// The work request's id.
    pub wr_id: u64,
    /// Success, or the error the device reported.
    pub status: WcStatus,
    /// Received frame length (receives).
    pub byte_len: u32,
    /// The matching flow rule's flow tag (receives).
    pub flow_tag: u32,
    /// The VLAN tag the device stripped (receives).
    pub vlan_tci: Option<u16>,
    /// `l3_hdr_type` (receives): 0 none, 1 IPv6, 2 IPv4.
    pub l3_hdr_type: u8,
    /// `l4_hdr_type` (receives): 0 none, 1 TCP, 2 UDP.
    pub l4_hdr_type: u8,
}

impl Default for EthCompletion {
    fn default() -> Self {
        EthCompletion {
            wr_id: 0,
            status: WcStatus::Success,
            byte_len: 0,
            flow_tag: 0,
            vlan_tci: None,
            l3_hdr_type: 0,
            l4_hdr_type: 0,
        }
    }
}

/// The ring, doorbell record and CQ a raw queue owns.
#[derive(Debug)]
struct Ring {
    pd: Arc<Pd>,
    cq: Cq,
    bus: crate::dma::BusHandle,
    buf: Option<DmaRegion>,
    base: NonNull<u8>,
    dbrec: NonNull<u8>,
    /// Slots (RQ WQEs, SQ WQEBBs) minus one: the ring mask.
    mask: u32,
    /// Posted and completed counters.
    pi: AtomicU32,
    ci: AtomicU32,
    wr_id: Box<[AtomicU64]>,
    claim: AtomicBool,
}

impl Ring {
    /// A ring of `2^log` slots of `stride` bytes with its doorbell record after it, and a
    /// CQ of `2^log` entries.
    fn new(pd: &Arc<Pd>, log: u8, stride: usize) -> Result<Ring, DriverError> {
        let hca = pd.hca();
        let n = 1usize << log;
        let cq = Cq::create(hca, n as u32, None)?;
        let bus = crate::dma::BusHandle(hca.bus().clone());
        let ring = stride * n;
        let buf = bus.alloc_dma(ring.max(4096) + 64)?;
        // SAFETY: `ring + 8 <= buf.len`.
        let dbrec = unsafe { buf.vaddr.as_ptr().add(ring.max(4096)) };
        // SAFETY: as above.
        unsafe { write_be64(dbrec, 0) };
        Ok(Ring {
            pd: pd.clone(),
            cq,
            bus,
            base: buf.vaddr,
            // SAFETY: inside the region.
            dbrec: unsafe { NonNull::new_unchecked(dbrec) },
            buf: Some(buf),
            mask: n as u32 - 1,
            pi: AtomicU32::new(0),
            ci: AtomicU32::new(0),
            wr_id: (0..n).map(|_| AtomicU64::new(0)).collect(),
            claim: AtomicBool::new(false),
        })
    }

    fn region(&self) -> &DmaRegion {
        self.buf.as_ref().expect("held until teardown")
    }

    fn dbr_iova(&self) -> u64 {
        let r = self.region();
        r.iova + (self.dbrec.as_ptr() as usize - r.vaddr.as_ptr() as usize) as u64
    }

    /// The PAS of the ring's `len` bytes.
    fn pas(&self, len: usize) -> Vec<u8> {
        crate::dma::page_addresses(self.region(), len.max(4096))
    }

    /// A create command failed: frees what was allocated for it.
    fn failed(mut self, e: DriverError, what: &str) -> DriverError {
        let buf = self.buf.take().expect("held until teardown");
        crate::dma::release_after_failed_create(&*self.bus, buf, e, what)
    }
}

/// CQE status of an error CQE's syndrome, or success.
/// The completion a dead device's queue gives a work request it still held.
fn flushed(wr_id: u64) -> EthCompletion {
    EthCompletion {
        wr_id,
        status: WcStatus::WrFlushErr,
        ..EthCompletion::default()
    }
}

fn status_of(cqe: Cqe, op: u8) -> WcStatus {
    match op {
        OP_REQ_ERR | OP_RESP_ERR => WcStatus::from_syndrome(cqe.get(SYNDROME)),
        _ => WcStatus::Success,
    }
}

/// An Ethernet receive queue (CREATE_RQ) with its own CQ, in RDY.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
/// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
/// let rq = rnic_driver::eth::RawRq::create(&pd, 16, 1)?;
/// let mut wc = [rnic_driver::eth::EthCompletion::default(); 4];
/// assert_eq!(rq.poll(&mut wc)?, 0); // nothing received
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct RawRq {
    ring: Ring,
    rqn: u32,
    stride: usize,
    max_sge: usize,
    done: bool,
}

// SAFETY: the raw pointers point into the queue's own DMA region (held in the ring); posting
// and polling are serialised by the claim flags, the counters are atomic.
unsafe impl Send for RawRq {}
// SAFETY: see `Send`.
unsafe impl Sync for RawRq {}

impl RawRq {
    /// CREATE_RQ of at least `max_wr` receives of `max_sge` SGEs each, then MODIFY_RQ to RDY.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
    /// let rq = rnic_driver::eth::RawRq::create(&pd, 100, 2)?;
    /// assert!(rq.capacity() >= 100);
    /// assert!(rnic_driver::eth::RawRq::create(&pd, 16, 1 << 20).is_err());
    /// # Ok(()) }
    /// ```
    pub fn create(pd: &Arc<Pd>, max_wr: u32, max_sge: u32) -> Result<RawRq, DriverError> {
        let hca = pd.hca();
        let g = &hca.caps().general;
        let stride = (DS_SIZE * max_sge.max(1) as usize).next_power_of_two();
        let log = log2_ceil(max_wr.max(1));
        if stride > usize::from(g.max_wqe_sz_rq()) || log > g.log_max_wq_sz() || log > 15 {
            return Err(DriverError::InvalidArgument(format!(
                "RQ of {max_wr} receives of {max_sge} SGEs: beyond the device's limits"
            )));
        }
        let ring = Ring::new(pd, log, stride)?;
        let mut cmd = CreateRqIn::new_cmd();
        let c = cmd.ctx_mut();
        c.set_cqn(ring.cq.cqn());
        c.set_state(WqState::Rst.into());
        let wq = c.wq_mut();
        wq.set_wq_type(WqType::Cyclic.into());
        wq.set_pd(pd.pdn());
        wq.set_dbr_addr(ring.dbr_iova());
        wq.set_log_wq_stride(stride.trailing_zeros() as u8);
        wq.set_log_wq_sz(log);
        let pas = ring.pas(stride << log);
        let rqn = match hca.cmdq().exec(&cmd, &pas, &mut []) {
            Ok(o) => o.rqn(),
            Err(e) => return Err(ring.failed(e, "CREATE_RQ")),
        };
        let rq = RawRq {
            ring,
            rqn,
            stride,
            max_sge: stride / DS_SIZE,
            done: false,
        };
        let mut m = ModifyRqIn::new_cmd();
        m.set_rqn(rqn);
        m.set_rq_state(WqState::Rst.into());
        m.ctx_mut().set_state(WqState::Rdy.into());
        hca.cmdq().exec(&m, &[], &mut [])?;
        Ok(rq)
    }

    /// The RQ number.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
    /// let a = rnic_driver::eth::RawRq::create(&pd, 4, 1)?;
    /// let b = rnic_driver::eth::RawRq::create(&pd, 4, 1)?;
    /// assert_ne!(a.rqn(), b.rqn());
    /// # Ok(()) }
    /// ```
    pub fn rqn(&self) -> u32 {
        self.rqn
    }

    /// How many receives can be posted at once.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
    /// assert_eq!(rnic_driver::eth::RawRq::create(&pd, 5, 1)?.capacity(), 8);
    /// # Ok(()) }
    /// ```
    pub fn capacity(&self) -> u32 {
        self.ring.mask + 1
    }

    /// Posts one receive buffer (the frame lands in `sgl`, the device's VLAN stripping
    /// applied). Allocation-free; one poster at a time (`Busy` otherwise).
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
    /// let rq = rnic_driver::eth::RawRq::create(&pd, 1, 1)?;
    /// rq.post_recv(1, &[mr.sge(0, 1518)])?;
    /// let full = rq.post_recv(2, &[mr.sge(0, 1518)]).unwrap_err();
    /// assert_eq!(full.kind, PostErrorKind::QueueFull);
    /// # Ok(()) }
    /// ```
    pub fn post_recv(&self, wr_id: u64, sgl: &[Sge]) -> Result<(), PostError> {
        let err = |kind| PostError { index: 0, kind };
        let Some(_claim) = Claim::take(&self.ring.claim) else {
            return Err(err(PostErrorKind::Busy));
        };
        let r = &self.ring;
        let pi = r.pi.load(Ordering::Relaxed);
        if pi.wrapping_sub(r.ci.load(Ordering::Acquire)) > r.mask {
            return Err(err(PostErrorKind::QueueFull));
        }
        let slot = (pi & r.mask) as usize;
        // SAFETY: the slot is inside the ring; `max_sge` entries fit its stride.
        let wqe = unsafe { r.base.as_ptr().add(slot * self.stride) };
        write_recv(wqe, self.max_sge, sgl).map_err(err)?;
        r.wr_id[slot].store(wr_id, Ordering::Relaxed);
        let next = pi.wrapping_add(1);
        r.pi.store(next, Ordering::Relaxed);
        // The WQE before the counter that hands it over.
        fence(Ordering::Release);
        // SAFETY: the doorbell record is inside the region; dword 0 is the receive counter.
        unsafe { write_be32(r.dbrec.as_ptr(), next & 0xFFFF) };
        Ok(())
    }

    /// Polls up to `out.len()` receive completions. A CQE out of order or of another kind
    /// is [`PollError::BadCqe`] (consumed).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
    /// let rq = rnic_driver::eth::RawRq::create(&pd, 4, 1)?;
    /// assert_eq!(rq.poll(&mut [Default::default(); 2])?, 0);
    /// # Ok(()) }
    /// ```
    pub fn poll(&self, out: &mut [EthCompletion]) -> Result<usize, PollError> {
        let r = &self.ring;
        r.cq.poll_raw(
            out,
            |cqe, op_own, slot_out| {
                let ci = r.ci.load(Ordering::Relaxed);
                let (tag, counter) = (cqe.get(QPN), cqe.get(WQE_COUNTER));
                let op = opcode_of(op_own);
                if op != OP_RESP_SEND && op != OP_RESP_ERR {
                    return Err((tag, BadCqe::UnknownOpcode(op)));
                }
                if counter != ci as u16 || ci == r.pi.load(Ordering::Acquire) {
                    return Err((tag, BadCqe::RecvCounterOutOfRange(counter)));
                }
                let vlan = cqe.get(CVLAN_PRESENT).then(|| cqe.get(VLAN_INFO));
                *slot_out = EthCompletion {
                    wr_id: r.wr_id[(ci & r.mask) as usize].load(Ordering::Relaxed),
                    status: status_of(cqe, op),
                    byte_len: if op == OP_RESP_SEND {
                        cqe.get(BYTE_CNT)
                    } else {
                        0
                    },
                    flow_tag: if op == OP_RESP_SEND { tag } else { 0 },
                    vlan_tci: vlan,
                    l3_hdr_type: cqe.get(L3_HDR_TYPE),
                    l4_hdr_type: cqe.get(L4_HDR_TYPE),
                };
                r.ci.store(ci.wrapping_add(1), Ordering::Release);
                Ok(())
            },
            |out| {
                // A dead device: every posted receive, oldest first, as a flush completion.
                let mut n = 0;
                while n < out.len() {
                    let ci = r.ci.load(Ordering::Relaxed);
                    if ci == r.pi.load(Ordering::Acquire) {
                        break;
                    }
                    out[n] = flushed(r.wr_id[(ci & r.mask) as usize].load(Ordering::Relaxed));
                    n += 1;
                    r.ci.store(ci.wrapping_add(1), Ordering::Release);
                }
                n
            },
        )
    }

    fn teardown(&mut self) -> Result<(), DriverError> {
        if std::mem::replace(&mut self.done, true) {
            return Ok(());
        }
        let mut i = DestroyRqIn::new_cmd();
        i.set_rqn(self.rqn);
        let r = self.ring.pd.hca().cmdq().exec(&i, &[], &mut []);
        crate::dma::release_after_destroy(
            &*self.ring.bus,
            &mut self.ring.buf,
            r,
            "DESTROY_RQ",
            self.rqn,
        )
    }
}

drop_by_teardown!(RawRq, "RQ", rqn);

/// An Ethernet send queue (CREATE_SQ) on a [`Tis`], with its own CQ, in RDY.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
/// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
/// use rnic_driver::eth::{RawSq, Tis, TransportDomain};
/// use std::sync::Arc;
/// let tis = Arc::new(Tis::create(&Arc::new(TransportDomain::alloc(&hca)?))?);
/// let sq = RawSq::create(&pd, &tis, 16)?;
/// // A whole 60-byte frame inline.
/// sq.post_send(1, &[0xFF; 60], &[], true)?;
/// let mut wc = [Default::default(); 1];
/// assert_eq!(sq.poll(&mut wc)?, 1);
/// assert_eq!((wc[0].wr_id, wc[0].status), (1, rnic_driver::wr::WcStatus::Success));
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct RawSq {
    ring: Ring,
    _tis: Arc<Tis>,
    sqn: u32,
    uar_off: usize,
    /// Doorbells rung (0x800 / 0x900 alternate).
    doorbells: AtomicU64,
    /// The WQEBB counter after each posted WQE, by its first WQEBB's slot.
    next: Box<[AtomicU32]>,
    done: bool,
}

// SAFETY: as for `RawRq`.
unsafe impl Send for RawSq {}
// SAFETY: see `Send`.
unsafe impl Sync for RawSq {}

impl RawSq {
    /// CREATE_SQ on `tis` with room for at least `max_wr` sends (each up to
    /// [`RAW_SEND_MAX_INLINE`] bytes inline and [`RAW_SEND_MAX_SGE`] data segments), then
    /// MODIFY_SQ to RDY. The SQ requires the L2 header inline (`min_wqe_inline_mode` L2).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
    /// # use rnic_driver::eth::{RawSq, Tis, TransportDomain};
    /// # use std::sync::Arc;
    /// let tis = Arc::new(Tis::create(&Arc::new(TransportDomain::alloc(&hca)?))?);
    /// let a = RawSq::create(&pd, &tis, 8)?;
    /// let b = RawSq::create(&pd, &tis, 8)?;
    /// assert_ne!(a.sqn(), b.sqn());
    /// # Ok(()) }
    /// ```
    pub fn create(pd: &Arc<Pd>, tis: &Arc<Tis>, max_wr: u32) -> Result<RawSq, DriverError> {
        let hca = pd.hca();
        let g = &hca.caps().general;
        let log = log2_ceil(max_wr.max(1).saturating_mul(MAX_SEND_WQEBBS));
        if log > g.log_max_wq_sz() || log > 15 {
            return Err(DriverError::InvalidArgument(format!(
                "SQ of {max_wr} sends: beyond the device's limits"
            )));
        }
        let uar = hca.uar().ok_or(DriverError::Closed)?;
        let ring = Ring::new(pd, log, WQEBB)?;
        let mut cmd = CreateSqIn::new_cmd();
        let c = cmd.ctx_mut();
        c.set_cqn(ring.cq.cqn());
        c.set_state(WqState::Rst.into());
        c.set_min_wqe_inline_mode(inline_mode::L2);
        c.set_tis_lst_sz(1);
        c.set_tis_num_0(tis.tisn());
        let wq = c.wq_mut();
        wq.set_wq_type(WqType::Cyclic.into());
        wq.set_pd(pd.pdn());
        wq.set_uar_page(uar.index());
        wq.set_dbr_addr(ring.dbr_iova());
        wq.set_log_wq_stride(WQEBB.trailing_zeros() as u8);
        wq.set_log_wq_sz(log);
        let pas = ring.pas(WQEBB << log);
        let sqn = match hca.cmdq().exec(&cmd, &pas, &mut []) {
            Ok(o) => o.sqn(),
            Err(e) => return Err(ring.failed(e, "CREATE_SQ")),
        };
        let n = ring.mask as usize + 1;
        let sq = RawSq {
            ring,
            _tis: tis.clone(),
            sqn,
            uar_off: uar.bar_offset(),
            doorbells: AtomicU64::new(0),
            next: (0..n).map(|_| AtomicU32::new(0)).collect(),
            done: false,
        };
        let mut m = ModifySqIn::new_cmd();
        m.set_sqn(sqn);
        m.set_sq_state(WqState::Rst.into());
        m.ctx_mut().set_state(WqState::Rdy.into());
        hca.cmdq().exec(&m, &[], &mut [])?;
        Ok(sq)
    }

    /// The SQ number.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
    /// # let tis = std::sync::Arc::new(rnic_driver::eth::Tis::create(&std::sync::Arc::new(rnic_driver::eth::TransportDomain::alloc(&hca)?))?);
    /// assert_ne!(rnic_driver::eth::RawSq::create(&pd, &tis, 4)?.sqn(), 0);
    /// # Ok(()) }
    /// ```
    pub fn sqn(&self) -> u32 {
        self.sqn
    }

    /// The send queue ring in host memory (`(start, bytes)`) and the doorbell record (dword
    /// 1: the send counter): for diagnostics and tests that play the host writing WQEs, as
    /// [`crate::qp::Qp::sq_ring`] is for a QP. Access them only with volatile reads and
    /// writes, while the SQ exists.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
    /// use rnic_driver::eth::{RawSq, Tis, TransportDomain};
    /// use std::sync::Arc;
    /// let tis = Arc::new(Tis::create(&Arc::new(TransportDomain::alloc(&hca)?))?);
    /// let sq = RawSq::create(&pd, &tis, 4)?;
    /// let (_ring, bytes, _dbrec) = sq.sq_ring();
    /// assert_eq!(bytes, 16 * 64); // 4 sends of up to 4 WQEBBs
    /// # Ok(()) }
    /// ```
    pub fn sq_ring(&self) -> (NonNull<u8>, usize, NonNull<u8>) {
        let r = &self.ring;
        (r.base, (r.mask as usize + 1) * WQEBB, r.dbrec)
    }

    /// The SQ's own completion queue (its ring, for diagnostics and tests; completions are
    /// taken with [`RawSq::poll`]).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
    /// # use rnic_driver::eth::{RawSq, Tis, TransportDomain};
    /// # use std::sync::Arc;
    /// # let tis = Arc::new(Tis::create(&Arc::new(TransportDomain::alloc(&hca)?))?);
    /// let sq = RawSq::create(&pd, &tis, 4)?;
    /// assert_eq!(sq.cq().consumer_index(), 0);
    /// # Ok(()) }
    /// ```
    pub fn cq(&self) -> &Cq {
        &self.ring.cq
    }

    /// Sends one frame: `headers` (its first bytes, at least the 18-byte L2 header the
    /// device requires inline, at most [`RAW_SEND_MAX_INLINE`]) copied into the WQE's
    /// Ethernet segment, then the bytes `sgl` points at (at most [`RAW_SEND_MAX_SGE`]).
    /// `signaled`: a completion is written when it is sent (errors always are). Rings one
    /// doorbell; allocation-free; one poster at a time.
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
    /// # let tis = Arc::new(rnic_driver::eth::Tis::create(&Arc::new(rnic_driver::eth::TransportDomain::alloc(&hca)?))?);
    /// let sq = rnic_driver::eth::RawSq::create(&pd, &tis, 4)?;
    /// let short = sq.post_send(1, &[0; 14], &[mr.sge(0, 46)], true).unwrap_err();
    /// assert_eq!(short.kind, PostErrorKind::InlineTooShort { given: 14, min: 18 });
    /// sq.post_send(2, &[0xFF; 18], &[mr.sge(0, 46)], true)?;
    /// # Ok(()) }
    /// ```
    pub fn post_send(
        &self,
        wr_id: u64,
        headers: &[u8],
        sgl: &[Sge],
        signaled: bool,
    ) -> Result<(), PostError> {
        let err = |kind| PostError { index: 0, kind };
        if headers.len() < ETH_L2_INLINE_HEADER_SIZE {
            return Err(err(PostErrorKind::InlineTooShort {
                given: headers.len(),
                min: ETH_L2_INLINE_HEADER_SIZE,
            }));
        }
        if headers.len() > RAW_SEND_MAX_INLINE {
            return Err(err(PostErrorKind::InlineTooLong {
                given: headers.len(),
                max: RAW_SEND_MAX_INLINE,
            }));
        }
        let sgl_len = sgl.iter().filter(|s| s.len != 0).count();
        if sgl_len > RAW_SEND_MAX_SGE {
            return Err(err(PostErrorKind::TooManySges {
                given: sgl.len(),
                max: RAW_SEND_MAX_SGE,
            }));
        }
        if sgl.iter().any(|s| s.len > 0x7FFF_FFFF) {
            return Err(err(PostErrorKind::SgeTooLong));
        }
        let Some(_claim) = Claim::take(&self.ring.claim) else {
            return Err(err(PostErrorKind::Busy));
        };
        let r = &self.ring;
        let eth_ds = eth_seg_ds(headers.len());
        let ds = 1 + eth_ds + sgl_len;
        debug_assert!(ds <= usize::from(MAX_DS));
        let nbb = ds_to_wqebbs(ds as u8) as u32;
        let pi = r.pi.load(Ordering::Relaxed);
        if pi.wrapping_sub(r.ci.load(Ordering::Acquire)) + nbb > r.mask + 1 {
            return Err(err(PostErrorKind::QueueFull));
        }
        // Assemble the WQE on the stack, then copy it WQEBB by WQEBB (it may wrap the ring).
        let mut wqe = [0u8; MAX_SEND_WQEBBS as usize * WQEBB];
        let ctrl0 = (u32::from(pi as u16) << 8) | u32::from(SendOpcode::Send.raw());
        let ctrl1 = (self.sqn << 8) | ds as u32;
        wqe[0..4].copy_from_slice(&ctrl0.to_be_bytes());
        wqe[4..8].copy_from_slice(&ctrl1.to_be_bytes());
        if signaled {
            wqe[11] = CE_CQ_UPDATE << 2;
        }
        let eth = DS_SIZE;
        wqe[eth + 12..eth + 14].copy_from_slice(&(headers.len() as u16).to_be_bytes());
        let start = eth + ETH_SEG_INLINE_START;
        wqe[start..start + headers.len()].copy_from_slice(headers);
        let mut at = (1 + eth_ds) * DS_SIZE;
        for s in sgl.iter().filter(|s| s.len != 0) {
            wqe[at..at + 4].copy_from_slice(&s.len.to_be_bytes());
            wqe[at + 4..at + 8].copy_from_slice(&s.lkey.to_be_bytes());
            wqe[at + 8..at + 16].copy_from_slice(&s.addr.to_be_bytes());
            at += DS_SIZE;
        }
        for k in 0..nbb {
            let slot = (pi.wrapping_add(k) & r.mask) as usize;
            let src = &wqe[k as usize * WQEBB..(k as usize + 1) * WQEBB];
            for (i, w) in src.chunks_exact(8).enumerate() {
                let v = u64::from_be_bytes(w.try_into().unwrap_or([0; 8]));
                // SAFETY: the slot is inside the ring (a volatile store, no reference).
                unsafe { write_be64(r.base.as_ptr().add(slot * WQEBB + i * 8), v) };
            }
        }
        let slot = (pi & r.mask) as usize;
        let next = pi.wrapping_add(nbb);
        r.wr_id[slot].store(wr_id, Ordering::Relaxed);
        self.next[slot].store(next, Ordering::Relaxed);
        r.pi.store(next, Ordering::Relaxed);
        fence(Ordering::Release);
        // SAFETY: dword 1 of the doorbell record is the send counter.
        unsafe { write_be32(r.dbrec.as_ptr().add(4), next & 0xFFFF) };
        fence(Ordering::SeqCst);
        let n = self.doorbells.fetch_add(1, Ordering::Relaxed);
        let first = u64::from_be_bytes(wqe[..8].try_into().unwrap_or([0; 8]));
        r.bus.write64(self.uar_off + send_doorbell_offset(n), first);
        Ok(())
    }

    /// Polls up to `out.len()` send completions. A completion retires its WQE and every
    /// unsignaled one before it.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
    /// # let tis = std::sync::Arc::new(rnic_driver::eth::Tis::create(&std::sync::Arc::new(rnic_driver::eth::TransportDomain::alloc(&hca)?))?);
    /// let sq = rnic_driver::eth::RawSq::create(&pd, &tis, 4)?;
    /// assert_eq!(sq.poll(&mut [Default::default(); 4])?, 0);
    /// # Ok(()) }
    /// ```
    pub fn poll(&self, out: &mut [EthCompletion]) -> Result<usize, PollError> {
        let r = &self.ring;
        r.cq.poll_raw(
            out,
            |cqe, op_own, slot_out| {
                let (qpn, counter) = (cqe.get(QPN), cqe.get(WQE_COUNTER));
                let op = opcode_of(op_own);
                if op != OP_REQ && op != OP_REQ_ERR {
                    return Err((qpn, BadCqe::UnknownOpcode(op)));
                }
                let (ci, pi) = (r.ci.load(Ordering::Relaxed), r.pi.load(Ordering::Acquire));
                let ahead = counter.wrapping_sub(ci as u16);
                if qpn != self.sqn {
                    return Err((qpn, BadCqe::UnknownQpn));
                }
                if u32::from(ahead) >= pi.wrapping_sub(ci) {
                    return Err((qpn, BadCqe::WqeCounterOutOfRange(counter)));
                }
                let slot = (u32::from(counter) & r.mask) as usize;
                *slot_out = EthCompletion {
                    wr_id: r.wr_id[slot].load(Ordering::Relaxed),
                    status: status_of(cqe, op),
                    ..EthCompletion::default()
                };
                r.ci.store(self.next[slot].load(Ordering::Relaxed), Ordering::Release);
                Ok(())
            },
            |out| {
                // A dead device: every posted send, oldest first, as a flush completion (each
                // WQE's first slot records where the next one starts).
                let mut n = 0;
                while n < out.len() {
                    let ci = r.ci.load(Ordering::Relaxed);
                    if ci == r.pi.load(Ordering::Acquire) {
                        break;
                    }
                    let slot = (ci & r.mask) as usize;
                    out[n] = flushed(r.wr_id[slot].load(Ordering::Relaxed));
                    n += 1;
                    r.ci.store(self.next[slot].load(Ordering::Relaxed), Ordering::Release);
                }
                n
            },
        )
    }

    fn teardown(&mut self) -> Result<(), DriverError> {
        if std::mem::replace(&mut self.done, true) {
            return Ok(());
        }
        let mut i = DestroySqIn::new_cmd();
        i.set_sqn(self.sqn);
        let r = self.ring.pd.hca().cmdq().exec(&i, &[], &mut []);
        crate::dma::release_after_destroy(
            &*self.ring.bus,
            &mut self.ring.buf,
            r,
            "DESTROY_SQ",
            self.sqn,
        )
    }
}

drop_by_teardown!(RawSq, "SQ", sqn);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eth::TransportDomain;
    use crate::health::FatalReason;
    use crate::mr::Mr;
    use crate::wr::Access;
    use crate::{Hca, HcaConfig};
    use rnic_emulator::{Device, Profile, RunMode};

    #[test]
    fn a_dead_devices_raw_queues_flush_what_they_hold_oldest_first() {
        let dev = Device::new(Profile::default(), RunMode::Deterministic);
        let hca = Arc::new(Hca::open(Arc::new(dev.bus()), HcaConfig::default()).expect("open"));
        let pd = Arc::new(Pd::alloc(&hca).expect("pd"));
        let mr = Mr::alloc(&pd, 4096, Access::LOCAL_WRITE).expect("mr");
        let rq = RawRq::create(&pd, 4, 1).expect("rq");
        let tis = Arc::new(
            Tis::create(&Arc::new(TransportDomain::alloc(&hca).expect("td"))).expect("tis"),
        );
        let sq = RawSq::create(&pd, &tis, 4).expect("sq");
        for i in 0..3 {
            rq.post_recv(10 + i, &[mr.sge(i as usize * 1024, 1024)])
                .expect("recv");
        }
        // The device does not run: the sends stay outstanding (the second spans WQEBBs).
        dev.set_auto_step(false);
        let headers = [0u8; ETH_L2_INLINE_HEADER_SIZE];
        sq.post_send(20, &headers, &[mr.sge(0, 60)], true)
            .expect("send");
        sq.post_send(21, &[0u8; 100], &[], true).expect("send");
        let mut wc = [EthCompletion::default(); 8];
        assert_eq!(rq.poll(&mut wc), Ok(0));
        assert!(hca.cmdq().declare_fatal(FatalReason::PciLinkDead));
        // Two at a time: the rest waits for the next poll.
        assert_eq!(rq.poll(&mut wc[..2]), Ok(2));
        assert_eq!(rq.poll(&mut wc[2..]), Ok(1));
        let ids: Vec<_> = wc[..3].iter().map(|c| (c.wr_id, c.status)).collect();
        assert_eq!(ids, [10, 11, 12].map(|i| (i, WcStatus::WrFlushErr)));
        assert_eq!(rq.poll(&mut wc), Ok(0));
        assert_eq!(sq.poll(&mut wc), Ok(2));
        assert_eq!(
            [(wc[0].wr_id, wc[0].status), (wc[1].wr_id, wc[1].status)],
            [(20, WcStatus::WrFlushErr), (21, WcStatus::WrFlushErr)]
        );
        assert_eq!(sq.poll(&mut wc), Ok(0));
    }
}
