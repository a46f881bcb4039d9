//! RoCE capabilities (`roce_cap`, cap type 4).

prm_layout! {
    /// RoCE capabilities (`mlx5_ifc_roce_cap_bits`, 0x100 bytes): QUERY_HCA_CAP op_mod 0x8 (max) /
    /// 0x9 (current).
    pub struct RoceCap("roce_cap", 0x100) {
        /// RoCE automatic path migration supported.
        roce_apm / set_roce_apm: bool = dw(0x00, 31, 31);
        /// Software chooses the RoCE v2 UDP source port (ads.udp_sport); set it when the max
        /// allows.
        sw_r_roce_src_udp_port / set_sw_r_roce_src_udp_port: bool = dw(0x00, 27, 27);
        /// Force-loopback RC QPs allowed when RoCE is disabled.
        fl_rc_qp_when_roce_disabled / set_fl_rc_qp_when_roce_disabled: bool = dw(0x00, 26, 26);
        /// Force-loopback RC QPs allowed when RoCE is enabled.
        fl_rc_qp_when_roce_enabled / set_fl_rc_qp_when_roce_enabled: bool = dw(0x00, 25, 25);
        /// Supported QP timestamp formats.
        qp_ts_format / set_qp_ts_format: u8 = dw(0x00, 1, 0);
        /// Bit mask of supported L3 types (bit 0 IPv4, bit 1 IPv6).
        l3_type / set_l3_type: u8 = dw(0x10, 19, 16);
        /// Bit mask of supported RoCE versions (bit 0 v1, bit 2 v2).
        roce_version / set_roce_version: u8 = dw(0x10, 7, 0);
        /// RoCE v2 UDP destination port (4791).
        r_roce_dest_udp_port / set_r_roce_dest_udp_port: u16 = dw(0x14, 15, 0);
        /// Largest RoCE v2 UDP source port (65535).
        r_roce_max_src_udp_port / set_r_roce_max_src_udp_port: u16 = dw(0x18, 31, 16);
        /// Smallest RoCE v2 UDP source port (49152).
        r_roce_min_src_udp_port / set_r_roce_min_src_udp_port: u16 = dw(0x18, 15, 0);
        /// Number of GID (RoCE address) table entries (CX-4: 256).
        roce_address_table_size / set_roce_address_table_size: u16 = dw(0x1C, 15, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    #[test]
    fn udp_ports_and_table_size() {
        let mut c = RoceCap::default();
        c.set_sw_r_roce_src_udp_port(true);
        c.set_r_roce_dest_udp_port(4791);
        c.set_r_roce_max_src_udp_port(65535);
        c.set_r_roce_min_src_udp_port(49152);
        c.set_roce_address_table_size(256);
        let b = c.as_bytes();
        assert_eq!(b[0], 0x08);
        assert_eq!(&b[0x16..0x18], &4791u16.to_be_bytes());
        assert_eq!(&b[0x18..0x1C], &[0xFF, 0xFF, 0xC0, 0x00]);
        assert_eq!(&b[0x1E..0x20], &[0x01, 0x00]);
    }
}
