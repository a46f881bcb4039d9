//! BAR0 as the device sees it: the initialization segment's registers and the UAR pages.
//!
//! Reads are answered from the register state; writes either update a register or become a
//! [`BarWrite`] event (a command doorbell, a UAR doorbell) for the device to act on. Offsets
//! outside BAR0 read as all ones and writes to them are dropped, as on PCI after a master abort.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, Ordering};

use rnic_hw_regs::doorbell::UAR_PAGE_SIZE;
use rnic_hw_regs::init_seg::{self, CmdqAddrLSz, FwVersion, HealthSyndrome, NicInterface};

use crate::clock::Clock;
use crate::profile::Profile;

/// What a BAR write asks the device to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BarWrite {
    /// Nothing beyond the register update.
    None,
    /// Run the command slots whose bits are set.
    CmdDoorbell(u32),
    /// A write to UAR page `uar` at `offset` (send doorbell, CQ arm, EQ doorbell).
    Uar {
        /// UAR index.
        uar: u32,
        /// Offset inside the 4 KiB UAR page.
        offset: usize,
        /// The value written (a 32-bit write is zero-extended).
        value: u64,
        /// 4 or 8.
        width: u8,
    },
}

/// The register state of BAR0.
#[derive(Debug)]
pub(crate) struct Bar {
    len: usize,
    fw: FwVersion,
    log_cmdq_size: u8,
    log_cmdq_stride: u8,
    device_frequency_khz: u32,
    cmdq_addr_h: AtomicU32,
    cmdq_addr_l: AtomicU32,
    initializing: AtomicBool,
    health_syndrome: AtomicU8,
    /// The health counter stops when firmware hangs; it then reads this value.
    health_frozen_at: AtomicU32,
    health_frozen: AtomicBool,
    /// Reads of the health counter (it ticks on each with a virtual clock).
    health_reads: AtomicU32,
    pci_dead: AtomicBool,
    clock: Clock,
}

impl Bar {
    pub(crate) fn new(profile: &Profile, clock: Clock) -> Self {
        let (major, minor, sub_minor) = profile.fw_version;
        Bar {
            len: profile.bar_len(),
            fw: FwVersion {
                major,
                minor,
                subminor: sub_minor,
            },
            log_cmdq_size: profile.log_cmdq_size,
            log_cmdq_stride: profile.log_cmdq_stride,
            device_frequency_khz: profile.device_frequency_khz,
            cmdq_addr_h: AtomicU32::new(0),
            cmdq_addr_l: AtomicU32::new(0),
            initializing: AtomicBool::new(true),
            health_syndrome: AtomicU8::new(0),
            health_frozen_at: AtomicU32::new(0),
            health_frozen: AtomicBool::new(false),
            health_reads: AtomicU32::new(0),
            pci_dead: AtomicBool::new(false),
            clock,
        }
    }

    /// Back to power-on after a function-level reset: no command queue address, firmware
    /// `initializing`, no health syndrome, the health counter running. A dead PCI link stays
    /// dead (no reset reaches the function): `false`.
    pub(crate) fn reset(&self) -> bool {
        if self.pci_dead.load(Ordering::Acquire) {
            return false;
        }
        self.cmdq_addr_h.store(0, Ordering::Release);
        self.cmdq_addr_l.store(0, Ordering::Release);
        self.health_syndrome.store(0, Ordering::Release);
        self.health_frozen.store(false, Ordering::Release);
        self.initializing.store(true, Ordering::Release);
        true
    }

    /// Length of BAR0.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The command queue's IOVA as the driver wrote it.
    pub(crate) fn cmdq_addr(&self) -> u64 {
        (u64::from(self.cmdq_addr_h.load(Ordering::Acquire)) << 32)
            | u64::from(self.cmdq_addr_l.load(Ordering::Acquire) & !0xFFF)
    }

    /// log2 of the number of command slots and of their stride.
    pub(crate) fn cmdq_geometry(&self) -> (u8, u8) {
        (self.log_cmdq_size, self.log_cmdq_stride)
    }

    /// Whether firmware still reports `initializing`.
    pub(crate) fn is_initializing(&self) -> bool {
        self.initializing.load(Ordering::Acquire)
    }

