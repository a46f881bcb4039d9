//! Vport commands: QUERY/MODIFY_NIC_VPORT_CONTEXT and QUERY/MODIFY_VPORT_STATE.
//!
//! RoCE needs MODIFY_NIC_VPORT_CONTEXT with `field_select.roce_en` and
//! `nic_vport_context.roce_en` set; without it RoCE packets are not delivered to QPs.

use crate::ctx::NicVportContext;

prm_layout! {
    /// Which NIC vport context fields MODIFY_NIC_VPORT_CONTEXT changes
    /// (`mlx5_ifc_modify_nic_vport_field_select_bits`, 4 bytes).
    pub struct ModifyNicVportFieldSelect("modify_nic_vport_field_select", 0x4) {
        /// Modify the affiliation fields.
        affiliation / set_affiliation: bool = dw(0x00, 13, 13);
        /// Modify `disable_uc_local_lb`.
        disable_uc_local_lb / set_disable_uc_local_lb: bool = dw(0x00, 11, 11);
        /// Modify `disable_mc_local_lb`.
        disable_mc_local_lb / set_disable_mc_local_lb: bool = dw(0x00, 10, 10);
        /// Modify `node_guid`.
        node_guid / set_node_guid: bool = dw(0x00, 9, 9);
        /// Modify `port_guid`.
        port_guid / set_port_guid: bool = dw(0x00, 8, 8);
        /// Modify `min_wqe_inline_mode`.
        min_inline / set_min_inline: bool = dw(0x00, 7, 7);
        /// Modify `mtu`.
        mtu / set_mtu: bool = dw(0x00, 6, 6);
        /// Modify the change-event arming fields.
        change_event / set_change_event: bool = dw(0x00, 5, 5);
        /// Modify the promiscuous-mode fields.
        promisc / set_promisc: bool = dw(0x00, 4, 4);
        /// Modify `permanent_address`.
        permanent_address / set_permanent_address: bool = dw(0x00, 3, 3);
        /// Modify the address list.
        addresses_list / set_addresses_list: bool = dw(0x00, 2, 2);
        /// Modify `roce_en`.
        roce_en / set_roce_en: bool = dw(0x00, 1, 1);
    }
}

prm_layout! {
    /// QUERY_NIC_VPORT_CONTEXT input (`mlx5_ifc_query_nic_vport_context_in_bits`).
    pub struct QueryNicVportContextIn("query_nic_vport_context_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Address another vport named by `vport_number`.
        other_vport / set_other_vport: bool = dw(0x08, 31, 31);
        /// Vport the command is about (with `other_vport`).
        vport_number / set_vport_number: u16 = dw(0x08, 15, 0);
        /// Which address list to query: 0 unicast, 1 multicast, 2 VLAN.
        allowed_list_type / set_allowed_list_type: u8 = dw(0x0C, 26, 24);
    }
}

prm_layout! {
    /// QUERY_NIC_VPORT_CONTEXT output (`mlx5_ifc_query_nic_vport_context_out_bits`, 0x110 bytes):
    /// the context at 0x10 (permanent MAC at 0x104).
    pub struct QueryNicVportContextOut("query_nic_vport_context_out", 0x110) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// NIC vport context.
        nic_vport_context / nic_vport_context_mut: NicVportContext = nested(0x10);
    }
}

cmd_pair!(
    QueryNicVportContextIn,
    QueryNicVportContextOut,
    QueryNicVportContext
);

prm_layout! {
    /// MODIFY_NIC_VPORT_CONTEXT input (`mlx5_ifc_modify_nic_vport_context_in_bits`, 0x200 bytes):
    /// field select at DW@0x0C, the context at 0x100.
    pub struct ModifyNicVportContextIn("modify_nic_vport_context_in", 0x200) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Address another vport named by `vport_number`.
        other_vport / set_other_vport: bool = dw(0x08, 31, 31);
        /// Vport the command is about (with `other_vport`).
        vport_number / set_vport_number: u16 = dw(0x08, 15, 0);
        /// Which NIC vport context fields to modify.
        field_select / field_select_mut: ModifyNicVportFieldSelect = nested(0x0C);
        /// NIC vport context.
        nic_vport_context / nic_vport_context_mut: NicVportContext = nested(0x100);
    }
}

