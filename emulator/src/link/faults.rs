//! Fault injection on any link: seeded, reproducible loss, duplication, reordering within a
//! bounded window, delay and corruption, with counters.
//!
//! Faults apply to the frames this end transmits (wrap both ends of a pair for both
//! directions). Per frame, in order: loss; corruption (one random bit flipped after the
//! Ethernet header, which the IP checksum or the ICRC catches, or which lands in a field that
//! changes nothing: TTL/TOS are covered by the IPv4 checksum, the UDP checksum and the BTH
//! FECN/BECN byte are ignored on receive); duplication (the frame goes out twice); reordering
//! (the frame is held back until 1 to `window` later frames have gone, or the device next
//! polls the link); delay (every frame waits `delay` on the device clock, order kept).
//!
//! The random numbers come from a SplitMix64 generator seeded by [`FaultConfig::seed`] and
//! drawn only per transmitted frame, so with a virtual clock (deterministic mode) the same
//! seed and the same traffic give the same packet trace.

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Link, LinkEnv};
use crate::Clock;

/// What to inject. Probabilities are per transmitted frame, between 0 and 1.
///
/// ```
/// use rnic_emulator::link::FaultConfig;
///
/// let cfg: FaultConfig = "loss=0.05,dup=0.01,delay=100us,seed=7".parse().unwrap();
/// assert_eq!((cfg.loss, cfg.dup, cfg.delay_ns, cfg.seed), (0.05, 0.01, 100_000, 7));
/// assert_eq!(cfg.reorder_window, 4); // the default
/// assert_eq!("".parse::<FaultConfig>(), Ok(FaultConfig::default())); // no faults
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FaultConfig {
    /// Probability a frame is lost.
    pub loss: f64,
    /// Probability a frame is sent twice.
    pub dup: f64,
    /// Probability a frame is held back behind later ones.
    pub reorder: f64,
    /// Probability one bit of a frame is flipped.
    pub corrupt: f64,
    /// How many later frames a reordered frame may fall behind (at least 1).
    pub reorder_window: u32,
    /// Delay added to every frame, in nanoseconds of device time.
    pub delay_ns: u64,
    /// Seed of the random generator.
    pub seed: u64,
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            loss: 0.0,
            dup: 0.0,
            reorder: 0.0,
            corrupt: 0.0,
            reorder_window: 4,
            delay_ns: 0,
            seed: 0,
        }
    }
}

/// Why a fault spec string did not parse.
///
/// ```
/// use rnic_emulator::link::{FaultConfig, FaultSpecError};
///
/// let err = |s: &str| s.parse::<FaultConfig>().unwrap_err();
/// assert_eq!(err("loss"), FaultSpecError::NotKeyValue("loss".into()));
/// assert_eq!(err("jitter=1"), FaultSpecError::UnknownKey("jitter".into()));
/// assert!(matches!(err("loss=1.5"), FaultSpecError::BadProbability { .. }));
/// assert_eq!(err("delay=5"), FaultSpecError::BadDuration("5".into()));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FaultSpecError {
    /// An item was not `key=value`.
    #[error("fault spec item {0:?} is not key=value")]
    NotKeyValue(String),
    /// An unknown key.
    #[error("unknown fault {0:?} (known: loss, dup, reorder, corrupt, window, delay, seed)")]
    UnknownKey(String),
    /// A probability that is not a number in [0, 1].
    #[error("{key}={value:?}: not a probability between 0 and 1")]
    BadProbability {
        /// The key.
        key: String,
        /// The value as written.
        value: String,
    },
    /// A bad integer (seed, window).
    #[error("{key}={value:?}: not a valid number")]
    BadNumber {
        /// The key.
        key: String,
        /// The value as written.
        value: String,
    },
    /// A bad duration (`delay`): a number followed by ns, us, ms or s.
    #[error("delay={0:?}: not a duration like 100us, 2ms, 500ns or 1s")]
    BadDuration(String),
}

impl FromStr for FaultConfig {
    type Err = FaultSpecError;

