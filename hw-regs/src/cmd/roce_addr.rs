//! GID table commands: QUERY_ROCE_ADDRESS and SET_ROCE_ADDRESS. The table has
//! `roce_address_table_size` entries (RoCE cap; 256 on a ConnectX-4).

use crate::ctx::RoceAddrLayout;

prm_layout! {
    /// QUERY_ROCE_ADDRESS input (`mlx5_ifc_query_roce_address_in_bits`).
    pub struct QueryRoceAddressIn("query_roce_address_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// GID table index.
        roce_address_index / set_roce_address_index: u16 = dw(0x08, 31, 16);
        /// Port number (1-based; 0 means port 1 on single-port functions).
        vhca_port_num / set_vhca_port_num: u8 = dw(0x08, 3, 0);
    }
}

prm_layout! {
    /// QUERY_ROCE_ADDRESS output (`mlx5_ifc_query_roce_address_out_bits`, 0x30 bytes): the entry at
    /// 0x10.
    pub struct QueryRoceAddressOut("query_roce_address_out", 0x30) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// The GID entry.
        roce_address / roce_address_mut: RoceAddrLayout = nested(0x10);
    }
}

cmd_pair!(QueryRoceAddressIn, QueryRoceAddressOut, QueryRoceAddress);

prm_layout! {
    /// SET_ROCE_ADDRESS input (`mlx5_ifc_set_roce_address_in_bits`, 0x30 bytes): the entry at 0x10.
    pub struct SetRoceAddressIn("set_roce_address_in", 0x30) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// GID table index.
        roce_address_index / set_roce_address_index: u16 = dw(0x08, 31, 16);
        /// Port number (1-based; 0 means port 1 on single-port functions).
        vhca_port_num / set_vhca_port_num: u8 = dw(0x08, 3, 0);
        /// The GID entry.
        roce_address / roce_address_mut: RoceAddrLayout = nested(0x10);
    }
}

prm_layout! {
    /// SET_ROCE_ADDRESS output (`mlx5_ifc_set_roce_address_out_bits`).
    pub struct SetRoceAddressOut("set_roce_address_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(SetRoceAddressIn, SetRoceAddressOut, SetRoceAddress);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PrmLayout;
    use crate::ctx::{ROCE_L3_TYPE_IPV4, ROCE_VERSION_2};
    use zerocopy::IntoBytes;

    #[test]
    fn set_roce_address_layout() {
        let mut i = SetRoceAddressIn::new_cmd();
        i.set_roce_address_index(3);
        i.set_vhca_port_num(1);
        let gid = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 1];
        let a = i.roce_address_mut();
        a.set_source_l3_address(gid);
        a.set_source_mac([0x24, 0x8a, 0x07, 0xa8, 0xfa, 0x22]);
        a.set_roce_l3_type(ROCE_L3_TYPE_IPV4);
        a.set_roce_version(ROCE_VERSION_2);
        let b = i.as_bytes();
        assert_eq!(&b[0..2], &[0x07, 0x61]);
        assert_eq!(&b[0x08..0x0C], &[0, 3, 0, 1]);
        assert_eq!(&b[0x10..0x20], &gid);
        assert_eq!(&b[0x20..0x28], &[0, 0, 0x24, 0x8a, 0x07, 0xa8, 0xfa, 0x22]);
        assert_eq!(&b[0x28..0x2C], &[0, 0, 0, 2]);
        assert_eq!(SetRoceAddressIn::SIZE, 0x30);
    }
}
