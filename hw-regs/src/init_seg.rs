//! The initialization segment at BAR0 offset 0: firmware revision, command queue address,
//! command doorbell, the `initializing` flag, the health buffer, the internal timer and the
//! health counter.
//!
//! The driver reads these registers one big-endian dword at a time (`Bus::read32(offset)`),
//! so this module gives register offsets and decoders for the values read, plus a zerocopy
//! view of the health buffer ([`HealthBuffer`]) for whoever holds all of it (the emulator).
//!
//! ```
//! use rnic_hw_regs::init_seg::{self, CmdqAddrLSz, NicInterface};
//!
//! // cmdq_addr_l_sz as a ConnectX reads it: log_cmdq_size 5, log_cmdq_stride 6.
//! let v = CmdqAddrLSz(0x0000_0056);
//! assert_eq!((v.log_cmdq_size(), v.log_cmdq_stride()), (5, 6));
//! assert_eq!(v.nic_interface(), Ok(NicInterface::FullDriver));
//! assert_eq!(init_seg::cmdq_addr_words(0x7_AB0F_E000), Ok((0x7, 0xAB0F_E000)));
//! assert!(init_seg::is_initializing(0x8000_0000));
//! ```

use crate::status::{UnknownCode, code_enum};

/// Size of the initialization segment.
pub const INIT_SEG_SIZE: usize = 0x2010;
/// Firmware revision: bits 31:16 minor, 15:0 major.
pub const FW_REV: usize = 0x000;
/// Bits 31:16 command interface revision, 15:0 firmware sub-minor.
pub const CMDIF_REV_FW_SUB: usize = 0x004;
/// High 32 bits of the command queue bus address.
pub const CMDQ_ADDR_H: usize = 0x010;
/// Low address bits, `nic_interface`, `log_cmdq_size`, `log_cmdq_stride` (see [`CmdqAddrLSz`]).
pub const CMDQ_ADDR_L_SZ: usize = 0x014;
/// Command doorbell: write `1 << slot` (see [`cmd_doorbell_value`]).
pub const CMD_DBELL: usize = 0x018;
/// Bit 31 is set while firmware initializes.
pub const INITIALIZING: usize = 0x1FC;
/// Start of the health buffer (0x40 bytes, see [`HealthBuffer`]).
pub const HEALTH_BUFFER: usize = 0x200;
/// Health buffer: `fw_ver` register (0xFFFF_FFFF when the PCI link is dead).
pub const HEALTH_FW_VER: usize = HEALTH_BUFFER + 0x30;
/// Health buffer: dword holding `rfr` (bit 31) and the severity.
pub const HEALTH_RFR_SEVERITY: usize = HEALTH_BUFFER + 0x38;
/// Health buffer: dword holding `irisc_index`, `synd` and `ext_synd`.
pub const HEALTH_SYND: usize = HEALTH_BUFFER + 0x3C;
/// Free-running internal timer, high dword.
pub const INTERNAL_TIMER_H: usize = 0x1000;
/// Free-running internal timer, low dword.
pub const INTERNAL_TIMER_L: usize = 0x1004;
/// Health counter: the low 24 bits advance while firmware is alive.
pub const HEALTH_COUNTER: usize = 0x1010;
/// Clears legacy INTx.
pub const CLR_INTX: usize = 0x200C;

/// The command interface revision a driver of this layout speaks.
pub const CMDIF_REV: u16 = 5;
/// `fw_ver` reading that means the device fell off the bus.
pub const FW_VER_PCI_DEAD: u32 = 0xFFFF_FFFF;
/// Unchanged health counter samples after which firmware is considered dead.
pub const HEALTH_COUNTER_MISSES: u32 = 3;
/// Most command queue slots (`2^log_cmdq_size <= 32`).
pub const MAX_CMDQ_SLOTS: u32 = 32;

/// Firmware version, from [`FW_REV`] and [`CMDIF_REV_FW_SUB`].
///
/// ```
/// use rnic_hw_regs::init_seg::FwVersion;
///
/// let v = FwVersion { major: 22, minor: 39, subminor: 1002 };
/// assert_eq!(v.to_string(), "22.39.1002");
/// let (fw_rev, cmdif) = v.encode(5);
/// assert_eq!(FwVersion::decode(fw_rev, cmdif), v);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FwVersion {
    /// Major (e.g. 14 on a ConnectX-4).
    pub major: u16,
    /// Minor.
    pub minor: u16,
    /// Sub-minor.
    pub subminor: u16,
}

