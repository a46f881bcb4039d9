//! UAR doorbells: send doorbells (0x800 / 0x900), CQ arm (0x20), EQ doorbells (0x40 / 0x48).
//!
//! A doorbell is only accepted on a UAR page the host allocated (ALLOC_UAR), for an object
//! created on that UAR, with the width the PRM gives it:
//!
//! | Offset | Width | Value | Goes to |
//! |---|---|---|---|
//! | 0x800, 0x900 | 64 | first 8 bytes of the last WQE's control segment (wqe_index, opcode, QPN, DS) | the QP's SQ engine ([`crate::sq::doorbell`]), or an SQ object's ([`crate::raw_sq::doorbell`]) |
//! | 0x20 | 64 | `arm word << 32 \| cqn` | [`crate::cq::arm`] |
//! | 0x40 | 32 | `eqn << 24 \| ci` | EQ consumer index update and arm ([`crate::eq::doorbell`]) |
//! | 0x48 | 32 | `eqn << 24 \| ci` | EQ consumer index update only |
//!
//! Anything else (another offset or width, an unallocated UAR, an unknown QP, CQ or EQ, an
//! object of another UAR) is counted in `counters.bad_doorbells` and dropped.

use rnic_hw_regs::doorbell::{
    UAR_CQ_ARM, UAR_EQ_UPDATE, UAR_EQ_UPDATE_ARM, UAR_SEND_DB_0, UAR_SEND_DB_1,
};

use crate::ctx::Ctx;

/// A write to UAR page `uar` at `offset`.
pub(crate) fn uar_write(ctx: &mut Ctx<'_>, uar: u32, offset: usize, value: u64, width: u8) {
    let accepted = ctx.state.res.uars.get(uar).is_some()
        && match (offset, width) {
            (UAR_SEND_DB_0 | UAR_SEND_DB_1, 8) => send_doorbell(ctx, uar, value),
            (UAR_CQ_ARM, 8) => crate::cq::arm(ctx, uar, value),
            (UAR_EQ_UPDATE_ARM, 4) => crate::eq::doorbell(ctx, uar, value as u32, true),
            (UAR_EQ_UPDATE, 4) => crate::eq::doorbell(ctx, uar, value as u32, false),
            _ => false,
        };
    if !accepted {
        ctx.state.counters.bad_doorbells += 1;
    }
}

/// A send doorbell: `value`'s QPN field names a QP or an SQ object (their numbers never
/// overlap, see [`crate::resources::FIRST_SQN`]).
fn send_doorbell(ctx: &mut Ctx<'_>, uar: u32, value: u64) -> bool {
    let n = ((value as u32) >> 8) & 0xFF_FFFF;
    if ctx.state.res.eth_sqs.get(n).is_some() {
        crate::raw_sq::doorbell(ctx, uar, n)
    } else {
        crate::sq::doorbell(ctx, uar, value)
    }
}
