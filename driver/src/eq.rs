//! The event queue: one EQ that firmware writes page requests and asynchronous events to,
//! polled by the driver (CREATE_EQ's `event_bitmask` selects the events; there is no MAP_EQ).

use crate::cmdq::CmdQueue;
use crate::dma::{self, PAGE};
use crate::error::DriverError;
use crate::uar::Uar;
use rnic_hw_regs::cmd::{CreateEqIn, DestroyEqIn};
use rnic_hw_regs::ctx::Eqc;
use rnic_hw_regs::doorbell::{UAR_EQ_UPDATE_ARM, eq_doorbell};
use rnic_hw_regs::eqe::{EQE_OWNER_INIT, EQE_SIZE, Eqe, EqeEvent, EventType, eqe_is_sw_owned};
use rnic_hw_regs::layout::{FieldDesc, PrmLayout};
use rnic_hw_regs::{Bus, DmaRegion};
use std::ptr::NonNull;
use std::sync::atomic::{Ordering, fence};
use zerocopy::FromZeros;

/// The events the driver's EQ subscribes to: page requests and every asynchronous event
/// (QP/SRQ/CQ errors, port changes, internal errors). Completion events go to the EQ a CQ
/// names, command completions are polled.
pub const ASYNC_EVENTS: &[EventType] = &[
    EventType::PathMig,
    EventType::CommEst,
    EventType::SqDrained,
    EventType::CqError,
    EventType::WqCatasError,
    EventType::PathMigFailed,
    EventType::InternalError,
    EventType::PortChange,
    EventType::PageRequest,
    EventType::WqInvalReqError,
    EventType::WqAccessError,
    EventType::SrqCatasError,
    EventType::SrqLastWqe,
    EventType::SrqRqLimit,
];

/// The largest interrupt vector an EQ can raise: the EQ context's `intr` field is 12 bits.
///
/// ```
/// assert_eq!(rnic_driver::eq::MAX_EQ_VECTOR, 0xFFF);
/// ```
pub const MAX_EQ_VECTOR: u16 =
    ((1u32 << FieldDesc::named(Eqc::FIELDS, "intr").bit_width) - 1) as u16;

/// An event queue owned by the driver.
///
/// An event queue of its own next to the HCA's (which serves page requests and asynchronous
/// events):
///
/// ```
/// use rnic_driver::eq::EventQueue;
/// use rnic_hw_regs::eqe::EventType;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
/// let (cmdq, bus, uar) = (hca.cmdq(), &**hca.bus(), hca.uar().ok_or("closed")?);
/// let mut eq = EventQueue::create(cmdq, bus, uar, 4, &[EventType::PortChange])?;
/// assert_ne!(eq.eqn(), hca.eqn());
/// assert_eq!(eq.poll(bus, |ev| panic!("unexpected {ev:?}")), 0);
/// eq.destroy(cmdq, bus)?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct EventQueue {
    buf: Option<DmaRegion>,
    eqn: u8,
    log_size: u8,
    ci: u32,
    uar: Uar,
}

impl EventQueue {
    /// Allocates `2^log_size` EQEs (owner bits initialised to 1), creates the EQ with
    /// `events` selected and arms it.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let (cmdq, bus, uar) = (hca.cmdq(), &**hca.bus(), hca.uar().ok_or("closed")?);
    /// let eq = rnic_driver::eq::EventQueue::create(cmdq, bus, uar, 3, &[])?;
    /// assert_eq!(eq.consumer_index(), 0);
    /// # eq.destroy(cmdq, bus)?;
    /// # Ok(()) }
    /// ```
    pub fn create(
        cmdq: &CmdQueue,
        bus: &dyn Bus,
        uar: Uar,
        log_size: u8,
        events: &[EventType],
    ) -> Result<Self, DriverError> {
        Self::create_on_vector(cmdq, bus, uar, log_size, events, 0)
    }

