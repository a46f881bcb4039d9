//! [`Context`]: an open device (`struct ibv_context`).

use crate::device::{
    AtomicCap, DeviceAttr, DeviceName, EMU0_IP, EMU1_IP, GidEntry, GidType, LinkLayer,
    MELLANOX_OUI, OpenOptions, PortAttr, PortState, emulated_mac, node_guid_from_mac, resolve_pci,
};
use crate::error::{Error, Result};
use crate::neighbor::NeighborService;
use crate::registry;
use crate::{Gid, Mtu};
use rnic_driver::vfio::{VfioBus, VfioOptions, discovery};
use rnic_driver::{Hca, HcaConfig};
use rnic_emulator::link::{
    FaultConfig, FaultCounters, FaultStats, FaultyLink, InProcLink, Link, TapLink, UdpLink,
};
use rnic_emulator::{Device, Profile, RunMode};
use rnic_hw_regs::Bus;
use rnic_hw_regs::cmd::QueryAdapterIn;
use std::collections::HashMap;
use std::fmt;
use std::mem::ManuallyDrop;
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

/// Interrupt vectors a VFIO-driven device is opened with (one per completion channel,
/// reused round-robin beyond that).
const VFIO_IRQ_VECTORS: u16 = 16;

/// Asynchronous events kept for `get_async_event` at most (the oldest are dropped).
const MAX_ASYNC_EVENTS: usize = 4096;

/// How long an open waits for a device of the same name that is being closed.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The other end of the `emu0`/`emu1` link for the pair member that is not open yet.
static PAIR_STASH: Mutex<[Option<InProcLink>; 2]> = Mutex::new([None, None]);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The live handle registered under `name`, if any.
fn live(open: &registry::Open, name: &str) -> Option<Arc<DeviceHandle>> {
    // Only `DeviceHandle`s are registered (`open_in`), so the downcast cannot fail.
    open.get(name)?.upgrade()?.downcast().ok()
}

/// An open device: the driver's HCA plus, for an emulated device, the emulator behind it.
pub(crate) struct DeviceHandle {
    /// The HCA and the emulated device: dropped explicitly in `Drop`, before the handle
    /// leaves the registry (so a new open of the name waits for the old device to be gone).
    core: ManuallyDrop<Core>,
    name: String,
    attr: DeviceAttr,
    port: PortAttr,
    gids: Vec<GidEntry>,
    vectors: Arc<VectorPool>,
    neighbors: Mutex<HashMap<Gid, [u8; 6]>>,
    faults: Option<FaultConfig>,
    fault_stats: Mutex<Option<Arc<FaultStats>>>,
    events: Mutex<std::collections::VecDeque<crate::AsyncEvent>>,
    /// rnic's own neighbour resolution, on devices no kernel resolves for.
    agent: Option<NeighborService>,
}

/// What an open device consists of.
struct Core {
    // Field order: the HCA is torn down (commands to the device) before the emulated
    // device's thread stops.
    hca: Arc<Hca>,
    emu: Option<Device>,
}

impl Drop for DeviceHandle {
    fn drop(&mut self) {
        // The agent's thread stops and its objects are destroyed while the device runs.
        drop(self.agent.take());
        // SAFETY: `core` is dropped once, here, and not used afterwards.
        unsafe { ManuallyDrop::drop(&mut self.core) };
        // The device is gone (its UDP port closed): let the name be opened again.
        let mut open = registry::lock();
        if open.get(&self.name).is_some_and(|w| w.strong_count() == 0) {
            open.remove(&self.name);
        }
    }
}

impl DeviceHandle {
    /// Attaches `link` to the emulated device (wrapped in its fault injector, if any).
    fn relink(&self, link: InProcLink) {
        if let Some(dev) = &self.core.emu {
            let (link, stats) = with_faults(link, self.faults);
            *lock(&self.fault_stats) = stats;
            dev.set_link(link);
        }
    }
}

fn with_faults<L: Link + 'static>(
    link: L,
    faults: Option<FaultConfig>,
) -> (Box<dyn Link>, Option<Arc<FaultStats>>) {
    match faults {
        Some(cfg) => {
            let f = FaultyLink::new(link, cfg);
            let stats = f.stats();
            (Box::new(f), Some(stats))
        }
        None => (Box::new(link), None),
    }
}

impl fmt::Debug for DeviceHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("name", &self.name)
            .field("fw_ver", &self.attr.fw_ver)
            .field("mac", &self.port.mac)
            .finish_non_exhaustive()
    }
}

/// An open device (`struct ibv_context`): a cheap handle (an `Arc` inside); every object
/// created from it keeps it open.
///
/// ```
/// use rnic_verbs::{Context, GidType, LinkLayer, PortState};
///
/// # fn main() -> Result<(), rnic_verbs::Error> {
/// let ctx = Context::open("emu0")?;
/// let dev = ctx.query_device();
/// assert_eq!(dev.vendor_id, 0x02c9);
/// assert_eq!(dev.phys_port_cnt, 1);
/// let port = ctx.query_port(1)?;
/// assert_eq!(port.state, PortState::Active);
/// assert_eq!(port.link_layer, LinkLayer::Ethernet);
/// assert_eq!(ctx.query_gid(1, 1)?.to_string(), "::ffff:192.0.2.1");
/// assert_eq!(ctx.query_gid_entry(1, 1)?.gid_type, GidType::RoceV2);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Context {
    pub(crate) inner: Arc<DeviceHandle>,
}

