//! The memory key context (`mkc`), carried by CREATE_MKEY and QUERY_MKEY.

prm_layout! {
    /// Memory key context (`mlx5_ifc_mkc_bits`, 0x40 bytes).
    pub struct Mkc("mkc", 0x40) {
        /// The mkey is free (not yet usable).
        free / set_free: bool = dw(0x00, 30, 30);
        /// Access mode bits 4:2 (0 for PA, MTT, KLM, KSM).
        access_mode_4_2 / set_access_mode_4_2: u8 = dw(0x00, 28, 26);
        /// Relaxed-ordering PCI writes through this mkey.
        relaxed_ordering_write / set_relaxed_ordering_write: bool = dw(0x00, 18, 18);
        /// Small fence on RDMA READ responses.
        small_fence_on_rdma_read_response / set_small_fence_on_rdma_read_response: bool = dw(0x00, 16, 16);
        /// The mkey may be modified by UMR WQEs.
        umr_en / set_umr_en: bool = dw(0x00, 15, 15);
        /// Remote atomic access.
        a / set_a: bool = dw(0x00, 14, 14);
        /// Remote write access.
        rw / set_rw: bool = dw(0x00, 13, 13);
        /// Remote read access.
        rr / set_rr: bool = dw(0x00, 12, 12);
        /// Local write access.
        lw / set_lw: bool = dw(0x00, 11, 11);
        /// Local read access.
        lr / set_lr: bool = dw(0x00, 10, 10);
        /// Access mode bits 1:0: 0 PA, 1 MTT, 2 KLM, 3 KSM.
        access_mode_1_0 / set_access_mode_1_0: u8 = dw(0x00, 9, 8);
        /// Memory-access translation mode.
        ma_translation_mode / set_ma_translation_mode: u8 = dw(0x00, 5, 4);
        /// QP the mkey is bound to (0xFFFFFF = unbound).
        qpn / set_qpn: u32 = dw(0x04, 31, 8);
        /// Low byte of the key (a variant software chooses): key = mkey_index << 8 | mkey_7_0.
        mkey_7_0 / set_mkey_7_0: u8 = dw(0x04, 7, 0);
        /// The region covers the whole 64-bit address space (len ignored).
        length64 / set_length64: bool = dw(0x0C, 31, 31);
        /// Byte stream format (signature) enabled.
        bsf_en / set_bsf_en: bool = dw(0x0C, 30, 30);
        /// UMR synchronization.
        sync_umr / set_sync_umr: bool = dw(0x0C, 29, 29);
        /// Expected signature error count.
        expected_sigerr_count / set_expected_sigerr_count: bool = dw(0x0C, 26, 26);
        /// Remote invalidation enabled.
        en_rinval / set_en_rinval: bool = dw(0x0C, 24, 24);
        /// Protection domain.
        pd / set_pd: u32 = dw(0x0C, 23, 0);
        /// Start virtual address (the address peers use).
        start_addr / set_start_addr: u64 = qw(0x10);
        /// Length in bytes.
        #[allow(clippy::len_without_is_empty)] // `len` is the PRM field name.
        len / set_len: u64 = qw(0x18);
        /// Byte stream format size in 16-byte units.
        bsf_octword_size / set_bsf_octword_size: u32 = dw(0x20, 31, 0);
        /// Translation table size in 16-byte units (MTT: ceil(npages / 2)).
        translations_octword_size / set_translations_octword_size: u32 = dw(0x34, 31, 0);
        /// Relaxed-ordering PCI reads through this mkey.
        relaxed_ordering_read / set_relaxed_ordering_read: bool = dw(0x38, 6, 6);
        /// log2 of the translation page size in bytes (absolute, e.g. 12).
        log_page_size / set_log_page_size: u8 = dw(0x38, 4, 0);
    }
}

/// Access mode: physical addresses (WQE addresses are bus addresses / IOVAs).
pub const MKC_ACCESS_MODE_PA: u8 = 0;
/// Access mode: memory translation table (one BE64 `page_addr | write << 1 | read` per page).
pub const MKC_ACCESS_MODE_MTT: u8 = 1;
/// Access mode: key-length-mkey list (indirect).
pub const MKC_ACCESS_MODE_KLM: u8 = 2;
/// Access mode: key-stride-mkey list.
pub const MKC_ACCESS_MODE_KSM: u8 = 3;

impl Mkc {
    /// The full access mode (`access_mode_4_2 << 2 | access_mode_1_0`).
    pub fn access_mode(&self) -> u8 {
        (self.access_mode_4_2() << 2) | self.access_mode_1_0()
    }

    /// Sets both access mode fields from a 5-bit mode.
    pub fn set_access_mode(&mut self, mode: u8) {
        self.set_access_mode_4_2((mode >> 2) & 0x7);
        self.set_access_mode_1_0(mode & 0x3);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    #[test]
    fn pa_mkey_fields() {
        let mut m = Mkc::default();
        m.set_access_mode(MKC_ACCESS_MODE_MTT);
        m.set_lr(true);
        m.set_lw(true);
        m.set_rr(true);
        m.set_rw(true);
        m.set_a(true);
        m.set_qpn(0xFF_FFFF);
        m.set_mkey_7_0(0x42);
        m.set_length64(true);
        m.set_pd(5);
        m.set_log_page_size(12);
        let b = m.as_bytes();
        assert_eq!(&b[0..4], &[0, 0, 0x7D, 0x00]);
        assert_eq!(&b[4..8], &[0xFF, 0xFF, 0xFF, 0x42]);
        assert_eq!(&b[0x0C..0x10], &[0x80, 0, 0, 5]);
        assert_eq!(b[0x3B], 12);
        assert_eq!(m.access_mode(), MKC_ACCESS_MODE_MTT);
    }
}
