//! Device health: the init segment's health buffer, `fw_ver`, `nic_interface` and the health
//! counter, turned into [`DriverError::DeviceFatal`](crate::DriverError::DeviceFatal) with the
//! reason named.
//!
//! The rules (Linux `health.c`, rdma-core `mlx5_vfio.c`): the device is dead when `fw_ver`
//! reads 0xFFFFFFFF (PCI link down), when `nic_interface` reads 1 (disabled) or 7 (software
//! reset), when the health buffer has a syndrome, or when the health counter has not moved in
//! [`HEALTH_COUNTER_MISSES`] consecutive samples taken at least the poll interval apart.
//!
//! ```
//! use rnic_driver::health::{assess, FatalReason, HealthRegisters};
//!
//! let regs = HealthRegisters { fw_ver: 0xFFFF_FFFF, ..HealthRegisters::healthy() };
//! assert_eq!(assess(&regs), Some(FatalReason::PciLinkDead));
//! assert_eq!(assess(&HealthRegisters::healthy()), None);
//! ```

use rnic_hw_regs::Bus;
use rnic_hw_regs::init_seg::{self, HEALTH_COUNTER_MISSES, HealthSyndrome, NicInterface};
use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Why the driver considers the device dead.
///
/// ```
/// use rnic_driver::health::FatalReason;
///
/// assert_eq!(FatalReason::NicInterface(7).to_string(), "nic_interface 7 (SW_RESET)");
/// assert_eq!(FatalReason::PciLinkDead.to_string(), "fw_ver reads 0xffffffff (PCI link dead)");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FatalReason {
    /// `fw_ver` reads all ones: the PCI link is down (or the device fell off the bus).
    PciLinkDead,
    /// `nic_interface` reads disabled (1) or software reset (7).
    NicInterface(u8),
    /// The health buffer carries a syndrome.
    HealthSyndrome {
        /// The syndrome, when the PRM names it.
        syndrome: Option<HealthSyndrome>,
        /// The raw syndrome byte.
        raw: u8,
        /// The extended syndrome.
        ext_synd: u16,
    },
    /// The health counter did not move in this many consecutive samples.
    HealthCounterStuck {
        /// The counter value that did not change.
        counter: u32,
        /// Consecutive unchanged samples.
        samples: u32,
    },
}

impl fmt::Display for FatalReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::PciLinkDead => f.write_str("fw_ver reads 0xffffffff (PCI link dead)"),
            Self::NicInterface(n) => {
                let name = match NicInterface::from_raw(*n) {
                    Some(i) => i.name(),
                    None => "unknown",
                };
                write!(f, "nic_interface {n} ({name})")
            }
            Self::HealthSyndrome {
                syndrome,
                raw,
                ext_synd,
            } => {
                let name = syndrome.map_or("unknown syndrome", HealthSyndrome::name);
                write!(
                    f,
                    "health syndrome {name}({raw:#x}), ext_synd {ext_synd:#06x}"
                )
            }
            Self::HealthCounterStuck { counter, samples } => write!(
                f,
                "health counter stuck at {counter:#x} for {samples} samples (firmware not responding)"
            ),
        }
    }
}

/// Whether the driver has declared the device dead, and why: set once (by a health check or
/// a command that found the device fatal) and never cleared; a function reset and a new
/// [`Hca`](crate::Hca) are the way on. The data path reads only the flag (one relaxed load).
#[derive(Debug, Default)]
pub(crate) struct FatalState {
    dead: AtomicBool,
    reason: Mutex<Option<FatalReason>>,
}

impl FatalState {
    /// Declares the device dead for `reason`; true the first time (the caller then reports
    /// it once), false when it already was.
    pub(crate) fn declare(&self, reason: FatalReason) -> bool {
        let mut r = self.reason.lock().unwrap_or_else(|e| e.into_inner());
        if r.is_some() {
            return false;
        }
        *r = Some(reason);
        self.dead.store(true, Ordering::Release);
        true
    }

    /// Whether the device was declared dead.
    #[inline(always)]
    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Relaxed)
    }

    /// Why, once declared.
    pub(crate) fn reason(&self) -> Option<FatalReason> {
        *self.reason.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The registers a health check reads.
///
/// ```
/// use rnic_driver::health::{assess, FatalReason, HealthRegisters};
///
/// let r = HealthRegisters { synd: 0x0007_0000, ..HealthRegisters::healthy() };
/// assert!(matches!(assess(&r), Some(FatalReason::HealthSyndrome { raw: 7, .. })));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HealthRegisters {
    /// Health buffer `fw_ver` (0x230).
    pub fw_ver: u32,
    /// `cmdq_addr_l_sz` (0x14), for `nic_interface`.
    pub cmdq_addr_l_sz: u32,
    /// Health buffer dword at 0x238 (`rfr`, severity).
    pub rfr_severity: u32,
    /// Health buffer dword at 0x23C (`irisc_index`, `synd`, `ext_synd`).
    pub synd: u32,
}

