//! Transport interface receive commands: CREATE_TIR, DESTROY_TIR and QUERY_TIR.

use crate::ctx::Tirc;

prm_layout! {
    /// CREATE_TIR input (`mlx5_ifc_create_tir_in_bits`): the TIR context at 0x20.
    pub struct CreateTirIn("create_tir_in", 0x110) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// TIR context.
        ctx / ctx_mut: Tirc = nested(0x20);
    }
}

prm_layout! {
    /// CREATE_TIR output (`mlx5_ifc_create_tir_out_bits`): the new TIR number.
    pub struct CreateTirOut("create_tir_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// TIR number.
        tirn / set_tirn: u32 = dw(0x08, 23, 0);
    }
}

cmd_pair!(CreateTirIn, CreateTirOut, CreateTir);

prm_layout! {
    /// DESTROY_TIR input (`mlx5_ifc_destroy_tir_in_bits`).
    pub struct DestroyTirIn("destroy_tir_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// TIR number.
        tirn / set_tirn: u32 = dw(0x08, 23, 0);
    }
}

prm_layout! {
    /// DESTROY_TIR output (`mlx5_ifc_destroy_tir_out_bits`).
    pub struct DestroyTirOut("destroy_tir_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(DestroyTirIn, DestroyTirOut, DestroyTir);

prm_layout! {
    /// QUERY_TIR input (`mlx5_ifc_query_tir_in_bits`).
    pub struct QueryTirIn("query_tir_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// TIR number.
        tirn / set_tirn: u32 = dw(0x08, 23, 0);
    }
}

prm_layout! {
    /// QUERY_TIR output (`mlx5_ifc_query_tir_out_bits`): the TIR context at 0x20.
    pub struct QueryTirOut("query_tir_out", 0x110) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// TIR context.
        tir_context / tir_context_mut: Tirc = nested(0x20);
    }
}

cmd_pair!(QueryTirIn, QueryTirOut, QueryTir);
