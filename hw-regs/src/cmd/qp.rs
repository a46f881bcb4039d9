//! Queue pair commands: CREATE_QP, DESTROY_QP, the state transitions (RST2INIT, INIT2INIT,
//! INIT2RTR, RTR2RTS, RTS2RTS, SQERR2RTS, 2ERR, 2RST) and QUERY_QP.
//!
//! The transition inputs share one shape: qpn at DW@0x08, `opt_param_mask` at DW@0x10 (bits in
//! [`crate::ctx::opt_param`]) and the QP context at 0x18.

use crate::ctx::Qpc;

/// Declares a QP transition command whose input is the shared shape (qpn, `opt_param_mask`,
/// `ece`, QP context) and whose output carries only status, syndrome and `ece`.
macro_rules! qp_transition {
    ($in:ident, $out:ident, $op:ident, $ifc_in:literal, $ifc_out:literal, $name:literal) => {
        prm_layout! {
            #[doc = concat!($name, " input (`mlx5_ifc_", $ifc_in, "_bits`).")]
            pub struct $in($ifc_in, 0x110) {
                /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
                opcode / set_opcode: u16 = dw(0x00, 31, 16);
                /// User context ID (0 for the kernel-level driver).
                uid / set_uid: u16 = dw(0x00, 15, 0);
                /// Opcode modifier.
                op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
                /// QP number.
                qpn / set_qpn: u32 = dw(0x08, 23, 0);
                /// Optional parameters present in the context (see [`crate::ctx::opt_param`]).
                opt_param_mask / set_opt_param_mask: u32 = dw(0x10, 31, 0);
                /// Enhanced connection establishment options (0 when unused).
                ece / set_ece: u32 = dw(0x14, 31, 0);
                /// QP context.
                qpc / qpc_mut: Qpc = nested(0x18);
            }
        }

        prm_layout! {
            #[doc = concat!($name, " output (`mlx5_ifc_", $ifc_out, "_bits`).")]
            pub struct $out($ifc_out, 0x10) {
                /// Command status (0 = OK, see [`crate::status`]).
                status / set_status: u8 = dw(0x00, 31, 24);
                /// Firmware syndrome explaining a failed status.
                syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
                /// Enhanced connection establishment options (0 when unused).
                ece / set_ece: u32 = dw(0x0C, 31, 0);
            }
        }

        cmd_pair!($in, $out, $op);
    };
}

prm_layout! {
    /// CREATE_QP input (`mlx5_ifc_create_qp_in_bits`): the QP context at 0x18 and the PAS array
    /// (BE64 page addresses of the RQ+SQ buffer) from `PAS_OFFSET` = 0x110.
    pub struct CreateQpIn("create_qp_in", 0x110) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Requested QPN (only with the QPN-choice capability; 0 otherwise).
        input_qpn / set_input_qpn: u32 = dw(0x08, 23, 0);
        /// Optional parameters present in the context (see [`crate::ctx::opt_param`]).
        opt_param_mask / set_opt_param_mask: u32 = dw(0x10, 31, 0);
        /// Enhanced connection establishment options (0 when unused).
        ece / set_ece: u32 = dw(0x14, 31, 0);
        /// QP context.
        qpc / qpc_mut: Qpc = nested(0x18);
        /// The work queue buffer is a registered umem instead of a PAS list.
        wq_umem_valid / set_wq_umem_valid: bool = dw(0x10C, 31, 31);
    }
}

impl CreateQpIn {
    /// Byte offset of the `pas` flexible array that follows the fixed part.
    pub const PAS_OFFSET: usize = 0x110;
}

prm_layout! {
    /// CREATE_QP output (`mlx5_ifc_create_qp_out_bits`): the new QPN.
    pub struct CreateQpOut("create_qp_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// QP number.
        qpn / set_qpn: u32 = dw(0x08, 23, 0);
        /// Enhanced connection establishment options (0 when unused).
        ece / set_ece: u32 = dw(0x0C, 31, 0);
    }
}

cmd_pair!(CreateQpIn, CreateQpOut, CreateQp);

prm_layout! {
    /// DESTROY_QP input (`mlx5_ifc_destroy_qp_in_bits`).
    pub struct DestroyQpIn("destroy_qp_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// QP number.
        qpn / set_qpn: u32 = dw(0x08, 23, 0);
    }
}

