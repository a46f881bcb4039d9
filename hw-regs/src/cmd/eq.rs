//! Event queue commands: CREATE_EQ, DESTROY_EQ, QUERY_EQ and GEN_EQE. There is no MAP_EQ in
//! mlx5: CREATE_EQ's `event_bitmask` selects the events.

use crate::ctx::Eqc;

prm_layout! {
    /// CREATE_EQ input (`mlx5_ifc_create_eq_in_bits`): the EQ context at 0x10, the event bitmask at
    /// 0x58 and the PAS array (BE64 page addresses) from `PAS_OFFSET` = 0x110.
    pub struct CreateEqIn("create_eq_in", 0x110) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// EQ context.
        eq_context_entry / eq_context_entry_mut: Eqc = nested(0x10);
        /// Event types delivered to this EQ: word t/64 (BE64), bit t%64.
        event_bitmask / set_event_bitmask: [u8; 32] = bytes(0x58, 32);
    }
}

impl CreateEqIn {
    /// Byte offset of the `pas` flexible array that follows the fixed part.
    pub const PAS_OFFSET: usize = 0x110;
}

prm_layout! {
    /// CREATE_EQ output (`mlx5_ifc_create_eq_out_bits`).
    pub struct CreateEqOut("create_eq_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// EQ number.
        eq_number / set_eq_number: u8 = dw(0x08, 7, 0);
    }
}

cmd_pair!(CreateEqIn, CreateEqOut, CreateEq);

prm_layout! {
    /// DESTROY_EQ input (`mlx5_ifc_destroy_eq_in_bits`).
    pub struct DestroyEqIn("destroy_eq_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// EQ number.
        eq_number / set_eq_number: u8 = dw(0x08, 7, 0);
    }
}

prm_layout! {
    /// DESTROY_EQ output (`mlx5_ifc_destroy_eq_out_bits`).
    pub struct DestroyEqOut("destroy_eq_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(DestroyEqIn, DestroyEqOut, DestroyEq);

prm_layout! {
    /// QUERY_EQ input (`mlx5_ifc_query_eq_in_bits`).
    pub struct QueryEqIn("query_eq_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// EQ number.
        eq_number / set_eq_number: u8 = dw(0x08, 7, 0);
    }
}

prm_layout! {
    /// QUERY_EQ output (`mlx5_ifc_query_eq_out_bits`): the EQ context, the first 64 bits of the
    /// event bitmask and the PAS array from `PAS_OFFSET`.
    pub struct QueryEqOut("query_eq_out", 0x110) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// EQ context.
        eq_context_entry / eq_context_entry_mut: Eqc = nested(0x10);
        /// Event types 0..63 delivered to this EQ (bit t).
        event_bitmask / set_event_bitmask: u64 = qw(0x58);
    }
}

impl QueryEqOut {
    /// Byte offset of the `pas` flexible array that follows the fixed part.
    pub const PAS_OFFSET: usize = 0x110;
}

cmd_pair!(QueryEqIn, QueryEqOut, QueryEq);

prm_layout! {
    /// GEN_EQE input (`mlx5_ifc_gen_eqe_in_bits`, 0x50 bytes): asks firmware to write an EQE (a
    /// debugging aid).
    pub struct GenEqeIn("gen_eqe_in", 0x50) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// EQ number.
        eq_number / set_eq_number: u8 = dw(0x08, 7, 0);
        /// The 64-byte EQE to generate.
        eqe / set_eqe: [u8; 64] = bytes(0x10, 64);
    }
}

/// GEN_EQE output: the generic 8-byte command output ([`super::CmdHdrOut`]); `mlx5_ifc.h`
/// has no separate structure for it.
pub type GenEqeOut = super::CmdHdrOut;
cmd_pair!(GenEqeIn, GenEqeOut, GenEqe);

impl CreateEqIn {
    /// Whether event type `t` (an [`EventType`](crate::eqe::EventType) code; any code can be selected) is in
    /// `event_bitmask` (word t/64, bit t%64).
    pub fn event(&self, t: u8) -> bool {
        let w = 0x58 + usize::from(t / 64) * 8;
        let word = u64::from_be_bytes(self.0[w..w + 8].try_into().unwrap_or([0; 8]));
        word & (1 << (t % 64)) != 0
    }

    /// Selects (or deselects) event type `t` (an [`EventType`](crate::eqe::EventType) code) in `event_bitmask`.
    pub fn set_event(&mut self, t: u8, on: bool) {
        let w = 0x58 + usize::from(t / 64) * 8;
        let mut word = u64::from_be_bytes(self.0[w..w + 8].try_into().unwrap_or([0; 8]));
        if on {
            word |= 1 << (t % 64);
        } else {
            word &= !(1 << (t % 64));
        }
        self.0[w..w + 8].copy_from_slice(&word.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PrmLayout;
    use crate::eqe::EventType;
    use zerocopy::{FromZeros, IntoBytes};

    #[test]
    fn create_eq_layout() {
        let mut i = CreateEqIn::new_cmd();
        i.eq_context_entry_mut().set_log_eq_size(7);
        i.eq_context_entry_mut().set_uar_page(0x10);
        i.set_event(EventType::PageRequest.raw(), true);
        i.set_event(EventType::Cmd.raw(), true);
        let b = i.as_bytes();
        assert_eq!(&b[0..2], &[0x03, 0x01]);
        assert_eq!(&b[0x1C..0x20], &[0x07, 0, 0, 0x10]);
        assert_eq!(&b[0x58..0x60], &0x0C00u64.to_be_bytes());
        assert!(i.event(EventType::PageRequest.raw()));
        assert!(!i.event(EventType::Completion.raw()));
        assert_eq!(CreateEqIn::PAS_OFFSET, 0x110);
        let mut o = CreateEqOut::new_zeroed();
        o.set_eq_number(7);
        assert_eq!(o.as_bytes()[0x0B], 7);
        assert_eq!(Eqc::SIZE, 0x40);
    }
}
