//! An IOVA allocator: hands out device addresses inside the IOMMU's valid ranges
//! (VFIO_IOMMU_GET_INFO's IOVA range capability) and below the device's DMA mask.

use std::collections::BTreeMap;

/// Allocates aligned IOVA ranges from a set of free intervals (first fit), merging on free.
///
/// ```
/// use rnic_driver::vfio::iova::IovaAllocator;
///
/// // Valid ranges as the IOMMU reports them (inclusive ends), a 32-bit DMA mask.
/// let mut a = IovaAllocator::new(&[(0, 0xFEDF_FFFF), (0xFEF0_0000, u64::MAX)], 32);
/// let x = a.alloc(0x20_0000, 0x20_0000).unwrap();
/// assert_eq!(x % 0x20_0000, 0);
/// a.free(x, 0x20_0000);
/// ```
#[derive(Clone, Debug)]
pub struct IovaAllocator {
    /// start -> end (exclusive) of free intervals.
    free: BTreeMap<u64, u64>,
}

/// Lowest IOVA handed out: page 0 stays unmapped so that a zero pointer never reaches memory.
pub const IOVA_BASE: u64 = 0x1_0000;

impl IovaAllocator {
    /// An allocator over `ranges` (inclusive `(start, end)` pairs, as VFIO reports them),
    /// clipped to addresses below `2^dma_mask_bits` and above [`IOVA_BASE`].
    ///
    /// ```
    /// use rnic_driver::vfio::iova::{IovaAllocator, IOVA_BASE};
    /// let a = IovaAllocator::new(&[(0, 0xFFFF_FFFF)], 32);
    /// assert_eq!(a.free_bytes(), 0x1_0000_0000 - IOVA_BASE); // page 0 area stays unmapped
    /// ```
    pub fn new(ranges: &[(u64, u64)], dma_mask_bits: u8) -> Self {
        let limit_incl = if dma_mask_bits >= 64 {
            u64::MAX
        } else {
            (1u64 << dma_mask_bits) - 1
        };
        let mut free = BTreeMap::new();
        for &(start, end) in ranges {
            let s = start.max(IOVA_BASE);
            let e_incl = end.min(limit_incl);
            // Keep the exclusive end representable: the top page of a 64-bit space is lost.
            let e = e_incl.saturating_add(1).min(!0xFFF);
            if s < e {
                free.insert(s, e);
            }
        }
        let mut a = Self {
            free: BTreeMap::new(),
        };
        for (s, e) in free {
            a.insert(s, e);
        }
        a
    }

    /// Total free bytes.
    ///
    /// ```
    /// use rnic_driver::vfio::iova::IovaAllocator;
    /// let mut a = IovaAllocator::new(&[(0x10_0000, 0x1F_FFFF)], 64);
    /// a.alloc(0x1000, 0x1000);
    /// assert_eq!(a.free_bytes(), 0x10_0000 - 0x1000);
    /// ```
    pub fn free_bytes(&self) -> u64 {
        self.free.iter().map(|(s, e)| e - s).sum()
    }

    /// Allocates `len` bytes aligned to `align` (a power of two, at least 4 KiB is sensible).
    ///
    /// ```
    /// use rnic_driver::vfio::iova::IovaAllocator;
    /// let mut a = IovaAllocator::new(&[(0x10_0000, 0x1F_FFFF)], 64);
    /// assert_eq!(a.alloc(0x1000, 0x1000), Some(0x10_0000));
    /// assert_eq!(a.alloc(0x10_0000, 0x1000), None); // no room left for 1 MiB
    /// assert_eq!(a.alloc(0x1000, 3), None); // alignment not a power of two
    /// ```
    pub fn alloc(&mut self, len: u64, align: u64) -> Option<u64> {
        if len == 0 || !align.is_power_of_two() {
            return None;
        }
        let (start, end, at) = self.free.iter().find_map(|(&s, &e)| {
            let at = s.checked_add(align - 1)? & !(align - 1);
            let stop = at.checked_add(len)?;
            (stop <= e).then_some((s, e, at))
        })?;
        self.free.remove(&start);
        if start < at {
            self.free.insert(start, at);
        }
        if at + len < end {
            self.free.insert(at + len, end);
        }
        Some(at)
    }

