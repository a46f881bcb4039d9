//! Firmware pages: 4 KiB DMA pages given to the device with MANAGE_PAGES (boot, init and
//! regular phases, and page-request events) and taken back at teardown.
//!
//! Every MANAGE_PAGES goes through the command slot kept for page commands (the last one),
//! as the Linux driver of the ConnectX-4 trace does (its MANAGE_PAGES ring doorbell bit 31).

use crate::cmdq::{CmdQueue, SlotClass};

/// The slot class of every MANAGE_PAGES.
const CLASS: SlotClass = SlotClass::Pages;
use crate::error::DriverError;
use rnic_hw_regs::cmd::{CmdOpcode, ManagePagesIn, ManagePagesOut, QueryPagesIn, op_mod};
use rnic_hw_regs::{Bus, DmaRegion};
use std::collections::HashMap;

/// Firmware page size.
pub const FW_PAGE_SIZE: usize = 4096;
/// Most pages per MANAGE_PAGES command (input or output of 0x10 + 8 * 512 bytes, 9 blocks).
pub const PAGES_PER_COMMAND: usize = 512;

/// Which QUERY_PAGES phase.
///
/// On a device that is only enabled (command queue set up, ENABLE_HCA), as bring-up starts:
///
/// ```
/// use rnic_driver::pages::{FirmwarePages, PagePhase};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let bus: std::sync::Arc<dyn rnic_hw_regs::Bus> = std::sync::Arc::new(dev.bus());
/// # let q = rnic_driver::doc_fixture::enabled_cmdq(&bus)?;
/// let mut fp = FirmwarePages::new();
/// let boot = fp.query(&q, PagePhase::Boot)?;
/// assert!(boot > 0); // firmware wants pages before INIT_HCA
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PagePhase {
    /// Before INIT_HCA's boot stage (op_mod 1).
    Boot,
    /// For INIT_HCA (op_mod 2).
    Init,
    /// After INIT_HCA (op_mod 3).
    Regular,
}

impl PagePhase {
    const fn op_mod(self) -> u16 {
        match self {
            Self::Boot => op_mod::QUERY_PAGES_BOOT,
            Self::Init => op_mod::QUERY_PAGES_INIT,
            Self::Regular => op_mod::QUERY_PAGES_REGULAR,
        }
    }
}

/// The pages firmware holds, by bus address.
///
/// The boot pages of a device that is only enabled (command queue set up, ENABLE_HCA), as
/// bring-up gives them:
///
/// ```
/// use rnic_driver::pages::{FirmwarePages, PagePhase};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let bus: std::sync::Arc<dyn rnic_hw_regs::Bus> = std::sync::Arc::new(dev.bus());
/// # let q = rnic_driver::doc_fixture::enabled_cmdq(&bus)?;
/// let mut fp = FirmwarePages::new();
/// let n = fp.query(&q, PagePhase::Boot)? as usize;
/// fp.give(&q, &*bus, n)?;
/// assert_eq!((fp.held(), dev.pages_held()), (n, n));
/// assert_eq!(fp.query(&q, PagePhase::Boot)?, 0); // satisfied
/// # Ok(()) }
/// ```
#[derive(Debug, Default)]
pub struct FirmwarePages {
    held: HashMap<u64, DmaRegion>,
    function_id: u16,
}

impl FirmwarePages {
    /// No pages held yet.
    ///
    /// ```
    /// assert_eq!(rnic_driver::pages::FirmwarePages::new().held(), 0);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of pages firmware holds.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let bus: std::sync::Arc<dyn rnic_hw_regs::Bus> = std::sync::Arc::new(dev.bus());
    /// # let q = rnic_driver::doc_fixture::enabled_cmdq(&bus)?;
    /// let mut fp = rnic_driver::pages::FirmwarePages::new();
    /// fp.give(&q, &*bus, 2)?;
    /// assert_eq!(fp.held(), 2);
    /// # Ok(()) }
    /// ```
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// QUERY_PAGES for `phase`: the signed number of pages firmware asks for.
    ///
    /// ```
    /// use rnic_driver::pages::{FirmwarePages, PagePhase};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let bus: std::sync::Arc<dyn rnic_hw_regs::Bus> = std::sync::Arc::new(dev.bus());
    /// # let q = rnic_driver::doc_fixture::enabled_cmdq(&bus)?;
    /// let mut fp = FirmwarePages::new();
    /// let boot = fp.query(&q, PagePhase::Boot)?;
    /// fp.give(&q, &*bus, boot as usize)?;
    /// assert_eq!(fp.query(&q, PagePhase::Boot)?, 0); // satisfied
    /// # Ok(()) }
    /// ```
    pub fn query(&mut self, cmdq: &CmdQueue, phase: PagePhase) -> Result<i32, DriverError> {
        let mut i = QueryPagesIn::new_cmd();
        i.set_op_mod(phase.op_mod());
        let out = cmdq.exec(&i, &[], &mut [])?;
        self.function_id = out.function_id();
        Ok(out.num_pages_signed())
    }

