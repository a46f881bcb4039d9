//! Bring-up and teardown of a ConnectX function (PRM section 3), and the [`Hca`] handle that
//! owns what bring-up created: the command queue, firmware pages, a UAR, the event queue, a
//! default PD and the GID entries.
//!
//! Bring-up: wait for firmware, check the command interface revision, set up the command
//! queue, ENABLE_HCA, QUERY_ISSI / SET_ISSI 1, boot pages, HOST_ENDIANNESS, capabilities
//! (general, atomic, RoCE: max and current; SET_HCA_CAP where the driver changes something),
//! init pages, INIT_HCA, roce_en, the MAC, ALLOC_UAR, CREATE_EQ, ALLOC_PD,
//! QUERY_SPECIAL_CONTEXTS and the GID entries. Teardown undoes it and takes every firmware
//! page back: DEALLOC_PD, DESTROY_EQ, DEALLOC_UAR, TEARDOWN_HCA, MANAGE_PAGES take until
//! firmware holds none, DISABLE_HCA.

use crate::cmdq::{CmdQueue, CommandObserver, DEFAULT_CMD_TIMEOUT, SlotClass};
use crate::eq::{ASYNC_EVENTS, EventQueue};
use crate::error::DriverError;
use crate::health::{self, FatalReason, HealthMonitor, HealthRegisters};
use crate::key_variants::KeyVariants;
use crate::pages::{FirmwarePages, PagePhase};
use crate::uar::Uar;
use rnic_hw_regs::Bus;
use rnic_hw_regs::caps::{AtomicCaps, CmdHcaCap, RoceCap};
use rnic_hw_regs::cmd::{
    AccessRegisterIn, AccessRegisterOut, AllocPdIn, CmdOpcode, DeallocPdIn, DisableHcaIn,
    EnableHcaIn, InitHcaIn, ModifyNicVportContextIn, QueryHcaCapIn, QueryIssiIn,
    QueryNicVportContextIn, QuerySpecialContextsIn, REG_HOST_ENDIANNESS, RegisterHostEndianness,
    SetHcaCapIn, SetIssiIn, SetRoceAddressIn, TEARDOWN_HCA_PROFILE_GRACEFUL, TeardownHcaIn, op_mod,
};
use rnic_hw_regs::ctx::{ROCE_L3_TYPE_IPV4, ROCE_L3_TYPE_IPV6, ROCE_VERSION_2};
use rnic_hw_regs::eqe::{EqeEvent, EventType};
use rnic_hw_regs::init_seg::{self, CmdqAddrLSz, FwVersion, NicInterface};
use std::fmt;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use zerocopy::IntoBytes;

/// How long to wait for the `initializing` bit by default (the kernel's pre-init timeout).
pub const DEFAULT_INIT_TIMEOUT: Duration = Duration::from_secs(120);
/// The `log_max_qp` the driver asks for (the kernel's default profile), capped by the max.
pub const DEFAULT_LOG_MAX_QP: u8 = 17;
/// Default log2 of the event queue size.
pub const DEFAULT_EQ_LOG_SIZE: u8 = 7;
/// Default health counter sampling interval (the kernel's 2 s).
pub const DEFAULT_HEALTH_INTERVAL: Duration = Duration::from_secs(2);

/// How to bring a device up.
///
/// ```
/// use rnic_driver::HcaConfig;
/// use std::net::Ipv4Addr;
///
/// let cfg = HcaConfig {
///     ipv4: Some(Ipv4Addr::new(192, 0, 2, 1)),
///     ..HcaConfig::default()
/// };
/// assert!(cfg.validate().is_ok());
/// // Memory keys that repeat from run to run (a seeded fault campaign compared by capture).
/// let repro = HcaConfig { mkey_seed: Some(7), ..cfg.clone() };
/// assert!(repro.validate().is_ok());
/// assert!(HcaConfig { eq_log_size: 0, ..cfg }.validate().is_err());
/// ```
#[derive(Clone)]
pub struct HcaConfig {
    /// Timeout of every command (default 60 s, as the kernel).
    pub cmd_timeout: Duration,
    /// Timeout of the wait for the `initializing` bit after the command queue address is
    /// written (default 120 s).
    pub init_timeout: Duration,
    /// Timeout of a wait for `initializing` *before* writing the command queue address, as
    /// newer Linux kernels do (120 s there). Zero (the default) skips it, as rdma-core's VFIO
    /// driver does: a device may keep `initializing` set until it knows the queue address.
    pub pre_init_timeout: Duration,
    /// Most firmware pages the driver gives (a device asking for more is refused with
    /// [`DriverError::BadOutput`]); default 4 Mi pages (16 GiB).
    pub max_firmware_pages: usize,
    /// IPv4 address for GID index 1 (`::ffff:a.b.c.d`, RoCE v2); `None`: no GID 1.
    pub ipv4: Option<Ipv4Addr>,
    /// `log_max_qp` to set with SET_HCA_CAP (capped by the device's maximum), 1..=24.
    pub log_max_qp: u8,
    /// log2 of the number of EQEs of the event queue, 1..=16.
    pub eq_log_size: u8,
    /// Minimum time between two counted health counter samples.
    pub health_interval: Duration,
    /// Sees every command (tests use it to compare with a kernel trace).
    pub observer: Option<Arc<dyn CommandObserver>>,
    /// Seed of the memory keys' variant bytes (`mkey_7_0`, see [`crate::mr`]). `None` (the
    /// default) draws a fresh one at every open, so that keys cannot be guessed from the
    /// order of registration; `Some` fixes the sequence, for runs that must repeat byte for
    /// byte (a seeded fault campaign compared by its capture).
    pub mkey_seed: Option<u64>,
}

impl Default for HcaConfig {
    fn default() -> Self {
        Self {
            cmd_timeout: DEFAULT_CMD_TIMEOUT,
            init_timeout: DEFAULT_INIT_TIMEOUT,
            pre_init_timeout: Duration::ZERO,
            max_firmware_pages: 1 << 22,
            ipv4: None,
            log_max_qp: DEFAULT_LOG_MAX_QP,
            eq_log_size: DEFAULT_EQ_LOG_SIZE,
            health_interval: DEFAULT_HEALTH_INTERVAL,
            observer: None,
            mkey_seed: None,
        }
    }
}

