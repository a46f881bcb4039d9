//! [`MemoryRegion`] (`struct ibv_mr`) and [`AccessFlags`].
//!
//! # Why there is no `&mut [u8]`
//!
//! Once registered, a region's bytes can change under the program at any time: the local
//! device writes received data and READ results into it, and a remote peer can RDMA WRITE
//! into a region registered with [`AccessFlags::REMOTE_WRITE`] whenever it likes. A Rust
//! reference into such memory would promise the compiler that nobody else changes it, which
//! is not true, so this API hands out none: an owned region is read and written through
//! copies ([`MemoryRegion::read`], [`MemoryRegion::write`], ...) made with volatile accesses.
//! Ordering with the device follows the completions: data a completion reports is visible
//! to reads made after polling it.

use crate::error::{Error, Result};
use crate::{ProtectionDomain, RemoteAddr, Sge};
use rnic_driver::mr::Mr;

/// Access rights of a memory region or QP (`enum ibv_access_flags` values).
///
/// ```
/// use rnic_verbs::AccessFlags;
///
/// let a = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
/// assert_eq!(a.bits(), 3);
/// assert!(a.contains(AccessFlags::REMOTE_WRITE));
/// ```
pub use rnic_driver::wr::Access as AccessFlags;

/// A buffer the region owns (from a `Vec`), freed after deregistration.
#[derive(Debug)]
struct OwnedBuf {
    ptr: *mut u8,
    len: usize,
}

/// A registered memory region (`ibv_reg_mr`): keeps its PD alive, deregistered on drop.
///
/// ```
/// use rnic_verbs::{AccessFlags, Context};
///
/// # fn main() -> Result<(), rnic_verbs::Error> {
/// let pd = Context::open("emu0")?.alloc_pd()?;
/// let mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)?;
/// mr.write(0, b"hello")?;
/// let mut back = [0u8; 5];
/// mr.read(0, &mut back)?;
/// assert_eq!(&back, b"hello");
/// assert!(mr.read(4095, &mut back).is_err()); // out of bounds: an error, never a panic
/// let sge = mr.sge(0, 5)?; // for a work request
/// assert_eq!(sge.lkey, mr.lkey());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct MemoryRegion {
    // Field order: the registration goes first, then the buffer, then the PD.
    mr: Option<Mr>,
    owned: Option<OwnedBuf>,
    access: AccessFlags,
    pd: ProtectionDomain,
}

// SAFETY: the owned buffer is reached only through raw pointers with volatile copies (the
// driver's `Mr` is Send + Sync for the same reason); no Rust reference into it exists.
unsafe impl Send for MemoryRegion {}
// SAFETY: see `Send`; concurrent copies race only as the device and peers already do.
unsafe impl Sync for MemoryRegion {}

fn check_access(access: AccessFlags) -> Result<()> {
    let unknown = access.bits() & !AccessFlags::all().bits();
    if unknown != 0 {
        return Err(Error::invalid(
            "ibv_reg_mr",
            format!("unknown access flag bits {unknown:#x}"),
        ));
    }
    if access.intersects(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC)
        && !access.contains(AccessFlags::LOCAL_WRITE)
    {
        return Err(Error::invalid(
            "ibv_reg_mr",
            "REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE",
        ));
    }
    Ok(())
}

impl MemoryRegion {
    pub(crate) fn alloc(pd: &ProtectionDomain, len: usize, access: AccessFlags) -> Result<Self> {
        check_access(access)?;
        let mr = Mr::alloc(pd.driver(), len, access).map_err(Error::driver("ibv_reg_mr"))?;
        Ok(MemoryRegion {
            mr: Some(mr),
            owned: None,
            access,
            pd: pd.clone(),
        })
    }

