//! Receive queue object commands (Ethernet): CREATE_RQ, MODIFY_RQ, DESTROY_RQ and
//! QUERY_RQ.

use crate::ctx::Rqc;

prm_layout! {
    /// CREATE_RQ input (`mlx5_ifc_create_rq_in_bits`): the RQ context at 0x20, its `wq`'s PAS from
    /// `PAS_OFFSET` = 0x110.
    pub struct CreateRqIn("create_rq_in", 0x110) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// RQ context.
        ctx / ctx_mut: Rqc = nested(0x20);
    }
}

prm_layout! {
    /// CREATE_RQ output (`mlx5_ifc_create_rq_out_bits`): the new RQ number.
    pub struct CreateRqOut("create_rq_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// RQ number.
        rqn / set_rqn: u32 = dw(0x08, 23, 0);
    }
}

impl CreateRqIn {
    /// Byte offset of the `wq`'s `pas` array (context at 0x20, `wq` at 0x30 in it, PAS at
    /// 0xC0 in the `wq`).
    pub const PAS_OFFSET: usize = 0x110;
}

cmd_pair!(CreateRqIn, CreateRqOut, CreateRq);

prm_layout! {
    /// MODIFY_RQ input (`mlx5_ifc_modify_rq_in_bits`): `rq_state` is the current state, the
    /// context's `state` the new one; `modify_bitmask` selects other context fields to change.
    pub struct ModifyRqIn("modify_rq_in", 0x110) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Current state ([`WqState`](crate::ctx::WqState)).
        rq_state / set_rq_state: u8 = dw(0x08, 31, 28);
        /// RQ number.
        rqn / set_rqn: u32 = dw(0x08, 23, 0);
        /// Context fields to modify besides the state (bit 0 and up, per the PRM).
        modify_bitmask / set_modify_bitmask: u64 = qw(0x10);
        /// RQ context with the new state.
        ctx / ctx_mut: Rqc = nested(0x20);
    }
}

prm_layout! {
    /// MODIFY_RQ output (`mlx5_ifc_modify_rq_out_bits`).
    pub struct ModifyRqOut("modify_rq_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(ModifyRqIn, ModifyRqOut, ModifyRq);

prm_layout! {
    /// DESTROY_RQ input (`mlx5_ifc_destroy_rq_in_bits`).
    pub struct DestroyRqIn("destroy_rq_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// RQ number.
        rqn / set_rqn: u32 = dw(0x08, 23, 0);
    }
}

prm_layout! {
    /// DESTROY_RQ output (`mlx5_ifc_destroy_rq_out_bits`).
    pub struct DestroyRqOut("destroy_rq_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(DestroyRqIn, DestroyRqOut, DestroyRq);

prm_layout! {
    /// QUERY_RQ input (`mlx5_ifc_query_rq_in_bits`).
    pub struct QueryRqIn("query_rq_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// RQ number.
        rqn / set_rqn: u32 = dw(0x08, 23, 0);
    }
}

prm_layout! {
    /// QUERY_RQ output (`mlx5_ifc_query_rq_out_bits`): the RQ context at 0x20.
    pub struct QueryRqOut("query_rq_out", 0x110) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// RQ context.
        rq_context / rq_context_mut: Rqc = nested(0x20);
    }
}

cmd_pair!(QueryRqIn, QueryRqOut, QueryRq);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctx::{WqState, WqType};
    use zerocopy::IntoBytes;

    #[test]
    fn create_rq_places_the_wq_and_its_pas() {
        let mut i = CreateRqIn::new_cmd();
        let c = i.ctx_mut();
        c.set_cqn(0x33);
        c.set_state(WqState::Rst.into());
        let wq = c.wq_mut();
        wq.set_wq_type(WqType::Cyclic.into());
        wq.set_pd(7);
        wq.set_dbr_addr(0x2000);
        wq.set_log_wq_stride(4);
        wq.set_log_wq_sz(6);
        let b = i.as_bytes();
        assert_eq!(&b[0..2], &[0x09, 0x08]);
        assert_eq!(b[0x20 + 0x0B], 0x33);
        assert_eq!(b[0x50] >> 4, 1);
        assert_eq!(b[0x50 + 0x0B], 7);
        assert_eq!(&b[0x50 + 0x10..0x50 + 0x18], &0x2000u64.to_be_bytes());
        assert_eq!(b[0x50 + 0x21], 4);
        assert_eq!(b[0x50 + 0x23], 6);
        assert_eq!(CreateRqIn::PAS_OFFSET, 0x50 + crate::ctx::Wq::PAS_OFFSET);
    }

    #[test]
    fn modify_rq_carries_current_and_new_state() {
        let mut m = ModifyRqIn::new_cmd();
        m.set_rq_state(WqState::Rst.into());
        m.set_rqn(0x10);
        m.ctx_mut().set_state(WqState::Rdy.into());
        let b = m.as_bytes();
        assert_eq!(&b[0x08..0x0C], &[0x00, 0, 0, 0x10]);
        assert_eq!(b[0x21], 0x10);
    }
}