impl fmt::Debug for HcaConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HcaConfig")
            .field("cmd_timeout", &self.cmd_timeout)
            .field("init_timeout", &self.init_timeout)
            .field("pre_init_timeout", &self.pre_init_timeout)
            .field("max_firmware_pages", &self.max_firmware_pages)
            .field("ipv4", &self.ipv4)
            .field("log_max_qp", &self.log_max_qp)
            .field("eq_log_size", &self.eq_log_size)
            .field("health_interval", &self.health_interval)
            .field("observer", &self.observer.is_some())
            .field("mkey_seed", &self.mkey_seed)
            .finish()
    }
}

impl HcaConfig {
    /// Checks every value is in range.
    ///
    /// ```
    /// use rnic_driver::HcaConfig;
    ///
    /// assert!(HcaConfig::default().validate().is_ok());
    /// assert!(HcaConfig { log_max_qp: 25, ..HcaConfig::default() }.validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<(), DriverError> {
        let bad = |s: String| Err(DriverError::InvalidArgument(s));
        if self.cmd_timeout.is_zero() {
            return bad("cmd_timeout must be positive".into());
        }
        if self.init_timeout.is_zero() {
            return bad("init_timeout must be positive".into());
        }
        if self.health_interval.is_zero() {
            return bad("health_interval must be positive".into());
        }
        if !(1..=24).contains(&self.log_max_qp) {
            return bad(format!("log_max_qp {} not in 1..=24", self.log_max_qp));
        }
        if !(1..=16).contains(&self.eq_log_size) {
            return bad(format!("eq_log_size {} not in 1..=16", self.eq_log_size));
        }
        if let Some(ip) = self.ipv4 {
            if ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() {
                return bad(format!("{ip} is not a unicast address"));
            }
        }
        Ok(())
    }
}

/// The capabilities read during bring-up (current values are those after SET_HCA_CAP).
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let hca = rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?;
/// let caps = hca.caps();
/// // SET_HCA_CAP asked for log_max_qp 17, capped by the device's maximum.
/// assert_eq!(caps.general.log_max_qp(), caps.general_max.log_max_qp().min(17));
/// assert!(caps.roce.is_some());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Caps {
    /// General capabilities, maximum.
    pub general_max: CmdHcaCap,
    /// General capabilities, current.
    pub general: CmdHcaCap,
    /// Atomic capabilities (max, current), when the device has atomics.
    pub atomic: Option<(AtomicCaps, AtomicCaps)>,
    /// RoCE capabilities (max, current), when the device has RoCE.
    pub roce: Option<(RoceCap, RoceCap)>,
}

impl Caps {
    /// The most work requests one queue of a QP takes: 2^`log_max_qp_sz` (`ibv_query_device`'s
    /// `max_qp_wr`; [`crate::qp::Qp::create`] refuses more).
    ///
    /// ```
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default()).unwrap();
    /// let caps = hca.caps();
    /// assert_eq!(caps.max_qp_wr(), 1 << caps.general.log_max_qp_sz());
    /// ```
    pub fn max_qp_wr(&self) -> u32 {
        1u32.checked_shl(u32::from(self.general.log_max_qp_sz()))
            .unwrap_or(u32::MAX)
    }

    /// The most SGEs one work request of a QP takes, send or receive (`ibv_query_device`'s
    /// `max_sge`; [`crate::qp::Qp::create`] refuses more): a send WQE of `max_wqe_sz_sq` bytes
    /// (at most 63 segments of 16 bytes) less its control, address and atomic segments, and a
    /// receive WQE of `max_wqe_sz_rq` bytes, one SGE per 16.
    ///
    /// ```
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default()).unwrap();
    /// assert!(hca.caps().max_sge() >= 1);
    /// ```
    pub fn max_sge(&self) -> u32 {
        let g = &self.general;
        let send = (u32::from(g.max_wqe_sz_sq()) / 16)
            .min(63)
            .saturating_sub(4);
        let recv = u32::from(g.max_wqe_sz_rq()) / 16;
        send.min(recv)
    }

    /// The most SGEs one SRQ work request takes (`ibv_query_device`'s `max_srq_sge`): an SRQ
    /// WQE of `max_wqe_sz_rq` bytes starts with a 16-byte next-WQE segment.
    ///
    /// ```
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default()).unwrap();
    /// let caps = hca.caps();
    /// assert_eq!(caps.max_srq_sge(), u32::from(caps.general.max_wqe_sz_rq()) / 16 - 1);
    /// ```
    pub fn max_srq_sge(&self) -> u32 {
        (u32::from(self.general.max_wqe_sz_rq()) / 16).saturating_sub(1)
    }
}

/// One GID table entry the driver programmed.
///
/// ```
/// use rnic_driver::hca::gid_ipv4;
/// use rnic_driver::{Hca, HcaConfig};
/// use std::net::Ipv4Addr;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
///
/// let ip = Ipv4Addr::new(192, 0, 2, 1);
/// let cfg = HcaConfig { ipv4: Some(ip), ..HcaConfig::default() };
/// let hca = Hca::open(std::sync::Arc::new(dev.bus()), cfg)?;
/// let g1 = hca.gids().iter().find(|g| g.index == 1).ok_or("no GID 1")?;
/// assert_eq!((g1.gid, g1.l3_type, g1.version), (gid_ipv4(ip), 0, 2));
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GidEntry {
    /// GID table index.
    pub index: u16,
    /// The GID (network order).
    pub gid: [u8; 16],
    /// `roce_l3_type`: 0 IPv4, 1 IPv6.
    pub l3_type: u8,
    /// `roce_version` (2 = RoCE v2).
    pub version: u8,
}

/// The link-local GID of a MAC: `fe80::` + modified EUI-64 (universal/local bit flipped,
/// `ff:fe` in the middle).
///
/// ```
/// use rnic_driver::hca::gid_link_local;
///
/// let gid = gid_link_local([0x24, 0x8a, 0x07, 0xa8, 0xfa, 0x22]);
/// assert_eq!(
///     gid,
///     [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x26, 0x8a, 0x07, 0xff, 0xfe, 0xa8, 0xfa, 0x22]
/// );
/// ```
pub fn gid_link_local(mac: [u8; 6]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[0] = 0xfe;
    g[1] = 0x80;
    g[8] = mac[0] ^ 0x02;
    g[9] = mac[1];
    g[10] = mac[2];
    g[11] = 0xff;
    g[12] = 0xfe;
    g[13] = mac[3];
    g[14] = mac[4];
    g[15] = mac[5];
    g
}

