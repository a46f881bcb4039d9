//! The EQE writer: event queue entries with the owner-bit protocol, EQ full handling, and the
//! interrupt an armed EQ raises.
//!
//! EQE `pi` of an EQ of `2^log_size` entries goes to entry `pi & (N - 1)` with owner bit
//! `(pi >> log_size) & 1`: the driver initializes every owner bit to 1, so on the first pass
//! new entries carry 0, the value its consumer rule expects at `ci < N` (PRM section 5).
//! An EQ holding `N` unconsumed entries (relative to the consumer index of its last doorbell)
//! is full: the event is dropped and counted in `eq_overruns`, never written over an entry the
//! host has not consumed. An armed EQ raises its interrupt vector on the next EQE and is then
//! fired (no more interrupts until a doorbell at 0x40 re-arms it).

use rnic_hw_regs::PrmLayout;
use rnic_hw_regs::eqe::{EQE_SIZE, Eqe};
use zerocopy::IntoBytes;

use crate::ctx::Ctx;

/// Writes `eqe` (its event type, sub-type and data; the writer sets the owner bit) to the EQ
/// that subscribed to its event type (the lowest EQN when several did); false when no EQ did
/// or the EQ could not take it.
pub(crate) fn post_event(ctx: &mut Ctx<'_>, eqe: &Eqe) -> bool {
    let event_type = eqe.event_type();
    let word = usize::from(event_type / 64);
    let bit = event_type % 64;
    let eqn = ctx
        .state
        .res
        .eqs
        .iter()
        .find(|(_, eq)| eq.events.get(word).is_some_and(|w| (w >> bit) & 1 == 1))
        .map(|(n, _)| n);
    match eqn {
        Some(eqn) => write_eqe(ctx, eqn, eqe),
        None => false,
    }
}

/// Writes an EQE to EQ `eqn` (completion events go to the CQ's EQ whatever it subscribed to);
/// false when the EQ does not exist, is full, or its buffer faulted.
pub(crate) fn write_eqe(ctx: &mut Ctx<'_>, eqn: u32, eqe: &Eqe) -> bool {
    let Some(eq) = ctx.state.res.eqs.get_mut(eqn) else {
        return false;
    };
    let log = u32::from(eq.log_size.min(31));
    let n = 1u32 << log;
    if eq.pi.wrapping_sub(eq.ci) & 0xFF_FFFF >= n {
        ctx.state.counters.eq_overruns += 1;
        return false;
    }
    let mut e = *eqe;
    e.set_owner((eq.pi >> log) & 1 == 1);
    let slot = u64::from(eq.pi & (n - 1));
    let Some(iova) = eq.buf.iova(slot * EQE_SIZE as u64) else {
        ctx.state.counters.eq_overruns += 1;
        return false;
    };
    debug_assert_eq!(e.as_bytes().len(), Eqe::SIZE);
    if ctx.dma.write_owned(iova, e.as_bytes()).is_err() {
        ctx.state.counters.eq_overruns += 1;
        return false;
    }
    // Counters are 24 bits, like the consumer index the host writes.
    eq.pi = eq.pi.wrapping_add(1) & 0xFF_FFFF;
    if eq.armed {
        eq.armed = false;
        ctx.irqs.fire(eq.intr);
    }
    true
}

/// An EQ doorbell (UAR 0x40 update + arm, 0x48 update only): `value` is
/// `eqn << 24 | (ci & 0xFFFFFF)`. Returns false when the EQ does not exist or was created on
/// another UAR.
pub(crate) fn doorbell(ctx: &mut Ctx<'_>, uar: u32, value: u32, arm: bool) -> bool {
    let (eqn, ci) = rnic_hw_regs::doorbell::eq_doorbell_decode(value);
    let Some(eq) = ctx.state.res.eqs.get_mut(u32::from(eqn)) else {
        return false;
    };
    if eq.uar != uar {
        return false;
    }
    eq.ci = ci;
    if arm {
        if eq.pi != eq.ci {
            // Unconsumed EQEs: the interrupt fires at once and the EQ stays fired.
            eq.armed = false;
            ctx.irqs.fire(eq.intr);
        } else {
            eq.armed = true;
        }
    }
    true
}
