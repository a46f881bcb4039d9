//! The HCA's life cycle (ENABLE_HCA, SET_ISSI, INIT_HCA, TEARDOWN_HCA): data the command
//! interface drives and the page accounting (`crate::pages`) reads.

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
