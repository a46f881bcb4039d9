//! Page-granular sub-allocation inside 2 MiB DMA arenas: small DMA allocations (a firmware
//! page, a mailbox page, a doorbell record) share one hugepage mapping instead of each taking
//! a 2 MiB page and an IOMMU mapping. Pure bookkeeping, tested without a device.

/// Bytes per arena (one 2 MiB hugepage).
pub const ARENA_SIZE: usize = 2 << 20;
/// Allocation granule.
pub const PAGE: usize = 4096;
/// Pages per arena.
pub const PAGES_PER_ARENA: usize = ARENA_SIZE / PAGE;
const WORDS: usize = PAGES_PER_ARENA / 64;

/// Which pages of one arena are in use.
///
/// ```
/// use rnic_driver::vfio::arena::{ArenaMap, PAGES_PER_ARENA};
///
/// let mut m = ArenaMap::default();
/// let a = m.alloc(2).ok_or("full")?;
/// let b = m.alloc(1).ok_or("full")?;
/// assert_eq!((a, b, m.used_pages()), (0, 2, 3));
/// assert!(m.free(a, 2) && !m.free(a, 2)); // the second is a double free
/// assert_eq!(m.alloc(PAGES_PER_ARENA), None);
/// # Ok::<(), &str>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct ArenaMap {
    used: [u64; WORDS],
    count: usize,
}

impl ArenaMap {
    /// Pages in use.
    ///
    /// ```
    /// use rnic_driver::vfio::arena::ArenaMap;
    /// assert_eq!(ArenaMap::default().used_pages(), 0);
    /// ```
    pub fn used_pages(&self) -> usize {
        self.count
    }

    fn is_used(&self, p: usize) -> bool {
        self.used[p / 64] & (1 << (p % 64)) != 0
    }

    fn set(&mut self, p: usize, on: bool) {
        if on {
            self.used[p / 64] |= 1 << (p % 64);
        } else {
            self.used[p / 64] &= !(1 << (p % 64));
        }
    }

    /// Finds and takes `n` contiguous free pages (first fit); returns the first page index.
    ///
    /// ```
    /// use rnic_driver::vfio::arena::ArenaMap;
    /// let mut m = ArenaMap::default();
    /// assert_eq!((m.alloc(4), m.alloc(1)), (Some(0), Some(4))); // first fit
    /// assert_eq!(m.alloc(0), None);
    /// ```
    pub fn alloc(&mut self, n: usize) -> Option<usize> {
        if n == 0 || n > PAGES_PER_ARENA - self.count {
            return None;
        }
        let mut run = 0;
        for p in 0..PAGES_PER_ARENA {
            if self.is_used(p) {
                run = 0;
                continue;
            }
            run += 1;
            if run == n {
                let first = p + 1 - n;
                for q in first..=p {
                    self.set(q, true);
                }
                self.count += n;
                return Some(first);
            }
        }
        None
    }

    /// Frees `n` pages from `first`; `false` if any of them was not in use (a double free).
    ///
    /// ```
    /// use rnic_driver::vfio::arena::ArenaMap;
    /// let mut m = ArenaMap::default();
    /// let p = m.alloc(3).unwrap();
    /// assert!(m.free(p + 1, 2));
    /// assert_eq!(m.alloc(2), Some(p + 1)); // the hole is reused
    /// ```
    pub fn free(&mut self, first: usize, n: usize) -> bool {
        let Some(end) = first.checked_add(n) else {
            return false;
        };
        if end > PAGES_PER_ARENA || (first..end).any(|p| !self.is_used(p)) {
            return false;
        }
        for p in first..end {
            self.set(p, false);
        }
        self.count -= n;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_fit_and_free() {
        let mut m = ArenaMap::default();
        assert_eq!(m.alloc(1), Some(0));
        assert_eq!(m.alloc(3), Some(1));
        assert_eq!(m.alloc(1), Some(4));
        assert!(m.free(1, 3));
        assert!(!m.free(1, 3), "double free");
        assert_eq!(m.alloc(2), Some(1));
        assert_eq!(m.alloc(2), Some(5), "the gap at 3 is one page");
        assert_eq!(m.used_pages(), 6);
        assert_eq!(m.alloc(PAGES_PER_ARENA), None);
        assert!(!m.free(PAGES_PER_ARENA - 1, 2));
        let mut full = ArenaMap::default();
        assert_eq!(full.alloc(PAGES_PER_ARENA), Some(0));
        assert_eq!(full.alloc(1), None);
        assert!(full.free(0, PAGES_PER_ARENA));
        assert_eq!(full.used_pages(), 0);
        assert_eq!(full.alloc(0), None);
    }
}
