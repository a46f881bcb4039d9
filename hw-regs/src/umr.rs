//! The segments of a UMR send WQE (opcode [`SendOpcode::Umr`], 0x25): how software binds and
//! invalidates a memory window without a command.
//!
//! A UMR WQE is, in order: the control segment (its `imm` names the mkey to modify: the
//! window's current key; the index `imm >> 8` selects it), the UMR control segment (48 bytes,
//! `mlx5_wqe_umr_ctrl_seg` of rdma-core's `mlx5dv.h`: which mkey fields change, how many KLM
//! octowords follow), the mkey segment (64 bytes, laid out as the memory key context
//! [`Mkc`], `mlx5_wqe_mkey_context_seg`: the new values), then, for a bind, the KLM list
//! inline (`klm_octowords` 16-byte units; one KLM padded to 64 bytes):
//!
//! | Work request | UMR flags | mkey mask | mkey segment | KLMs | DS |
//! |---|---|---|---|---|---|
//! | bind type 1 | INLINE, TRANSLATION_OFFSET | FREE, MKEY, LEN, START_ADDR, ACCESS_* | qpn 0xFFFFFF, free 0 | 1 | 12 |
//! | bind type 2 | + CHECK_FREE | + QPN | qpn = the QP | 1 | 12 |
//! | LOCAL_INV | INLINE, TRANSLATION_OFFSET, CHECK_QPN | FREE, MKEY, QPN | free 1 | 0 | 8 |
//!
//! ```
//! use rnic_hw_regs::umr::{UmrCtrlSeg, UmrKlmSeg, MKEY_MASK_FREE, UMR_CTRL_INLINE};
//! use rnic_hw_regs::PrmLayout;
//!
//! let mut u = UmrCtrlSeg::default();
//! u.set_flags(UMR_CTRL_INLINE);
//! u.set_klm_octowords(4);
//! u.set_mkey_mask(MKEY_MASK_FREE);
//! assert_eq!((u.0[0], u.0[5], u.0[0x0C]), (0x80, 4, 0x20));
//! assert_eq!((UmrCtrlSeg::SIZE, UmrKlmSeg::SIZE), (48, 16));
//! ```

#[cfg(doc)]
use crate::ctx::Mkc;
#[cfg(doc)]
use crate::wqe::SendOpcode;

/// UMR control flag: the KLM list is inline in the WQE (`MLX5_WQE_UMR_CTRL_FLAG_INLINE`).
pub const UMR_CTRL_INLINE: u8 = 1 << 7;
/// UMR control flag: fail unless the mkey is free (a type-2 bind).
pub const UMR_CTRL_CHECK_FREE: u8 = 1 << 5;
/// UMR control flag: `translation_offset` is valid.
pub const UMR_CTRL_TRANSLATION_OFFSET: u8 = 1 << 4;
/// UMR control flag: fail unless the mkey is bound to this QP (a type-2 invalidation).
pub const UMR_CTRL_CHECK_QPN: u8 = 1 << 3;

/// mkey mask bit: the mkey segment's `len` applies.
pub const MKEY_MASK_LEN: u64 = 1 << 0;
/// mkey mask bit: `start_addr` applies.
pub const MKEY_MASK_START_ADDR: u64 = 1 << 6;
/// mkey mask bit: `mkey_7_0` (the key's variant byte) applies.
pub const MKEY_MASK_MKEY: u64 = 1 << 13;
/// mkey mask bit: `qpn` applies.
pub const MKEY_MASK_QPN: u64 = 1 << 14;
/// mkey mask bit: `lw` applies.
pub const MKEY_MASK_ACCESS_LOCAL_WRITE: u64 = 1 << 18;
/// mkey mask bit: `rr` applies.
pub const MKEY_MASK_ACCESS_REMOTE_READ: u64 = 1 << 19;
/// mkey mask bit: `rw` applies.
pub const MKEY_MASK_ACCESS_REMOTE_WRITE: u64 = 1 << 20;
/// mkey mask bit: `a` applies.
pub const MKEY_MASK_ACCESS_ATOMIC: u64 = 1 << 21;
/// mkey mask bit: `free` applies.
pub const MKEY_MASK_FREE: u64 = 1 << 29;
/// Every access bit of the mkey mask.
pub const MKEY_MASK_ACCESS: u64 = MKEY_MASK_ACCESS_LOCAL_WRITE
    | MKEY_MASK_ACCESS_REMOTE_READ
    | MKEY_MASK_ACCESS_REMOTE_WRITE
    | MKEY_MASK_ACCESS_ATOMIC;

