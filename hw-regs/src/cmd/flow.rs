//! Flow steering commands: flow tables, flow groups, flow table entries and the root table of
//! a table type (CREATE / DESTROY / QUERY_FLOW_TABLE, CREATE / DESTROY_FLOW_GROUP,
//! SET / QUERY / DELETE_FLOW_TABLE_ENTRY, SET_FLOW_TABLE_ROOT).

use crate::ctx::{FlowContext, FlowTableContext, FteMatchParam};

/// Flow table types (`table_type` of every flow steering command).
pub mod table_type {
    /// NIC receive: where the port's received packets are steered to TIRs.
    pub const NIC_RX: u8 = 0x0;
    /// NIC transmit.
    pub const NIC_TX: u8 = 0x1;
    /// Eswitch egress ACL.
    pub const ESW_EGRESS_ACL: u8 = 0x2;
    /// Eswitch ingress ACL.
    pub const ESW_INGRESS_ACL: u8 = 0x3;
    /// Eswitch forwarding database.
    pub const FDB: u8 = 0x4;
}

prm_layout! {
    /// CREATE_FLOW_TABLE input (`mlx5_ifc_create_flow_table_in_bits`).
    pub struct CreateFlowTableIn("create_flow_table_in", 0x40) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Another vport's table (this device: 0, its own).
        other_vport / set_other_vport: bool = dw(0x08, 31, 31);
        /// The vport (with `other_vport`).
        vport_number / set_vport_number: u16 = dw(0x08, 15, 0);
        /// Flow table type ([`table_type`](crate::cmd::table_type)).
        table_type / set_table_type: u8 = dw(0x10, 31, 24);
        /// Flow table context.
        flow_table_context / flow_table_context_mut: FlowTableContext = nested(0x18);
    }
}

prm_layout! {
    /// CREATE_FLOW_TABLE output (`mlx5_ifc_create_flow_table_out_bits`).
    pub struct CreateFlowTableOut("create_flow_table_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// ICM address of the table, bits 63:40 (software-owned steering).
        icm_address_63_40 / set_icm_address_63_40: u32 = dw(0x00, 23, 0);
        /// ICM address, bits 39:32.
        icm_address_39_32 / set_icm_address_39_32: u8 = dw(0x08, 31, 24);
        /// The new flow table's number.
        table_id / set_table_id: u32 = dw(0x08, 23, 0);
        /// ICM address, bits 31:0.
        icm_address_31_0 / set_icm_address_31_0: u32 = dw(0x0C, 31, 0);
    }
}

cmd_pair!(CreateFlowTableIn, CreateFlowTableOut, CreateFlowTable);

prm_layout! {
    /// DESTROY_FLOW_TABLE input (`mlx5_ifc_destroy_flow_table_in_bits`).
    pub struct DestroyFlowTableIn("destroy_flow_table_in", 0x40) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Another vport's table (this device: 0, its own).
        other_vport / set_other_vport: bool = dw(0x08, 31, 31);
        /// The vport (with `other_vport`).
        vport_number / set_vport_number: u16 = dw(0x08, 15, 0);
        /// Flow table type ([`table_type`](crate::cmd::table_type)).
        table_type / set_table_type: u8 = dw(0x10, 31, 24);
        /// Flow table number.
        table_id / set_table_id: u32 = dw(0x14, 23, 0);
    }
}

prm_layout! {
    /// DESTROY_FLOW_TABLE output (`mlx5_ifc_destroy_flow_table_out_bits`).
    pub struct DestroyFlowTableOut("destroy_flow_table_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(DestroyFlowTableIn, DestroyFlowTableOut, DestroyFlowTable);

prm_layout! {
    /// QUERY_FLOW_TABLE input (`mlx5_ifc_query_flow_table_in_bits`).
    pub struct QueryFlowTableIn("query_flow_table_in", 0x40) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Flow table type ([`table_type`](crate::cmd::table_type)).
        table_type / set_table_type: u8 = dw(0x10, 31, 24);
        /// Flow table number.
        table_id / set_table_id: u32 = dw(0x14, 23, 0);
    }
}

prm_layout! {
    /// QUERY_FLOW_TABLE output (`mlx5_ifc_query_flow_table_out_bits`).
    pub struct QueryFlowTableOut("query_flow_table_out", 0x40) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// Flow table context.
        flow_table_context / flow_table_context_mut: FlowTableContext = nested(0x18);
    }
}