    /// Returns a range to the free set, merging with its neighbours.
    ///
    /// ```
    /// use rnic_driver::vfio::iova::IovaAllocator;
    /// let mut a = IovaAllocator::new(&[(0x10_0000, 0x1F_FFFF)], 64);
    /// let x = a.alloc(0x8_0000, 0x1000).unwrap();
    /// a.free(x, 0x8_0000); // merged back with its neighbour
    /// assert_eq!(a.alloc(0x10_0000, 0x1000), Some(0x10_0000));
    /// ```
    pub fn free(&mut self, iova: u64, len: u64) {
        if let Some(end) = iova.checked_add(len) {
            self.insert(iova, end);
        }
    }

    fn insert(&mut self, mut s: u64, mut e: u64) {
        if let Some((&ps, &pe)) = self.free.range(..=s).next_back() {
            if pe >= s {
                s = ps;
                e = e.max(pe);
                self.free.remove(&ps);
            }
        }
        while let Some((&ns, &ne)) = self.free.range(s..).next() {
            if ns > e {
                break;
            }
            e = e.max(ne);
            self.free.remove(&ns);
        }
        self.free.insert(s, e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M2: u64 = 0x20_0000;

    #[test]
    fn honours_ranges_mask_and_alignment() {
        // x86's reserved MSI window at 0xFEE00000..0xFEEFFFFF splits the space.
        let mut a = IovaAllocator::new(&[(0, 0xFEDF_FFFF), (0xFEF0_0000, u64::MAX)], 32);
        assert_eq!(
            a.free_bytes(),
            0xFEE0_0000 - IOVA_BASE + (0x1_0000_0000 - 0xFEF0_0000)
        );
        let mut got = Vec::new();
        while let Some(x) = a.alloc(M2, M2) {
            assert_eq!(x % M2, 0);
            assert!(x + M2 <= 0x1_0000_0000, "below the 32-bit mask");
            assert!(
                !(x < 0xFEF0_0000 && x + M2 > 0xFEE0_0000),
                "outside the hole"
            );
            got.push(x);
        }
        assert_eq!(got[0], M2, "page 0 is never used");
        // Free everything: the free set merges back to the two ranges.
        for x in got {
            a.free(x, M2);
        }
        assert_eq!(a.free.len(), 2);
        assert_eq!(a.alloc(0, 4096), None);
        assert_eq!(a.alloc(4096, 3), None);
    }

    #[test]
    fn small_allocations_merge_back() {
        let mut a = IovaAllocator::new(&[(0, u64::MAX)], 48);
        let xs: Vec<u64> = (0..100).map(|_| a.alloc(4096, 4096).unwrap()).collect();
        assert_eq!(xs[1], xs[0] + 4096);
        let before = a.free_bytes();
        for x in xs.iter().step_by(2) {
            a.free(*x, 4096);
        }
        for x in xs.iter().skip(1).step_by(2) {
            a.free(*x, 4096);
        }
        assert_eq!(a.free_bytes(), before + 100 * 4096);
        assert_eq!(a.free.len(), 1);
        assert_eq!(a.alloc(1 << 48, 4096), None, "larger than the 48-bit space");
        assert_eq!(a.alloc(1 << 47, 1 << 47), Some(1 << 47));
        assert_eq!(
            a.alloc(1 << 47, 1 << 47),
            None,
            "the lower half holds page 0"
        );
    }

    #[test]
    fn empty_when_mask_excludes_everything() {
        let mut a = IovaAllocator::new(&[(1 << 40, 1 << 41)], 32);
        assert_eq!(a.free_bytes(), 0);
        assert_eq!(a.alloc(4096, 4096), None);
    }
}
