//! Memory regions as MKeys: MTT mode over registered user memory (CREATE_MKEY / DESTROY_MKEY).
//!
//! Registration maps the memory for DMA ([`rnic_hw_regs::Bus::map_dma`]), builds the MTT
//! (one BE64 `page_iova | write | read` per 4 KiB page, the first being the page that holds
//! the start), and creates an MTT-mode MKey whose `start_addr` is the host virtual address:
//! the address work requests and remote peers use. `lkey = rkey = mkey_index << 8 |
//! variant`. The PRM leaves the variant byte (`mkey_7_0`) to software: each device draws a
//! random start and a random odd step at open
//! ([`HcaConfig::mkey_seed`](crate::HcaConfig::mkey_seed) fixes them), so keys cannot be
//! guessed from the order of registration (a peer that can inject packets needs an rkey),
//! and 255 keys in a row differ, so that a stale key of a destroyed region does not match a
//! new one at the same index. No key can equal a special one: the device never gives out
//! MKey index 0 (the reserved lkey's), and variant 0 is never used (index 1 with it would
//! be the invalid lkey 0x100).
//!
//! Memory the device (or a remote peer) may write is not Rust memory: an owned region
//! ([`Mr::alloc`]) is only touched through [`Mr::write`] / [`Mr::read`] (volatile copies);
//! a region from raw parts ([`Mr::register_raw`]) is `unsafe` with the contract written down.
//!
//! ```no_run
//! # fn f(pd: std::sync::Arc<rnic_driver::pd::Pd>) -> Result<(), rnic_driver::DriverError> {
//! use rnic_driver::mr::Mr;
//! use rnic_driver::wr::{Access, Sge};
//!
//! let mr = Mr::alloc(&pd, 8192, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
//! mr.write(0, b"hello");
//! let sge = Sge { addr: mr.addr(), len: 5, lkey: mr.lkey() };
//! # let _ = sge;
//! let mut back = [0u8; 5];
//! mr.read(0, &mut back);
//! assert_eq!(&back, b"hello");
//! # Ok(()) }
//! ```

use crate::error::DriverError;
use crate::pd::Pd;
use crate::wr::Access;
use rnic_hw_regs::cmd::{CreateMkeyIn, DestroyMkeyIn, mkey_key};
use rnic_hw_regs::ctx::MKC_ACCESS_MODE_MTT;
use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::Arc;

const PAGE: usize = 4096;
/// MTT entry flags: read (bit 0) and write (bit 1).
const MTT_RW: u64 = 0x3;
/// mkc `qpn` of a key bound to no QP.
const QPN_UNBOUND: u32 = 0xFF_FFFF;

/// Memory the region owns (from [`Mr::alloc`]).
#[derive(Debug)]
struct Owned {
    ptr: NonNull<u8>,
    layout: Layout,
}

/// A registered memory region.
///
/// ```
/// use rnic_driver::mr::Mr;
/// use rnic_driver::wr::Access;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
///
/// let mr = Mr::alloc(&pd, 8192, Access::LOCAL_WRITE | Access::REMOTE_READ)?;
/// assert_eq!((mr.len(), mr.lkey()), (8192, mr.rkey()));
/// assert!(mr.access().contains(Access::REMOTE_READ));
/// mr.write(4096, b"abc");
/// let sge = mr.sge(4096, 3);
/// assert_eq!((sge.addr, sge.lkey), (mr.addr() + 4096, mr.lkey()));
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Mr {
    pd: Arc<Pd>,
    key: u32,
    addr: u64,
    len: usize,
    iova: u64,
    access: Access,
    owned: Option<Owned>,
    done: bool,
}

// SAFETY: the region's memory is reached only through raw pointers with volatile copies (or
// by the device); the handle itself holds no Rust references into it.
unsafe impl Send for Mr {}
// SAFETY: as for `Send`; `read`/`write` are volatile copies that may race only with the
// device or a remote peer, which is the nature of registered memory.
unsafe impl Sync for Mr {}

