//! Memory keys as the data path uses them: lkey / rkey lookup, protection checks, address
//! translation, and copies between host memory and the device through the IOMMU.
//!
//! A key is `mkey_index << 8 | variant`: the index selects the MKey, the low byte must equal
//! the variant software chose at CREATE_MKEY. Then, in order: the MKey's PD must be the PD of
//! the [`Domain`] asking (the QP's, or the SRQ's for receives taken from an SRQ); the access bits must allow the access (local read is always allowed; local write for
//! receive buffers and RDMA READ / atomic result buffers; remote read, write and atomic for
//! the responder's targets); the range must lie inside `[start_addr, start_addr + len)`
//! (unless `length64`). Translation: a PA key's addresses are IOVAs; an MTT key's address is
//! an offset from the page holding `start_addr` into its page list. The resulting IOVAs go
//! through the IOMMU, whose faults are counted there.
//!
//! The reserved lkey (QUERY_SPECIAL_CONTEXTS' `resd_lkey`) names no MKey: it addresses IOVAs
//! directly, in any PD, so only a QP (or SRQ) created with `rlky` may use it, as on a real
//! ConnectX; elsewhere it is a local protection error. It is never an rkey.
//!
//! A memory window (a KLM key bound by a UMR WQE, see [`crate::umr`]) is an rkey only: it
//! is checked like any key (variant, free, PD, its own access bits, its own bounds), and a
//! type-2 window bound to a QP answers only requests arriving on that QP; then the address
//! is translated into its MR (the bind's KLM) and the MR is checked again (still there, same
//! variant, bounds), so a window outliving its MR fails instead of reaching freed memory.
//!
//! Which error a failed check becomes depends on the side: a bad lkey is a local protection
//! error on the WQE, a bad rkey a remote access NAK; the caller decides.

use rnic_hw_regs::cqe::CqeSyndrome;

use crate::iommu::Iommu;
use crate::resources::{Domain, Mkey, MkeyTranslation, RESD_LKEY, Seg, Table};

/// mkc `qpn` of a key bound to no QP.
pub(crate) const QPN_UNBOUND: u32 = 0xFF_FFFF;
use crate::wire::NakCode;

/// The access a check asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Need {
    /// The device reads local memory (send gather): always allowed.
    LocalRead,
    /// The device writes local memory (receive scatter, READ / atomic results): `lw`.
    LocalWrite,
    /// A remote peer reads (RDMA READ target): `rr`.
    RemoteRead,
    /// A remote peer writes (RDMA WRITE target): `rw`.
    RemoteWrite,
    /// A remote atomic (CMP_SWAP / FETCH_ADD target): `a`.
    RemoteAtomic,
}

/// Why a key check or a copy through a key failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyError {
    /// No MKey at that index, or the variant byte differs.
    NoKey,
    /// The reserved lkey, on a QP or SRQ created without `rlky` (or as an rkey).
    Reserved,
    /// The MKey belongs to another PD.
    Pd,
    /// A type-2 window bound to another QP.
    Qp,
    /// The MKey's access bits do not allow the access.
    Access,
    /// The range is outside the MKey.
    Bounds,
    /// The translation pointed at memory the IOMMU does not map (counted there), or an MTT
    /// entry is missing.
    Fault,
}

impl KeyError {
    /// The syndrome a local key failure (lkey on a WQE) completes with: a translation
    /// fault is a local access error, anything else a local protection error.
    pub(crate) fn local_syndrome(self) -> CqeSyndrome {
        match self {
            KeyError::Fault => CqeSyndrome::LocalAccess,
            _ => CqeSyndrome::LocalProt,
        }
    }

    /// The NAK a remote key failure (rkey of a request) answers with: a translation fault
    /// is a remote operational error, anything else a remote access error.
    pub(crate) fn remote_nak(self) -> NakCode {
        match self {
            KeyError::Fault => NakCode::RemoteOperationalError,
            _ => NakCode::RemoteAccessError,
        }
    }
}

