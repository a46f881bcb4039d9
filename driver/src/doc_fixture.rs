//! The objects the crate's doc examples start from, built in one place.
//!
//! Most examples need an open [`Hca`], a PD, a CQ, an RC QP and a 4 KiB memory region, often
//! with the QP connected to itself. Their hidden prologue used to build those in nine lines
//! each; it now creates the device (the emulator is only a dev-dependency, so the example does
//! that) and hands its bus to [`Fixture::new`] or [`Fixture::loopback`]:
//!
//! ```
//! # use rnic_driver::doc_fixture::prelude::*;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
//! let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
//! assert_eq!(qp.query()?.state, QpState::Rst);
//! # Ok(()) }
//! ```
//!
//! The page and command examples start lower, from a device that is only enabled: they take
//! [`enabled_cmdq`] instead.
//!
//! The VFIO discovery examples read a fake sysfs tree that [`fake_sysfs_function`] writes.
//!
//! Hidden from the documentation: it is scaffolding for examples, not an API; nothing in the
//! library uses it.

use crate::{
    DriverError, Hca, HcaConfig,
    cmdq::CmdQueue,
    cq::Cq,
    mr::Mr,
    pd::Pd,
    qp::{AddressVector, InitAttr, Mtu, Qp, QpConfig, QpType, RtrAttr, RtsAttr},
    wr::{Access, WorkCompletion},
};
use rnic_hw_regs::{
    Bus,
    cmd::EnableHcaIn,
    init_seg::{self, CmdqAddrLSz, NicInterface},
};
use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

/// Everything an example's hidden prologue imports: the object modules' items, `Arc`,
/// `Duration`, `Instant`, [`Fixture`], [`loopback_av`] and [`wait`].
///
/// ```
/// use rnic_driver::doc_fixture::prelude::*;
/// let _: fn(&Cq) -> WorkCompletion = wait;
/// assert_eq!(Duration::from_secs(1).as_millis(), 1000);
/// ```
pub mod prelude {
    pub use super::{Fixture, loopback_av, wait};
    pub use crate::{Hca, HcaConfig, cq::Cq, mr::Mr, pd::Pd, qp::*, wr::*};
    pub use std::{
        sync::Arc,
        time::{Duration, Instant},
    };
}

/// An open HCA (IPv4 192.0.2.1, so GID index 1 is a RoCE v2 IPv4 GID) with a PD, a 64-entry
/// CQ, an RC QP sending and receiving on that CQ, and a 4 KiB MR with every access right.
///
/// ```
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// let Fixture { hca, qp, mr, .. } = Fixture::loopback(Arc::new(dev.bus()))?;
/// assert_eq!((qp.query()?.state, mr.len()), (QpState::Rts, 4096));
/// assert_eq!(hca.gids()[1].gid, rnic_driver::hca::gid_ipv4([192, 0, 2, 1].into()));
/// # Ok(()) }
/// ```
pub struct Fixture {
    /// The HCA, opened with IPv4 address 192.0.2.1.
    pub hca: Arc<Hca>,
    /// A protection domain on `hca`.
    pub pd: Arc<Pd>,
    /// A 64-entry CQ without a completion channel.
    pub cq: Arc<Cq>,
    /// An RC QP on `pd` whose send and receive completions go to `cq`.
    pub qp: Qp,
    /// A 4096-byte MR on `pd` with [`Access::ALL`].
    pub mr: Mr,
}

impl Fixture {
    /// Opens the HCA on `bus` and creates the objects, the QP left in RESET.
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// let Fixture { cq, qp, .. } = Fixture::new(Arc::new(dev.bus()))?;
    /// assert_eq!((qp.query()?.state, cq.capacity()), (QpState::Rst, 64));
    /// # Ok(()) }
    /// ```
    pub fn new(bus: Arc<dyn Bus>) -> Result<Self, DriverError> {
        let config = HcaConfig {
            ipv4: Some([192, 0, 2, 1].into()),
            ..HcaConfig::default()
        };
        let hca = Arc::new(Hca::open(bus, config)?);
        let pd = Arc::new(Pd::alloc(&hca)?);
        let cq = Arc::new(Cq::create(&hca, 64, None)?);
        let qp = Qp::create(&pd, &QpConfig::new(QpType::Rc, cq.clone(), cq.clone()))?;
        let mr = Mr::alloc(&pd, 4096, Access::ALL)?;
        Ok(Self {
            hca,
            pd,
            cq,
            qp,
            mr,
        })
    }

    /// [`Fixture::new`], then the QP taken through INIT (remote read, write and atomic
    /// allowed) and RTR (connected to itself over [`loopback_av`], MTU 1024) to RTS, with
    /// four reads or atomics outstanding each way.
    ///
    /// ```
    /// # use rnic_driver::doc_fixture::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// let Fixture { cq, qp, mr, .. } = Fixture::loopback(Arc::new(dev.bus()))?;
    /// let op = SendOp::Write { raddr: mr.addr(), rkey: mr.rkey() };
    /// qp.post_send(&[SendWr { wr_id: 1, op, payload: Payload::Inline(b"x"), flags: SendFlags::SIGNALED, ud: None }])?;
    /// assert_eq!(wait(&cq).status, WcStatus::Success);
    /// # Ok(()) }
    /// ```
    pub fn loopback(bus: Arc<dyn Bus>) -> Result<Self, DriverError> {
        let f = Self::new(bus)?;
        let access = Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
        f.qp.to_init(&InitAttr {
            access,
            ..InitAttr::default()
        })?;
        f.qp.to_rtr(&RtrAttr {
            path_mtu: Some(Mtu::Mtu1024),
            dest_qpn: Some(f.qp.qpn()),
            av: Some(loopback_av(&f.hca)),
            max_dest_rd_atomic: 4,
            ..RtrAttr::default()
        })?;
        f.qp.to_rts(&RtsAttr {
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            max_rd_atomic: 4,
            ..RtsAttr::default()
        })?;
        Ok(f)
    }
}

