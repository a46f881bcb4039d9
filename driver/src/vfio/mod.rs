//! [`VfioBus`]: the [`Bus`] of a real PCI function behind Linux VFIO (container + group +
//! device, type1 v2 IOMMU), generic over any vfio-pci device.
//!
//! - BAR0 is mmapped from the device file at the region's offset (memmap2); MMIO accesses are
//!   volatile, big-endian, and bounds-checked: out of range (or misaligned) reads return all
//!   ones and writes are dropped, as the [`Bus`] contract says. `write64` is one 8-byte store.
//! - DMA memory comes from 2 MiB arenas (hugepages through memmap2's `huge`, falling back to
//!   4 KiB pages with a warning), each mapped once into the IOMMU; allocations are 4 KiB
//!   granular inside an arena ([`arena`]).
//! - IOVAs come from an allocator that honours the IOMMU's valid ranges (the IOVA range
//!   capability of VFIO_IOMMU_GET_INFO, read with a raw ioctl since vfio-ioctls does not
//!   wrap it) and the device's DMA mask ([`iova`]).
//! - [`Bus::map_dma`] maps caller memory (user MRs); interrupts are MSI-X (or MSI) vectors
//!   routed to eventfds ([`Bus::wait_irq`], [`Bus::irq_fd`]).
//! - [`discovery`] finds ConnectX functions bound to vfio-pci.
//!
//! Errors say what to do: no IOMMU group, not bound to vfio-pci, `/dev/vfio` permissions,
//! RLIMIT_MEMLOCK too low (with the limit and `ulimit -l`), no hugepages ([`VfioBusError`]).

pub mod arena;
pub mod discovery;
mod error;
pub mod iova;
pub mod sys;

pub use error::VfioBusError;

use arena::{ARENA_SIZE, ArenaMap, PAGE};
use discovery::{SYSFS_PCI_DEVICES, is_pci_address, read_function};
use iova::IovaAllocator;
use rnic_hw_regs::{Bus, BusError, DmaRegion};
use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use vfio_bindings::bindings::vfio::{
    VFIO_PCI_BAR0_REGION_INDEX, VFIO_PCI_CONFIG_REGION_INDEX, VFIO_REGION_INFO_FLAG_MMAP,
};
use vfio_ioctls::{VfioContainer, VfioDevice, VfioOps};
use vmm_sys_util::eventfd::EventFd;

/// Whether DMA memory uses 2 MiB hugepages.
///
/// ```
/// use rnic_driver::vfio::{Hugepages, VfioOptions};
///
/// assert_eq!(VfioOptions::default().hugepages, Hugepages::Prefer);
/// let strict = VfioOptions { hugepages: Hugepages::Require, ..VfioOptions::default() };
/// assert_ne!(strict.hugepages, Hugepages::Never);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Hugepages {
    /// Use hugepages; fall back to 4 KiB pages with a warning when none are available.
    #[default]
    Prefer,
    /// Fail with [`VfioBusError::NoHugepages`] when none are available.
    Require,
    /// Always 4 KiB pages.
    Never,
}

/// How to open a device.
///
/// ```
/// use rnic_driver::vfio::VfioOptions;
///
/// let opts = VfioOptions { irq_vectors: 2, reset: true, ..VfioOptions::default() };
/// assert_eq!((opts.dma_mask_bits, opts.irq_vectors), (64, 2));
/// assert_eq!(opts.sysfs_root, std::path::Path::new("/sys/bus/pci/devices"));
/// ```
#[derive(Clone, Debug)]
pub struct VfioOptions {
    /// Hugepage policy for DMA memory.
    pub hugepages: Hugepages,
    /// The device's DMA address width: IOVAs stay below `2^dma_mask_bits` (ConnectX: 64).
    pub dma_mask_bits: u8,
    /// Interrupt vectors to route to eventfds (0: a polling driver needs none).
    pub irq_vectors: u16,
    /// Reset the function (VFIO_DEVICE_RESET, an FLR) before use.
    pub reset: bool,
    /// Where PCI functions are listed (tests point this at a fake tree).
    pub sysfs_root: PathBuf,
}

