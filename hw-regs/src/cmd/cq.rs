//! Completion queue commands: CREATE_CQ, DESTROY_CQ, QUERY_CQ and MODIFY_CQ.

use crate::ctx::Cqc;

prm_layout! {
    /// MODIFY_CQ field select for op_mod 0 (`mlx5_ifc_modify_field_select_bits`, 4 bytes).
    pub struct ModifyFieldSelect("modify_field_select", 0x4) {
        /// Modify field-select bits (period, count, ...).
        modify_field_select / set_modify_field_select: u32 = dw(0x00, 31, 0);
    }
}

prm_layout! {
    /// MODIFY_CQ field select for op_mod 1, resize (`mlx5_ifc_resize_field_select_bits`, 4 bytes).
    pub struct ResizeFieldSelect("resize_field_select", 0x4) {
        /// Resize field-select bits (log_cq_size, page_offset, log_page_size).
        resize_field_select / set_resize_field_select: u32 = dw(0x00, 31, 0);
    }
}

prm_layout! {
    /// The MODIFY_CQ field-select union
    /// (`mlx5_ifc_modify_field_select_resize_field_select_auto_bits`, 4 bytes): `op_mod` says which
    /// member applies.
    pub struct ModifyFieldSelectResizeFieldSelectAuto("modify_field_select_resize_field_select_auto", 0x4) {
        /// Modify field-select bits (period, count, ...).
        modify_field_select / modify_field_select_mut: ModifyFieldSelect = nested(0x00);
        /// Resize field-select bits (log_cq_size, page_offset, log_page_size).
        resize_field_select / resize_field_select_mut: ResizeFieldSelect = nested(0x00);
    }
}

prm_layout! {
    /// CREATE_CQ input (`mlx5_ifc_create_cq_in_bits`): the CQ context at 0x10 and the PAS array
    /// (BE64 page addresses) from `PAS_OFFSET` = 0x110.
    pub struct CreateCqIn("create_cq_in", 0x110) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// CQ context.
        cq_context / cq_context_mut: Cqc = nested(0x10);
        /// The CQ buffer is a registered umem instead of a PAS list.
        cq_umem_valid / set_cq_umem_valid: bool = dw(0x5C, 31, 31);
    }
}

impl CreateCqIn {
    /// Byte offset of the `pas` flexible array that follows the fixed part.
    pub const PAS_OFFSET: usize = 0x110;
}

prm_layout! {
    /// CREATE_CQ output (`mlx5_ifc_create_cq_out_bits`): the new CQ number.
    pub struct CreateCqOut("create_cq_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// CQ number.
        cqn / set_cqn: u32 = dw(0x08, 23, 0);
    }
}

cmd_pair!(CreateCqIn, CreateCqOut, CreateCq);

prm_layout! {
    /// DESTROY_CQ input (`mlx5_ifc_destroy_cq_in_bits`).
    pub struct DestroyCqIn("destroy_cq_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// CQ number.
        cqn / set_cqn: u32 = dw(0x08, 23, 0);
    }
}

prm_layout! {
    /// DESTROY_CQ output (`mlx5_ifc_destroy_cq_out_bits`).
    pub struct DestroyCqOut("destroy_cq_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(DestroyCqIn, DestroyCqOut, DestroyCq);

prm_layout! {
    /// QUERY_CQ input (`mlx5_ifc_query_cq_in_bits`).
    pub struct QueryCqIn("query_cq_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// CQ number.
        cqn / set_cqn: u32 = dw(0x08, 23, 0);
    }
}

prm_layout! {
    /// QUERY_CQ output (`mlx5_ifc_query_cq_out_bits`): the CQ context and the PAS array from
    /// `PAS_OFFSET`.
    pub struct QueryCqOut("query_cq_out", 0x110) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// CQ context.
        cq_context / cq_context_mut: Cqc = nested(0x10);
    }
}

impl QueryCqOut {
    /// Byte offset of the `pas` flexible array that follows the fixed part.
    pub const PAS_OFFSET: usize = 0x110;
}

cmd_pair!(QueryCqIn, QueryCqOut, QueryCq);

prm_layout! {
    /// MODIFY_CQ input (`mlx5_ifc_modify_cq_in_bits`): op_mod 0 modify moderation, 1 resize (then
    /// the new PAS array follows at `PAS_OFFSET`).
    pub struct ModifyCqIn("modify_cq_in", 0x110) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// CQ number.
        cqn / set_cqn: u32 = dw(0x08, 23, 0);
        /// Which CQ context fields MODIFY_CQ changes (op_mod 0) or the resize fields (op_mod 1).
        modify_field_select_resize_field_select / modify_field_select_resize_field_select_mut: ModifyFieldSelectResizeFieldSelectAuto = nested(0x0C);
        /// CQ context.
        cq_context / cq_context_mut: Cqc = nested(0x10);
        /// The CQ buffer is a registered umem instead of a PAS list.
        cq_umem_valid / set_cq_umem_valid: bool = dw(0x5C, 31, 31);
    }
}

impl ModifyCqIn {
    /// Byte offset of the `pas` flexible array that follows the fixed part.
    pub const PAS_OFFSET: usize = 0x110;
}

prm_layout! {
    /// MODIFY_CQ output (`mlx5_ifc_modify_cq_out_bits`).
    pub struct ModifyCqOut("modify_cq_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(ModifyCqIn, ModifyCqOut, ModifyCq);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PrmLayout;
    use zerocopy::{FromZeros, IntoBytes};

    #[test]
    fn create_cq_layout() {
        let mut i = CreateCqIn::new_cmd();
        i.cq_context_mut().set_log_cq_size(6);
        i.cq_context_mut().set_c_eqn(3);
        let b = i.as_bytes();
        assert_eq!(&b[0..2], &[0x04, 0x00]);
        assert_eq!(b[0x10 + 0x0C], 6);
        assert_eq!(b[0x10 + 0x17], 3);
        assert_eq!(CreateCqIn::PAS_OFFSET, 0x110);
        let mut o = CreateCqOut::new_zeroed();
        o.set_cqn(0x123);
        assert_eq!(&o.as_bytes()[0x08..0x0C], &[0, 0, 0x01, 0x23]);
        assert_eq!(ModifyFieldSelectResizeFieldSelectAuto::SIZE, 4);
    }
}