/// The path from `hca` back to itself: source GID index 1 (the IPv4 GID [`Fixture`] gives
/// it), its own GID and MAC.
///
/// ```
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// let Fixture { hca, .. } = Fixture::new(Arc::new(dev.bus()))?;
/// let av = loopback_av(&hca);
/// assert_eq!((av.sgid_index, av.dgid, av.dmac), (1, hca.gids()[1].gid, hca.mac()));
/// # Ok(()) }
/// ```
pub fn loopback_av(hca: &Hca) -> AddressVector {
    AddressVector {
        sgid_index: 1,
        dgid: hca.gids()[1].gid,
        dmac: hca.mac(),
        ..AddressVector::default()
    }
}

/// Polls `cq` until it yields one completion and returns it; panics after 10 s, so an example
/// that waits for a completion which never comes fails instead of hanging.
///
/// ```
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// let Fixture { cq, qp, mr, .. } = Fixture::loopback(Arc::new(dev.bus()))?;
/// qp.post_recv(&[RecvWr { wr_id: 7, sgl: &[mr.sge(0, 64)] }])?;
/// qp.post_send(&[SendWr { wr_id: 8, op: SendOp::Send, payload: Payload::Inline(b"hi"), flags: SendFlags::SIGNALED, ud: None }])?;
/// let (a, b) = (wait(&cq), wait(&cq));
/// assert_eq!({ let mut ids = [a.wr_id, b.wr_id]; ids.sort(); ids }, [7, 8]);
/// # Ok(()) }
/// ```
pub fn wait(cq: &Cq) -> WorkCompletion {
    let t = Instant::now();
    let mut wc = [WorkCompletion::default()];
    while cq.poll(&mut wc) != Ok(1) {
        assert!(t.elapsed() < Duration::from_secs(10));
        std::thread::yield_now();
    }
    wc[0]
}

/// A command queue on `bus` with the device enabled and nothing more: the queue's address
/// written to the initialization segment (full driver interface), firmware done initializing
/// (panics after 10 s) and ENABLE_HCA executed; commands time out after 1 s.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// let bus: std::sync::Arc<dyn rnic_hw_regs::Bus> = std::sync::Arc::new(dev.bus());
/// let q = rnic_driver::doc_fixture::enabled_cmdq(&bus)?;
/// let issi = q.exec(&rnic_hw_regs::cmd::QueryIssiIn::new_cmd(), &[], &mut [])?;
/// assert!(issi.supports_issi(1));
/// # Ok(()) }
/// ```
pub fn enabled_cmdq(bus: &Arc<dyn Bus>) -> Result<CmdQueue, Box<dyn std::error::Error>> {
    let reg = bus.read32(init_seg::CMDQ_ADDR_L_SZ);
    let q = CmdQueue::new(bus.clone(), reg, Duration::from_secs(1), None)?;
    let (hi, lo) = init_seg::cmdq_addr_words(q.iova()).map_err(|_| "address")?;
    bus.write32(init_seg::CMDQ_ADDR_H, hi);
    bus.write32(
        init_seg::CMDQ_ADDR_L_SZ,
        CmdqAddrLSz::for_write(lo, NicInterface::FullDriver).0,
    );
    let t = Instant::now();
    while init_seg::is_initializing(bus.read32(init_seg::INITIALIZING)) {
        assert!(t.elapsed().as_secs() < 10);
        std::thread::yield_now();
    }
    q.exec(&EnableHcaIn::new_cmd(), &[], &mut [])?;
    Ok(q)
}

/// Writes a fake sysfs directory `root/0000:3b:00.0` and returns it: a ConnectX-5 (vendor
/// 0x15b3, device 0x1017) whose `driver` link names vfio-pci and whose `iommu_group` link
/// names group 12, as `/sys/bus/pci/devices/<address>` has them.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let tmp = tempfile::tempdir()?;
/// let dir = rnic_driver::doc_fixture::fake_sysfs_function(tmp.path())?;
/// assert_eq!(std::fs::read_to_string(dir.join("vendor"))?, "0x15b3\n");
/// assert!(std::fs::read_link(dir.join("driver"))?.ends_with("vfio-pci"));
/// # Ok(()) }
/// ```
pub fn fake_sysfs_function(root: &Path) -> std::io::Result<PathBuf> {
    let dir = root.join("0000:3b:00.0");
    std::fs::create_dir(&dir)?;
    std::fs::write(dir.join("vendor"), "0x15b3\n")?;
    std::fs::write(dir.join("device"), "0x1017\n")?;
    std::os::unix::fs::symlink("../../../bus/pci/drivers/vfio-pci", dir.join("driver"))?;
    std::os::unix::fs::symlink("../../../kernel/iommu_groups/12", dir.join("iommu_group"))?;
    Ok(dir)
}
