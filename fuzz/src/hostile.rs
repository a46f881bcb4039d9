//! The hostile-device harness: CQEs and EQEs that no good device writes, where the driver
//! reads them (the `hostile_cqe_eqe` target and the seed-corpus example).

use crate::{DEV_IP, LiveDevice, Peer, connect};
use rnic_driver::HcaConfig;
use rnic_driver::cmdq::SlotClass;
use rnic_driver::cq::Cq;
use rnic_driver::eq::EventQueue;
use rnic_driver::qp::{Qp, QpConfig, QpType};
use rnic_driver::wr::{Payload, PollError, RecvWr, SendFlags, SendOp, SendWr, WorkCompletion};
use rnic_hw_regs::cmd::GenEqeIn;
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};
use zerocopy::IntoBytes;

/// One record: a kind byte and 64 bytes of CQE or EQE.
pub const RECORD: usize = 65;
/// Firmware pages the driver holds at most: above the device's own ask (36), so hostile
/// requests past it are refused, and small, because every page given is an allocation and a
/// MANAGE_PAGES entry (a cap of 256 halved the target's speed; see the README's Speed).
pub const MAX_PAGES: usize = 64;
/// Records one input may have.
pub const MAX_RECORDS: usize = 16;

/// What a record's kind byte selects (kind % 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A CQE into the send CQ.
    SendCqe = 0,
    /// A CQE into the receive CQ.
    RecvCqe = 1,
    /// An EQE into the driver's own event queue's ring.
    RingEqe = 2,
    /// An EQE the device generates into the HCA's event queue (GEN_EQE).
    GenEqe = 3,
}

/// The live device and a driver event queue of its own.
pub struct Hostile {
    eq: EventQueue,
    /// The device (its RC / UC / UD QPs are not used here; its probe is).
    pub d: LiveDevice,
}

/// Writes `entry` as the entry `ci` of a ring of `n` 64-byte entries at `ring`, its owner
/// bit (bit 0 of the last byte) set to what software expects at `ci`, body first and the
/// last byte last, as a device does.
///
/// # Safety
///
/// `ring` must be a live ring of `n` entries (`n` a power of two).
unsafe fn inject(ring: *mut u8, n: u32, ci: u32, entry: &[u8; 64]) {
    let off = (ci % n) as usize * 64;
    let owner = ((ci / n) & 1) as u8;
    // SAFETY: the caller's contract: the entry is inside the ring.
    unsafe {
        let p = ring.add(off);
        for (i, b) in entry[..63].iter().enumerate() {
            p.add(i).write_volatile(*b);
        }
        fence(Ordering::Release);
        p.add(63).write_volatile((entry[63] & !1) | owner);
    }
}

impl Hostile {
    /// Brings the device up (QPs connected to themselves) and creates the event queue.
    pub fn new() -> Self {
        // A hostile page request may ask for millions of pages: the driver gives at most
        // this many (HcaConfig::max_firmware_pages), so an input costs bounded memory.
        let d = LiveDevice::with_config(
            Peer::Itself,
            HcaConfig {
                ipv4: Some(DEV_IP),
                max_firmware_pages: MAX_PAGES,
                mkey_seed: Some(crate::MKEY_SEED),
                ..HcaConfig::default()
            },
        );
        let eq = EventQueue::create(
            d.hca.cmdq(),
            &**d.hca.bus(),
            d.hca.uar().expect("open"),
            3,
            &[],
        )
        .expect("CREATE_EQ");
        Hostile { eq, d }
    }

    /// Runs one input: fresh CQs and an RC QP with work outstanding (the device does not
    /// run meanwhile), the records, polls after each; then the objects are destroyed and
    /// the probe runs.
    pub fn run(&mut self, data: &[u8]) {
        let d = &mut self.d;
        let hca = d.hca.clone();
        let send_cq = Arc::new(Cq::create(&hca, 16, None).expect("CQ"));
        let recv_cq = Arc::new(Cq::create(&hca, 16, None).expect("CQ"));
        let qp = Qp::create(
            &d.pd,
            &QpConfig::new(QpType::Rc, send_cq.clone(), recv_cq.clone()),
        )
        .expect("QP");
        connect(&qp, Peer::Itself, hca.mac());
        d.dev.set_auto_step(false);
        let sge = [d.mr.sge(0, 64)];
        qp.post_recv(&[RecvWr {
            wr_id: 7,
            sgl: &sge,
        }])
        .expect("recv");
        qp.post_send(&[SendWr {
            wr_id: 9,
            op: SendOp::Send,
            payload: Payload::Sgl(&sge),
            flags: SendFlags::SIGNALED,
            ud: None,
        }])
        .expect("send");
        for rec in data.chunks_exact(RECORD).take(MAX_RECORDS) {
            let entry: &[u8; 64] = rec[1..].try_into().expect("64 bytes");
            match rec[0] % 4 {
                0 => poll_cq(&send_cq, entry),
                1 => poll_cq(&recv_cq, entry),
                2 => {
                    let (ring, bytes) = self.eq.eqe_ring();
                    let n = (bytes / 64) as u32;
                    // SAFETY: the EQ's live ring of `n` entries.
                    unsafe { inject(ring.as_ptr(), n, self.eq.consumer_index(), entry) };
                    let got = self.eq.poll(&**hca.bus(), |_| {});
                    assert!(got <= n as usize, "one lap at most");
                }
                _ => {
                    let mut cmd = GenEqeIn::new_cmd();
                    cmd.set_eq_number(hca.eqn());
                    cmd.set_eqe(*entry);
                    let mut out = [0u8; 16];
                    // Commands need the device running (it then also runs the posted work,
                    // whose CQEs land where the injected ones may have moved the driver
                    // past: more hostility, which polling must survive too).
                    d.dev.set_auto_step(true);
                    // The device may refuse (a full EQ): a typed error either way.
                    let _ = hca
                        .cmdq()
                        .exec_raw(cmd.as_bytes(), &mut out, SlotClass::Regular);
                    // Page requests are served, other events returned; errors are typed.
                    let _ = hca.process_events();
                    d.dev.set_auto_step(false);
                }
            }
        }
        d.dev.set_auto_step(true);
        // Destroying must work whatever the driver was shown.
        qp.destroy().expect("DESTROY_QP");
        Arc::try_unwrap(send_cq)
            .ok()
            .expect("sole owner")
            .destroy()
            .expect("DESTROY_CQ");
        Arc::try_unwrap(recv_cq)
            .ok()
            .expect("sole owner")
            .destroy()
            .expect("DESTROY_CQ");
        d.probe();
    }
}

impl Default for Hostile {
    fn default() -> Self {
        Self::new()
    }
}

/// Injects `entry` at `cq`'s consumer index and polls: completions or a typed bad CQE.
fn poll_cq(cq: &Cq, entry: &[u8; 64]) {
    let (ring, bytes) = cq.cqe_ring();
    // SAFETY: the CQ's live ring.
    unsafe {
        inject(
            ring.as_ptr(),
            (bytes / 64) as u32,
            cq.consumer_index(),
            entry,
        )
    };
    let mut wc = [WorkCompletion::default(); 4];
    match cq.poll(&mut wc) {
        Ok(n) => assert!(n <= wc.len()),
        Err(PollError::BadCqe { .. }) => {}
        Err(e) => panic!("poll: {e}"),
    }
}
