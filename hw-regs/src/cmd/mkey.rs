//! Memory key commands: CREATE_MKEY, QUERY_MKEY, DESTROY_MKEY and QUERY_SPECIAL_CONTEXTS.
//!
//! A key is `(mkey_index << 8) | mkey_7_0`; lkey = rkey. DESTROY_MKEY takes `key >> 8`.

use crate::ctx::Mkc;

prm_layout! {
    /// CREATE_MKEY input (`mlx5_ifc_create_mkey_in_bits`): the mkey context at 0x10 and the
    /// translation array (MTT / KLM entries) from `KLM_PAS_MTT_OFFSET` = 0x110.
    pub struct CreateMkeyIn("create_mkey_in", 0x110) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Page-granular access (the mkey accesses pages through the translation list).
        pg_access / set_pg_access: bool = dw(0x0C, 31, 31);
        /// The translation list is a registered umem.
        mkey_umem_valid / set_mkey_umem_valid: bool = dw(0x0C, 30, 30);
        /// Memory key context.
        memory_key_mkey_entry / memory_key_mkey_entry_mut: Mkc = nested(0x10);
        /// Number of 16-byte translation entries (MTT pairs) that follow the input.
        translations_octword_actual_size / set_translations_octword_actual_size: u32 = dw(0x60, 31, 0);
        /// Umem ID holding the translation list (with `mkey_umem_valid`).
        mkey_umem_id / set_mkey_umem_id: u32 = dw(0x64, 31, 0);
    }
}

impl CreateMkeyIn {
    /// Byte offset of the `klm_pas_mtt` flexible array that follows the fixed part.
    pub const KLM_PAS_MTT_OFFSET: usize = 0x110;
}

prm_layout! {
    /// CREATE_MKEY output (`mlx5_ifc_create_mkey_out_bits`): the new mkey index.
    pub struct CreateMkeyOut("create_mkey_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// Memory key index (the key shifted right by 8).
        mkey_index / set_mkey_index: u32 = dw(0x08, 23, 0);
    }
}

cmd_pair!(CreateMkeyIn, CreateMkeyOut, CreateMkey);

prm_layout! {
    /// QUERY_MKEY input (`mlx5_ifc_query_mkey_in_bits`).
    pub struct QueryMkeyIn("query_mkey_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Memory key index (the key shifted right by 8).
        mkey_index / set_mkey_index: u32 = dw(0x08, 23, 0);
        /// Page-granular access (the mkey accesses pages through the translation list).
        pg_access / set_pg_access: bool = dw(0x0C, 31, 31);
    }
}

prm_layout! {
    /// QUERY_MKEY output (`mlx5_ifc_query_mkey_out_bits`, 0x130 bytes).
    pub struct QueryMkeyOut("query_mkey_out", 0x130) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// Memory key context.
        memory_key_mkey_entry / memory_key_mkey_entry_mut: Mkc = nested(0x10);
        /// First translation entries (MTT 0-1 / KLM 0 / BSF 0).
        bsf0_klm0_pas_mtt0_1 / set_bsf0_klm0_pas_mtt0_1: [u8; 16] = bytes(0x110, 16);
        /// Next translation entries (MTT 2-3 / KLM 1 / BSF 1).
        bsf1_klm1_pas_mtt2_3 / set_bsf1_klm1_pas_mtt2_3: [u8; 16] = bytes(0x120, 16);
    }
}

cmd_pair!(QueryMkeyIn, QueryMkeyOut, QueryMkey);

prm_layout! {
    /// DESTROY_MKEY input (`mlx5_ifc_destroy_mkey_in_bits`).
    pub struct DestroyMkeyIn("destroy_mkey_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Memory key index (the key shifted right by 8).
        mkey_index / set_mkey_index: u32 = dw(0x08, 23, 0);
    }
}

prm_layout! {
    /// DESTROY_MKEY output (`mlx5_ifc_destroy_mkey_out_bits`).
    pub struct DestroyMkeyOut("destroy_mkey_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(DestroyMkeyIn, DestroyMkeyOut, DestroyMkey);

prm_layout! {
    /// QUERY_SPECIAL_CONTEXTS input (`mlx5_ifc_query_special_contexts_in_bits`).
    pub struct QuerySpecialContextsIn("query_special_contexts_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
    }
}

prm_layout! {
    /// QUERY_SPECIAL_CONTEXTS output (`mlx5_ifc_query_special_contexts_out_bits`, 0x20 bytes): the
    /// reserved lkey and the special mkeys.
    pub struct QuerySpecialContextsOut("query_special_contexts_out", 0x20) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// Dump-fill mkey: reads through it return a fill pattern, writes are dropped.
        dump_fill_mkey / set_dump_fill_mkey: u32 = dw(0x08, 31, 0);
        /// Reserved lkey: a data segment with it addresses physical (bus) memory directly.
        resd_lkey / set_resd_lkey: u32 = dw(0x0C, 31, 0);
        /// Null mkey: scatter entries with it drop data.
        null_mkey / set_null_mkey: u32 = dw(0x10, 31, 0);
    }
}

cmd_pair!(
    QuerySpecialContextsIn,
    QuerySpecialContextsOut,
    QuerySpecialContexts
);

/// The key of an mkey: `(mkey_index << 8) | mkey_7_0`.
pub const fn mkey_key(mkey_index: u32, mkey_7_0: u8) -> u32 {
    (mkey_index << 8) | mkey_7_0 as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PrmLayout;
    use zerocopy::{FromZeros, IntoBytes};

    #[test]
    fn create_mkey_layout() {
        let mut i = CreateMkeyIn::new_cmd();
        i.set_pg_access(true);
        i.memory_key_mkey_entry_mut().set_pd(9);
        i.set_translations_octword_actual_size(2);
        let b = i.as_bytes();
        assert_eq!(&b[0..2], &[0x02, 0x00]);
        assert_eq!(b[0x0C], 0x80);
        assert_eq!(b[0x10 + 0x0F], 9);
        assert_eq!(&b[0x60..0x64], &[0, 0, 0, 2]);
        assert_eq!(CreateMkeyIn::KLM_PAS_MTT_OFFSET, 0x110);
        assert_eq!(mkey_key(0x12, 0x34), 0x1234);
    }

    #[test]
    fn special_contexts() {
        let mut o = QuerySpecialContextsOut::new_zeroed();
        o.set_dump_fill_mkey(1);
        o.set_resd_lkey(2);
        o.set_null_mkey(3);
        let b = o.as_bytes();
        assert_eq!((b[0x0B], b[0x0F], b[0x13]), (1, 2, 3));
        assert_eq!(QuerySpecialContextsOut::SIZE, 0x20);
    }
}