    /// Like [`EventQueue::create`], raising interrupt vector `intr` (eqc `intr`) when armed.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let (cmdq, bus, uar) = (hca.cmdq(), &**hca.bus(), hca.uar().ok_or("closed")?);
    /// let eq = rnic_driver::eq::EventQueue::create_on_vector(cmdq, bus, uar, 3, &[], 2)?;
    /// assert_ne!(eq.eqn(), hca.eqn());
    /// # eq.destroy(cmdq, bus)?;
    /// # Ok(()) }
    /// ```
    pub fn create_on_vector(
        cmdq: &CmdQueue,
        bus: &dyn Bus,
        uar: Uar,
        log_size: u8,
        events: &[EventType],
        intr: u16,
    ) -> Result<Self, DriverError> {
        if intr > MAX_EQ_VECTOR {
            return Err(DriverError::InvalidArgument(format!(
                "interrupt vector {intr}: an EQ names at most {MAX_EQ_VECTOR}"
            )));
        }
        let len = EQE_SIZE << log_size;
        let buf = bus.alloc_dma(len.max(PAGE))?;
        for i in 0..1usize << log_size {
            dma::fill(&buf, i * EQE_SIZE, EQE_SIZE, 0);
            dma::write(&buf, i * EQE_SIZE + EQE_SIZE - 1, &[EQE_OWNER_INIT]);
        }
        let mut cmd = CreateEqIn::new_cmd();
        {
            let eqc = cmd.eq_context_entry_mut();
            eqc.set_log_eq_size(log_size);
            eqc.set_uar_page(uar.index());
            eqc.set_intr(intr);
            eqc.set_log_page_size(0);
        }
        for e in events {
            cmd.set_event(e.raw(), true);
        }
        let pas = dma::page_addresses(&buf, len);
        let out = match cmdq.exec(&cmd, &pas, &mut []) {
            Ok(o) => o,
            Err(e) => return Err(dma::release_after_failed_create(bus, buf, e, "CREATE_EQ")),
        };
        let eq = Self {
            buf: Some(buf),
            eqn: out.eq_number(),
            log_size,
            ci: 0,
            uar,
        };
        eq.doorbell(bus);
        Ok(eq)
    }

    /// The EQ number.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let (cmdq, bus, uar) = (hca.cmdq(), &**hca.bus(), hca.uar().ok_or("closed")?);
    /// let a = rnic_driver::eq::EventQueue::create(cmdq, bus, uar, 3, &[])?;
    /// let b = rnic_driver::eq::EventQueue::create(cmdq, bus, uar, 3, &[])?;
    /// assert_ne!(a.eqn(), b.eqn());
    /// # a.destroy(cmdq, bus)?;
    /// # b.destroy(cmdq, bus)?;
    /// # Ok(()) }
    /// ```
    pub fn eqn(&self) -> u8 {
        self.eqn
    }

    /// Consumer index.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let (cmdq, bus, uar) = (hca.cmdq(), &**hca.bus(), hca.uar().ok_or("closed")?);
    /// let mut eq = rnic_driver::eq::EventQueue::create(cmdq, bus, uar, 3, &[])?;
    /// eq.poll(bus, |_| {});
    /// assert_eq!(eq.consumer_index(), 0); // nothing arrived
    /// # eq.destroy(cmdq, bus)?;
    /// # Ok(()) }
    /// ```
    pub fn consumer_index(&self) -> u32 {
        self.ci
    }

    /// The EQE ring in host memory: its first byte and its length in bytes (`2^log_size`
    /// entries of [`EQE_SIZE`]), as [`crate::cq::Cq::cqe_ring`] gives a CQ's. For tests that
    /// play the device writing EQEs, a hostile one included: access it with volatile
    /// reads and writes, and only while the EQ exists.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let (cmdq, bus, uar) = (hca.cmdq(), &**hca.bus(), hca.uar().ok_or("closed")?);
    /// let eq = rnic_driver::eq::EventQueue::create(cmdq, bus, uar, 3, &[])?;
    /// let (ring, bytes) = eq.eqe_ring();
    /// assert_eq!(bytes, 8 * 64);
    /// // SAFETY: inside the live ring; volatile. Every entry starts with owner bit 1.
    /// assert_eq!(unsafe { ring.as_ptr().add(63).read_volatile() }, 1);
    /// # eq.destroy(cmdq, bus)?;
    /// # Ok(()) }
    /// ```
    pub fn eqe_ring(&self) -> (NonNull<u8>, usize) {
        let len = EQE_SIZE << self.log_size;
        match &self.buf {
            Some(buf) => (buf.vaddr, len),
            // Freed only by `destroy` / `free_buffer`, which consume `self`.
            None => (NonNull::dangling(), 0),
        }
    }

    /// Writes the consumer index and re-arms the EQ (UAR + 0x40).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let (cmdq, bus, uar) = (hca.cmdq(), &**hca.bus(), hca.uar().ok_or("closed")?);
    /// let eq = rnic_driver::eq::EventQueue::create(cmdq, bus, uar, 3, &[])?;
    /// eq.doorbell(bus); // re-arm at the current consumer index (create armed it already)
    /// assert!(eq.destroy(cmdq, bus).is_ok());
    /// # Ok(()) }
    /// ```
    pub fn doorbell(&self, bus: &dyn Bus) {
        fence(Ordering::Release);
        self.uar
            .write32(bus, UAR_EQ_UPDATE_ARM, eq_doorbell(self.eqn, self.ci));
    }