    /// Parses `loss=0.05,dup=0.01,reorder=0.01,corrupt=0.001,delay=100us,seed=7` (any
    /// subset, any order; `window=N` sets the reordering window; an empty string is no
    /// faults).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut c = FaultConfig::default();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| FaultSpecError::NotKeyValue(item.to_string()))?;
            let (k, v) = (k.trim(), v.trim());
            let prob = || -> Result<f64, FaultSpecError> {
                v.parse::<f64>()
                    .ok()
                    .filter(|p| (0.0..=1.0).contains(p))
                    .ok_or_else(|| FaultSpecError::BadProbability {
                        key: k.to_string(),
                        value: v.to_string(),
                    })
            };
            let num = || -> Result<u64, FaultSpecError> {
                v.parse::<u64>().map_err(|_| FaultSpecError::BadNumber {
                    key: k.to_string(),
                    value: v.to_string(),
                })
            };
            match k {
                "loss" => c.loss = prob()?,
                "dup" => c.dup = prob()?,
                "reorder" => c.reorder = prob()?,
                "corrupt" => c.corrupt = prob()?,
                "seed" => c.seed = num()?,
                "window" => {
                    c.reorder_window =
                        u32::try_from(num()?)
                            .ok()
                            .filter(|w| *w >= 1)
                            .ok_or_else(|| FaultSpecError::BadNumber {
                                key: k.to_string(),
                                value: v.to_string(),
                            })?;
                }
                "delay" => c.delay_ns = parse_duration_ns(v)?,
                _ => return Err(FaultSpecError::UnknownKey(k.to_string())),
            }
        }
        Ok(c)
    }
}

fn parse_duration_ns(v: &str) -> Result<u64, FaultSpecError> {
    let bad = || FaultSpecError::BadDuration(v.to_string());
    let split = v.find(|c: char| c.is_ascii_alphabetic()).ok_or_else(bad)?;
    let (n, unit) = v.split_at(split);
    let n: f64 = n.trim().parse().map_err(|_| bad())?;
    let scale = match unit {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return Err(bad()),
    };
    let ns = n * scale;
    if !(0.0..1.8e19).contains(&ns) {
        return Err(bad());
    }
    Ok(ns as u64)
}

/// Live fault counters, shared between a [`FaultyLink`] and whoever watches it.
///
/// ```
/// use rnic_emulator::link::{FaultConfig, FaultyLink, InProcLink, Link};
///
/// let (a, _b) = InProcLink::pair();
/// let mut link = FaultyLink::new(a, FaultConfig { loss: 1.0, ..FaultConfig::default() });
/// let stats = link.stats(); // keep a handle before the link moves into a device
/// link.transmit(&[0; 60]);
/// assert_eq!((stats.snapshot().frames, stats.snapshot().lost), (1, 1));
/// ```
#[derive(Debug, Default)]
pub struct FaultStats {
    frames: AtomicU64,
    lost: AtomicU64,
    duplicated: AtomicU64,
    reordered: AtomicU64,
    delayed: AtomicU64,
    corrupted: AtomicU64,
}

/// A snapshot of [`FaultStats`].
///
/// ```
/// use rnic_emulator::link::FaultCounters;
///
/// let c = FaultCounters { frames: 10, lost: 2, ..FaultCounters::default() };
/// assert_eq!(c.to_string(), "frames=10 lost=2 duplicated=0 reordered=0 delayed=0 corrupted=0");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounters {
    /// Frames given to the faulty link.
    pub frames: u64,
    /// Frames lost.
    pub lost: u64,
    /// Frames sent twice.
    pub duplicated: u64,
    /// Frames held back behind later ones.
    pub reordered: u64,
    /// Frames delayed.
    pub delayed: u64,
    /// Frames with a bit flipped.
    pub corrupted: u64,
}

impl fmt::Display for FaultCounters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "frames={} lost={} duplicated={} reordered={} delayed={} corrupted={}",
            self.frames, self.lost, self.duplicated, self.reordered, self.delayed, self.corrupted
        )
    }
}

impl FaultStats {
    /// The counters now.
    ///
    /// ```
    /// use rnic_emulator::link::{FaultConfig, FaultyLink, InProcLink, Link};
    ///
    /// let (a, _b) = InProcLink::pair();
    /// let mut link = FaultyLink::new(a, FaultConfig { dup: 1.0, ..FaultConfig::default() });
    /// link.transmit(&[0; 60]);
    /// let s = link.stats().snapshot();
    /// assert_eq!((s.frames, s.duplicated), (1, 1));
    /// ```
    pub fn snapshot(&self) -> FaultCounters {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        FaultCounters {
            frames: l(&self.frames),
            lost: l(&self.lost),
            duplicated: l(&self.duplicated),
            reordered: l(&self.reordered),
            delayed: l(&self.delayed),
            corrupted: l(&self.corrupted),
        }
    }
}

