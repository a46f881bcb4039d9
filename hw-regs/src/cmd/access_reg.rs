//! ACCESS_REG (0x805): read or write a device register (`op_mod` 0 write, 1 read, see
//! [`super::op_mod`]), and the register layouts this crate uses. The register data follows the 0x10-byte header at
//! [`AccessRegisterIn::REGISTER_DATA_OFFSET`].

/// Register ID of HOST_ENDIANNESS ([`RegisterHostEndianness`]).
pub const REG_HOST_ENDIANNESS: u16 = 0x7004;

prm_layout! {
    /// ACCESS_REG input header (`mlx5_ifc_access_register_in_bits`, 0x10 bytes); the register data
    /// follows at `REGISTER_DATA_OFFSET`.
    pub struct AccessRegisterIn("access_register_in", 0x10) {
        /// Command opcode (see [`CmdOpcode`](crate::cmd::CmdOpcode)).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// vHCA tunnel ID (0 when not tunnelled).
        vhca_tunnel_id / set_vhca_tunnel_id: u16 = dw(0x04, 31, 16);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
        /// Register ID (e.g. [`REG_HOST_ENDIANNESS`](crate::cmd::REG_HOST_ENDIANNESS) = 0x7004).
        register_id / set_register_id: u16 = dw(0x08, 15, 0);
        /// Register-specific argument.
        argument / set_argument: u32 = dw(0x0C, 31, 0);
    }
}

impl AccessRegisterIn {
    /// Byte offset of the `register_data` flexible array that follows the fixed part.
    pub const REGISTER_DATA_OFFSET: usize = 0x10;
}

prm_layout! {
    /// ACCESS_REG output header (`mlx5_ifc_access_register_out_bits`, 0x10 bytes); the register
    /// data follows at `REGISTER_DATA_OFFSET`.
    pub struct AccessRegisterOut("access_register_out", 0x10) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

impl AccessRegisterOut {
    /// Byte offset of the `register_data` flexible array that follows the fixed part.
    pub const REGISTER_DATA_OFFSET: usize = 0x10;
}

cmd_pair!(AccessRegisterIn, AccessRegisterOut, AccessReg);

prm_layout! {
    /// HOST_ENDIANNESS register (0x7004, `mlx5_ifc_register_host_endianness_bits`, 0x10 bytes):
    /// tells firmware the host byte order.
    pub struct RegisterHostEndianness("register_host_endianness", 0x10) {
        /// Host endianness: 0 little-endian host, 1 big-endian host (byte 0 value 0x80).
        he / set_he: bool = dw(0x00, 31, 31);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    #[test]
    fn host_endianness_write() {
        let mut i = AccessRegisterIn::new_cmd();
        i.set_op_mod(crate::cmd::op_mod::ACCESS_REG_WRITE);
        i.set_register_id(REG_HOST_ENDIANNESS);
        assert_eq!(
            &i.as_bytes()[0..0x0C],
            &[0x08, 0x05, 0, 0, 0, 0, 0, 0, 0, 0, 0x70, 0x04]
        );
        let mut r = RegisterHostEndianness::default();
        r.set_he(true);
        assert_eq!(r.as_bytes()[0], 0x80);
        assert_eq!(AccessRegisterIn::REGISTER_DATA_OFFSET, 0x10);
    }
}