impl FwVersion {
    /// Decodes the two registers.
    ///
    /// ```
    /// use rnic_hw_regs::init_seg::FwVersion;
    ///
    /// let v = FwVersion::decode(0x0027_0016, 0x0005_03EA);
    /// assert_eq!((v.major, v.minor, v.subminor), (22, 39, 1002));
    /// ```
    pub const fn decode(fw_rev: u32, cmdif_rev_fw_sub: u32) -> Self {
        Self {
            major: fw_rev as u16,
            minor: (fw_rev >> 16) as u16,
            subminor: cmdif_rev_fw_sub as u16,
        }
    }

    /// The two register values that decode to this version, with `cmdif_rev`.
    ///
    /// ```
    /// use rnic_hw_regs::init_seg::{cmdif_rev, FwVersion};
    ///
    /// let v = FwVersion { major: 22, minor: 39, subminor: 1002 };
    /// let (fw_rev, sub) = v.encode(5);
    /// assert_eq!((fw_rev, sub), (0x0027_0016, 0x0005_03EA));
    /// assert_eq!(cmdif_rev(sub), 5);
    /// ```
    pub const fn encode(self, cmdif_rev: u16) -> (u32, u32) {
        (
            (self.minor as u32) << 16 | self.major as u32,
            (cmdif_rev as u32) << 16 | self.subminor as u32,
        )
    }
}

impl core::fmt::Display for FwVersion {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.subminor)
    }
}

/// The command interface revision from a [`CMDIF_REV_FW_SUB`] reading.
///
/// ```
/// use rnic_hw_regs::init_seg::cmdif_rev;
///
/// assert_eq!(cmdif_rev(0x0005_03EA), 5);
/// ```
pub const fn cmdif_rev(cmdif_rev_fw_sub: u32) -> u16 {
    (cmdif_rev_fw_sub >> 16) as u16
}

code_enum! {
    /// `nic_interface` (cmdq_addr_l_sz bits 10:8).
    pub enum NicInterface: u8 {
        /// Full driver.
        FullDriver = 0 => "FULL_DRIVER",
        /// Disabled (fatal when read back).
        Disabled = 1 => "DISABLED",
        /// NIC without DRAM.
        NoDramNic = 2 => "NO_DRAM_NIC",
        /// Software reset (fatal when read back).
        SwReset = 7 => "SW_RESET",
    }
}

/// A [`CMDQ_ADDR_L_SZ`] register value.
///
/// ```
/// use rnic_hw_regs::init_seg::{CmdqAddrLSz, NicInterface};
///
/// let v = CmdqAddrLSz::device_value(0xABCD_E000, NicInterface::FullDriver, 5, 6);
/// assert_eq!(v.addr_low(), 0xABCD_E000);
/// assert_eq!((v.log_cmdq_size(), v.log_cmdq_stride()), (5, 6));
/// assert!(v.geometry_ok());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmdqAddrLSz(pub u32);

impl CmdqAddrLSz {
    /// Low 32 bits of the command queue address (bits 11:0 are zero).
    ///
    /// ```
    /// use rnic_hw_regs::init_seg::CmdqAddrLSz;
    ///
    /// assert_eq!(CmdqAddrLSz(0x1234_5756).addr_low(), 0x1234_5000);
    /// ```
    pub const fn addr_low(self) -> u32 {
        self.0 & 0xFFFF_F000
    }

    /// `nic_interface`, raw.
    ///
    /// ```
    /// use rnic_hw_regs::init_seg::CmdqAddrLSz;
    ///
    /// assert_eq!(CmdqAddrLSz(0x0000_0756).nic_interface_raw(), 7);
    /// ```
    pub const fn nic_interface_raw(self) -> u8 {
        ((self.0 >> 8) & 7) as u8
    }

    /// `nic_interface`, typed.
    ///
    /// ```
    /// use rnic_hw_regs::init_seg::{CmdqAddrLSz, NicInterface};
    ///
    /// assert_eq!(CmdqAddrLSz(0x0000_0156).nic_interface(), Ok(NicInterface::Disabled));
    /// assert!(CmdqAddrLSz(0x0000_0356).nic_interface().is_err()); // 3 is not defined
    /// ```
    pub fn nic_interface(self) -> Result<NicInterface, UnknownCode> {
        NicInterface::try_from(self.nic_interface_raw())
    }