/// The MTT entries for `len` bytes at `iova` (4 KiB pages), as BE64 bytes padded to whole
/// octwords (pairs of entries).
///
/// ```
/// use rnic_driver::mr::mtt_entries;
///
/// let mtt = mtt_entries(0x1_0000_0800, 0x1000);
/// assert_eq!(mtt.len(), 16); // two pages: the one holding the start and the next
/// assert_eq!(&mtt[..8], &0x1_0000_0003u64.to_be_bytes());
/// assert_eq!(&mtt[8..], &0x1_0000_1003u64.to_be_bytes());
/// ```
pub fn mtt_entries(iova: u64, len: usize) -> Vec<u8> {
    let first = iova & !(PAGE as u64 - 1);
    let npages = ((iova - first) as usize + len).div_ceil(PAGE);
    let mut v = Vec::with_capacity(npages.next_multiple_of(2) * 8);
    for i in 0..npages {
        v.extend_from_slice(&((first + (i * PAGE) as u64) | MTT_RW).to_be_bytes());
    }
    if npages % 2 == 1 {
        v.extend_from_slice(&[0; 8]);
    }
    v
}

/// Refuses a region longer than the device's [`crate::Hca::max_mr_size`].
fn check_size(pd: &Pd, len: usize) -> Result<(), DriverError> {
    let max = pd.hca().max_mr_size();
    if len as u64 > max {
        return Err(DriverError::LimitExceeded {
            what: "memory region bytes",
            requested: len as u64,
            max,
        });
    }
    Ok(())
}

