//! Flow match parameters: the header fields a flow group masks (`match_criteria`) and a flow
//! entry compares (`match_value`), `fte_match_param` and its outer / inner L2-L4 set.

prm_layout! {
    /// An IPv4 address in a 16-byte address slot (`mlx5_ifc_ipv4_layout_bits`): the address is
    /// the last 4 bytes.
    pub struct Ipv4Layout("ipv4_layout", 0x10) {
        /// The IPv4 address.
        ipv4 / set_ipv4: u32 = dw(0x0C, 31, 0);
    }
}

prm_layout! {
    /// An IPv6 address (`mlx5_ifc_ipv6_layout_bits`).
    pub struct Ipv6Layout("ipv6_layout", 0x10) {
        /// The IPv6 address.
        ipv6 / set_ipv6: [u8; 16] = bytes(0x00, 16);
    }
}

prm_layout! {
    /// The address slot of a match set (`mlx5_ifc_ipv6_layout_ipv4_layout_auto_bits`, a
    /// union): IPv6, or IPv4 in the last 4 bytes.
    pub struct Ipv6LayoutIpv4LayoutAuto("ipv6_layout_ipv4_layout_auto", 0x10) {
        /// As IPv6.
        ipv6_layout / ipv6_layout_mut: Ipv6Layout = nested(0x00);
        /// As IPv4.
        ipv4_layout / ipv4_layout_mut: Ipv4Layout = nested(0x00);
    }
}

prm_layout! {
    /// The L2-L4 header fields of a match (`mlx5_ifc_fte_match_set_lyr_2_4_bits`, 0x40 bytes).
    pub struct FteMatchSetLyr24("fte_match_set_lyr_2_4", 0x40) {
        /// Source MAC, bits 47:16.
        smac_47_16 / set_smac_47_16: u32 = dw(0x00, 31, 0);
        /// Source MAC, bits 15:0.
        smac_15_0 / set_smac_15_0: u16 = dw(0x04, 31, 16);
        /// Ethertype (after any VLAN tags).
        ethertype / set_ethertype: u16 = dw(0x04, 15, 0);
        /// Destination MAC, bits 47:16.
        dmac_47_16 / set_dmac_47_16: u32 = dw(0x08, 31, 0);
        /// Destination MAC, bits 15:0.
        dmac_15_0 / set_dmac_15_0: u16 = dw(0x0C, 31, 16);
        /// First VLAN tag's priority.
        first_prio / set_first_prio: u8 = dw(0x0C, 15, 13);
        /// First VLAN tag's CFI.
        first_cfi / set_first_cfi: bool = dw(0x0C, 12, 12);
        /// First VLAN tag's VID.
        first_vid / set_first_vid: u16 = dw(0x0C, 11, 0);
        /// IP protocol (IPv4) or next header (IPv6).
        ip_protocol / set_ip_protocol: u8 = dw(0x10, 31, 24);
        /// IP DSCP.
        ip_dscp / set_ip_dscp: u8 = dw(0x10, 23, 18);
        /// IP ECN.
        ip_ecn / set_ip_ecn: u8 = dw(0x10, 17, 16);
        /// A customer VLAN tag is present.
        cvlan_tag / set_cvlan_tag: bool = dw(0x10, 15, 15);
        /// A service VLAN tag is present.
        svlan_tag / set_svlan_tag: bool = dw(0x10, 14, 14);
        /// The packet is an IP fragment.
        frag / set_frag: bool = dw(0x10, 13, 13);
        /// IP version (4 or 6).
        ip_version / set_ip_version: u8 = dw(0x10, 12, 9);
        /// TCP flags.
        tcp_flags / set_tcp_flags: u16 = dw(0x10, 8, 0);
        /// TCP source port.
        tcp_sport / set_tcp_sport: u16 = dw(0x14, 31, 16);
        /// TCP destination port.
        tcp_dport / set_tcp_dport: u16 = dw(0x14, 15, 0);
        /// IPv4 header length in dwords.
        ipv4_ihl / set_ipv4_ihl: u8 = dw(0x18, 15, 12);
        /// TTL / hop limit.
        ttl_hoplimit / set_ttl_hoplimit: u8 = dw(0x18, 7, 0);
        /// UDP source port.
        udp_sport / set_udp_sport: u16 = dw(0x1C, 31, 16);
        /// UDP destination port.
        udp_dport / set_udp_dport: u16 = dw(0x1C, 15, 0);
        /// Source IP address.
        src_ipv4_src_ipv6 / src_ipv4_src_ipv6_mut: Ipv6LayoutIpv4LayoutAuto = nested(0x20);
        /// Destination IP address.
        dst_ipv4_dst_ipv6 / dst_ipv4_dst_ipv6_mut: Ipv6LayoutIpv4LayoutAuto = nested(0x30);
    }
}

