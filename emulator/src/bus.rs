//! The host side of the emulated PCI bus: [`EmuBus`] implements [`rnic_hw_regs::Bus`].
//!
//! MMIO goes to the device's BAR; DMA memory is host memory the bus allocates (4 KiB aligned,
//! zeroed) and maps in the device's IOMMU at IOVAs it hands out. Each mapping is followed by
//! an unmapped guard page, so a device access that runs past a buffer faults instead of
//! touching the neighbour.

use std::alloc::Layout;
use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Duration;

use rnic_hw_regs::{Bus, BusError, DmaRegion};

use crate::device::Shared;
use crate::iommu::MapError;

const PAGE: usize = 4096;
/// Where the bus starts handing out IOVAs (any value works; this one is easy to spot).
const FIRST_IOVA: u64 = 0x1_0000_0000;

/// IOVA space and the host allocations behind [`Bus::alloc_dma`].
#[derive(Debug)]
pub(crate) struct DmaAllocator {
    next_iova: u64,
    /// Allocations made by `alloc_dma`, by IOVA: host address and layout, to free them.
    owned: BTreeMap<u64, (usize, Layout)>,
}

impl DmaAllocator {
    pub(crate) fn new() -> Self {
        DmaAllocator {
            next_iova: FIRST_IOVA,
            owned: BTreeMap::new(),
        }
    }

    /// A fresh IOVA range of `len` bytes (page-rounded), followed by a guard page.
    fn take_iova(&mut self, len: usize) -> Result<u64, BusError> {
        let pages = u64::try_from(len.div_ceil(PAGE)).map_err(|_| BusError::NoMemory)?;
        let iova = self.next_iova;
        self.next_iova = pages
            .checked_add(1)
            .and_then(|p| p.checked_mul(PAGE as u64))
            .and_then(|bytes| iova.checked_add(bytes))
            .ok_or(BusError::NoMemory)?;
        Ok(iova)
    }
}

impl Drop for DmaAllocator {
    fn drop(&mut self) {
        // The last bus handle is gone, so no host code can reach these regions through the
        // bus any more; the device is gone with it.
        for (_, (host, layout)) in std::mem::take(&mut self.owned) {
            // SAFETY: allocated by `alloc_dma` with this layout and not freed since.
            unsafe { std::alloc::dealloc(host as *mut u8, layout) };
        }
    }
}

fn map_error(e: MapError) -> BusError {
    match e {
        MapError::InvalidRange | MapError::NotMapped => BusError::InvalidArgument,
        MapError::Overlap => BusError::MapFailed(17), // EEXIST, as VFIO answers
    }
}

/// The host's handle on an emulated device (see [`crate::Device::bus`]).
///
/// ```
/// use rnic_emulator::{Device, Profile, RunMode};
/// use rnic_hw_regs::{init_seg, Bus};
///
/// let dev = Device::new(Profile::default(), RunMode::Deterministic);
/// let bus = dev.bus();
/// assert!(init_seg::is_initializing(bus.read32(init_seg::INITIALIZING)));
/// assert_eq!(bus.read32(bus.bar_len()), 0xFFFF_FFFF); // outside BAR0: all ones
/// let r = bus.alloc_dma(100).unwrap();
/// assert_eq!((r.len, r.iova % 4096), (4096, 0)); // rounded up, page aligned
/// # bus.free_dma(r).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct EmuBus {
    shared: Arc<Shared>,
}

impl EmuBus {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        EmuBus { shared }
    }
}

impl Bus for EmuBus {
    fn read32(&self, offset: usize) -> u32 {
        self.shared.bar.read32(offset)
    }

    fn write32(&self, offset: usize, value: u32) {
        let ev = self.shared.bar.write32(offset, value);
        self.shared.post(ev);
    }

    fn write64(&self, offset: usize, value: u64) {
        let ev = self.shared.bar.write64(offset, value);
        self.shared.post(ev);
    }

    fn bar_len(&self) -> usize {
        self.shared.bar.len()
    }

    fn alloc_dma(&self, len: usize) -> Result<DmaRegion, BusError> {
        if len == 0 {
            return Err(BusError::InvalidArgument);
        }
        let len = len
            .checked_next_multiple_of(PAGE)
            .ok_or(BusError::NoMemory)?;
        let layout = Layout::from_size_align(len, PAGE).map_err(|_| BusError::NoMemory)?;
        // SAFETY: `layout` has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let vaddr = NonNull::new(ptr).ok_or(BusError::NoMemory)?;
        let mut dma = self.shared.dma.lock().unwrap_or_else(|e| e.into_inner());
        let mapped = dma.take_iova(len).and_then(|iova| {
            // SAFETY: the allocation lives until `free_dma` unmaps it first.
            unsafe { self.shared.iommu.map(iova, ptr, len) }.map_err(map_error)?;
            Ok(iova)
        });
        match mapped {
            Ok(iova) => {
                dma.owned.insert(iova, (ptr as usize, layout));
                Ok(DmaRegion { vaddr, iova, len })
            }
            Err(e) => {
                // SAFETY: allocated above with this layout and never handed out.
                unsafe { std::alloc::dealloc(ptr, layout) };
                Err(e)
            }
        }
    }