impl Context {
    /// Opens the device `name` (`ibv_open_device`; names in [`crate::device`]). A name
    /// already open in this process shares its device.
    ///
    /// ```
    /// use rnic_verbs::{Context, Error};
    ///
    /// # fn main() -> Result<(), Error> {
    /// let ctx = Context::open("emu0")?;
    /// assert!(ctx.is_emulated());
    /// assert!(Context::open("emu0")?.same_device(&ctx)); // shared, as in ibverbs
    /// assert!(matches!(Context::open("mlx9_0"), Err(Error::NoSuchDevice { .. })));
    /// # Ok(()) }
    /// ```
    pub fn open(name: &str) -> Result<Context> {
        Self::open_with(name, &OpenOptions::default())
    }

    /// Opens the device `name` with options (fault injection and capture for emulated
    /// devices; the IPv4 address of a real one). Options apply when the call creates the
    /// device: asking for options on a device already open fails with
    /// [`Error::InvalidArgument`].
    ///
    /// ```
    /// use rnic_verbs::{Context, EmuOptions, OpenOptions};
    ///
    /// # fn main() -> Result<(), rnic_verbs::Error> {
    /// let emu = EmuOptions::default().with_fault_spec("loss=0.1,seed=42")?;
    /// let opts = OpenOptions { emu, ..OpenOptions::default() };
    /// let ctx = Context::open_with("emu0", &opts)?;
    /// assert!(ctx.fault_counters().is_some());
    /// // Options apply when the device is created, not to a second open.
    /// assert!(Context::open_with("emu0", &opts).is_err());
    /// # Ok(()) }
    /// ```
    pub fn open_with(name: &str, opts: &OpenOptions) -> Result<Context> {
        Self::open_in(name, opts, Path::new(discovery::SYSFS_PCI_DEVICES))
    }

    fn open_in(name: &str, opts: &OpenOptions, sysfs: &Path) -> Result<Context> {
        let parsed: DeviceName = name.parse()?;
        let key = match &parsed {
            DeviceName::Mlx5Index(_) | DeviceName::Pci(_) => resolve_pci(&parsed, sysfs)?,
            other => other.to_string(),
        };
        // Handles upgraded under the registry lock are dropped after it (declared first):
        // dropping the last one runs `DeviceHandle::drop`, which takes the lock.
        let mut keep: Vec<Arc<DeviceHandle>> = Vec::new();
        let mut open = registry::lock();
        // A device whose last handle is being dropped is still listed (dead) until its
        // teardown is over: wait for it, so its UDP port and link are free.
        let deadline = std::time::Instant::now() + CLOSE_WAIT;
        while open.get(&key).is_some_and(|w| w.strong_count() == 0) {
            if std::time::Instant::now() > deadline {
                open.remove(&key);
                break;
            }
            drop(open);
            std::thread::sleep(std::time::Duration::from_millis(1));
            open = registry::lock();
        }
        if let Some(h) = live(&open, &key) {
            if *opts != OpenOptions::default() {
                keep.push(h);
                return Err(Error::invalid(
                    "ibv_open_device",
                    format!(
                        "{key} is already open in this process: options apply only when it is created"
                    ),
                ));
            }
            return Ok(Context { inner: h });
        }
        if opts.ipv4.is_some() && parsed.emulated_ip().is_some() {
            return Err(Error::invalid(
                "ibv_open_device",
                "an emulated device's IPv4 address is the one in its name",
            ));
        }
        if !opts.emu.is_default() && parsed.emulated_ip().is_none() {
            return Err(Error::invalid(
                "ibv_open_device",
                "fault injection and capture are for emulated devices",
            ));
        }
        let handle = match parsed {
            DeviceName::EmuPair(i) => {
                let i = usize::from(i.min(1));
                let ip = if i == 0 { EMU0_IP } else { EMU1_IP };
                let partner = live(&open, &format!("emu{}", 1 - i));
                let mut stash = lock(&PAIR_STASH);
                let mine = match (partner, stash[i].take()) {
                    (Some(p), Some(end)) => {
                        keep.push(p);
                        end
                    }
                    (Some(p), None) => {
                        let (mine, theirs) = InProcLink::pair();
                        p.relink(theirs);
                        keep.push(p);
                        mine
                    }
                    (None, _) => {
                        let (mine, theirs) = InProcLink::pair();
                        stash[1 - i] = Some(theirs);
                        mine
                    }
                };
                drop(stash);
                open_emulated(&key, ip, mine, JUMBO_MTU, opts, None)?
            }
            DeviceName::EmuUdp(ip) => {
                let link = UdpLink::bind(ip).map_err(|e| Error::NoSuchDevice {
                    name: key.clone(),
                    why: format!("UDP link: {e}"),
                })?;
                // As rxe's port follows its netdev: the interface that holds the address.
                let mtu = link
                    .interface_mtu()
                    .map_or(ETHERNET_MTU, |m| u16::try_from(m).unwrap_or(u16::MAX));
                open_emulated(&key, ip, link, mtu, opts, None)?
            }
            DeviceName::EmuTap {
                ref ifname,
                ip,
                prefix,
            } => {
                let link = TapLink::open(ifname).map_err(|e| Error::NoSuchDevice {
                    name: key.clone(),
                    why: format!("TAP link: {e}"),
                })?;
                // A TAP this open created is down; one an administrator set up (on a bridge)
                // stays as it is, and setting it up needs CAP_NET_ADMIN it may not have.
                if let Err(e) = link.set_up() {
                    log::warn!("{key}: {e}: the interface stays as it is");
                }
                let mtu = u16::try_from(link.mtu()).unwrap_or(u16::MAX);
                open_emulated(&key, ip, link, mtu, opts, Some(prefix))?
            }
            DeviceName::Mlx5Index(_) | DeviceName::Pci(_) => open_vfio(&key, opts, sysfs)?,
        };
        let h = Arc::new(handle);
        let weak = Arc::downgrade(&h);
        let entry: registry::Entry = weak;
        open.insert(key, entry);
        Ok(Context { inner: h })
    }

