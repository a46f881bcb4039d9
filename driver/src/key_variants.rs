//! The variant bytes of a device's memory keys: the low byte of every lkey / rkey, which the
//! PRM leaves to software. Drawn per device, so an attacker who can inject RoCE packets
//! cannot guess a key from the order regions were registered in.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU32, Ordering};

/// A device's sequence of key variant bytes: `start + n * step` for its n-th key, `step`
/// odd, so the values run through all 256 before repeating; 0 is skipped (MKey index 1
/// with variant 0 would be 0x100, the invalid lkey that ends a receive scatter list), so
/// 255 keys in a row all differ.
#[derive(Debug)]
pub(crate) struct KeyVariants {
    /// Keys created so far.
    n: AtomicU32,
    start: u8,
    step: u8,
}

impl KeyVariants {
    /// The sequence of `seed`, or of a seed drawn from the OS-seeded [`RandomState`].
    pub(crate) fn new(seed: Option<u64>) -> KeyVariants {
        let seed = seed.unwrap_or_else(|| RandomState::new().build_hasher().finish());
        KeyVariants {
            n: AtomicU32::new(0),
            start: seed as u8,
            step: (seed >> 8) as u8 | 1,
        }
    }

    /// The next variant byte (never 0).
    pub(crate) fn next(&self) -> u8 {
        loop {
            let n = self.n.fetch_add(1, Ordering::Relaxed) as u8;
            let v = self.start.wrapping_add(n.wrapping_mul(self.step));
            if v != 0 {
                return v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_run_through_all_255_non_zero_values_before_repeating() {
        for seed in [0, 1, 0xFF, 0x100, 0xDEAD_BEEF, u64::MAX] {
            let v = KeyVariants::new(Some(seed));
            let mut seen = [false; 256];
            seen[0] = true; // never a variant: index 1 would give the invalid lkey
            for _ in 0..255 {
                let b = usize::from(v.next());
                assert!(!seen[b], "seed {seed:#x}: variant {b:#x} twice or 0");
                seen[b] = true;
            }
        }
    }
}