    /// Raises a health syndrome (the driver sees it in the health buffer).
    pub(crate) fn raise_health_syndrome(&self, synd: HealthSyndrome) {
        self.health_syndrome.store(synd.raw(), Ordering::Release);
    }

    /// Stops the health counter, as hung firmware does.
    pub(crate) fn freeze_health_counter(&self) {
        // The value the last read saw (freezing is not a read).
        self.health_frozen_at
            .store(self.health_counter(false), Ordering::Release);
        self.health_frozen.store(true, Ordering::Release);
    }

    /// Makes every read return all ones, as after a surprise removal.
    pub(crate) fn kill_pci_link(&self) {
        self.pci_dead.store(true, Ordering::Release);
    }

    /// Whether firmware is hung or dead (it then executes nothing).
    pub(crate) fn firmware_dead(&self) -> bool {
        self.health_frozen.load(Ordering::Acquire) || self.pci_dead.load(Ordering::Acquire)
    }

    /// Low 24 bits tick every millisecond of device time. With a virtual clock they also
    /// tick on every read: a deterministic device's time stands still until the caller
    /// advances it, and a driver polling it in real time must not take that for hung
    /// firmware (its health check samples the counter; `hang_firmware` still stops it).
    fn health_counter_live(&self) -> u32 {
        self.health_counter(true)
    }

    /// The counter now; `read`: a host read, which ticks a virtual-clock counter first (so
    /// without `read` it is what the last read returned).
    fn health_counter(&self, read: bool) -> u32 {
        let reads = match (self.clock.is_virtual(), read) {
            (true, true) => u64::from(self.health_reads.fetch_add(1, Ordering::Relaxed)) + 1,
            (true, false) => u64::from(self.health_reads.load(Ordering::Relaxed)),
            (false, _) => 0,
        };
        ((self.clock.now_ns() / 1_000_000 + reads) & 0xFF_FFFF) as u32
    }

    fn internal_timer(&self) -> u64 {
        // Ticks at device_frequency_khz: ns * kHz / 10^6.
        let ns = u128::from(self.clock.now_ns());
        (ns * u128::from(self.device_frequency_khz) / 1_000_000) as u64
    }

    pub(crate) fn read32(&self, offset: usize) -> u32 {
        if offset >= self.len || offset % 4 != 0 || self.pci_dead.load(Ordering::Acquire) {
            return u32::MAX;
        }
        let (fw_rev, cmdif) = self.fw.encode(init_seg::CMDIF_REV);
        match offset {
            init_seg::FW_REV => fw_rev,
            init_seg::CMDIF_REV_FW_SUB => cmdif,
            init_seg::CMDQ_ADDR_H => self.cmdq_addr_h.load(Ordering::Acquire),
            init_seg::CMDQ_ADDR_L_SZ => {
                let addr_low = self.cmdq_addr_l.load(Ordering::Acquire) & !0xFFF;
                CmdqAddrLSz::device_value(
                    addr_low,
                    NicInterface::FullDriver,
                    self.log_cmdq_size,
                    self.log_cmdq_stride,
                )
                .0
            }
            init_seg::INITIALIZING => u32::from(self.is_initializing()) << 31,
            init_seg::HEALTH_FW_VER => fw_rev,
            init_seg::HEALTH_SYND => {
                // irisc_index (byte), synd (byte), ext_synd (BE16).
                u32::from(self.health_syndrome.load(Ordering::Acquire)) << 16
            }
            init_seg::INTERNAL_TIMER_H => (self.internal_timer() >> 32) as u32,
            init_seg::INTERNAL_TIMER_L => self.internal_timer() as u32,
            init_seg::HEALTH_COUNTER => {
                if self.health_frozen.load(Ordering::Acquire) {
                    self.health_frozen_at.load(Ordering::Acquire)
                } else {
                    self.health_counter_live()
                }
            }
            _ => 0,
        }
    }

