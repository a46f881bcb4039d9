//! The flow entry context (`flow_context`) of SET_FLOW_TABLE_ENTRY and
//! QUERY_FLOW_TABLE_ENTRY, its destination list entries and the values their fields take.

prm_layout! {
    /// Flow entry context (`mlx5_ifc_flow_context_bits`, 0x2F0 bytes): the match value, the
    /// actions, and the destination list that follows at [`FlowContext::DESTINATION_OFFSET`].
    pub struct FlowContext("flow_context", 0x2F0) {
        /// The flow group the entry belongs to.
        group_id / set_group_id: u32 = dw(0x04, 31, 0);
        /// Flow tag reported in the receive CQE.
        flow_tag / set_flow_tag: u32 = dw(0x08, 23, 0);
        /// Actions ([`flow_action`]).
        action / set_action: u16 = dw(0x0C, 15, 0);
        /// Destinations in the extended (16-byte) format.
        extended_destination / set_extended_destination: bool = dw(0x10, 31, 31);
        /// Flow source hint.
        flow_source / set_flow_source: u8 = dw(0x10, 29, 28);
        /// Encrypt / decrypt type.
        encrypt_decrypt_type / set_encrypt_decrypt_type: u8 = dw(0x10, 27, 24);
        /// Number of destinations (FWD_DEST).
        destination_list_size / set_destination_list_size: u32 = dw(0x10, 23, 0);
        /// Number of flow counters (COUNT).
        flow_counter_list_size / set_flow_counter_list_size: u32 = dw(0x14, 23, 0);
        /// Packet reformat context.
        packet_reformat_id / set_packet_reformat_id: u32 = dw(0x18, 31, 0);
        /// Modify header context.
        modify_header_id / set_modify_header_id: u32 = dw(0x1C, 31, 0);
        /// Encrypt / decrypt object.
        encrypt_decrypt_obj_id / set_encrypt_decrypt_obj_id: u32 = dw(0x24, 31, 0);
        /// The values the entry matches (under its group's criteria).
        match_value / match_value_mut: super::FteMatchParam = nested(0x40);
    }
}

impl FlowContext {
    /// Byte offset of the destination list (the `destination` flexible array): one
    /// [`DestFormatStruct`] (8 bytes) per destination, then the flow counters.
    pub const DESTINATION_OFFSET: usize = 0x2F0;
}

prm_layout! {
    /// One destination of a flow entry (`mlx5_ifc_dest_format_struct_bits`, 8 bytes).
    pub struct DestFormatStruct("dest_format_struct", 0x08) {
        /// Destination type ([`destination_type`]).
        destination_type / set_destination_type: u8 = dw(0x00, 31, 24);
        /// The destination's number (a TIR, a flow table, a vport).
        destination_id / set_destination_id: u32 = dw(0x00, 23, 0);
        /// `destination_eswitch_owner_vhca_id` is valid.
        destination_eswitch_owner_vhca_id_valid / set_destination_eswitch_owner_vhca_id_valid: bool = dw(0x04, 31, 31);
        /// Apply the packet reformat for this destination.
        packet_reformat / set_packet_reformat: bool = dw(0x04, 30, 30);
        /// The eswitch owner of the destination.
        destination_eswitch_owner_vhca_id / set_destination_eswitch_owner_vhca_id: u16 = dw(0x04, 15, 0);
    }
}

/// Bits of `flow_context.action`.
pub mod flow_action {
    /// Allow (NIC TX / ACL tables).
    pub const ALLOW: u16 = 1 << 0;
    /// Drop the packet.
    pub const DROP: u16 = 1 << 1;
    /// Forward to the destination list.
    pub const FWD_DEST: u16 = 1 << 2;
    /// Count with the flow counter list.
    pub const COUNT: u16 = 1 << 3;
    /// Packet reformat (encapsulation).
    pub const PACKET_REFORMAT: u16 = 1 << 4;
    /// Decapsulate.
    pub const DECAP: u16 = 1 << 5;
    /// Modify header.
    pub const MOD_HDR: u16 = 1 << 6;
    /// Pop a VLAN tag.
    pub const VLAN_POP: u16 = 1 << 7;
    /// Push a VLAN tag.
    pub const VLAN_PUSH: u16 = 1 << 8;
}

/// `dest_format_struct.destination_type` values.
pub mod destination_type {
    /// A vport.
    pub const VPORT: u8 = 0x0;
    /// Another flow table (of a higher level).
    pub const FLOW_TABLE: u8 = 0x1;
    /// A TIR.
    pub const TIR: u8 = 0x2;
    /// A QP.
    pub const QP: u8 = 0x3;
}