    fn free_dma(&self, region: DmaRegion) -> Result<(), BusError> {
        let mut dma = self.shared.dma.lock().unwrap_or_else(|e| e.into_inner());
        let Some(&(host, layout)) = dma.owned.get(&region.iova) else {
            return Err(BusError::InvalidArgument);
        };
        if host != region.vaddr.as_ptr() as usize || layout.size() != region.len {
            return Err(BusError::InvalidArgument);
        }
        self.shared
            .iommu
            .unmap(region.iova, region.len)
            .map_err(map_error)?;
        dma.owned.remove(&region.iova);
        // SAFETY: the device can no longer reach the memory (unmapped above), and it was
        // allocated by `alloc_dma` with this layout.
        unsafe { std::alloc::dealloc(host as *mut u8, layout) };
        Ok(())
    }

    unsafe fn map_dma(&self, vaddr: NonNull<u8>, len: usize) -> Result<u64, BusError> {
        if len == 0 {
            return Err(BusError::InvalidArgument);
        }
        let mut dma = self.shared.dma.lock().unwrap_or_else(|e| e.into_inner());
        // Keep the buffer's offset inside its page, as an IOMMU maps whole pages.
        let offset = (vaddr.as_ptr() as usize % PAGE) as u64;
        let iova = dma.take_iova(len + PAGE)? + offset;
        // SAFETY: the caller keeps `vaddr..vaddr + len` valid until `unmap_dma`.
        unsafe { self.shared.iommu.map(iova, vaddr.as_ptr(), len) }.map_err(map_error)?;
        Ok(iova)
    }

    fn unmap_dma(&self, iova: u64, len: usize) -> Result<(), BusError> {
        let dma = self.shared.dma.lock().unwrap_or_else(|e| e.into_inner());
        if dma.owned.contains_key(&iova) {
            // Regions from alloc_dma go back through free_dma.
            return Err(BusError::InvalidArgument);
        }
        self.shared.iommu.unmap(iova, len).map_err(map_error)
    }

    fn wait_irq(&self, vector: u16, timeout: Duration) -> Result<bool, BusError> {
        Ok(self.shared.irqs.wait(vector, timeout))
    }

    fn function_reset(&self) -> Result<(), BusError> {
        self.shared.function_reset()
    }
}

#[cfg(test)]
mod tests {
    use crate::{Device, Profile, RunMode};
    use rnic_hw_regs::Bus;

    #[test]
    fn dma_regions_are_mapped_zeroed_and_guarded() {
        let dev = Device::new(Profile::default(), RunMode::Deterministic);
        let bus = dev.bus();
        let a = bus.alloc_dma(100).unwrap();
        let b = bus.alloc_dma(4096).unwrap();
        assert_eq!(a.len, 4096);
        assert_eq!(a.iova % 4096, 0);
        assert!(b.iova >= a.iova + 8192, "a guard page separates regions");
        // SAFETY: `a` is a live 4 KiB region.
        let first = unsafe { a.vaddr.as_ptr().read_volatile() };
        assert_eq!(first, 0);
        assert_eq!(dev.dma_mappings(), 2);
        bus.free_dma(a).unwrap();
        bus.free_dma(b).unwrap();
        assert_eq!(dev.dma_mappings(), 0);
    }

    #[test]
    fn user_memory_maps_and_unmaps() {
        let dev = Device::new(Profile::default(), RunMode::Deterministic);
        let bus = dev.bus();
        let mut buf = vec![0u8; 10_000];
        let ptr = std::ptr::NonNull::new(buf.as_mut_ptr()).unwrap();
        // SAFETY: `buf` outlives the mapping, removed below.
        let iova = unsafe { bus.map_dma(ptr, buf.len()).unwrap() };
        assert_eq!(iova % 4096, buf.as_ptr() as u64 % 4096);
        assert!(bus.unmap_dma(iova, 5).is_err());
        bus.unmap_dma(iova, buf.len()).unwrap();
        assert!(bus.unmap_dma(iova, buf.len()).is_err());
        assert_eq!(dev.dma_mappings(), 0);
    }

    #[test]
    fn bad_dma_requests_are_refused() {
        let dev = Device::new(Profile::default(), RunMode::Deterministic);
        let bus = dev.bus();
        assert!(bus.alloc_dma(0).is_err());
        let a = bus.alloc_dma(4096).unwrap();
        let forged = rnic_hw_regs::DmaRegion {
            vaddr: a.vaddr,
            iova: a.iova + 4096,
            len: 4096,
        };
        assert!(bus.free_dma(forged).is_err());
        assert!(bus.unmap_dma(a.iova, a.len).is_err());
        bus.free_dma(a).unwrap();
    }
}
