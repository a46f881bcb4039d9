//! Protection domain and UAR commands: ALLOC_PD, DEALLOC_PD, ALLOC_UAR, DEALLOC_UAR.

prm_layout! {
    /// ALLOC_PD input (`mlx5_ifc_alloc_pd_in_bits`).
    pub struct AllocPdIn("alloc_pd_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
    }
}

prm_layout! {
    /// ALLOC_PD output (`mlx5_ifc_alloc_pd_out_bits`): the new PD.
    pub struct AllocPdOut("alloc_pd_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// Protection domain number.
        pd / set_pd: u32 = dw(0x08, 23, 0);
    }
}

cmd_pair!(AllocPdIn, AllocPdOut, AllocPd);

prm_layout! {
    /// DEALLOC_PD input (`mlx5_ifc_dealloc_pd_in_bits`).
    pub struct DeallocPdIn("dealloc_pd_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Protection domain number.
        pd / set_pd: u32 = dw(0x08, 23, 0);
    }
}

prm_layout! {
    /// DEALLOC_PD output (`mlx5_ifc_dealloc_pd_out_bits`).
    pub struct DeallocPdOut("dealloc_pd_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(DeallocPdIn, DeallocPdOut, DeallocPd);

prm_layout! {
    /// ALLOC_UAR input (`mlx5_ifc_alloc_uar_in_bits`).
    pub struct AllocUarIn("alloc_uar_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
    }
}

prm_layout! {
    /// ALLOC_UAR output (`mlx5_ifc_alloc_uar_out_bits`): the UAR index; the page is at BAR0 + index
    /// * 4 KiB.
    pub struct AllocUarOut("alloc_uar_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// UAR page index.
        uar / set_uar: u32 = dw(0x08, 23, 0);
    }
}

cmd_pair!(AllocUarIn, AllocUarOut, AllocUar);

prm_layout! {
    /// DEALLOC_UAR input (`mlx5_ifc_dealloc_uar_in_bits`).
    pub struct DeallocUarIn("dealloc_uar_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// UAR page index.
        uar / set_uar: u32 = dw(0x08, 23, 0);
    }
}

prm_layout! {
    /// DEALLOC_UAR output (`mlx5_ifc_dealloc_uar_out_bits`).
    pub struct DeallocUarOut("dealloc_uar_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(DeallocUarIn, DeallocUarOut, DeallocUar);

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::{FromZeros, IntoBytes};

    #[test]
    fn alloc_uar_index_in_dw8() {
        let mut o = AllocUarOut::new_zeroed();
        o.set_uar(0x10);
        assert_eq!(&o.as_bytes()[0x08..0x0C], &[0, 0, 0, 0x10]);
        let mut i = DeallocPdIn::new_cmd();
        i.set_pd(0xABCDEF);
        assert_eq!(
            &i.as_bytes()[0..0x0C],
            &[0x08, 0x01, 0, 0, 0, 0, 0, 0, 0, 0xAB, 0xCD, 0xEF]
        );
    }
}
