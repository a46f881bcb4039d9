//! ACCESS_REG: the HOST_ENDIANNESS register (0x7004), written (op_mod 0) or read (op_mod 1).
//! Other registers are BAD_PARAM.

use rnic_hw_regs::cmd::{
    AccessRegisterIn, AccessRegisterOut, REG_HOST_ENDIANNESS, RegisterHostEndianness, op_mod,
};
use rnic_hw_regs::status::CmdStatus;
use zerocopy::{FromBytes, IntoBytes};

use super::{Cmd, CmdResult, check_op_mod, fail, syndrome as syn};
use crate::ctx::Ctx;

/// ACCESS_REG.
pub(super) fn access_reg(ctx: &mut Ctx<'_>, cmd: &mut Cmd<'_>) -> CmdResult {
    check_op_mod(cmd, &[op_mod::ACCESS_REG_WRITE, op_mod::ACCESS_REG_READ])?;
    let i = cmd.fixed::<AccessRegisterIn>()?;
    if i.register_id() != REG_HOST_ENDIANNESS {
        return fail(CmdStatus::BadParam, syn::REG_UNSUPPORTED);
    }
    let at = AccessRegisterIn::REGISTER_DATA_OFFSET;
    let len = size_of::<RegisterHostEndianness>();
    if cmd.op_mod == op_mod::ACCESS_REG_WRITE {
        let Some(Ok(reg)) = cmd
            .input
            .get(at..at + len)
            .map(RegisterHostEndianness::read_from_bytes)
        else {
            return fail(CmdStatus::BadInputLength, syn::REG_DATA_SHORT);
        };
        cmd.output::<AccessRegisterOut>()?;
        ctx.state.hca.host_big_endian = reg.he();
    } else {
        cmd.output::<AccessRegisterOut>()?;
        let mut reg = RegisterHostEndianness::default();
        reg.set_he(ctx.state.hca.host_big_endian);
        let Some(slot) = cmd.output.get_mut(at..at + len) else {
            return fail(CmdStatus::BadOutputLength, syn::REG_OUTPUT_SHORT);
        };
        slot.copy_from_slice(reg.as_bytes());
    }
    Ok(())
}