/// The RoCE v2 GID of an IPv4 address: `::ffff:a.b.c.d`.
///
/// ```
/// use rnic_driver::hca::gid_ipv4;
/// use std::net::Ipv4Addr;
///
/// let gid = gid_ipv4(Ipv4Addr::new(10, 0, 0, 1));
/// assert_eq!(gid, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1]);
/// ```
pub fn gid_ipv4(ip: Ipv4Addr) -> [u8; 16] {
    ip.to_ipv6_mapped().octets()
}

/// The general capability block the driver writes with SET_HCA_CAP: the current block with
/// the fields the Linux driver sets: `log_max_qp` (the wanted value, capped by the maximum),
/// `cmdif_checksum` 0, `pkey_table_size` 0 (128 entries) and `log_uar_page_sz` 0 (4 KiB UAR
/// pages). A pure function.
///
/// On the ConnectX-4 of the real trace this changes only `log_max_qp` (14 to 17).
///
/// ```
/// use rnic_driver::hca::general_caps_to_set;
/// use rnic_hw_regs::caps::CmdHcaCap;
///
/// let mut max = CmdHcaCap::default();
/// max.set_log_max_qp(14);
/// let set = general_caps_to_set(&max, &CmdHcaCap::default(), 17);
/// assert_eq!(set.log_max_qp(), 14); // capped by the maximum
/// ```
pub fn general_caps_to_set(max: &CmdHcaCap, cur: &CmdHcaCap, log_max_qp: u8) -> CmdHcaCap {
    let mut set = *cur;
    set.set_log_max_qp(log_max_qp.min(max.log_max_qp()));
    set.set_cmdif_checksum(0);
    set.set_pkey_table_size(0);
    set.set_log_uar_page_sz(0);
    set
}

/// The HOST_ENDIANNESS register value for this host (`he` = 1 on big-endian hosts).
///
/// ```
/// use rnic_driver::hca::host_endianness_register;
///
/// assert_eq!(host_endianness_register().he(), cfg!(target_endian = "big"));
/// ```
pub fn host_endianness_register() -> RegisterHostEndianness {
    let mut he = RegisterHostEndianness::default();
    he.set_he(cfg!(target_endian = "big"));
    he
}

/// Special mkeys from QUERY_SPECIAL_CONTEXTS.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let hca = rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?;
/// let sc = hca.special_contexts();
/// assert_ne!(sc.resd_lkey, 0); // the reserved lkey (physical addressing)
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpecialContexts {
    /// Reserved lkey (physical addressing, any PD). The device honours it only on QPs and
    /// SRQs created with `rlky`, which this driver never sets: on its queues a work request
    /// naming it completes with a local protection error.
    pub resd_lkey: u32,
    /// Dump-fill mkey.
    pub dump_fill_mkey: u32,
    /// Null mkey.
    pub null_mkey: u32,
}

/// What bring-up created, undone by teardown.
#[derive(Debug, Default)]
struct Resources {
    enabled: bool,
    initialized: bool,
    uar: Option<Uar>,
    eq: Option<EventQueue>,
    pd: Option<u32>,
    pages: FirmwarePages,
    /// Events drained while serving page requests, for [`Hca::process_events`].
    pending: Vec<EqeEvent>,
    /// Set when the device stopped answering: teardown issues no more commands.
    dead: bool,
    /// The fatal event was handed to [`Hca::process_events`]' caller.
    fatal_reported: bool,
    closed: bool,
}

/// An open ConnectX function: bring-up done, ready for objects.
///
/// Bringing up an emulated ConnectX (the same code drives a real one through
/// [`VfioBus`](crate::vfio::VfioBus)):
///
/// ```
/// use rnic_driver::{Hca, HcaConfig};
/// use rnic_emulator::{Device, Profile, RunMode};
/// use std::sync::Arc;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dev = Device::new(Profile::default(), RunMode::Deterministic);
/// let hca = Hca::open(Arc::new(dev.bus()), HcaConfig::default())?;
/// assert_eq!(hca.mac(), Profile::default().mac);
/// assert!(hca.pages_held() > 0);
/// hca.check_health()?;
/// hca.close()?; // every firmware page comes back
/// # Ok(()) }
/// ```
pub struct Hca {
    bus: Arc<dyn Bus>,
    cmdq: CmdQueue,
    res: Arc<Mutex<Resources>>,
    health: Mutex<HealthMonitor>,
    caps: Option<Caps>,
    fw: FwVersion,
    mac: [u8; 6],
    /// The port's Ethernet MTU (NIC vport context `mtu`), read at bring-up.
    port_mtu: u16,
    gids: Vec<GidEntry>,
    special: SpecialContexts,
    uar: Option<Uar>,
    pd: u32,
    eqn: u8,
    max_pages: usize,
    key_variants: KeyVariants,
}

impl fmt::Debug for Hca {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hca")
            .field("fw", &self.fw)
            .field("mac", &self.mac)
            .field("pd", &self.pd)
            .field("eqn", &self.eqn)
            .field("cmdq", &self.cmdq)
            .finish_non_exhaustive()
    }
}

/// Whether an error means the device may no longer answer (no more commands in teardown).
fn device_unresponsive(e: &DriverError) -> bool {
    matches!(
        e,
        DriverError::Timeout { .. }
            | DriverError::DeviceFatal { .. }
            | DriverError::Delivery { .. }
            | DriverError::UnknownDeliveryStatus { .. }
            | DriverError::Bus(rnic_hw_regs::BusError::DeviceLost)
    )
}

/// Polls `initializing` until clear, failing early on a dead device.
fn wait_firmware(bus: &dyn Bus, timeout: Duration, phase: &'static str) -> Result<(), DriverError> {
    let start = Instant::now();
    loop {
        if !init_seg::is_initializing(bus.read32(init_seg::INITIALIZING)) {
            return Ok(());
        }
        if bus.read32(init_seg::HEALTH_FW_VER) == init_seg::FW_VER_PCI_DEAD {
            return Err(DriverError::DeviceFatal {
                reason: health::FatalReason::PciLinkDead,
            });
        }
        let waited = start.elapsed();
        if waited >= timeout {
            return Err(DriverError::InitTimeout { phase, waited });
        }
        // rdma-core polls every 2 ms; start faster for emulated devices.
        std::thread::sleep(Duration::from_micros(
            if waited < Duration::from_millis(10) {
                50
            } else {
                2000
            },
        ));
    }
}