impl Default for VfioOptions {
    fn default() -> Self {
        Self {
            hugepages: Hugepages::Prefer,
            dma_mask_bits: 64,
            irq_vectors: 0,
            reset: false,
            sysfs_root: PathBuf::from(SYSFS_PCI_DEVICES),
        }
    }
}

/// A 2 MiB DMA arena: one mapping, one IOMMU entry, 4 KiB sub-allocations.
struct Arena {
    _map: memmap2::MmapMut,
    base: usize,
    iova: u64,
    pages: ArenaMap,
}

/// A DMA allocation larger than an arena.
struct Large {
    _map: memmap2::MmapMut,
    len: usize,
}

/// A caller mapping from `map_dma`: the page-aligned span actually mapped.
struct UserMap {
    base_iova: u64,
    span: usize,
}

struct DmaState {
    iova: IovaAllocator,
    arenas: Vec<Arena>,
    large: HashMap<u64, Large>,
    user: HashMap<u64, UserMap>,
    warned_small_pages: bool,
}

/// The [`Bus`] of a vfio-pci function.
///
/// Fields drop in declaration order: the BAR mapping and the DMA memory go before the device
/// and the container (whose drop releases the group).
///
/// ```no_run
/// // Not run: needs a ConnectX (or any PCI function) bound to vfio-pci and an IOMMU.
/// use rnic_driver::vfio::{VfioBus, VfioOptions};
/// use rnic_hw_regs::Bus;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let bus = VfioBus::open("0000:3b:00.0", VfioOptions::default())?;
/// assert!(bus.bar_len() > 0);
/// let region = bus.alloc_dma(4096)?; // zeroed, mapped in the IOMMU
/// assert_eq!(region.iova % 4096, 0);
/// bus.free_dma(region)?;
/// # Ok(()) }
/// ```
pub struct VfioBus {
    address: String,
    bar: memmap2::MmapRaw,
    bar_len: usize,
    dma: Mutex<DmaState>,
    irqs: Vec<EventFd>,
    iommu: sys::IommuInfo,
    device: VfioDevice,
    container: Arc<VfioContainer>,
    opts: VfioOptions,
}

impl std::fmt::Debug for VfioBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VfioBus")
            .field("address", &self.address)
            .field("bar_len", &self.bar_len)
            .field("irqs", &self.irqs.len())
            .finish_non_exhaustive()
    }
}

/// PCI command register bits: memory space and bus master.
const PCI_COMMAND: u64 = 0x04;
const PCI_COMMAND_MEMORY_MASTER: u16 = 0x0006;

