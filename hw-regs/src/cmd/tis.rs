//! Transport interface send commands: CREATE_TIS, DESTROY_TIS and QUERY_TIS.

use crate::ctx::Tisc;

prm_layout! {
    /// CREATE_TIS input (`mlx5_ifc_create_tis_in_bits`): the TIS context at 0x20.
    pub struct CreateTisIn("create_tis_in", 0xC0) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// TIS context.
        ctx / ctx_mut: Tisc = nested(0x20);
    }
}

prm_layout! {
    /// CREATE_TIS output (`mlx5_ifc_create_tis_out_bits`): the new TIS number.
    pub struct CreateTisOut("create_tis_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// TIS number.
        tisn / set_tisn: u32 = dw(0x08, 23, 0);
    }
}

cmd_pair!(CreateTisIn, CreateTisOut, CreateTis);

prm_layout! {
    /// DESTROY_TIS input (`mlx5_ifc_destroy_tis_in_bits`).
    pub struct DestroyTisIn("destroy_tis_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// TIS number.
        tisn / set_tisn: u32 = dw(0x08, 23, 0);
    }
}

prm_layout! {
    /// DESTROY_TIS output (`mlx5_ifc_destroy_tis_out_bits`).
    pub struct DestroyTisOut("destroy_tis_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(DestroyTisIn, DestroyTisOut, DestroyTis);

prm_layout! {
    /// QUERY_TIS input (`mlx5_ifc_query_tis_in_bits`).
    pub struct QueryTisIn("query_tis_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// TIS number.
        tisn / set_tisn: u32 = dw(0x08, 23, 0);
    }
}

prm_layout! {
    /// QUERY_TIS output (`mlx5_ifc_query_tis_out_bits`): the TIS context at 0x10.
    pub struct QueryTisOut("query_tis_out", 0xB0) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// TIS context.
        tis_context / tis_context_mut: Tisc = nested(0x10);
    }
}

cmd_pair!(QueryTisIn, QueryTisOut, QueryTis);
