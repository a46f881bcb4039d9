//! Firmware page commands: QUERY_PAGES and MANAGE_PAGES.
//!
//! Pages are 4 KiB. MANAGE_PAGES input (give) and output (take) carry BE64 page addresses
//! from byte 0x10 ([`ManagePagesIn::PAS_OFFSET`]), one per entry.

prm_layout! {
    /// QUERY_PAGES input (`mlx5_ifc_query_pages_in_bits`); op_mod 1 boot, 2 init, 3 regular (see
    /// [`op_mod`](crate::cmd::op_mod)).
    pub struct QueryPagesIn("query_pages_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// The command targets the embedded CPU (SmartNIC ARM) function.
        embedded_cpu_function / set_embedded_cpu_function: bool = dw(0x08, 31, 31);
        /// Function (vHCA) the command is about; 0 = this function.
        function_id / set_function_id: u16 = dw(0x08, 15, 0);
    }
}

prm_layout! {
    /// QUERY_PAGES output (`mlx5_ifc_query_pages_out_bits`).
    pub struct QueryPagesOut("query_pages_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// The command targets the embedded CPU (SmartNIC ARM) function.
        embedded_cpu_function / set_embedded_cpu_function: bool = dw(0x08, 31, 31);
        /// Function (vHCA) the command is about; 0 = this function.
        function_id / set_function_id: u16 = dw(0x08, 15, 0);
        /// Number of 4 KiB pages firmware asks for (signed: negative = pages to take back).
        num_pages / set_num_pages: u32 = dw(0x0C, 31, 0);
    }
}

cmd_pair!(QueryPagesIn, QueryPagesOut, QueryPages);

prm_layout! {
    /// MANAGE_PAGES input (`mlx5_ifc_manage_pages_in_bits`); op_mod 0 can't give, 1 give, 2 take
    /// (see [`op_mod`](crate::cmd::op_mod)). Give: `input_num_entries` BE64 page addresses follow
    /// at `PAS_OFFSET`; take: how many pages to take back.
    pub struct ManagePagesIn("manage_pages_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// The command targets the embedded CPU (SmartNIC ARM) function.
        embedded_cpu_function / set_embedded_cpu_function: bool = dw(0x08, 31, 31);
        /// Function (vHCA) the command is about; 0 = this function.
        function_id / set_function_id: u16 = dw(0x08, 15, 0);
        /// Number of BE64 page addresses following the input at `PAS_OFFSET`.
        input_num_entries / set_input_num_entries: u32 = dw(0x0C, 31, 0);
    }
}

impl ManagePagesIn {
    /// Byte offset of the `pas` flexible array that follows the fixed part.
    pub const PAS_OFFSET: usize = 0x10;
}

prm_layout! {
    /// MANAGE_PAGES output (`mlx5_ifc_manage_pages_out_bits`); for take, `output_num_entries` BE64
    /// addresses follow at `PAS_OFFSET`.
    pub struct ManagePagesOut("manage_pages_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// Number of BE64 page addresses returned at `PAS_OFFSET`.
        output_num_entries / set_output_num_entries: u32 = dw(0x08, 31, 0);
    }
}

impl ManagePagesOut {
    /// Byte offset of the `pas` flexible array that follows the fixed part.
    pub const PAS_OFFSET: usize = 0x10;
}

cmd_pair!(ManagePagesIn, ManagePagesOut, ManagePages);

impl QueryPagesOut {
    /// `num_pages` as the signed count it is (negative: firmware returns pages).
    pub fn num_pages_signed(&self) -> i32 {
        i32::from_be_bytes(self.num_pages().to_be_bytes())
    }

    /// Sets `num_pages` from a signed count.
    pub fn set_num_pages_signed(&mut self, n: i32) {
        self.set_num_pages(u32::from_be_bytes(n.to_be_bytes()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PrmLayout;
    use zerocopy::IntoBytes;

    #[test]
    fn manage_pages_layout() {
        let mut i = ManagePagesIn::new_cmd();
        i.set_op_mod(crate::cmd::op_mod::MANAGE_PAGES_GIVE);
        i.set_function_id(0);
        i.set_input_num_entries(6);
        let b = i.as_bytes();
        assert_eq!(&b[0..8], &[0x01, 0x08, 0, 0, 0, 0, 0, 1]);
        assert_eq!(&b[0x0C..0x10], &[0, 0, 0, 6]);
        assert_eq!(ManagePagesIn::PAS_OFFSET, 0x10);
        assert_eq!(ManagePagesOut::PAS_OFFSET, 0x10);
        assert_eq!(ManagePagesIn::SIZE, 0x10);
    }

    #[test]
    fn query_pages_signed_count() {
        let mut o = QueryPagesOut::default();
        o.set_num_pages_signed(-3);
        assert_eq!(&o.as_bytes()[0x0C..0x10], &[0xFF, 0xFF, 0xFF, 0xFD]);
        assert_eq!(o.num_pages_signed(), -3);
        o.set_num_pages(12_868);
        assert_eq!(o.num_pages_signed(), 12_868);
    }
}
