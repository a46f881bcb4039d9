//! A GID table entry (`roce_addr_layout`), carried by SET_ROCE_ADDRESS and QUERY_ROCE_ADDRESS.

prm_layout! {
    /// GID table entry (`mlx5_ifc_roce_addr_layout_bits`, 0x20 bytes).
    pub struct RoceAddrLayout("roce_addr_layout", 0x20) {
        /// The GID (16 bytes, network order; RoCE v2 over IPv4: ::ffff:a.b.c.d).
        source_l3_address / set_source_l3_address: [u8; 16] = bytes(0x00, 16);
        /// The entry has a VLAN.
        vlan_valid / set_vlan_valid: bool = dw(0x10, 28, 28);
        /// VLAN ID.
        vlan_id / set_vlan_id: u16 = dw(0x10, 27, 16);
        /// Source MAC, bits 47:32.
        source_mac_47_32 / set_source_mac_47_32: u16 = dw(0x10, 15, 0);
        /// Source MAC, bits 31:0.
        source_mac_31_0 / set_source_mac_31_0: u32 = dw(0x14, 31, 0);
        /// L3 type: 0 IPv4, 1 IPv6.
        roce_l3_type / set_roce_l3_type: u8 = dw(0x18, 11, 8);
        /// RoCE version: 0 v1, 2 v2.
        roce_version / set_roce_version: u8 = dw(0x18, 7, 0);
    }
}

/// `roce_l3_type`: IPv4.
pub const ROCE_L3_TYPE_IPV4: u8 = 0;
/// `roce_l3_type`: IPv6.
pub const ROCE_L3_TYPE_IPV6: u8 = 1;
/// `roce_version`: RoCE v1.
pub const ROCE_VERSION_1: u8 = 0;
/// `roce_version`: RoCE v2.
pub const ROCE_VERSION_2: u8 = 2;

impl RoceAddrLayout {
    /// The source MAC address from its two halves.
    pub fn source_mac(&self) -> [u8; 6] {
        let hi = self.source_mac_47_32().to_be_bytes();
        let lo = self.source_mac_31_0().to_be_bytes();
        [hi[0], hi[1], lo[0], lo[1], lo[2], lo[3]]
    }

    /// Sets both halves of the source MAC address.
    pub fn set_source_mac(&mut self, mac: [u8; 6]) {
        self.set_source_mac_47_32(u16::from_be_bytes([mac[0], mac[1]]));
        self.set_source_mac_31_0(u32::from_be_bytes([mac[2], mac[3], mac[4], mac[5]]));
    }
}
