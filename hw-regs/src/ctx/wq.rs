//! The work queue context (`wq`) inside the RQ and SQ contexts, and the values its fields take.

prm_layout! {
    /// Work queue context (`mlx5_ifc_wq_bits`, 0xC0 bytes), nested in [`Rqc`](super::Rqc) and
    /// [`Sqc`](super::Sqc); its PAS array follows at [`Wq::PAS_OFFSET`].
    pub struct Wq("wq", 0xC0) {
        /// Queue type ([`WqType`]).
        wq_type / set_wq_type: u8 = dw(0x00, 31, 28);
        /// WQE signatures enabled.
        wq_signature / set_wq_signature: bool = dw(0x00, 27, 27);
        /// Padding at the end of scattered packets (0 none).
        end_padding_mode / set_end_padding_mode: u8 = dw(0x00, 26, 25);
        /// Cross-channel slave.
        cd_slave / set_cd_slave: bool = dw(0x00, 24, 24);
        /// Offset of the buffer in its first page, in 64-byte units.
        page_offset / set_page_offset: u8 = dw(0x04, 20, 16);
        /// Limit watermark (RQs).
        lwm / set_lwm: u16 = dw(0x04, 15, 0);
        /// Protection domain.
        pd / set_pd: u32 = dw(0x08, 23, 0);
        /// UAR page of the queue's doorbells (SQs).
        uar_page / set_uar_page: u32 = dw(0x0C, 23, 0);
        /// Doorbell record bus address.
        dbr_addr / set_dbr_addr: u64 = qw(0x10);
        /// Hardware counter (QUERY_RQ / QUERY_SQ).
        hw_counter / set_hw_counter: u32 = dw(0x18, 31, 0);
        /// Software counter (QUERY_RQ / QUERY_SQ).
        sw_counter / set_sw_counter: u32 = dw(0x1C, 31, 0);
        /// log2 of the WQE stride in bytes.
        log_wq_stride / set_log_wq_stride: u8 = dw(0x20, 19, 16);
        /// log2 of the PAS page size relative to 4 KiB.
        log_wq_pg_sz / set_log_wq_pg_sz: u8 = dw(0x20, 12, 8);
        /// log2 of the number of WQEs.
        log_wq_sz / set_log_wq_sz: u8 = dw(0x20, 4, 0);
    }
}

impl Wq {
    /// Byte offset of the `pas` flexible array inside the `wq` (one BE64 page address each).
    pub const PAS_OFFSET: usize = 0xC0;
}

ctx_value_enum! {
    /// Work queue types (`wq.wq_type`).
    ///
    /// ```
    /// use rnic_hw_regs::ctx::{Wq, WqType};
    ///
    /// let mut wq = Wq::default();
    /// wq.set_wq_type(WqType::Cyclic.into());
    /// assert_eq!(WqType::try_from(wq.wq_type()), Ok(WqType::Cyclic));
    /// assert!(WqType::try_from(7).is_err());
    /// ```
    pub enum WqType {
        /// Linked list (each RQ WQE starts with a next segment).
        LinkedList = 0,
        /// Cyclic buffer (the SQ and legacy RQ layout).
        Cyclic = 1,
        /// Linked list, striding RQ.
        LinkedListStriding = 2,
        /// Cyclic, striding RQ (multi-packet WQEs).
        CyclicStriding = 3,
    }
}

ctx_value_enum! {
    /// State of an RQ or SQ object (`rqc.state`, `sqc.state`, and the current state in
    /// MODIFY_RQ / MODIFY_SQ).
    ///
    /// ```
    /// use rnic_hw_regs::ctx::WqState;
    ///
    /// assert_eq!(WqState::try_from(1), Ok(WqState::Rdy));
    /// assert_eq!(u8::from(WqState::Err), 3);
    /// assert!(WqState::try_from(2).is_err());
    /// ```
    pub enum WqState {
        /// Reset: created, not processing.
        Rst = 0,
        /// Ready: processing WQEs.
        Rdy = 1,
        /// Error: WQEs are flushed.
        Err = 3,
    }
}