impl VfioBus {
    /// Opens the vfio-pci function at `pci_addr` (`DDDD:BB:DD.F`): container, group, device,
    /// memory + bus master on, BAR0 mapped, the IOMMU's IOVA ranges read, one DMA arena mapped
    /// (so that memlock and hugepage problems show here), and the interrupt vectors asked for.
    ///
    /// Opening checks sysfs first, so the mistakes come with instructions (runs without hardware,
    /// against a fake sysfs tree; with a real function, use [`VfioOptions::default`]):
    ///
    /// ```
    /// use rnic_driver::vfio::{VfioBus, VfioBusError, VfioOptions};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// # let (root, dir) = (tmp.path(), rnic_driver::doc_fixture::fake_sysfs_function(tmp.path())?);
    /// # std::fs::remove_file(dir.join("driver"))?;
    /// # std::os::unix::fs::symlink("../../../bus/pci/drivers/mlx5_core", dir.join("driver"))?;
    /// let opts = VfioOptions { sysfs_root: root.to_path_buf(), ..VfioOptions::default() };
    /// let err = VfioBus::open("0000:3b:00.0", opts.clone()).unwrap_err(); // bound to mlx5_core
    /// assert!(matches!(err, VfioBusError::NotBoundToVfio { .. }));
    /// assert!(err.to_string().contains("echo vfio-pci > /sys/bus/pci/devices/0000:3b:00.0/driver_override"));
    /// let err = VfioBus::open("0000:3b:00.1", opts).unwrap_err();
    /// assert!(matches!(err, VfioBusError::NotFound(_)));
    /// # Ok(()) }
    /// ```
    pub fn open(pci_addr: &str, opts: VfioOptions) -> Result<Self, VfioBusError> {
        if !is_pci_address(pci_addr) {
            return Err(VfioBusError::BadAddress(pci_addr.to_string()));
        }
        let func = read_function(&opts.sysfs_root, pci_addr)
            .ok_or_else(|| VfioBusError::NotFound(pci_addr.to_string()))?;
        let Some(group) = func.iommu_group else {
            return Err(VfioBusError::NoIommuGroup(pci_addr.to_string()));
        };
        if !func.bound_to_vfio() {
            return Err(VfioBusError::NotBoundToVfio {
                address: pci_addr.to_string(),
                driver: func.driver,
            });
        }
        let container = Arc::new(VfioContainer::new(None).map_err(error::from_vfio)?);
        let ops: Arc<dyn VfioOps> = container.clone();
        let sysfs = opts.sysfs_root.join(pci_addr);
        let device =
            VfioDevice::new(&sysfs, ops, false).map_err(|e| match error::from_vfio(e) {
                VfioBusError::GroupNotViable(_) => VfioBusError::GroupNotViable(group),
                other => other,
            })?;
        if opts.reset {
            device.reset();
        }
        enable_memory_and_master(&device);

        let bar_err = |what: String| VfioBusError::Bar {
            address: pci_addr.to_string(),
            what,
        };
        if device.get_region_flags(VFIO_PCI_BAR0_REGION_INDEX) & VFIO_REGION_INFO_FLAG_MMAP == 0 {
            return Err(bar_err("the region cannot be mmapped".into()));
        }
        let bar_len = usize::try_from(device.get_region_size(VFIO_PCI_BAR0_REGION_INDEX))
            .map_err(|_| bar_err("size".into()))?;
        if bar_len == 0 {
            return Err(bar_err("BAR0 is empty".into()));
        }
        let bar = memmap2::MmapOptions::new()
            .offset(device.get_region_offset(VFIO_PCI_BAR0_REGION_INDEX))
            .len(bar_len)
            .map_raw(device.as_raw_fd())
            .map_err(|e| bar_err(e.to_string()))?;

        let info = sys::iommu_get_info(container.as_raw_fd()).map_err(|e| VfioBusError::Io {
            what: "VFIO_IOMMU_GET_INFO",
            source: e,
        })?;
        let ranges = if info.iova_ranges.is_empty() {
            log::info!(
                "{pci_addr}: the kernel reports no IOVA ranges; assuming every address below the DMA mask"
            );
            vec![(0, u64::MAX)]
        } else {
            info.iova_ranges.clone()
        };
        log::debug!(
            "{pci_addr}: IOVA ranges {:x?}, IOMMU page sizes {:#x}",
            info.iova_ranges,
            info.iova_pgsizes
        );
        let dma = DmaState {
            iova: IovaAllocator::new(&ranges, opts.dma_mask_bits),
            arenas: Vec::new(),
            large: HashMap::new(),
            user: HashMap::new(),
            warned_small_pages: false,
        };

        let mut irqs = Vec::new();
        if opts.irq_vectors > 0 {
            for _ in 0..opts.irq_vectors {
                irqs.push(
                    EventFd::new(libc::EFD_NONBLOCK).map_err(|source| VfioBusError::Io {
                        what: "eventfd",
                        source,
                    })?,
                );
            }
            let fds: Vec<&EventFd> = irqs.iter().collect();
            if let Err(e) = device.enable_msix(fds) {
                log::warn!("{pci_addr}: MSI-X unavailable ({e}); trying MSI with one vector");
                irqs.truncate(1);
                device
                    .enable_msi(irqs.iter().collect())
                    .map_err(VfioBusError::Vfio)?;
            }
        }

        let bus = Self {
            address: pci_addr.to_string(),
            bar,
            bar_len,
            dma: Mutex::new(dma),
            irqs,
            iommu: info,
            device,
            container,
            opts,
        };
        // Map the first arena now: memlock and hugepage problems surface at open.
        let probe = bus.alloc(PAGE)?;
        bus.free(probe).map_err(|e| VfioBusError::Io {
            what: "freeing the probe DMA page",
            source: std::io::Error::other(e.to_string()),
        })?;
        Ok(bus)
    }

