//! Queue buffers described by a PAS (physical address structure): a list of page IOVAs.

/// A queue's buffer in host memory: pages of `1 << log_page_size` bytes at the IOVAs of the
/// command's PAS array, starting `page_offset` bytes into the first page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueueBuf {
    pub pages: Vec<u64>,
    /// log2 of the page size in bytes (12 = 4 KiB).
    pub log_page_size: u8,
    /// Length of the queue in bytes.
    pub len: u64,
}

impl QueueBuf {
    /// The IOVA of byte `offset` of the queue, if it lies inside it. Callers keep each access
    /// inside one entry (CQE, WQEBB, EQE), which never straddles a page.
    pub(crate) fn iova(&self, offset: u64) -> Option<u64> {
        if offset >= self.len {
            return None;
        }
        let page = usize::try_from(offset >> self.log_page_size).ok()?;
        let within = offset & ((1u64 << self.log_page_size) - 1);
        self.pages.get(page)?.checked_add(within)
    }

    /// Whether the pages can hold the whole queue.
    pub(crate) fn is_covered(&self) -> bool {
        (self.pages.len() as u64) << self.log_page_size >= self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_map_through_the_page_list() {
        let b = QueueBuf {
            pages: vec![0x10_0000, 0x20_0000],
            log_page_size: 12,
            len: 8192,
        };
        assert_eq!(b.iova(0), Some(0x10_0000));
        assert_eq!(b.iova(4096 + 64), Some(0x20_0040));
        assert_eq!(b.iova(8192), None);
        assert!(b.is_covered());
        let short = QueueBuf {
            pages: vec![0x10_0000],
            log_page_size: 12,
            len: 8192,
        };
        assert!(!short.is_covered());
        assert_eq!(short.iova(4096), None);
    }
}
