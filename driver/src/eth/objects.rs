//! Transport domains, TISs and TIRs: ALLOC/DEALLOC_TRANSPORT_DOMAIN, CREATE/DESTROY_TIS,
//! CREATE/DESTROY_TIR. Each holds what it depends on, and its `Drop` destroys it.

use std::sync::Arc;

use rnic_hw_regs::cmd::{
    AllocTransportDomainIn, CreateTirIn, CreateTisIn, DeallocTransportDomainIn, DestroyTirIn,
    DestroyTisIn,
};
use rnic_hw_regs::ctx::TirDispType;

use super::RawRq;
use crate::error::DriverError;
use crate::hca::Hca;

/// A transport domain (ALLOC_TRANSPORT_DOMAIN), the domain TISs and TIRs belong to.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
/// let td = rnic_driver::eth::TransportDomain::alloc(&hca)?;
/// assert_ne!(td.tdn(), 0);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct TransportDomain {
    hca: Arc<Hca>,
    tdn: u32,
    done: bool,
}

impl TransportDomain {
    /// ALLOC_TRANSPORT_DOMAIN.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let a = rnic_driver::eth::TransportDomain::alloc(&hca)?;
    /// let b = rnic_driver::eth::TransportDomain::alloc(&hca)?;
    /// assert_ne!(a.tdn(), b.tdn());
    /// # Ok(()) }
    /// ```
    pub fn alloc(hca: &Arc<Hca>) -> Result<TransportDomain, DriverError> {
        let out = hca
            .cmdq()
            .exec(&AllocTransportDomainIn::new_cmd(), &[], &mut [])?;
        Ok(TransportDomain {
            hca: hca.clone(),
            tdn: out.transport_domain(),
            done: false,
        })
    }

    /// The transport domain number.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// assert!(rnic_driver::eth::TransportDomain::alloc(&hca)?.tdn() > 0);
    /// # Ok(()) }
    /// ```
    pub fn tdn(&self) -> u32 {
        self.tdn
    }

    /// The HCA the domain belongs to.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let td = rnic_driver::eth::TransportDomain::alloc(&hca)?;
    /// assert!(std::sync::Arc::ptr_eq(td.hca(), &hca));
    /// # Ok(()) }
    /// ```
    pub fn hca(&self) -> &Arc<Hca> {
        &self.hca
    }

    fn teardown(&mut self) -> Result<(), DriverError> {
        if std::mem::replace(&mut self.done, true) {
            return Ok(());
        }
        let mut i = DeallocTransportDomainIn::new_cmd();
        i.set_transport_domain(self.tdn);
        self.hca.cmdq().exec(&i, &[], &mut []).map(|_| ())
    }
}

drop_by_teardown!(TransportDomain, "transport domain", tdn);

/// A transport interface send object (CREATE_TIS): what a [`super::RawSq`]'s frames leave
/// through.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
/// use rnic_driver::eth::{Tis, TransportDomain};
/// let td = std::sync::Arc::new(TransportDomain::alloc(&hca)?);
/// let tis = Tis::create(&td)?;
/// assert_ne!(tis.tisn(), 0);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Tis {
    td: Arc<TransportDomain>,
    tisn: u32,
    done: bool,
}

impl Tis {
    /// CREATE_TIS in `td`, priority 0.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # use rnic_driver::eth::{Tis, TransportDomain};
    /// let td = std::sync::Arc::new(TransportDomain::alloc(&hca)?);
    /// assert_ne!(Tis::create(&td)?.tisn(), Tis::create(&td)?.tisn());
    /// # Ok(()) }
    /// ```
    pub fn create(td: &Arc<TransportDomain>) -> Result<Tis, DriverError> {
        let mut i = CreateTisIn::new_cmd();
        i.ctx_mut().set_transport_domain(td.tdn);
        let out = td.hca.cmdq().exec(&i, &[], &mut [])?;
        Ok(Tis {
            td: td.clone(),
            tisn: out.tisn(),
            done: false,
        })
    }

