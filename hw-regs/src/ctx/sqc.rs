//! The send queue context (`sqc`), carried by CREATE_SQ, MODIFY_SQ and QUERY_SQ.

prm_layout! {
    /// SQ context (`mlx5_ifc_sqc_bits`, 0xF0 bytes): an Ethernet send queue bound to a TIS.
    pub struct Sqc("sqc", 0xF0) {
        /// Reserved lkey enable.
        rlky / set_rlky: bool = dw(0x00, 31, 31);
        /// Cross-channel master.
        cd_master / set_cd_master: bool = dw(0x00, 30, 30);
        /// Fast register enable.
        fre / set_fre: bool = dw(0x00, 29, 29);
        /// Flush WQEs in error.
        flush_in_error_en / set_flush_in_error_en: bool = dw(0x00, 28, 28);
        /// Multi-packet send WQEs allowed.
        allow_multi_pkt_send_wqe / set_allow_multi_pkt_send_wqe: bool = dw(0x00, 27, 27);
        /// The least the Ethernet segment must inline ([`inline_mode`](super::inline_mode)).
        min_wqe_inline_mode / set_min_wqe_inline_mode: u8 = dw(0x00, 26, 24);
        /// SQ state ([`WqState`](super::WqState)).
        state / set_state: u8 = dw(0x00, 23, 20);
        /// UMR WQEs allowed.
        reg_umr / set_reg_umr: bool = dw(0x00, 19, 19);
        /// Software parser offsets allowed.
        allow_swp / set_allow_swp: bool = dw(0x00, 18, 18);
        /// Hairpin SQ.
        hairpin / set_hairpin: bool = dw(0x00, 17, 17);
        /// Timestamp format of the CQEs.
        ts_format / set_ts_format: u8 = dw(0x00, 5, 4);
        /// User index reported in CQEs.
        user_index / set_user_index: u32 = dw(0x04, 23, 0);
        /// Completion queue.
        cqn / set_cqn: u32 = dw(0x08, 23, 0);
        /// Hairpin peer RQ.
        hairpin_peer_rq / set_hairpin_peer_rq: u32 = dw(0x0C, 23, 0);
        /// Hairpin peer function.
        hairpin_peer_vhca / set_hairpin_peer_vhca: u16 = dw(0x10, 15, 0);
        /// CQ for timestamp CQEs.
        ts_cqe_to_dest_cqn / set_ts_cqe_to_dest_cqn: u32 = dw(0x18, 23, 0);
        /// Packet pacing rate limit index (0 unlimited).
        packet_pacing_rate_limit_index / set_packet_pacing_rate_limit_index: u16 = dw(0x1C, 15, 0);
        /// Number of TISs in the list (1).
        tis_lst_sz / set_tis_lst_sz: u16 = dw(0x20, 31, 16);
        /// QoS queue group.
        qos_queue_group_id / set_qos_queue_group_id: u16 = dw(0x20, 15, 0);
        /// The TIS the SQ transmits through.
        tis_num_0 / set_tis_num_0: u32 = dw(0x2C, 23, 0);
        /// The work queue.
        wq / wq_mut: super::Wq = nested(0x30);
    }
}

/// `sqc.min_wqe_inline_mode` (and the NIC vport context's): how much of each packet the
/// Ethernet segment of a send WQE must carry inline.
pub mod inline_mode {
    /// No minimum.
    pub const NONE: u8 = 0;
    /// The L2 header (Ethernet, and a VLAN tag when present).
    pub const L2: u8 = 1;
    /// Up to the IP header.
    pub const IP: u8 = 2;
    /// Up to the TCP / UDP header.
    pub const TCP_UDP: u8 = 3;
}
