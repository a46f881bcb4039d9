//! The CQ context (`cqc`), carried by CREATE_CQ, QUERY_CQ and MODIFY_CQ.

prm_layout! {
    /// CQ context (`mlx5_ifc_cqc_bits`, 0x40 bytes).
    pub struct Cqc("cqc", 0x40) {
        /// CQ status: 0 OK, 0x9 overflow, 0xA write failure.
        status / set_status: u8 = dw(0x00, 31, 28);
        /// The doorbell record is in a registered umem.
        dbr_umem_valid / set_dbr_umem_valid: bool = dw(0x00, 25, 25);
        /// The CQ belongs to an APU thread.
        apu_cq / set_apu_cq: bool = dw(0x00, 24, 24);
        /// CQE size: 0 = 64 bytes, 1 = 128 bytes.
        cqe_sz / set_cqe_sz: u8 = dw(0x00, 23, 21);
        /// Collapsed CQ: every CQE is written to entry 0.
        cc / set_cc: bool = dw(0x00, 20, 20);
        /// Solicited CQEs break moderation.
        scqe_break_moderation_en / set_scqe_break_moderation_en: bool = dw(0x00, 18, 18);
        /// Overrun ignore: no error on CQ overrun.
        oi / set_oi: bool = dw(0x00, 17, 17);
        /// Moderation period mode: 0 from the EQE, 1 from the CQE.
        cq_period_mode / set_cq_period_mode: u8 = dw(0x00, 16, 15);
        /// CQE compression enabled.
        cqe_comp_en / set_cqe_comp_en: bool = dw(0x00, 14, 14);
        /// Mini-CQE format for compressed CQEs.
        mini_cqe_res_format / set_mini_cqe_res_format: u8 = dw(0x00, 13, 12);
        /// Arming state: 0x6 solicited armed, 0x9 armed, 0xA fired.
        st / set_st: u8 = dw(0x00, 11, 8);
        /// CQE compression layout.
        cqe_compression_layout / set_cqe_compression_layout: u8 = dw(0x00, 1, 0);
        /// Offset of the CQ buffer in its first page (use page-aligned buffers and 0).
        page_offset / set_page_offset: u8 = dw(0x08, 11, 6);
        /// log2 of the number of CQEs.
        log_cq_size / set_log_cq_size: u8 = dw(0x0C, 28, 24);
        /// UAR page used to arm the CQ.
        uar_page / set_uar_page: u32 = dw(0x0C, 23, 0);
        /// Moderation period in microseconds.
        cq_period / set_cq_period: u16 = dw(0x10, 27, 16);
        /// Moderation count: CQEs before an event.
        cq_max_count / set_cq_max_count: u16 = dw(0x10, 15, 0);
        /// EQ that receives this CQ's completion events (c_eqn).
        c_eqn_or_apu_element / set_c_eqn_or_apu_element: u32 = dw(0x14, 31, 0);
        /// log2 of the PAS page size relative to 4 KiB.
        log_page_size / set_log_page_size: u8 = dw(0x18, 28, 24);
        /// Index of the last CQE that raised an event.
        last_notified_index / set_last_notified_index: u32 = dw(0x20, 23, 0);
        /// Index of the last solicited CQE.
        last_solicit_index / set_last_solicit_index: u32 = dw(0x24, 23, 0);
        /// Consumer counter (CQEs consumed).
        consumer_counter / set_consumer_counter: u32 = dw(0x28, 23, 0);
        /// Producer counter (CQEs written).
        producer_counter / set_producer_counter: u32 = dw(0x2C, 23, 0);
        /// Doorbell record bus address (8 bytes: set_ci, arm).
        dbr_addr / set_dbr_addr: u64 = qw(0x38);
    }
}

impl Cqc {
    /// The EQ that receives this CQ's completion events (`c_eqn_or_apu_element`).
    pub fn c_eqn(&self) -> u32 {
        self.c_eqn_or_apu_element()
    }

    /// Sets the completion EQ (`c_eqn_or_apu_element`).
    pub fn set_c_eqn(&mut self, eqn: u32) {
        self.set_c_eqn_or_apu_element(eqn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    #[test]
    fn fields_land_where_the_prm_says() {
        let mut c = Cqc::default();
        c.set_cqe_sz(1);
        c.set_cc(true);
        c.set_st(0xA);
        c.set_log_cq_size(8);
        c.set_uar_page(0x11);
        c.set_c_eqn(7);
        c.set_dbr_addr(0xAABB_CCDD_0000_1000);
        let b = c.as_bytes();
        assert_eq!(&b[0..4], &[0x00, 0x30, 0x0A, 0x00]);
        assert_eq!(&b[0x0C..0x10], &[0x08, 0, 0, 0x11]);
        assert_eq!(&b[0x14..0x18], &[0, 0, 0, 7]);
        assert_eq!(&b[0x38..0x40], &0xAABB_CCDD_0000_1000u64.to_be_bytes());
    }
}
