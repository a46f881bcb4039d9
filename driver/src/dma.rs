//! Access to DMA memory: bounds-checked volatile copies in and out of a [`DmaRegion`].
//!
//! DMA memory is not Rust memory (DESIGN principle 4): the device may write it at any time, so
//! the driver never makes `&`/`&mut` references into it. Every access goes through these
//! helpers, which use volatile reads and writes on raw pointers; ordering against the device
//! is the caller's job (fences before doorbells, after ownership checks).

use rnic_hw_regs::DmaRegion;

/// Whether `offset..offset + len` lies inside `region`.
fn in_bounds(region: &DmaRegion, offset: usize, len: usize) -> bool {
    offset.checked_add(len).is_some_and(|end| end <= region.len)
}

/// Copies `src` into `region` at `offset` with volatile writes. Returns `false` (and writes
/// nothing) when the range is outside the region.
pub(crate) fn write(region: &DmaRegion, offset: usize, src: &[u8]) -> bool {
    if !in_bounds(region, offset, src.len()) {
        return false;
    }
    let base = region.vaddr.as_ptr();
    for (i, b) in src.iter().enumerate() {
        // SAFETY: `offset + i < region.len` (checked above) and the region is valid, mapped
        // memory until it is freed (DmaRegion contract); a volatile byte write creates no
        // reference into memory the device shares.
        unsafe { base.add(offset + i).write_volatile(*b) };
    }
    true
}

/// Fills `len` bytes of `region` at `offset` with `byte` (volatile).
pub(crate) fn fill(region: &DmaRegion, offset: usize, len: usize, byte: u8) -> bool {
    if !in_bounds(region, offset, len) {
        return false;
    }
    let base = region.vaddr.as_ptr();
    for i in 0..len {
        // SAFETY: in bounds (checked above); see `write`.
        unsafe { base.add(offset + i).write_volatile(byte) };
    }
    true
}

/// Copies `dst.len()` bytes out of `region` at `offset` with volatile reads. Returns `false`
/// (and leaves `dst` alone) when the range is outside the region.
pub(crate) fn read(region: &DmaRegion, offset: usize, dst: &mut [u8]) -> bool {
    if !in_bounds(region, offset, dst.len()) {
        return false;
    }
    let base = region.vaddr.as_ptr();
    for (i, b) in dst.iter_mut().enumerate() {
        // SAFETY: in bounds (checked above); the read is volatile because the device may
        // write this memory concurrently.
        *b = unsafe { base.add(offset + i).read_volatile() };
    }
    true
}

/// Reads one byte (volatile); `None` outside the region.
pub(crate) fn read_u8(region: &DmaRegion, offset: usize) -> Option<u8> {
    let mut b = [0u8];
    read(region, offset, &mut b).then_some(b[0])
}

/// Writes `v` big-endian at `p` with one volatile 8-byte store.
///
/// # Safety
/// `p` must be 8-byte aligned and valid for an 8-byte write (inside a live DMA region).
#[inline(always)]
pub(crate) unsafe fn write_be64(p: *mut u8, v: u64) {
    // SAFETY: the caller guarantees alignment and validity.
    unsafe { p.cast::<u64>().write_volatile(v.to_be()) }
}

/// Writes `v` big-endian at `p` with one volatile 4-byte store.
///
/// # Safety
/// `p` must be 4-byte aligned and valid for a 4-byte write.
#[inline(always)]
pub(crate) unsafe fn write_be32(p: *mut u8, v: u32) {
    // SAFETY: the caller guarantees alignment and validity.
    unsafe { p.cast::<u32>().write_volatile(v.to_be()) }
}

/// Reads a big-endian 32-bit value at `p` with one volatile 4-byte load.
///
/// # Safety
/// `p` must be 4-byte aligned and valid for a 4-byte read.
#[inline(always)]
pub(crate) unsafe fn read_be32(p: *const u8) -> u32 {
    // SAFETY: the caller guarantees alignment and validity.
    u32::from_be(unsafe { p.cast::<u32>().read_volatile() })
}