/// Size of the mkey segment (an [`Mkc`]).
pub const MKEY_SEG_SIZE: usize = 64;
/// KLM octowords of a one-KLM bind: the KLM padded to 64 bytes (rdma-core's
/// `get_klm_octo(1)`).
pub const BIND_KLM_OCTOWORDS: u16 = 4;
/// The longest window one KLM can describe (2 GiB).
pub const MAX_KLM_BYTE_COUNT: u64 = 1 << 31;

prm_layout! {
    /// UMR control segment (`mlx5_wqe_umr_ctrl_seg`, 48 bytes).
    pub struct UmrCtrlSeg("", 48) {
        /// `UMR_CTRL_*` flags.
        flags / set_flags: u8 = dw(0x00, 31, 24);
        /// Length of the inline KLM list in 16-byte units.
        klm_octowords / set_klm_octowords: u16 = dw(0x04, 31, 16);
        /// Offset into the mkey's translation table the KLMs are written at.
        translation_offset / set_translation_offset: u16 = dw(0x04, 15, 0);
        /// Which mkey segment fields apply (`MKEY_MASK_*`).
        mkey_mask / set_mkey_mask: u64 = qw(0x08);
    }
}

prm_layout! {
    /// A KLM entry (`mlx5_wqe_umr_klm_seg`, 16 bytes): `byte_count` bytes at `address` under
    /// `mkey`.
    pub struct UmrKlmSeg("", 16) {
        /// Length in bytes (up to 2 GiB).
        byte_count / set_byte_count: u32 = dw(0x00, 31, 0);
        /// The key the bytes are addressed through (a window's: its MR's lkey).
        mkey / set_mkey: u32 = dw(0x04, 31, 0);
        /// Start address under `mkey`.
        address / set_address: u64 = qw(0x08);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PrmLayout;
    use crate::ctx::Mkc;
    use zerocopy::IntoBytes;

    /// Offsets as `mlx5dv.h` declares them: flags (u8), rsvd0[3], klm_octowords (be16),
    /// translation_offset (be16), mkey_mask (be64), rsvd1[32].
    #[test]
    fn umr_ctrl_segment_matches_mlx5dv() {
        let mut u = UmrCtrlSeg::default();
        u.set_flags(UMR_CTRL_INLINE | UMR_CTRL_TRANSLATION_OFFSET | UMR_CTRL_CHECK_FREE);
        u.set_klm_octowords(0x0102);
        u.set_translation_offset(0x0304);
        u.set_mkey_mask(MKEY_MASK_FREE | MKEY_MASK_MKEY | MKEY_MASK_LEN);
        let b = u.as_bytes();
        assert_eq!(b.len(), 48);
        assert_eq!(&b[..8], &[0xB0, 0, 0, 0, 1, 2, 3, 4]);
        assert_eq!(&b[8..16], &[0, 0, 0, 0, 0x20, 0, 0x20, 0x01]);
        assert!(b[16..].iter().all(|&x| x == 0));
        assert_eq!(u.mkey_mask(), 1 << 29 | 1 << 13 | 1);
    }

    #[test]
    fn klm_segment_matches_mlx5dv() {
        let mut k = UmrKlmSeg::default();
        k.set_byte_count(0x1000);
        k.set_mkey(0xABCD_EF01);
        k.set_address(0x1122_3344_5566_7788);
        assert_eq!(
            k.as_bytes(),
            &[
                0, 0, 0x10, 0, 0xAB, 0xCD, 0xEF, 1, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88
            ]
        );
    }

    /// The mkey segment is the mkc: `free` is 0x40 in byte 0 (`MLX5_WQE_MKEY_CONTEXT_FREE`),
    /// the access flags are byte 2 (atomic 0x40, remote write 0x20, remote read 0x10, local
    /// write 0x08, local read 0x04), `qpn_mkey` is bytes 4..8.
    #[test]
    fn mkey_segment_is_the_mkc() {
        assert_eq!(Mkc::SIZE, MKEY_SEG_SIZE);
        let mut m = Mkc::default();
        m.set_free(true);
        assert_eq!(m.0[0], 0x40);
        let mut m = Mkc::default();
        m.set_a(true);
        m.set_rw(true);
        m.set_rr(true);
        m.set_lw(true);
        m.set_lr(true);
        m.set_qpn(0x12_3456);
        m.set_mkey_7_0(0x9A);
        assert_eq!(m.0[2], 0x7C);
        assert_eq!(&m.0[4..8], &[0x12, 0x34, 0x56, 0x9A]);
        assert_eq!(
            (
                MKEY_MASK_ACCESS,
                MAX_KLM_BYTE_COUNT,
                usize::from(BIND_KLM_OCTOWORDS) * 16
            ),
            (0xF << 18, 1 << 31, 64)
        );
    }
}