    /// The PCI address.
    ///
    /// ```no_run
    /// // Not run: needs a function bound to vfio-pci.
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let bus = rnic_driver::vfio::VfioBus::open("0000:3b:00.0", Default::default())?;
    /// assert_eq!(bus.address(), "0000:3b:00.0");
    /// # Ok(()) }
    /// ```
    pub fn address(&self) -> &str {
        &self.address
    }

    /// What VFIO_IOMMU_GET_INFO reported (valid IOVA ranges, IOMMU page sizes).
    ///
    /// ```no_run
    /// // Not run: needs a function bound to vfio-pci (and an IOMMU).
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let bus = rnic_driver::vfio::VfioBus::open("0000:3b:00.0", Default::default())?;
    /// let info = bus.iommu_info();
    /// assert_ne!(info.iova_pgsizes & 0x1000, 0); // 4 KiB IOMMU pages
    /// # Ok(()) }
    /// ```
    pub fn iommu_info(&self) -> &sys::IommuInfo {
        &self.iommu
    }

    fn lock(&self) -> MutexGuard<'_, DmaState> {
        self.dma.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Anonymous memory of `len` bytes (a multiple of 2 MiB when huge), per the policy.
    fn map_anon(&self, st: &mut DmaState, len: usize) -> Result<memmap2::MmapMut, VfioBusError> {
        let small = || {
            memmap2::MmapOptions::new()
                .len(len)
                .populate()
                .map_anon()
                .map_err(|e| VfioBusError::Io {
                    what: "mmap of DMA memory",
                    source: e,
                })
        };
        match self.opts.hugepages {
            Hugepages::Never => small(),
            policy => match memmap2::MmapOptions::new()
                .len(len)
                .huge(Some(21))
                .populate()
                .map_anon()
            {
                Ok(m) => Ok(m),
                Err(e) if policy == Hugepages::Require => Err(VfioBusError::NoHugepages(e)),
                Err(e) => {
                    if !st.warned_small_pages {
                        st.warned_small_pages = true;
                        log::warn!(
                            "{}: no 2 MiB hugepages ({e}); DMA memory uses 4 KiB pages \
                             (reserve some: echo 512 > /proc/sys/vm/nr_hugepages)",
                            self.address
                        );
                    }
                    small()
                }
            },
        }
    }

    /// Maps `len` bytes at `ptr` into the IOMMU at a fresh IOVA.
    fn iommu_map(
        &self,
        st: &mut DmaState,
        ptr: *mut u8,
        len: usize,
        align: u64,
    ) -> Result<u64, VfioBusError> {
        let iova = st
            .iova
            .alloc(len as u64, align)
            .ok_or(VfioBusError::NoIovaSpace(len))?;
        // SAFETY: `ptr..ptr + len` is memory this bus owns (an anonymous mapping kept alive
        // until after the matching unmap) or memory the caller of `map_dma` promised to keep
        // alive until `unmap_dma`; it is only accessed through raw pointers.
        let r = unsafe { self.container.vfio_dma_map(iova, len, ptr) };
        if let Err(e) = r {
            st.iova.free(iova, len as u64);
            let errno = match &e {
                vfio_ioctls::VfioError::IommuDmaMap(se) => se.errno(),
                _ => 0,
            };
            return Err(if errno != 0 {
                error::map_error(errno, len, error::memlock_limit())
            } else {
                VfioBusError::Vfio(e)
            });
        }
        Ok(iova)
    }