fn bump(a: &AtomicU64) {
    a.fetch_add(1, Ordering::Relaxed);
}

/// SplitMix64: small, fast, and the same everywhere. The fault injector draws from it; tests
/// and campaigns use it too, to draw reproducible workloads from a seed.
///
/// ```
/// use rnic_emulator::link::SplitMix64;
///
/// let (mut a, mut b) = (SplitMix64::new(7), SplitMix64::new(7));
/// assert_eq!(a.next_u64(), b.next_u64()); // one seed, one sequence
/// assert!(a.below(10) < 10);
/// assert!(!a.chance(0.0) && a.chance(1.0));
/// ```
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// The generator seeded by `seed`.
    pub const fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// True with probability `p` (never for `p <= 0`, always for `p >= 1`).
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && ((self.next_u64() >> 11) as f64) < p * (1u64 << 53) as f64
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }
}

/// A frame held back for reordering: it goes after `after` more frames.
#[derive(Debug)]
struct Held {
    after: u32,
    frame: Vec<u8>,
}

/// A link with faults injected on what it transmits (see the module docs).
///
/// ```
/// use rnic_emulator::link::{FaultyLink, InProcLink, Link};
///
/// let (a, b) = InProcLink::pair();
/// let mut link = FaultyLink::new(a, "dup=1".parse().unwrap());
/// link.transmit(&[0; 60]);
/// assert_eq!(b.pending(), 2); // every frame sent twice
/// ```
#[derive(Debug)]
pub struct FaultyLink<L: Link> {
    inner: L,
    cfg: FaultConfig,
    rng: SplitMix64,
    clock: Clock,
    reorder: Vec<Held>,
    delayed: VecDeque<(u64, Vec<u8>)>,
    pool: Vec<Vec<u8>>,
    stats: Arc<FaultStats>,
}

impl<L: Link> FaultyLink<L> {
    /// Wraps `inner` with the faults of `cfg`.
    ///
    /// ```
    /// use rnic_emulator::link::{FaultyLink, InProcLink, Link};
    ///
    /// // Same seed, same traffic: the same frames are lost.
    /// let lost = |seed: u64| {
    ///     let (a, _b) = InProcLink::pair();
    ///     let mut l = FaultyLink::new(a, format!("loss=0.5,seed={seed}").parse().unwrap());
    ///     (0..64).map(|_| { l.transmit(&[0; 60]); l.stats().snapshot().lost }).collect::<Vec<_>>()
    /// };
    /// assert_eq!(lost(7), lost(7));
    /// ```
    pub fn new(inner: L, cfg: FaultConfig) -> Self {
        FaultyLink {
            inner,
            rng: SplitMix64::new(cfg.seed),
            cfg,
            clock: Clock::real(),
            reorder: Vec::new(),
            delayed: VecDeque::new(),
            pool: Vec::new(),
            stats: Arc::default(),
        }
    }

    /// The live counters (keep the handle: the link itself goes into the device).
    ///
    /// ```
    /// use rnic_emulator::link::{FaultyLink, InProcLink};
    /// use rnic_emulator::{Device, Profile, RunMode};
    ///
    /// let (a, _b) = InProcLink::pair();
    /// let link = FaultyLink::new(a, "loss=0.1,seed=3".parse().unwrap());
    /// let stats = link.stats();
    /// let _dev = Device::with_link(Profile::default(), RunMode::Deterministic, link);
    /// assert_eq!(stats.snapshot().frames, 0); // the device has sent nothing yet
    /// ```
    pub fn stats(&self) -> Arc<FaultStats> {
        Arc::clone(&self.stats)
    }

    /// The configuration.
    ///
    /// ```
    /// use rnic_emulator::link::{FaultyLink, NullLink};
    ///
    /// let link = FaultyLink::new(NullLink::default(), "corrupt=0.001,window=8".parse().unwrap());
    /// assert_eq!((link.config().corrupt, link.config().reorder_window), (0.001, 8));
    /// ```
    pub fn config(&self) -> &FaultConfig {
        &self.cfg
    }