cmd_pair!(QueryFlowTableIn, QueryFlowTableOut, QueryFlowTable);

prm_layout! {
    /// CREATE_FLOW_GROUP input (`mlx5_ifc_create_flow_group_in_bits`): a range of flow indices
    /// of a table whose entries all match on the same criteria.
    pub struct CreateFlowGroupIn("create_flow_group_in", 0x400) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Another vport's table (this device: 0, its own).
        other_vport / set_other_vport: bool = dw(0x08, 31, 31);
        /// The vport (with `other_vport`).
        vport_number / set_vport_number: u16 = dw(0x08, 15, 0);
        /// Flow table type ([`table_type`](crate::cmd::table_type)).
        table_type / set_table_type: u8 = dw(0x10, 31, 24);
        /// Group type (0: criteria in this input).
        group_type / set_group_type: u8 = dw(0x10, 19, 16);
        /// Flow table number.
        table_id / set_table_id: u32 = dw(0x14, 23, 0);
        /// `source_eswitch_owner_vhca_id` is valid.
        source_eswitch_owner_vhca_id_valid / set_source_eswitch_owner_vhca_id_valid: bool = dw(0x18, 31, 31);
        /// First flow index of the group.
        start_flow_index / set_start_flow_index: u32 = dw(0x1C, 31, 0);
        /// Last flow index of the group (inclusive).
        end_flow_index / set_end_flow_index: u32 = dw(0x24, 31, 0);
        /// Match definer (group_type 1).
        match_definer_id / set_match_definer_id: u16 = dw(0x28, 15, 0);
        /// Which sets of the criteria are used ([`match_criteria`](crate::ctx::match_criteria)).
        match_criteria_enable / set_match_criteria_enable: u8 = dw(0x3C, 7, 0);
        /// The mask of the header fields the group's entries compare.
        match_criteria / match_criteria_mut: FteMatchParam = nested(0x40);
    }
}

prm_layout! {
    /// CREATE_FLOW_GROUP output (`mlx5_ifc_create_flow_group_out_bits`).
    pub struct CreateFlowGroupOut("create_flow_group_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// The new group's number.
        group_id / set_group_id: u32 = dw(0x08, 23, 0);
    }
}

cmd_pair!(CreateFlowGroupIn, CreateFlowGroupOut, CreateFlowGroup);

prm_layout! {
    /// DESTROY_FLOW_GROUP input (`mlx5_ifc_destroy_flow_group_in_bits`).
    pub struct DestroyFlowGroupIn("destroy_flow_group_in", 0x40) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Another vport's table (this device: 0, its own).
        other_vport / set_other_vport: bool = dw(0x08, 31, 31);
        /// The vport (with `other_vport`).
        vport_number / set_vport_number: u16 = dw(0x08, 15, 0);
        /// Flow table type ([`table_type`](crate::cmd::table_type)).
        table_type / set_table_type: u8 = dw(0x10, 31, 24);
        /// Flow table number.
        table_id / set_table_id: u32 = dw(0x14, 23, 0);
        /// Flow group number.
        group_id / set_group_id: u32 = dw(0x18, 31, 0);
    }
}

