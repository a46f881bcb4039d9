//! UAR doorbells: send doorbells (0x800 / 0x900), CQ arm (0x20), EQ doorbells (0x40 / 0x48).

use crate::device::Ctx;

/// A write to UAR page `uar` at `offset`.
pub(crate) fn uar_write(ctx: &mut Ctx<'_>, uar: u32, offset: usize, value: u64, width: u8) {
    let _ = (uar, offset, value, width);
    // Not routed yet: counted so tests see that the doorbell went nowhere.
    ctx.st.counters.bad_doorbells += 1;
}
