//! The harness the fuzz targets share: a deterministic emulated ConnectX brought up by the
//! real driver, with one RC, one UC and one UD QP in RTS, reached from outside through a
//! link the target feeds ([`FuzzLink`]).
//!
//! The device is built once per process and reused (bring-up costs hundreds of commands);
//! after each input the target calls [`LiveDevice::recover`] so QPs a bad input moved to
//! ERR are back in RTS. Its state (PSNs, MSNs, posted receives) carries over between inputs,
//! so a crash reproduces from its input in a fresh process only if it does not depend on
//! what came before; libFuzzer's `-runs` on the crash file says.

use rnic_driver::ah::{AddressHandle, AddressVector};
use rnic_driver::cq::Cq;
use rnic_driver::mr::Mr;
use rnic_driver::pd::Pd;
use rnic_driver::qp::{InitAttr, Mtu, Qp, QpConfig, QpType, RtrAttr, RtsAttr};
use rnic_driver::wr::{
    Access, Payload, RecvWr, SendFlags, SendOp, SendWr, UdDest, WcStatus, WorkCompletion,
};
use rnic_driver::{Hca, HcaConfig};
use rnic_emulator::link::{FrameForm, Link};
use rnic_emulator::wire::GsoRun;
use rnic_emulator::{Counters, Device, Profile, RunMode};
use rnic_hw_regs::Bus;
use rnic_hw_regs::ctx::QpState;
use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

/// The device's IPv4 address (its RoCE v2 GID 1).
pub const DEV_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
/// The remote peer of the RC and UC QPs: frames the target feeds come "from" here.
pub const PEER_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
/// The peer's MAC address.
pub const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 2];
/// The peer's QP number (the RC and UC QPs' destination QP).
pub const PEER_QPN: u32 = 0x77;
/// The Q_Key of the UD QPs.
pub const QKEY: u32 = 0x1111_2222;
/// The first PSN each side expects.
pub const START_PSN: u32 = 0x100;
/// Bytes of the memory region remote requests may target.
pub const MR_LEN: usize = 8192;
/// Where that region lives: a fixed address (and fixed key variants, [`MKEY_SEED`]), so a
/// frame naming it (a seed, or what the fuzzer learned) names it in every process.
pub const MR_ADDR: usize = 0x5E00_0000_0000;
/// The driver's key-variant seed (`HcaConfig::mkey_seed`): the same rkeys in every process.
pub const MKEY_SEED: u64 = 0x5EED;

/// The region's memory, mapped once per process at [`MR_ADDR`] and never unmapped (every
/// live device of the process registers it).
fn region_memory() -> *mut u8 {
    static ADDR: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *ADDR.get_or_init(|| {
        // SAFETY: an anonymous private mapping at an address nothing else maps
        // (MAP_FIXED_NOREPLACE fails rather than replace a mapping).
        let p = unsafe {
            libc::mmap(
                MR_ADDR as *mut libc::c_void,
                MR_LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            )
        };
        assert_eq!(p as usize, MR_ADDR, "mmap at the region's fixed address");
        MR_ADDR
    }) as *mut u8
}

/// What the link carries, shared between the device's end and the target's.
#[derive(Debug, Default)]
pub struct Wire {
    /// Frames waiting for the device to receive.
    pub to_device: VecDeque<Vec<u8>>,
    /// Runs of packets in one buffer waiting for the device to receive (delivered before
    /// the frames, as [`FrameForm::Run`]).
    pub runs_to_device: VecDeque<(Vec<u8>, GsoRun)>,
    /// Frames the device received from the link so far.
    pub delivered: u64,
    /// Frames the device sent to the link so far.
    pub transmitted: u64,
}

/// A link whose far end is the fuzz target: frames pushed into [`Wire::to_device`] and runs
/// pushed into [`Wire::runs_to_device`] arrive, frames the device sends are counted and
/// dropped.
#[derive(Debug, Clone, Default)]
pub struct FuzzLink(pub Arc<Mutex<Wire>>);

