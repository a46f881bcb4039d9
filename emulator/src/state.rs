//! The device's mutable state: everything firmware knows, behind the device lock.

use crate::caps::Caps;
use crate::pages::Pages;
use crate::profile::Profile;
use crate::resources::Resources;

/// HCA life cycle as the command interface drives it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct HcaState {
    /// ENABLE_HCA done (and no DISABLE_HCA since).
    pub enabled: bool,
    /// The ISSI set with SET_ISSI (0 until then).
    pub issi: u16,
    /// INIT_HCA done (and no TEARDOWN_HCA since).
    pub initialized: bool,
    /// TEARDOWN_HCA done since the last ENABLE_HCA: INIT_HCA needs DISABLE + ENABLE first.
    pub torn_down: bool,
    /// The host is big-endian (ACCESS_REG HOST_ENDIANNESS `he`).
    pub host_big_endian: bool,
}

/// Counters tests and tools can read (see [`crate::Device::counters`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counters {
    /// Commands executed (whatever their status).
    pub commands: u64,
    /// Commands that completed with a non-zero command status.
    pub command_errors: u64,
    /// Commands that completed with a non-zero delivery status.
    pub delivery_errors: u64,
    /// Doorbells that named no valid object (unknown QP, CQ, EQ or UAR) and were dropped.
    pub bad_doorbells: u64,
    /// Device accesses to host memory that faulted in the IOMMU.
    pub iommu_faults: u64,
    /// CQ overruns.
    pub cq_overruns: u64,
    /// EQEs dropped because their EQ was full (or its buffer faulted).
    pub eq_overruns: u64,
    /// CQEs that could not be written (CQ in error, buffer fault, unknown CQ).
    pub cqes_dropped: u64,
    /// RoCE frames the port transmitted (to the loopback or the link).
    pub frames_tx: u64,
    /// RoCE frames the port received and handed to the transport.
    pub frames_rx: u64,
    /// Received frames dropped (malformed, bad ICRC, unknown QP, wrong state, Q_Key, ...).
    pub rx_dropped: u64,
}

/// Everything the device's firmware holds.
#[derive(Debug)]
pub(crate) struct DeviceState {
    pub profile: Profile,
    pub hca: HcaState,
    pub pages: Pages,
    pub caps: Caps,
    pub res: Resources,
    pub counters: Counters,
    /// The device's one port: loopback and link.
    pub port: crate::port::Port,
}

impl DeviceState {
    pub(crate) fn new(profile: Profile) -> Self {
        DeviceState {
            hca: HcaState::default(),
            pages: Pages::new(&profile),
            caps: Caps::new(&profile),
            res: Resources::new(&profile),
            counters: Counters::default(),
            port: crate::port::Port::new(),
            profile,
        }
    }
}
