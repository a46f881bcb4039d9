//! UAR pages: ALLOC_UAR / DEALLOC_UAR and doorbell writes into the page (BAR0 + index * 4 KiB).

use crate::cmdq::CmdQueue;
use crate::error::DriverError;
use rnic_hw_regs::Bus;
use rnic_hw_regs::cmd::{AllocUarIn, DeallocUarIn};
use rnic_hw_regs::doorbell::{UAR_PAGE_SIZE, uar_bar_offset};

/// A UAR page the device allocated to this driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Uar {
    index: u32,
}

impl Uar {
    /// ALLOC_UAR. Fails with [`DriverError::BadOutput`] when the index the device returns is
    /// not inside BAR0.
    pub fn alloc(cmdq: &CmdQueue, bus: &dyn Bus) -> Result<Self, DriverError> {
        let out = cmdq.exec(&AllocUarIn::new_cmd(), &[], &mut [])?;
        let index = out.uar();
        let end = uar_bar_offset(index).saturating_add(UAR_PAGE_SIZE);
        if index == 0 || end > bus.bar_len() {
            return Err(DriverError::BadOutput {
                opcode: rnic_hw_regs::cmd::CmdOpcode::AllocUar,
                what: format!(
                    "UAR index {index:#x} is not a page of BAR0 ({:#x} bytes)",
                    bus.bar_len()
                ),
            });
        }
        Ok(Self { index })
    }

    /// DEALLOC_UAR.
    pub fn free(self, cmdq: &CmdQueue) -> Result<(), DriverError> {
        let mut i = DeallocUarIn::new_cmd();
        i.set_uar(self.index);
        cmdq.exec(&i, &[], &mut [])?;
        Ok(())
    }

    /// The UAR index (the value of `uar_page` fields).
    pub fn index(&self) -> u32 {
        self.index
    }

    /// BAR0 offset of the page.
    pub fn bar_offset(&self) -> usize {
        uar_bar_offset(self.index)
    }

    /// Writes a 32-bit doorbell at `offset` inside the page.
    pub fn write32(&self, bus: &dyn Bus, offset: usize, value: u32) {
        bus.write32(self.bar_offset() + offset, value);
    }

    /// Writes a 64-bit doorbell at `offset` inside the page (one 8-byte store).
    pub fn write64(&self, bus: &dyn Bus, offset: usize, value: u64) {
        bus.write64(self.bar_offset() + offset, value);
    }
}