impl Hca {
    /// Brings the device behind `bus` up (PRM section 3). On failure, what was created is torn
    /// down again (best effort; nothing more is sent to a device that stopped answering).
    ///
    /// ```
    /// use rnic_driver::{DriverError, Hca, HcaConfig};
    /// use std::sync::Arc;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    ///
    /// let hca = Hca::open(Arc::new(dev.bus()), HcaConfig::default())?;
    /// assert_eq!(hca.gids().len(), 1); // link-local only: no IPv4 configured
    /// // A bad configuration is refused before anything is sent.
    /// let bad = HcaConfig { eq_log_size: 0, ..HcaConfig::default() };
    /// let err = Hca::open(hca.bus().clone(), bad).unwrap_err();
    /// assert!(matches!(err, DriverError::InvalidArgument(_)));
    /// # Ok(()) }
    /// ```
    pub fn open(bus: Arc<dyn Bus>, config: HcaConfig) -> Result<Self, DriverError> {
        config.validate()?;
        if !config.pre_init_timeout.is_zero() {
            wait_firmware(
                &*bus,
                config.pre_init_timeout,
                "before the command queue address",
            )?;
        }
        if bus.read32(init_seg::HEALTH_FW_VER) == init_seg::FW_VER_PCI_DEAD {
            return Err(DriverError::DeviceFatal {
                reason: health::FatalReason::PciLinkDead,
            });
        }
        let fw = FwVersion::decode(
            bus.read32(init_seg::FW_REV),
            bus.read32(init_seg::CMDIF_REV_FW_SUB),
        );
        let rev = init_seg::cmdif_rev(bus.read32(init_seg::CMDIF_REV_FW_SUB));
        if rev != init_seg::CMDIF_REV {
            return Err(DriverError::CmdifRevision {
                found: rev,
                expected: init_seg::CMDIF_REV,
            });
        }
        let cmdq = CmdQueue::new(
            bus.clone(),
            bus.read32(init_seg::CMDQ_ADDR_L_SZ),
            config.cmd_timeout,
            config.observer.clone(),
        )?;
        log::debug!(
            "firmware {fw}, {} command slots, command queue at {:#x}",
            cmdq.slots(),
            cmdq.iova()
        );
        let (hi, lo) = init_seg::cmdq_addr_words(cmdq.iova())
            .map_err(|_| DriverError::Bus(rnic_hw_regs::BusError::InvalidArgument))?;
        bus.write32(init_seg::CMDQ_ADDR_H, hi);
        bus.write32(
            init_seg::CMDQ_ADDR_L_SZ,
            CmdqAddrLSz::for_write(lo, NicInterface::FullDriver).0,
        );
        let mut hca = Hca {
            bus: bus.clone(),
            cmdq,
            res: Arc::new(Mutex::new(Resources::default())),
            health: Mutex::new(HealthMonitor::new(config.health_interval)),
            caps: None,
            fw,
            mac: [0; 6],
            port_mtu: 0,
            gids: Vec::new(),
            special: SpecialContexts::default(),
            uar: None,
            pd: 0,
            eqn: 0,
            max_pages: config.max_firmware_pages,
            key_variants: KeyVariants::new(config.mkey_seed),
        };
        match hca.bring_up(&config) {
            Ok(()) => Ok(hca),
            Err(e) => {
                log::warn!("bring-up failed: {e}; tearing down what was set up");
                if device_unresponsive(&e) {
                    hca.res().dead = true;
                }
                if let Err(t) = hca.teardown() {
                    log::warn!("teardown after a failed bring-up: {t}");
                }
                Err(e)
            }
        }
    }

    fn res(&self) -> MutexGuard<'_, Resources> {
        self.res.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn bring_up(&mut self, config: &HcaConfig) -> Result<(), DriverError> {
        let bus = self.bus.clone();
        let bus = &*bus;
        wait_firmware(bus, config.init_timeout, "after the command queue address")?;
        if let Some(reason) = health::assess(&HealthRegisters::read(bus)) {
            return Err(DriverError::DeviceFatal { reason });
        }

        self.cmdq.exec(&EnableHcaIn::new_cmd(), &[], &mut [])?;
        self.res().enabled = true;

        let issi = self.cmdq.exec(&QueryIssiIn::new_cmd(), &[], &mut [])?;
        if !issi.supports_issi(1) {
            return Err(DriverError::Unsupported(format!(
                "ISSI 1 (supported_issi_dw0 {:#x})",
                issi.supported_issi_dw0()
            )));
        }
        let mut set_issi = SetIssiIn::new_cmd();
        set_issi.set_current_issi(1);
        self.cmdq.exec(&set_issi, &[], &mut [])?;

        self.satisfy_pages(PagePhase::Boot)?;

        let mut reg = AccessRegisterIn::new_cmd();
        reg.set_op_mod(op_mod::ACCESS_REG_WRITE);
        reg.set_register_id(REG_HOST_ENDIANNESS);
        let he = host_endianness_register();
        let mut reg_out = [0u8; 16];
        let _: AccessRegisterOut = self.cmdq.exec(&reg, he.as_bytes(), &mut reg_out)?;

        let caps = self.set_caps(config)?;
        self.caps = Some(caps);

        self.satisfy_pages(PagePhase::Init)?;
        // INIT_HCA without a software owner id: the 16-byte input the kernel of the
        // ConnectX-4 trace sent (newer `mlx5_ifc.h` adds `sw_owner_id`, 0x20 bytes in all).
        let init = InitHcaIn::new_cmd();
        let mut init_out = [0u8; 16];
        self.cmdq
            .exec_raw(&init.as_bytes()[..16], &mut init_out, SlotClass::Regular)?;
        self.res().initialized = true;

        let caps = self.caps.clone().ok_or(DriverError::Closed)?;
        if !caps.general.roce() {
            return Err(DriverError::Unsupported("RoCE (cap roce is 0)".into()));
        }
        let mut vport = ModifyNicVportContextIn::new_cmd();
        vport.field_select_mut().set_roce_en(true);
        vport.nic_vport_context_mut().set_roce_en(true);
        self.cmdq.exec(&vport, &[], &mut [])?;

        let q = self
            .cmdq
            .exec(&QueryNicVportContextIn::new_cmd(), &[], &mut [])?;
        self.mac = q.nic_vport_context().permanent_address().mac();
        self.port_mtu = q.nic_vport_context().mtu();

        let uar = Uar::alloc(&self.cmdq, bus)?;
        self.res().uar = Some(uar);
        self.uar = Some(uar);

        let eq = EventQueue::create(&self.cmdq, bus, uar, config.eq_log_size, ASYNC_EVENTS)?;
        self.eqn = eq.eqn();
        self.res().eq = Some(eq);
        // Serve page requests while waiting for commands. `try_lock`: when the resources are
        // held (bring-up giving pages, teardown), the holder is the one waiting.
        let weak = Arc::downgrade(&self.res);
        let hook_bus = self.bus.clone();
        let max = self.max_pages;
        self.cmdq
            .set_idle_hook(Some(Arc::new(move |cmdq: &CmdQueue| {
                let Some(res) = weak.upgrade() else { return };
                let Ok(mut res) = res.try_lock() else { return };
                if res.closed || res.dead {
                    return;
                }
                if let Err(e) = serve_events(&mut res, cmdq, &*hook_bus, max) {
                    log::warn!("serving a page request while waiting for a command: {e}");
                }
            })));

        let pd = self.cmdq.exec(&AllocPdIn::new_cmd(), &[], &mut [])?.pd();
        self.res().pd = Some(pd);
        self.pd = pd;

        let sc = self
            .cmdq
            .exec(&QuerySpecialContextsIn::new_cmd(), &[], &mut [])?;
        self.special = SpecialContexts {
            resd_lkey: sc.resd_lkey(),
            dump_fill_mkey: sc.dump_fill_mkey(),
            null_mkey: sc.null_mkey(),
        };

        let table = caps
            .roce
            .map_or(0, |(_, cur)| cur.roce_address_table_size());
        let mut gids = vec![GidEntry {
            index: 0,
            gid: gid_link_local(self.mac),
            l3_type: ROCE_L3_TYPE_IPV6,
            version: ROCE_VERSION_2,
        }];
        if let Some(ip) = config.ipv4 {
            gids.push(GidEntry {
                index: 1,
                gid: gid_ipv4(ip),
                l3_type: ROCE_L3_TYPE_IPV4,
                version: ROCE_VERSION_2,
            });
        }
        if usize::from(table) < gids.len() {
            return Err(DriverError::Unsupported(format!(
                "{} GID entries (roce_address_table_size {table})",
                gids.len()
            )));
        }
        for g in &gids {
            let mut i = SetRoceAddressIn::new_cmd();
            i.set_roce_address_index(g.index);
            let a = i.roce_address_mut();
            a.set_source_l3_address(g.gid);
            a.set_source_mac(self.mac);
            a.set_roce_l3_type(g.l3_type);
            a.set_roce_version(g.version);
            self.cmdq.exec(&i, &[], &mut [])?;
        }
        self.gids = gids;

        // Serve page requests that arrived during bring-up.
        self.process_events()?;
        Ok(())
    }

