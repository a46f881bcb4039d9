//! UMR WQEs: binding and invalidating memory windows in the send queue's order.
//!
//! The control segment's `imm` names the window (`imm >> 8` is its mkey index). A bind
//! (mkey mask with LEN, mkey segment not free) points the window at one KLM of an MR and
//! gives it its own rights and bounds; an invalidation (mask FREE, mkey segment free) makes
//! it free. The checks, all of which a ConnectX reports as an MW bind error (and, as for any
//! failed send WQE, the QP then enters ERR):
//!
//! - the key is a window (KLM mode, created with `umr_en`) of the QP's PD;
//! - bind, type 2 (created with `en_rinval`, as mlx5 creates them): the window is free (never
//!   bound, or invalidated) and the mkey segment binds it to this QP; type 1: to no QP;
//! - bind: one KLM, `len` equal to its byte count (at most 2 GiB) and no more KLM octowords
//!   than the window was created with; the KLM's key is a valid MR (not a window) of the
//!   window's PD, the range lies inside it, and remote write or atomic rights need the MR's
//!   local write (IBTA 10.6.7.2);
//! - invalidation: the full key (variant byte included) is the window's current one and it
//!   is not free already; with CHECK_QPN (LOCAL_INV) the window is type 2, bound to this QP.
//!
//! The MR's `IBV_ACCESS_MW_BIND` has no mkc bit, so the device cannot check it: the driver
//! refuses the bind when posting, as rdma-core's mlx5 provider does.

use rnic_hw_regs::umr::{
    MAX_KLM_BYTE_COUNT, MKEY_MASK_ACCESS_ATOMIC, MKEY_MASK_ACCESS_LOCAL_WRITE,
    MKEY_MASK_ACCESS_REMOTE_READ, MKEY_MASK_ACCESS_REMOTE_WRITE, MKEY_MASK_FREE, MKEY_MASK_LEN,
    MKEY_MASK_MKEY, MKEY_MASK_START_ADDR, UMR_CTRL_CHECK_QPN,
};

use crate::mkey::QPN_UNBOUND;
use crate::resources::{Mkey, MkeyTranslation, Table, UmrWqe, WindowTarget};

/// Why a UMR WQE failed (each completes with MW_BIND_ERR).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UmrError {
    /// No mkey at the index `imm` names.
    NoWindow,
    /// The mkey is not a window created with `umr_en`.
    NotWindow,
    /// The window belongs to another PD than the QP.
    Pd,
    /// A type-2 bind of a window that is bound (not free).
    NotFree,
    /// The window would be bound to another QP than its type allows, or a type-2
    /// invalidation comes from another QP than the one it is bound to.
    Qp,
    /// LOCAL_INV (CHECK_QPN) of a type-1 window.
    Type,
    /// Invalidation of a key that is not the window's current one, or of a free window.
    Key,
    /// The mask and segments ask for neither a bind nor an invalidation, or the KLM list
    /// does not describe the window.
    Malformed,
    /// The KLM's key is no valid MR (unknown, wrong variant, invalidated, or a window).
    Mr,
    /// The MR belongs to another PD than the window.
    MrPd,
    /// Remote write or atomic rights over an MR without local write.
    Rights,
    /// The window's range is not inside the MR.
    Bounds,
}

