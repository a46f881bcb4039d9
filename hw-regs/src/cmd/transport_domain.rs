//! Transport domains: ALLOC_TRANSPORT_DOMAIN and DEALLOC_TRANSPORT_DOMAIN (the domain TISs and
//! TIRs belong to).

prm_layout! {
    /// ALLOC_TRANSPORT_DOMAIN input (`mlx5_ifc_alloc_transport_domain_in_bits`).
    pub struct AllocTransportDomainIn("alloc_transport_domain_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
    }
}

prm_layout! {
    /// ALLOC_TRANSPORT_DOMAIN output (`mlx5_ifc_alloc_transport_domain_out_bits`).
    pub struct AllocTransportDomainOut("alloc_transport_domain_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// The new transport domain.
        transport_domain / set_transport_domain: u32 = dw(0x08, 23, 0);
    }
}

cmd_pair!(
    AllocTransportDomainIn,
    AllocTransportDomainOut,
    AllocTransportDomain
);

prm_layout! {
    /// DEALLOC_TRANSPORT_DOMAIN input (`mlx5_ifc_dealloc_transport_domain_in_bits`).
    pub struct DeallocTransportDomainIn("dealloc_transport_domain_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// The transport domain.
        transport_domain / set_transport_domain: u32 = dw(0x08, 23, 0);
    }
}

prm_layout! {
    /// DEALLOC_TRANSPORT_DOMAIN output (`mlx5_ifc_dealloc_transport_domain_out_bits`).
    pub struct DeallocTransportDomainOut("dealloc_transport_domain_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(
    DeallocTransportDomainIn,
    DeallocTransportDomainOut,
    DeallocTransportDomain
);