impl HealthRegisters {
    /// Values of a healthy device (for tests and examples).
    ///
    /// ```
    /// use rnic_driver::health::{assess, HealthRegisters};
    /// assert_eq!(assess(&HealthRegisters::healthy()), None);
    /// ```
    pub const fn healthy() -> Self {
        Self {
            fw_ver: 0x000C_000E,
            cmdq_addr_l_sz: 0,
            rfr_severity: 0,
            synd: 0,
        }
    }

    /// Reads the registers from the init segment.
    ///
    /// ```
    /// use rnic_driver::health::HealthRegisters;
    /// use rnic_emulator::{Device, Profile, RunMode};
    ///
    /// let dev = Device::new(Profile::default(), RunMode::Deterministic);
    /// dev.kill_pci_link();
    /// assert_eq!(HealthRegisters::read(&dev.bus()).fw_ver, 0xFFFF_FFFF);
    /// ```
    pub fn read(bus: &dyn Bus) -> Self {
        Self {
            fw_ver: bus.read32(init_seg::HEALTH_FW_VER),
            cmdq_addr_l_sz: bus.read32(init_seg::CMDQ_ADDR_L_SZ),
            rfr_severity: bus.read32(init_seg::HEALTH_RFR_SEVERITY),
            synd: bus.read32(init_seg::HEALTH_SYND),
        }
    }
}

/// Decides from one register sample whether the device is dead (the health counter is judged
/// separately by [`HealthMonitor`]). A pure function.
///
/// ```
/// use rnic_driver::health::{assess, FatalReason, HealthRegisters};
/// let disabled = HealthRegisters { cmdq_addr_l_sz: 0x100, ..HealthRegisters::healthy() };
/// assert_eq!(assess(&disabled), Some(FatalReason::NicInterface(1)));
/// ```
pub fn assess(r: &HealthRegisters) -> Option<FatalReason> {
    if r.fw_ver == init_seg::FW_VER_PCI_DEAD {
        return Some(FatalReason::PciLinkDead);
    }
    let nic = init_seg::CmdqAddrLSz(r.cmdq_addr_l_sz).nic_interface_raw();
    if nic == NicInterface::Disabled.raw() || nic == NicInterface::SwReset.raw() {
        return Some(FatalReason::NicInterface(nic));
    }
    let raw = ((r.synd >> 16) & 0xFF) as u8;
    if raw != 0 {
        return Some(FatalReason::HealthSyndrome {
            syndrome: HealthSyndrome::from_raw(raw),
            raw,
            ext_synd: (r.synd & 0xFFFF) as u16,
        });
    }
    None
}

/// Samples the health counter: [`HEALTH_COUNTER_MISSES`] unchanged samples, each taken at least
/// `interval` after the previous counted one, mean firmware is stuck.
///
/// ```
/// use rnic_driver::health::{FatalReason, HealthMonitor};
/// use std::time::{Duration, Instant};
///
/// let (t0, s) = (Instant::now(), Duration::from_secs(2));
/// let mut m = HealthMonitor::new(s);
/// assert_eq!(m.sample(5, t0), None);
/// assert_eq!(m.sample(5, t0 + s), None);
/// assert_eq!(m.sample(5, t0 + s * 2), None);
/// let stuck = m.sample(5, t0 + s * 3); // third unchanged sample
/// assert_eq!(stuck, Some(FatalReason::HealthCounterStuck { counter: 5, samples: 3 }));
/// ```
#[derive(Debug)]
pub struct HealthMonitor {
    interval: Duration,
    last: Option<(u32, Instant)>,
    misses: u32,
}