    pub(crate) fn from_vec(
        pd: &ProtectionDomain,
        buf: Vec<u8>,
        access: AccessFlags,
    ) -> Result<Self> {
        check_access(access)?;
        if buf.is_empty() {
            return Err(Error::invalid("ibv_reg_mr", "a region of 0 bytes"));
        }
        let len = buf.len();
        let ptr = Box::into_raw(buf.into_boxed_slice()).cast::<u8>();
        // SAFETY: the allocation is owned by the region from here on and freed only after
        // deregistration succeeded (leaked otherwise); nothing else references it.
        match unsafe { Mr::register_raw(pd.driver(), ptr, len, access) } {
            Ok(mr) => Ok(MemoryRegion {
                mr: Some(mr),
                owned: Some(OwnedBuf { ptr, len }),
                access,
                pd: pd.clone(),
            }),
            Err(e) => {
                // SAFETY: registration failed; the device never got the memory. Rebuild the
                // box from the pointer and length `into_raw` produced.
                drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) });
                Err(Error::driver("ibv_reg_mr")(e))
            }
        }
    }

    /// Registers `len` bytes at `addr` with `access` (local read is always allowed).
    ///
    /// # Safety
    /// - `addr..addr + len` must be memory allocated by the caller that stays allocated, and
    ///   is not moved, until the region is dropped or [`MemoryRegion::dereg`]ed;
    /// - the device and, as `access` allows, remote peers may read and write those bytes at
    ///   any moment until then: the caller must not hold Rust references (`&`/`&mut`, slices)
    ///   into them while the region exists, only raw pointers with volatile accesses (or this
    ///   region's copy methods);
    /// - a process may register the same memory more than once; each region follows these
    ///   rules on its own.
    ///
    /// ```
    /// use rnic_verbs::{AccessFlags, Context, MemoryRegion};
    ///
    /// # fn main() -> Result<(), rnic_verbs::Error> {
    /// let pd = Context::open("emu0")?.alloc_pd()?;
    /// let mut buf = vec![0u8; 4096];
    /// let ptr = buf.as_mut_ptr();
    /// // SAFETY: `buf` stays allocated and in place until `mr` is dropped, and is not touched
    /// // through a reference meanwhile.
    /// let mr = unsafe { MemoryRegion::register_raw(&pd, ptr, 4096, AccessFlags::LOCAL_WRITE)? };
    /// mr.write(0, b"raw")?;
    /// assert_eq!(mr.addr(), ptr as u64);
    /// drop(mr);
    /// assert_eq!(&buf[..3], b"raw"); // the caller's memory all along
    /// # Ok(()) }
    /// ```
    pub unsafe fn register_raw(
        pd: &ProtectionDomain,
        addr: *mut u8,
        len: usize,
        access: AccessFlags,
    ) -> Result<Self> {
        check_access(access)?;
        // SAFETY: the caller's contract is the driver's.
        let mr = unsafe { Mr::register_raw(pd.driver(), addr, len, access) }
            .map_err(Error::driver("ibv_reg_mr"))?;
        Ok(MemoryRegion {
            mr: Some(mr),
            owned: None,
            access,
            pd: pd.clone(),
        })
    }

    fn mr(&self) -> &Mr {
        // Only `dereg` and `drop` take it, consuming the region.
        self.mr
            .as_ref()
            .unwrap_or_else(|| unreachable!("region used after dereg"))
    }

    /// The local key (`lkey`).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let mr = ctx.alloc_pd()?.reg_mr(64, AccessFlags::LOCAL_WRITE)?;
    /// assert_eq!(mr.sge(0, 64)?.lkey, mr.lkey()); // local work requests name the region by it
    /// # Ok(()) }
    /// ```
    pub fn lkey(&self) -> u32 {
        self.mr().lkey()
    }

    /// The remote key (`rkey`), for peers.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let mr = ctx.alloc_pd()?.reg_mr(64, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)?;
    /// assert_eq!(mr.remote(0).rkey, mr.rkey()); // what a peer puts in its WRITE
    /// # Ok(()) }
    /// ```
    pub fn rkey(&self) -> u32 {
        self.mr().rkey()
    }

    /// The start address (`addr`): what SGEs and peers' remote addresses use.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let mr = ctx.alloc_pd()?.reg_mr(8192, AccessFlags::LOCAL_WRITE)?;
    /// assert_eq!(mr.addr() % 4096, 0); // reg_mr's buffers are page-aligned
    /// assert_eq!(mr.sge(16, 8)?.addr, mr.addr() + 16);
    /// # Ok(()) }
    /// ```
    pub fn addr(&self) -> u64 {
        self.mr().addr()
    }

    /// Raw pointer to the first byte (for registered-from-raw-parts users and diagnostics).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let mr = ctx.alloc_pd()?.reg_mr(64, AccessFlags::LOCAL_WRITE)?;
    /// assert_eq!(mr.as_ptr() as u64, mr.addr());
    /// # Ok(()) }
    /// ```
    pub fn as_ptr(&self) -> *mut u8 {
        self.mr().addr() as *mut u8
    }

    /// Length in bytes.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let mr = ctx.alloc_pd()?.reg_mr_from(vec![7u8; 100], AccessFlags::LOCAL_WRITE)?;
    /// assert_eq!(mr.len(), 100);
    /// # Ok(()) }
    /// ```
    pub fn len(&self) -> usize {
        self.mr().len()
    }

    /// Whether the region is empty (never: registration refuses 0 bytes).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let pd = ctx.alloc_pd()?;
    /// assert!(!pd.reg_mr(1, AccessFlags::empty())?.is_empty());
    /// assert!(pd.reg_mr_from(Vec::new(), AccessFlags::empty()).is_err()); // no empty regions
    /// # Ok(()) }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The access rights.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let mr = ctx.alloc_pd()?.reg_mr(64, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ)?;
    /// assert!(mr.access().contains(AccessFlags::REMOTE_READ));
    /// assert!(!mr.access().contains(AccessFlags::REMOTE_WRITE));
    /// # Ok(()) }
    /// ```
    pub fn access(&self) -> AccessFlags {
        self.access
    }

    /// The PD.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let pd = ctx.alloc_pd()?;
    /// let mr = pd.reg_mr(64, AccessFlags::LOCAL_WRITE)?;
    /// assert_eq!(mr.pd().pdn(), pd.pdn());
    /// # Ok(()) }
    /// ```
    pub fn pd(&self) -> &ProtectionDomain {
        &self.pd
    }

    fn check(&self, verb: &'static str, offset: usize, len: usize) -> Result<()> {
        if offset.checked_add(len).is_some_and(|e| e <= self.len()) {
            Ok(())
        } else {
            Err(Error::OutOfBounds {
                verb,
                offset,
                len,
                region_len: self.len(),
            })
        }
    }

    /// An SGE of `len` bytes at `offset`.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let mr = ctx.alloc_pd()?.reg_mr(256, AccessFlags::LOCAL_WRITE)?;
    /// let sge = mr.sge(64, 32)?;
    /// assert_eq!((sge.addr, sge.len, sge.lkey), (mr.addr() + 64, 32, mr.lkey()));
    /// assert!(matches!(mr.sge(250, 8), Err(Error::OutOfBounds { .. })));
    /// # Ok(()) }
    /// ```
    pub fn sge(&self, offset: usize, len: u32) -> Result<Sge> {
        self.check("MemoryRegion::sge", offset, len as usize)?;
        Ok(self.mr().sge(offset, len))
    }

    /// An SGE of the whole region (at most 2^31 - 1 bytes).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let mr = ctx.alloc_pd()?.reg_mr(4096, AccessFlags::LOCAL_WRITE)?;
    /// assert_eq!(mr.sge_all()?, mr.sge(0, 4096)?);
    /// # Ok(()) }
    /// ```
    pub fn sge_all(&self) -> Result<Sge> {
        let len = u32::try_from(self.len())
            .ok()
            .filter(|&l| l <= 0x7FFF_FFFF)
            .ok_or_else(|| Error::invalid("MemoryRegion::sge_all", "region longer than an SGE"))?;
        self.sge(0, len)
    }

    /// The region as a remote peer names it (its address and rkey), at `offset`.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let mr = ctx.alloc_pd()?.reg_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)?;
    /// let r = mr.remote(100);
    /// assert_eq!((r.addr, r.rkey), (mr.addr() + 100, mr.rkey()));
    /// # Ok(()) }
    /// ```
    pub fn remote(&self, offset: u64) -> RemoteAddr {
        RemoteAddr {
            addr: self.addr().wrapping_add(offset),
            rkey: self.rkey(),
        }
    }

    /// Copies `data` into the region at `offset`.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let mr = ctx.alloc_pd()?.reg_mr(16, AccessFlags::LOCAL_WRITE)?;
    /// mr.write(12, b"tail")?;
    /// assert_eq!(mr.to_vec(12, 4)?, b"tail");
    /// assert!(mr.write(13, b"tail").is_err()); // would end past the region
    /// # Ok(()) }
    /// ```
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check("MemoryRegion::write", offset, data.len())?;
        self.mr().write(offset, data);
        Ok(())
    }

    /// Copies `out.len()` bytes at `offset` out of the region.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let mr = ctx.alloc_pd()?.reg_mr_from(b"0123456789".to_vec(), AccessFlags::LOCAL_WRITE)?;
    /// let mut out = [0u8; 3];
    /// mr.read(4, &mut out)?;
    /// assert_eq!(&out, b"456");
    /// # Ok(()) }
    /// ```
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check("MemoryRegion::read", offset, out.len())?;
        self.mr().read(offset, out);
        Ok(())
    }

    /// Sets `len` bytes at `offset` to `byte`.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let mr = ctx.alloc_pd()?.reg_mr(8, AccessFlags::LOCAL_WRITE)?;
    /// mr.fill(2, 4, 0xab)?;
    /// assert_eq!(mr.to_vec(0, 8)?, [0, 0, 0xab, 0xab, 0xab, 0xab, 0, 0]);
    /// # Ok(()) }
    /// ```
    pub fn fill(&self, offset: usize, len: usize, byte: u8) -> Result<()> {
        self.check("MemoryRegion::fill", offset, len)?;
        let base = self.as_ptr();
        for i in 0..len {
            // SAFETY: in bounds (checked), memory registered and alive; volatile, no reference.
            unsafe { base.add(offset + i).write_volatile(byte) };
        }
        Ok(())
    }

    /// The 8 bytes at `offset` as a host-order integer (atomic results and targets).
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let mr = ctx.alloc_pd()?.reg_mr_from(7u64.to_ne_bytes().to_vec(), AccessFlags::LOCAL_WRITE)?;
    /// assert_eq!(mr.read_u64(0)?, 7);
    /// # Ok(()) }
    /// ```
    pub fn read_u64(&self, offset: usize) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read(offset, &mut b)?;
        Ok(u64::from_ne_bytes(b))
    }

    /// Writes `v` in host order at `offset`.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let mr = ctx.alloc_pd()?.reg_mr(16, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_ATOMIC)?;
    /// mr.write_u64(8, 0x1122_3344_5566_7788)?; // e.g. an atomic's initial value
    /// assert_eq!(mr.read_u64(8)?, 0x1122_3344_5566_7788);
    /// # Ok(()) }
    /// ```
    pub fn write_u64(&self, offset: usize, v: u64) -> Result<()> {
        self.write(offset, &v.to_ne_bytes())
    }

    /// A copy of `len` bytes at `offset`.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let mr = ctx.alloc_pd()?.reg_mr(32, AccessFlags::LOCAL_WRITE)?;
    /// mr.write(0, b"copy me")?;
    /// assert_eq!(mr.to_vec(0, 7)?, b"copy me".to_vec());
    /// # Ok(()) }
    /// ```
    pub fn to_vec(&self, offset: usize, len: usize) -> Result<Vec<u8>> {
        self.check("MemoryRegion::to_vec", offset, len)?;
        let mut v = vec![0u8; len];
        self.mr().read(offset, &mut v);
        Ok(v)
    }

    /// `ibv_dereg_mr`: deregisters now, reporting errors. Gives back the buffer of a region
    /// from [`ProtectionDomain::reg_mr_from`] (`None` for the other kinds). If the device
    /// did not confirm, the memory is leaked rather than freed under it.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// let pd = ctx.alloc_pd()?;
    /// let mr = pd.reg_mr_from(vec![0u8; 8], AccessFlags::LOCAL_WRITE)?;
    /// mr.write(0, b"returned")?;
    /// assert_eq!(mr.dereg()?, Some(b"returned".to_vec())); // the Vec comes back
    /// assert_eq!(pd.reg_mr(8, AccessFlags::LOCAL_WRITE)?.dereg()?, None);
    /// # Ok(()) }
    /// ```
    pub fn dereg(mut self) -> Result<Option<Vec<u8>>> {
        self.teardown()
    }

    /// Deregisters; returns the buffer taken from a `Vec`, if any.
    fn teardown(&mut self) -> Result<Option<Vec<u8>>> {
        let Some(mr) = self.mr.take() else {
            return Ok(None);
        };
        match mr.destroy() {
            Ok(()) => Ok(self.owned.take().map(|o| {
                // SAFETY: deregistered and unmapped: the device can no longer reach it; the
                // pointer and length came from `Box::into_raw` of a boxed slice.
                let b = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(o.ptr, o.len)) };
                b.into_vec()
            })),
            Err(e) => {
                if self.owned.take().is_some() {
                    log::warn!("ibv_dereg_mr failed: the region's buffer is leaked");
                }
                Err(Error::driver("ibv_dereg_mr")(e))
            }
        }
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            log::warn!("{e}");
        }
    }
}
