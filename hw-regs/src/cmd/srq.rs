//! Shared receive queue commands: CREATE_SRQ, DESTROY_SRQ, QUERY_SRQ and ARM_RQ.
//! RESIZE_SRQ (0x704) has no `mlx5_ifc.h` layout.

use crate::ctx::Srqc;

prm_layout! {
    /// CREATE_SRQ input (`mlx5_ifc_create_srq_in_bits`): the SRQ context at 0x10 and the PAS array
    /// from `PAS_OFFSET` = 0x110.
    pub struct CreateSrqIn("create_srq_in", 0x110) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// SRQ context.
        srq_context_entry / srq_context_entry_mut: Srqc = nested(0x10);
    }
}

impl CreateSrqIn {
    /// Byte offset of the `pas` flexible array that follows the fixed part.
    pub const PAS_OFFSET: usize = 0x110;
}

prm_layout! {
    /// CREATE_SRQ output (`mlx5_ifc_create_srq_out_bits`): the new SRQ number.
    pub struct CreateSrqOut("create_srq_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// SRQ number.
        srqn / set_srqn: u32 = dw(0x08, 23, 0);
    }
}

cmd_pair!(CreateSrqIn, CreateSrqOut, CreateSrq);

prm_layout! {
    /// DESTROY_SRQ input (`mlx5_ifc_destroy_srq_in_bits`).
    pub struct DestroySrqIn("destroy_srq_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// SRQ number.
        srqn / set_srqn: u32 = dw(0x08, 23, 0);
    }
}

prm_layout! {
    /// DESTROY_SRQ output (`mlx5_ifc_destroy_srq_out_bits`).
    pub struct DestroySrqOut("destroy_srq_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(DestroySrqIn, DestroySrqOut, DestroySrq);

prm_layout! {
    /// QUERY_SRQ input (`mlx5_ifc_query_srq_in_bits`).
    pub struct QuerySrqIn("query_srq_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// SRQ number.
        srqn / set_srqn: u32 = dw(0x08, 23, 0);
    }
}

prm_layout! {
    /// QUERY_SRQ output (`mlx5_ifc_query_srq_out_bits`): the SRQ context and the PAS array from
    /// `PAS_OFFSET`.
    pub struct QuerySrqOut("query_srq_out", 0x110) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// SRQ context.
        srq_context_entry / srq_context_entry_mut: Srqc = nested(0x10);
    }
}

impl QuerySrqOut {
    /// Byte offset of the `pas` flexible array that follows the fixed part.
    pub const PAS_OFFSET: usize = 0x110;
}

cmd_pair!(QuerySrqIn, QuerySrqOut, QuerySrq);

prm_layout! {
    /// ARM_RQ input (`mlx5_ifc_arm_rq_in_bits`): arm the SRQ limit event at `lwm` WQEs (op_mod 1
    /// for SRQs).
    pub struct ArmRqIn("arm_rq_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// SRQ (or RQ) number to arm.
        srq_number / set_srq_number: u32 = dw(0x08, 23, 0);
        /// Limit watermark: WQE count below which the SRQ limit event fires.
        lwm / set_lwm: u16 = dw(0x0C, 15, 0);
    }
}

prm_layout! {
    /// ARM_RQ output (`mlx5_ifc_arm_rq_out_bits`).
    pub struct ArmRqOut("arm_rq_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(ArmRqIn, ArmRqOut, ArmRq);

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    #[test]
    fn create_srq_layout() {
        let mut i = CreateSrqIn::new_cmd();
        i.srq_context_entry_mut().set_log_srq_size(10);
        i.srq_context_entry_mut().set_pd(4);
        i.srq_context_entry_mut().set_dbr_addr(0x1000);
        let b = i.as_bytes();
        assert_eq!(&b[0..2], &[0x07, 0x00]);
        assert_eq!(b[0x10], 0x0A);
        assert_eq!(b[0x10 + 0x1B], 4);
        assert_eq!(&b[0x10 + 0x28..0x10 + 0x30], &0x1000u64.to_be_bytes());
        assert_eq!(CreateSrqIn::PAS_OFFSET, 0x110);
    }
}
