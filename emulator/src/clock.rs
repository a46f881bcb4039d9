//! Device time: real (threaded mode) or virtual (deterministic mode, advanced by the test).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The device's notion of now, in nanoseconds since the device was created.
///
/// In deterministic mode time only moves when the test calls [`Clock::advance`], so timers
/// (health counter, retransmission) fire at exactly the same points on every run.
///
/// ```
/// use rnic_emulator::Clock;
///
/// let c = Clock::virtual_at_zero();
/// let handle = c.clone(); // every handle shares the same time
/// handle.advance(1_000);
/// assert_eq!(c.now_ns(), 1_000);
/// ```
#[derive(Clone, Debug)]
pub enum Clock {
    /// Wall-clock time.
    Real(Instant),
    /// Virtual time, shared by every handle of the clock.
    Virtual(Arc<AtomicU64>),
}

impl Clock {
    /// A real clock starting now.
    ///
    /// ```
    /// use rnic_emulator::Clock;
    ///
    /// let c = Clock::real();
    /// assert!(!c.is_virtual());
    /// c.advance(1_000_000_000_000); // ignored
    /// assert!(c.now_ns() < 1_000_000_000_000);
    /// ```
    pub fn real() -> Self {
        Clock::Real(Instant::now())
    }

    /// A virtual clock at 0.
    ///
    /// ```
    /// use rnic_emulator::Clock;
    ///
    /// let c = Clock::virtual_at_zero();
    /// assert!(c.is_virtual());
    /// assert_eq!(c.now_ns(), 0);
    /// ```
    pub fn virtual_at_zero() -> Self {
        Clock::Virtual(Arc::new(AtomicU64::new(0)))
    }

    /// Nanoseconds since the clock started.
    ///
    /// ```
    /// use rnic_emulator::Clock;
    ///
    /// let c = Clock::virtual_at_zero();
    /// c.advance(250);
    /// assert_eq!(c.now_ns(), 250);
    /// ```
    pub fn now_ns(&self) -> u64 {
        match self {
            Clock::Real(start) => u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX),
            Clock::Virtual(t) => t.load(Ordering::Acquire),
        }
    }

    /// Moves virtual time forward by `ns`; a real clock ignores it.
    ///
    /// ```
    /// use rnic_emulator::Clock;
    ///
    /// let c = Clock::virtual_at_zero();
    /// c.advance(100);
    /// c.advance(50);
    /// assert_eq!(c.now_ns(), 150);
    /// ```
    pub fn advance(&self, ns: u64) {
        if let Clock::Virtual(t) = self {
            t.fetch_add(ns, Ordering::AcqRel);
        }
    }

    /// Whether this is a virtual clock.
    ///
    /// ```
    /// use rnic_emulator::Clock;
    ///
    /// assert!(Clock::virtual_at_zero().is_virtual());
    /// assert!(!Clock::real().is_virtual());
    /// ```
    pub fn is_virtual(&self) -> bool {
        matches!(self, Clock::Virtual(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_time_moves_only_when_advanced() {
        let c = Clock::virtual_at_zero();
        let c2 = c.clone();
        assert_eq!(c.now_ns(), 0);
        c2.advance(1_500);
        assert_eq!(c.now_ns(), 1_500);
    }

    #[test]
    fn real_time_ignores_advance() {
        let c = Clock::real();
        c.advance(u64::MAX);
        assert!(c.now_ns() < 60_000_000_000);
    }
}