    pub(crate) fn write32(&self, offset: usize, value: u32) -> BarWrite {
        if offset >= self.len || offset % 4 != 0 || self.pci_dead.load(Ordering::Acquire) {
            return BarWrite::None;
        }
        match offset {
            init_seg::CMDQ_ADDR_H => {
                self.cmdq_addr_h.store(value, Ordering::Release);
                BarWrite::None
            }
            init_seg::CMDQ_ADDR_L_SZ => {
                self.cmdq_addr_l.store(value, Ordering::Release);
                // Firmware finishes initializing once it knows where the command queue is.
                self.initializing.store(false, Ordering::Release);
                BarWrite::None
            }
            init_seg::CMD_DBELL => BarWrite::CmdDoorbell(value),
            _ => self.uar_write(offset, u64::from(value), 4),
        }
    }

    pub(crate) fn write64(&self, offset: usize, value: u64) -> BarWrite {
        if offset >= self.len || offset % 8 != 0 || self.pci_dead.load(Ordering::Acquire) {
            return BarWrite::None;
        }
        self.uar_write(offset, value, 8)
    }

    fn uar_write(&self, offset: usize, value: u64, width: u8) -> BarWrite {
        let page = offset / UAR_PAGE_SIZE;
        if page < Profile::FIRST_UAR as usize {
            return BarWrite::None;
        }
        BarWrite::Uar {
            uar: page as u32,
            offset: offset % UAR_PAGE_SIZE,
            value,
            width,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar() -> (Bar, Clock) {
        let clock = Clock::virtual_at_zero();
        (Bar::new(&Profile::default(), clock.clone()), clock)
    }

    #[test]
    fn init_segment_reads_as_the_prm_says() {
        let (bar, _) = bar();
        assert_eq!(bar.read32(init_seg::FW_REV), (12 << 16) | 14);
        assert_eq!(bar.read32(init_seg::CMDIF_REV_FW_SUB), (5 << 16) | 1220);
        assert_eq!(bar.read32(init_seg::INITIALIZING) >> 31, 1);
        let sz = CmdqAddrLSz(bar.read32(init_seg::CMDQ_ADDR_L_SZ));
        assert_eq!((sz.log_cmdq_size(), sz.log_cmdq_stride()), (5, 6));
    }

    #[test]
    fn writing_the_cmdq_address_ends_initialization() {
        let (bar, _) = bar();
        assert_eq!(bar.write32(init_seg::CMDQ_ADDR_H, 0x1), BarWrite::None);
        bar.write32(init_seg::CMDQ_ADDR_L_SZ, 0x2345_6000);
        assert!(!bar.is_initializing());
        assert_eq!(bar.cmdq_addr(), 0x1_2345_6000);
        assert_eq!(bar.read32(init_seg::CMDQ_ADDR_L_SZ) & !0xFFF, 0x2345_6000);
    }

    #[test]
    fn health_counter_ticks_until_firmware_hangs() {
        let (bar, clock) = bar();
        let a = bar.read32(init_seg::HEALTH_COUNTER);
        clock.advance(3_000_000);
        let b = bar.read32(init_seg::HEALTH_COUNTER);
        assert_eq!(b - a, 3 + 1, "3 ms of virtual time and one read");
        bar.freeze_health_counter();
        clock.advance(5_000_000);
        assert_eq!(bar.read32(init_seg::HEALTH_COUNTER), b);
        bar.raise_health_syndrome(HealthSyndrome::IriscNotResponding);
        assert_eq!((bar.read32(init_seg::HEALTH_SYND) >> 16) & 0xFF, 0x7);
    }

    #[test]
    fn doorbells_become_events_and_stray_accesses_are_harmless() {
        let (bar, _) = bar();
        assert_eq!(
            bar.write32(init_seg::CMD_DBELL, 1),
            BarWrite::CmdDoorbell(1)
        );
        let uar = 0x10 * 4096;
        assert_eq!(
            bar.write64(uar + 0x800, 7),
            BarWrite::Uar {
                uar: 0x10,
                offset: 0x800,
                value: 7,
                width: 8
            }
        );
        assert_eq!(bar.write32(0x100, 1), BarWrite::None);
        assert_eq!(bar.read32(bar.len()), u32::MAX);
        assert_eq!(bar.read32(3), u32::MAX);
        assert_eq!(bar.write64(bar.len() + 8, 1), BarWrite::None);
        bar.kill_pci_link();
        assert_eq!(bar.read32(init_seg::FW_REV), u32::MAX);
    }
}