/// Executes UMR WQE `u` for QP `qpn` of PD `pd` on the mkey `key` names.
pub(crate) fn execute(
    mkeys: &mut Table<Mkey>,
    pd: u32,
    qpn: u32,
    key: u32,
    u: &UmrWqe,
) -> Result<(), UmrError> {
    let bind = u.mask & MKEY_MASK_LEN != 0 && !u.free;
    let inval = u.mask & MKEY_MASK_FREE != 0 && u.free;
    if bind == inval {
        return Err(UmrError::Malformed);
    }
    let w = mkeys.get(key >> 8).ok_or(UmrError::NoWindow)?;
    let MkeyTranslation::Window { klm_octowords, .. } = w.translation else {
        return Err(UmrError::NotWindow);
    };
    if !w.umr_en {
        return Err(UmrError::NotWindow);
    }
    if w.pd != pd {
        return Err(UmrError::Pd);
    }
    let type2 = w.rinval;
    if inval {
        if w.variant != (key & 0xFF) as u8 || w.free {
            return Err(UmrError::Key);
        }
        if u.flags & UMR_CTRL_CHECK_QPN != 0 {
            if !type2 {
                return Err(UmrError::Type);
            }
            if w.qpn != qpn {
                return Err(UmrError::Qp);
            }
        }
        let w = mkeys.get_mut(key >> 8).ok_or(UmrError::NoWindow)?;
        w.free = true;
        w.qpn = QPN_UNBOUND;
        return Ok(());
    }
    if type2 && !w.free {
        return Err(UmrError::NotFree);
    }
    let want_qpn = if type2 { qpn } else { QPN_UNBOUND };
    if u.qpn != want_qpn {
        return Err(UmrError::Qp);
    }
    let Some((byte_count, mr_key, addr)) = u.klm else {
        return Err(UmrError::Malformed);
    };
    if u32::from(u.klm_octowords) > klm_octowords
        || u.len != u64::from(byte_count)
        || u.len > MAX_KLM_BYTE_COUNT
        || u.len == 0
    {
        return Err(UmrError::Malformed);
    }
    let window_pd = w.pd;
    let mr = mkeys.get(mr_key >> 8).ok_or(UmrError::Mr)?;
    if mr.variant != (mr_key & 0xFF) as u8
        || mr.free
        || matches!(mr.translation, MkeyTranslation::Window { .. })
    {
        return Err(UmrError::Mr);
    }
    if mr.pd != window_pd {
        return Err(UmrError::MrPd);
    }
    let has = |bit: u64| u.mask & bit != 0;
    let (lw, rr, rw, a) = (
        has(MKEY_MASK_ACCESS_LOCAL_WRITE) && u.lw,
        has(MKEY_MASK_ACCESS_REMOTE_READ) && u.rr,
        has(MKEY_MASK_ACCESS_REMOTE_WRITE) && u.rw,
        has(MKEY_MASK_ACCESS_ATOMIC) && u.a,
    );
    if (rw || a || lw) && !mr.lw {
        return Err(UmrError::Rights);
    }
    if !mr.length64 {
        let end = addr.checked_add(u.len).ok_or(UmrError::Bounds)?;
        let mr_end = mr.start_addr.checked_add(mr.len).ok_or(UmrError::Bounds)?;
        if addr < mr.start_addr || end > mr_end {
            return Err(UmrError::Bounds);
        }
    }
    let start = if has(MKEY_MASK_START_ADDR) {
        u.start_addr
    } else {
        0
    };
    if start.checked_add(u.len).is_none() {
        return Err(UmrError::Bounds);
    }
    let w = mkeys.get_mut(key >> 8).ok_or(UmrError::NoWindow)?;
    if has(MKEY_MASK_MKEY) {
        w.variant = u.mkey_7_0;
    }
    w.free = false;
    w.qpn = want_qpn;
    (w.lw, w.rr, w.rw, w.a) = (lw, rr, rw, a);
    w.start_addr = start;
    w.len = u.len;
    w.translation = MkeyTranslation::Window {
        klm_octowords,
        bound: Some(WindowTarget { mkey: mr_key, addr }),
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use rnic_hw_regs::umr::{BIND_KLM_OCTOWORDS, MKEY_MASK_ACCESS, MKEY_MASK_QPN};

    use super::*;
    use crate::mkey::{KeyError, Need, check};
    use crate::resources::Domain;

    const PD: u32 = 3;
    const QP: u32 = 0x11;

    fn mr(lw: bool) -> Mkey {
        Mkey {
            variant: 0x42,
            pd: PD,
            qpn: QPN_UNBOUND,
            lw,
            rr: true,
            rw: true,
            a: false,
            length64: false,
            start_addr: 0x1000,
            len: 0x1000,
            translation: MkeyTranslation::Pa,
            free: false,
            umr_en: false,
            rinval: false,
        }
    }

    fn window(type2: bool) -> Mkey {
        Mkey {
            variant: 0,
            lw: false,
            rr: false,
            rw: false,
            start_addr: 0,
            len: 0,
            translation: MkeyTranslation::Window {
                klm_octowords: 4,
                bound: None,
            },
            free: true,
            umr_en: true,
            rinval: type2,
            ..mr(false)
        }
    }

    /// A bind as rdma-core's `set_bind_wr` writes it.
    fn bind(type2: bool, mr_key: u32, addr: u64, len: u64, variant: u8) -> UmrWqe {
        let mut mask = MKEY_MASK_FREE
            | MKEY_MASK_MKEY
            | MKEY_MASK_LEN
            | MKEY_MASK_START_ADDR
            | MKEY_MASK_ACCESS;
        if type2 {
            mask |= MKEY_MASK_QPN;
        }
        UmrWqe {
            flags: 0,
            mask,
            klm_octowords: BIND_KLM_OCTOWORDS,
            free: false,
            lw: false,
            rr: true,
            rw: true,
            a: false,
            qpn: if type2 { QP } else { QPN_UNBOUND },
            mkey_7_0: variant,
            start_addr: addr,
            len,
            klm: Some((len as u32, mr_key, addr)),
        }
    }

    /// A LOCAL_INV as rdma-core writes it (type 2, CHECK_QPN).
    fn local_inv() -> UmrWqe {
        UmrWqe {
            flags: UMR_CTRL_CHECK_QPN,
            mask: MKEY_MASK_FREE | MKEY_MASK_MKEY | MKEY_MASK_QPN,
            free: true,
            qpn: QPN_UNBOUND,
            ..UmrWqe::default()
        }
    }

    fn setup(type2: bool, lw: bool) -> (Table<Mkey>, u32, u32) {
        let mut t = Table::new(1, 8);
        let m = t.insert(mr(lw)).unwrap() << 8 | 0x42;
        let w = t.insert(window(type2)).unwrap() << 8;
        (t, m, w)
    }

    fn remote(t: &Table<Mkey>, key: u32, need: Need, addr: u64, len: u64) -> Result<u64, KeyError> {
        let dom = Domain {
            pd: PD,
            ..Domain::default()
        }
        .on(QP);
        check(t, key, dom, need, addr, len).map(|(_, a)| a)
    }

    #[test]
    fn a_bound_window_translates_into_its_mr_and_keeps_its_own_rights() {
        let (mut t, m, w) = setup(false, true);
        let mut u = bind(false, m, 0x1800, 0x100, 7);
        u.rw = false;
        execute(&mut t, PD, QP, w, &u).unwrap();
        let key = w | 7;
        assert_eq!(remote(&t, key, Need::RemoteRead, 0x1880, 0x10), Ok(0x1880));
        assert_eq!(
            remote(&t, key, Need::RemoteWrite, 0x1880, 0x10),
            Err(KeyError::Access)
        );
        assert_eq!(
            remote(&t, key, Need::RemoteRead, 0x18F8, 0x10),
            Err(KeyError::Bounds)
        );
        assert_eq!(
            remote(&t, w | 6, Need::RemoteRead, 0x1880, 0x10),
            Err(KeyError::NoKey),
            "the old variant"
        );
        assert_eq!(
            remote(&t, key, Need::LocalRead, 0x1880, 0x10),
            Err(KeyError::Access),
            "a window is no lkey"
        );
        // Type 1 rebinds while bound; the old key stops working.
        execute(&mut t, PD, QP, key, &bind(false, m, 0x1000, 0x80, 8)).unwrap();
        assert_eq!(
            remote(&t, key, Need::RemoteRead, 0x1000, 8),
            Err(KeyError::NoKey)
        );
        assert_eq!(remote(&t, w | 8, Need::RemoteWrite, 0x1000, 8), Ok(0x1000));
        // A zero-based window: start_addr 0, the KLM at the MR's bytes.
        let mut z = bind(false, m, 0x1400, 0x40, 9);
        z.start_addr = 0;
        execute(&mut t, PD, QP, w | 8, &z).unwrap();
        assert_eq!(remote(&t, w | 9, Need::RemoteRead, 0x10, 8), Ok(0x1410));
    }

    #[test]
    fn bad_binds_are_refused_and_change_nothing() {
        let (mut t, m, w) = setup(false, false);
        let before = t.get(w >> 8).cloned();
        let ro = |mut u: UmrWqe| {
            u.rw = false;
            u
        };
        let cases = [
            (ro(bind(false, m, 0x1F00, 0x200, 1)), UmrError::Bounds),
            (ro(bind(false, m, 0x0F00, 0x200, 1)), UmrError::Bounds),
            (bind(false, m, 0x1000, 0x100, 1), UmrError::Rights),
            (bind(false, m ^ 1, 0x1000, 0x100, 1), UmrError::Mr),
            (bind(false, w, 0x1000, 0x100, 1), UmrError::Mr),
            (bind(true, m, 0x1000, 0x100, 1), UmrError::Qp),
        ];
        for (u, e) in cases {
            assert_eq!(execute(&mut t, PD, QP, w, &u), Err(e));
        }
        let mut u = bind(false, m, 0x1000, 0x100, 1);
        u.rw = false;
        u.klm = Some((0x80, m, 0x1000));
        assert_eq!(execute(&mut t, PD, QP, w, &u), Err(UmrError::Malformed));
        u.klm = Some((0x100, m, 0x1000));
        u.klm_octowords = 8;
        assert_eq!(execute(&mut t, PD, QP, w, &u), Err(UmrError::Malformed));
        u.klm_octowords = 4;
        assert_eq!(execute(&mut t, PD + 1, QP, w, &u), Err(UmrError::Pd));
        assert_eq!(execute(&mut t, PD, QP, m, &u), Err(UmrError::NotWindow));
        assert_eq!(execute(&mut t, PD, QP, 0x700, &u), Err(UmrError::NoWindow));
        assert_eq!(t.get(w >> 8).cloned(), before);
        // An MR of another PD.
        t.get_mut(m >> 8).unwrap().pd = PD + 1;
        assert_eq!(execute(&mut t, PD, QP, w, &u), Err(UmrError::MrPd));
    }

    #[test]
    fn type2_binds_only_when_free_and_local_inv_frees_it() {
        let (mut t, m, w) = setup(true, true);
        execute(&mut t, PD, QP, w, &bind(true, m, 0x1000, 0x100, 5)).unwrap();
        let key = w | 5;
        assert_eq!(t.get(w >> 8).unwrap().qpn, QP);
        assert_eq!(
            execute(&mut t, PD, QP, key, &bind(true, m, 0x1000, 0x100, 6)),
            Err(UmrError::NotFree)
        );
        // Only the QP it is bound to reaches it.
        let other = Domain {
            pd: PD,
            ..Domain::default()
        }
        .on(QP + 1);
        assert_eq!(
            check(&t, key, other, Need::RemoteRead, 0x1000, 8).err(),
            Some(KeyError::Qp)
        );
        assert_eq!(
            execute(&mut t, PD, QP, w | 4, &local_inv()),
            Err(UmrError::Key),
            "stale variant"
        );
        assert_eq!(
            execute(&mut t, PD, QP + 1, key, &local_inv()),
            Err(UmrError::Qp)
        );
        execute(&mut t, PD, QP, key, &local_inv()).unwrap();
        assert_eq!(
            remote(&t, key, Need::RemoteRead, 0x1000, 8),
            Err(KeyError::NoKey)
        );
        assert_eq!(
            execute(&mut t, PD, QP, key, &local_inv()),
            Err(UmrError::Key),
            "already free"
        );
        execute(&mut t, PD, QP, key, &bind(true, m, 0x1000, 0x100, 6)).unwrap();
        assert_eq!(remote(&t, w | 6, Need::RemoteWrite, 0x1000, 8), Ok(0x1000));
    }

    #[test]
    fn local_inv_of_a_type1_window_and_malformed_masks_fail() {
        let (mut t, m, w) = setup(false, true);
        execute(&mut t, PD, QP, w, &bind(false, m, 0x1000, 0x100, 1)).unwrap();
        assert_eq!(
            execute(&mut t, PD, QP, w | 1, &local_inv()),
            Err(UmrError::Type)
        );
        let neither = UmrWqe::default();
        assert_eq!(
            execute(&mut t, PD, QP, w | 1, &neither),
            Err(UmrError::Malformed)
        );
        // A type-1 unbind (rdma-core's zero-length bind): free, no CHECK_QPN.
        let unbind = UmrWqe {
            flags: 0,
            ..local_inv()
        };
        execute(&mut t, PD, QP, w | 1, &unbind).unwrap();
        assert!(t.get(w >> 8).unwrap().free);
        // A window outliving its MR fails on access instead of reaching the memory.
        execute(&mut t, PD, QP, w | 1, &bind(false, m, 0x1000, 0x100, 2)).unwrap();
        t.remove(m >> 8);
        assert_eq!(
            remote(&t, w | 2, Need::RemoteRead, 0x1000, 8),
            Err(KeyError::NoKey)
        );
    }
}