    /// Gives `count` pages, [`PAGES_PER_COMMAND`] per MANAGE_PAGES. If memory runs out,
    /// tells firmware with MANAGE_PAGES "can't give" and returns the error.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let bus: std::sync::Arc<dyn rnic_hw_regs::Bus> = std::sync::Arc::new(dev.bus());
    /// # let q = rnic_driver::doc_fixture::enabled_cmdq(&bus)?;
    /// let mut fp = rnic_driver::pages::FirmwarePages::new();
    /// fp.give(&q, &*bus, 600)?; // two MANAGE_PAGES: 512 + 88
    /// assert_eq!(dev.pages_held(), 600);
    /// # Ok(()) }
    /// ```
    pub fn give(
        &mut self,
        cmdq: &CmdQueue,
        bus: &dyn Bus,
        count: usize,
    ) -> Result<(), DriverError> {
        let mut left = count;
        while left > 0 {
            let n = left.min(PAGES_PER_COMMAND);
            let mut batch = Vec::with_capacity(n);
            for _ in 0..n {
                match bus.alloc_dma(FW_PAGE_SIZE) {
                    Ok(p) => batch.push(p),
                    Err(e) => {
                        for p in batch {
                            let _ = bus.free_dma(p);
                        }
                        self.cant_give(cmdq);
                        return Err(e.into());
                    }
                }
            }
            let pas: Vec<u8> = batch.iter().flat_map(|p| p.iova.to_be_bytes()).collect();
            let mut i = ManagePagesIn::new_cmd();
            i.set_op_mod(op_mod::MANAGE_PAGES_GIVE);
            i.set_function_id(self.function_id);
            i.set_input_num_entries(n as u32);
            match cmdq.exec_class(&i, &pas, &mut [], CLASS) {
                Ok(_) => {}
                Err(e) => {
                    // Delivered and refused: the pages are still ours. Otherwise the device
                    // may have taken some: keep them (leak) rather than free memory it uses.
                    if matches!(e, DriverError::Command { .. }) {
                        for p in batch {
                            let _ = bus.free_dma(p);
                        }
                    } else {
                        for p in batch {
                            self.held.insert(p.iova, p);
                        }
                    }
                    return Err(e);
                }
            }
            for p in batch {
                self.held.insert(p.iova, p);
            }
            left -= n;
        }
        Ok(())
    }

    fn cant_give(&self, cmdq: &CmdQueue) {
        let mut i = ManagePagesIn::new_cmd();
        i.set_op_mod(op_mod::MANAGE_PAGES_CANT_GIVE);
        i.set_function_id(self.function_id);
        if let Err(e) = cmdq.exec_class(&i, &[], &mut [], CLASS) {
            log::warn!("MANAGE_PAGES can't-give failed: {e}");
        }
    }

