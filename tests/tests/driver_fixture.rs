//! Shared fixture of the driver object and data-path tests (`#[path]`-included by them):
//! the real driver (`rnic_driver`) on an emulated device, reached only through a `Bus` that
//! forwards to the emulator's and records the 64-bit doorbell writes.
#![allow(dead_code, unreachable_pub, missing_docs)]

use rnic_driver::cq::Cq;
use rnic_driver::pd::Pd;
use rnic_driver::qp::{AddressVector, InitAttr, Mtu, Qp, QpConfig, QpType, RtrAttr, RtsAttr};
use rnic_driver::wr::{Access, Payload, SendFlags, SendOp, SendWr, Sge, WorkCompletion};
use rnic_driver::{Hca, HcaConfig};
use rnic_emulator::{Device, EmuBus, Profile, RunMode};
use rnic_hw_regs::{Bus, BusError, DmaRegion};
use std::net::Ipv4Addr;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A bus that forwards everything to the emulator's and records 64-bit writes.
#[derive(Debug)]
pub struct RecordingBus {
    pub inner: EmuBus,
    pub record: AtomicBool,
    pub writes64: Mutex<Vec<(usize, u64)>>,
}

impl Bus for RecordingBus {
    fn read32(&self, offset: usize) -> u32 {
        self.inner.read32(offset)
    }
    fn write32(&self, offset: usize, value: u32) {
        self.inner.write32(offset, value)
    }
    fn write64(&self, offset: usize, value: u64) {
        if self.record.load(Ordering::Relaxed) {
            self.writes64.lock().unwrap().push((offset, value));
        }
        self.inner.write64(offset, value)
    }
    fn bar_len(&self) -> usize {
        self.inner.bar_len()
    }
    fn alloc_dma(&self, len: usize) -> Result<DmaRegion, BusError> {
        self.inner.alloc_dma(len)
    }
    fn free_dma(&self, region: DmaRegion) -> Result<(), BusError> {
        self.inner.free_dma(region)
    }
    unsafe fn map_dma(&self, vaddr: NonNull<u8>, len: usize) -> Result<u64, BusError> {
        // SAFETY: the caller's contract is forwarded unchanged.
        unsafe { self.inner.map_dma(vaddr, len) }
    }
    fn unmap_dma(&self, iova: u64, len: usize) -> Result<(), BusError> {
        self.inner.unmap_dma(iova, len)
    }
    fn wait_irq(&self, vector: u16, timeout: Duration) -> Result<bool, BusError> {
        self.inner.wait_irq(vector, timeout)
    }
    fn function_reset(&self) -> Result<(), BusError> {
        self.inner.function_reset()
    }
}

/// Fields drop in declaration order: the PD and the HCA (teardown commands) before the
/// device.
pub struct Fx {
    pub pd: Arc<Pd>,
    pub hca: Arc<Hca>,
    pub bus: Arc<RecordingBus>,
    pub dev: Device,
}

pub const IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);

pub fn open_with(mode: RunMode, cfg: HcaConfig) -> Fx {
    open_on(Device::new(Profile::default(), mode), cfg)
}

/// Brings up the driver on `dev` (made and linked by the caller) with `cfg`.
pub fn open_on(dev: Device, cfg: HcaConfig) -> Fx {
    let bus = Arc::new(RecordingBus {
        inner: dev.bus(),
        record: AtomicBool::new(false),
        writes64: Mutex::new(Vec::new()),
    });
    let dynbus: Arc<dyn Bus> = bus.clone();
    let hca = Arc::new(Hca::open(dynbus, cfg).expect("bring-up"));
    let pd = Arc::new(Pd::alloc(&hca).expect("ALLOC_PD"));
    Fx { pd, hca, bus, dev }
}

pub fn open(mode: RunMode) -> Fx {
    open_with(
        mode,
        HcaConfig {
            ipv4: Some(IP),
            ..HcaConfig::default()
        },
    )
}

impl Fx {
    /// The address vector of this device's own IPv4 GID (loopback).
    pub fn self_av(&self) -> AddressVector {
        let gid = self
            .hca
            .gids()
            .iter()
            .find(|g| g.index == 1)
            .expect("GID 1")
            .gid;
        AddressVector {
            sgid_index: 1,
            dgid: gid,
            dmac: self.hca.mac(),
            hop_limit: 64,
            ..AddressVector::default()
        }
    }