    /// QUERY_PAGES for `phase` and MANAGE_PAGES give (or take, if negative).
    fn satisfy_pages(&self, phase: PagePhase) -> Result<(), DriverError> {
        let mut res = self.res();
        let n = res.pages.query(&self.cmdq, phase)?;
        log::debug!("firmware asks for {n} {phase:?} pages");
        check_page_request(res.pages.held(), n, self.max_pages)?;
        if n > 0 {
            res.pages.give(&self.cmdq, &*self.bus, n as usize)?;
        } else if n < 0 {
            res.pages
                .take(&self.cmdq, &*self.bus, n.unsigned_abs() as usize)?;
        }
        Ok(())
    }

    fn query_cap(&self, cap_type: u16, mode: u16) -> Result<[u8; 0x100], DriverError> {
        let mut i = QueryHcaCapIn::new_cmd();
        i.set_op_mod(op_mod::query_hca_cap(cap_type, mode));
        let out = self.cmdq.exec(&i, &[], &mut [])?;
        let mut block = [0u8; 0x100];
        block.copy_from_slice(&out.capability().as_bytes()[..0x100]);
        Ok(block)
    }

    fn set_cap(&self, cap_type: u16, block: &[u8; 0x100]) -> Result<(), DriverError> {
        let mut i = SetHcaCapIn::new_cmd();
        i.set_op_mod(op_mod::set_hca_cap(cap_type));
        i.capability_mut().0[..0x100].copy_from_slice(block);
        self.cmdq.exec(&i, &[], &mut [])?;
        Ok(())
    }

    /// Capabilities: what the kernel does (general: log_max_qp, cmdif_checksum 0, the pkey
    /// table size and 4 KiB UAR pages; atomic: host-endian 8-byte responses when supported;
    /// RoCE: software-chosen UDP source ports when supported).
    fn set_caps(&self, config: &HcaConfig) -> Result<Caps, DriverError> {
        use zerocopy::FromBytes;
        let parse = |b: &[u8; 0x100]| {
            CmdHcaCap::read_from_bytes(b).map_err(|_| DriverError::BadOutput {
                opcode: CmdOpcode::QueryHcaCap,
                what: "capability block".into(),
            })
        };
        let max = parse(&self.query_cap(op_mod::HCA_CAP_GENERAL, op_mod::HCA_CAP_MAX)?)?;
        let cur = parse(&self.query_cap(op_mod::HCA_CAP_GENERAL, op_mod::HCA_CAP_CURRENT)?)?;
        let cur = general_caps_to_set(&max, &cur, config.log_max_qp);
        self.set_cap(op_mod::HCA_CAP_GENERAL, &cur.0)?;

        let mut atomic = None;
        if cur.atomic() {
            let amax = AtomicCaps::read_from_bytes(
                &self.query_cap(op_mod::HCA_CAP_ATOMIC, op_mod::HCA_CAP_MAX)?,
            )
            .map_err(|_| DriverError::Unsupported("atomic caps".into()))?;
            let mut acur = AtomicCaps::read_from_bytes(
                &self.query_cap(op_mod::HCA_CAP_ATOMIC, op_mod::HCA_CAP_CURRENT)?,
            )
            .map_err(|_| DriverError::Unsupported("atomic caps".into()))?;
            if amax.supported_atomic_req_8B_endianness_mode_1()
                && acur.atomic_req_8B_endianness_mode() != 1
            {
                acur.set_atomic_req_8B_endianness_mode(1);
                self.set_cap(op_mod::HCA_CAP_ATOMIC, &acur.0)?;
            }
            atomic = Some((amax, acur));
        }

        let mut roce = None;
        if cur.roce() {
            let rmax = RoceCap::read_from_bytes(
                &self.query_cap(op_mod::HCA_CAP_ROCE, op_mod::HCA_CAP_MAX)?,
            )
            .map_err(|_| DriverError::Unsupported("RoCE caps".into()))?;
            let mut rcur = RoceCap::read_from_bytes(
                &self.query_cap(op_mod::HCA_CAP_ROCE, op_mod::HCA_CAP_CURRENT)?,
            )
            .map_err(|_| DriverError::Unsupported("RoCE caps".into()))?;
            if rmax.sw_r_roce_src_udp_port() && !rcur.sw_r_roce_src_udp_port() {
                rcur.set_sw_r_roce_src_udp_port(true);
                self.set_cap(op_mod::HCA_CAP_ROCE, &rcur.0)?;
            }
            roce = Some((rmax, rcur));
        }
        Ok(Caps {
            general_max: max,
            general: cur,
            atomic,
            roce,
        })
    }

