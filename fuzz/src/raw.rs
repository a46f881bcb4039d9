//! Raw WQEs into a live Ethernet send queue (the `raw_sq_wqes` target and the seed-corpus
//! example): the bytes a host writes into a raw SQ's ring, rung as the driver rings it.
//!
//! An input is a flags byte, then up to [`MAX_WQEBBS`] 64-byte WQE basic blocks (the last
//! one zero-padded). Each input gets a fresh SQ (the device numbers it, so the harness puts
//! the SQN into the doorbell, and into the first control segment unless flag bit 0 says
//! to leave the input's), written from index 0.

use crate::LiveDevice;
use crate::wqe::{WQEBB, check_cqes};
use rnic_driver::eth::{EthCompletion, RawSq, Tis, TransportDomain};
use rnic_driver::wr::WcStatus;
use rnic_hw_regs::doorbell::send_doorbell_offset;
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};

/// WQE basic blocks one input may write (a send of the largest size the emulator reads is
/// 16; the SQ holds 16).
pub const MAX_WQEBBS: usize = 8;
/// Flag bit 0: the first control segment keeps the input's SQN field.
pub const KEEP_SQN: u8 = 1;
/// Sends the SQ of each input holds (16 WQEBBs).
pub const SQ_SENDS: u32 = 4;

/// The live device (its QPs are not used here) and the Ethernet objects of the target: a
/// transport domain, a TIS, and a raw SQ that stays good, for the probe.
pub struct RawHarness {
    probe_sq: RawSq,
    tis: Arc<Tis>,
    _td: Arc<TransportDomain>,
    /// The device.
    pub d: LiveDevice,
    probes: u64,
}

impl Default for RawHarness {
    fn default() -> Self {
        Self::new()
    }
}

/// A 60-byte frame to the peer (not an address of the device: it leaves on the link).
fn probe_frame(mac: [u8; 6]) -> [u8; 60] {
    let mut f = [0u8; 60];
    f[..6].copy_from_slice(&crate::PEER_MAC);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&0x88B5u16.to_be_bytes()); // IEEE local experimental
    f
}

impl RawHarness {
    /// Brings the device up and creates the objects.
    pub fn new() -> Self {
        let d = LiveDevice::new(crate::Peer::Itself);
        let td = Arc::new(TransportDomain::alloc(&d.hca).expect("ALLOC_TRANSPORT_DOMAIN"));
        let tis = Arc::new(Tis::create(&td).expect("CREATE_TIS"));
        let probe_sq = RawSq::create(&d.pd, &tis, SQ_SENDS).expect("CREATE_SQ");
        RawHarness {
            probe_sq,
            tis,
            _td: td,
            d,
            probes: 0,
        }
    }

    /// A fresh SQ, the input's WQEs written and rung, the device stepped; then the checks:
    /// only requester CQEs (success or error) for a posted block on the SQ's CQ, at most
    /// one frame per block sent, the SQ and its CQ destroy, and the probe SQ still sends a frame.
    pub fn run(&mut self, data: &[u8]) {
        let Some((&flags, wqes)) = data.split_first() else {
            return;
        };
        let d = &self.d;
        let sq = RawSq::create(&d.pd, &self.tis, SQ_SENDS).expect("CREATE_SQ");
        let (ring, len, dbrec) = sq.sq_ring();
        let bytes = wqes.len().min(MAX_WQEBBS * WQEBB).min(len);
        let nbb = bytes.div_ceil(WQEBB).max(1);
        let mut buf = [0u8; MAX_WQEBBS * WQEBB];
        buf[..bytes].copy_from_slice(&wqes[..bytes]);
        // ctrl dword 1: SQN (24 bits) then DS count (8 bits).
        let ds = buf[7];
        let named = (sq.sqn() << 8) | u32::from(ds);
        if flags & KEEP_SQN == 0 {
            buf[4..8].copy_from_slice(&named.to_be_bytes());
        }
        let before = d.counters();
        let wire_before = d.wire.0.lock().unwrap().transmitted;
        // SAFETY: `nbb * 64 <= len` bytes inside the live SQ ring, and dword 1 of its
        // doorbell record; volatile writes, nothing else writes them meanwhile.
        unsafe {
            for (k, b) in buf[..nbb * WQEBB].iter().enumerate() {
                ring.as_ptr().add(k).write_volatile(*b);
            }
            fence(Ordering::Release);
            for (k, b) in (nbb as u32).to_be_bytes().iter().enumerate() {
                dbrec.as_ptr().add(4 + k).write_volatile(*b);
            }
        }
        fence(Ordering::SeqCst);
        // The doorbell names the SQ whatever the WQE says (as the driver's does).
        let mut first = [0u8; 8];
        first.copy_from_slice(&buf[..8]);
        first[4..8].copy_from_slice(&named.to_be_bytes());
        let uar = d.hca.uar().expect("open");
        d.hca.bus().write64(
            uar.bar_offset() + send_doorbell_offset(0),
            u64::from_be_bytes(first),
        );
        d.dev.step();
        check_cqes(sq.cq(), true, nbb as u16);
        let after = d.counters();
        let sent = after.raw_tx - before.raw_tx;
        assert!(sent <= nbb as u64, "{sent} frames from {nbb} blocks");
        let on_wire = d.wire.0.lock().unwrap().transmitted - wire_before;
        assert!(on_wire <= sent, "{on_wire} frames on the link, {sent} sent");
        // DESTROY_SQ and DESTROY_CQ (on drop) succeed whatever the SQ was shown.
        let errors = d.counters().command_errors;
        drop(sq);
        assert_eq!(
            d.counters().command_errors,
            errors,
            "destroying the SQ failed"
        );
        self.probe();
    }

    /// The probe SQ sends a frame to the peer: it completes with success and leaves on the
    /// link.
    fn probe(&mut self) {
        self.probes += 1;
        let d = &self.d;
        let frame = probe_frame(d.hca.mac());
        let wire_before = d.wire.0.lock().unwrap().transmitted;
        self.probe_sq
            .post_send(self.probes, &frame, &[], true)
            .expect("probe send");
        d.dev.step();
        let mut wc = [EthCompletion::default(); 2];
        let n = self.probe_sq.poll(&mut wc).expect("probe poll");
        assert_eq!(n, 1, "the probe did not complete: {:?}", &wc[..n]);
        assert_eq!(
            (wc[0].wr_id, wc[0].status),
            (self.probes, WcStatus::Success)
        );
        assert_eq!(d.wire.0.lock().unwrap().transmitted, wire_before + 1);
    }
}