    /// The device's name (canonical: `emu0`, `emu:10.0.0.1`, or the PCI address).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// assert_eq!(ctx.name(), "emu0");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Whether the device is emulated.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// assert!(ctx.is_emulated()); // mlx5_N / PCI names are real devices
    /// # Ok(()) }
    /// ```
    pub fn is_emulated(&self) -> bool {
        self.inner.core.emu.is_some()
    }

    /// `ibv_query_device`.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let attr = ctx.query_device();
    /// assert_eq!(attr.node_guid, node_guid_from_mac(ctx.mac()));
    /// assert!(attr.max_qp_wr >= 1024 && attr.max_cqe >= 1024, "{attr:?}");
    /// # Ok(()) }
    /// ```
    pub fn query_device(&self) -> DeviceAttr {
        self.inner.attr.clone()
    }

    /// `ibv_query_port` (port 1, the only one).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let port = ctx.query_port(1)?;
    /// // emu0 and emu1 are joined by a jumbo-frame link: an active MTU of 4096.
    /// assert_eq!((port.state, port.active_mtu), (PortState::Active, Mtu::Mtu4096));
    /// assert!(ctx.query_port(2).is_err()); // one port
    /// # Ok(()) }
    /// ```
    pub fn query_port(&self, port_num: u8) -> Result<PortAttr> {
        check_port("ibv_query_port", port_num)?;
        Ok(self.inner.port.clone())
    }

    /// `ibv_query_gid`: the GID at `index` of port `port_num`.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// assert!(ctx.query_gid(1, 0)?.is_link_local()); // fe80:: + EUI-64 of the MAC
    /// assert_eq!(ctx.query_gid(1, 1)?.ipv4(), Some([192, 0, 2, 1].into()));
    /// # Ok(()) }
    /// ```
    pub fn query_gid(&self, port_num: u8, index: u32) -> Result<Gid> {
        self.query_gid_entry(port_num, index).map(|e| e.gid)
    }

    /// `ibv_query_gid_ex`: the GID entry (with its type) at `index`.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let e = ctx.query_gid_entry(1, 0)?;
    /// assert_eq!((e.index, e.gid_type, e.port_num), (0, GidType::RoceV2, 1));
    /// assert!(ctx.query_gid_entry(1, 200).is_err()); // an empty index
    /// # Ok(()) }
    /// ```
    pub fn query_gid_entry(&self, port_num: u8, index: u32) -> Result<GidEntry> {
        check_port("ibv_query_gid", port_num)?;
        self.inner
            .gids
            .iter()
            .find(|g| g.index == index)
            .copied()
            .ok_or_else(|| {
                Error::invalid(
                    "ibv_query_gid",
                    format!(
                        "GID index {index} is empty (the table holds {} entries)",
                        self.inner.gids.len()
                    ),
                )
            })
    }

    /// `ibv_query_gid_table`: the populated GID entries.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let indexes: Vec<u32> = ctx.gid_table().iter().map(|e| e.index).collect();
    /// assert_eq!(indexes, [0, 1]);
    /// # Ok(()) }
    /// ```
    pub fn gid_table(&self) -> &[GidEntry] {
        &self.inner.gids
    }

    /// The index of the IPv4-mapped RoCE v2 GID (what `-g` usually names: 1), if any.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let i = ctx.ipv4_gid_index().expect("emulated devices have an IPv4 GID");
    /// assert_eq!(ctx.query_gid(1, i)?, Gid::from_ipv4([192, 0, 2, 1].into()));
    /// # Ok(()) }
    /// ```
    pub fn ipv4_gid_index(&self) -> Option<u32> {
        self.inner
            .gids
            .iter()
            .find(|g| g.gid.ipv4().is_some())
            .map(|g| g.index)
    }