    fn iommu_unmap(&self, st: &mut DmaState, iova: u64, len: usize) -> Result<(), BusError> {
        let r = self.container.vfio_dma_unmap(iova, len);
        st.iova.free(iova, len as u64);
        r.map_err(|e| {
            log::warn!("{}: unmapping IOVA {iova:#x}: {e}", self.address);
            BusError::MapFailed(libc::EIO)
        })
    }

    /// [`Bus::alloc_dma`] with the detailed error.
    ///
    /// ```no_run
    /// // Not run: needs a function bound to vfio-pci.
    /// use rnic_driver::vfio::{Hugepages, VfioBus, VfioOptions};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let opts = VfioOptions { hugepages: Hugepages::Require, ..VfioOptions::default() };
    /// let bus = VfioBus::open("0000:3b:00.0", opts)?;
    /// let r = bus.alloc(100)?; // a VfioBusError names the cause (memlock, hugepages, IOVA space)
    /// assert_eq!(r.len, 4096);
    /// # Ok(()) }
    /// ```
    pub fn alloc(&self, len: usize) -> Result<DmaRegion, VfioBusError> {
        let len = len.max(1).div_ceil(PAGE) * PAGE;
        let mut st = self.lock();
        if len > ARENA_SIZE {
            let span = len.div_ceil(ARENA_SIZE) * ARENA_SIZE;
            let mut map = self.map_anon(&mut st, span)?;
            let ptr = map.as_mut_ptr();
            let iova = self.iommu_map(&mut st, ptr, span, ARENA_SIZE as u64)?;
            st.large.insert(
                iova,
                Large {
                    _map: map,
                    len: span,
                },
            );
            let vaddr = NonNull::new(ptr).ok_or(VfioBusError::NoIovaSpace(len))?;
            return Ok(DmaRegion { vaddr, iova, len });
        }
        let n = len / PAGE;
        let found = st
            .arenas
            .iter_mut()
            .enumerate()
            .find_map(|(i, a)| a.pages.alloc(n).map(|p| (i, p)));
        let (idx, first) = match found {
            Some(x) => x,
            None => {
                let mut map = self.map_anon(&mut st, ARENA_SIZE)?;
                let ptr = map.as_mut_ptr();
                let iova = self.iommu_map(&mut st, ptr, ARENA_SIZE, ARENA_SIZE as u64)?;
                let mut pages = ArenaMap::default();
                let first = pages.alloc(n).ok_or(VfioBusError::NoIovaSpace(len))?;
                st.arenas.push(Arena {
                    _map: map,
                    base: ptr as usize,
                    iova,
                    pages,
                });
                (st.arenas.len() - 1, first)
            }
        };
        let a = &st.arenas[idx];
        let addr = a.base + first * PAGE;
        let iova = a.iova + (first * PAGE) as u64;
        let vaddr = NonNull::new(addr as *mut u8).ok_or(VfioBusError::NoIovaSpace(len))?;
        // SAFETY: the pages `first..first + n` of the arena were just taken for this region:
        // no one else (the device included: it has no IOVA of them in use) accesses them.
        unsafe { std::ptr::write_bytes(vaddr.as_ptr(), 0, len) };
        Ok(DmaRegion { vaddr, iova, len })
    }

    fn free(&self, region: DmaRegion) -> Result<(), BusError> {
        let mut st = self.lock();
        if let Some(l) = st.large.remove(&region.iova) {
            return self.iommu_unmap(&mut st, region.iova, l.len);
        }
        let Some(idx) = st
            .arenas
            .iter()
            .position(|a| region.iova >= a.iova && region.iova < a.iova + ARENA_SIZE as u64)
        else {
            return Err(BusError::InvalidArgument);
        };
        let a = &mut st.arenas[idx];
        let first = ((region.iova - a.iova) as usize) / PAGE;
        if !a.pages.free(first, region.len.div_ceil(PAGE)) {
            return Err(BusError::InvalidArgument);
        }
        // Keep one arena mapped for reuse; unmap the others once empty.
        if a.pages.used_pages() == 0 && st.arenas.len() > 1 {
            let a = st.arenas.swap_remove(idx);
            self.iommu_unmap(&mut st, a.iova, ARENA_SIZE)?;
        }
        Ok(())
    }
}

