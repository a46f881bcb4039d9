//! Protection domains: ALLOC_PD / DEALLOC_PD, and the HCA's default PD.
//!
//! A [`Pd`] keeps its [`Hca`] alive; memory regions, QPs and SRQs keep their PD alive.
//!
//! ```no_run
//! # fn f(hca: std::sync::Arc<rnic_driver::Hca>) -> Result<(), rnic_driver::DriverError> {
//! use rnic_driver::pd::Pd;
//! use std::sync::Arc;
//!
//! let pd = Arc::new(Pd::alloc(&hca)?);
//! let default = Arc::new(Pd::default_of(&hca)); // the PD bring-up allocated
//! assert_ne!(pd.pdn(), default.pdn());
//! Arc::try_unwrap(pd).ok().unwrap().destroy()?; // or just drop it
//! # Ok(()) }
//! ```

use crate::error::DriverError;
use crate::hca::Hca;
use rnic_hw_regs::cmd::{AllocPdIn, DeallocPdIn};
use std::sync::Arc;

/// A protection domain.
///
/// ```
/// use rnic_driver::pd::Pd;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
///
/// let pd = Pd::alloc(&hca)?;
/// assert_ne!(pd.pdn(), hca.pd()); // not the default PD bring-up allocated
/// pd.destroy()?; // DEALLOC_PD (dropping does it too)
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Pd {
    hca: Arc<Hca>,
    pdn: u32,
    /// Allocated here (DEALLOC_PD on destroy); false for the HCA's default PD.
    owned: bool,
    done: bool,
}

impl Pd {
    /// ALLOC_PD.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let a = rnic_driver::pd::Pd::alloc(&hca)?;
    /// let b = rnic_driver::pd::Pd::alloc(&hca)?;
    /// assert_ne!(a.pdn(), b.pdn());
    /// # Ok(()) }
    /// ```
    pub fn alloc(hca: &Arc<Hca>) -> Result<Pd, DriverError> {
        let out = hca.cmdq().exec(&AllocPdIn::new_cmd(), &[], &mut [])?;
        Ok(Pd {
            hca: hca.clone(),
            pdn: out.pd(),
            owned: true,
            done: false,
        })
    }

    /// The PD bring-up allocated (owned by the HCA: destroying this handle frees nothing).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let pd = rnic_driver::pd::Pd::default_of(&hca);
    /// assert_eq!(pd.pdn(), hca.pd());
    /// pd.destroy()?; // frees nothing: the HCA owns it
    /// # Ok(()) }
    /// ```
    pub fn default_of(hca: &Arc<Hca>) -> Pd {
        Pd {
            hca: hca.clone(),
            pdn: hca.pd(),
            owned: false,
            done: false,
        }
    }

    /// The PD number.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// assert_ne!(pd.pdn(), pd.hca().pd());
    /// # Ok(()) }
    /// ```
    pub fn pdn(&self) -> u32 {
        self.pdn
    }

    /// The HCA.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// assert!(pd.hca().check_health().is_ok());
    /// # Ok(()) }
    /// ```
    pub fn hca(&self) -> &Arc<Hca> {
        &self.hca
    }

    fn dealloc(&mut self) -> Result<(), DriverError> {
        if self.done || !self.owned {
            self.done = true;
            return Ok(());
        }
        self.done = true;
        let mut i = DeallocPdIn::new_cmd();
        i.set_pd(self.pdn);
        self.hca.cmdq().exec(&i, &[], &mut [])?;
        Ok(())
    }

    /// DEALLOC_PD (nothing for the default PD).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// let pd = std::sync::Arc::try_unwrap(pd).map_err(|_| "PD still shared")?;
    /// assert!(pd.destroy().is_ok());
    /// # Ok(()) }
    /// ```
    pub fn destroy(mut self) -> Result<(), DriverError> {
        self.dealloc()
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        if let Err(e) = self.dealloc() {
            log::warn!("DEALLOC_PD {:#x} on drop: {e}", self.pdn);
        }
    }
}