/// Total length of a segment list.
pub(crate) fn total_len(segs: &[Seg]) -> u64 {
    segs.iter().map(Seg::len).sum()
}

/// The reserved lkey's key: local access to bus addresses (IOVAs), any PD.
static RESERVED: Mkey = Mkey {
    variant: (RESD_LKEY & 0xFF) as u8,
    pd: 0,
    qpn: 0xFF_FFFF,
    lw: true,
    rr: false,
    rw: false,
    a: false,
    length64: true,
    start_addr: 0,
    len: 0,
    translation: MkeyTranslation::Pa,
    free: false,
    umr_en: false,
    rinval: false,
};

/// Looks `key` up and checks PD, access and bounds for `len` bytes at `addr` on behalf of
/// `dom`; returns the key that translates the bytes and their address under it (a window's
/// MR and the address in it; any other key itself and `addr`). The reserved lkey
/// (QUERY_SPECIAL_CONTEXTS' `resd_lkey`) allows local access to IOVAs in any PD, but only
/// where `dom.rlky`; as an rkey it is refused.
pub(crate) fn check(
    mkeys: &Table<Mkey>,
    key: u32,
    dom: Domain,
    need: Need,
    addr: u64,
    len: u64,
) -> Result<(&Mkey, u64), KeyError> {
    if key == RESD_LKEY {
        return match need {
            Need::LocalRead | Need::LocalWrite if dom.rlky => Ok((&RESERVED, addr)),
            _ => Err(KeyError::Reserved),
        };
    }
    let m = mkeys.get(key >> 8).ok_or(KeyError::NoKey)?;
    if m.variant != (key & 0xFF) as u8 || m.free {
        return Err(KeyError::NoKey);
    }
    if m.pd != dom.pd {
        return Err(KeyError::Pd);
    }
    let window = match m.translation {
        MkeyTranslation::Window { bound, .. } => Some(bound.ok_or(KeyError::NoKey)?),
        _ => None,
    };
    let allowed = match need {
        // A window is never an lkey.
        Need::LocalRead => window.is_none(),
        Need::LocalWrite => m.lw && window.is_none(),
        Need::RemoteRead => m.rr,
        Need::RemoteWrite => m.rw,
        Need::RemoteAtomic => m.a,
    };
    if !allowed {
        return Err(KeyError::Access);
    }
    if !m.length64 {
        let end = addr.checked_add(len).ok_or(KeyError::Bounds)?;
        let m_end = m.start_addr.checked_add(m.len).ok_or(KeyError::Bounds)?;
        if addr < m.start_addr || end > m_end {
            return Err(KeyError::Bounds);
        }
    }
    let Some(target) = window else {
        return Ok((m, addr));
    };
    if m.qpn != QPN_UNBOUND && m.qpn != dom.qpn {
        return Err(KeyError::Qp);
    }
    // Into the MR: the window checked the rights; the MR must still be there and hold the
    // bytes (a window is never an lkey, so this cannot recurse further).
    let inner = target
        .addr
        .checked_add(addr - m.start_addr)
        .ok_or(KeyError::Bounds)?;
    let mr = Domain {
        pd: m.pd,
        rlky: false,
        ..dom
    };
    check(mkeys, target.mkey, mr, Need::LocalRead, inner, len)
}

