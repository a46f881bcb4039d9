//! The IOMMU model: every device access to host memory goes through here.
//!
//! The host (through [`crate::EmuBus`]) maps host buffers at IOVAs. Each device access names an
//! IOVA range; the range is translated and bounds-checked against the mappings, and a range
//! that is not fully mapped is an [`IommuFault`]: counted, and turned by the caller into the
//! error the device would report (a command delivery status, an error CQE), never a crash.
//!
//! DMA memory is not Rust memory (DESIGN principle 4): the host writes it with volatile and
//! atomic accesses while the device copies it here with raw-pointer copies, as a DMA engine
//! does. Ordering is the PRM's: the device reads a doorbell record, then issues an acquire
//! fence before it reads the WQEs; it writes a CQE body, a release fence, then the owner byte.

use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering, fence};

/// Slots of the translation hint ([`Iommu::hint`]), by IOVA page.
const HINT_SLOTS: usize = 32;

/// The direction of a DMA access.
///
/// ```
/// use rnic_emulator::iommu::{Access, Iommu};
///
/// let iommu = Iommu::new();
/// let fault = iommu.write(0x1000, &[1]).unwrap_err(); // nothing is mapped
/// assert_eq!(fault.access, Access::Write);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The device reads host memory.
    Read,
    /// The device writes host memory.
    Write,
}

/// A device access to an IOVA range that is not fully mapped.
///
/// ```
/// use rnic_emulator::iommu::{Access, Iommu, IommuFault};
///
/// let iommu = Iommu::new();
/// let mut buf = [0u8; 8];
/// assert_eq!(iommu.read(0x2000, &mut buf), Err(IommuFault { iova: 0x2000, len: 8, access: Access::Read }));
/// assert_eq!(iommu.faults(), 1); // counted
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("IOMMU fault: {access:?} of {len} bytes at IOVA {iova:#x}")]
pub struct IommuFault {
    /// First IOVA of the access.
    pub iova: u64,
    /// Length of the access.
    pub len: usize,
    /// Read or write.
    pub access: Access,
}

/// Why a mapping request was refused.
///
/// ```
/// use rnic_emulator::iommu::{Iommu, MapError};
///
/// let iommu = Iommu::new();
/// let mut page = vec![0u8; 4096];
/// // SAFETY: `page` outlives every use of the mapping (the IOMMU is dropped first).
/// unsafe { iommu.map(0x1000, page.as_mut_ptr(), 4096) }.unwrap();
/// // SAFETY: as above; the call fails anyway.
/// assert_eq!(unsafe { iommu.map(0x1800, page.as_mut_ptr(), 16) }, Err(MapError::Overlap));
/// assert_eq!(iommu.unmap(0x1000, 16), Err(MapError::NotMapped)); // the length must match
/// # drop(iommu);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    /// Zero length, or the range wraps around the IOVA space.
    #[error("invalid mapping range")]
    InvalidRange,
    /// The range overlaps an existing mapping.
    #[error("IOVA range overlaps an existing mapping")]
    Overlap,
    /// No mapping starts at that IOVA with that length.
    #[error("no such mapping")]
    NotMapped,
}

#[derive(Clone, Copy, Debug)]
struct Mapping {
    /// First IOVA.
    iova: u64,
    /// Host address of the first byte.
    host: usize,
    len: u64,
}

impl Mapping {
    /// Whether `at` lies inside.
    fn holds(&self, at: u64) -> bool {
        at >= self.iova && at - self.iova < self.len
    }
}

/// The translation table and its fault counter.
///
/// ```
/// use rnic_emulator::iommu::Iommu;
///
/// let iommu = Iommu::new();
/// let mut host = vec![0u8; 4096];
/// // SAFETY: `host` stays allocated until after the unmap below.
/// unsafe { iommu.map(0x10_0000, host.as_mut_ptr(), host.len()) }.unwrap();
/// iommu.write_be32(0x10_0004, 0xDEAD_BEEF).unwrap(); // what the device does
/// assert_eq!(host[4..8], [0xDE, 0xAD, 0xBE, 0xEF]);
/// iommu.unmap(0x10_0000, 4096).unwrap();
/// assert!(iommu.read_be32(0x10_0004).is_err());
/// ```
#[derive(Debug, Default)]
pub struct Iommu {
    /// The mappings, sorted by IOVA (they never overlap): a binary search finds one.
    maps: RwLock<Vec<Mapping>>,
    /// Where in `maps` the last access to each IOVA page (modulo [`HINT_SLOTS`]) found its
    /// mapping, as an IOTLB remembers translations: the data path touches the same few
    /// queues and buffers again and again. Only a hint: checked against `maps` on use.
    hint: [AtomicUsize; HINT_SLOTS],
    faults: AtomicU64,
}

