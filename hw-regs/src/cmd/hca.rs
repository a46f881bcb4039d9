//! HCA life cycle commands: ENABLE_HCA, DISABLE_HCA, INIT_HCA, TEARDOWN_HCA, QUERY_ISSI,
//! SET_ISSI, QUERY_ADAPTER and NOP.

/// TEARDOWN_HCA `profile`: graceful teardown.
pub const TEARDOWN_HCA_PROFILE_GRACEFUL: u16 = 0;
/// TEARDOWN_HCA `profile`: force teardown (cap `force_teardown`).
pub const TEARDOWN_HCA_PROFILE_FORCE: u16 = 1;

prm_layout! {
    /// ENABLE_HCA input (`mlx5_ifc_enable_hca_in_bits`): the first command after the command queue
    /// is set up.
    pub struct EnableHcaIn("enable_hca_in", 0x10) {
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
    /// ENABLE_HCA output (`mlx5_ifc_enable_hca_out_bits`, 0xC bytes).
    pub struct EnableHcaOut("enable_hca_out", 0xC) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(EnableHcaIn, EnableHcaOut, EnableHca);

prm_layout! {
    /// DISABLE_HCA input (`mlx5_ifc_disable_hca_in_bits`): the last command of a teardown.
    pub struct DisableHcaIn("disable_hca_in", 0x10) {
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
    /// DISABLE_HCA output (`mlx5_ifc_disable_hca_out_bits`, 0xC bytes).
    pub struct DisableHcaOut("disable_hca_out", 0xC) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(DisableHcaIn, DisableHcaOut, DisableHca);

prm_layout! {
    /// INIT_HCA input (`mlx5_ifc_init_hca_in_bits`, 0x20 bytes): starts the HCA once boot and init
    /// pages are given; brings the link up unless cap `disable_link_up`.
    pub struct InitHcaIn("init_hca_in", 0x20) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Software-assigned vHCA ID.
        sw_vhca_id / set_sw_vhca_id: u16 = dw(0x0C, 29, 16);
        /// Software owner ID (128 bits) for software-steering ownership.
        sw_owner_id / set_sw_owner_id: [u8; 16] = bytes(0x10, 16);
    }
}

prm_layout! {
    /// INIT_HCA output (`mlx5_ifc_init_hca_out_bits`).
    pub struct InitHcaOut("init_hca_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(InitHcaIn, InitHcaOut, InitHca);

prm_layout! {
    /// TEARDOWN_HCA input (`mlx5_ifc_teardown_hca_in_bits`).
    pub struct TeardownHcaIn("teardown_hca_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Teardown profile: 0 graceful, 1 force (see
        /// [`TEARDOWN_HCA_PROFILE_FORCE`](crate::cmd::TEARDOWN_HCA_PROFILE_FORCE)).
        profile / set_profile: u16 = dw(0x08, 15, 0);
    }
}

prm_layout! {
    /// TEARDOWN_HCA output (`mlx5_ifc_teardown_hca_out_bits`).
    pub struct TeardownHcaOut("teardown_hca_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// Force-teardown result: 0 done, 1 failed.
        state / set_state: bool = dw(0x0C, 0, 0);
    }
}

cmd_pair!(TeardownHcaIn, TeardownHcaOut, TeardownHca);

prm_layout! {
    /// QUERY_ISSI input (`mlx5_ifc_query_issi_in_bits`).
    pub struct QueryIssiIn("query_issi_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
    }
}

prm_layout! {
    /// QUERY_ISSI output (`mlx5_ifc_query_issi_out_bits`, 0x70 bytes): the current ISSI and the
    /// supported ones.
    pub struct QueryIssiOut("query_issi_out", 0x70) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// Interface step sequence ID in use (set 1 to use ISSI 1 layouts).
        current_issi / set_current_issi: u16 = dw(0x08, 15, 0);
        /// Bit mask of supported ISSI values 0..31 (bit n = ISSI n; a ConnectX-4 reports 0x2).
        supported_issi_dw0 / set_supported_issi_dw0: u32 = dw(0x6C, 31, 0);
    }
}

cmd_pair!(QueryIssiIn, QueryIssiOut, QueryIssi);

prm_layout! {
    /// SET_ISSI input (`mlx5_ifc_set_issi_in_bits`): selects the interface step sequence ID (1).
    pub struct SetIssiIn("set_issi_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Interface step sequence ID in use (set 1 to use ISSI 1 layouts).
        current_issi / set_current_issi: u16 = dw(0x08, 15, 0);
    }
}

prm_layout! {
    /// SET_ISSI output (`mlx5_ifc_set_issi_out_bits`).
    pub struct SetIssiOut("set_issi_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(SetIssiIn, SetIssiOut, SetIssi);

prm_layout! {
    /// Adapter parameters returned by QUERY_ADAPTER (`mlx5_ifc_query_adapter_param_block_bits`,
    /// 0x100 bytes).
    pub struct QueryAdapterParamBlock("query_adapter_param_block", 0x100) {
        /// IEEE vendor ID of the adapter (0x0002C9 for Mellanox).
        ieee_vendor_id / set_ieee_vendor_id: u32 = dw(0x18, 23, 0);
        /// Vendor ID of the vendor-specific data.
        vsd_vendor_id / set_vsd_vendor_id: u16 = dw(0x1C, 15, 0);
        /// Vendor-specific data (208 bytes).
        vsd / set_vsd: [u8; 208] = bytes(0x20, 208);
        /// Parameter-set ID (PSID) of the firmware image, ASCII.
        vsd_contd_psid / set_vsd_contd_psid: [u8; 16] = bytes(0xF0, 16);
    }
}

prm_layout! {
    /// QUERY_ADAPTER input (`mlx5_ifc_query_adapter_in_bits`).
    pub struct QueryAdapterIn("query_adapter_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
    }
}

prm_layout! {
    /// QUERY_ADAPTER output (`mlx5_ifc_query_adapter_out_bits`, 0x110 bytes): vendor data and PSID.
    pub struct QueryAdapterOut("query_adapter_out", 0x110) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
        /// The adapter parameter block.
        query_adapter_struct / query_adapter_struct_mut: QueryAdapterParamBlock = nested(0x10);
    }
}

cmd_pair!(QueryAdapterIn, QueryAdapterOut, QueryAdapter);

prm_layout! {
    /// NOP input (`mlx5_ifc_nop_in_bits`): a command that does nothing (a health probe).
    pub struct NopIn("nop_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
    }
}

prm_layout! {
    /// NOP output (`mlx5_ifc_nop_out_bits`).
    pub struct NopOut("nop_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

cmd_pair!(NopIn, NopOut, Nop);

impl QueryIssiOut {
    /// Whether the device supports interface step sequence ID `issi` (0..=31).
    pub fn supports_issi(&self, issi: u32) -> bool {
        issi < 32 && self.supported_issi_dw0() & (1 << issi) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PrmLayout;
    use zerocopy::IntoBytes;

    #[test]
    fn query_issi_supported_mask_is_at_0x6c() {
        let mut o = QueryIssiOut::default();
        o.set_supported_issi_dw0(0x2);
        assert_eq!(&o.as_bytes()[0x6C..0x70], &[0, 0, 0, 2]);
        assert!(o.supports_issi(1));
        assert!(!o.supports_issi(0));
        assert_eq!(QueryIssiOut::SIZE, 0x70);
    }

    #[test]
    fn set_issi_and_teardown_fields() {
        let mut i = SetIssiIn::new_cmd();
        i.set_current_issi(1);
        assert_eq!(
            &i.as_bytes()[..0x0C],
            &[0x01, 0x0B, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
        );
        let mut t = TeardownHcaIn::new_cmd();
        t.set_profile(TEARDOWN_HCA_PROFILE_FORCE);
        assert_eq!(&t.as_bytes()[0x08..0x0C], &[0, 0, 0, 1]);
        assert_eq!(InitHcaIn::SIZE, 0x20);
        assert_eq!(EnableHcaOut::SIZE, 0x0C);
    }
}
