//! The one seam between the driver and a device: MMIO on BAR0, DMA memory, interrupts.
//!
//! The driver talks to a ConnectX only through [`Bus`]. `VfioBus` (driver crate) implements it
//! for a real device behind VFIO; the emulator implements it from the device side. Nothing
//! else crosses: that is what makes a test on the emulator evidence about the driver.

use core::fmt;
use core::ptr::NonNull;
use core::time::Duration;

/// A block of host memory the device can reach by DMA at `iova`.
///
/// The memory is shared with the device, which may write it at any time: touch it only
/// through raw pointers with volatile or atomic accesses, never through `&`/`&mut`
/// references (DESIGN principle 4). A region stays valid until it is handed back to
/// [`Bus::free_dma`].
///
/// A region is a plain description; a [`Bus`] hands it out and takes it back.
///
/// ```
/// use core::ptr::NonNull;
/// use rnic_hw_regs::DmaRegion;
///
/// let mut page = [0u8; 4096];
/// let r = DmaRegion { vaddr: NonNull::from(&mut page).cast(), iova: 0x1000, len: 4096 };
/// // Only raw, volatile accesses: the device may write it at any time.
/// // SAFETY: `page` outlives `r`, and byte 8 is inside it.
/// unsafe { r.vaddr.as_ptr().add(8).write_volatile(0x5A) };
/// assert_eq!(page[8], 0x5A);
/// ```
#[derive(Debug, PartialEq, Eq)]
pub struct DmaRegion {
    /// Host virtual address of the first byte.
    pub vaddr: NonNull<u8>,
    /// The address the device uses (a bus address, an IOVA under an IOMMU).
    pub iova: u64,
    /// Length in bytes (a multiple of 4 KiB).
    pub len: usize,
}

// SAFETY: a DmaRegion is a description (address, IOVA, length) of memory owned by the bus,
// not a reference into it; accesses go through raw pointers whose synchronisation is the
// user's concern (volatile/atomic accesses and fences, as the PRM orders them).
unsafe impl Send for DmaRegion {}
// SAFETY: see the `Send` impl: sharing the description shares no Rust-visible data.
unsafe impl Sync for DmaRegion {}

/// What can go wrong on the bus.
///
/// ```
/// use rnic_hw_regs::BusError;
///
/// assert_eq!(BusError::MapFailed(12).to_string(), "IOMMU mapping failed (errno 12)");
/// let e: &dyn core::error::Error = &BusError::DeviceLost;
/// assert_eq!(e.to_string(), "device lost");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BusError {
    /// No memory (or no IOVA space) left for a DMA allocation or mapping.
    NoMemory,
    /// The request is malformed: zero or unaligned length, IOVA overlap, unknown region.
    InvalidArgument,
    /// The IOMMU (or the emulator's model of it) refused the mapping; the value is an errno.
    MapFailed(i32),
    /// The device is gone (surprise removal, dead PCI link).
    DeviceLost,
    /// The bus does not support this operation (e.g. no interrupt vector `n`).
    Unsupported,
}

impl fmt::Display for BusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BusError::NoMemory => f.write_str("no memory for DMA"),
            BusError::InvalidArgument => f.write_str("invalid DMA request"),
            BusError::MapFailed(errno) => write!(f, "IOMMU mapping failed (errno {errno})"),
            BusError::DeviceLost => f.write_str("device lost"),
            BusError::Unsupported => f.write_str("operation not supported by this bus"),
        }
    }
}

impl core::error::Error for BusError {}

/// MMIO on BAR0, DMA memory and interrupt notification: everything a driver needs of a device.
///
/// Register values are host-order integers; the bus stores and loads them big-endian, as the
/// ConnectX expects. An offset outside BAR0 reads as all ones and writes are dropped, as on
/// PCI after a master abort, so a driver bug cannot corrupt host memory through the bus.
///
/// ```
/// use rnic_hw_regs::Bus;
///
/// /// Firmware is ready when bit 31 of the `initializing` register (0x1FC) is clear.
/// fn firmware_ready(bus: &dyn Bus) -> bool {
///     bus.read32(0x1FC) >> 31 == 0
/// }
/// # let _ = firmware_ready;
/// ```
pub trait Bus: Send + Sync {
    /// Reads the big-endian 32-bit register at `offset` in BAR0.
    fn read32(&self, offset: usize) -> u32;

    /// Writes `value` big-endian to the 32-bit register at `offset` in BAR0.
    fn write32(&self, offset: usize, value: u32);

    /// Writes `value` big-endian to the 64-bit register at `offset` in BAR0 as one
    /// atomic 8-byte store (doorbells: `{arm, cqn}`, the first 8 bytes of a control segment).
    fn write64(&self, offset: usize, value: u64);

    /// Length of BAR0 in bytes.
    fn bar_len(&self) -> usize;

    /// Allocates `len` bytes (rounded up to 4 KiB), zeroed, 4 KiB aligned, mapped for DMA.
    fn alloc_dma(&self, len: usize) -> Result<DmaRegion, BusError>;

    /// Unmaps and frees a region from [`Bus::alloc_dma`]. The device must no longer use it.
    fn free_dma(&self, region: DmaRegion) -> Result<(), BusError>;

    /// Makes `len` bytes of caller memory at `vaddr` reachable by the device; returns its IOVA.
    ///
    /// # Safety
    /// `vaddr..vaddr + len` must stay allocated, and must not be freed or moved, until
    /// [`Bus::unmap_dma`] has returned for this IOVA: the device may read and write it at any
    /// time in between.
    unsafe fn map_dma(&self, vaddr: NonNull<u8>, len: usize) -> Result<u64, BusError>;

    /// Removes a mapping made by [`Bus::map_dma`].
    fn unmap_dma(&self, iova: u64, len: usize) -> Result<(), BusError>;

    /// Waits until interrupt vector `vector` fires or `timeout` passes; `Ok(true)` if it fired.
    /// A polling driver need not call it.
    fn wait_irq(&self, vector: u16, timeout: Duration) -> Result<bool, BusError>;

    /// A file descriptor that becomes readable when `vector` fires (an eventfd), for epoll
    /// and async runtimes; `None` if the bus has none.
    fn irq_fd(&self, vector: u16) -> Option<i32> {
        let _ = vector;
        None
    }

    /// Resets the function (a PCI function-level reset): the device drops all its state and
    /// comes back as at power-on, for a new bring-up; the DMA mappings made through this bus
    /// stay. The way on after a fatal error. [`BusError::Unsupported`] when the bus cannot.
    fn function_reset(&self) -> Result<(), BusError> {
        Err(BusError::Unsupported)
    }
}