impl Iommu {
    /// An IOMMU with nothing mapped.
    ///
    /// ```
    /// use rnic_emulator::iommu::Iommu;
    ///
    /// let iommu = Iommu::new();
    /// assert_eq!((iommu.mappings(), iommu.faults()), (0, 0));
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Maps `len` bytes of host memory at `host` to `iova`.
    ///
    /// # Safety
    /// `host..host + len` must stay valid for reads and writes until [`Iommu::unmap`] removes
    /// this mapping: the device may access it at any time in between.
    ///
    /// ```
    /// use rnic_emulator::iommu::Iommu;
    ///
    /// let iommu = Iommu::new();
    /// let mut host = vec![0u8; 8192];
    /// // SAFETY: `host` outlives the mapping (unmapped below).
    /// unsafe { iommu.map(0x4000, host.as_mut_ptr(), 8192) }.unwrap();
    /// assert_eq!(iommu.mappings(), 1);
    /// # iommu.unmap(0x4000, 8192).unwrap();
    /// ```
    pub unsafe fn map(&self, iova: u64, host: *mut u8, len: usize) -> Result<(), MapError> {
        let len64 = u64::try_from(len).map_err(|_| MapError::InvalidRange)?;
        let end = iova.checked_add(len64).ok_or(MapError::InvalidRange)?;
        if len == 0 {
            return Err(MapError::InvalidRange);
        }
        let mut maps = self.maps.write().unwrap_or_else(|e| e.into_inner());
        // Overlap with the mapping at or before `iova`, or with one starting inside the range.
        let at = maps.partition_point(|m| m.iova <= iova);
        if at > 0 && maps[at - 1].holds(iova) {
            return Err(MapError::Overlap);
        }
        if maps.get(at).is_some_and(|m| m.iova < end) {
            return Err(MapError::Overlap);
        }
        maps.insert(
            at,
            Mapping {
                iova,
                host: host as usize,
                len: len64,
            },
        );
        Ok(())
    }

    /// Removes the mapping made at `iova` with length `len`.
    ///
    /// ```
    /// use rnic_emulator::iommu::Iommu;
    ///
    /// let iommu = Iommu::new();
    /// let mut host = [0u8; 64];
    /// // SAFETY: `host` outlives the mapping.
    /// unsafe { iommu.map(0x4000, host.as_mut_ptr(), 64) }.unwrap();
    /// iommu.unmap(0x4000, 64).unwrap();
    /// assert_eq!(iommu.mappings(), 0);
    /// ```
    pub fn unmap(&self, iova: u64, len: usize) -> Result<(), MapError> {
        let mut maps = self.maps.write().unwrap_or_else(|e| e.into_inner());
        let at = maps.partition_point(|m| m.iova < iova);
        match maps.get(at) {
            Some(m) if m.iova == iova && u64::try_from(len).is_ok_and(|l| l == m.len) => {
                maps.remove(at);
                Ok(())
            }
            _ => Err(MapError::NotMapped),
        }
    }

    /// How many device accesses have faulted.
    ///
    /// ```
    /// use rnic_emulator::iommu::Iommu;
    ///
    /// let iommu = Iommu::new();
    /// let _ = iommu.read_be64(0x8000);
    /// let _ = iommu.write(0x9000, &[0; 4]);
    /// assert_eq!(iommu.faults(), 2);
    /// ```
    pub fn faults(&self) -> u64 {
        self.faults.load(Ordering::Relaxed)
    }

