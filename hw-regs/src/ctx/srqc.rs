//! The SRQ context (`srqc`), carried by CREATE_SRQ and QUERY_SRQ.

prm_layout! {
    /// SRQ context (`mlx5_ifc_srqc_bits`, 0x40 bytes).
    pub struct Srqc("srqc", 0x40) {
        /// SRQ state: 0 good, 1 error.
        state / set_state: u8 = dw(0x00, 31, 28);
        /// log2 of the number of WQEs.
        log_srq_size / set_log_srq_size: u8 = dw(0x00, 27, 24);
        /// WQE signatures enabled.
        wq_signature / set_wq_signature: bool = dw(0x04, 31, 31);
        /// Contiguous SRQ (no PAS list).
        cont_srq / set_cont_srq: bool = dw(0x04, 30, 30);
        /// Reserved lkey enable.
        rlky / set_rlky: bool = dw(0x04, 28, 28);
        /// log2 of the WQE size in bytes, minus 4.
        log_rq_stride / set_log_rq_stride: u8 = dw(0x04, 26, 24);
        /// XRC domain (XRC SRQs).
        xrcd / set_xrcd: u32 = dw(0x04, 23, 0);
        /// Offset of the buffer in its first page.
        page_offset / set_page_offset: u8 = dw(0x08, 31, 26);
        /// CQ for XRC SRQs.
        cqn / set_cqn: u32 = dw(0x08, 23, 0);
        /// log2 of the PAS page size relative to 4 KiB.
        log_page_size / set_log_page_size: u8 = dw(0x10, 29, 24);
        /// Protection domain.
        pd / set_pd: u32 = dw(0x18, 23, 0);
        /// Limit watermark: the SRQ limit event fires when fewer WQEs remain.
        lwm / set_lwm: u16 = dw(0x1C, 31, 16);
        /// WQE counter.
        wqe_cnt / set_wqe_cnt: u16 = dw(0x1C, 15, 0);
        /// Doorbell record bus address.
        dbr_addr / set_dbr_addr: u64 = qw(0x28);
    }
}