    fn buffer(&mut self, frame: &[u8]) -> Vec<u8> {
        let mut b = self.pool.pop().unwrap_or_default();
        b.clear();
        b.extend_from_slice(frame);
        b
    }

    /// Sends now, or after the delay.
    fn emit(&mut self, frame: Vec<u8>) {
        if self.cfg.delay_ns > 0 {
            bump(&self.stats.delayed);
            let at = self.clock.now_ns().saturating_add(self.cfg.delay_ns);
            self.delayed.push_back((at, frame));
        } else {
            let spare = self.inner.transmit_owned(frame);
            self.recycle(spare);
        }
    }

    fn recycle(&mut self, b: Vec<u8>) {
        if self.pool.len() < 64 {
            self.pool.push(b);
        }
    }

    /// Releases delayed frames that are due and, when `all_held`, every reordered frame.
    fn release(&mut self, all_held: bool) {
        if all_held && !self.reorder.is_empty() {
            let held = std::mem::take(&mut self.reorder);
            for h in held {
                self.emit(h.frame);
            }
        }
        if !self.delayed.is_empty() {
            let now = self.clock.now_ns();
            while self.delayed.front().is_some_and(|(at, _)| *at <= now) {
                if let Some((_, f)) = self.delayed.pop_front() {
                    self.inner.transmit(&f);
                    self.recycle(f);
                }
            }
        }
    }
}

impl<L: Link> Link for FaultyLink<L> {
    fn transmit(&mut self, frame: &[u8]) {
        bump(&self.stats.frames);
        self.release(false);
        let lost = self.rng.chance(self.cfg.loss);
        let corrupt = self.rng.chance(self.cfg.corrupt);
        let dup = self.rng.chance(self.cfg.dup);
        let reorder = self.rng.chance(self.cfg.reorder);
        let r = self.rng.next_u64();
        if lost {
            bump(&self.stats.lost);
        } else {
            let mut b = self.buffer(frame);
            if corrupt && b.len() > 14 {
                bump(&self.stats.corrupted);
                let bits = (b.len() as u64 - 14) * 8;
                let bit = r % bits;
                b[14 + (bit / 8) as usize] ^= 1 << (bit % 8);
            }
            let copies = if dup {
                bump(&self.stats.duplicated);
                2
            } else {
                1
            };
            for k in 0..copies {
                let f = if k + 1 == copies {
                    std::mem::take(&mut b)
                } else {
                    self.buffer(&b)
                };
                if reorder && k == 0 {
                    bump(&self.stats.reordered);
                    let after = 1 + self.rng.below(u64::from(self.cfg.reorder_window)) as u32;
                    self.reorder.push(Held { after, frame: f });
                    continue;
                }
                self.emit(f);
                // Frames held for reordering go once enough later frames have passed.
                let mut i = 0;
                while i < self.reorder.len() {
                    self.reorder[i].after -= 1;
                    if self.reorder[i].after == 0 {
                        let h = self.reorder.remove(i);
                        self.emit(h.frame);
                    } else {
                        i += 1;
                    }
                }
            }
        }
    }

    fn receive(&mut self, buf: &mut Vec<u8>) -> bool {
        self.release(true);
        self.inner.receive(buf)
    }

    fn flush(&mut self) {
        self.inner.flush();
    }

    fn attach(&mut self, env: &LinkEnv) {
        self.clock = env.clock.clone();
        self.inner.attach(env);
    }