prm_layout! {
    /// DESTROY_FLOW_GROUP output (`mlx5_ifc_destroy_flow_group_out_bits`).
    pub struct DestroyFlowGroupOut("destroy_flow_group_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(DestroyFlowGroupIn, DestroyFlowGroupOut, DestroyFlowGroup);

prm_layout! {
    /// SET_FLOW_TABLE_ENTRY input (`mlx5_ifc_set_fte_in_bits`): the entry at `flow_index`,
    /// its destination list from `DESTINATION_OFFSET`.
    pub struct SetFteIn("set_fte_in", 0x330) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Another vport's table (this device: 0, its own).
        other_vport / set_other_vport: bool = dw(0x08, 31, 31);
        /// The vport (with `other_vport`).
        vport_number / set_vport_number: u16 = dw(0x08, 15, 0);
        /// Flow table type ([`table_type`](crate::cmd::table_type)).
        table_type / set_table_type: u8 = dw(0x10, 31, 24);
        /// Flow table number.
        table_id / set_table_id: u32 = dw(0x14, 23, 0);
        /// Ignore the level rule for forward-to-table destinations.
        ignore_flow_level / set_ignore_flow_level: bool = dw(0x18, 31, 31);
        /// op_mod 1: which parts of an existing entry change.
        modify_enable_mask / set_modify_enable_mask: u8 = dw(0x18, 7, 0);
        /// Flow index (inside one of the table's groups).
        flow_index / set_flow_index: u32 = dw(0x20, 31, 0);
        /// The entry.
        flow_context / flow_context_mut: FlowContext = nested(0x40);
    }
}

impl SetFteIn {
    /// Byte offset of the destination list: the flow context's own
    /// ([`FlowContext::DESTINATION_OFFSET`]) after the context's offset 0x40.
    pub const DESTINATION_OFFSET: usize = 0x40 + FlowContext::DESTINATION_OFFSET;
}

prm_layout! {
    /// SET_FLOW_TABLE_ENTRY output (`mlx5_ifc_set_fte_out_bits`).
    pub struct SetFteOut("set_fte_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(SetFteIn, SetFteOut, SetFlowTableEntry);

prm_layout! {
    /// QUERY_FLOW_TABLE_ENTRY input (`mlx5_ifc_query_fte_in_bits`).
    pub struct QueryFteIn("query_fte_in", 0x40) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Flow table type ([`table_type`](crate::cmd::table_type)).
        table_type / set_table_type: u8 = dw(0x10, 31, 24);
        /// Flow table number.
        table_id / set_table_id: u32 = dw(0x14, 23, 0);
        /// Flow index.
        flow_index / set_flow_index: u32 = dw(0x20, 31, 0);
    }
}

prm_layout! {
    /// QUERY_FLOW_TABLE_ENTRY output (`mlx5_ifc_query_fte_out_bits`): the entry, its
    /// destinations from `DESTINATION_OFFSET`.
    pub struct QueryFteOut("query_fte_out", 0x330) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// The entry.
        flow_context / flow_context_mut: FlowContext = nested(0x40);
    }
}

impl QueryFteOut {
    /// Byte offset of the destination list in the output.
    pub const DESTINATION_OFFSET: usize = 0x40 + FlowContext::DESTINATION_OFFSET;
}

cmd_pair!(QueryFteIn, QueryFteOut, QueryFlowTableEntry);

prm_layout! {
    /// DELETE_FLOW_TABLE_ENTRY input (`mlx5_ifc_delete_fte_in_bits`).
    pub struct DeleteFteIn("delete_fte_in", 0x40) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Another vport's table (this device: 0, its own).
        other_vport / set_other_vport: bool = dw(0x08, 31, 31);
        /// The vport (with `other_vport`).
        vport_number / set_vport_number: u16 = dw(0x08, 15, 0);
        /// Flow table type ([`table_type`](crate::cmd::table_type)).
        table_type / set_table_type: u8 = dw(0x10, 31, 24);
        /// Flow table number.
        table_id / set_table_id: u32 = dw(0x14, 23, 0);
        /// Flow index.
        flow_index / set_flow_index: u32 = dw(0x20, 31, 0);
    }
}

