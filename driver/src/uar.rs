//! UAR pages: ALLOC_UAR / DEALLOC_UAR and doorbell writes into the page (BAR0 + index * 4 KiB).

use crate::cmdq::CmdQueue;
use crate::error::DriverError;
use rnic_hw_regs::Bus;
use rnic_hw_regs::cmd::{AllocUarIn, DeallocUarIn};
use rnic_hw_regs::doorbell::{UAR_PAGE_SIZE, uar_bar_offset};

/// A UAR page the device allocated to this driver.
///
/// ```
/// use rnic_driver::uar::Uar;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
/// # let (cmdq, bus) = (hca.cmdq(), &**hca.bus());
/// let uar = Uar::alloc(cmdq, bus)?;
/// assert_ne!(Some(uar), hca.uar()); // a second page next to the HCA's
/// assert_eq!(uar.bar_offset(), uar.index() as usize * 4096);
/// uar.free(cmdq)?;
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Uar {
    index: u32,
}

impl Uar {
    /// ALLOC_UAR. Fails with [`DriverError::BadOutput`] when the index the device returns is
    /// not inside BAR0.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let (cmdq, bus) = (hca.cmdq(), &**hca.bus());
    /// let uar = rnic_driver::uar::Uar::alloc(cmdq, bus)?;
    /// assert!(uar.index() > 0 && uar.bar_offset() < rnic_hw_regs::Bus::bar_len(bus));
    /// # uar.free(cmdq)?;
    /// # Ok(()) }
    /// ```
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
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let (cmdq, bus) = (hca.cmdq(), &**hca.bus());
    /// let uar = rnic_driver::uar::Uar::alloc(cmdq, bus)?;
    /// assert!(uar.free(cmdq).is_ok()); // DEALLOC_UAR
    /// # Ok(()) }
    /// ```
    pub fn free(self, cmdq: &CmdQueue) -> Result<(), DriverError> {
        let mut i = DeallocUarIn::new_cmd();
        i.set_uar(self.index);
        cmdq.exec(&i, &[], &mut [])?;
        Ok(())
    }

    /// The UAR index (the value of `uar_page` fields).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let uar = hca.uar().ok_or("closed")?;
    /// let cq = rnic_driver::cq::Cq::create(&hca, 16, None)?;
    /// assert_eq!(cq.query()?.uar_page(), uar.index()); // `uar_page` fields name it
    /// # Ok(()) }
    /// ```
    pub fn index(&self) -> u32 {
        self.index
    }

    /// BAR0 offset of the page.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let uar = hca.uar().ok_or("closed")?;
    /// assert_eq!(uar.bar_offset() % 4096, 0);
    /// # Ok(()) }
    /// ```
    pub fn bar_offset(&self) -> usize {
        uar_bar_offset(self.index)
    }

    /// Writes a 32-bit doorbell at `offset` inside the page.
    ///
    /// An event queue re-armed by hand, as [`EventQueue::doorbell`](crate::eq::EventQueue::doorbell)
    /// does it:
    ///
    /// ```
    /// use rnic_driver::eq::EventQueue;
    /// use rnic_hw_regs::doorbell::{eq_doorbell, UAR_EQ_UPDATE_ARM};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let (cmdq, bus) = (hca.cmdq(), &**hca.bus());
    /// let uar = hca.uar().ok_or("closed")?;
    /// let eq = EventQueue::create(cmdq, bus, uar, 3, &[])?;
    /// uar.write32(bus, UAR_EQ_UPDATE_ARM, eq_doorbell(eq.eqn(), eq.consumer_index()));
    /// assert!(eq.destroy(cmdq, bus).is_ok());
    /// # Ok(()) }
    /// ```
    pub fn write32(&self, bus: &dyn Bus, offset: usize, value: u32) {
        bus.write32(self.bar_offset() + offset, value);
    }

    /// Writes a 64-bit doorbell at `offset` inside the page (one 8-byte store).
    ///
    /// A CQ armed by hand, as [`Cq::req_notify`](crate::cq::Cq::req_notify) does it (after writing
    /// the arm word into the doorbell record):
    ///
    /// ```
    /// use rnic_hw_regs::doorbell::{cq_arm_doorbell, cq_arm_word, CqArmCmd, UAR_CQ_ARM};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let (cmdq, bus) = (hca.cmdq(), &**hca.bus());
    /// let uar = hca.uar().ok_or("closed")?;
    /// let cq = rnic_driver::cq::Cq::create(&hca, 16, None)?;
    /// let word = cq_arm_word(0, CqArmCmd::NextCompletion, cq.consumer_index());
    /// uar.write64(bus, UAR_CQ_ARM, cq_arm_doorbell(word, cq.cqn()));
    /// assert!(hca.process_events()?.is_empty()); // armed; no completion yet
    /// # Ok(()) }
    /// ```
    pub fn write64(&self, bus: &dyn Bus, offset: usize, value: u64) {
        bus.write64(self.bar_offset() + offset, value);
    }
}