prm_layout! {
    /// MODIFY_NIC_VPORT_CONTEXT output (`mlx5_ifc_modify_nic_vport_context_out_bits`).
    pub struct ModifyNicVportContextOut("modify_nic_vport_context_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(
    ModifyNicVportContextIn,
    ModifyNicVportContextOut,
    ModifyNicVportContext
);

prm_layout! {
    /// QUERY_VPORT_STATE input (`mlx5_ifc_query_vport_state_in_bits`).
    pub struct QueryVportStateIn("query_vport_state_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Address another vport named by `vport_number`.
        other_vport / set_other_vport: bool = dw(0x08, 31, 31);
        /// Vport the command is about (with `other_vport`).
        vport_number / set_vport_number: u16 = dw(0x08, 15, 0);
    }
}

prm_layout! {
    /// QUERY_VPORT_STATE output (`mlx5_ifc_query_vport_state_out_bits`).
    pub struct QueryVportStateOut("query_vport_state_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// Administrative vport state: 0 down, 1 up, 2 follow the uplink.
        admin_state / set_admin_state: u8 = dw(0x0C, 7, 4);
        /// Operational vport state: 0 down, 1 up.
        state / set_state: u8 = dw(0x0C, 3, 0);
    }
}

cmd_pair!(QueryVportStateIn, QueryVportStateOut, QueryVportState);

prm_layout! {
    /// MODIFY_VPORT_STATE input (`mlx5_ifc_modify_vport_state_in_bits`).
    pub struct ModifyVportStateIn("modify_vport_state_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Address another vport named by `vport_number`.
        other_vport / set_other_vport: bool = dw(0x08, 31, 31);
        /// Vport the command is about (with `other_vport`).
        vport_number / set_vport_number: u16 = dw(0x08, 15, 0);
        /// Administrative vport state: 0 down, 1 up, 2 follow the uplink.
        admin_state / set_admin_state: u8 = dw(0x0C, 7, 4);
    }
}

prm_layout! {
    /// MODIFY_VPORT_STATE output (`mlx5_ifc_modify_vport_state_out_bits`).
    pub struct ModifyVportStateOut("modify_vport_state_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(ModifyVportStateIn, ModifyVportStateOut, ModifyVportState);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PrmLayout;
    use zerocopy::{FromZeros, IntoBytes};

    #[test]
    fn roce_enable_bits() {
        let mut i = ModifyNicVportContextIn::new_cmd();
        i.field_select_mut().set_roce_en(true);
        i.nic_vport_context_mut().set_roce_en(true);
        let b = i.as_bytes();
        assert_eq!(&b[0..2], &[0x07, 0x55]);
        assert_eq!(b[0x0F], 0x02);
        assert_eq!(b[0x103], 0x01);
        assert_eq!(ModifyNicVportContextIn::SIZE, 0x200);
    }

    #[test]
    fn permanent_mac_at_0x104() {
        let mut o = QueryNicVportContextOut::new_zeroed();
        o.nic_vport_context_mut()
            .permanent_address_mut()
            .set_mac([0x24, 0x8a, 0x07, 0xa8, 0xfa, 0x22]);
        let b = o.as_bytes();
        assert_eq!(&b[0x104..0x108], &[0, 0, 0x24, 0x8a]);
        assert_eq!(&b[0x108..0x10C], &[0x07, 0xa8, 0xfa, 0x22]);
        assert_eq!(
            o.nic_vport_context().permanent_address().mac(),
            [0x24, 0x8a, 0x07, 0xa8, 0xfa, 0x22]
        );
    }
}