/// Sets the PCI command register's memory-space and bus-master bits (the BAR answers, the
/// device may DMA); a function-level reset clears them.
fn enable_memory_and_master(device: &VfioDevice) {
    let mut cmd = [0u8; 2];
    device.region_read(VFIO_PCI_CONFIG_REGION_INDEX, &mut cmd, PCI_COMMAND);
    let cmd = u16::from_le_bytes(cmd) | PCI_COMMAND_MEMORY_MASTER;
    device.region_write(
        VFIO_PCI_CONFIG_REGION_INDEX,
        &cmd.to_le_bytes(),
        PCI_COMMAND,
    );
}

impl Bus for VfioBus {
    fn read32(&self, offset: usize) -> u32 {
        if offset % 4 != 0 || offset.checked_add(4).is_none_or(|e| e > self.bar_len) {
            return u32::MAX;
        }
        // SAFETY: `offset + 4 <= bar_len`, the mapping is BAR0 (device memory, kept mapped for
        // the bus's life) and the address is 4-byte aligned; MMIO must be volatile.
        let v = unsafe { self.bar.as_ptr().add(offset).cast::<u32>().read_volatile() };
        u32::from_be(v)
    }

    fn write32(&self, offset: usize, value: u32) {
        if offset % 4 != 0 || offset.checked_add(4).is_none_or(|e| e > self.bar_len) {
            return;
        }
        // SAFETY: as in `read32`.
        unsafe {
            self.bar
                .as_mut_ptr()
                .add(offset)
                .cast::<u32>()
                .write_volatile(value.to_be())
        };
    }

    fn write64(&self, offset: usize, value: u64) {
        if offset % 8 != 0 || offset.checked_add(8).is_none_or(|e| e > self.bar_len) {
            return;
        }
        // SAFETY: in bounds and 8-byte aligned; one volatile 8-byte store (a single `mov` on
        // x86-64), as doorbells require.
        unsafe {
            self.bar
                .as_mut_ptr()
                .add(offset)
                .cast::<u64>()
                .write_volatile(value.to_be())
        };
    }

    fn bar_len(&self) -> usize {
        self.bar_len
    }

    fn alloc_dma(&self, len: usize) -> Result<DmaRegion, BusError> {
        self.alloc(len).map_err(|e| {
            log::error!("{}: DMA allocation of {len} bytes: {e}", self.address);
            match e {
                VfioBusError::Io { source, .. } => {
                    BusError::MapFailed(source.raw_os_error().unwrap_or(libc::EIO))
                }
                _ => BusError::NoMemory,
            }
        })
    }

    fn free_dma(&self, region: DmaRegion) -> Result<(), BusError> {
        self.free(region)
    }

    unsafe fn map_dma(&self, vaddr: NonNull<u8>, len: usize) -> Result<u64, BusError> {
        if len == 0 {
            return Err(BusError::InvalidArgument);
        }
        let addr = vaddr.as_ptr() as usize;
        let start = addr & !(PAGE - 1);
        let end = addr
            .checked_add(len)
            .and_then(|e| e.checked_next_multiple_of(PAGE))
            .ok_or(BusError::InvalidArgument)?;
        let span = end - start;
        let mut st = self.lock();
        let base_iova = self
            .iommu_map(&mut st, start as *mut u8, span, PAGE as u64)
            .map_err(|e| {
                log::error!("{}: map_dma of {len} bytes: {e}", self.address);
                BusError::MapFailed(libc::ENOMEM)
            })?;
        let iova = base_iova + (addr - start) as u64;
        st.user.insert(iova, UserMap { base_iova, span });
        Ok(iova)
    }

    fn unmap_dma(&self, iova: u64, _len: usize) -> Result<(), BusError> {
        let mut st = self.lock();
        let m = st.user.remove(&iova).ok_or(BusError::InvalidArgument)?;
        self.iommu_unmap(&mut st, m.base_iova, m.span)
    }

