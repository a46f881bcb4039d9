//! The transport interface receive context (`tirc`), carried by CREATE_TIR and QUERY_TIR.

prm_layout! {
    /// RX hash field selection (`mlx5_ifc_rx_hash_field_select_bits`, 4 bytes).
    pub struct RxHashFieldSelect("rx_hash_field_select", 0x04) {
        /// L3 protocol hashed: 0 IPv4, 1 IPv6.
        l3_prot_type / set_l3_prot_type: bool = dw(0x00, 31, 31);
        /// L4 protocol hashed: 0 TCP, 1 UDP.
        l4_prot_type / set_l4_prot_type: bool = dw(0x00, 30, 30);
        /// Bitmask of the header fields hashed.
        selected_fields / set_selected_fields: u32 = dw(0x00, 29, 0);
    }
}

prm_layout! {
    /// TIR context (`mlx5_ifc_tirc_bits`, 0xF0 bytes): where steered packets are delivered,
    /// one RQ (`disp_type` direct) or an RQ table spread by hash (indirect).
    pub struct Tirc("tirc", 0xF0) {
        /// Dispatch type ([`TirDispType`]).
        disp_type / set_disp_type: u8 = dw(0x04, 31, 28);
        /// TLS offload.
        tls_en / set_tls_en: bool = dw(0x04, 27, 27);
        /// LRO timeout in microseconds.
        lro_timeout_period_usecs / set_lro_timeout_period_usecs: u16 = dw(0x10, 27, 12);
        /// Packet merge (LRO / SHAMPO) enable mask (0 none).
        packet_merge_mask / set_packet_merge_mask: u8 = dw(0x10, 11, 8);
        /// LRO maximum IP payload, in 256-byte units.
        lro_max_ip_payload_size / set_lro_max_ip_payload_size: u8 = dw(0x10, 7, 0);
        /// The RQ of a direct TIR.
        inline_rqn / set_inline_rqn: u32 = dw(0x1C, 23, 0);
        /// Symmetric RX hash.
        rx_hash_symmetric / set_rx_hash_symmetric: bool = dw(0x20, 31, 31);
        /// Tunneled offloads (inner header checksums) enable.
        tunneled_offload_en / set_tunneled_offload_en: bool = dw(0x20, 29, 29);
        /// The RQ table of an indirect TIR.
        indirect_table / set_indirect_table: u32 = dw(0x20, 23, 0);
        /// RX hash function (indirect TIRs): 0 none, 1 XOR8, 2 Toeplitz.
        rx_hash_fn / set_rx_hash_fn: u8 = dw(0x24, 31, 28);
        /// Self loopback block: bit 0 unicast, bit 1 multicast.
        self_lb_block / set_self_lb_block: u8 = dw(0x24, 25, 24);
        /// Transport domain (ALLOC_TRANSPORT_DOMAIN).
        transport_domain / set_transport_domain: u32 = dw(0x24, 23, 0);
        /// Toeplitz hash key.
        rx_hash_toeplitz_key / set_rx_hash_toeplitz_key: [u8; 40] = bytes(0x28, 40);
        /// Outer header fields hashed.
        rx_hash_field_selector_outer / rx_hash_field_selector_outer_mut: RxHashFieldSelect = nested(0x50);
        /// Inner header fields hashed.
        rx_hash_field_selector_inner / rx_hash_field_selector_inner_mut: RxHashFieldSelect = nested(0x54);
    }
}

ctx_value_enum! {
    /// TIR dispatch types (`tirc.disp_type`).
    ///
    /// ```
    /// use rnic_hw_regs::ctx::{TirDispType, Tirc};
    ///
    /// let mut t = Tirc::default();
    /// t.set_disp_type(TirDispType::Direct.into());
    /// assert_eq!(TirDispType::try_from(t.disp_type()), Ok(TirDispType::Direct));
    /// assert!(TirDispType::try_from(2).is_err());
    /// ```
    pub enum TirDispType {
        /// Every packet to one RQ (`inline_rqn`).
        Direct = 0,
        /// Packets spread over an RQ table by hash.
        Indirect = 1,
    }
}