impl Link for FuzzLink {
    fn transmit(&mut self, _frame: &[u8]) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).transmitted += 1;
    }
    fn receive(&mut self, buf: &mut Vec<u8>) -> bool {
        let mut w = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match w.to_device.pop_front() {
            Some(f) => {
                buf.clear();
                buf.extend_from_slice(&f);
                w.delivered += 1;
                true
            }
            None => false,
        }
    }
    fn receive_form(&mut self, buf: &mut Vec<u8>) -> Option<FrameForm> {
        let run = {
            let mut w = self.0.lock().unwrap_or_else(|e| e.into_inner());
            let run = w.runs_to_device.pop_front();
            if run.is_some() {
                w.delivered += 1;
            }
            run
        };
        match run {
            Some((b, run)) => {
                buf.clear();
                buf.extend_from_slice(&b);
                Some(FrameForm::Run(run))
            }
            None => self.receive(buf).then_some(FrameForm::Sealed),
        }
    }
}

/// The drops [`Counters::drops`] counts before a frame reaches the transport (the port's
/// checks in `port/rx.rs`); every other rule is counted by the transport after
/// [`Counters::frames_rx`].
pub fn pre_transport_drops(c: &Counters) -> u64 {
    let d = &c.drops;
    d.malformed
        + d.bad_icrc
        + d.not_our_ip
        + d.dest_qp_zero
        + d.no_gsi_qp
        + d.roce_disabled
        + d.unknown_qp
        + d.cnp
        + d.ring_full
        + d.link_overflow
        // The NIC receive steering stage's drops (frames that are not RoCE for this device).
        + d.steering_no_root
        + d.steering_no_match
        + d.steering_drop_rule
        + d.rq_not_ready
        + d.rq_no_wqe
        + d.frame_too_long
        + d.rq_error
}

/// One QP under test with its CQs.
pub struct Target {
    /// The QP.
    pub qp: Qp,
    /// Its send CQ (nothing is posted on the QP's SQ by the frame target: any CQE here is
    /// unexpected).
    pub send_cq: Arc<Cq>,
    /// Its receive CQ.
    pub recv_cq: Arc<Cq>,
}

/// The live device. Fields drop in declaration order: objects before the HCA before the
/// device.
pub struct LiveDevice {
    /// RC, UC and UD QPs whose peer is [`PEER_IP`] / [`PEER_QPN`].
    pub rc: Target,
    /// The UC QP.
    pub uc: Target,
    /// The UD QP.
    pub ud: Target,
    /// A UD QP that sends to the device itself: [`LiveDevice::probe`].
    pub probe: Target,
    /// The address handle of the device's own GID.
    pub self_ah: AddressHandle,
    /// A region remote WRITE / READ / atomics may target.
    pub mr: Mr,
    /// The protection domain.
    pub pd: Arc<Pd>,
    /// The HCA.
    pub hca: Arc<Hca>,
    /// The emulated device.
    pub dev: Device,
    /// The target's end of the link.
    pub wire: FuzzLink,
    /// Where the RC and UC QPs send.
    pub peer: Peer,
    /// Receive WQEs posted so far (wr_id of the next one).
    next_wr: u64,
}

/// Whom the RC and UC QPs are connected to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// [`PEER_IP`] / [`PEER_QPN`] behind the link: what they send leaves the device.
    Remote,
    /// Each QP to itself on the device's own GID: what they send loops back to them.
    Itself,
}

/// The RoCE v2 GID of an IPv4 address (::ffff:a.b.c.d).
pub fn gid_of(ip: Ipv4Addr) -> [u8; 16] {
    rnic_driver::hca::gid_ipv4(ip)
}

impl LiveDevice {
    /// Brings the device up and the QPs to RTS, the RC and UC QPs connected to `peer`;
    /// receives posted on each.
    pub fn new(peer: Peer) -> Self {
        Self::with_config(
            peer,
            HcaConfig {
                ipv4: Some(DEV_IP),
                mkey_seed: Some(MKEY_SEED),
                ..HcaConfig::default()
            },
        )
    }

