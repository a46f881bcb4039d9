//! General device capabilities (`cmd_hca_cap`, cap type 0).

prm_layout! {
    /// General device capabilities (`mlx5_ifc_cmd_hca_cap_bits`, 0x100 bytes), the block
    /// QUERY_HCA_CAP returns for cap type 0 and SET_HCA_CAP writes back. Values in the field docs
    /// are what a ConnectX-4 reported (max / current).
    pub struct CmdHcaCap("cmd_hca_cap", 0x100) {
        /// This function's vHCA ID.
        vhca_id / set_vhca_id: u16 = dw(0x04, 15, 0);
        /// log2 of the maximum number of WQEs in an SRQ.
        log_max_srq_sz / set_log_max_srq_sz: u8 = dw(0x10, 31, 24);
        /// log2 of the maximum number of WQEs in a QP work queue (CX-4: 15).
        log_max_qp_sz / set_log_max_qp_sz: u8 = dw(0x10, 23, 16);
        /// log2 of the maximum number of QPs (CX-4: 23 max / 14 current).
        log_max_qp / set_log_max_qp: u8 = dw(0x10, 4, 0);
        /// log2 of the maximum number of SRQs.
        log_max_srq / set_log_max_srq: u8 = dw(0x14, 20, 16);
        /// log2 of the maximum number of CQEs in a CQ (CX-4: 22).
        log_max_cq_sz / set_log_max_cq_sz: u8 = dw(0x18, 23, 16);
        /// log2 of the maximum number of CQs (CX-4: 24).
        log_max_cq / set_log_max_cq: u8 = dw(0x18, 4, 0);
        /// log2 of the maximum number of EQEs in an EQ.
        log_max_eq_sz / set_log_max_eq_sz: u8 = dw(0x1C, 31, 24);
        /// Relaxed-ordering PCI writes supported for mkeys.
        relaxed_ordering_write / set_relaxed_ordering_write: bool = dw(0x1C, 23, 23);
        /// Relaxed-ordering PCI reads supported for mkeys.
        relaxed_ordering_read / set_relaxed_ordering_read: bool = dw(0x1C, 22, 22);
        /// log2 of the maximum number of memory keys.
        log_max_mkey / set_log_max_mkey: u8 = dw(0x1C, 21, 16);
        /// QUERY_SPECIAL_CONTEXTS reports a dump-fill mkey.
        dump_fill_mkey / set_dump_fill_mkey: bool = dw(0x1C, 7, 7);
        /// TEARDOWN_HCA supports the fast-teardown profile.
        fast_teardown / set_fast_teardown: bool = dw(0x1C, 4, 4);
        /// log2 of the maximum number of EQs.
        log_max_eq / set_log_max_eq: u8 = dw(0x1C, 3, 0);
        /// Maximum depth of indirect (KLM) mkeys.
        max_indirection / set_max_indirection: u8 = dw(0x20, 31, 24);
        /// log2 of the largest memory region or window in bytes.
        log_max_mrw_sz / set_log_max_mrw_sz: u8 = dw(0x20, 22, 16);
        /// TEARDOWN_HCA supports the force profile.
        force_teardown / set_force_teardown: bool = dw(0x20, 15, 15);
        /// QUERY_SPECIAL_CONTEXTS reports a null mkey.
        null_mkey / set_null_mkey: bool = dw(0x20, 6, 6);
        /// log2 of the maximum number of KLM entries of an indirect mkey.
        log_max_klm_list_size / set_log_max_klm_list_size: u8 = dw(0x20, 5, 0);
        /// log2 of outstanding RDMA READ/atomic requests per DC initiator.
        log_max_ra_req_dc / set_log_max_ra_req_dc: u8 = dw(0x24, 21, 16);
        /// log2 of outstanding RDMA READ/atomic responses per DC target.
        log_max_ra_res_dc / set_log_max_ra_res_dc: u8 = dw(0x24, 5, 0);
        /// MANAGE_PAGES take can return every page at once.
        release_all_pages / set_release_all_pages: bool = dw(0x28, 26, 26);
        /// log2 of outstanding RDMA READ/atomic requests per QP as requester (CX-4: 4).
        log_max_ra_req_qp / set_log_max_ra_req_qp: u8 = dw(0x28, 21, 16);
        /// log2 of outstanding RDMA READ/atomic requests per QP as responder (CX-4: 4).
        log_max_ra_res_qp / set_log_max_ra_res_qp: u8 = dw(0x28, 5, 0);
        /// Scatter end padding supported.
        end_pad / set_end_pad: bool = dw(0x2C, 31, 31);
        /// Congestion-control parameters may be queried.
        cc_query_allowed / set_cc_query_allowed: bool = dw(0x2C, 30, 30);
        /// Congestion-control parameters may be modified.
        cc_modify_allowed / set_cc_modify_allowed: bool = dw(0x2C, 29, 29);
        /// Scatter start padding supported.
        start_pad / set_start_pad: bool = dw(0x2C, 28, 28);
        /// Host cache line is 128 bytes (set by the driver).
        cache_line_128byte / set_cache_line_128byte: bool = dw(0x2C, 27, 27);
        /// Number of GID table entries per port.
        gid_table_size / set_gid_table_size: u16 = dw(0x2C, 15, 0);
        /// Out-of-sequence counter supported.
        out_of_seq_cnt / set_out_of_seq_cnt: bool = dw(0x30, 31, 31);
        /// Vport counters supported.
        vport_counters / set_vport_counters: bool = dw(0x30, 30, 30);
        /// Retransmission Q counters supported.
        retransmission_q_counters / set_retransmission_q_counters: bool = dw(0x30, 29, 29);
        /// Maximum number of QP counter sets.
        max_qp_cnt / set_max_qp_cnt: u16 = dw(0x30, 25, 16);
        /// Number of P_Key table entries per port.
        pkey_table_size / set_pkey_table_size: u16 = dw(0x30, 15, 0);
        /// This function manages the vport group (the PF).
        vport_group_manager / set_vport_group_manager: bool = dw(0x34, 31, 31);
        /// NIC flow tables supported.
        nic_flow_table / set_nic_flow_table: bool = dw(0x34, 25, 25);
        /// This function manages the e-switch.
        eswitch_manager / set_eswitch_manager: bool = dw(0x34, 24, 24);
        /// Local CA ACK delay (IB encoding: 4.096 us * 2^n).
        local_ca_ack_delay / set_local_ca_ack_delay: u8 = dw(0x34, 20, 16);
        /// Port module events supported.
        port_module_event / set_port_module_event: bool = dw(0x34, 15, 15);
        /// INIT_HCA does not bring the link up (the driver must).
        disable_link_up / set_disable_link_up: bool = dw(0x34, 11, 11);
        /// Port beacon LED control supported.
        beacon_led / set_beacon_led: bool = dw(0x34, 10, 10);
        /// Port type: 0 InfiniBand, 1 Ethernet.
        port_type / set_port_type: u8 = dw(0x34, 9, 8);
        /// Number of physical ports.
        num_ports / set_num_ports: u8 = dw(0x34, 7, 0);
        /// log2 of the largest message in bytes (CX-4: 30).
        log_max_msg / set_log_max_msg: u8 = dw(0x38, 28, 24);
        /// Maximum number of traffic classes.
        max_tc / set_max_tc: u8 = dw(0x38, 19, 16);
        /// Temperature warning events supported.
        temp_warn_event / set_temp_warn_event: bool = dw(0x38, 15, 15);
        /// DCBX supported.
        dcbx / set_dcbx: bool = dw(0x38, 14, 14);
        /// General notification events supported.
        general_notification_event / set_general_notification_event: bool = dw(0x38, 13, 13);
        /// Bit mask of supported static rates.
        stat_rate_support / set_stat_rate_support: u16 = dw(0x3C, 31, 16);
        /// CQE format version (1: user_index in CQEs, QPs use user_index 0xFFFFFF).
        cqe_version / set_cqe_version: u8 = dw(0x3C, 3, 0);
        /// Compact address vectors in UD WQEs supported.
        compact_address_vector / set_compact_address_vector: bool = dw(0x40, 31, 31);
        /// Striding (multi-packet) RQ supported.
        striding_rq / set_striding_rq: bool = dw(0x40, 30, 30);
        /// IPoIB enhanced offloads supported.
        ipoib_enhanced_offloads / set_ipoib_enhanced_offloads: bool = dw(0x40, 28, 28);
        /// IPoIB basic offloads supported.
        ipoib_basic_offloads / set_ipoib_basic_offloads: bool = dw(0x40, 27, 27);
        /// UMR fence requirement.
        umr_fence / set_umr_fence: u8 = dw(0x40, 21, 20);
        /// Drain on signature error supported.
        drain_sigerr / set_drain_sigerr: bool = dw(0x40, 16, 16);
        /// Command interface checksum: 0 unsupported, 1 optional, 3 required (CX-4: 3 max, 0
        /// current).
        cmdif_checksum / set_cmdif_checksum: u8 = dw(0x40, 15, 14);
        /// Signature error CQE supported.
        sigerr_cqe / set_sigerr_cqe: bool = dw(0x40, 13, 13);
        /// Work queue signatures supported.
        wq_signature / set_wq_signature: bool = dw(0x40, 11, 11);
        /// Scatter data to CQE supported.
        sctr_data_cqe / set_sctr_data_cqe: bool = dw(0x40, 10, 10);
        /// Signature handover supported.
        sho / set_sho: bool = dw(0x40, 8, 8);
        /// TLP processing hints supported.
        tph / set_tph: bool = dw(0x40, 7, 7);
        /// Remote flush supported.
        rf / set_rf: bool = dw(0x40, 6, 6);
        /// Dynamically connected transport (DCT) supported.
        dct / set_dct: bool = dw(0x40, 5, 5);
        /// QoS supported.
        qos / set_qos: bool = dw(0x40, 4, 4);
        /// Ethernet stateless offloads supported.
        eth_net_offloads / set_eth_net_offloads: bool = dw(0x40, 3, 3);
        /// RoCE supported.
        roce / set_roce: bool = dw(0x40, 2, 2);
        /// Atomic operations supported (see the atomic cap block).
        atomic / set_atomic: bool = dw(0x40, 1, 1);
        /// CQ overrun ignore supported.
        cq_oi / set_cq_oi: bool = dw(0x44, 31, 31);
        /// CQ resize (MODIFY_CQ op_mod 1) supported.
        cq_resize / set_cq_resize: bool = dw(0x44, 30, 30);
        /// CQ moderation (cq_period / cq_max_count) supported.
        cq_moderation / set_cq_moderation: bool = dw(0x44, 29, 29);
        /// Remapping a CQ to another EQ supported.
        cq_eq_remap / set_cq_eq_remap: bool = dw(0x44, 25, 25);
        /// On-demand paging supported (see the ODP cap block).
        pg / set_pg: bool = dw(0x44, 24, 24);
        /// Blocking multicast loopback supported.
        block_lb_mc / set_block_lb_mc: bool = dw(0x44, 23, 23);
        /// Solicited CQEs break moderation supported.
        scqe_break_moderation / set_scqe_break_moderation: bool = dw(0x44, 21, 21);
        /// CQ period may start from the CQE (cq_period_mode 1).
        cq_period_start_from_cqe / set_cq_period_start_from_cqe: bool = dw(0x44, 20, 20);
        /// Cross-channel (core-direct) supported.
        cd / set_cd: bool = dw(0x44, 19, 19);
        /// Automatic path migration supported.
        apm / set_apm: bool = dw(0x44, 17, 17);
        /// Vector calculation offload supported.
        vector_calc / set_vector_calc: bool = dw(0x44, 16, 16);
        /// UMR with a reserved-lkey pointer supported.
        umr_ptr_rlky / set_umr_ptr_rlky: bool = dw(0x44, 15, 15);
        /// Infinite memory-region windows supported.
        imaicl / set_imaicl: bool = dw(0x44, 14, 14);
        /// Q_Key violation counter supported.
        qkv / set_qkv: bool = dw(0x44, 9, 9);
        /// P_Key violation counter supported.
        pkv / set_pkv: bool = dw(0x44, 8, 8);
        /// Setting the DETH source QPN of UD sends supported.
        set_deth_sqpn / set_set_deth_sqpn: bool = dw(0x44, 7, 7);
        /// XRC transport supported.
        xrc / set_xrc: bool = dw(0x44, 3, 3);
        /// UD transport supported.
        ud / set_ud: bool = dw(0x44, 2, 2);
        /// UC transport supported.
        uc / set_uc: bool = dw(0x44, 1, 1);
        /// RC transport supported.
        rc / set_rc: bool = dw(0x44, 0, 0);
        /// UARs of 4 KiB are supported (set in current caps to use them).
        uar_4k / set_uar_4k: bool = dw(0x48, 31, 31);
        /// log2 of the UAR area size in pages.
        uar_sz / set_uar_sz: u8 = dw(0x48, 21, 16);
        /// Umem with UID 0 supported.
        umem_uid_0 / set_umem_uid_0: bool = dw(0x48, 13, 13);
        /// log2 of the system page size the device assumes (CX-4: 12).
        log_pg_sz / set_log_pg_sz: u8 = dw(0x48, 7, 0);
        /// BlueFlame supported.
        bf / set_bf: bool = dw(0x4C, 31, 31);
        /// SET_DRIVER_VERSION supported.
        driver_version / set_driver_version: bool = dw(0x4C, 30, 30);
        /// Padding of short Ethernet packets supported.
        pad_tx_eth_packet / set_pad_tx_eth_packet: bool = dw(0x4C, 29, 29);
        /// log2 of the BlueFlame register size in bytes (two halves; CX-4: 9 = 512 B).
        log_bf_reg_size / set_log_bf_reg_size: u8 = dw(0x4C, 20, 16);
        /// LAG TX port affinity supported.
        lag_tx_port_affinity / set_lag_tx_port_affinity: bool = dw(0x4C, 7, 7);
        /// This function is the LAG master.
        lag_master / set_lag_master: bool = dw(0x4C, 4, 4);
        /// Number of LAG ports.
        num_lag_ports / set_num_lag_ports: u8 = dw(0x4C, 3, 0);
        /// Number of diagnostic counters.
        num_of_diagnostic_counters / set_num_of_diagnostic_counters: u16 = dw(0x50, 31, 16);
        /// Largest send WQE in bytes (CX-4: 1024).
        max_wqe_sz_sq / set_max_wqe_sz_sq: u16 = dw(0x50, 15, 0);
        /// Largest receive WQE in bytes (CX-4: 512).
        max_wqe_sz_rq / set_max_wqe_sz_rq: u16 = dw(0x54, 15, 0);
        /// Largest DC send WQE in bytes.
        max_wqe_sz_sq_dc / set_max_wqe_sz_sq_dc: u16 = dw(0x58, 15, 0);
        /// Maximum number of QPs attached to one multicast group.
        max_qp_mcg / set_max_qp_mcg: u32 = dw(0x5C, 24, 0);
        /// log2 of the maximum number of multicast groups.
        log_max_mcg / set_log_max_mcg: u8 = dw(0x60, 7, 0);
        /// log2 of the maximum number of transport domains.
        log_max_transport_domain / set_log_max_transport_domain: u8 = dw(0x64, 28, 24);
        /// log2 of the maximum number of protection domains (CX-4: 24).
        log_max_pd / set_log_max_pd: u8 = dw(0x64, 20, 16);
        /// log2 of the maximum number of XRC domains.
        log_max_xrcd / set_log_max_xrcd: u8 = dw(0x64, 4, 0);
        /// log2 of the maximum number of RQ objects.
        log_max_rq / set_log_max_rq: u8 = dw(0x6C, 28, 24);
        /// log2 of the maximum number of SQ objects.
        log_max_sq / set_log_max_sq: u8 = dw(0x6C, 20, 16);
        /// log2 of the maximum number of TIRs.
        log_max_tir / set_log_max_tir: u8 = dw(0x6C, 12, 8);
        /// log2 of the maximum number of TISes.
        log_max_tis / set_log_max_tis: u8 = dw(0x6C, 4, 0);
        /// log2 of the maximum number of RMPs.
        log_max_rmp / set_log_max_rmp: u8 = dw(0x70, 28, 24);
        /// log2 of the maximum number of RQ tables.
        log_max_rqt / set_log_max_rqt: u8 = dw(0x70, 20, 16);
        /// log2 of the largest RQ table.
        log_max_rqt_size / set_log_max_rqt_size: u8 = dw(0x70, 12, 8);
        /// log2 of the maximum number of TISes per SQ.
        log_max_tis_per_sq / set_log_max_tis_per_sq: u8 = dw(0x70, 4, 0);
        /// RoCE may be enabled or disabled (roce_en in the NIC vport context).
        roce_rw_supported / set_roce_rw_supported: bool = dw(0x74, 30, 30);
        /// log2 of the maximum number of WQEs in a WQ object.
        log_max_wq_sz / set_log_max_wq_sz: u8 = dw(0x78, 4, 0);
        /// NIC vport change events supported.
        nic_vport_change_event / set_nic_vport_change_event: bool = dw(0x7C, 31, 31);
        /// Disabling unicast local loopback supported.
        disable_local_lb_uc / set_disable_local_lb_uc: bool = dw(0x7C, 30, 30);
        /// Disabling multicast local loopback supported.
        disable_local_lb_mc / set_disable_local_lb_mc: bool = dw(0x7C, 29, 29);
        /// log2 of the largest VLAN list.
        log_max_vlan_list / set_log_max_vlan_list: u8 = dw(0x7C, 20, 16);
        /// log2 of the largest multicast MAC list.
        log_max_current_mc_list / set_log_max_current_mc_list: u8 = dw(0x7C, 12, 8);
        /// log2 of the largest unicast MAC list.
        log_max_current_uc_list / set_log_max_current_uc_list: u8 = dw(0x7C, 4, 0);
        /// Bit mask of supported general object types.
        general_obj_types / set_general_obj_types: u64 = qw(0x80);
        /// Supported SQ timestamp formats.
        sq_ts_format / set_sq_ts_format: u8 = dw(0x88, 31, 30);
        /// Supported RQ timestamp formats.
        rq_ts_format / set_rq_ts_format: u8 = dw(0x88, 29, 28);
        /// Hint for the first QPN to allocate.
        create_qp_start_hint / set_create_qp_start_hint: u32 = dw(0x88, 23, 0);
        /// log2 of the maximum number of user contexts.
        log_max_uctx / set_log_max_uctx: u8 = dw(0x8C, 28, 24);
        /// log2 of the maximum number of umems.
        log_max_umem / set_log_max_umem: u8 = dw(0x8C, 20, 16);
        /// Maximum number of EQs (when nonzero, overrides log_max_eq).
        max_num_eqs / set_max_num_eqs: u16 = dw(0x8C, 15, 0);
        /// log2 of the L2 table size.
        log_max_l2_table / set_log_max_l2_table: u8 = dw(0x90, 28, 24);
        /// log2 of the UAR page size relative to 4 KiB (0 = 4 KiB).
        log_uar_page_sz / set_log_uar_page_sz: u16 = dw(0x90, 15, 0);
        /// Internal timer frequency in MHz (CX-4: 275).
        device_frequency_mhz / set_device_frequency_mhz: u32 = dw(0x98, 31, 0);
        /// Internal timer frequency in kHz (the init segment's internal_timer rate).
        device_frequency_khz / set_device_frequency_khz: u32 = dw(0x9C, 31, 0);
        /// Number of UARs per system page.
        num_of_uars_per_page / set_num_of_uars_per_page: u32 = dw(0xA4, 31, 0);
        /// Native port number of this function.
        native_port_num / set_native_port_num: u8 = dw(0xC0, 23, 16);
        /// Number of vHCA ports.
        num_vhca_ports / set_num_vhca_ports: u8 = dw(0xC0, 15, 8);
        /// INIT_HCA accepts a software owner ID.
        sw_owner_id / set_sw_owner_id: bool = dw(0xC0, 1, 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PrmLayout;
    use zerocopy::IntoBytes;

    #[test]
    fn section_4_offsets() {
        let mut c = CmdHcaCap::default();
        c.set_log_max_qp_sz(15);
        c.set_log_max_qp(23);
        c.set_port_type(1);
        c.set_num_ports(1);
        c.set_cmdif_checksum(3);
        c.set_uar_4k(true);
        c.set_log_pg_sz(12);
        c.set_device_frequency_mhz(275);
        let b = c.as_bytes();
        assert_eq!(&b[0x10..0x14], &[0, 15, 0, 23]);
        assert_eq!(&b[0x34..0x38], &[0, 0, 1, 1]);
        assert_eq!(b[0x42], 0xC0);
        assert_eq!(b[0x48], 0x80);
        assert_eq!(b[0x4B], 12);
        assert_eq!(&b[0x98..0x9C], &275u32.to_be_bytes());
        assert_eq!(CmdHcaCap::SIZE, 0x100);
    }

    #[test]
    fn declares_every_section_4_field() {
        let names = [
            "log_max_qp_sz",
            "log_max_qp",
            "log_max_cq_sz",
            "log_max_cq",
            "log_max_eq_sz",
            "log_max_mkey",
            "log_max_eq",
            "log_max_ra_req_qp",
            "log_max_ra_res_qp",
            "gid_table_size",
            "pkey_table_size",
            "disable_link_up",
            "port_type",
            "num_ports",
            "log_max_msg",
            "cqe_version",
            "cmdif_checksum",
            "wq_signature",
            "roce",
            "atomic",
            "ud",
            "uc",
            "rc",
            "uar_4k",
            "log_pg_sz",
            "bf",
            "log_bf_reg_size",
            "max_wqe_sz_sq",
            "max_wqe_sz_rq",
            "log_max_pd",
            "roce_rw_supported",
            "log_uar_page_sz",
            "device_frequency_mhz",
            "device_frequency_khz",
            "log_max_srq",
            "log_max_srq_sz",
        ];
        for n in names {
            assert!(CmdHcaCap::FIELDS.iter().any(|f| f.name == n), "{n}");
        }
    }
}