    /// log2 of the number of command slots (read only).
    ///
    /// ```
    /// use rnic_hw_regs::init_seg::CmdqAddrLSz;
    ///
    /// assert_eq!(CmdqAddrLSz(0x0000_0056).log_cmdq_size(), 5); // 32 entries
    /// ```
    pub const fn log_cmdq_size(self) -> u8 {
        ((self.0 >> 4) & 0xF) as u8
    }

    /// log2 of the entry stride in bytes (read only).
    ///
    /// ```
    /// use rnic_hw_regs::init_seg::CmdqAddrLSz;
    ///
    /// assert_eq!(CmdqAddrLSz(0x0000_0056).log_cmdq_stride(), 6); // 64-byte entries
    /// ```
    pub const fn log_cmdq_stride(self) -> u8 {
        (self.0 & 0xF) as u8
    }

    /// The value the driver writes: the low address bits and `nic_interface` (sizes are
    /// read-only, written as 0).
    ///
    /// ```
    /// use rnic_hw_regs::init_seg::{CmdqAddrLSz, NicInterface};
    ///
    /// let v = CmdqAddrLSz::for_write(0xABCD_E123, NicInterface::FullDriver);
    /// assert_eq!(v, CmdqAddrLSz(0xABCD_E000)); // low 12 bits dropped, size/stride left 0
    /// ```
    pub const fn for_write(addr_low: u32, nic: NicInterface) -> Self {
        Self((addr_low & 0xFFFF_F000) | (nic as u32) << 8)
    }

    /// The value a device reads back: address, interface and its queue geometry.
    ///
    /// ```
    /// use rnic_hw_regs::init_seg::{CmdqAddrLSz, NicInterface};
    ///
    /// let v = CmdqAddrLSz::device_value(0x1000, NicInterface::SwReset, 5, 6);
    /// assert_eq!(v, CmdqAddrLSz(0x0000_1756));
    /// ```
    pub const fn device_value(
        addr_low: u32,
        nic: NicInterface,
        log_size: u8,
        log_stride: u8,
    ) -> Self {
        Self(
            (addr_low & 0xFFFF_F000)
                | (nic as u32) << 8
                | ((log_size & 0xF) as u32) << 4
                | (log_stride & 0xF) as u32,
        )
    }

    /// Whether the geometry is one the PRM allows: at most 32 slots, all in one 4 KiB page,
    /// and entries at least 64 bytes apart.
    ///
    /// ```
    /// use rnic_hw_regs::init_seg::CmdqAddrLSz;
    ///
    /// assert!(CmdqAddrLSz(0x56).geometry_ok()); // 32 entries of 64 bytes
    /// assert!(!CmdqAddrLSz(0x66).geometry_ok()); // 64 entries: too many
    /// assert!(!CmdqAddrLSz(0x55).geometry_ok()); // 32-byte stride: too small
    /// ```
    pub const fn geometry_ok(self) -> bool {
        let (s, t) = (self.log_cmdq_size(), self.log_cmdq_stride());
        s <= 5 && s + t <= 12 && t >= 6
    }
}

/// Error of [`cmdq_addr_words`]: the command queue address is not 4 KiB aligned.
///
/// ```
/// use rnic_hw_regs::init_seg::{cmdq_addr_words, MisalignedCmdq};
///
/// assert_eq!(cmdq_addr_words(0x1_0000_0800), Err(MisalignedCmdq(0x1_0000_0800)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MisalignedCmdq(pub u64);

/// Splits a command queue bus address into the [`CMDQ_ADDR_H`] and [`CMDQ_ADDR_L_SZ`] values
/// (nic_interface 0); write the high word first.
///
/// ```
/// use rnic_hw_regs::init_seg::cmdq_addr_words;
///
/// assert_eq!(cmdq_addr_words(0x2_0000_3000), Ok((0x2, 0x3000)));
/// assert!(cmdq_addr_words(0x2_0000_3010).is_err());
/// ```
pub const fn cmdq_addr_words(iova: u64) -> Result<(u32, u32), MisalignedCmdq> {
    if iova & 0xFFF != 0 {
        return Err(MisalignedCmdq(iova));
    }
    Ok(((iova >> 32) as u32, iova as u32))
}