    /// The port's MAC.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// assert_eq!(ctx.mac(), emulated_mac([192, 0, 2, 1].into()));
    /// assert_eq!(ctx.query_port(1)?.mac, ctx.mac());
    /// # Ok(()) }
    /// ```
    pub fn mac(&self) -> [u8; 6] {
        self.inner.port.mac
    }

    /// Tells the context the MAC of the peer with `gid` (a static neighbour entry): it
    /// overrides what resolution would find (the device's own agent, or the emulated-MAC
    /// rule), for a peer that does not answer ARP or whose MAC is known.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let peer = Gid(std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2).octets());
    /// assert!(ctx.resolve_mac(&peer).is_err()); // an IPv6 GID: emu0 has no agent to ask
    /// ctx.add_neighbor(peer, [0x0c, 0x42, 0xa1, 0, 0, 2]);
    /// assert_eq!(ctx.resolve_mac(&peer)?, [0x0c, 0x42, 0xa1, 0, 0, 2]);
    /// # Ok(()) }
    /// ```
    pub fn add_neighbor(&self, gid: Gid, mac: [u8; 6]) {
        lock(&self.inner.neighbors).insert(gid, mac);
    }

    /// The destination MAC for `gid` (what the kernel's neighbour resolution gives ibverbs):
    /// a neighbour entry; this device's own GIDs; on a device with rnic's own neighbour
    /// agent (VFIO, `emu-tap:`, [`OpenOptions::neighbor_agent`]), the agent's answer (ARP or
    /// neighbour discovery, waiting for it; [`Error::Unresolved`] names a GID that did not
    /// answer); otherwise a link-local GID's EUI-64, or for an IPv4-mapped GID the MAC an
    /// rnic emulated device on that address has ([`crate::emulated_mac`]). Fails for other
    /// IPv6 GIDs.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let emu1 = Gid::from_ipv4([192, 0, 2, 2].into());
    /// assert_eq!(ctx.resolve_mac(&emu1)?, emulated_mac([192, 0, 2, 2].into()));
    /// assert_eq!(ctx.resolve_mac(&ctx.query_gid(1, 0)?)?, ctx.mac()); // our own GID
    /// # Ok(()) }
    /// ```
    pub fn resolve_mac(&self, gid: &Gid) -> Result<[u8; 6]> {
        if let Some(m) = lock(&self.inner.neighbors).get(gid) {
            return Ok(*m);
        }
        if self.inner.gids.iter().any(|g| g.gid == *gid) {
            return Ok(self.mac());
        }
        if let Some(agent) = &self.inner.agent {
            return agent.resolve(gid);
        }
        if let Some(m) = gid.link_local_mac() {
            return Ok(m);
        }
        if let Some(ip) = gid.ipv4() {
            return Ok(emulated_mac(ip));
        }
        Err(Error::invalid(
            "ibv_create_ah",
            format!("no MAC known for GID {gid}: add one with Context::add_neighbor"),
        ))
    }

    /// What the device's own neighbour agent did (ARP / ND requests and answers, pings
    /// answered, frames dropped), `None` on a device without one.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// let ctx = Context::open("emu0")?;
    /// assert!(ctx.neighbor_agent_counters().is_none()); // the pair resolves without ARP
    /// # Ok(()) }
    /// ```
    pub fn neighbor_agent_counters(&self) -> Option<crate::PortAgentCounters> {
        self.inner.agent.as_ref().map(NeighborService::counters)
    }

    /// The emulator's counters (frames, drops, IOMMU faults, ...) of an emulated device.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// let before = a.emulator_counters().expect("emulated").frames_tx;
    /// qb.post_recv(&[RecvWr::new(1, &[])])?;
    /// qa.post_send(&[SendWr::send(1, &[]).signaled()])?;
    /// # let mut wc = [WorkCompletion::default(); 1];
    /// # assert_eq!(ca.poll_blocking(&mut wc, t)?, 1);
    /// assert!(a.emulator_counters().unwrap().frames_tx > before); // the SEND went out
    /// # Ok(()) }
    /// ```
    pub fn emulator_counters(&self) -> Option<rnic_emulator::Counters> {
        self.inner.core.emu.as_ref().map(Device::counters)
    }

    /// The emulated device behind this context, `None` on hardware: its gauges (firmware
    /// pages held, DMA mappings) and its fault controls, for tests and tools.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// let ctx = Context::open("emu0")?;
    /// let dev = ctx.emulator().expect("emulated");
    /// let before = dev.dma_mappings();
    /// let mr = ctx.alloc_pd()?.reg_mr(4096, AccessFlags::LOCAL_WRITE)?;
    /// assert!(dev.dma_mappings() > before); // the region is mapped for the device
    /// drop(mr);
    /// assert_eq!(dev.dma_mappings(), before);
    /// # Ok(()) }
    /// ```
    pub fn emulator(&self) -> Option<&Device> {
        self.inner.core.emu.as_ref()
    }

