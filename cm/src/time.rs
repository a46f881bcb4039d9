//! The CM's time: an [`Instant`] the caller supplies (real or virtual, the endpoint never
//! reads a clock), and IBTA's time encoding, 4.096 us x 2^exponent (Vol. 1, 12.6), with the
//! local ACK timeout the kernel's CM derives from it.

use core::ops::{Add, Sub};
use core::time::Duration;

/// A point in time on the caller's clock, in nanoseconds since the caller's epoch.
///
/// ```
/// use core::time::Duration;
/// use rnic_cm::time::Instant;
/// let t = Instant::from_nanos(1_000) + Duration::from_micros(1);
/// assert_eq!(t.as_nanos(), 2_000);
/// assert_eq!(t - Instant::ZERO, Duration::from_nanos(2_000));
/// assert_eq!(Instant::ZERO - t, Duration::ZERO);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant {
    nanos: u64,
}

impl Instant {
    /// The epoch.
    pub const ZERO: Instant = Instant { nanos: 0 };

    /// `nanos` nanoseconds after the epoch.
    pub const fn from_nanos(nanos: u64) -> Instant {
        Instant { nanos }
    }

    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.nanos
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;

    /// Saturates at the end of time rather than wrapping.
    fn add(self, d: Duration) -> Instant {
        let d = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Instant {
            nanos: self.nanos.saturating_add(d),
        }
    }
}

impl Sub for Instant {
    type Output = Duration;

    /// Zero when `rhs` is later.
    fn sub(self, rhs: Instant) -> Duration {
        Duration::from_nanos(self.nanos.saturating_sub(rhs.nanos))
    }
}

/// IBTA's encoded time: 4.096 us x 2^`exponent` (exponents above 31 read as 31, the
/// largest a 5-bit field holds).
///
/// ```
/// use core::time::Duration;
/// use rnic_cm::time::iba_time;
/// assert_eq!(iba_time(0), Duration::from_nanos(4_096));
/// assert_eq!(iba_time(20), Duration::from_nanos(4_096 << 20)); // rdma_cm's 4.29 s
/// assert_eq!(iba_time(40), iba_time(31));
/// ```
pub const fn iba_time(exponent: u8) -> Duration {
    let e = if exponent > 31 { 31 } else { exponent };
    Duration::from_nanos(4_096u64 << e)
}

/// The local ACK timeout for a path of `packet_life_time` to a CA whose ACK delay is
/// `ca_ack_delay` (both encoded): 4.096 us x 2^t >= ACK delay + 2 x packet life time, as
/// the kernel's `cm_ack_timeout` rounds it (the larger of the two terms, one more when the
/// other is within a factor of two), at most 31.
///
/// ```
/// use rnic_cm::time::ack_timeout;
/// // rdma_cm's RoCE packet life time (18) to an rxe peer (ACK delay 15): the kernel's 19.
/// assert_eq!(ack_timeout(15, 18), 19);
/// assert_eq!(ack_timeout(19, 18), 20);
/// assert_eq!(ack_timeout(25, 10), 25);
/// assert_eq!(ack_timeout(0, 31), 31);
/// ```
pub const fn ack_timeout(ca_ack_delay: u8, packet_life_time: u8) -> u8 {
    let life = packet_life_time as u16 + 1;
    let delay = ca_ack_delay as u16;
    let t = if life >= delay {
        life + (delay + 1 >= life) as u16
    } else {
        delay + (life + 1 >= delay) as u16
    };
    if t > 31 { 31 } else { t as u8 }
}