    /// Takes the next EQE software owns, if any. An EQE with an unknown event type is
    /// returned as `Err` (and consumed): the device is not trusted.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let (cmdq, bus, uar) = (hca.cmdq(), &**hca.bus(), hca.uar().ok_or("closed")?);
    /// let mut eq = rnic_driver::eq::EventQueue::create(cmdq, bus, uar, 3, &[])?;
    /// assert!(eq.next_event().is_none()); // every EQE is still the device's
    /// # eq.destroy(cmdq, bus)?;
    /// # Ok(()) }
    /// ```
    pub fn next_event(&mut self) -> Option<Result<EqeEvent, u8>> {
        let buf = self.buf.as_ref()?;
        let mask = (1u32 << self.log_size) - 1;
        let off = (self.ci & mask) as usize * EQE_SIZE;
        let owner = dma::read_u8(buf, off + EQE_SIZE - 1)?;
        if !eqe_is_sw_owned(owner, self.ci, self.log_size) {
            return None;
        }
        // Read the body only after the owner bit says it is ours.
        fence(Ordering::Acquire);
        let mut eqe = Eqe::new_zeroed();
        dma::read(buf, off, &mut eqe.0);
        self.ci = self.ci.wrapping_add(1) & 0xFF_FFFF;
        Some(eqe.event().map_err(|_| eqe.event_type()))
    }

    /// Drains the EQ into `f`, then updates the consumer index and re-arms. Returns the
    /// number of EQEs consumed.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let (cmdq, bus, uar) = (hca.cmdq(), &**hca.bus(), hca.uar().ok_or("closed")?);
    /// let mut eq = rnic_driver::eq::EventQueue::create(cmdq, bus, uar, 3, &[])?;
    /// let mut seen = Vec::new();
    /// assert_eq!(eq.poll(bus, |ev| seen.push(ev)), 0);
    /// assert!(seen.is_empty());
    /// # eq.destroy(cmdq, bus)?;
    /// # Ok(()) }
    /// ```
    pub fn poll(&mut self, bus: &dyn Bus, mut f: impl FnMut(Result<EqeEvent, u8>)) -> usize {
        let mut n = 0;
        // Never more than one lap: a device that keeps flipping owner bits cannot hang us.
        while n < 1usize << self.log_size {
            match self.next_event() {
                Some(ev) => {
                    f(ev);
                    n += 1;
                }
                None => break,
            }
        }
        if n > 0 {
            self.doorbell(bus);
        }
        n
    }

    /// DESTROY_EQ and frees the buffer (the buffer is freed even if the command fails,
    /// unless the device may still write it: then it is leaked).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let (cmdq, bus, uar) = (hca.cmdq(), &**hca.bus(), hca.uar().ok_or("closed")?);
    /// let eq = rnic_driver::eq::EventQueue::create(cmdq, bus, uar, 3, &[])?;
    /// assert!(eq.destroy(cmdq, bus).is_ok()); // DESTROY_EQ, buffer freed
    /// # Ok(()) }
    /// ```
    pub fn destroy(mut self, cmdq: &CmdQueue, bus: &dyn Bus) -> Result<(), DriverError> {
        let mut i = DestroyEqIn::new_cmd();
        i.set_eq_number(self.eqn);
        let r = cmdq.exec(&i, &[], &mut []);
        dma::release_after_destroy(bus, &mut self.buf, r, "DESTROY_EQ", u32::from(self.eqn))
    }

    /// Frees the buffer without a command (device gone or disabled).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let (cmdq, bus, uar) = (hca.cmdq(), &**hca.bus(), hca.uar().ok_or("closed")?);
    /// let eq = rnic_driver::eq::EventQueue::create(cmdq, bus, uar, 3, &[])?;
    /// dev.kill_pci_link(); // the device is gone: no DESTROY_EQ can reach it
    /// assert!(hca.check_health().is_err());
    /// eq.free_buffer(bus);
    /// # Ok(()) }
    /// ```
    pub fn free_buffer(mut self, bus: &dyn Bus) {
        if let Some(buf) = self.buf.take() {
            if let Err(e) = bus.free_dma(buf) {
                log::warn!("freeing the EQ buffer: {e}");
            }
        }
    }
}