    pub fn cq(&self, n: u32) -> Arc<Cq> {
        Arc::new(Cq::create(&self.hca, n, None).expect("CREATE_CQ"))
    }

    /// Creates and connects two QPs of type `t` with path MTU `mtu`, each with its own CQ.
    pub fn pair(&self, t: QpType, mtu: Mtu) -> (Qp, Qp, Arc<Cq>, Arc<Cq>) {
        let ca = self.cq(256);
        let cb = self.cq(256);
        let a = Qp::create(&self.pd, &QpConfig::new(t, ca.clone(), ca.clone())).expect("QP a");
        let b = Qp::create(&self.pd, &QpConfig::new(t, cb.clone(), cb.clone())).expect("QP b");
        self.connect(&a, b.qpn(), mtu);
        self.connect(&b, a.qpn(), mtu);
        (a, b, ca, cb)
    }

    pub fn connect(&self, q: &Qp, dest: u32, mtu: Mtu) {
        self.connect_via(q, dest, mtu, self.self_av());
    }

    /// [`Fx::connect`] to a QP on the path `av` (another device's GID and MAC).
    pub fn connect_via(&self, q: &Qp, dest: u32, mtu: Mtu, av: AddressVector) {
        let ud = q.qp_type() == QpType::Ud;
        q.to_init(&InitAttr {
            access: if q.qp_type() == QpType::Rc {
                Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC
            } else if ud {
                Access::NONE
            } else {
                Access::REMOTE_WRITE
            },
            qkey: ud.then_some(QKEY),
            ..InitAttr::default()
        })
        .expect("RST2INIT");
        let rtr = if ud {
            RtrAttr::default()
        } else {
            RtrAttr {
                path_mtu: Some(mtu),
                dest_qpn: Some(dest),
                rq_psn: 0x100,
                av: Some(av),
                max_dest_rd_atomic: 4,
                min_rnr_timer: 1,
            }
        };
        q.to_rtr(&rtr).expect("INIT2RTR");
        q.to_rts(&RtsAttr {
            sq_psn: 0x100,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            max_rd_atomic: 4,
        })
        .expect("RTR2RTS");
    }
}

pub const QKEY: u32 = 0x1111_2222;

/// Polls `n` completions from `cq` (waiting up to 10 s for a threaded device).
#[track_caller]
pub fn poll_n(cq: &Cq, n: usize) -> Vec<WorkCompletion> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut out = Vec::new();
    let mut wc = [WorkCompletion::default(); 16];
    while out.len() < n {
        let want = (n - out.len()).min(wc.len());
        let k = cq.poll(&mut wc[..want]).expect("poll");
        out.extend_from_slice(&wc[..k]);
        if k == 0 {
            assert!(
                Instant::now() < deadline,
                "waited for {n} completions, got {out:?}"
            );
            std::thread::yield_now();
        }
    }
    out
}

#[track_caller]
pub fn poll_one(cq: &Cq) -> WorkCompletion {
    poll_n(cq, 1)[0]
}

/// Checks no completion is pending (after letting a threaded device settle).
#[track_caller]
pub fn assert_empty(cq: &Cq) {
    std::thread::sleep(Duration::from_millis(2));
    let mut wc = [WorkCompletion::default(); 4];
    let n = cq.poll(&mut wc).expect("poll");
    assert_eq!(n, 0, "unexpected completions {:?}", &wc[..n]);
}

pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

pub const MODES: [RunMode; 2] = [RunMode::Deterministic, RunMode::Threaded];

/// Prints the driver's warnings (tests see what destruction logged).
pub fn log_warnings() {
    struct L;
    impl log::Log for L {
        fn enabled(&self, m: &log::Metadata<'_>) -> bool {
            m.level() <= log::Level::Warn
        }
        fn log(&self, r: &log::Record<'_>) {
            if self.enabled(r.metadata()) {
                eprintln!("[{}] {}", r.level(), r.args());
            }
        }
        fn flush(&self) {}
    }
    static LOGGER: L = L;
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(log::LevelFilter::Warn);
}

/// A send work request of `op` over `sgl` (not UD).
pub fn send_wr<'a>(wr_id: u64, op: SendOp, sgl: &'a [Sge], flags: SendFlags) -> SendWr<'a> {
    SendWr {
        wr_id,
        op,
        payload: Payload::Sgl(sgl),
        flags,
        ud: None,
    }
}
