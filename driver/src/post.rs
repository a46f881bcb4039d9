//! The posting half of the data path: send WQEs and their doorbell, receive WQEs.
//!
//! No allocation, no lock, no system call: WQEs are written straight into the SQ ring with
//! volatile 8-byte stores, the wr_id and shape of each WQE into the QP's slot table, and a
//! list of work requests ends with one doorbell (PRM section 5): release fence, the send
//! counter into the doorbell record, a full fence, one 64-bit write of the last WQE's first
//! 8 bytes to UAR + 0x800 / 0x900 (alternating).
//!
//! One thread posts to a queue at a time: a second concurrent `post_send` (or `post_recv`)
//! on the same QP fails at once with [`PostErrorKind::Busy`] instead of spinning. Sends and
//! receives have separate claims, and polling the CQs may run on other threads.

use crate::dma::{write_be32, write_be64};
use crate::qp::{Qp, QpType};
use crate::wq::{Claim, SentWqe, write_recv};
use crate::wr::{
    Access, MwBind, MwType, Payload, PostError, PostErrorKind, RecvWr, SendFlags, SendOp, SendWr,
    WcOpcode,
};
use rnic_hw_regs::ctx::{MKC_ACCESS_MODE_KLM, Mkc};
use rnic_hw_regs::doorbell::send_doorbell_offset;
use rnic_hw_regs::umr::{
    BIND_KLM_OCTOWORDS, MAX_KLM_BYTE_COUNT, MKEY_MASK_ACCESS, MKEY_MASK_FREE, MKEY_MASK_LEN,
    MKEY_MASK_MKEY, MKEY_MASK_QPN, MKEY_MASK_START_ADDR, UMR_CTRL_CHECK_FREE, UMR_CTRL_CHECK_QPN,
    UMR_CTRL_INLINE, UMR_CTRL_TRANSLATION_OFFSET, UmrCtrlSeg, UmrKlmSeg,
};
use rnic_hw_regs::wqe::{CE_CQ_UPDATE, INLINE_SEG_FLAG, SendOpcode, inline_seg_ds};
use std::sync::atomic::{Ordering, fence};
use zerocopy::IntoBytes;

/// `fm_ce_se` bits (fm 7:5, ce 3:2, se 1).
const FM_FENCE: u8 = 0x80;
/// mkc `qpn` of a key bound to no QP.
const QPN_UNBOUND: u32 = 0xFF_FFFF;
/// The rights a window may grant.
const MW_RIGHTS: Access = Access::REMOTE_READ
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_ATOMIC);
const CE_UPDATE: u8 = CE_CQ_UPDATE << 2;
const SE: u8 = 0x02;

impl Qp {
    /// Writes one 16-byte unit `ds` of the WQE starting at counter `pi` (wrapping the ring).
    #[inline(always)]
    fn put(&self, pi: u16, ds: usize, hi: u64, lo: u64) {
        let off = (usize::from(pi) * 64 + ds * 16) & self.sq_bytes_mask;
        // SAFETY: `off` is inside the SQ (masked to its size), 16-byte aligned; the SQ is
        // inside the QP's live region and the device only reads it.
        unsafe {
            let p = self.sq_base.as_ptr().add(off);
            write_be64(p, hi);
            write_be64(p.add(8), lo);
        }
    }

    /// Writes 16 raw bytes as unit `ds` (in memory order, as `put` writes big-endian).
    #[inline(always)]
    fn put_raw(&self, pi: u16, ds: usize, b: &[u8; 16]) {
        let v = u128::from_be_bytes(*b);
        self.put(pi, ds, (v >> 64) as u64, v as u64);
    }