/// Reads the byte at `p` (volatile).
///
/// # Safety
/// `p` must be valid for a 1-byte read.
#[inline(always)]
pub(crate) unsafe fn read_byte(p: *const u8) -> u8 {
    // SAFETY: the caller guarantees validity.
    unsafe { p.read_volatile() }
}

/// The 4 KiB page size of queue buffers (`log_page_size` 0 in the contexts).
pub(crate) const PAGE: usize = 4096;

/// The physical address list (PAS) of a CREATE_* command: the big-endian bus address of each
/// 4 KiB page of the first `len` bytes of `region` (bus-contiguous, as allocated).
pub(crate) fn page_addresses(region: &DmaRegion, len: usize) -> Vec<u8> {
    (0..len.div_ceil(PAGE))
        .flat_map(|i| (region.iova + (i * PAGE) as u64).to_be_bytes())
        .collect()
}

/// Frees `region` when the device answered the command about it, and leaks it when it did
/// not (a device that may still be running must not get the memory back for reuse).
fn free_or_leak(
    bus: &dyn rnic_hw_regs::Bus,
    region: DmaRegion,
    answered: bool,
    what: std::fmt::Arguments<'_>,
) -> Result<(), crate::DriverError> {
    if answered {
        bus.free_dma(region)?;
    } else {
        log::warn!("{what} did not complete: its buffer is leaked");
        // Dropping the description without `free_dma` keeps the memory allocated.
        let _leaked = region;
    }
    Ok(())
}

/// The end of a DESTROY_* command: frees the object's ring when the device answered, and
/// leaks it when it did not. Returns a free failure, else the command's own result.
pub(crate) fn release_after_destroy<T>(
    bus: &dyn rnic_hw_regs::Bus,
    buf: &mut Option<DmaRegion>,
    destroyed: Result<T, crate::DriverError>,
    what: &str,
    number: u32,
) -> Result<(), crate::DriverError> {
    let answered = destroyed
        .as_ref()
        .map_or_else(|e| e.device_answered(), |_| true);
    if let Some(region) = buf.take() {
        free_or_leak(bus, region, answered, format_args!("{what} {number:#x}"))?;
    }
    destroyed.map(|_| ())
}

/// The end of a failed CREATE_* command: frees the ring it was given when the device answered
/// (and so refused it), and leaks it when it did not. Returns the error to report: a free
/// failure, else the command's error.
pub(crate) fn release_after_failed_create(
    bus: &dyn rnic_hw_regs::Bus,
    buf: DmaRegion,
    failed: crate::DriverError,
    what: &str,
) -> crate::DriverError {
    match free_or_leak(bus, buf, failed.device_answered(), format_args!("{what}")) {
        Ok(()) => failed,
        Err(free_failed) => free_failed,
    }
}

/// A bus handle that object types can derive `Debug` with.
#[derive(Clone)]
pub(crate) struct BusHandle(pub(crate) std::sync::Arc<dyn rnic_hw_regs::Bus>);

impl std::fmt::Debug for BusHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bus")
    }
}

impl std::ops::Deref for BusHandle {
    type Target = dyn rnic_hw_regs::Bus;
    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr::NonNull;

    #[test]
    fn bounds_are_checked() {
        let mut backing = vec![0u8; 64];
        let region = DmaRegion {
            vaddr: NonNull::new(backing.as_mut_ptr()).unwrap(),
            iova: 0x1000,
            len: 64,
        };
        assert!(write(&region, 60, &[1, 2, 3, 4]));
        assert!(!write(&region, 61, &[1, 2, 3, 4]));
        assert!(!write(&region, usize::MAX, &[1]));
        let mut out = [0u8; 4];
        assert!(read(&region, 60, &mut out));
        assert_eq!(out, [1, 2, 3, 4]);
        assert!(!read(&region, 62, &mut out));
        assert!(fill(&region, 0, 64, 0xAA));
        assert_eq!(read_u8(&region, 63), Some(0xAA));
        assert_eq!(read_u8(&region, 64), None);
        let _ = region;
        assert_eq!(backing[0], 0xAA);
    }
}