    /// [`LiveDevice::new`] with the driver configured by `cfg` (its `ipv4` should be
    /// [`DEV_IP`], its `mkey_seed` [`MKEY_SEED`]).
    pub fn with_config(peer: Peer, cfg: HcaConfig) -> Self {
        let wire = FuzzLink::default();
        let dev = Device::with_link(Profile::default(), RunMode::Deterministic, wire.clone());
        let bus: Arc<dyn Bus> = Arc::new(dev.bus());
        let hca = Arc::new(Hca::open(bus, cfg).expect("bring-up"));
        let pd = Arc::new(Pd::alloc(&hca).expect("ALLOC_PD"));
        // SAFETY: the region's memory stays mapped for the whole process, and the harness
        // holds no reference into it.
        // Every access but remote invalidation: a fuzzed SEND_WITH_INV naming the region
        // would invalidate it for good (the device is right to), and every later input,
        // the probe included, would meet an invalid key. Naming it gets the invalid-request
        // path instead; verbs-api's `send_with_invalidate` test covers a region that allows it.
        let access = Access::ALL.difference(Access::REMOTE_INVALIDATE);
        let mr = unsafe { Mr::register_raw(&pd, region_memory(), MR_LEN, access) }.expect("MR");
        let target = |t: QpType| {
            let send_cq = Arc::new(Cq::create(&hca, 64, None).expect("CQ"));
            let recv_cq = Arc::new(Cq::create(&hca, 64, None).expect("CQ"));
            let qp =
                Qp::create(&pd, &QpConfig::new(t, send_cq.clone(), recv_cq.clone())).expect("QP");
            Target {
                qp,
                send_cq,
                recv_cq,
            }
        };
        let (rc, uc, ud, probe) = (
            target(QpType::Rc),
            target(QpType::Uc),
            target(QpType::Ud),
            target(QpType::Ud),
        );
        let self_ah = AddressHandle::new(
            &pd,
            &AddressVector {
                sgid_index: 1,
                dgid: gid_of(DEV_IP),
                dmac: hca.mac(),
                hop_limit: 64,
                ..AddressVector::default()
            },
        )
        .expect("AH");
        let mut d = LiveDevice {
            rc,
            uc,
            ud,
            probe,
            self_ah,
            mr,
            pd,
            hca,
            dev,
            wire,
            peer,
            next_wr: 0,
        };
        for t in [&d.rc, &d.uc, &d.ud, &d.probe] {
            connect(&t.qp, peer, d.hca.mac());
        }
        for i in 0..3 {
            d.post_recvs(i, 8);
        }
        d
    }

    /// The RC, UC and UD targets.
    pub fn targets(&self) -> [&Target; 3] {
        [&self.rc, &self.uc, &self.ud]
    }

    /// Posts `n` receives of 1 KiB (in the MR) on target `i` (0 RC, 1 UC, 2 UD).
    pub fn post_recvs(&mut self, i: usize, n: usize) {
        for _ in 0..n {
            self.next_wr += 1;
            let sge = [self.mr.sge(0, 1024)];
            let wr = RecvWr {
                wr_id: self.next_wr,
                sgl: &sge,
            };
            // A full RQ is fine: enough receives are posted.
            let _ = self.targets()[i].qp.post_recv(&[wr]);
        }
    }

    /// Counters now.
    pub fn counters(&self) -> Counters {
        self.dev.counters()
    }

    /// Drains the targets' CQs through the driver: the device is not hostile here, so every
    /// CQE must be one the driver can match to posted work (a `BadCqe` is a device bug), and
    /// nothing completes on a send CQ (nothing was posted there). Returns the receive
    /// completions per target.
    pub fn drain_cqs(&mut self) -> [usize; 3] {
        let mut got = [0; 3];
        let mut wc = [WorkCompletion::default(); 16];
        for (i, t) in self.targets().iter().enumerate() {
            let n = t
                .send_cq
                .poll(&mut wc)
                .expect("send CQ: the device wrote a bad CQE");
            assert_eq!(n, 0, "unexpected send completion: {:?}", &wc[..n]);
            loop {
                let n = t
                    .recv_cq
                    .poll(&mut wc)
                    .expect("recv CQ: the device wrote a bad CQE");
                got[i] += n;
                if n == 0 {
                    break;
                }
            }
        }
        for (i, &n) in got.iter().enumerate() {
            if n > 0 {
                self.post_recvs(i, n);
            }
        }
        got
    }