    /// Posts send work requests behind one doorbell. On error, the requests before
    /// [`PostError::index`] are posted and their doorbell rung.
    ///
    /// ```no_run
    /// # fn f(qp: &rnic_driver::qp::Qp, mr: &rnic_driver::mr::Mr) -> Result<(), rnic_driver::wr::PostError> {
    /// use rnic_driver::wr::{Payload, SendFlags, SendOp, SendWr};
    ///
    /// let sgl = [mr.sge(0, 64)];
    /// let wrs = [
    ///     SendWr { wr_id: 1, op: SendOp::Send, payload: Payload::Sgl(&sgl), flags: SendFlags::NONE, ud: None },
    ///     SendWr { wr_id: 2, op: SendOp::SendImm { imm: 7 }, payload: Payload::Inline(b"hi"), flags: SendFlags::SIGNALED, ud: None },
    /// ];
    /// qp.post_send(&wrs)?; // one doorbell; wr 1 retires with wr 2's completion
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn post_send(&self, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        let Some(_claim) = Claim::take(&self.send_claim) else {
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
        let sq = &self.shared.sq;
        let start = sq.pi.load(Ordering::Relaxed) as u16;
        let mut pi = start;
        let mut free = self
            .sq_wqebbs
            .wrapping_sub(pi.wrapping_sub(sq.ci.load(Ordering::Acquire) as u16));
        // Work requests: at most `max_send_wr` outstanding, whatever their WQEBBs.
        let max_wr = self.caps.max_send_wr;
        let mut wr_seq = sq.wr_pi.load(Ordering::Relaxed);
        let wr_room =
            |seq: u32| max_wr.saturating_sub(seq.wrapping_sub(sq.wr_ci.load(Ordering::Acquire)));
        let mut wr_free = wr_room(wr_seq);
        let mut last = 0u64;
        let mut err = None;
        for (index, wr) in wrs.iter().enumerate() {
            if wr_free == 0 {
                // The poller may have retired some since the list started.
                wr_free = wr_room(wr_seq);
                if wr_free == 0 {
                    err = Some(PostError {
                        index,
                        kind: PostErrorKind::QueueFull,
                    });
                    break;
                }
            }
            match self.build(wr, pi, &mut free) {
                Ok((nbb, ctrl)) => {
                    wr_free -= 1;
                    wr_seq = wr_seq.wrapping_add(1);
                    sq.slots[usize::from(pi & sq.mask)]
                        .wr_seq
                        .store(wr_seq, Ordering::Relaxed);
                    pi = pi.wrapping_add(nbb);
                    last = ctrl;
                }
                Err(kind) => {
                    err = Some(PostError { index, kind });
                    break;
                }
            }
        }
        if pi != start {
            sq.wr_pi.store(wr_seq, Ordering::Relaxed);
            sq.pi.store(u32::from(pi), Ordering::Release);
            // WQEs before the doorbell record.
            fence(Ordering::Release);
            // SAFETY: the doorbell record (dword 1: send counter) is inside the live region.
            unsafe { write_be32(self.dbrec.as_ptr().add(4), u32::from(pi)) };
            // The doorbell record before the MMIO doorbell.
            fence(Ordering::SeqCst);
            let n = self.db_count.load(Ordering::Relaxed);
            self.db_count.store(n.wrapping_add(1), Ordering::Relaxed);
            self.bus
                .write64(self.uar_off + send_doorbell_offset(u64::from(n)), last);
        }
        match err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Takes `nbb` WQEBBs of the `free` ones at counter `pi`, looking again at what the
    /// poller retired when they seem to run out.
    #[inline(always)]
    fn reserve(&self, pi: u16, nbb: u16, free: &mut u16) -> Result<(), PostErrorKind> {
        if nbb > *free {
            // The poller may have retired WQEs since the list started.
            let ci = self.shared.sq.ci.load(Ordering::Acquire) as u16;
            *free = self.sq_wqebbs.wrapping_sub(pi.wrapping_sub(ci));
            if nbb > *free {
                return Err(PostErrorKind::QueueFull);
            }
        }
        *free -= nbb;
        Ok(())
    }

    /// Writes the control segment of a WQE of `ds` units at counter `pi`; returns its first
    /// 8 bytes (the doorbell value).
    #[inline(always)]
    fn put_ctrl(&self, pi: u16, opcode: SendOpcode, ds: usize, flags: SendFlags, imm: u32) -> u64 {
        let mut fm = 0u8;
        if flags.contains(SendFlags::SIGNALED) || self.sig_all {
            fm |= CE_UPDATE;
        }
        if flags.contains(SendFlags::FENCE) {
            fm |= FM_FENCE;
        }
        if flags.contains(SendFlags::SOLICITED) {
            fm |= SE;
        }
        let w0 = (u32::from(pi) << 8) | u32::from(opcode as u8);
        let w1 = (self.qpn << 8) | ds as u32;
        let ctrl = (u64::from(w0) << 32) | u64::from(w1);
        self.put(pi, 0, ctrl, (u64::from(fm) << 32) | u64::from(imm));
        ctrl
    }

    /// Checks and writes one WQE at counter `pi`; returns its WQEBB count and the first 8
    /// bytes of its control segment.
    #[inline(always)]
    fn build(&self, wr: &SendWr<'_>, pi: u16, free: &mut u16) -> Result<(u16, u64), PostErrorKind> {
        use PostErrorKind as E;
        let t = self.qp_type;
        let (opcode, imm, raddr, atomic) = match wr.op {
            SendOp::Send => (SendOpcode::Send, 0, None, None),
            SendOp::SendImm { imm } => (SendOpcode::SendImm, imm, None, None),
            SendOp::SendInv { rkey } if t == QpType::Rc => {
                (SendOpcode::SendInval, rkey, None, None)
            }
            SendOp::Write { raddr, rkey } if !t.is_datagram() => {
                (SendOpcode::RdmaWrite, 0, Some((raddr, rkey)), None)
            }
            SendOp::WriteImm { raddr, rkey, imm } if !t.is_datagram() => {
                (SendOpcode::RdmaWriteImm, imm, Some((raddr, rkey)), None)
            }
            SendOp::Read { raddr, rkey } if t == QpType::Rc => {
                (SendOpcode::RdmaRead, 0, Some((raddr, rkey)), None)
            }
            SendOp::CmpSwap {
                raddr,
                rkey,
                compare,
                swap,
            } if t == QpType::Rc => (
                SendOpcode::AtomicCs,
                0,
                Some((raddr, rkey)),
                Some((swap, compare)),
            ),
            SendOp::FetchAdd { raddr, rkey, add } if t == QpType::Rc => {
                (SendOpcode::AtomicFa, 0, Some((raddr, rkey)), Some((add, 0)))
            }
            SendOp::BindMw(b) if !t.is_datagram() => return self.build_umr(wr, pi, free, Some(b)),
            SendOp::LocalInv { .. } if !t.is_datagram() => {
                return self.build_umr(wr, pi, free, None);
            }
            _ => return Err(E::OpNotSupported),
        };
        let ud = if t.is_datagram() {
            let d = wr.ud.ok_or(E::MissingUdDest)?;
            // The AV is the PD's: a pointer compare, no lock.
            if !std::sync::Arc::ptr_eq(d.ah.pd(), &self.pd) {
                return Err(E::AhOtherPd);
            }
            Some(d)
        } else {
            None
        };
        // Size the WQE first.
        let mut ds = 1 + usize::from(ud.is_some()) * 3 + usize::from(raddr.is_some());
        ds += usize::from(atomic.is_some());
        let mut len: u64 = 0;
        match wr.payload {
            Payload::Sgl(sgl) => {
                if sgl.len() > self.caps.max_send_sge as usize {
                    return Err(E::TooManySges {
                        given: sgl.len(),
                        max: self.caps.max_send_sge as usize,
                    });
                }
                for s in sgl {
                    if s.len > 0x7FFF_FFFF {
                        return Err(E::SgeTooLong);
                    }
                    if s.len != 0 {
                        ds += 1;
                        len += u64::from(s.len);
                    }
                }
                if atomic.is_some() && (len != 8 || sgl.iter().filter(|s| s.len != 0).count() != 1)
                {
                    return Err(E::AtomicNeeds8Bytes);
                }
            }
            Payload::Inline(data) => {
                if atomic.is_some() || opcode == SendOpcode::RdmaRead {
                    return Err(E::InlineNotAllowed);
                }
                if data.len() > self.caps.max_inline_data as usize {
                    return Err(E::InlineTooLong {
                        given: data.len(),
                        max: self.caps.max_inline_data as usize,
                    });
                }
                if !data.is_empty() {
                    ds += inline_seg_ds(data.len());
                }
                len = data.len() as u64;
            }
        }
        let nbb = ds.div_ceil(4) as u16;
        self.reserve(pi, nbb, free)?;
        let ctrl = self.put_ctrl(pi, opcode, ds, wr.flags, imm);
        let mut at = 1;
        if let Some(d) = ud {
            let av = d.ah.words(d.remote_qpn, d.remote_qkey);
            self.put(pi, 1, av[0], av[1]);
            self.put(pi, 2, av[2], av[3]);
            self.put(pi, 3, av[4], av[5]);
            at = 4;
        }
        if let Some((ra, rkey)) = raddr {
            self.put(pi, at, ra, u64::from(rkey) << 32);
            at += 1;
        }
        if let Some((swap_add, compare)) = atomic {
            self.put(pi, at, swap_add, compare);
            at += 1;
        }
        match wr.payload {
            Payload::Sgl(sgl) => {
                for s in sgl.iter().filter(|s| s.len != 0) {
                    self.put(pi, at, (u64::from(s.len) << 32) | u64::from(s.lkey), s.addr);
                    at += 1;
                }
            }
            Payload::Inline(data) if !data.is_empty() => {
                // Header (4 bytes) and data, padded to 16-byte units.
                let mut chunk = [0u8; 16];
                chunk[..4].copy_from_slice(&(data.len() as u32 | INLINE_SEG_FLAG).to_be_bytes());
                let first = data.len().min(12);
                chunk[4..4 + first].copy_from_slice(&data[..first]);
                self.put_raw(pi, at, &chunk);
                at += 1;
                for piece in data[first..].chunks(16) {
                    let mut chunk = [0u8; 16];
                    chunk[..piece.len()].copy_from_slice(piece);
                    self.put_raw(pi, at, &chunk);
                    at += 1;
                }
            }
            Payload::Inline(_) => {}
        }
        debug_assert_eq!(at, ds);
        let slot = &self.shared.sq.slots[usize::from(pi & self.shared.sq.mask)];
        slot.wr_id.store(wr.wr_id, Ordering::Relaxed);
        let next = pi.wrapping_add(nbb);
        slot.record(SentWqe::new(pi, next, opcode));
        slot.len
            .store(len.min(u64::from(u32::MAX)) as u32, Ordering::Relaxed);
        Ok((nbb, ctrl))
    }

    /// Writes a UMR WQE at counter `pi`, as rdma-core's `set_bind_wr` lays it out: control
    /// segment (`imm` = the window's current key), UMR control segment, mkey segment, and
    /// for a bind with a length one KLM padded to 64 bytes; `bind` None is a LOCAL_INV of
    /// the rkey in `wr.op`. Returns as [`Qp::build`].
    #[inline(never)]
    fn build_umr(
        &self,
        wr: &SendWr<'_>,
        pi: u16,
        free: &mut u16,
        bind: Option<MwBind>,
    ) -> Result<(u16, u64), PostErrorKind> {
        use PostErrorKind as E;
        let mut ctrl = UmrCtrlSeg::default();
        let mut mkey = Mkc::default();
        let mut klm = None;
        let (key, wc) = match (bind, wr.op) {
            (Some(b), _) => {
                if !b.mr_access.contains(Access::MW_BIND) {
                    return Err(E::MrNoMwBind);
                }
                if !MW_RIGHTS.contains(b.access)
                    || b.len > MAX_KLM_BYTE_COUNT
                    || (b.len == 0 && b.mw_type == MwType::Two)
                {
                    return Err(E::BadMwBind);
                }
                let type2 = b.mw_type == MwType::Two;
                let mut flags = UMR_CTRL_INLINE | UMR_CTRL_TRANSLATION_OFFSET;
                let mut mask = MKEY_MASK_FREE | MKEY_MASK_MKEY;
                if type2 {
                    mask |= MKEY_MASK_QPN;
                    flags |= UMR_CTRL_CHECK_FREE;
                }
                mkey.set_qpn(if type2 { self.qpn } else { QPN_UNBOUND });
                mkey.set_mkey_7_0(b.rkey as u8);
                if b.len == 0 {
                    // A type-1 unbind: the window becomes free.
                    mkey.set_free(true);
                } else {
                    mask |= MKEY_MASK_LEN | MKEY_MASK_START_ADDR | MKEY_MASK_ACCESS;
                    ctrl.set_klm_octowords(BIND_KLM_OCTOWORDS);
                    mkey.set_access_mode_1_0(MKC_ACCESS_MODE_KLM);
                    mkey.set_rr(b.access.contains(Access::REMOTE_READ));
                    mkey.set_rw(b.access.contains(Access::REMOTE_WRITE));
                    mkey.set_a(b.access.contains(Access::REMOTE_ATOMIC));
                    mkey.set_start_addr(b.addr);
                    mkey.set_len(b.len);
                    let mut k = UmrKlmSeg::default();
                    k.set_byte_count(b.len as u32);
                    k.set_mkey(b.mr_lkey);
                    k.set_address(b.addr);
                    klm = Some(k);
                }
                ctrl.set_flags(flags);
                ctrl.set_mkey_mask(mask);
                (b.mw_rkey, WcOpcode::BindMw)
            }
            (None, SendOp::LocalInv { rkey }) => {
                ctrl.set_flags(UMR_CTRL_INLINE | UMR_CTRL_TRANSLATION_OFFSET | UMR_CTRL_CHECK_QPN);
                ctrl.set_mkey_mask(MKEY_MASK_FREE | MKEY_MASK_MKEY | MKEY_MASK_QPN);
                mkey.set_free(true);
                mkey.set_qpn(QPN_UNBOUND);
                (rkey, WcOpcode::LocalInv)
            }
            (None, _) => return Err(E::OpNotSupported),
        };
        // ctrl (1) + UMR control (3) + mkey segment (4) + one KLM padded to 64 bytes (4).
        let ds = 8 + if klm.is_some() { 4 } else { 0 };
        let nbb = (ds / 4) as u16;
        self.reserve(pi, nbb, free)?;
        // A UMR solicits nothing: no SE.
        let flags = wr.flags - SendFlags::SOLICITED;
        let first = self.put_ctrl(pi, SendOpcode::Umr, ds, flags, key);
        let mut at = 1;
        for chunk in ctrl
            .as_bytes()
            .chunks_exact(16)
            .chain(mkey.as_bytes().chunks_exact(16))
        {
            let mut b = [0u8; 16];
            b.copy_from_slice(chunk);
            self.put_raw(pi, at, &b);
            at += 1;
        }
        if let Some(k) = klm {
            self.put_raw(pi, at, &k.0);
            for i in 1..4 {
                self.put(pi, at + i, 0, 0);
            }
            at += 4;
        }
        debug_assert_eq!(at, ds);
        let slot = &self.shared.sq.slots[usize::from(pi & self.shared.sq.mask)];
        slot.wr_id.store(wr.wr_id, Ordering::Relaxed);
        slot.record(SentWqe::umr(pi, pi.wrapping_add(nbb), wc));
        slot.len.store(0, Ordering::Relaxed);
        Ok((nbb, first))
    }

    /// Posts receive work requests: WQEs, then the receive counter into the doorbell record
    /// (no MMIO). Not for QPs on an SRQ ([`PostErrorKind::OpNotSupported`]).
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let Fixture { hca, pd, cq, qp, mr } = Fixture::loopback(Arc::new(dev.bus()))?;
    /// let sgl = [mr.sge(0, 16), mr.sge(64, 16)];
    /// qp.post_recv(&[RecvWr { wr_id: 5, sgl: &sgl }])?;
    /// qp.post_send(&[SendWr { wr_id: 6, op: SendOp::Send, payload: Payload::Inline(b"0123456789abcdefXY"), flags: SendFlags::NONE, ud: None }])?;
    /// let wc = wait(&cq); // the SEND is unsignaled: only the receive completes
    /// assert_eq!((wc.wr_id, wc.opcode, wc.byte_len), (5, WcOpcode::Recv, 18));
    /// let mut tail = [0u8; 2];
    /// mr.read(64, &mut tail); // scattered over both SGEs
    /// assert_eq!(&tail, b"XY");
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn post_recv(&self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        let Some(rq) = &self.shared.rq else {
            return Err(PostError {
                index: 0,
                kind: PostErrorKind::OpNotSupported,
            });
        };
        let Some(_claim) = Claim::take(&self.recv_claim) else {
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
        let start = rq.pi.load(Ordering::Relaxed);
        let mut pi = start;
        let mut ci = rq.ci.load(Ordering::Acquire);
        let size = rq.mask + 1;
        let mut err = None;
        let max = self.rq_stride / 16;
        for (index, wr) in wrs.iter().enumerate() {
            if pi.wrapping_sub(ci) >= size {
                ci = rq.ci.load(Ordering::Acquire);
                if pi.wrapping_sub(ci) >= size {
                    err = Some(PostError {
                        index,
                        kind: PostErrorKind::QueueFull,
                    });
                    break;
                }
            }
            let slot = (pi & rq.mask) as usize;
            // SAFETY: `slot < size`, each WQE `rq_stride` bytes inside the RQ.
            let base = unsafe { self.rq_base.as_ptr().add(slot * self.rq_stride) };
            match write_recv(base, max, wr.sgl) {
                Ok(len) => {
                    rq.wr_id[slot].store(wr.wr_id, Ordering::Relaxed);
                    rq.len[slot].store(len, Ordering::Relaxed);
                    pi = pi.wrapping_add(1);
                }
                Err(kind) => {
                    err = Some(PostError { index, kind });
                    break;
                }
            }
        }
        if pi != start {
            rq.pi.store(pi, Ordering::Release);
            fence(Ordering::Release);
            // SAFETY: dword 0 (receive counter) of the live doorbell record.
            unsafe { write_be32(self.dbrec.as_ptr(), pi & 0xFFFF) };
        }
        match err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod datapath {
    use crate::doc_fixture::Fixture;
    use crate::wr::{Payload, SendFlags, SendOp, SendWr, WcStatus, WorkCompletion};
    use rnic_emulator::{Device, Profile, RunMode};
    use std::sync::Arc;

    /// Posting and polling on a live loopback QP (the set Miri runs: the WQE written into
    /// DMA memory, the doorbell record and BlueFlame, the CQE read back).
    #[test]
    fn a_write_is_posted_and_its_completion_polled() {
        let dev = Device::new(Profile::default(), RunMode::Deterministic);
        let Fixture { cq, qp, mr, .. } = Fixture::loopback(Arc::new(dev.bus())).unwrap();
        mr.write(0, b"hello");
        let sgl = [mr.sge(0, 5)];
        let wr = SendWr {
            wr_id: 7,
            op: SendOp::Write {
                raddr: mr.addr() + 100,
                rkey: mr.rkey(),
            },
            payload: Payload::Sgl(&sgl),
            flags: SendFlags::SIGNALED,
            ud: None,
        };
        qp.post_send(&[wr]).unwrap();
        let mut wc = [WorkCompletion::default(); 2];
        assert_eq!(cq.poll(&mut wc).unwrap(), 1);
        assert_eq!((wc[0].wr_id, wc[0].status), (7, WcStatus::Success));
        let mut got = [0u8; 5];
        mr.read(100, &mut got);
        assert_eq!(&got, b"hello");
    }
}

#[cfg(test)]
mod tests {
    use crate::doc_fixture::prelude::*;
    use crate::mw::Mw;
    use crate::wr::{Access, MwBind, MwType, PostErrorKind, WcOpcode, WcStatus};

    fn fixture() -> (rnic_emulator::Device, Fixture) {
        let dev =
            rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
        let f = Fixture::loopback(Arc::new(dev.bus())).unwrap();
        (dev, f)
    }

    /// The bytes of WQEBBs `0 .. n` of the SQ.
    fn sq_bytes(qp: &Qp, n: usize) -> Vec<u8> {
        // SAFETY: the first `n` WQEBBs are inside the live SQ; the device only reads them.
        (0..n * 64)
            .map(|i| unsafe { qp.sq_base.as_ptr().add(i).read_volatile() })
            .collect()
    }

    fn bind(mw: &Mw, mr: &crate::mr::Mr, len: u64, access: Access) -> SendWr<'static> {
        SendWr {
            wr_id: 9,
            op: SendOp::BindMw(MwBind {
                mw_type: mw.mw_type(),
                mw_rkey: mw.rkey(),
                rkey: mw.next_rkey(),
                mr_lkey: mr.lkey(),
                mr_access: mr.access(),
                addr: mr.addr() + 64,
                len,
                access,
            }),
            payload: Payload::Sgl(&[]),
            flags: SendFlags::SIGNALED,
            ud: None,
        }
    }

    /// A type-2 bind is the WQE rdma-core's `set_bind_wr` writes: ctrl (UMR, 12 DS, imm =
    /// the window's key), UMR control (INLINE | CHECK_FREE | TRANSLATION_OFFSET, 4 KLM
    /// octowords, mask FREE | MKEY | QPN | LEN | START_ADDR | access), the mkey segment
    /// (bound to this QP, the new variant, the rights, range), one KLM; the device executes it.
    #[test]
    fn a_type2_bind_writes_the_umr_wqe() {
        let (_dev, f) = fixture();
        let mr = crate::mr::Mr::alloc(&f.pd, 4096, Access::LOCAL_WRITE | Access::MW_BIND).unwrap();
        let mw = Mw::alloc(&f.pd, MwType::Two).unwrap();
        f.qp.post_send(&[bind(&mw, &mr, 128, Access::REMOTE_WRITE)])
            .unwrap();
        let wc = wait(&f.cq);
        assert_eq!(
            (wc.status, wc.opcode),
            (WcStatus::Success, WcOpcode::BindMw)
        );
        let b = sq_bytes(&f.qp, 3);
        assert_eq!((b[3], b[7] & 0x3F), (0x25, 12));
        assert_eq!(&b[12..16], &mw.rkey().to_be_bytes());
        assert_eq!((b[16], &b[20..22]), (0xB0, &[0, 4][..]));
        assert_eq!(
            u64::from_be_bytes(b[24..32].try_into().unwrap()),
            1 << 29 | 1 << 13 | 1 << 14 | 1 | 1 << 6 | 0xF << 18
        );
        let seg = &b[64..128];
        assert_eq!(seg[0] & 0x40, 0, "not free");
        assert_eq!(seg[2] & 0x7C, 0x20, "remote write only");
        assert_eq!(
            &seg[4..8],
            &(f.qp.qpn() << 8 | (mw.next_rkey() & 0xFF)).to_be_bytes()
        );
        assert_eq!(&seg[0x10..0x18], &(mr.addr() + 64).to_be_bytes());
        assert_eq!(&seg[0x18..0x20], &128u64.to_be_bytes());
        let klm = &b[128..144];
        assert_eq!(&klm[..4], &128u32.to_be_bytes());
        assert_eq!(&klm[4..8], &mr.lkey().to_be_bytes());
        assert_eq!(&klm[8..16], &(mr.addr() + 64).to_be_bytes());
        assert!(
            b[144..192].iter().all(|&x| x == 0),
            "the KLM padded to 64 bytes"
        );
    }

    #[test]
    fn a_local_inv_writes_8_ds_and_frees_the_window() {
        let (_dev, f) = fixture();
        let mr = crate::mr::Mr::alloc(&f.pd, 4096, Access::LOCAL_WRITE | Access::MW_BIND).unwrap();
        let mw = Mw::alloc(&f.pd, MwType::Two).unwrap();
        let rkey = mw.next_rkey();
        let inv = SendWr {
            wr_id: 10,
            op: SendOp::LocalInv { rkey },
            payload: Payload::Sgl(&[]),
            flags: SendFlags::SIGNALED,
            ud: None,
        };
        f.qp.post_send(&[bind(&mw, &mr, 64, Access::REMOTE_READ), inv])
            .unwrap();
        let (a, b) = (wait(&f.cq), wait(&f.cq));
        assert_eq!((a.opcode, b.opcode), (WcOpcode::BindMw, WcOpcode::LocalInv));
        assert_eq!((a.status, b.status), (WcStatus::Success, WcStatus::Success));
        let q = sq_bytes(&f.qp, 5);
        let w = &q[3 * 64..];
        assert_eq!((w[3], w[7] & 0x3F), (0x25, 8));
        assert_eq!(&w[12..16], &rkey.to_be_bytes());
        assert_eq!(w[16], 0x98, "INLINE | TRANSLATION_OFFSET | CHECK_QPN");
        assert_eq!(w[64] & 0x40, 0x40, "mkey segment free");
        // Invalidating again: the window is free, an MW bind error.
        f.qp.post_send(&[inv]).unwrap();
        assert_eq!(wait(&f.cq).status, WcStatus::MwBindErr);
    }

    #[test]
    fn bad_binds_are_refused_when_posting() {
        let (_dev, f) = fixture();
        let plain = crate::mr::Mr::alloc(&f.pd, 4096, Access::LOCAL_WRITE).unwrap();
        let mr = crate::mr::Mr::alloc(&f.pd, 4096, Access::LOCAL_WRITE | Access::MW_BIND).unwrap();
        let mw1 = Mw::alloc(&f.pd, MwType::One).unwrap();
        let mw2 = Mw::alloc(&f.pd, MwType::Two).unwrap();
        let kind = |wr: SendWr<'_>| f.qp.post_send(&[wr]).unwrap_err().kind;
        assert_eq!(
            kind(bind(&mw1, &plain, 64, Access::REMOTE_READ)),
            PostErrorKind::MrNoMwBind
        );
        assert_eq!(
            kind(bind(&mw1, &mr, 64, Access::LOCAL_WRITE)),
            PostErrorKind::BadMwBind
        );
        assert_eq!(
            kind(bind(&mw1, &mr, (1 << 31) + 1, Access::REMOTE_READ)),
            PostErrorKind::BadMwBind
        );
        assert_eq!(
            kind(bind(&mw2, &mr, 0, Access::REMOTE_READ)),
            PostErrorKind::BadMwBind
        );
        // Nothing was posted: a good bind is the first WQE.
        f.qp.post_send(&[bind(&mw1, &mr, 64, Access::REMOTE_READ)])
            .unwrap();
        assert_eq!(wait(&f.cq).wr_id, 9);
        assert_eq!(f.qp.post_send(&[]).map_err(|e| e.kind), Ok(()));
    }
}