impl HealthMonitor {
    /// A monitor that counts samples at most every `interval` (the kernel polls every 2 s).
    ///
    /// ```
    /// use rnic_driver::health::HealthMonitor;
    /// use std::time::{Duration, Instant};
    /// let mut m = HealthMonitor::new(Duration::from_secs(2));
    /// assert_eq!(m.sample(1, Instant::now()), None); // one sample judges nothing
    /// ```
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            last: None,
            misses: 0,
        }
    }

    /// Feeds one health counter reading taken at `now`; returns the failure once the counter
    /// has been stuck for [`HEALTH_COUNTER_MISSES`] counted samples. Samples closer than the
    /// interval to the previous counted one are ignored.
    ///
    /// ```
    /// use rnic_driver::health::HealthMonitor;
    /// use std::time::{Duration, Instant};
    /// let (t0, s) = (Instant::now(), Duration::from_secs(1));
    /// let mut m = HealthMonitor::new(s);
    /// for i in 0..10u32 {
    ///     assert_eq!(m.sample(i, t0 + s * i), None); // a moving counter is alive
    /// }
    /// ```
    pub fn sample(&mut self, counter_reg: u32, now: Instant) -> Option<FatalReason> {
        let counter = init_seg::health_counter(counter_reg);
        match self.last {
            Some((_, at)) if now.saturating_duration_since(at) < self.interval => return None,
            Some((prev, _)) if prev == counter => self.misses += 1,
            _ => self.misses = 0,
        }
        self.last = Some((counter, now));
        (self.misses >= HEALTH_COUNTER_MISSES).then_some(FatalReason::HealthCounterStuck {
            counter,
            samples: self.misses,
        })
    }

    /// Reads the registers and the counter and reports the first fatal condition.
    ///
    /// ```
    /// use rnic_driver::health::{FatalReason, HealthMonitor};
    /// use rnic_emulator::{Device, Profile, RunMode};
    /// use rnic_hw_regs::init_seg::HealthSyndrome;
    /// use std::time::Duration;
    ///
    /// let dev = Device::new(Profile::default(), RunMode::Deterministic);
    /// let mut m = HealthMonitor::new(Duration::from_secs(2));
    /// assert_eq!(m.check(&dev.bus()), None);
    /// dev.raise_health_syndrome(HealthSyndrome::HighTemp);
    /// assert!(matches!(m.check(&dev.bus()), Some(FatalReason::HealthSyndrome { .. })));
    /// ```
    pub fn check(&mut self, bus: &dyn Bus) -> Option<FatalReason> {
        if let Some(r) = assess(&HealthRegisters::read(bus)) {
            return Some(r);
        }
        self.sample(bus.read32(init_seg::HEALTH_COUNTER), Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fatal_conditions_are_named() {
        let ok = HealthRegisters::healthy();
        assert_eq!(assess(&ok), None);
        let r = HealthRegisters {
            cmdq_addr_l_sz: 0x700,
            ..ok
        };
        assert_eq!(assess(&r), Some(FatalReason::NicInterface(7)));
        assert_eq!(
            assess(&r).unwrap().to_string(),
            "nic_interface 7 (SW_RESET)"
        );
        let r = HealthRegisters {
            cmdq_addr_l_sz: 0x100,
            ..ok
        };
        assert_eq!(assess(&r), Some(FatalReason::NicInterface(1)));
        let r = HealthRegisters {
            synd: 0x0007_BEEF,
            ..ok
        };
        let reason = assess(&r).unwrap();
        assert_eq!(
            reason,
            FatalReason::HealthSyndrome {
                syndrome: Some(HealthSyndrome::IriscNotResponding),
                raw: 7,
                ext_synd: 0xBEEF
            }
        );
        assert_eq!(
            reason.to_string(),
            "health syndrome DEAD_IRISC(0x7), ext_synd 0xbeef"
        );
        let r = HealthRegisters {
            synd: 0x0042_0000,
            ..ok
        };
        assert!(
            assess(&r)
                .unwrap()
                .to_string()
                .contains("unknown syndrome(0x42)")
        );
        // NO_DRAM_NIC (2) is not fatal.
        let r = HealthRegisters {
            cmdq_addr_l_sz: 0x200,
            ..ok
        };
        assert_eq!(assess(&r), None);
    }

    #[test]
    fn three_unchanged_samples_fail() {
        let t0 = Instant::now();
        let s = Duration::from_secs(2);
        let mut m = HealthMonitor::new(s);
        assert_eq!(m.sample(5, t0), None);
        assert_eq!(m.sample(5, t0 + s), None);
        assert_eq!(m.sample(5, t0 + s * 2), None);
        // Too soon: ignored.
        assert_eq!(m.sample(5, t0 + s * 2 + Duration::from_millis(1)), None);
        assert_eq!(
            m.sample(0xFF00_0005, t0 + s * 3),
            Some(FatalReason::HealthCounterStuck {
                counter: 5,
                samples: 3
            })
        );
        // A moving counter resets the count.
        let mut m = HealthMonitor::new(s);
        for i in 0..10u32 {
            assert_eq!(m.sample(i / 2, t0 + s * i), None);
        }
    }
}