    /// Drains the event queue: page requests are served here (pages given or taken back);
    /// the other events are returned. An EQE with an unknown type is logged and skipped.
    ///
    /// Page requests are also served while the driver waits for a command (firmware may hold
    /// a command until it gets pages); events seen then are returned by the next call.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?;
    /// let events = hca.process_events()?; // page requests are served inside
    /// assert!(events.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn process_events(&self) -> Result<Vec<EqeEvent>, DriverError> {
        if self.res().closed {
            return Err(DriverError::Closed);
        }
        // A dead device: its fatal event once (IBV_EVENT_DEVICE_FATAL), then the error.
        if let Err(e) = self.check_health() {
            let mut res = self.res();
            if res.fatal_reported {
                return Err(e);
            }
            res.fatal_reported = true;
            return Ok(vec![EqeEvent::Other(EventType::InternalError)]);
        }
        let mut res = self.res();
        if res.closed || res.dead {
            return Err(DriverError::Closed);
        }
        serve_events(&mut res, &self.cmdq, &*self.bus, self.max_pages)?;
        Ok(std::mem::take(&mut res.pending))
    }

    /// Checks the device's health: `fw_ver`, `nic_interface`, the health syndrome, and the
    /// health counter (sampled at most every [`HcaConfig::health_interval`]; three unchanged
    /// samples are a failure). Returns [`DriverError::DeviceFatal`] naming the reason.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?;
    /// assert!(hca.check_health().is_ok());
    /// # Ok(()) }
    /// ```
    pub fn check_health(&self) -> Result<(), DriverError> {
        if let Some(reason) = self.cmdq.fatal_reason() {
            return Err(DriverError::DeviceFatal { reason });
        }
        let mut m = self.health.lock().unwrap_or_else(|e| e.into_inner());
        match m.check(&*self.bus) {
            Some(reason) => {
                self.res().dead = true;
                self.cmdq.declare_fatal(reason);
                Err(DriverError::DeviceFatal { reason })
            }
            None => Ok(()),
        }
    }

    /// Why the device was declared dead (by [`Hca::check_health`] or by a command that found
    /// it fatal), `None` while it is alive. A dead device's objects answer every call with
    /// [`DriverError::DeviceFatal`] (posting: [`PostErrorKind::DeviceFatal`](crate::wr::PostErrorKind::DeviceFatal)),
    /// its QPs read as in the error state, and its CQs return every outstanding work request
    /// as a `WR_FLUSH_ERR` completion, as `ibv_poll_cq` does after `IBV_EVENT_DEVICE_FATAL`.
    ///
    /// ```
    /// use rnic_hw_regs::init_seg::HealthSyndrome;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?;
    /// assert!(hca.fatal_reason().is_none());
    /// dev.raise_health_syndrome(HealthSyndrome::FwCrc);
    /// assert!(hca.check_health().is_err());
    /// assert!(hca.fatal_reason().is_some());
    /// # Ok(()) }
    /// ```
    pub fn fatal_reason(&self) -> Option<FatalReason> {
        self.cmdq.fatal_reason()
    }

    /// Whether the device was declared dead: one relaxed load, for the data path.
    #[inline(always)]
    pub(crate) fn is_dead(&self) -> bool {
        self.cmdq.is_dead()
    }

    /// The command queue (for object commands).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?;
    /// assert!(hca.cmdq().slots() >= 2);
    /// # Ok(()) }
    /// ```
    pub fn cmdq(&self) -> &CmdQueue {
        &self.cmdq
    }

    /// The bus.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?;
    /// use rnic_hw_regs::Bus;
    /// assert_eq!(hca.bus().bar_len(), dev.bus().bar_len());
    /// # Ok(()) }
    /// ```
    pub fn bus(&self) -> &Arc<dyn Bus> {
        &self.bus
    }

    /// Capabilities (max and current).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?;
    /// assert!(hca.caps().general.log_max_cq_sz() > 0);
    /// # Ok(()) }
    /// ```
    pub fn caps(&self) -> &Caps {
        // Set before `open` returns Ok.
        self.caps.as_ref().unwrap_or_else(|| unreachable_caps())
    }

    /// The largest memory region the device registers, in bytes: 2^`log_max_mrw_sz` (the
    /// general capability), `u64::MAX` when that is 64. Registration refuses larger ones
    /// with [`DriverError::LimitExceeded`] before allocating or mapping anything.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?;
    /// let log = hca.caps().general.log_max_mrw_sz();
    /// assert_eq!(hca.max_mr_size(), 1u64.checked_shl(log.into()).unwrap_or(u64::MAX));
    /// # Ok(()) }
    /// ```
    pub fn max_mr_size(&self) -> u64 {
        1u64.checked_shl(u32::from(self.caps().general.log_max_mrw_sz()))
            .unwrap_or(u64::MAX)
    }

    /// Firmware version.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?;
    /// let (major, minor, sub) = rnic_emulator::Profile::default().fw_version;
    /// assert_eq!(hca.fw_version().to_string(), format!("{major}.{minor}.{sub}"));
    /// # Ok(()) }
    /// ```
    pub fn fw_version(&self) -> FwVersion {
        self.fw
    }

    /// The port's permanent MAC address.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?;
    /// assert_eq!(hca.mac(), rnic_emulator::Profile::default().mac);
    /// # Ok(()) }
    /// ```
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The port's Ethernet MTU (the NIC vport context's `mtu` at bring-up); its active RoCE
    /// MTU is [`Mtu::for_ethernet`](crate::qp::Mtu::for_ethernet) of it.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?;
    /// assert_eq!(hca.port_mtu(), 1500); // the default profile: a standard Ethernet port
    /// # Ok(()) }
    /// ```
    pub fn port_mtu(&self) -> u16 {
        self.port_mtu
    }

    /// The GID entries programmed (index 0 link-local, index 1 the IPv4 address if
    /// configured).
    ///
    /// ```
    /// use rnic_driver::hca::gid_link_local;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?;
    /// assert_eq!(hca.gids()[0].gid, gid_link_local(hca.mac()));
    /// # Ok(()) }
    /// ```
    pub fn gids(&self) -> &[GidEntry] {
        &self.gids
    }

    /// The programmed GID at table index `index`, if any: the one check every address
    /// (a QP's path, an address handle, the verbs layer's) makes of its source GID index.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// assert_eq!(hca.gid(0).map(|g| g.index), Some(0)); // the link-local GID
    /// assert!(hca.gid(9).is_none());
    /// # Ok(()) }
    /// ```
    pub fn gid(&self, index: u8) -> Option<&GidEntry> {
        self.gids.iter().find(|g| g.index == u16::from(index))
    }

    /// The default protection domain.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// assert_eq!(rnic_driver::pd::Pd::default_of(&hca).pdn(), hca.pd());
    /// # Ok(()) }
    /// ```
    pub fn pd(&self) -> u32 {
        self.pd
    }

    /// The driver's UAR page.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?;
    /// let uar = hca.uar().ok_or("closed")?;
    /// assert_eq!(uar.bar_offset(), uar.index() as usize * 4096);
    /// # Ok(()) }
    /// ```
    pub fn uar(&self) -> Option<Uar> {
        self.uar
    }

    /// The event queue number.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// // A CQ without a completion channel reports to the HCA's event queue.
    /// let cq = rnic_driver::cq::Cq::create(&hca, 16, None)?;
    /// assert_eq!(cq.query()?.c_eqn(), u32::from(hca.eqn()));
    /// # Ok(()) }
    /// ```
    pub fn eqn(&self) -> u8 {
        self.eqn
    }

    /// Special mkeys (reserved lkey, ...).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?;
    /// assert_ne!(hca.special_contexts(), rnic_driver::hca::SpecialContexts::default());
    /// # Ok(()) }
    /// ```
    pub fn special_contexts(&self) -> SpecialContexts {
        self.special
    }

    /// The variant byte (`mkey_7_0`) of the next memory key this device creates.
    pub(crate) fn next_key_variant(&self) -> u8 {
        self.key_variants.next()
    }

    /// Number of firmware pages the device holds.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?;
    /// assert!(hca.pages_held() > 0); // boot and init pages
    /// # Ok(()) }
    /// ```
    pub fn pages_held(&self) -> usize {
        self.res().pages.held()
    }

    /// Tears the device down and takes every firmware page back.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// let hca = rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?;
    /// assert!(hca.close().is_ok()); // TEARDOWN_HCA, all pages back, DISABLE_HCA
    /// # Ok(()) }
    /// ```
    pub fn close(self) -> Result<(), DriverError> {
        self.teardown()
    }

    fn teardown(&self) -> Result<(), DriverError> {
        let mut res = self.res();
        if res.closed {
            return Ok(());
        }
        res.closed = true;
        self.cmdq.set_idle_hook(None);
        let bus = &*self.bus;
        let mut first: Option<DriverError> = None;
        let mut note = |e: DriverError, what: &str, dead: &mut bool| {
            log::warn!("teardown: {what}: {e}");
            if device_unresponsive(&e) {
                *dead = true;
            }
            if first.is_none() {
                first = Some(e);
            }
        };
        let mut dead = res.dead;
        if let Some(pd) = res.pd.take() {
            if !dead {
                let mut i = DeallocPdIn::new_cmd();
                i.set_pd(pd);
                if let Err(e) = self.cmdq.exec(&i, &[], &mut []) {
                    note(e, "DEALLOC_PD", &mut dead);
                }
            }
        }
        if let Some(eq) = res.eq.take() {
            if dead {
                log::warn!("teardown: device not answering, EQ buffer leaked");
            } else if let Err(e) = eq.destroy(&self.cmdq, bus) {
                note(e, "DESTROY_EQ", &mut dead);
            }
        }
        if let Some(uar) = res.uar.take() {
            if !dead {
                if let Err(e) = uar.free(&self.cmdq) {
                    note(e, "DEALLOC_UAR", &mut dead);
                }
            }
        }
        if res.initialized && !dead {
            let mut i = TeardownHcaIn::new_cmd();
            i.set_profile(TEARDOWN_HCA_PROFILE_GRACEFUL);
            if let Err(e) = self.cmdq.exec(&i, &[], &mut []) {
                note(e, "TEARDOWN_HCA", &mut dead);
            }
            res.initialized = false;
        }
        if !dead {
            if let Err(e) = res.pages.reclaim_all(&self.cmdq, bus) {
                note(e, "MANAGE_PAGES take", &mut dead);
            }
        }
        if res.enabled && !dead {
            if let Err(e) = self.cmdq.exec(&DisableHcaIn::new_cmd(), &[], &mut []) {
                note(e, "DISABLE_HCA", &mut dead);
            }
            res.enabled = false;
        }
        let mut leaked_pages = 0;
        if res.pages.held() > 0 {
            // The device may still use them: never free memory it can write.
            leaked_pages = res.pages.leak_all();
            log::warn!("teardown: {leaked_pages} firmware pages not returned; leaked");
        }
        res.dead = dead;
        if dead {
            self.cmdq.mark_unresponsive();
        }
        match first {
            Some(e) => Err(e),
            None if dead => Err(DriverError::TeardownIncomplete { leaked_pages }),
            None => Ok(()),
        }
    }
}