impl Mr {
    /// Allocates `len` zeroed bytes (4 KiB aligned) and registers them with `access`.
    ///
    /// ```
    /// use rnic_driver::{DriverError, mr::Mr, wr::Access};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// let mr = Mr::alloc(&pd, 100, Access::LOCAL_WRITE)?;
    /// assert_eq!(mr.addr() % 4096, 0); // page aligned, zeroed
    /// let err = Mr::alloc(&pd, 0, Access::LOCAL_WRITE).unwrap_err();
    /// assert!(matches!(err, DriverError::InvalidArgument(_)));
    /// let err = Mr::alloc(&pd, usize::MAX, Access::LOCAL_WRITE).unwrap_err(); // no rounding overflow
    /// assert!(matches!(err, DriverError::InvalidArgument(_)));
    /// # Ok(()) }
    /// ```
    pub fn alloc(pd: &Arc<Pd>, len: usize, access: Access) -> Result<Mr, DriverError> {
        if len == 0 {
            return Err(DriverError::InvalidArgument(
                "memory region of 0 bytes".into(),
            ));
        }
        // Within PAGE of usize::MAX the rounding overflows (a debug panic, a 0-byte layout in
        // release): refused like every other size no allocation can hold.
        let layout = len
            .checked_next_multiple_of(PAGE)
            .and_then(|size| Layout::from_size_align(size, PAGE).ok())
            .ok_or_else(|| DriverError::InvalidArgument(format!("region of {len} bytes")))?;
        check_size(pd, len)?;
        // SAFETY: the layout has a non-zero size.
        let ptr = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
            .ok_or(DriverError::Bus(rnic_hw_regs::BusError::NoMemory))?;
        // SAFETY: the allocation lives until the region is destroyed (freed after the MKey is
        // destroyed and the memory unmapped, or leaked if the device may still use it).
        match unsafe { Self::register_raw(pd, ptr.as_ptr(), len, access) } {
            Ok(mut mr) => {
                mr.owned = Some(Owned { ptr, layout });
                Ok(mr)
            }
            Err(e) => {
                // SAFETY: allocated above with this layout; registration failed before the
                // device could use it (or it was unmapped).
                unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) };
                Err(e)
            }
        }
    }

    /// Registers `len` bytes at `addr` with `access` (local read is always allowed).
    ///
    /// # Safety
    /// `addr..addr + len` must be allocated memory that stays allocated, and is not moved,
    /// until the region is destroyed (dropped or [`Mr::destroy`]ed); the device and remote
    /// peers (as `access` allows) may read and write it at any time until then, so the
    /// caller must not hold Rust references into it while work requests use it.
    ///
    /// ```
    /// use rnic_driver::{mr::Mr, wr::Access};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// let mut buf = vec![0u8; 4096];
    /// // SAFETY: `buf` stays allocated and unmoved until the region is destroyed, and no
    /// // reference into it is used meanwhile.
    /// let mr = unsafe { Mr::register_raw(&pd, buf.as_mut_ptr(), buf.len(), Access::LOCAL_WRITE)? };
    /// assert_eq!(mr.addr(), buf.as_ptr() as u64);
    /// mr.write(0, b"hi");
    /// mr.destroy()?;
    /// assert_eq!(&buf[..2], b"hi");
    /// # Ok(()) }
    /// ```
    pub unsafe fn register_raw(
        pd: &Arc<Pd>,
        addr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<Mr, DriverError> {
        let ptr = NonNull::new(addr)
            .ok_or_else(|| DriverError::InvalidArgument("null region address".into()))?;
        if len == 0 {
            return Err(DriverError::InvalidArgument(
                "memory region of 0 bytes".into(),
            ));
        }
        check_size(pd, len)?;
        let hca = pd.hca();
        let bus = hca.bus();
        // SAFETY: the caller's contract covers the mapping's lifetime.
        let iova = unsafe { bus.map_dma(ptr, len) }?;
        let unmap = |e: DriverError| {
            if let Err(u) = bus.unmap_dma(iova, len) {
                log::warn!("unmapping a region after a failed registration: {u}");
            }
            e
        };
        if iova % PAGE as u64 != addr as u64 % PAGE as u64 {
            return Err(unmap(DriverError::Unsupported(format!(
                "bus mapping at IOVA {iova:#x} does not keep the page offset of {addr:p}"
            ))));
        }
        let mtt = mtt_entries(iova, len);
        let variant = hca.next_key_variant();
        let mut cmd = CreateMkeyIn::new_cmd();
        cmd.set_translations_octword_actual_size((mtt.len() / 16) as u32);
        {
            let m = cmd.memory_key_mkey_entry_mut();
            m.set_access_mode(MKC_ACCESS_MODE_MTT);
            m.set_lr(true);
            m.set_lw(access.contains(Access::LOCAL_WRITE));
            m.set_rr(access.contains(Access::REMOTE_READ));
            m.set_rw(access.contains(Access::REMOTE_WRITE));
            m.set_a(access.contains(Access::REMOTE_ATOMIC));
            m.set_en_rinval(access.contains(Access::REMOTE_INVALIDATE));
            m.set_qpn(QPN_UNBOUND);
            m.set_mkey_7_0(variant);
            m.set_pd(pd.pdn());
            m.set_start_addr(addr as u64);
            m.set_len(len as u64);
            m.set_translations_octword_size((mtt.len() / 16) as u32);
            m.set_log_page_size(12);
        }
        let out = match hca.cmdq().exec(&cmd, &mtt, &mut []) {
            Ok(o) => o,
            Err(e) if e.device_answered() => return Err(unmap(e)),
            Err(e) => {
                // The device may have created the key: keep the mapping (leaked).
                log::warn!("CREATE_MKEY did not complete; {len} bytes stay mapped");
                return Err(e);
            }
        };
        Ok(Mr {
            pd: pd.clone(),
            key: mkey_key(out.mkey_index(), variant),
            addr: addr as u64,
            len,
            iova,
            access,
            owned: None,
            done: false,
        })
    }

    /// The local key.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// # let mr = rnic_driver::mr::Mr::alloc(&pd, 64, rnic_driver::wr::Access::NONE)?;
    /// let other = rnic_driver::mr::Mr::alloc(&pd, 64, rnic_driver::wr::Access::NONE)?;
    /// assert_ne!(mr.lkey(), other.lkey());
    /// # Ok(()) }
    /// ```
    pub fn lkey(&self) -> u32 {
        self.key
    }

    /// The remote key (equal to the local key).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// # let mr = rnic_driver::mr::Mr::alloc(&pd, 64, rnic_driver::wr::Access::REMOTE_WRITE)?;
    /// assert_eq!(mr.rkey(), mr.lkey());
    /// # Ok(()) }
    /// ```
    pub fn rkey(&self) -> u32 {
        self.key
    }

    /// The start address (the host virtual address; what SGEs and peers use).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// # let mr = rnic_driver::mr::Mr::alloc(&pd, 64, rnic_driver::wr::Access::NONE)?;
    /// assert_eq!(mr.sge(8, 4).addr, mr.addr() + 8);
    /// # Ok(()) }
    /// ```
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// Length in bytes.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// # let mr = rnic_driver::mr::Mr::alloc(&pd, 64, rnic_driver::wr::Access::NONE)?;
    /// assert_eq!(mr.len(), 64); // as asked, though a whole page was allocated
    /// # Ok(()) }
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty (never: registration refuses 0 bytes).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// # let mr = rnic_driver::mr::Mr::alloc(&pd, 64, rnic_driver::wr::Access::NONE)?;
    /// assert!(!mr.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The IOVA the bus mapped the memory at.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// # let mr = rnic_driver::mr::Mr::alloc(&pd, 64, rnic_driver::wr::Access::NONE)?;
    /// assert_eq!(mr.iova() % 4096, 0); // the bus maps whole pages
    /// # Ok(()) }
    /// ```
    pub fn iova(&self) -> u64 {
        self.iova
    }

    /// The access rights.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// # let mr = rnic_driver::mr::Mr::alloc(&pd, 64, rnic_driver::wr::Access::REMOTE_READ)?;
    /// assert_eq!(mr.access(), rnic_driver::wr::Access::REMOTE_READ);
    /// # Ok(()) }
    /// ```
    pub fn access(&self) -> Access {
        self.access
    }

    /// The PD.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// # let mr = rnic_driver::mr::Mr::alloc(&pd, 64, rnic_driver::wr::Access::NONE)?;
    /// assert_eq!(mr.pd().pdn(), pd.pdn());
    /// # Ok(()) }
    /// ```
    pub fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }

    /// An SGE of `len` bytes at `offset` into the region.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// # let mr = rnic_driver::mr::Mr::alloc(&pd, 64, rnic_driver::wr::Access::NONE)?;
    /// let sge = mr.sge(16, 32);
    /// assert_eq!((sge.addr, sge.len, sge.lkey), (mr.addr() + 16, 32, mr.lkey()));
    /// # Ok(()) }
    /// ```
    pub fn sge(&self, offset: usize, len: u32) -> crate::wr::Sge {
        crate::wr::Sge {
            addr: self.addr + offset as u64,
            len,
            lkey: self.key,
        }
    }

    /// Copies `data` into the region at `offset` (volatile writes). Panics if the range is
    /// outside the region.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// # let mr = rnic_driver::mr::Mr::alloc(&pd, 64, rnic_driver::wr::Access::LOCAL_WRITE)?;
    /// mr.write(60, b"tail");
    /// let mut out = [0u8; 4];
    /// mr.read(60, &mut out);
    /// assert_eq!(&out, b"tail");
    /// # Ok(()) }
    /// ```
    pub fn write(&self, offset: usize, data: &[u8]) {
        assert!(
            offset
                .checked_add(data.len())
                .is_some_and(|e| e <= self.len),
            "write of {} bytes at {offset} outside a region of {}",
            data.len(),
            self.len
        );
        let base = self.addr as *mut u8;
        for (i, b) in data.iter().enumerate() {
            // SAFETY: in bounds of the registered memory, which stays allocated while the
            // region exists (registration contract); volatile, no reference created.
            unsafe { base.add(offset + i).write_volatile(*b) };
        }
    }

    /// Copies `out.len()` bytes at `offset` out of the region (volatile reads). Panics if
    /// the range is outside the region.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// # let mr = rnic_driver::mr::Mr::alloc(&pd, 64, rnic_driver::wr::Access::LOCAL_WRITE)?;
    /// let mut out = [0xffu8; 8];
    /// mr.read(0, &mut out);
    /// assert_eq!(out, [0; 8]); // an owned region starts zeroed
    /// # Ok(()) }
    /// ```
    pub fn read(&self, offset: usize, out: &mut [u8]) {
        assert!(
            offset.checked_add(out.len()).is_some_and(|e| e <= self.len),
            "read of {} bytes at {offset} outside a region of {}",
            out.len(),
            self.len
        );
        let base = self.addr as *const u8;
        for (i, b) in out.iter_mut().enumerate() {
            // SAFETY: as in `write`.
            *b = unsafe { base.add(offset + i).read_volatile() };
        }
    }

    fn teardown(&mut self) -> Result<(), DriverError> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        let hca = self.pd.hca();
        let mut i = DestroyMkeyIn::new_cmd();
        i.set_mkey_index(self.key >> 8);
        let r = hca.cmdq().exec(&i, &[], &mut []);
        match &r {
            Ok(_) => {}
            Err(e) if e.device_answered() => {}
            Err(_) => {
                // The device may still use the key: leave memory mapped and allocated.
                let _ = self.owned.take().map(std::mem::forget);
                return r.map(|_| ());
            }
        }
        let unmapped = hca.bus().unmap_dma(self.iova, self.len);
        match (&unmapped, self.owned.take()) {
            (Ok(()), Some(o)) => {
                // SAFETY: allocated in `alloc` with this layout; the device can no longer
                // reach it (key destroyed, memory unmapped).
                unsafe { std::alloc::dealloc(o.ptr.as_ptr(), o.layout) }
            }
            // Still mapped: the memory stays allocated (leaked).
            (Err(_), Some(_leaked)) => {}
            _ => {}
        }
        r?;
        unmapped?;
        Ok(())
    }

    /// DESTROY_MKEY, then unmaps (and frees an owned buffer).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// let mr = rnic_driver::mr::Mr::alloc(&pd, 4096, rnic_driver::wr::Access::LOCAL_WRITE)?;
    /// assert!(mr.destroy().is_ok()); // DESTROY_MKEY, unmap, free
    /// # Ok(()) }
    /// ```
    pub fn destroy(mut self) -> Result<(), DriverError> {
        self.teardown()
    }
}

