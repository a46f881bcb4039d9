//! On-demand paging capabilities (`odp_cap`, cap type 2).

prm_layout! {
    /// Which operations may take an ODP page fault on one transport
    /// (`mlx5_ifc_odp_per_transport_service_cap_bits`, 4 bytes).
    pub struct OdpPerTransportServiceCap("odp_per_transport_service_cap", 0x4) {
        /// Sends may fault.
        send / set_send: bool = dw(0x00, 31, 31);
        /// Receives may fault.
        receive / set_receive: bool = dw(0x00, 30, 30);
        /// RDMA WRITE may fault.
        write / set_write: bool = dw(0x00, 29, 29);
        /// RDMA READ may fault.
        read / set_read: bool = dw(0x00, 28, 28);
        /// Atomics may fault.
        atomic / set_atomic: bool = dw(0x00, 27, 27);
        /// SRQ receives may fault.
        srq_receive / set_srq_receive: bool = dw(0x00, 26, 26);
    }
}

prm_layout! {
    /// On-demand paging capabilities (`mlx5_ifc_odp_cap_bits`, 0x100 bytes): QUERY_HCA_CAP op_mod
    /// 0x4 (max) / 0x5 (current).
    pub struct OdpCap("odp_cap", 0x100) {
        /// Signature offload with ODP supported.
        sig / set_sig: bool = dw(0x08, 31, 31);
        /// ODP support of RC QPs.
        rc_odp_caps / rc_odp_caps_mut: OdpPerTransportServiceCap = nested(0x10);
        /// ODP support of UC QPs.
        uc_odp_caps / uc_odp_caps_mut: OdpPerTransportServiceCap = nested(0x14);
        /// ODP support of UD QPs.
        ud_odp_caps / ud_odp_caps_mut: OdpPerTransportServiceCap = nested(0x18);
        /// ODP support of XRC QPs.
        xrc_odp_caps / xrc_odp_caps_mut: OdpPerTransportServiceCap = nested(0x1C);
        /// ODP support of DC.
        dc_odp_caps / dc_odp_caps_mut: OdpPerTransportServiceCap = nested(0x20);
    }
}