/// Calls `f(iova, offset, n)` for each physically contiguous piece of `len` bytes at `addr`
/// under `m` (already checked).
fn pieces(
    m: &Mkey,
    addr: u64,
    len: usize,
    mut f: impl FnMut(u64, usize, usize) -> Result<(), KeyError>,
) -> Result<(), KeyError> {
    match &m.translation {
        MkeyTranslation::Pa => f(addr, 0, len),
        // `check` resolved windows into their MR.
        MkeyTranslation::Window { .. } => Err(KeyError::Fault),
        MkeyTranslation::Mtt {
            pages,
            log_page_size,
        } => {
            let log = u32::from((*log_page_size).clamp(12, 40));
            let page = 1u64 << log;
            let base = m.start_addr & !(page - 1);
            let mut done = 0usize;
            while done < len {
                let off = addr
                    .checked_sub(base)
                    .and_then(|o| o.checked_add(done as u64))
                    .ok_or(KeyError::Bounds)?;
                let idx = usize::try_from(off >> log).map_err(|_| KeyError::Fault)?;
                let entry = *pages.get(idx).ok_or(KeyError::Fault)?;
                let within = off & (page - 1);
                let n = ((page - within) as usize).min(len - done);
                f((entry & !(page - 1)) + within, done, n)?;
                done += n;
            }
            Ok(())
        }
    }
}

/// Invalidates remote key `key` of PD `pd` on behalf of QP `qpn` (SEND_WITH_INVALIDATE);
/// false when there is no such key in that PD, when it was created without `en_rinval`, when
/// it is a window bound to another QP, or for the reserved lkey.
pub(crate) fn invalidate(mkeys: &mut Table<Mkey>, key: u32, pd: u32, qpn: u32) -> bool {
    if key == RESD_LKEY {
        return false;
    }
    match mkeys.get_mut(key >> 8) {
        Some(m)
            if m.variant == (key & 0xFF) as u8
                && m.pd == pd
                && m.rinval
                && !m.free
                && (m.qpn == QPN_UNBOUND || m.qpn == qpn) =>
        {
            m.free = true;
            true
        }
        _ => false,
    }
}

/// Copies `buf.len()` bytes at `addr` under `key` into `buf`, after the checks of [`check`].
pub(crate) fn read(
    dma: &Iommu,
    mkeys: &Table<Mkey>,
    key: u32,
    dom: Domain,
    need: Need,
    addr: u64,
    buf: &mut [u8],
) -> Result<(), KeyError> {
    let (m, addr) = check(mkeys, key, dom, need, addr, buf.len() as u64)?;
    pieces(m, addr, buf.len(), |iova, off, n| {
        dma.read(iova, &mut buf[off..off + n])
            .map_err(|_| KeyError::Fault)
    })
}

/// Copies `data` to `addr` under `key`, after the checks of [`check`].
pub(crate) fn write(
    dma: &Iommu,
    mkeys: &Table<Mkey>,
    key: u32,
    dom: Domain,
    need: Need,
    addr: u64,
    data: &[u8],
) -> Result<(), KeyError> {
    let (m, addr) = check(mkeys, key, dom, need, addr, data.len() as u64)?;
    pieces(m, addr, data.len(), |iova, off, n| {
        dma.write(iova, &data[off..off + n])
            .map_err(|_| KeyError::Fault)
    })
}

/// Checks every key segment of `segs` for `need` (inline segments need nothing).
pub(crate) fn check_segs(
    mkeys: &Table<Mkey>,
    dom: Domain,
    need: Need,
    segs: &[Seg],
) -> Result<(), KeyError> {
    for s in segs {
        if let Seg::Key { lkey, addr, len } = *s {
            check(mkeys, lkey, dom, need, addr, u64::from(len))?;
        }
    }
    Ok(())
}

/// Walks bytes `off .. off + total` of the message `segs` describes: calls `f(seg, at, done,
/// n)` for each piece, `n` bytes at offset `at` of segment `seg` that are bytes `done ..
/// done + n` of the range. A range that runs past the segments is a bounds error.
fn pieces_of_segs(
    segs: &[Seg],
    mut off: u64,
    total: usize,
    mut f: impl FnMut(&Seg, u64, usize, usize) -> Result<(), KeyError>,
) -> Result<(), KeyError> {
    let mut done = 0usize;
    for s in segs {
        if done == total {
            break;
        }
        let len = s.len();
        if off >= len {
            off -= len;
            continue;
        }
        let n = ((len - off) as usize).min(total - done);
        f(s, off, done, n)?;
        done += n;
        off = 0;
    }
    if done < total {
        return Err(KeyError::Bounds);
    }
    Ok(())
}