/// The [`CMD_DBELL`] value that starts command slot `slot`, or `None` past slot 31.
///
/// ```
/// use rnic_hw_regs::init_seg::cmd_doorbell_value;
///
/// assert_eq!(cmd_doorbell_value(0), Some(1));
/// assert_eq!(cmd_doorbell_value(31), Some(0x8000_0000));
/// assert_eq!(cmd_doorbell_value(32), None);
/// ```
pub const fn cmd_doorbell_value(slot: u8) -> Option<u32> {
    if slot < 32 { Some(1 << slot) } else { None }
}

/// Whether an [`INITIALIZING`] reading says firmware is still initializing (bit 31).
///
/// ```
/// use rnic_hw_regs::init_seg::is_initializing;
///
/// assert!(is_initializing(0x8000_0000));
/// assert!(!is_initializing(0x0000_0001));
/// ```
pub const fn is_initializing(value: u32) -> bool {
    value & 0x8000_0000 != 0
}

/// The live part of a [`HEALTH_COUNTER`] reading (low 24 bits).
///
/// ```
/// use rnic_hw_regs::init_seg::health_counter;
///
/// assert_eq!(health_counter(0xAB00_0102), 0x102);
/// ```
pub const fn health_counter(value: u32) -> u32 {
    value & 0xFF_FFFF
}

/// The internal timer from its two dwords.
///
/// ```
/// use rnic_hw_regs::init_seg::internal_timer;
///
/// assert_eq!(internal_timer(0x1, 0x2), 0x1_0000_0002);
/// ```
pub const fn internal_timer(high: u32, low: u32) -> u64 {
    (high as u64) << 32 | low as u64
}

code_enum! {
    /// Health syndrome (health buffer byte 0x3D).
    pub enum HealthSyndrome: u8 {
        /// Firmware internal error.
        FwInternalError = 0x01 => "FW_INTERNAL_ERR",
        /// iRISC not responding.
        IriscNotResponding = 0x07 => "DEAD_IRISC",
        /// Unrecoverable hardware error.
        HwUnrecoverable = 0x08 => "HW_UNRECOVERABLE_ERR",
        /// Firmware CRC error.
        FwCrc = 0x09 => "FW_CRC_ERR",
        /// ICM fetch PCI error.
        IcmFetchPciError = 0x0A => "ICM_FETCH_PCI_ERR",
        /// Hardware fatal error.
        HwFatal = 0x0B => "HW_FTL_ERR",
        /// Async EQ overrun.
        AsyncEqOverrun = 0x0C => "ASYNC_EQ_OVERRUN_ERR",
        /// EQ error.
        EqError = 0x0D => "EQ_ERR",
        /// Invalid EQ.
        EqInvalid = 0x0E => "EQ_INV",
        /// FFSER error.
        FfserError = 0x0F => "FFSER_ERR",
        /// High temperature.
        HighTemp = 0x10 => "HIGH_TEMP_ERR",
    }
}

prm_layout! {
    /// The health buffer (0x40 bytes at init segment 0x200).
    pub struct HealthBuffer("", 0x40) {
        /// Assert variable 0.
        assert_var0 / set_assert_var0: u32 = dw(0x00, 31, 0);
        /// Assert variable 1.
        assert_var1 / set_assert_var1: u32 = dw(0x04, 31, 0);
        /// Assert variable 2.
        assert_var2 / set_assert_var2: u32 = dw(0x08, 31, 0);
        /// Assert variable 3.
        assert_var3 / set_assert_var3: u32 = dw(0x0C, 31, 0);
        /// Assert variable 4.
        assert_var4 / set_assert_var4: u32 = dw(0x10, 31, 0);
        /// Assert variable 5.
        assert_var5 / set_assert_var5: u32 = dw(0x14, 31, 0);
        /// Assert exit pointer.
        assert_exit_ptr / set_assert_exit_ptr: u32 = dw(0x20, 31, 0);
        /// Assert caller return address.
        assert_callra / set_assert_callra: u32 = dw(0x24, 31, 0);
        /// Time of the event.
        time / set_time: u32 = dw(0x2C, 31, 0);
        /// Firmware version ([`FW_VER_PCI_DEAD`] when the link is dead).
        fw_ver / set_fw_ver: u32 = dw(0x30, 31, 0);
        /// Hardware id.
        hw_id / set_hw_id: u32 = dw(0x34, 31, 0);
        /// Recovery flow required.
        rfr / set_rfr: bool = dw(0x38, 31, 31);
        /// Severity.
        severity / set_severity: u8 = dw(0x38, 26, 24);
        /// Index of the iRISC that reported.
        irisc_index / set_irisc_index: u8 = dw(0x3C, 31, 24);
        /// Health syndrome, raw (see [`HealthSyndrome`]; 0 = healthy).
        synd / set_synd: u8 = dw(0x3C, 23, 16);
        /// Extended syndrome.
        ext_synd / set_ext_synd: u16 = dw(0x3C, 15, 0);
    }
}

