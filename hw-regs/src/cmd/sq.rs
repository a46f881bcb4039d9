//! Send queue object commands (Ethernet): CREATE_SQ, MODIFY_SQ, DESTROY_SQ and
//! QUERY_SQ.

use crate::ctx::Sqc;

prm_layout! {
    /// CREATE_SQ input (`mlx5_ifc_create_sq_in_bits`): the SQ context at 0x20, its `wq`'s PAS from
    /// `PAS_OFFSET` = 0x110.
    pub struct CreateSqIn("create_sq_in", 0x110) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// SQ context.
        ctx / ctx_mut: Sqc = nested(0x20);
    }
}

prm_layout! {
    /// CREATE_SQ output (`mlx5_ifc_create_sq_out_bits`): the new SQ number.
    pub struct CreateSqOut("create_sq_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// SQ number.
        sqn / set_sqn: u32 = dw(0x08, 23, 0);
    }
}

impl CreateSqIn {
    /// Byte offset of the `wq`'s `pas` array (context at 0x20, `wq` at 0x30 in it, PAS at
    /// 0xC0 in the `wq`).
    pub const PAS_OFFSET: usize = 0x110;
}

cmd_pair!(CreateSqIn, CreateSqOut, CreateSq);

prm_layout! {
    /// MODIFY_SQ input (`mlx5_ifc_modify_sq_in_bits`): `sq_state` is the current state, the
    /// context's `state` the new one; `modify_bitmask` selects other context fields to change.
    pub struct ModifySqIn("modify_sq_in", 0x110) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Current state ([`WqState`](crate::ctx::WqState)).
        sq_state / set_sq_state: u8 = dw(0x08, 31, 28);
        /// SQ number.
        sqn / set_sqn: u32 = dw(0x08, 23, 0);
        /// Context fields to modify besides the state (bit 0 and up, per the PRM).
        modify_bitmask / set_modify_bitmask: u64 = qw(0x10);
        /// SQ context with the new state.
        ctx / ctx_mut: Sqc = nested(0x20);
    }
}

prm_layout! {
    /// MODIFY_SQ output (`mlx5_ifc_modify_sq_out_bits`).
    pub struct ModifySqOut("modify_sq_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(ModifySqIn, ModifySqOut, ModifySq);

prm_layout! {
    /// DESTROY_SQ input (`mlx5_ifc_destroy_sq_in_bits`).
    pub struct DestroySqIn("destroy_sq_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// SQ number.
        sqn / set_sqn: u32 = dw(0x08, 23, 0);
    }
}

prm_layout! {
    /// DESTROY_SQ output (`mlx5_ifc_destroy_sq_out_bits`).
    pub struct DestroySqOut("destroy_sq_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(DestroySqIn, DestroySqOut, DestroySq);

prm_layout! {
    /// QUERY_SQ input (`mlx5_ifc_query_sq_in_bits`).
    pub struct QuerySqIn("query_sq_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// SQ number.
        sqn / set_sqn: u32 = dw(0x08, 23, 0);
    }
}

prm_layout! {
    /// QUERY_SQ output (`mlx5_ifc_query_sq_out_bits`): the SQ context at 0x20.
    pub struct QuerySqOut("query_sq_out", 0x110) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// SQ context.
        sq_context / sq_context_mut: Sqc = nested(0x20);
    }
}

cmd_pair!(QuerySqIn, QuerySqOut, QuerySq);