/// Copies bytes `off .. off + out.len()` of the message `segs` describes (key segments read
/// through their lkeys, inline segments from `inline`) into `out`.
pub(crate) fn gather(
    dma: &Iommu,
    mkeys: &Table<Mkey>,
    dom: Domain,
    segs: &[Seg],
    inline: &[u8],
    off: u64,
    out: &mut [u8],
) -> Result<(), KeyError> {
    pieces_of_segs(segs, off, out.len(), |s, at, done, n| {
        let dst = &mut out[done..done + n];
        match *s {
            Seg::Key { lkey, addr, .. } => {
                let at = addr.checked_add(at).ok_or(KeyError::Bounds)?;
                read(dma, mkeys, lkey, dom, Need::LocalRead, at, dst)
            }
            Seg::Inline { off: start, .. } => {
                let from = start as usize + at as usize;
                let src = inline.get(from..from + n).ok_or(KeyError::Bounds)?;
                dst.copy_from_slice(src);
                Ok(())
            }
        }
    })
}

/// Writes `data` at message offset `off` into the buffers `segs` describes (local write
/// access required); inline segments cannot be written.
pub(crate) fn scatter(
    dma: &Iommu,
    mkeys: &Table<Mkey>,
    dom: Domain,
    segs: &[Seg],
    off: u64,
    data: &[u8],
) -> Result<(), KeyError> {
    pieces_of_segs(segs, off, data.len(), |s, at, done, n| match *s {
        Seg::Key { lkey, addr, .. } => write(
            dma,
            mkeys,
            lkey,
            dom,
            Need::LocalWrite,
            addr.checked_add(at).ok_or(KeyError::Bounds)?,
            &data[done..done + n],
        ),
        Seg::Inline { .. } => Err(KeyError::Access),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A domain of PD `pd` without `rlky` (a user QP).
    fn user(pd: u32) -> Domain {
        Domain {
            pd,
            rlky: false,
            ..Domain::default()
        }
    }

    fn key(translation: MkeyTranslation, start: u64, len: u64) -> Mkey {
        Mkey {
            variant: 0x42,
            pd: 3,
            qpn: 0xFF_FFFF,
            lw: true,
            rr: true,
            rw: false,
            a: false,
            length64: false,
            start_addr: start,
            len,
            translation,
            free: false,
            umr_en: false,
            rinval: false,
        }
    }

    #[test]
    fn checks_key_variant_pd_access_and_bounds() {
        let mut t = Table::new(1, 8);
        let idx = t.insert(key(MkeyTranslation::Pa, 0x1000, 0x100)).unwrap();
        let k = idx << 8 | 0x42;
        assert!(check(&t, k, user(3), Need::LocalWrite, 0x1000, 0x100).is_ok());
        assert_eq!(
            check(&t, k ^ 1, user(3), Need::LocalRead, 0x1000, 1).err(),
            Some(KeyError::NoKey)
        );
        assert_eq!(
            check(
                &t,
                (idx + 1) << 8 | 0x42,
                user(3),
                Need::LocalRead,
                0x1000,
                1
            )
            .err(),
            Some(KeyError::NoKey)
        );
        assert_eq!(
            check(&t, k, user(4), Need::LocalRead, 0x1000, 1).err(),
            Some(KeyError::Pd)
        );
        assert_eq!(
            check(&t, k, user(3), Need::RemoteWrite, 0x1000, 1).err(),
            Some(KeyError::Access)
        );
        assert_eq!(
            check(&t, k, user(3), Need::RemoteRead, 0x10FF, 2).err(),
            Some(KeyError::Bounds)
        );
        assert_eq!(
            check(&t, k, user(3), Need::RemoteRead, 0xFFF, 1).err(),
            Some(KeyError::Bounds)
        );
        assert_eq!(
            check(&t, k, user(3), Need::RemoteRead, u64::MAX, 2).err(),
            Some(KeyError::Bounds)
        );
    }

    #[test]
    fn the_reserved_lkey_needs_rlky_and_is_never_an_rkey() {
        let t = Table::new(1, 8);
        let privileged = Domain {
            pd: 3,
            rlky: true,
            ..Domain::default()
        };
        for need in [Need::LocalRead, Need::LocalWrite] {
            assert!(check(&t, RESD_LKEY, privileged, need, 0x1_0000_0000, 64).is_ok());
            let e = check(&t, RESD_LKEY, user(3), need, 0x1_0000_0000, 64).err();
            assert_eq!(e, Some(KeyError::Reserved));
            assert_eq!(e.unwrap().local_syndrome(), CqeSyndrome::LocalProt);
        }
        for need in [Need::RemoteRead, Need::RemoteWrite, Need::RemoteAtomic] {
            let e = check(&t, RESD_LKEY, privileged, need, 0x1_0000_0000, 8).err();
            assert_eq!(e, Some(KeyError::Reserved));
            assert_eq!(e.unwrap().remote_nak(), NakCode::RemoteAccessError);
        }
        // A scatter list naming it fails as a whole on a user domain.
        let segs = [Seg::Key {
            lkey: RESD_LKEY,
            addr: 0x1_0000_0000,
            len: 8,
        }];
        let iommu = Iommu::new();
        assert_eq!(
            check_segs(&t, user(3), Need::LocalWrite, &segs),
            Err(KeyError::Reserved)
        );
        assert_eq!(
            scatter(&iommu, &t, user(3), &segs, 0, &[1; 8]),
            Err(KeyError::Reserved)
        );
        assert_eq!(iommu.faults(), 0, "refused before any access");
    }

    #[test]
    fn mtt_keys_translate_page_by_page() {
        let iommu = Iommu::new();
        let mut a = vec![0u8; 4096];
        let mut b = vec![0u8; 4096];
        // SAFETY: both buffers outlive the IOMMU accesses below.
        unsafe {
            iommu.map(0x10_0000, a.as_mut_ptr(), 4096).unwrap();
            iommu.map(0x30_0000, b.as_mut_ptr(), 4096).unwrap();
        }
        let mut t = Table::new(1, 8);
        let m = key(
            MkeyTranslation::Mtt {
                pages: vec![0x10_0000 | 3, 0x30_0000 | 3],
                log_page_size: 12,
            },
            0x7000_0800,
            0x1000,
        );
        let k = t.insert(m).unwrap() << 8 | 0x42;
        let data: Vec<u8> = (0..16).collect();
        write(&iommu, &t, k, user(3), Need::LocalWrite, 0x7000_0FF8, &data).unwrap();
        assert_eq!(&a[0xFF8..], &data[..8]);
        assert_eq!(&b[..8], &data[8..]);
        let mut back = [0u8; 16];
        read(
            &iommu,
            &t,
            k,
            user(3),
            Need::LocalRead,
            0x7000_0FF8,
            &mut back,
        )
        .unwrap();
        assert_eq!(&back[..], &data[..]);
        let segs = [
            Seg::Inline { off: 1, len: 2 },
            Seg::Key {
                lkey: k,
                addr: 0x7000_0FF8,
                len: 16,
            },
        ];
        let mut out = [0u8; 5];
        gather(&iommu, &t, user(3), &segs, &[9, 8, 7], 1, &mut out).unwrap();
        assert_eq!(out, [7, 0, 1, 2, 3]);
        assert_eq!(total_len(&segs), 18);
        assert_eq!(
            gather(&iommu, &t, user(3), &segs, &[9, 8, 7], 17, &mut out),
            Err(KeyError::Bounds)
        );
    }
}