prm_layout! {
    /// DELETE_FLOW_TABLE_ENTRY output (`mlx5_ifc_delete_fte_out_bits`).
    pub struct DeleteFteOut("delete_fte_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(DeleteFteIn, DeleteFteOut, DeleteFlowTableEntry);

prm_layout! {
    /// SET_FLOW_TABLE_ROOT input (`mlx5_ifc_set_flow_table_root_in_bits`): the table a table
    /// type's packets start at.
    pub struct SetFlowTableRootIn("set_flow_table_root_in", 0x40) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Another vport's table (this device: 0, its own).
        other_vport / set_other_vport: bool = dw(0x08, 31, 31);
        /// The vport (with `other_vport`).
        vport_number / set_vport_number: u16 = dw(0x08, 15, 0);
        /// Flow table type ([`table_type`](crate::cmd::table_type)).
        table_type / set_table_type: u8 = dw(0x10, 31, 24);
        /// The table belongs to another vport.
        table_of_other_vport / set_table_of_other_vport: bool = dw(0x10, 16, 16);
        /// That vport.
        table_vport_number / set_table_vport_number: u16 = dw(0x10, 15, 0);
        /// Flow table number.
        table_id / set_table_id: u32 = dw(0x14, 23, 0);
        /// Underlay QPN (IPoIB).
        underlay_qpn / set_underlay_qpn: u32 = dw(0x18, 23, 0);
        /// `table_eswitch_owner_vhca_id` is valid.
        table_eswitch_owner_vhca_id_valid / set_table_eswitch_owner_vhca_id_valid: bool = dw(0x1C, 31, 31);
        /// The table's eswitch owner.
        table_eswitch_owner_vhca_id / set_table_eswitch_owner_vhca_id: u16 = dw(0x1C, 15, 0);
    }
}

prm_layout! {
    /// SET_FLOW_TABLE_ROOT output (`mlx5_ifc_set_flow_table_root_out_bits`).
    pub struct SetFlowTableRootOut("set_flow_table_root_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(SetFlowTableRootIn, SetFlowTableRootOut, SetFlowTableRoot);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctx::{DestFormatStruct, destination_type, flow_action, match_criteria};
    use zerocopy::IntoBytes;

    #[test]
    fn create_flow_group_places_the_outer_dmac_criteria() {
        let mut g = CreateFlowGroupIn::new_cmd();
        g.set_table_id(0x12);
        g.set_start_flow_index(4);
        g.set_end_flow_index(7);
        g.set_match_criteria_enable(match_criteria::OUTER_HEADERS);
        g.match_criteria_mut()
            .outer_headers_mut()
            .set_dmac([0xFF; 6]);
        g.match_criteria_mut()
            .outer_headers_mut()
            .set_ethertype(0xFFFF);
        let b = g.as_bytes();
        assert_eq!(&b[0..2], &[0x09, 0x33]);
        assert_eq!(b[0x17], 0x12);
        assert_eq!(&b[0x1C..0x20], &4u32.to_be_bytes());
        assert_eq!(&b[0x24..0x28], &7u32.to_be_bytes());
        assert_eq!(b[0x3F], 1);
        assert_eq!(&b[0x40 + 0x06..0x40 + 0x08], &[0xFF, 0xFF]);
        assert_eq!(&b[0x40 + 0x08..0x40 + 0x0E], &[0xFF; 6]);
        assert_eq!(b.len(), 0x400);
    }

    #[test]
    fn set_fte_destination_list_follows_the_context() {
        let mut e = SetFteIn::new_cmd();
        e.set_flow_index(5);
        let fc = e.flow_context_mut();
        fc.set_group_id(3);
        fc.set_action(flow_action::FWD_DEST);
        fc.set_destination_list_size(1);
        fc.match_value_mut()
            .outer_headers_mut()
            .set_dst_ipv4(0x0A00_0002);
        let b = e.as_bytes();
        assert_eq!(&b[0x20..0x24], &5u32.to_be_bytes());
        assert_eq!(&b[0x44..0x48], &3u32.to_be_bytes());
        assert_eq!(&b[0x4E..0x50], &4u16.to_be_bytes());
        assert_eq!(&b[0x53..0x54], &[1]);
        // match_value at 0x40 + 0x40, dst_ipv4 at 0x30 + 0x0C in the outer set.
        assert_eq!(&b[0x80 + 0x3C..0x80 + 0x40], &[10, 0, 0, 2]);
        assert_eq!(SetFteIn::DESTINATION_OFFSET, 0x330);
        let mut d = DestFormatStruct::default();
        d.set_destination_type(destination_type::TIR);
        d.set_destination_id(0x42);
        assert_eq!(d.as_bytes(), &[2, 0, 0, 0x42, 0, 0, 0, 0]);
    }

    #[test]
    fn root_and_table_commands_carry_type_and_id() {
        let mut r = SetFlowTableRootIn::new_cmd();
        r.set_table_type(table_type::NIC_RX);
        r.set_table_id(9);
        assert_eq!(&r.as_bytes()[0..2], &[0x09, 0x2F]);
        assert_eq!(r.as_bytes()[0x17], 9);
        let mut t = CreateFlowTableIn::new_cmd();
        t.flow_table_context_mut().set_log_size(4);
        t.flow_table_context_mut().set_level(1);
        assert_eq!(t.as_bytes()[0x18 + 3], 4);
        assert_eq!(t.as_bytes()[0x18 + 1], 1);
    }
}
