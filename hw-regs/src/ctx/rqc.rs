//! The receive queue context (`rqc`), carried by CREATE_RQ, MODIFY_RQ and QUERY_RQ.

prm_layout! {
    /// RQ context (`mlx5_ifc_rqc_bits`, 0xF0 bytes): an Ethernet receive queue that TIRs
    /// deliver to.
    pub struct Rqc("rqc", 0xF0) {
        /// Reserved lkey enable.
        rlky / set_rlky: bool = dw(0x00, 31, 31);
        /// Delay drop: hold packets when no WQE is posted instead of dropping them.
        delay_drop_en / set_delay_drop_en: bool = dw(0x00, 30, 30);
        /// Scatter the FCS with the packet.
        scatter_fcs / set_scatter_fcs: bool = dw(0x00, 29, 29);
        /// VLAN strip disable.
        vsd / set_vsd: bool = dw(0x00, 28, 28);
        /// Memory RQ type: 0 the RQ's own buffer (inline), 1 a shared RMP.
        mem_rq_type / set_mem_rq_type: u8 = dw(0x00, 27, 24);
        /// RQ state ([`WqState`](super::WqState)).
        state / set_state: u8 = dw(0x00, 23, 20);
        /// Flush WQEs in error.
        flush_in_error_en / set_flush_in_error_en: bool = dw(0x00, 18, 18);
        /// Hairpin RQ (fed by a peer SQ, no host memory).
        hairpin / set_hairpin: bool = dw(0x00, 17, 17);
        /// Timestamp format of the CQEs.
        ts_format / set_ts_format: u8 = dw(0x00, 5, 4);
        /// User index reported in CQEs (cqe_version 1).
        user_index / set_user_index: u32 = dw(0x04, 23, 0);
        /// Completion queue.
        cqn / set_cqn: u32 = dw(0x08, 23, 0);
        /// Queue counter set.
        counter_set_id / set_counter_set_id: u8 = dw(0x0C, 31, 24);
        /// RMP number (mem_rq_type 1).
        rmpn / set_rmpn: u32 = dw(0x10, 23, 0);
        /// The work queue.
        wq / wq_mut: super::Wq = nested(0x30);
    }
}

/// `rqc.mem_rq_type`: the RQ's own buffer, described by its `wq`.
pub const MEM_RQ_TYPE_INLINE: u8 = 0;