    /// Takes back up to `count` pages and frees them; returns how many firmware returned.
    /// Every returned address must be a page firmware holds, else [`DriverError::BadOutput`].
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let bus: std::sync::Arc<dyn rnic_hw_regs::Bus> = std::sync::Arc::new(dev.bus());
    /// # let q = rnic_driver::doc_fixture::enabled_cmdq(&bus)?;
    /// let mut fp = rnic_driver::pages::FirmwarePages::new();
    /// let n = fp.query(&q, rnic_driver::pages::PagePhase::Boot)? as usize;
    /// fp.give(&q, &*bus, n)?;
    /// // Firmware returns only pages it does not need: it needs its boot pages until teardown.
    /// assert_eq!(fp.take(&q, &*bus, n)?, 0);
    /// assert_eq!(fp.held(), n);
    /// # Ok(()) }
    /// ```
    pub fn take(
        &mut self,
        cmdq: &CmdQueue,
        bus: &dyn Bus,
        count: usize,
    ) -> Result<usize, DriverError> {
        let mut total = 0;
        let mut left = count;
        while left > 0 {
            let n = left.min(PAGES_PER_COMMAND);
            let mut i = ManagePagesIn::new_cmd();
            i.set_op_mod(op_mod::MANAGE_PAGES_TAKE);
            i.set_function_id(self.function_id);
            i.set_input_num_entries(n as u32);
            let mut pas = vec![0u8; n * 8];
            let out: ManagePagesOut = cmdq.exec_class(&i, &[], &mut pas, CLASS)?;
            let got = out.output_num_entries() as usize;
            if got > n {
                return Err(DriverError::BadOutput {
                    opcode: CmdOpcode::ManagePages,
                    what: format!("returned {got} pages, {n} were asked for"),
                });
            }
            for chunk in pas.chunks_exact(8).take(got) {
                let mut a = [0u8; 8];
                a.copy_from_slice(chunk);
                let addr = u64::from_be_bytes(a);
                match self.held.remove(&addr) {
                    Some(p) => bus.free_dma(p)?,
                    None => {
                        return Err(DriverError::BadOutput {
                            opcode: CmdOpcode::ManagePages,
                            what: format!("returned page {addr:#x}, which it was never given"),
                        });
                    }
                }
            }
            total += got;
            if got < n {
                break;
            }
            left -= n;
        }
        Ok(total)
    }

    /// Takes pages back until firmware holds none. Firmware that returns none while it still
    /// holds some (it still needs them: call this after TEARDOWN_HCA) is a `BadOutput` error,
    /// and the pages stay held.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let bus: std::sync::Arc<dyn rnic_hw_regs::Bus> = std::sync::Arc::new(dev.bus());
    /// # let q = rnic_driver::doc_fixture::enabled_cmdq(&bus)?;
    /// let mut fp = rnic_driver::pages::FirmwarePages::new();
    /// let n = fp.query(&q, rnic_driver::pages::PagePhase::Boot)? as usize;
    /// fp.give(&q, &*bus, n)?;
    /// // Before teardown firmware still needs its boot pages: none come back, an error.
    /// let err = fp.reclaim_all(&q, &*bus).unwrap_err();
    /// assert!(matches!(err, rnic_driver::DriverError::BadOutput { .. }));
    /// assert_eq!(fp.held(), n);
    /// # Ok(()) }
    /// ```
    pub fn reclaim_all(&mut self, cmdq: &CmdQueue, bus: &dyn Bus) -> Result<(), DriverError> {
        while !self.held.is_empty() {
            let want = self.held.len();
            let got = self.take(cmdq, bus, want)?;
            if got == 0 {
                return Err(DriverError::BadOutput {
                    opcode: CmdOpcode::ManagePages,
                    what: format!("firmware returns no pages but holds {want}"),
                });
            }
        }
        Ok(())
    }

    /// Forgets every page without freeing it (the device may still use them: leaked).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let bus: std::sync::Arc<dyn rnic_hw_regs::Bus> = std::sync::Arc::new(dev.bus());
    /// # let q = rnic_driver::doc_fixture::enabled_cmdq(&bus)?;
    /// let mut fp = rnic_driver::pages::FirmwarePages::new();
    /// fp.give(&q, &*bus, 2)?;
    /// dev.hang_firmware(); // no MANAGE_PAGES can take them back: the device may still use them
    /// assert_eq!(fp.leak_all(), 2);
    /// assert_eq!(fp.held(), 0);
    /// # Ok(()) }
    /// ```
    pub fn leak_all(&mut self) -> usize {
        let n = self.held.len();
        self.held.clear();
        n
    }

    /// Frees every page without a command (the device is disabled or gone).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let bus: std::sync::Arc<dyn rnic_hw_regs::Bus> = std::sync::Arc::new(dev.bus());
    /// # let q = rnic_driver::doc_fixture::enabled_cmdq(&bus)?;
    /// let mut fp = rnic_driver::pages::FirmwarePages::new();
    /// fp.give(&q, &*bus, 2)?;
    /// dev.kill_pci_link(); // the device is gone: its pages can be freed without a command
    /// fp.free_all(&*bus);
    /// assert_eq!(fp.held(), 0);
    /// # Ok(()) }
    /// ```
    pub fn free_all(&mut self, bus: &dyn Bus) {
        for (_, p) in self.held.drain() {
            if let Err(e) = bus.free_dma(p) {
                log::warn!("freeing a firmware page: {e}");
            }
        }
    }
}