    /// How many mappings exist.
    ///
    /// ```
    /// use rnic_emulator::iommu::Iommu;
    ///
    /// let iommu = Iommu::new();
    /// let mut a = [0u8; 16];
    /// let mut b = [0u8; 16];
    /// // SAFETY: `a` and `b` outlive the mappings (the IOMMU is dropped first).
    /// unsafe {
    ///     iommu.map(0x1000, a.as_mut_ptr(), 16).unwrap();
    ///     iommu.map(0x2000, b.as_mut_ptr(), 16).unwrap();
    /// }
    /// assert_eq!(iommu.mappings(), 2);
    /// # drop(iommu);
    /// ```
    pub fn mappings(&self) -> usize {
        self.maps.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// The mapping in `maps` (the locked table) that holds `at`: the hint's if it holds it,
    /// else by binary search (and the hint learns it).
    fn find<'m>(&self, maps: &'m [Mapping], at: u64) -> Option<&'m Mapping> {
        let slot = &self.hint[(at >> 12) as usize % HINT_SLOTS];
        if let Some(m) = maps.get(slot.load(Ordering::Relaxed)) {
            if m.holds(at) {
                return Some(m);
            }
        }
        let i = maps.partition_point(|m| m.iova <= at).checked_sub(1)?;
        let m = &maps[i];
        if !m.holds(at) {
            return None;
        }
        slot.store(i, Ordering::Relaxed);
        Some(m)
    }

    /// Calls `f(host_ptr, offset_in_access, n)` for each mapped piece of `iova..iova + len`,
    /// or counts a fault and returns it when any byte is unmapped (then `f` was not called).
    fn walk(
        &self,
        iova: u64,
        len: usize,
        access: Access,
        mut f: impl FnMut(*mut u8, usize, usize),
    ) -> Result<(), IommuFault> {
        let fault = IommuFault { iova, len, access };
        if len == 0 {
            return Ok(());
        }
        let maps = self.maps.read().unwrap_or_else(|e| e.into_inner());
        // The first pass checks the whole range, so a faulting access touches nothing; the
        // second performs it.
        for perform in [false, true] {
            let mut done = 0usize;
            while done < len {
                let piece = iova.checked_add(done as u64).and_then(|at| {
                    let m = self.find(&maps, at)?;
                    let off = at - m.iova;
                    // `off < m.len`, and `m.len` came from a usize, so both casts are exact.
                    Some((m.host + off as usize, (m.len - off) as usize))
                });
                let Some((host, avail)) = piece else {
                    self.faults.fetch_add(1, Ordering::Relaxed);
                    return Err(fault);
                };
                let n = avail.min(len - done);
                if perform || n == len {
                    // One mapping holds the whole access (the common case): checked already.
                    f(host as *mut u8, done, n);
                    if !perform {
                        return Ok(());
                    }
                }
                done += n;
            }
        }
        Ok(())
    }

    /// Copies `buf.len()` bytes from device-visible memory at `iova` into `buf`.
    ///
    /// ```
    /// use rnic_emulator::iommu::Iommu;
    ///
    /// let iommu = Iommu::new();
    /// let mut host = *b"host memory!";
    /// // SAFETY: `host` outlives the mapping.
    /// unsafe { iommu.map(0x1000, host.as_mut_ptr(), host.len()) }.unwrap();
    /// let mut out = [0u8; 6];
    /// iommu.read(0x1005, &mut out).unwrap();
    /// assert_eq!(&out, b"memory");
    /// assert!(iommu.read(0x1008, &mut out).is_err()); // runs past the mapping
    /// # drop(iommu);
    /// ```
    pub fn read(&self, iova: u64, buf: &mut [u8]) -> Result<(), IommuFault> {
        let dst = buf.as_mut_ptr();
        self.walk(iova, buf.len(), Access::Read, |host, at, n| {
            // SAFETY: `walk` checked that `host..host + n` lies inside a live mapping, whose
            // creator promised it stays valid while mapped (`Iommu::map`); `dst + at .. + n`
            // is inside `buf`. The host may write the same bytes concurrently, as with real
            // DMA; the values read are then whatever the memory held.
            unsafe { std::ptr::copy_nonoverlapping(host, dst.add(at), n) }
        })?;
        fence(Ordering::Acquire);
        Ok(())
    }

    /// Copies `data` into device-visible memory at `iova`.
    ///
    /// ```
    /// use rnic_emulator::iommu::Iommu;
    ///
    /// let iommu = Iommu::new();
    /// let mut host = [0u8; 8];
    /// // SAFETY: `host` outlives the mapping.
    /// unsafe { iommu.map(0x1000, host.as_mut_ptr(), 8) }.unwrap();
    /// iommu.write(0x1002, b"dma").unwrap();
    /// # drop(iommu);
    /// assert_eq!(&host[2..5], b"dma");
    /// ```
    pub fn write(&self, iova: u64, data: &[u8]) -> Result<(), IommuFault> {
        fence(Ordering::Release);
        let src = data.as_ptr();
        self.walk(iova, data.len(), Access::Write, |host, at, n| {
            // SAFETY: as in `read`, with the roles of the two ranges swapped.
            unsafe { std::ptr::copy_nonoverlapping(src.add(at), host, n) }
        })
    }

    /// Reads a big-endian u32 at `iova` (doorbell records, descriptors).
    ///
    /// ```
    /// use rnic_emulator::iommu::Iommu;
    ///
    /// let iommu = Iommu::new();
    /// let mut host = [0x12u8, 0x34, 0x56, 0x78];
    /// // SAFETY: `host` outlives the mapping.
    /// unsafe { iommu.map(0x1000, host.as_mut_ptr(), 4) }.unwrap();
    /// assert_eq!(iommu.read_be32(0x1000), Ok(0x1234_5678));
    /// # drop(iommu);
    /// ```
    pub fn read_be32(&self, iova: u64) -> Result<u32, IommuFault> {
        let mut b = [0u8; 4];
        self.read(iova, &mut b)?;
        Ok(u32::from_be_bytes(b))
    }

    /// Reads a big-endian u64 at `iova`.
    ///
    /// ```
    /// use rnic_emulator::iommu::Iommu;
    ///
    /// let iommu = Iommu::new();
    /// let mut host = 0x0102_0304_0506_0708u64.to_be_bytes();
    /// // SAFETY: `host` outlives the mapping.
    /// unsafe { iommu.map(0x1000, host.as_mut_ptr(), 8) }.unwrap();
    /// assert_eq!(iommu.read_be64(0x1000), Ok(0x0102_0304_0506_0708));
    /// # drop(iommu);
    /// ```
    pub fn read_be64(&self, iova: u64) -> Result<u64, IommuFault> {
        let mut b = [0u8; 8];
        self.read(iova, &mut b)?;
        Ok(u64::from_be_bytes(b))
    }

    /// Writes a big-endian u32 at `iova`.
    ///
    /// ```
    /// use rnic_emulator::iommu::Iommu;
    ///
    /// let iommu = Iommu::new();
    /// let mut host = [0u8; 4];
    /// // SAFETY: `host` outlives the mapping.
    /// unsafe { iommu.map(0x1000, host.as_mut_ptr(), 4) }.unwrap();
    /// iommu.write_be32(0x1000, 7).unwrap();
    /// # drop(iommu);
    /// assert_eq!(host, [0, 0, 0, 7]);
    /// ```
    pub fn write_be32(&self, iova: u64, value: u32) -> Result<(), IommuFault> {
        self.write(iova, &value.to_be_bytes())
    }

    /// Writes an entry (CQE, EQE, command entry) whose last byte carries the ownership bit:
    /// the body first, a release fence, then the last byte, so the host never sees the new
    /// owner value with an old body.
    ///
    /// ```
    /// use rnic_emulator::iommu::Iommu;
    ///
    /// let iommu = Iommu::new();
    /// let mut cqe = [0xF1u8; 64]; // owned by hardware, opcode INVALID
    /// // SAFETY: `cqe` outlives the mapping.
    /// unsafe { iommu.map(0x1000, cqe.as_mut_ptr(), 64) }.unwrap();
    /// let mut entry = [0u8; 64];
    /// entry[63] = 0x00; // opcode REQ, owner 0: the body lands first, then this byte
    /// iommu.write_owned(0x1000, &entry).unwrap();
    /// # drop(iommu);
    /// assert_eq!(cqe, [0; 64]);
    /// ```
    pub fn write_owned(&self, iova: u64, entry: &[u8]) -> Result<(), IommuFault> {
        let Some((last, body)) = entry.split_last() else {
            return Ok(());
        };
        // Check the whole range first so a fault leaves the entry untouched.
        self.walk(iova, entry.len(), Access::Write, |_, _, _| {})?;
        self.write(iova, body)?;
        fence(Ordering::Release);
        self.write(iova + body.len() as u64, std::slice::from_ref(last))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapped(len: usize) -> (Iommu, Vec<u8>) {
        let iommu = Iommu::new();
        let mut mem = vec![0u8; len];
        // SAFETY: `mem` outlives every access in these tests.
        unsafe { iommu.map(0x1000, mem.as_mut_ptr(), len).unwrap() };
        (iommu, mem)
    }

    #[test]
    fn reads_and_writes_inside_a_mapping() {
        let (iommu, mem) = mapped(64);
        iommu.write(0x1008, &[1, 2, 3]).unwrap();
        let mut b = [0u8; 3];
        iommu.read(0x1008, &mut b).unwrap();
        assert_eq!(b, [1, 2, 3]);
        assert_eq!(mem[8..11], [1, 2, 3]);
        assert_eq!(iommu.faults(), 0);
    }

    #[test]
    fn out_of_range_and_unmapped_accesses_fault_and_count() {
        let (iommu, _mem) = mapped(64);
        let mut b = [0u8; 8];
        assert_eq!(
            iommu.read(0x1040 - 4, &mut b),
            Err(IommuFault {
                iova: 0x103C,
                len: 8,
                access: Access::Read
            })
        );
        assert!(iommu.write(0x0, &[1]).is_err());
        assert!(iommu.read(u64::MAX, &mut b).is_err());
        assert_eq!(iommu.faults(), 3);
    }

    #[test]
    fn a_faulting_write_touches_nothing() {
        let (iommu, mem) = mapped(16);
        assert!(iommu.write(0x1008, &[0xAA; 16]).is_err());
        assert!(iommu.write_owned(0x1008, &[0xAA; 16]).is_err());
        assert!(mem.iter().all(|b| *b == 0));
    }

    #[test]
    fn a_stale_translation_hint_never_translates() {
        // The hint learns where 0x5000's mapping sits; a mapping inserted before it moves
        // it, an unmap removes it: each access still finds its own mapping, or faults.
        let iommu = Iommu::new();
        let (mut a, mut b) = (vec![0u8; 16], vec![0u8; 16]);
        // SAFETY: both buffers outlive the accesses (the IOMMU is dropped first).
        unsafe { iommu.map(0x5000, a.as_mut_ptr(), 16).unwrap() };
        iommu.write(0x5000, &[1]).unwrap();
        // SAFETY: as above.
        unsafe { iommu.map(0x1000, b.as_mut_ptr(), 16).unwrap() };
        iommu.write(0x5001, &[2]).unwrap();
        iommu.write(0x1000, &[3]).unwrap();
        assert_eq!((a[..2].to_vec(), b[0]), (vec![1, 2], 3));
        iommu.unmap(0x5000, 16).unwrap();
        assert!(iommu.write(0x5000, &[4]).is_err());
        iommu.write(0x1001, &[5]).unwrap();
        assert_eq!((a[0], b[1]), (1, 5));
        drop(iommu);
    }

    #[test]
    fn accesses_may_span_adjacent_mappings() {
        let iommu = Iommu::new();
        let mut a = vec![0u8; 16];
        let mut b = vec![0u8; 16];
        // SAFETY: both buffers outlive the accesses.
        unsafe {
            iommu.map(0x2000, a.as_mut_ptr(), 16).unwrap();
            iommu.map(0x2010, b.as_mut_ptr(), 16).unwrap();
        }
        iommu.write(0x200C, &[9; 8]).unwrap();
        assert_eq!(a[12..], [9; 4]);
        assert_eq!(b[..4], [9; 4]);
    }

    #[test]
    fn overlapping_maps_and_bad_unmaps_are_refused() {
        let (iommu, mut other) = mapped(64);
        // SAFETY: refused mappings are never used.
        unsafe {
            assert_eq!(
                iommu.map(0x1020, other.as_mut_ptr(), 8),
                Err(MapError::Overlap)
            );
            assert_eq!(
                iommu.map(0x0FF8, other.as_mut_ptr(), 16),
                Err(MapError::Overlap)
            );
            assert_eq!(
                iommu.map(0x9000, other.as_mut_ptr(), 0),
                Err(MapError::InvalidRange)
            );
        }
        assert_eq!(iommu.unmap(0x1000, 32), Err(MapError::NotMapped));
        iommu.unmap(0x1000, 64).unwrap();
        assert_eq!(iommu.mappings(), 0);
    }
}