prm_layout! {
    /// DESTROY_QP output (`mlx5_ifc_destroy_qp_out_bits`).
    pub struct DestroyQpOut("destroy_qp_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(DestroyQpIn, DestroyQpOut, DestroyQp);

qp_transition!(
    Rst2InitQpIn,
    Rst2InitQpOut,
    Rst2InitQp,
    "rst2init_qp_in",
    "rst2init_qp_out",
    "RST2INIT_QP"
);

qp_transition!(
    Init2InitQpIn,
    Init2InitQpOut,
    Init2InitQp,
    "init2init_qp_in",
    "init2init_qp_out",
    "INIT2INIT_QP"
);

qp_transition!(
    Init2RtrQpIn,
    Init2RtrQpOut,
    Init2RtrQp,
    "init2rtr_qp_in",
    "init2rtr_qp_out",
    "INIT2RTR_QP"
);

qp_transition!(
    Rtr2RtsQpIn,
    Rtr2RtsQpOut,
    Rtr2RtsQp,
    "rtr2rts_qp_in",
    "rtr2rts_qp_out",
    "RTR2RTS_QP"
);

qp_transition!(
    Rts2RtsQpIn,
    Rts2RtsQpOut,
    Rts2RtsQp,
    "rts2rts_qp_in",
    "rts2rts_qp_out",
    "RTS2RTS_QP"
);

prm_layout! {
    /// SQERR2RTS_QP input (`mlx5_ifc_sqerr2rts_qp_in_bits`).
    pub struct Sqerr2RtsQpIn("sqerr2rts_qp_in", 0x110) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// QP number.
        qpn / set_qpn: u32 = dw(0x08, 23, 0);
        /// Optional parameters present in the context (see [`crate::ctx::opt_param`]).
        opt_param_mask / set_opt_param_mask: u32 = dw(0x10, 31, 0);
        /// QP context.
        qpc / qpc_mut: Qpc = nested(0x18);
    }
}

prm_layout! {
    /// SQERR2RTS_QP output (`mlx5_ifc_sqerr2rts_qp_out_bits`).
    pub struct Sqerr2RtsQpOut("sqerr2rts_qp_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(Sqerr2RtsQpIn, Sqerr2RtsQpOut, Sqerr2RtsQp);

prm_layout! {
    /// 2ERR_QP input (`mlx5_ifc_qp_2err_in_bits`): move the QP to ERROR from any state.
    pub struct Qp2ErrIn("qp_2err_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// QP number.
        qpn / set_qpn: u32 = dw(0x08, 23, 0);
    }
}

prm_layout! {
    /// 2ERR_QP output (`mlx5_ifc_qp_2err_out_bits`).
    pub struct Qp2ErrOut("qp_2err_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(Qp2ErrIn, Qp2ErrOut, Qp2Err);

prm_layout! {
    /// 2RST_QP input (`mlx5_ifc_qp_2rst_in_bits`): move the QP to RESET from any state.
    pub struct Qp2RstIn("qp_2rst_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// QP number.
        qpn / set_qpn: u32 = dw(0x08, 23, 0);
    }
}

prm_layout! {
    /// 2RST_QP output (`mlx5_ifc_qp_2rst_out_bits`).
    pub struct Qp2RstOut("qp_2rst_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(Qp2RstIn, Qp2RstOut, Qp2Rst);

prm_layout! {
    /// QUERY_QP input (`mlx5_ifc_query_qp_in_bits`).
    pub struct QueryQpIn("query_qp_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// QP number.
        qpn / set_qpn: u32 = dw(0x08, 23, 0);
    }
}

prm_layout! {
    /// QUERY_QP output (`mlx5_ifc_query_qp_out_bits`): the QP context at 0x18 and the PAS array
    /// from `PAS_OFFSET`.
    pub struct QueryQpOut("query_qp_out", 0x110) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// Optional parameters present in the context (see [`crate::ctx::opt_param`]).
        opt_param_mask / set_opt_param_mask: u32 = dw(0x10, 31, 0);
        /// Enhanced connection establishment options (0 when unused).
        ece / set_ece: u32 = dw(0x14, 31, 0);
        /// QP context.
        qpc / qpc_mut: Qpc = nested(0x18);
    }
}

impl QueryQpOut {
    /// Byte offset of the `pas` flexible array that follows the fixed part.
    pub const PAS_OFFSET: usize = 0x110;
}

cmd_pair!(QueryQpIn, QueryQpOut, QueryQp);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PrmLayout;
    use crate::ctx::{QpState, opt_param};
    use zerocopy::IntoBytes;

    #[test]
    fn modify_commands_share_one_shape() {
        let mut i = Init2RtrQpIn::new_cmd();
        i.set_qpn(0x1234);
        i.set_opt_param_mask(opt_param::RRE | opt_param::PRIMARY_ADDR_PATH);
        i.qpc_mut().set_mtu(3);
        i.qpc_mut().set_remote_qpn(0x11);
        let b = i.as_bytes();
        assert_eq!(&b[0..2], &[0x05, 0x03]);
        assert_eq!(&b[0x08..0x0C], &[0, 0, 0x12, 0x34]);
        assert_eq!(&b[0x10..0x14], &[0, 0, 0, 0x82]);
        assert_eq!(b[0x18 + 0x08] >> 5, 3);
        assert_eq!(Init2RtrQpIn::SIZE, 0x110);
        assert_eq!(CreateQpIn::PAS_OFFSET, 0x110);
        let mut q = QueryQpOut::default();
        q.qpc_mut().set_state(QpState::Rts.into());
        assert_eq!(QpState::try_from(q.qpc().state()), Ok(QpState::Rts));
        assert_eq!(Qp2ErrIn::new_cmd().as_bytes()[0..2], [0x05, 0x07]);
        assert_eq!(Qp2RstIn::new_cmd().as_bytes()[0..2], [0x05, 0x0A]);
    }
}
