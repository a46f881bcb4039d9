//! Capability commands: QUERY_HCA_CAP and SET_HCA_CAP. The 0x1000-byte capability block is
//! [`HcaCapUnion`] at byte 0x10; `op_mod` selects the cap type and, for queries, max or current
//! (see [`super::op_mod::query_hca_cap`]).

use crate::caps::HcaCapUnion;

prm_layout! {
    /// QUERY_HCA_CAP input (`mlx5_ifc_query_hca_cap_in_bits`).
    pub struct QueryHcaCapIn("query_hca_cap_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Query or set another function named by `function_id`.
        other_function / set_other_function: bool = dw(0x08, 31, 31);
        /// Function (vHCA) the command is about; 0 = this function.
        function_id / set_function_id: u16 = dw(0x08, 15, 0);
    }
}

prm_layout! {
    /// QUERY_HCA_CAP output (`mlx5_ifc_query_hca_cap_out_bits`, 0x1010 bytes): the capability block
    /// at 0x10.
    pub struct QueryHcaCapOut("query_hca_cap_out", 0x1010) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// The capability block (a union selected by the cap type in `op_mod`).
        capability / capability_mut: HcaCapUnion = nested(0x10);
    }
}

cmd_pair!(QueryHcaCapIn, QueryHcaCapOut, QueryHcaCap);

prm_layout! {
    /// SET_HCA_CAP input (`mlx5_ifc_set_hca_cap_in_bits`, 0x1010 bytes): a copy of the current
    /// block with changes; op_mod = cap_type << 1.
    pub struct SetHcaCapIn("set_hca_cap_in", 0x1010) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Query or set another function named by `function_id`.
        other_function / set_other_function: bool = dw(0x08, 31, 31);
        /// Function (vHCA) the command is about; 0 = this function.
        function_id / set_function_id: u16 = dw(0x08, 15, 0);
        /// The capability block (a union selected by the cap type in `op_mod`).
        capability / capability_mut: HcaCapUnion = nested(0x10);
    }
}

prm_layout! {
    /// SET_HCA_CAP output (`mlx5_ifc_set_hca_cap_out_bits`).
    pub struct SetHcaCapOut("set_hca_cap_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(SetHcaCapIn, SetHcaCapOut, SetHcaCap);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PrmLayout;
    use crate::cmd::op_mod;
    use zerocopy::{FromZeros, IntoBytes};

    #[test]
    fn capability_block_at_0x10() {
        let mut o = QueryHcaCapOut::new_zeroed();
        o.capability_mut().cmd_hca_cap_mut().set_log_max_qp(14);
        assert_eq!(o.as_bytes()[0x10 + 0x13], 14);
        assert_eq!(o.capability().roce_cap().roce_address_table_size(), 0);
        assert_eq!(QueryHcaCapOut::SIZE, 0x1010);
        assert_eq!(SetHcaCapIn::SIZE, 0x1010);
        let mut i = QueryHcaCapIn::new_cmd();
        i.set_op_mod(op_mod::query_hca_cap(
            op_mod::HCA_CAP_ROCE,
            op_mod::HCA_CAP_CURRENT,
        ));
        assert_eq!(&i.as_bytes()[0..8], &[0x01, 0x00, 0, 0, 0, 0, 0, 0x09]);
    }
}
