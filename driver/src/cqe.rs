//! Volatile reads of a CQE in the ring, one accessor per field the poller needs.
//!
//! The device writes the ring, so a CQE is never copied out or borrowed as a `&Cqe64`
//! (DESIGN principle 4); each accessor reads its big-endian dword with one volatile load.
//! Where each field sits is not restated here: the offsets and bit ranges are taken, at
//! compile time, from the field list of [`Cqe64`] (its `prm_layout!` declaration), so the
//! layout has one definition.

use crate::dma::{read_be32, read_byte};
use rnic_hw_regs::cqe::{CQE_SIZE, Cqe64};
use rnic_hw_regs::{FieldDesc, FieldKind, PrmLayout};

/// Where a `dw` field of [`Cqe64`] sits: its dword's byte offset, shift and mask.
#[derive(Clone, Copy)]
struct Field {
    dword: usize,
    shift: u32,
    mask: u32,
}

/// Whether two names are equal (`str` comparison is not `const`).
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The descriptor of [`Cqe64`] field `name` (a compile error when there is none).
const fn desc(name: &str) -> FieldDesc {
    let fields = Cqe64::FIELDS;
    let mut i = 0;
    while i < fields.len() {
        if same(fields[i].name, name) {
            return fields[i];
        }
        i += 1;
    }
    panic!("no such Cqe64 field");
}

/// Field `name` as one dword read (a compile error when it is not a bit field inside one
/// dword).
const fn field(name: &str) -> Field {
    let d = desc(name);
    assert!(matches!(d.kind, FieldKind::Bits));
    let first = d.bit_offset % 32;
    assert!(d.bit_width >= 1 && first + d.bit_width <= 32);
    Field {
        dword: d.bit_offset / 32 * 4,
        shift: (32 - first - d.bit_width) as u32,
        mask: if d.bit_width == 32 {
            u32::MAX
        } else {
            (1u32 << d.bit_width) - 1
        },
    }
}

const RQPN: Field = field("rqpn");
const GRH: Field = field("grh");
const IMM_INVAL_PKEY: Field = field("imm_inval_pkey");
const BYTE_CNT: Field = field("byte_cnt");
const VENDOR_ERR_SYND: Field = field("vendor_err_synd");
const SYNDROME: Field = field("syndrome");
const SEND_OPCODE: Field = field("send_opcode");
const QPN: Field = field("qpn");
const WQE_COUNTER: Field = field("wqe_counter");

/// The byte of `op_own` (opcode, format, solicited, owner): the byte holding the owner bit,
/// the one the device writes last.
pub(crate) const OP_OWN: usize = desc("owner").bit_offset / 8;

const _: () = {
    assert!(OP_OWN == CQE_SIZE - 1);
    assert!(desc("opcode").bit_offset / 8 == OP_OWN);
};

/// A CQE in the ring.
#[derive(Clone, Copy)]
pub(crate) struct Cqe(*mut u8);

impl Cqe {
    /// The CQE at `p`.
    ///
    /// # Safety
    ///
    /// `p` points at a [`CQE_SIZE`]-byte, 4-byte aligned entry of a live CQ ring, for as
    /// long as the value is used.
    #[inline(always)]
    pub(crate) unsafe fn at(p: *mut u8) -> Cqe {
        Cqe(p)
    }

    /// The entry's address.
    #[inline(always)]
    pub(crate) fn ptr(self) -> *mut u8 {
        self.0
    }

    #[inline(always)]
    fn get(self, f: Field) -> u32 {
        // SAFETY: `f.dword + 4 <= CQE_SIZE` (a `Cqe64` dword) and the entry is live and
        // aligned (`Cqe::at`'s contract); a volatile read, no reference.
        (unsafe { read_be32(self.0.add(f.dword)) } >> f.shift) & f.mask
    }

    /// `op_own`: opcode (7:4), format (3:2), solicited (1), owner (0).
    #[inline(always)]
    pub(crate) fn op_own(self) -> u8 {
        // SAFETY: inside the entry (`Cqe::at`'s contract).
        unsafe { read_byte(self.0.add(OP_OWN)) }
    }

    /// `qpn`.
    #[inline(always)]
    pub(crate) fn qpn(self) -> u32 {
        self.get(QPN)
    }

    /// `send_opcode` (requester CQEs).
    #[inline(always)]
    pub(crate) fn send_opcode(self) -> u8 {
        self.get(SEND_OPCODE) as u8
    }

    /// `wqe_counter`.
    #[inline(always)]
    pub(crate) fn wqe_counter(self) -> u16 {
        self.get(WQE_COUNTER) as u16
    }

    /// `byte_cnt`.
    #[inline(always)]
    pub(crate) fn byte_cnt(self) -> u32 {
        self.get(BYTE_CNT)
    }

    /// `syndrome` (error CQEs).
    #[inline(always)]
    pub(crate) fn syndrome(self) -> u8 {
        self.get(SYNDROME) as u8
    }

    /// `vendor_err_synd` (error CQEs).
    #[inline(always)]
    pub(crate) fn vendor_err_synd(self) -> u8 {
        self.get(VENDOR_ERR_SYND) as u8
    }

    /// `rqpn` (responder CQEs).
    #[inline(always)]
    pub(crate) fn rqpn(self) -> u32 {
        self.get(RQPN)
    }

    /// `grh` (responder CQEs).
    #[inline(always)]
    pub(crate) fn grh(self) -> u8 {
        self.get(GRH) as u8
    }

    /// `imm_inval_pkey`.
    #[inline(always)]
    pub(crate) fn imm_inval_pkey(self) -> u32 {
        self.get(IMM_INVAL_PKEY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    /// Every accessor reads what the `Cqe64` setter of its field wrote, and nothing else.
    #[test]
    fn accessors_read_the_cqe64_fields() {
        let mut c = Cqe64::default();
        c.set_grh(2);
        c.set_rqpn(0xAB_CDEF);
        c.set_imm_inval_pkey(0xDEAD_BEEF);
        c.set_byte_cnt(0x0001_0203);
        c.set_vendor_err_synd(0x81);
        c.set_syndrome(0x13);
        c.set_send_opcode(0x08);
        c.set_qpn(0x00_0123);
        c.set_wqe_counter(0xBEEF);
        c.set_opcode(0xD);
        c.set_owner(true);
        // 4-byte aligned, as a ring entry.
        let mut buf = [0u32; CQE_SIZE / 4];
        buf.as_mut_bytes().copy_from_slice(c.as_bytes());
        // SAFETY: `buf` is a live, aligned 64-byte entry for the whole test.
        let e = unsafe { Cqe::at(buf.as_mut_ptr().cast()) };
        assert_eq!((e.grh(), e.rqpn()), (2, 0xAB_CDEF));
        assert_eq!(e.imm_inval_pkey(), 0xDEAD_BEEF);
        assert_eq!(e.byte_cnt(), 0x0001_0203);
        assert_eq!((e.vendor_err_synd(), e.syndrome()), (0x81, 0x13));
        assert_eq!((e.send_opcode(), e.qpn()), (0x08, 0x123));
        assert_eq!(e.wqe_counter(), 0xBEEF);
        assert_eq!(e.op_own(), c.op_own());
    }
}
