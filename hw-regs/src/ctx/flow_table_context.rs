//! The flow table context (`flow_table_context`), carried by CREATE_FLOW_TABLE and
//! QUERY_FLOW_TABLE.

prm_layout! {
    /// Flow table context (`mlx5_ifc_flow_table_context_bits`, 0x28 bytes).
    pub struct FlowTableContext("flow_table_context", 0x28) {
        /// Packet reformat enable.
        reformat_en / set_reformat_en: bool = dw(0x00, 31, 31);
        /// Decapsulation enable.
        decap_en / set_decap_en: bool = dw(0x00, 30, 30);
        /// Software-owned table (steering ICM written by the driver).
        sw_owner / set_sw_owner: bool = dw(0x00, 29, 29);
        /// Termination table.
        termination_table / set_termination_table: bool = dw(0x00, 28, 28);
        /// What a packet that matches no entry does ([`table_miss_action`]).
        table_miss_action / set_table_miss_action: u8 = dw(0x00, 27, 24);
        /// Level: a table may only forward to tables of a higher level.
        level / set_level: u8 = dw(0x00, 23, 16);
        /// log2 of the number of flow entries.
        log_size / set_log_size: u8 = dw(0x00, 7, 0);
        /// The table a miss goes to (`table_miss_action` 1).
        table_miss_id / set_table_miss_id: u32 = dw(0x04, 23, 0);
        /// LAG master's next table.
        lag_master_next_table_id / set_lag_master_next_table_id: u32 = dw(0x08, 23, 0);
        /// Software-owned root ICM address, port 1.
        sw_owner_icm_root_1 / set_sw_owner_icm_root_1: u64 = qw(0x18);
        /// Software-owned root ICM address, port 0.
        sw_owner_icm_root_0 / set_sw_owner_icm_root_0: u64 = qw(0x20);
    }
}

/// `flow_table_context.table_miss_action` values.
pub mod table_miss_action {
    /// The default miss behaviour of the table type (NIC RX: drop).
    pub const DEFAULT: u8 = 0;
    /// Go to the table `table_miss_id`.
    pub const GOTO_TABLE: u8 = 1;
}