    fn next_deadline_ns(&self) -> Option<u64> {
        let own = if self.reorder.is_empty() {
            self.delayed.front().map(|(at, _)| *at)
        } else {
            Some(self.clock.now_ns())
        };
        match (own, self.inner.next_deadline_ns()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn rx_ip_header_exact(&self) -> bool {
        self.inner.rx_ip_header_exact()
    }
    fn rx_drops(&self) -> super::LinkRxDrops {
        self.inner.rx_drops()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::InProcLink;

    #[test]
    fn spec_parses_and_rejects_with_typed_errors() {
        let c: FaultConfig = "loss=0.05,dup=0.01,reorder=0.01,corrupt=0.001,delay=100us,seed=7"
            .parse()
            .unwrap();
        assert_eq!(c.loss, 0.05);
        assert_eq!(c.dup, 0.01);
        assert_eq!(c.reorder, 0.01);
        assert_eq!(c.corrupt, 0.001);
        assert_eq!(c.delay_ns, 100_000);
        assert_eq!(c.seed, 7);
        assert_eq!("".parse::<FaultConfig>().unwrap(), FaultConfig::default());
        assert_eq!(
            "window=8, delay=2ms".parse::<FaultConfig>().unwrap(),
            FaultConfig {
                reorder_window: 8,
                delay_ns: 2_000_000,
                ..FaultConfig::default()
            }
        );
        assert!(matches!(
            "loss".parse::<FaultConfig>(),
            Err(FaultSpecError::NotKeyValue(_))
        ));
        assert!(matches!(
            "jitter=1".parse::<FaultConfig>(),
            Err(FaultSpecError::UnknownKey(_))
        ));
        assert!(matches!(
            "loss=1.5".parse::<FaultConfig>(),
            Err(FaultSpecError::BadProbability { .. })
        ));
        assert!(matches!(
            "loss=abc".parse::<FaultConfig>(),
            Err(FaultSpecError::BadProbability { .. })
        ));
        assert!(matches!(
            "seed=-1".parse::<FaultConfig>(),
            Err(FaultSpecError::BadNumber { .. })
        ));
        assert!(matches!(
            "window=0".parse::<FaultConfig>(),
            Err(FaultSpecError::BadNumber { .. })
        ));
        for d in ["delay=5", "delay=5min", "delay=us", "delay=-1ms"] {
            assert!(
                matches!(
                    d.parse::<FaultConfig>(),
                    Err(FaultSpecError::BadDuration(_))
                ),
                "{d}"
            );
        }
    }

    fn run(cfg: FaultConfig) -> (Vec<Vec<u8>>, FaultCounters) {
        let (a, mut b) = InProcLink::pair();
        let mut f = FaultyLink::new(a, cfg);
        let stats = f.stats();
        f.attach(&LinkEnv {
            clock: Clock::virtual_at_zero(),
            waker: Default::default(),
        });
        let mut out = Vec::new();
        let mut buf = Vec::new();
        for i in 0..10_000u32 {
            let mut frame = vec![0u8; 60];
            frame[20..24].copy_from_slice(&i.to_be_bytes());
            f.transmit(&frame);
            if i % 7 == 0 {
                f.receive(&mut buf);
            }
        }
        f.receive(&mut buf);
        while b.receive(&mut buf) {
            out.push(buf.clone());
        }
        (out, stats.snapshot())
    }

    #[test]
    fn faults_follow_the_seed_and_the_rates() {
        let cfg: FaultConfig = "loss=0.05,dup=0.01,reorder=0.01,corrupt=0.001,seed=42"
            .parse()
            .unwrap();
        let (t1, c1) = run(cfg);
        let (t2, c2) = run(cfg);
        assert_eq!(t1, t2, "same seed, same trace");
        assert_eq!(c1, c2);
        assert_eq!(c1.frames, 10_000);
        assert!((400..600).contains(&c1.lost), "{c1}");
        assert!((50..150).contains(&c1.duplicated), "{c1}");
        assert!((50..150).contains(&c1.reordered), "{c1}");
        assert!(c1.corrupted <= 30, "{c1}");
        assert_eq!(t1.len() as u64, c1.frames - c1.lost + c1.duplicated);
        let (t3, _) = run(FaultConfig { seed: 43, ..cfg });
        assert_ne!(t1, t3, "another seed, another trace");
        // Out of order somewhere, but never by more than the window (plus the burst).
        let seq: Vec<u32> = t1
            .iter()
            .map(|f| u32::from_be_bytes(f[20..24].try_into().unwrap()))
            .collect();
        assert!(seq.windows(2).any(|w| w[1] < w[0]));
    }

    #[test]
    fn delay_waits_for_the_device_clock() {
        let (a, mut b) = InProcLink::pair();
        let mut f = FaultyLink::new(a, "delay=100us".parse().unwrap());
        let clock = Clock::virtual_at_zero();
        f.attach(&LinkEnv {
            clock: clock.clone(),
            waker: Default::default(),
        });
        let mut buf = Vec::new();
        f.transmit(&[1; 60]);
        f.receive(&mut buf);
        assert_eq!(b.pending(), 0);
        assert_eq!(f.next_deadline_ns(), Some(100_000));
        clock.advance(100_000);
        f.receive(&mut buf);
        assert!(b.receive(&mut buf));
        assert_eq!(f.next_deadline_ns(), None);
    }
}