/// Refuses page requests beyond [`HcaConfig::max_firmware_pages`].
fn check_page_request(held: usize, n: i32, max: usize) -> Result<(), DriverError> {
    if n > 0 && held.saturating_add(n as usize) > max {
        return Err(DriverError::BadOutput {
            opcode: CmdOpcode::QueryPages,
            what: format!("firmware asks for {n} more pages (holds {held}); the limit is {max}"),
        });
    }
    Ok(())
}

/// Drains the EQ: serves page requests, keeps other events in `res.pending`.
fn serve_events(
    res: &mut Resources,
    cmdq: &CmdQueue,
    bus: &dyn Bus,
    max_pages: usize,
) -> Result<(), DriverError> {
    let mut requests = Vec::new();
    let pending = &mut res.pending;
    if let Some(eq) = res.eq.as_mut() {
        eq.poll(bus, |ev| match ev {
            Ok(EqeEvent::PageRequest { func_id, num_pages }) => {
                requests.push((func_id, num_pages));
            }
            Ok(other) => pending.push(other),
            Err(t) => log::warn!("EQE with unknown event type {t:#x} skipped"),
        });
    }
    for (func_id, n) in requests {
        log::debug!("page request: function {func_id}, {n} pages");
        check_page_request(res.pages.held(), n, max_pages)?;
        if n > 0 {
            res.pages.give(cmdq, bus, n as usize)?;
        } else if n < 0 {
            res.pages.take(cmdq, bus, n.unsigned_abs() as usize)?;
        }
    }
    Ok(())
}