    /// Brings every target QP a bad input moved out of RTS back to RTS (reset, INIT, RTR,
    /// RTS) with fresh receives. Returns how many were recovered.
    pub fn recover(&mut self) -> usize {
        let mut bad = Vec::new();
        for (i, t) in self.targets().iter().enumerate() {
            // The device's own view (what QUERY_QP reports), without a command per QP.
            let st = self.dev.qp_state(t.qp.qpn()).expect("the QP exists");
            if st != QpState::Rts {
                t.qp.to_reset().expect("2RST");
                connect(&t.qp, self.peer, self.hca.mac());
                bad.push(i);
            }
        }
        for &i in &bad {
            self.post_recvs(i, 8);
        }
        bad.len()
    }

    /// A good operation still works: a UD SEND from the probe QP to itself (loopback) lands
    /// in a posted receive, and both completions are successes.
    pub fn probe(&mut self) {
        self.next_wr += 1;
        let wr_id = self.next_wr;
        let rsge = [self.mr.sge(4096, 1024)];
        self.probe
            .qp
            .post_recv(&[RecvWr { wr_id, sgl: &rsge }])
            .expect("probe recv");
        self.probe
            .qp
            .post_send(&[SendWr {
                wr_id,
                op: SendOp::Send,
                payload: Payload::Inline(b"probe"),
                flags: SendFlags::SIGNALED,
                ud: Some(UdDest {
                    ah: &self.self_ah,
                    remote_qpn: self.probe.qp.qpn(),
                    remote_qkey: QKEY,
                }),
            }])
            .expect("probe send");
        self.dev.step();
        let mut wc = [WorkCompletion::default(); 2];
        for cq in [&self.probe.send_cq, &self.probe.recv_cq] {
            let n = cq.poll(&mut wc).expect("probe poll");
            assert_eq!(n, 1, "the probe did not complete: {:?}", &wc[..n]);
            assert_eq!((wc[0].wr_id, wc[0].status), (wr_id, WcStatus::Success));
        }
    }
}

/// Takes a reset QP to RTS: RC and UC to `peer` (`mac`: the device's own MAC, for
/// [`Peer::Itself`]), UD with [`QKEY`].
pub fn connect(q: &Qp, peer: Peer, mac: [u8; 6]) {
    let (ip, dmac, dest) = match peer {
        Peer::Remote => (PEER_IP, PEER_MAC, PEER_QPN),
        Peer::Itself => (DEV_IP, mac, q.qpn()),
    };
    let ud = q.qp_type() == QpType::Ud;
    q.to_init(&InitAttr {
        access: match q.qp_type() {
            QpType::Rc => Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC,
            QpType::Uc => Access::REMOTE_WRITE,
            _ => Access::NONE,
        },
        qkey: ud.then_some(QKEY),
        ..InitAttr::default()
    })
    .expect("RST2INIT");
    let rtr = if ud {
        RtrAttr::default()
    } else {
        RtrAttr {
            path_mtu: Some(Mtu::Mtu1024),
            dest_qpn: Some(dest),
            rq_psn: START_PSN,
            av: Some(AddressVector {
                sgid_index: 1,
                dgid: gid_of(ip),
                dmac,
                hop_limit: 64,
                ..AddressVector::default()
            }),
            max_dest_rd_atomic: 4,
            min_rnr_timer: 1,
        }
    };
    q.to_rtr(&rtr).expect("INIT2RTR");
    q.to_rts(&RtsAttr {
        sq_psn: START_PSN,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        max_rd_atomic: 4,
    })
    .expect("RTR2RTS");
}
pub mod cmd;
pub mod hostile;
pub mod net;
pub mod raw;
pub mod rx;
pub mod wqe;