    /// The TIS number.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let td = std::sync::Arc::new(rnic_driver::eth::TransportDomain::alloc(&hca)?);
    /// assert!(rnic_driver::eth::Tis::create(&td)?.tisn() > 0);
    /// # Ok(()) }
    /// ```
    pub fn tisn(&self) -> u32 {
        self.tisn
    }

    fn teardown(&mut self) -> Result<(), DriverError> {
        if std::mem::replace(&mut self.done, true) {
            return Ok(());
        }
        let mut i = DestroyTisIn::new_cmd();
        i.set_tisn(self.tisn);
        self.td.hca.cmdq().exec(&i, &[], &mut []).map(|_| ())
    }
}

drop_by_teardown!(Tis, "TIS", tisn);

/// A transport interface receive object (CREATE_TIR) dispatching directly to one
/// [`RawRq`]: what a flow rule forwards to.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
/// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
/// use rnic_driver::eth::{RawRq, Tir, TransportDomain};
/// let td = std::sync::Arc::new(TransportDomain::alloc(&hca)?);
/// let rq = std::sync::Arc::new(RawRq::create(&pd, 8, 1)?);
/// let tir = Tir::create(&td, &rq)?;
/// assert_eq!(tir.rq().rqn(), rq.rqn());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Tir {
    td: Arc<TransportDomain>,
    rq: Arc<RawRq>,
    tirn: u32,
    done: bool,
}

impl Tir {
    /// CREATE_TIR in `td`, direct dispatch to `rq`.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
    /// # use rnic_driver::eth::{RawRq, Tir, TransportDomain};
    /// let td = std::sync::Arc::new(TransportDomain::alloc(&hca)?);
    /// let rq = std::sync::Arc::new(RawRq::create(&pd, 8, 1)?);
    /// assert!(Tir::create(&td, &rq)?.tirn() > 0);
    /// # Ok(()) }
    /// ```
    pub fn create(td: &Arc<TransportDomain>, rq: &Arc<RawRq>) -> Result<Tir, DriverError> {
        let mut i = CreateTirIn::new_cmd();
        let c = i.ctx_mut();
        c.set_transport_domain(td.tdn);
        c.set_disp_type(TirDispType::Direct.into());
        c.set_inline_rqn(rq.rqn());
        let out = td.hca.cmdq().exec(&i, &[], &mut [])?;
        Ok(Tir {
            td: td.clone(),
            rq: rq.clone(),
            tirn: out.tirn(),
            done: false,
        })
    }

    /// The TIR number.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
    /// # let td = std::sync::Arc::new(rnic_driver::eth::TransportDomain::alloc(&hca)?);
    /// # let rq = std::sync::Arc::new(rnic_driver::eth::RawRq::create(&pd, 8, 1)?);
    /// assert!(rnic_driver::eth::Tir::create(&td, &rq)?.tirn() > 0);
    /// # Ok(()) }
    /// ```
    pub fn tirn(&self) -> u32 {
        self.tirn
    }

    /// The RQ the TIR delivers to.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&hca)?);
    /// # let td = std::sync::Arc::new(rnic_driver::eth::TransportDomain::alloc(&hca)?);
    /// let rq = std::sync::Arc::new(rnic_driver::eth::RawRq::create(&pd, 8, 1)?);
    /// let tir = rnic_driver::eth::Tir::create(&td, &rq)?;
    /// assert!(std::sync::Arc::ptr_eq(tir.rq(), &rq));
    /// # Ok(()) }
    /// ```
    pub fn rq(&self) -> &Arc<RawRq> {
        &self.rq
    }

    pub(super) fn hca(&self) -> &Arc<Hca> {
        &self.td.hca
    }

    fn teardown(&mut self) -> Result<(), DriverError> {
        if std::mem::replace(&mut self.done, true) {
            return Ok(());
        }
        let mut i = DestroyTirIn::new_cmd();
        i.set_tirn(self.tirn);
        self.td.hca.cmdq().exec(&i, &[], &mut []).map(|_| ())
    }
}

drop_by_teardown!(Tir, "TIR", tirn);