#[cold]
fn unreachable_caps() -> &'static Caps {
    // `Hca` values only escape `open` after `set_caps` stored the caps; keep a valid value
    // rather than panicking if that ever changes.
    static EMPTY: std::sync::OnceLock<Caps> = std::sync::OnceLock::new();
    EMPTY.get_or_init(|| Caps {
        general_max: CmdHcaCap::default(),
        general: CmdHcaCap::default(),
        atomic: None,
        roce: None,
    })
}

impl Drop for Hca {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            log::warn!("teardown on drop: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_validation() {
        let ok = HcaConfig::default();
        assert!(ok.validate().is_ok());
        for bad in [
            HcaConfig {
                cmd_timeout: Duration::ZERO,
                ..ok.clone()
            },
            HcaConfig {
                init_timeout: Duration::ZERO,
                ..ok.clone()
            },
            HcaConfig {
                health_interval: Duration::ZERO,
                ..ok.clone()
            },
            HcaConfig {
                log_max_qp: 0,
                ..ok.clone()
            },
            HcaConfig {
                log_max_qp: 25,
                ..ok.clone()
            },
            HcaConfig {
                eq_log_size: 17,
                ..ok.clone()
            },
            HcaConfig {
                ipv4: Some(Ipv4Addr::UNSPECIFIED),
                ..ok.clone()
            },
            HcaConfig {
                ipv4: Some(Ipv4Addr::new(224, 0, 0, 1)),
                ..ok.clone()
            },
        ] {
            let e = bad.validate().unwrap_err();
            assert!(matches!(e, DriverError::InvalidArgument(_)), "{e}");
        }
        assert!(format!("{ok:?}").contains("observer: false"));
    }

    fn words(ws: &[u32]) -> Vec<u8> {
        ws.iter().flat_map(|w| w.to_be_bytes()).collect()
    }

    /// The general current capabilities the ConnectX-4 of the real trace returned
    /// (QUERY_HCA_CAP op_mod 1, first 0x100 bytes of the block).
    const CX4_GENERAL_CURRENT: [u32; 64] = [
        0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x0f0f000e, 0x00170000, 0x00160018,
        0x16180008, 0x04401010, 0x00040004, 0x00040004, 0xe0000000, 0x40ff0000, 0xc7100101,
        0x1e000000, 0x00010001, 0xc0060c0e, 0xe2fa030f, 0x0005000c, 0xa0090000, 0x00000400,
        0x00000200, 0x00000100, 0x00000030, 0x00000015, 0x10180018, 0x00000000, 0x17171717,
        0x97100900, 0x09040606, 0x0000000f, 0x800c0e0a, 0x00000000, 0x00000000, 0x00000000,
        0x00000000, 0x10000000, 0x00000000, 0x00000113, 0x00000000, 0x00000000, 0x00000000,
        0x00000000, 0x00000000, 0x00000000, 0x00000001, 0x00080010, 0x00000000, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    #[test]
    fn set_hca_cap_changes_what_the_kernel_changed() {
        use zerocopy::FromBytes;
        let cur = CmdHcaCap::read_from_bytes(&words(&CX4_GENERAL_CURRENT)).unwrap();
        let mut max = cur;
        max.set_log_max_qp(23);
        let set = general_caps_to_set(&max, &cur, DEFAULT_LOG_MAX_QP);
        // The kernel's SET_HCA_CAP input differs from the current block in DW@0x10 only:
        // log_max_qp 0x0e -> 0x11.
        let mut expect = words(&CX4_GENERAL_CURRENT);
        expect[0x13] = 0x11;
        assert_eq!(set.as_bytes(), &expect[..]);
        // Capped by the maximum.
        max.set_log_max_qp(12);
        assert_eq!(general_caps_to_set(&max, &cur, 17).log_max_qp(), 12);
        let mut sum = cur;
        sum.set_cmdif_checksum(3);
        assert_eq!(general_caps_to_set(&max, &sum, 17).cmdif_checksum(), 0);
    }

    #[test]
    fn inputs_equal_the_kernels() {
        // Inline input bytes (entry 0x10..0x20) of the real trace.
        assert_eq!(
            EnableHcaIn::new_cmd().as_bytes(),
            &words(&[0x0104_0000, 0, 0, 0])[..]
        );
        assert_eq!(
            QueryIssiIn::new_cmd().as_bytes(),
            &words(&[0x010a_0000, 0, 0, 0])[..]
        );
        let mut i = SetIssiIn::new_cmd();
        i.set_current_issi(1);
        assert_eq!(i.as_bytes(), &words(&[0x010b_0000, 0, 1, 0])[..]);
        assert_eq!(
            &InitHcaIn::new_cmd().as_bytes()[..16],
            &words(&[0x0102_0000, 0, 0, 0])[..]
        );
        let mut reg = AccessRegisterIn::new_cmd();
        reg.set_op_mod(op_mod::ACCESS_REG_WRITE);
        reg.set_register_id(REG_HOST_ENDIANNESS);
        let mut full = reg.as_bytes().to_vec();
        full.extend_from_slice(host_endianness_register().as_bytes());
        if cfg!(target_endian = "little") {
            assert_eq!(full, words(&[0x0805_0000, 0, 0x7004, 0, 0, 0, 0, 0]));
        }
    }

    #[test]
    fn gids() {
        assert_eq!(
            gid_link_local([0x02, 0, 0, 0, 0, 1]),
            [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfe, 0, 0, 1]
        );
        assert_eq!(
            gid_ipv4(Ipv4Addr::new(192, 0, 2, 7))[10..],
            [0xff, 0xff, 192, 0, 2, 7]
        );
    }
}