    /// `ibv_get_async_event`: the next asynchronous event (CQ overrun, QP and SRQ errors,
    /// port changes), waiting up to `timeout` (`Duration::ZERO`: just look). The device's
    /// event queue is polled (every millisecond while waiting); firmware page requests that
    /// arrive there are served on the way. Handles of one device share its events.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// // A WRITE to an rkey emu1 never gave out: emu1's QP reports the access violation.
    /// qa.post_send(&[SendWr::write(1, &[], RemoteAddr { addr: 0, rkey: 0x99 }).inline(b"x")])?;
    /// let ev = b.get_async_event(t)?;
    /// assert_eq!(ev, Some(AsyncEvent::QpAccessErr { qpn: qb.qp_num() }));
    /// assert_eq!(b.get_async_event(std::time::Duration::ZERO)?, None);
    /// # Ok(()) }
    /// ```
    pub fn get_async_event(
        &self,
        timeout: std::time::Duration,
    ) -> Result<Option<crate::AsyncEvent>> {
        // `None` (a timeout past what `Instant` holds, `Duration::MAX`): no deadline.
        let deadline = std::time::Instant::now().checked_add(timeout);
        loop {
            if let Some(e) = lock(&self.inner.events).pop_front() {
                return Ok(Some(e));
            }
            let evs = self
                .hca()
                .process_events()
                .map_err(Error::driver("ibv_get_async_event"))?;
            let mut q = lock(&self.inner.events);
            q.extend(evs.iter().filter_map(crate::AsyncEvent::from_eqe));
            // Nobody may be reading them: keep the newest few thousand.
            let excess = q.len().saturating_sub(MAX_ASYNC_EVENTS);
            q.drain(..excess);
            if let Some(e) = q.pop_front() {
                return Ok(Some(e));
            }
            drop(q);
            if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                return Ok(None);
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// What the fault injector of an emulated device opened with faults did so far.
    ///
    /// ```
    /// use rnic_verbs::*;
    ///
    /// # fn main() -> Result<(), Error> {
    /// let emu = EmuOptions::default().with_fault_spec("dup=0.5,seed=1")?;
    /// let a = Context::open_with("emu0", &OpenOptions { emu, ..OpenOptions::default() })?;
    /// # let b = Context::open("emu1")?; let (pa, pb) = (a.alloc_pd()?, b.alloc_pd()?);
    /// # let (ca, cb) = (a.create_cq(8, None)?, b.create_cq(8, None)?);
    /// # let (qa, qb) = (pa.create_qp(QpType::Rc, &ca, &ca).build()?, pb.create_qp(QpType::Rc, &cb, &cb).build()?);
    /// # connect_pair(&qa, &qb, &ConnectOptions::default())?;
    /// # qb.post_recv(&[RecvWr::new(1, &[])])?;
    /// qa.post_send(&[SendWr::send(1, &[]).signaled()])?;
    /// # let mut wc = [WorkCompletion::default(); 1];
    /// # assert_eq!(ca.poll_blocking(&mut wc, std::time::Duration::from_secs(10))?, 1);
    /// let c = a.fault_counters().expect("opened with faults");
    /// assert!(c.frames >= 1, "{c}"); // what emu0 sent went through the injector
    /// assert!(b.fault_counters().is_none());
    /// # Ok(()) }
    /// ```
    pub fn fault_counters(&self) -> Option<FaultCounters> {
        lock(&self.inner.fault_stats).as_ref().map(|s| s.snapshot())
    }

    /// Starts writing the emulated device's wire traffic to a pcap file (replacing a
    /// capture in progress).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> { let t = std::time::Duration::from_secs(10);
    /// # let doc_fixture::Pair { a, b, pa, pb, ca, cb, qa, qb } = doc_fixture::Pair::connected()?;
    /// let pcap = std::env::temp_dir().join(format!("rnic-doc-{}.pcap", std::process::id()));
    /// a.start_capture(&pcap)?;
    /// qb.post_recv(&[RecvWr::new(1, &[])])?;
    /// qa.post_send(&[SendWr::send(1, &[]).signaled()])?;
    /// # let mut wc = [WorkCompletion::default(); 1];
    /// # assert_eq!(ca.poll_blocking(&mut wc, t)?, 1);
    /// assert!(a.stop_capture()? >= 2); // the SEND and its ACK
    /// assert!(std::fs::metadata(&pcap).is_ok_and(|m| m.len() > 24)); // header and frames
    /// # std::fs::remove_file(&pcap).ok();
    /// # Ok(()) }
    /// ```
    pub fn start_capture(&self, path: &Path) -> Result<()> {
        let dev = self
            .inner
            .core
            .emu
            .as_ref()
            .ok_or_else(|| Error::Unsupported {
                verb: "start_capture",
                why: "capture is for emulated devices".into(),
            })?;
        dev.capture_to(path)
            .map_err(Error::io(format!("pcap file {}", path.display())))
    }

    /// Ends the emulated device's capture (flushing the file); returns its frame count.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let pcap = std::env::temp_dir().join(format!("rnic-doc-stop-{}.pcap", std::process::id()));
    /// ctx.start_capture(&pcap)?;
    /// assert_eq!(ctx.stop_capture()?, 0); // no traffic meanwhile
    /// assert_eq!(ctx.stop_capture()?, 0); // none in progress: 0 too
    /// # std::fs::remove_file(&pcap).ok();
    /// # Ok(()) }
    /// ```
    pub fn stop_capture(&self) -> Result<u64> {
        match &self.inner.core.emu {
            Some(dev) => dev
                .stop_capture()
                .map_err(Error::io("ending the pcap capture")),
            None => Ok(0),
        }
    }

    /// The driver's HCA (for diagnostics: firmware pages, raw commands).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// assert_eq!(ctx.driver().mac(), ctx.mac()); // the same device, seen from the driver
    /// # Ok(()) }
    /// ```
    pub fn driver(&self) -> &Hca {
        &self.inner.core.hca
    }

    pub(crate) fn hca(&self) -> &Arc<Hca> {
        &self.inner.core.hca
    }

    /// An interrupt vector for a new completion channel, held until the lease is dropped
    /// (after the channel's EQ is destroyed). Vector 0 is the async EQ's; when every other
    /// vector is held, `ibv_create_comp_channel` fails with `EMFILE`, as a process out of
    /// file descriptors would.
    pub(crate) fn lease_vector(&self) -> Result<VectorLease> {
        let pool = &self.inner.vectors;
        pool.lease().ok_or_else(|| Error::Io {
            what: format!(
                "ibv_create_comp_channel: all {} interrupt vectors are held by channels",
                pool.total
            ),
            source: std::io::Error::from_raw_os_error(libc::EMFILE),
        })
    }

    /// `ibv_alloc_pd`.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let pd = ctx.alloc_pd()?;
    /// assert!(pd.context().same_device(&ctx));
    /// # Ok(()) }
    /// ```
    pub fn alloc_pd(&self) -> Result<crate::ProtectionDomain> {
        crate::ProtectionDomain::alloc(self)
    }

    /// `ibv_create_comp_channel`.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let chan = ctx.create_comp_channel()?;
    /// let cq = ctx.create_cq(16, Some(&chan))?;
    /// cq.req_notify(false)?;
    /// assert!(chan.get_cq_event(Some(std::time::Duration::ZERO))?.is_none()); // nothing yet
    /// # Ok(()) }
    /// ```
    pub fn create_comp_channel(&self) -> Result<crate::CompletionChannel> {
        crate::CompletionChannel::create(self)
    }

    /// `ibv_create_cq`: a CQ of at least `cqe` entries; completion events (after
    /// [`crate::CompletionQueue::req_notify`]) go to `channel`.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let cq = ctx.create_cq(256, None)?;
    /// assert!(cq.capacity() >= 256);
    /// assert!(ctx.create_cq(0, None).is_err());
    /// // A channel of another device is refused.
    /// let other = Context::open("emu1")?.create_comp_channel()?;
    /// assert!(ctx.create_cq(8, Some(&other)).is_err());
    /// # Ok(()) }
    /// ```
    pub fn create_cq(
        &self,
        cqe: u32,
        channel: Option<&crate::CompletionChannel>,
    ) -> Result<crate::CompletionQueue> {
        crate::CompletionQueue::create(self, cqe, channel)
    }

    /// Whether two handles are the same open device.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// assert!(ctx.same_device(&ctx.clone()));
    /// assert!(!ctx.same_device(&Context::open("emu1")?));
    /// # Ok(()) }
    /// ```
    pub fn same_device(&self, other: &Context) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

fn check_port(verb: &'static str, port: u8) -> Result<()> {
    if port == 1 {
        Ok(())
    } else {
        Err(Error::invalid(
            verb,
            format!("port {port}: the device has port 1 only"),
        ))
    }
}

/// The Ethernet MTU of an emulated port on the in-process pair: the link is a jumbo-frame
/// wire (nothing on it limits a frame to 1500 bytes), so the port's active MTU is 4096.
const JUMBO_MTU: u16 = 9000;

/// The Ethernet MTU of an emulated port on a UDP link whose address no host interface holds
/// (otherwise it takes that interface's, [`UdpLink::interface_mtu`]): a standard Ethernet
/// port (what rxe on a 1500-byte netdev has), active MTU 1024.
const ETHERNET_MTU: u16 = 1500;

/// The subnet prefix the agent of a device whose name gives none puts its IPv4 address on.
const DEFAULT_IPV4_PREFIX: u8 = 24;

/// Opens an emulated device on `link`. `tap_prefix`: an `emu-tap:` device's subnet (its
/// agent always runs); otherwise the agent runs if `opts.neighbor_agent` asks for it.
fn open_emulated<L: Link + 'static>(
    name: &str,
    ip: Ipv4Addr,
    link: L,
    port_mtu: u16,
    opts: &OpenOptions,
    tap_prefix: Option<u8>,
) -> Result<DeviceHandle> {
    let agent_prefix = tap_prefix.or(opts.neighbor_agent.then_some(DEFAULT_IPV4_PREFIX));
    let opts = &opts.emu;
    let profile = Profile {
        mac: emulated_mac(ip),
        port_mtu,
        ..Profile::default()
    };
    let part = profile.pci_device_id;
    let dev = Device::new(profile, RunMode::Threaded);
    let (link, stats) = with_faults(link, opts.faults);
    dev.set_link(link);
    if let Some(path) = &opts.pcap {
        dev.capture_to(path).map_err(Error::io(format!(
            "ibv_open_device: pcap file {}",
            path.display()
        )))?;
    }
    let bus: Arc<dyn Bus> = Arc::new(dev.bus());
    let hca = Hca::open(
        bus,
        HcaConfig {
            ipv4: Some(ip),
            ..HcaConfig::default()
        },
    )
    .map_err(Error::driver("ibv_open_device"))?;
    let hca = Arc::new(hca);
    let agent = match agent_prefix {
        Some(p) => Some(NeighborService::start(&hca, p)?),
        None => None,
    };
    let mut h = DeviceHandle::new(hca, Some(dev), name, part, false);
    h.agent = agent;
    h.faults = opts.faults;
    h.fault_stats = Mutex::new(stats);
    Ok(h)
}

fn open_vfio(pci: &str, opts: &OpenOptions, sysfs: &Path) -> Result<DeviceHandle> {
    let func = discovery::read_function(sysfs, pci).ok_or_else(|| Error::NoSuchDevice {
        name: pci.into(),
        why: "not found in sysfs".into(),
    })?;
    let bus = VfioBus::open(
        pci,
        VfioOptions {
            irq_vectors: VFIO_IRQ_VECTORS,
            sysfs_root: sysfs.to_path_buf(),
            // A function-level reset first: a function an earlier context left dead (or a
            // process that crashed holding it) comes back clean.
            reset: true,
            ..VfioOptions::default()
        },
    )
    .map_err(|e| Error::NoSuchDevice {
        name: pci.into(),
        why: format!("VFIO: {e}"),
    })?;
    let bus: Arc<dyn Bus> = Arc::new(bus);
    let hca = Hca::open(
        bus,
        HcaConfig {
            ipv4: opts.ipv4,
            ..HcaConfig::default()
        },
    )
    .map_err(Error::driver("ibv_open_device"))?;
    let hca = Arc::new(hca);
    // No kernel resolves for a VFIO function: its agent does. A device that cannot run
    // one (no raw Ethernet, no steering) still opens, with add_neighbor as the way.
    let agent = match NeighborService::start(&hca, DEFAULT_IPV4_PREFIX) {
        Ok(a) => Some(a),
        Err(e) => {
            log::warn!("{pci}: no neighbour resolution of its own: {e}");
            None
        }
    };
    let mut h = DeviceHandle::new(hca, None, pci, func.device, true);
    h.agent = agent;
    Ok(h)
}

/// A device's interrupt vectors for completion channels (each channel's EQ raises its own).
#[derive(Debug)]
pub(crate) struct VectorPool {
    free: Mutex<Vec<u16>>,
    total: u16,
}

impl VectorPool {
    /// Vectors 1 to `vectors - 1` (0 is the async EQ's), lowest handed out first.
    fn new(vectors: u16) -> Arc<VectorPool> {
        Arc::new(VectorPool {
            free: Mutex::new((1..vectors).rev().collect()),
            total: vectors - 1,
        })
    }

    /// The lowest free vector, `None` when all are held.
    fn lease(self: &Arc<VectorPool>) -> Option<VectorLease> {
        let vector = lock(&self.free).pop()?;
        Some(VectorLease {
            pool: self.clone(),
            vector,
        })
    }
}

/// One interrupt vector held by a completion channel; dropping it gives the vector back.
#[derive(Debug)]
pub(crate) struct VectorLease {
    pool: Arc<VectorPool>,
    pub(crate) vector: u16,
}

impl Drop for VectorLease {
    fn drop(&mut self) {
        lock(&self.pool.free).push(self.vector);
    }
}

impl DeviceHandle {
    fn new(hca: Arc<Hca>, emu: Option<Device>, name: &str, part: u16, vfio: bool) -> Self {
        let caps = hca.caps();
        let g = &caps.general;
        let p2 = |l: u8| 1u32.checked_shl(u32::from(l)).unwrap_or(u32::MAX);
        let max_sge = caps.max_sge();
        let mac = hca.mac();
        let guid = node_guid_from_mac(mac);
        let max_qp = p2(g.log_max_qp());
        let max_qp_rd_atom = p2(g.log_max_ra_res_qp());
        let board_id = query_psid(&hca).unwrap_or_else(|| "N/A".into());
        let attr = DeviceAttr {
            fw_ver: hca.fw_version().to_string(),
            node_guid: guid,
            sys_image_guid: guid,
            max_mr_size: hca.max_mr_size(),
            page_size_cap: !0xfffu64,
            vendor_id: MELLANOX_OUI,
            vendor_part_id: u32::from(part),
            hw_ver: 0,
            board_id,
            max_qp,
            max_qp_wr: caps.max_qp_wr(),
            max_sge,
            max_sge_rd: max_sge.min(30),
            max_cq: p2(g.log_max_cq()),
            max_cqe: p2(g.log_max_cq_sz()) - 1,
            max_mr: p2(g.log_max_mkey()),
            max_mw: p2(g.log_max_mkey()),
            max_pd: p2(g.log_max_pd()),
            max_qp_rd_atom,
            max_qp_init_rd_atom: p2(g.log_max_ra_req_qp()),
            max_res_rd_atom: max_qp_rd_atom.saturating_mul(max_qp),
            atomic_cap: if caps.atomic.is_some() {
                AtomicCap::Hca
            } else {
                AtomicCap::None
            },
            max_srq: p2(g.log_max_srq()),
            max_srq_wr: p2(g.log_max_srq_sz()) - 1,
            max_srq_sge: caps.max_srq_sge(),
            max_ah: i32::MAX as u32,
            max_pkeys: 128u16
                .checked_shl(u32::from(g.pkey_table_size()))
                .unwrap_or(128),
            local_ca_ack_delay: g.local_ca_ack_delay(),
            phys_port_cnt: 1,
        };
        let gid_tbl_len = caps.roce.map_or(u32::from(g.gid_table_size()), |(_, c)| {
            u32::from(c.roce_address_table_size())
        });
        let port = PortAttr {
            state: PortState::Active,
            max_mtu: Mtu::Mtu4096,
            // As mlx5 and rxe report it: the largest IB MTU the Ethernet MTU carries.
            active_mtu: Mtu::for_ethernet(u32::from(hca.port_mtu()))
                .unwrap_or(Mtu::Mtu256)
                .min(Mtu::Mtu4096),
            gid_tbl_len,
            max_msg_sz: p2(g.log_max_msg()),
            pkey_tbl_len: rnic_driver::qp::PKEY_TABLE_LEN,
            lid: 0,
            sm_lid: 0,
            lmc: 0,
            link_layer: LinkLayer::Ethernet,
            phys_state: 5,
            active_width: 2,
            active_speed: 32,
            mac,
        };
        let gids = hca
            .gids()
            .iter()
            .map(|e| GidEntry {
                index: u32::from(e.index),
                gid: Gid(e.gid),
                gid_type: if e.version == rnic_hw_regs::ctx::ROCE_VERSION_2 {
                    GidType::RoceV2
                } else {
                    GidType::Ib
                },
                port_num: 1,
            })
            .collect();
        DeviceHandle {
            core: ManuallyDrop::new(Core { hca, emu }),
            name: name.to_string(),
            attr,
            port,
            gids,
            vectors: VectorPool::new(if vfio {
                VFIO_IRQ_VECTORS
            } else {
                rnic_driver::eq::MAX_EQ_VECTOR + 1
            }),
            neighbors: Mutex::new(HashMap::new()),
            faults: None,
            fault_stats: Mutex::new(None),
            events: Mutex::new(std::collections::VecDeque::new()),
            agent: None,
        }
    }
}

/// QUERY_ADAPTER's PSID (ibverbs' `board_id`).
fn query_psid(hca: &Hca) -> Option<String> {
    let out = hca
        .cmdq()
        .exec(&QueryAdapterIn::new_cmd(), &[], &mut [])
        .ok()?;
    let psid = out.query_adapter_struct().vsd_contd_psid();
    let s: String = psid
        .iter()
        .take_while(|&&b| b != 0)
        .map(|&b| b as char)
        .collect();
    let s = s.trim().to_string();
    (!s.is_empty() && s.is_ascii()).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_give_their_vectors_back() {
        let pool = VectorPool::new(3); // vectors 1 and 2; 0 is the async EQ's
        let (a, b) = (pool.lease().unwrap(), pool.lease().unwrap());
        assert_eq!((a.vector, b.vector), (1, 2));
        assert!(pool.lease().is_none(), "every vector is held");
        drop(a);
        assert_eq!(pool.lease().map(|l| l.vector), Some(1));
        for _ in 0..10_000 {
            assert!(pool.lease().is_some(), "a dropped lease frees its vector");
        }
    }

    #[test]
    fn vfio_names_resolve_against_a_fake_sysfs() {
        let dir = std::env::temp_dir().join(format!("rnic-verbs-sysfs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // No functions: mlx5_0 does not exist.
        let e = Context::open_in("mlx5_0", &OpenOptions::default(), &dir).unwrap_err();
        assert!(matches!(e, Error::NoSuchDevice { .. }), "{e}");
        let e = Context::open_in("0000:3b:00.0", &OpenOptions::default(), &dir).unwrap_err();
        assert!(matches!(e, Error::NoSuchDevice { .. }), "{e}");
        assert_eq!(
            crate::devices_in(&dir)
                .iter()
                .filter(|d| d.name.starts_with("mlx5"))
                .count(),
            0
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