drop_by_teardown!(Mr, "memory region", key);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Hca, HcaConfig};

    /// The keys of two regions registered back to back on a freshly opened emulated device.
    fn first_two_keys(mkey_seed: Option<u64>) -> (u32, u32) {
        let dev =
            rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
        let cfg = HcaConfig {
            mkey_seed,
            ..HcaConfig::default()
        };
        let hca = Arc::new(Hca::open(Arc::new(dev.bus()), cfg).unwrap());
        let pd = Arc::new(Pd::alloc(&hca).unwrap());
        let a = Mr::alloc(&pd, 64, Access::REMOTE_WRITE | Access::LOCAL_WRITE).unwrap();
        let b = Mr::alloc(&pd, 64, Access::REMOTE_WRITE | Access::LOCAL_WRITE).unwrap();
        (a.rkey(), b.rkey())
    }

    /// Set in the child processes of the test below.
    const CHILD: &str = "RNIC_MR_TEST_FIRST_KEY_CHILD";
    /// What a child's report of its first key starts with.
    const TAG: &str = "first-rkey=";

    #[test]
    fn keys_of_a_fresh_device_are_not_predictable() {
        if std::env::var_os(CHILD).is_some() {
            // A child: report the first key of a fresh process's first device.
            println!("{TAG}{:#x}", first_two_keys(None).0);
            return;
        }
        // The first key of a fresh process: once always 0x15a (index 1, variant 0x5a).
        let exe = std::env::current_exe().unwrap();
        let firsts: Vec<String> = (0..5)
            .map(|_| {
                let out = std::process::Command::new(&exe)
                    .args([
                        "--exact",
                        "mr::tests::keys_of_a_fresh_device_are_not_predictable",
                        "--nocapture",
                        "--test-threads=1",
                    ])
                    .env(CHILD, "1")
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{out:?}");
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                // libtest prints the child's line after its own "test ... " prefix.
                let at = text.find(TAG).unwrap_or_else(|| panic!("{text:?}"));
                let key = text[at + TAG.len()..]
                    .split_whitespace()
                    .next()
                    .unwrap_or_default();
                key.to_owned()
            })
            .collect();
        // 255 possible first variants: five processes all beginning with the same key would
        // be a 1 in 2^32 event.
        assert!(
            firsts.iter().any(|k| *k != firsts[0]),
            "every fresh process's first rkey is {}",
            firsts[0]
        );
        // In one process too, each open draws its own sequence, and consecutive keys never
        // share a variant byte.
        let opens: Vec<(u32, u32)> = (0..6).map(|_| first_two_keys(None)).collect();
        for &(a, b) in &opens {
            assert_ne!(a & 0xFF, b & 0xFF, "{a:#x} {b:#x}");
        }
        assert!(opens.iter().any(|&(a, _)| a != opens[0].0), "{opens:x?}");
    }

    #[test]
    fn a_fixed_seed_repeats_the_keys() {
        assert_eq!(first_two_keys(Some(7)), first_two_keys(Some(7)));
        assert_ne!(first_two_keys(Some(7)), first_two_keys(Some(0x1234)));
    }
}
