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
    pub fn default_of(hca: &Arc<Hca>) -> Pd {
        Pd {
            hca: hca.clone(),
            pdn: hca.pd(),
            owned: false,
            done: false,
        }
    }

    /// The PD number.
    pub fn pdn(&self) -> u32 {
        self.pdn
    }

    /// The HCA.
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
