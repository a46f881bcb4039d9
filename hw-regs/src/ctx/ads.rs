//! The address path (`ads`): where a QP sends, as a RoCE address vector.

prm_layout! {
    /// Address path (`mlx5_ifc_ads_bits`, 0x2C bytes): the primary and alternate paths of a QP
    /// context. For RoCE v2 it carries the destination GID/IP, MAC and UDP source port.
    pub struct Ads("ads", 0x2C) {
        /// Force loopback.
        fl / set_fl: bool = dw(0x00, 31, 31);
        /// P_Key table index.
        pkey_index / set_pkey_index: u16 = dw(0x00, 15, 0);
        /// GRH present (always set for RoCE).
        grh / set_grh: bool = dw(0x04, 23, 23);
        /// Local ACK timeout: 4.096 us * 2^ack_timeout.
        ack_timeout / set_ack_timeout: u8 = dw(0x08, 31, 27);
        /// Local GID table index (source GID).
        src_addr_index / set_src_addr_index: u8 = dw(0x08, 23, 16);
        /// Static rate.
        stat_rate / set_stat_rate: u8 = dw(0x08, 11, 8);
        /// Hop limit (IPv4 TTL).
        hop_limit / set_hop_limit: u8 = dw(0x08, 7, 0);
        /// Traffic class (IPv4 TOS).
        tclass / set_tclass: u8 = dw(0x0C, 27, 20);
        /// IPv6 flow label.
        flow_label / set_flow_label: u32 = dw(0x0C, 19, 0);
        /// Remote GID (RoCE v2 over IPv4: ::ffff:a.b.c.d), network order.
        rgid_rip / set_rgid_rip: [u8; 16] = bytes(0x10, 16);
        /// ECN bits.
        ecn / set_ecn: u8 = dw(0x20, 23, 22);
        /// DSCP.
        dscp / set_dscp: u8 = dw(0x20, 21, 16);
        /// UDP source port of the QP's packets.
        udp_sport / set_udp_sport: u16 = dw(0x20, 15, 0);
        /// Service level (Ethernet priority).
        sl / set_sl: u8 = dw(0x24, 27, 24);
        /// Port number, 1-based.
        vhca_port_num / set_vhca_port_num: u8 = dw(0x24, 23, 16);
        /// Remote MAC, bits 47:32.
        rmac_47_32 / set_rmac_47_32: u16 = dw(0x24, 15, 0);
        /// Remote MAC, bits 31:0.
        rmac_31_0 / set_rmac_31_0: u32 = dw(0x28, 31, 0);
    }
}

impl Ads {
    /// The remote MAC address from its two halves.
    pub fn rmac(&self) -> [u8; 6] {
        let hi = self.rmac_47_32().to_be_bytes();
        let lo = self.rmac_31_0().to_be_bytes();
        [hi[0], hi[1], lo[0], lo[1], lo[2], lo[3]]
    }

    /// Sets both halves of the remote MAC address.
    pub fn set_rmac(&mut self, mac: [u8; 6]) {
        self.set_rmac_47_32(u16::from_be_bytes([mac[0], mac[1]]));
        self.set_rmac_31_0(u32::from_be_bytes([mac[2], mac[3], mac[4], mac[5]]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    #[test]
    fn rmac_splits_across_dwords() {
        let mut a = Ads::default();
        a.set_rmac([0x24, 0x8a, 0x07, 0xa8, 0xfa, 0x22]);
        assert_eq!(
            &a.as_bytes()[0x26..0x2C],
            &[0x24, 0x8a, 0x07, 0xa8, 0xfa, 0x22]
        );
        assert_eq!(a.rmac(), [0x24, 0x8a, 0x07, 0xa8, 0xfa, 0x22]);
    }
}
