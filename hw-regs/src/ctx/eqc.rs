//! The EQ context (`eqc`), carried by CREATE_EQ and QUERY_EQ.

prm_layout! {
    /// EQ context (`mlx5_ifc_eqc_bits`, 0x40 bytes).
    pub struct Eqc("eqc", 0x40) {
        /// EQ status: 0 OK, 0xA write failure.
        status / set_status: u8 = dw(0x00, 31, 28);
        /// Event collapse: all EQEs go to the first entry.
        ec / set_ec: bool = dw(0x00, 18, 18);
        /// Overrun ignore: no error on EQ overrun.
        oi / set_oi: bool = dw(0x00, 17, 17);
        /// Arming state: 0x9 armed, 0xA fired.
        st / set_st: u8 = dw(0x00, 11, 8);
        /// Offset of the EQ buffer in its first page (use page-aligned buffers and 0).
        page_offset / set_page_offset: u8 = dw(0x08, 11, 6);
        /// log2 of the number of 64-byte EQEs.
        log_eq_size / set_log_eq_size: u8 = dw(0x0C, 28, 24);
        /// UAR page used to arm the EQ.
        uar_page / set_uar_page: u32 = dw(0x0C, 23, 0);
        /// MSI-X vector the EQ raises.
        intr / set_intr: u16 = dw(0x14, 11, 0);
        /// log2 of the PAS page size relative to 4 KiB.
        log_page_size / set_log_page_size: u8 = dw(0x18, 28, 24);
        /// Consumer counter (EQEs consumed).
        consumer_counter / set_consumer_counter: u32 = dw(0x28, 23, 0);
        /// Producer counter (EQEs written).
        producer_counter / set_producer_counter: u32 = dw(0x2C, 23, 0);
    }
}

/// `st` value: armed, the next EQE raises an interrupt.
pub const EQC_ST_ARMED: u8 = 0x9;
/// `st` value: fired, EQEs are written without interrupts until re-armed.
pub const EQC_ST_FIRED: u8 = 0xA;