impl FteMatchSetLyr24 {
    /// The destination MAC (`dmac_47_16` and `dmac_15_0` together).
    ///
    /// ```
    /// use rnic_hw_regs::ctx::FteMatchSetLyr24;
    ///
    /// let mut m = FteMatchSetLyr24::default();
    /// m.set_dmac([0x02, 0, 0, 0, 0, 0x01]);
    /// assert_eq!(m.dmac_47_16(), 0x0200_0000);
    /// assert_eq!(m.dmac_15_0(), 0x0001);
    /// assert_eq!(m.dmac(), [0x02, 0, 0, 0, 0, 0x01]);
    /// ```
    pub fn dmac(&self) -> [u8; 6] {
        let mut m = [0u8; 6];
        m.copy_from_slice(&self.0[0x08..0x0E]);
        m
    }

    /// Sets [`Self::dmac`].
    pub fn set_dmac(&mut self, mac: [u8; 6]) {
        self.0[0x08..0x0E].copy_from_slice(&mac);
    }

    /// The source MAC (`smac_47_16` and `smac_15_0` together).
    ///
    /// ```
    /// use rnic_hw_regs::ctx::FteMatchSetLyr24;
    ///
    /// let mut m = FteMatchSetLyr24::default();
    /// m.set_smac([1, 2, 3, 4, 5, 6]);
    /// assert_eq!((m.smac_47_16(), m.smac_15_0()), (0x0102_0304, 0x0506));
    /// ```
    pub fn smac(&self) -> [u8; 6] {
        let mut m = [0u8; 6];
        m.copy_from_slice(&self.0[0x00..0x06]);
        m
    }

    /// Sets [`Self::smac`].
    pub fn set_smac(&mut self, mac: [u8; 6]) {
        self.0[0x00..0x06].copy_from_slice(&mac);
    }

    /// The destination IPv4 address.
    ///
    /// ```
    /// use rnic_hw_regs::ctx::FteMatchSetLyr24;
    ///
    /// let mut m = FteMatchSetLyr24::default();
    /// m.set_dst_ipv4(0x0A00_0001);
    /// assert_eq!(m.dst_ipv4_dst_ipv6().ipv4_layout().ipv4(), 0x0A00_0001);
    /// assert_eq!(m.dst_ipv4(), 0x0A00_0001);
    /// ```
    pub fn dst_ipv4(&self) -> u32 {
        self.dst_ipv4_dst_ipv6().ipv4_layout().ipv4()
    }

    /// Sets [`Self::dst_ipv4`].
    pub fn set_dst_ipv4(&mut self, addr: u32) {
        self.dst_ipv4_dst_ipv6_mut()
            .ipv4_layout_mut()
            .set_ipv4(addr);
    }
}

prm_layout! {
    /// Flow match parameters (`mlx5_ifc_fte_match_param_bits`, 0x200 bytes): seven 64-byte
    /// sets, of which this device models the outer and inner L2-L4 headers; the misc sets
    /// (`misc_parameters*`, at 0x40 and 0xC0..0x200) must be zero in what it is given.
    pub struct FteMatchParam("fte_match_param", 0x200) {
        /// Outer L2-L4 headers.
        outer_headers / outer_headers_mut: FteMatchSetLyr24 = nested(0x00);
        /// Inner (tunnelled) L2-L4 headers.
        inner_headers / inner_headers_mut: FteMatchSetLyr24 = nested(0x80);
    }
}

/// Bits of `match_criteria_enable` (CREATE_FLOW_GROUP): which sets of [`FteMatchParam`] a
/// group's criteria use.
pub mod match_criteria {
    /// `outer_headers`.
    pub const OUTER_HEADERS: u8 = 1 << 0;
    /// `misc_parameters`.
    pub const MISC_PARAMETERS: u8 = 1 << 1;
    /// `inner_headers`.
    pub const INNER_HEADERS: u8 = 1 << 2;
    /// `misc_parameters_2`.
    pub const MISC_PARAMETERS_2: u8 = 1 << 3;
    /// `misc_parameters_3`.
    pub const MISC_PARAMETERS_3: u8 = 1 << 4;
    /// `misc_parameters_4`.
    pub const MISC_PARAMETERS_4: u8 = 1 << 5;
    /// `misc_parameters_5`.
    pub const MISC_PARAMETERS_5: u8 = 1 << 6;
}
