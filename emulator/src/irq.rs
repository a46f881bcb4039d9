//! Interrupt vectors: the device fires a vector when it writes an EQE to an armed EQ; the host
//! waits on it through `Bus::wait_irq`.

use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Per-vector counts of fired and consumed interrupts.
#[derive(Debug, Default)]
pub(crate) struct Irqs {
    pending: Mutex<Vec<u64>>,
    cv: Condvar,
}

impl Irqs {
    /// Fires vector `v`.
    pub(crate) fn fire(&self, v: u16) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let i = usize::from(v);
        if p.len() <= i {
            p.resize(i + 1, 0);
        }
        p[i] += 1;
        self.cv.notify_all();
    }

    /// Consumes one pending interrupt on `v`, waiting up to `timeout` for it.
    pub(crate) fn wait(&self, v: u16, timeout: Duration) -> bool {
        let i = usize::from(v);
        let p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let (mut p, _) = self
            .cv
            .wait_timeout_while(p, timeout, |p| p.get(i).copied().unwrap_or(0) == 0)
            .unwrap_or_else(|e| e.into_inner());
        match p.get_mut(i) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fired_vector_is_consumed_once() {
        let irqs = Irqs::default();
        assert!(!irqs.wait(2, Duration::ZERO));
        irqs.fire(2);
        assert!(!irqs.wait(1, Duration::ZERO));
        assert!(irqs.wait(2, Duration::ZERO));
        assert!(!irqs.wait(2, Duration::from_millis(1)));
    }
}