    fn wait_irq(&self, vector: u16, timeout: Duration) -> Result<bool, BusError> {
        let fd = self
            .irqs
            .get(usize::from(vector))
            .ok_or(BusError::Unsupported)?;
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd for the duration of the call.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            return Err(BusError::DeviceLost);
        }
        if rc == 0 {
            return Ok(false);
        }
        // Clear the counter; EAGAIN (already read by someone else) is fine.
        let _ = fd.read();
        Ok(true)
    }

    fn irq_fd(&self, vector: u16) -> Option<i32> {
        self.irqs.get(usize::from(vector)).map(AsRawFd::as_raw_fd)
    }

    /// `VFIO_DEVICE_RESET` (a function-level reset), then memory space and bus mastering on
    /// again.
    fn function_reset(&self) -> Result<(), BusError> {
        self.device.reset();
        enable_memory_and_master(&self.device);
        Ok(())
    }
}

impl Drop for VfioBus {
    fn drop(&mut self) {
        if !self.irqs.is_empty() {
            let _ = self.device.disable_msix();
            let _ = self.device.disable_msi();
        }
        let mut st = self.lock();
        let arenas = std::mem::take(&mut st.arenas);
        for a in &arenas {
            let _ = self.container.vfio_dma_unmap(a.iova, ARENA_SIZE);
        }
        let large: Vec<(u64, Large)> = st.large.drain().collect();
        for (iova, l) in &large {
            let _ = self.container.vfio_dma_unmap(*iova, l.len);
        }
        let user: Vec<UserMap> = st.user.drain().map(|(_, m)| m).collect();
        for m in &user {
            let _ = self.container.vfio_dma_unmap(m.base_iova, m.span);
        }
        // The mappings are dropped (munmapped) after they left the IOMMU.
        drop(st);
        drop(arenas);
        drop(large);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use discovery::tests::fake_function;

    fn opts(root: &std::path::Path) -> VfioOptions {
        VfioOptions {
            sysfs_root: root.to_path_buf(),
            ..VfioOptions::default()
        }
    }

    #[test]
    fn open_checks_sysfs_before_touching_vfio() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("sys/bus/pci/devices");
        std::fs::create_dir_all(&root).unwrap();
        fake_function(
            &root,
            "0000:01:00.0",
            0x15b3,
            0x1013,
            Some("mlx5_core"),
            Some(3),
        );
        fake_function(
            &root,
            "0000:02:00.0",
            0x15b3,
            0x1013,
            Some("vfio-pci"),
            None,
        );
        fake_function(&root, "0000:03:00.0", 0x1234, 0x11e8, None, Some(4));

        let e = VfioBus::open("01:00.0", opts(&root)).unwrap_err();
        assert!(matches!(e, VfioBusError::BadAddress(_)), "{e}");
        let e = VfioBus::open("0000:09:00.0", opts(&root)).unwrap_err();
        assert!(matches!(e, VfioBusError::NotFound(_)), "{e}");
        let e = VfioBus::open("0000:02:00.0", opts(&root)).unwrap_err();
        assert!(matches!(e, VfioBusError::NoIommuGroup(_)), "{e}");
        let e = VfioBus::open("0000:01:00.0", opts(&root)).unwrap_err();
        match e {
            VfioBusError::NotBoundToVfio { driver, .. } => {
                assert_eq!(driver.as_deref(), Some("mlx5_core"))
            }
            other => panic!("{other}"),
        }
        // Any vfio-pci device is accepted by address (QEMU's edu device in the interop
        // tests), not only ConnectX.
        let e = VfioBus::open("0000:03:00.0", opts(&root)).unwrap_err();
        assert!(
            matches!(e, VfioBusError::NotBoundToVfio { driver: None, .. }),
            "{e}"
        );
    }

    #[test]
    fn default_options() {
        let o = VfioOptions::default();
        assert_eq!(o.hugepages, Hugepages::Prefer);
        assert_eq!(o.dma_mask_bits, 64);
        assert_eq!(o.sysfs_root, PathBuf::from("/sys/bus/pci/devices"));
    }
}