impl HealthBuffer {
    /// The typed syndrome; `Ok(None)` when healthy (0).
    ///
    /// ```
    /// use rnic_hw_regs::init_seg::{HealthBuffer, HealthSyndrome};
    ///
    /// let mut h = HealthBuffer::default();
    /// assert_eq!(h.syndrome(), Ok(None)); // healthy
    /// h.set_synd(0x0B);
    /// assert_eq!(h.syndrome(), Ok(Some(HealthSyndrome::HwFatal)));
    /// ```
    pub fn syndrome(&self) -> Result<Option<HealthSyndrome>, UnknownCode> {
        match self.synd() {
            0 => Ok(None),
            s => HealthSyndrome::try_from(s).map(Some),
        }
    }
}

/// Whether the registers say the device is in a fatal state: the PCI link is dead
/// (`fw_ver` all ones), `nic_interface` reads disabled or software reset, or recovery is
/// required with a syndrome set.
///
/// ```
/// use rnic_hw_regs::init_seg::{is_fatal, FW_VER_PCI_DEAD};
///
/// let cmdq = 0x0000_0056; // nic_interface FULL_DRIVER
/// assert!(!is_fatal(0x0027_0016, cmdq, 0, 0));
/// assert!(is_fatal(FW_VER_PCI_DEAD, cmdq, 0, 0)); // link down: all ones
/// assert!(is_fatal(0x0027_0016, 0x0000_0756, 0, 0)); // SW_RESET
/// assert!(is_fatal(0x0027_0016, cmdq, 0x8000_0000, 0x0001_0000)); // rfr + syndrome
/// ```
pub const fn is_fatal(
    fw_ver: u32,
    cmdq_addr_l_sz: u32,
    rfr_severity: u32,
    synd_dword: u32,
) -> bool {
    let nic = CmdqAddrLSz(cmdq_addr_l_sz).nic_interface_raw();
    let rfr = rfr_severity & 0x8000_0000 != 0;
    let synd = (synd_dword >> 16) & 0xFF != 0;
    fw_ver == FW_VER_PCI_DEAD
        || nic == NicInterface::Disabled as u8
        || nic == NicInterface::SwReset as u8
        || (rfr && synd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PrmLayout;
    use zerocopy::IntoBytes;

    #[test]
    fn offsets_match_the_prm() {
        assert_eq!(
            (FW_REV, CMDIF_REV_FW_SUB, CMDQ_ADDR_H, CMDQ_ADDR_L_SZ),
            (0, 4, 0x10, 0x14)
        );
        assert_eq!(
            (CMD_DBELL, INITIALIZING, HEALTH_BUFFER),
            (0x18, 0x1FC, 0x200)
        );
        assert_eq!(
            (HEALTH_FW_VER, HEALTH_RFR_SEVERITY, HEALTH_SYND),
            (0x230, 0x238, 0x23C)
        );
        assert_eq!(
            (INTERNAL_TIMER_H, INTERNAL_TIMER_L, HEALTH_COUNTER),
            (0x1000, 0x1004, 0x1010)
        );
        assert_eq!((CLR_INTX, INIT_SEG_SIZE), (0x200C, 0x2010));
        assert_eq!(HealthBuffer::SIZE, 0x40);
    }

    #[test]
    fn fw_version_of_the_connectx4_trace() {
        // Firmware 14.12.1220: fw_rev = minor 12 << 16 | major 14; sub-minor 1220, cmdif 5.
        let v = FwVersion::decode(0x000C_000E, 0x0005_04C4);
        assert_eq!(
            v,
            FwVersion {
                major: 14,
                minor: 12,
                subminor: 1220
            }
        );
        assert_eq!(cmdif_rev(0x0005_04C4), CMDIF_REV);
        assert_eq!(v.encode(5), (0x000C_000E, 0x0005_04C4));
    }

    #[test]
    fn cmdq_address_register() {
        let v = CmdqAddrLSz::device_value(0xAB0F_E000, NicInterface::NoDramNic, 5, 6);
        assert_eq!(v.0, 0xAB0F_E256);
        assert_eq!(v.addr_low(), 0xAB0F_E000);
        assert_eq!(v.nic_interface(), Ok(NicInterface::NoDramNic));
        assert_eq!((v.log_cmdq_size(), v.log_cmdq_stride()), (5, 6));
        assert!(v.geometry_ok());
        assert!(!CmdqAddrLSz::device_value(0, NicInterface::FullDriver, 6, 6).geometry_ok());
        assert!(!CmdqAddrLSz::device_value(0, NicInterface::FullDriver, 5, 8).geometry_ok());
        assert_eq!(
            CmdqAddrLSz::for_write(0x1234_5678, NicInterface::FullDriver).0,
            0x1234_5000
        );
        assert!(CmdqAddrLSz(0x300).nic_interface().is_err());
        assert_eq!(
            cmdq_addr_words(0x1_0000_0800),
            Err(MisalignedCmdq(0x1_0000_0800))
        );
    }

    #[test]
    fn small_registers() {
        assert_eq!(cmd_doorbell_value(0), Some(1));
        assert_eq!(cmd_doorbell_value(31), Some(0x8000_0000));
        assert_eq!(cmd_doorbell_value(32), None);
        assert!(!is_initializing(0x7FFF_FFFF));
        assert_eq!(health_counter(0xFF12_3456), 0x12_3456);
        assert_eq!(internal_timer(1, 2), 0x1_0000_0002);
    }

    #[test]
    fn health_buffer() {
        let mut h = HealthBuffer::default();
        h.set_assert_var5(0x55);
        h.set_assert_exit_ptr(0x1111_1111);
        h.set_assert_callra(0x2222_2222);
        h.set_time(0x3333_3333);
        h.set_fw_ver(FW_VER_PCI_DEAD);
        h.set_hw_id(0x4444_4444);
        h.set_rfr(true);
        h.set_severity(3);
        h.set_irisc_index(2);
        h.set_synd(HealthSyndrome::HighTemp.raw());
        h.set_ext_synd(0xBEEF);
        let b = h.as_bytes();
        assert_eq!(b[0x17], 0x55);
        assert_eq!(
            &b[0x20..0x28],
            &[0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x22, 0x22]
        );
        assert_eq!(
            &b[0x2C..0x38],
            &[
                0x33, 0x33, 0x33, 0x33, 0xFF, 0xFF, 0xFF, 0xFF, 0x44, 0x44, 0x44, 0x44
            ]
        );
        assert_eq!(b[0x38], 0x83);
        assert_eq!(&b[0x3C..0x40], &[2, 0x10, 0xBE, 0xEF]);
        assert_eq!(h.syndrome(), Ok(Some(HealthSyndrome::HighTemp)));
        h.set_synd(0);
        assert_eq!(h.syndrome(), Ok(None));
        h.set_synd(0x02);
        assert!(h.syndrome().is_err());
    }

    #[test]
    fn health_syndromes_match_the_prm() {
        let raw: [u8; 11] = [0x1, 0x7, 0x8, 0x9, 0xA, 0xB, 0xC, 0xD, 0xE, 0xF, 0x10];
        for r in raw {
            assert_eq!(HealthSyndrome::try_from(r).map(HealthSyndrome::raw), Ok(r));
        }
        assert_eq!(HealthSyndrome::ALL.len(), raw.len());
    }

    #[test]
    fn fatal_conditions() {
        let healthy = CmdqAddrLSz::device_value(0, NicInterface::FullDriver, 5, 6).0;
        assert!(!is_fatal(0x000C_000E, healthy, 0, 0));
        assert!(is_fatal(FW_VER_PCI_DEAD, healthy, 0, 0));
        assert!(is_fatal(0, 0x100, 0, 0));
        assert!(is_fatal(0, 0x700, 0, 0));
        assert!(!is_fatal(0, healthy, 0x8000_0000, 0));
        assert!(!is_fatal(0, healthy, 0, 0x0001_0000));
        assert!(is_fatal(0, healthy, 0x8000_0000, 0x0001_0000));
    }
}
