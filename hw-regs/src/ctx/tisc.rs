//! The transport interface send context (`tisc`), carried by CREATE_TIS and QUERY_TIS.

prm_layout! {
    /// TIS context (`mlx5_ifc_tisc_bits`, 0xA0 bytes): what an SQ's packets leave through.
    pub struct Tisc("tisc", 0xA0) {
        /// Strict LAG port affinity.
        strict_lag_tx_port_affinity / set_strict_lag_tx_port_affinity: bool = dw(0x00, 31, 31);
        /// TLS offload.
        tls_en / set_tls_en: bool = dw(0x00, 30, 30);
        /// LAG port affinity (0 any).
        lag_tx_port_affinity / set_lag_tx_port_affinity: u8 = dw(0x00, 27, 24);
        /// Priority (PCP) of the packets.
        prio / set_prio: u8 = dw(0x00, 19, 16);
        /// Transport domain (ALLOC_TRANSPORT_DOMAIN).
        transport_domain / set_transport_domain: u32 = dw(0x24, 23, 0);
        /// Underlay QPN (IPoIB).
        underlay_qpn / set_underlay_qpn: u32 = dw(0x28, 23, 0);
        /// Protection domain (TLS).
        pd / set_pd: u32 = dw(0x2C, 23, 0);
    }
}
