//! Memory windows as MKeys: a free KLM-mode mkey with `umr_en` (CREATE_MKEY / DESTROY_MKEY),
//! as `mlx5_ib_alloc_mw` creates one; type 2 with `en_rinval`. The window grants nothing
//! until a bind work request ([`SendOp::BindMw`](crate::wr::SendOp::BindMw), a UMR WQE)
//! points it at part of a region; LOCAL_INV or a peer's SEND_WITH_INV (type 2) frees it
//! again. Its key keeps its index; each bind chooses a new variant byte.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
//! # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
//! use rnic_driver::mw::Mw;
//! use rnic_driver::wr::MwType;
//!
//! let mw = Mw::alloc(&pd, MwType::Two)?;
//! assert_eq!(mw.mw_type(), MwType::Two);
//! assert_eq!(mw.next_rkey() >> 8, mw.rkey() >> 8);
//! assert_ne!(mw.next_rkey(), mw.rkey());
//! mw.destroy()?;
//! # Ok(()) }
//! ```

use crate::error::DriverError;
use crate::pd::Pd;
use crate::wr::MwType;
use rnic_hw_regs::cmd::{CreateMkeyIn, DestroyMkeyIn, mkey_key};
use rnic_hw_regs::ctx::MKC_ACCESS_MODE_KLM;
use rnic_hw_regs::umr::BIND_KLM_OCTOWORDS;
use std::sync::Arc;

/// mkc `qpn` of a key bound to no QP.
const QPN_UNBOUND: u32 = 0xFF_FFFF;

/// A memory window.
#[derive(Debug)]
pub struct Mw {
    pd: Arc<Pd>,
    key: u32,
    mw_type: MwType,
    done: bool,
}

impl Mw {
    /// CREATE_MKEY of a free window of `mw_type` in `pd`, with room for one KLM.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// let a = rnic_driver::mw::Mw::alloc(&pd, rnic_driver::wr::MwType::One)?;
    /// let b = rnic_driver::mw::Mw::alloc(&pd, rnic_driver::wr::MwType::One)?;
    /// assert_ne!(a.rkey() >> 8, b.rkey() >> 8);
    /// # Ok(()) }
    /// ```
    pub fn alloc(pd: &Arc<Pd>, mw_type: MwType) -> Result<Mw, DriverError> {
        let hca = pd.hca();
        let variant = hca.next_key_variant();
        let mut cmd = CreateMkeyIn::new_cmd();
        {
            let m = cmd.memory_key_mkey_entry_mut();
            m.set_free(true);
            m.set_translations_octword_size(u32::from(BIND_KLM_OCTOWORDS));
            m.set_pd(pd.pdn());
            m.set_umr_en(true);
            m.set_lr(true);
            m.set_access_mode(MKC_ACCESS_MODE_KLM);
            m.set_en_rinval(mw_type == MwType::Two);
            m.set_qpn(QPN_UNBOUND);
            m.set_mkey_7_0(variant);
        }
        let out = hca.cmdq().exec(&cmd, &[], &mut [])?;
        Ok(Mw {
            pd: pd.clone(),
            key: mkey_key(out.mkey_index(), variant),
            mw_type,
            done: false,
        })
    }

    /// The window's current key (what peers use once it is bound).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// let mut mw = rnic_driver::mw::Mw::alloc(&pd, rnic_driver::wr::MwType::One)?;
    /// let next = mw.next_rkey();
    /// mw.set_rkey(next); // what a successful bind does
    /// assert_eq!(mw.rkey(), next);
    /// # Ok(()) }
    /// ```
    pub fn rkey(&self) -> u32 {
        self.key
    }

    /// The key a bind would give the window next: same index, the variant byte plus one
    /// (`ibv_inc_rkey`), skipping 0 as the driver's keys do.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// let mw = rnic_driver::mw::Mw::alloc(&pd, rnic_driver::wr::MwType::Two)?;
    /// assert_ne!(mw.next_rkey() & 0xFF, 0);
    /// # Ok(()) }
    /// ```
    pub fn next_rkey(&self) -> u32 {
        let v = (self.key as u8).wrapping_add(1).max(1);
        (self.key & !0xFF) | u32::from(v)
    }

    /// Records the key a bind gave the window (the caller saw the bind complete, or posts it
    /// as `ibv_bind_mw` does).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// let mut mw = rnic_driver::mw::Mw::alloc(&pd, rnic_driver::wr::MwType::One)?;
    /// let k = mw.next_rkey();
    /// mw.set_rkey(k);
    /// assert_eq!(mw.rkey(), k);
    /// # Ok(()) }
    /// ```
    pub fn set_rkey(&mut self, rkey: u32) {
        // The index is the window's; only the variant byte changes.
        self.key = (self.key & !0xFF) | (rkey & 0xFF);
    }

    /// The window's type.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// let mw = rnic_driver::mw::Mw::alloc(&pd, rnic_driver::wr::MwType::One)?;
    /// assert_eq!(mw.mw_type(), rnic_driver::wr::MwType::One);
    /// # Ok(()) }
    /// ```
    pub fn mw_type(&self) -> MwType {
        self.mw_type
    }

    /// The window's protection domain.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// let mw = rnic_driver::mw::Mw::alloc(&pd, rnic_driver::wr::MwType::One)?;
    /// assert_eq!(mw.pd().pdn(), pd.pdn());
    /// # Ok(()) }
    /// ```
    pub fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }

    fn teardown(&mut self) -> Result<(), DriverError> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        let mut i = DestroyMkeyIn::new_cmd();
        i.set_mkey_index(self.key >> 8);
        self.pd.hca().cmdq().exec(&i, &[], &mut []).map(|_| ())
    }

    /// DESTROY_MKEY (`ibv_dealloc_mw`).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// let mw = rnic_driver::mw::Mw::alloc(&pd, rnic_driver::wr::MwType::Two)?;
    /// assert!(mw.destroy().is_ok());
    /// # Ok(()) }
    /// ```
    pub fn destroy(mut self) -> Result<(), DriverError> {
        self.teardown()
    }
}

drop_by_teardown!(Mw, "memory window", key);
