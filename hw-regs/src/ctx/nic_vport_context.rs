//! The NIC vport context (`nic_vport_context`), carried by QUERY_NIC_VPORT_CONTEXT and
//! MODIFY_NIC_VPORT_CONTEXT, and the MAC address layout it embeds.

prm_layout! {
    /// A MAC address (`mlx5_ifc_mac_address_layout_bits`, 8 bytes): two reserved bytes, then the
    /// 48-bit address.
    pub struct MacAddressLayout("mac_address_layout", 0x8) {
        /// MAC address, bits 47:32.
        mac_addr_47_32 / set_mac_addr_47_32: u16 = dw(0x00, 15, 0);
        /// MAC address, bits 31:0.
        mac_addr_31_0 / set_mac_addr_31_0: u32 = dw(0x04, 31, 0);
    }
}

prm_layout! {
    /// NIC vport context (`mlx5_ifc_nic_vport_context_bits`, 0x100 bytes); an address list of
    /// `allowed_list_size` entries follows at `CURRENT_UC_MAC_ADDRESS_OFFSET`.
    pub struct NicVportContext("nic_vport_context", 0x100) {
        /// Minimum inline header mode required in Ethernet send WQEs.
        min_wqe_inline_mode / set_min_wqe_inline_mode: u8 = dw(0x00, 26, 24);
        /// Multicast local loopback disabled.
        disable_mc_local_lb / set_disable_mc_local_lb: bool = dw(0x00, 2, 2);
        /// Unicast local loopback disabled.
        disable_uc_local_lb / set_disable_uc_local_lb: bool = dw(0x00, 1, 1);
        /// RoCE enabled: without it RoCE packets are not delivered to QPs.
        roce_en / set_roce_en: bool = dw(0x00, 0, 0);
        /// Arm the NIC vport change event.
        arm_change_event / set_arm_change_event: bool = dw(0x04, 31, 31);
        /// Raise the change event when the MTU changes.
        event_on_mtu / set_event_on_mtu: bool = dw(0x04, 4, 4);
        /// Raise the change event when promiscuous mode changes.
        event_on_promisc_change / set_event_on_promisc_change: bool = dw(0x04, 3, 3);
        /// Raise the change event when the VLAN list changes.
        event_on_vlan_change / set_event_on_vlan_change: bool = dw(0x04, 2, 2);
        /// Raise the change event when the multicast list changes.
        event_on_mc_address_change / set_event_on_mc_address_change: bool = dw(0x04, 1, 1);
        /// Raise the change event when the unicast list changes.
        event_on_uc_address_change / set_event_on_uc_address_change: bool = dw(0x04, 0, 0);
        /// vHCA ID type for affiliation.
        vhca_id_type / set_vhca_id_type: bool = dw(0x08, 31, 31);
        /// Affiliation criteria.
        affiliation_criteria / set_affiliation_criteria: u8 = dw(0x08, 19, 16);
        /// Affiliated vHCA ID.
        affiliated_vhca_id / set_affiliated_vhca_id: u16 = dw(0x08, 15, 0);
        /// Vport MTU in bytes (Ethernet, including the L2 header).
        mtu / set_mtu: u16 = dw(0x24, 15, 0);
        /// System image GUID.
        system_image_guid / set_system_image_guid: u64 = qw(0x28);
        /// Port GUID.
        port_guid / set_port_guid: u64 = qw(0x30);
        /// Node GUID.
        node_guid / set_node_guid: u64 = qw(0x38);
        /// Q_Key violation counter.
        qkey_violation_counter / set_qkey_violation_counter: u16 = dw(0x68, 31, 16);
        /// Unicast promiscuous mode.
        promisc_uc / set_promisc_uc: bool = dw(0xF0, 31, 31);
        /// Multicast promiscuous mode.
        promisc_mc / set_promisc_mc: bool = dw(0xF0, 30, 30);
        /// Promiscuous mode.
        promisc_all / set_promisc_all: bool = dw(0xF0, 29, 29);
        /// Type of the address list that follows: 0 unicast, 1 multicast, 2 VLAN.
        allowed_list_type / set_allowed_list_type: u8 = dw(0xF0, 26, 24);
        /// Number of entries in the address list.
        allowed_list_size / set_allowed_list_size: u16 = dw(0xF0, 11, 0);
        /// Permanent MAC address of the vport.
        permanent_address / permanent_address_mut: MacAddressLayout = nested(0xF4);
    }
}

impl NicVportContext {
    /// Byte offset of the `current_uc_mac_address` flexible array that follows the fixed part.
    pub const CURRENT_UC_MAC_ADDRESS_OFFSET: usize = 0x100;
}

impl MacAddressLayout {
    /// The MAC address from its two halves.
    pub fn mac(&self) -> [u8; 6] {
        let hi = self.mac_addr_47_32().to_be_bytes();
        let lo = self.mac_addr_31_0().to_be_bytes();
        [hi[0], hi[1], lo[0], lo[1], lo[2], lo[3]]
    }

    /// Sets both halves of the MAC address.
    pub fn set_mac(&mut self, mac: [u8; 6]) {
        self.set_mac_addr_47_32(u16::from_be_bytes([mac[0], mac[1]]));
        self.set_mac_addr_31_0(u32::from_be_bytes([mac[2], mac[3], mac[4], mac[5]]));
    }
}
