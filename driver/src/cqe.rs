//! A CQE in the ring, read one volatile dword at a time through accessors whose offsets,
//! shifts and masks come from the [`Cqe64`] layout (its `prm_layout!` field table) at compile
//! time: the CQE layout has one definition, in `rnic_hw_regs::cqe`.
//!
//! The device writes the ring, so an entry is never copied out or borrowed as a `&Cqe64`;
//! each accessor is one load of the big-endian dword that holds its field, and fields that
//! share a dword and are wanted together are read with one load.

use crate::dma::{read_be32, read_byte};
use rnic_hw_regs::cqe::{CQE_SIZE, Cqe64};
use rnic_hw_regs::{DwordField, FieldDesc, FieldValue, PrmLayout};
use std::marker::PhantomData;

/// A bit field of [`Cqe64`] read as a `T`: where it sits in its dword, taken from the
/// layout's field table at compile time.
#[derive(Clone, Copy)]
pub(crate) struct Field<T> {
    at: DwordField,
    ty: PhantomData<T>,
}

impl<T: FieldValue> Field<T> {
    /// [`Cqe64`] field `name` (a compile error when there is none, when it is not inside one
    /// dword, or when it is wider than `T`).
    const fn named(name: &str) -> Field<T> {
        let d = FieldDesc::named(Cqe64::FIELDS, name);
        assert!(d.bit_width <= T::BITS, "the field is wider than its type");
        Field {
            at: d.dword(),
            ty: PhantomData,
        }
    }
}

/// `grh` (responder CQEs): 1 GRH in the receive buffer, 2 in the CQE.
pub(crate) const GRH: Field<u8> = Field::named("grh");
/// `rqpn`: the source QP (responder CQEs).
pub(crate) const RQPN: Field<u32> = Field::named("rqpn");
/// `imm_inval_pkey`: immediate data, or the invalidated rkey.
pub(crate) const IMM_INVAL_PKEY: Field<u32> = Field::named("imm_inval_pkey");
/// `byte_cnt`.
pub(crate) const BYTE_CNT: Field<u32> = Field::named("byte_cnt");
/// `vendor_err_synd` (error CQEs).
pub(crate) const VENDOR_ERR_SYND: Field<u8> = Field::named("vendor_err_synd");
/// `syndrome` (error CQEs).
pub(crate) const SYNDROME: Field<u8> = Field::named("syndrome");
/// `send_opcode` (requester CQEs).
pub(crate) const SEND_OPCODE: Field<u8> = Field::named("send_opcode");
/// `qpn`.
pub(crate) const QPN: Field<u32> = Field::named("qpn");
/// `wqe_counter`.
pub(crate) const WQE_COUNTER: Field<u16> = Field::named("wqe_counter");
/// `l3_hdr_type` (Ethernet receive CQEs).
pub(crate) const L3_HDR_TYPE: Field<u8> = Field::named("l3_hdr_type");
/// `l4_hdr_type` (Ethernet receive CQEs).
pub(crate) const L4_HDR_TYPE: Field<u8> = Field::named("l4_hdr_type");
/// `cvlan_present` (Ethernet receive CQEs).
pub(crate) const CVLAN_PRESENT: Field<bool> = Field::named("cvlan_present");
/// `vlan_info` (Ethernet receive CQEs).
pub(crate) const VLAN_INFO: Field<u16> = Field::named("vlan_info");
const OPCODE: Field<u8> = Field::named("opcode");
const FORMAT: Field<u8> = Field::named("format");
const OWNER: Field<bool> = Field::named("owner");

/// Byte offset of `op_own` (opcode, format, solicited, owner): the last byte of the entry,
/// the one the device writes last and the poller checks first.
pub(crate) const OP_OWN: usize = FieldDesc::named(Cqe64::FIELDS, "owner").bit_offset / 8;

// The fields the poller reads together with `Cqe::get2` share their dword; `op_own` is the
// low byte of its dword, so the dword shifts of opcode, format and owner apply to the byte
// as they are.
const _: () = {
    assert!(QPN.at.byte == SEND_OPCODE.at.byte && RQPN.at.byte == GRH.at.byte);
    assert!(SYNDROME.at.byte == VENDOR_ERR_SYND.at.byte);
    assert!(OPCODE.at.byte == OWNER.at.byte && FORMAT.at.byte == OWNER.at.byte);
    assert!(OWNER.at.shift == 0 && OPCODE.at.shift + 4 <= 8 && FORMAT.at.shift + 2 <= 8);
    assert!(OP_OWN == OWNER.at.byte + 3 && OP_OWN == CQE_SIZE - 1);
};

/// The opcode nibble of an `op_own` byte (raw, a `CqeOpcode` value).
#[inline(always)]
pub(crate) const fn opcode_of(op_own: u8) -> u8 {
    OPCODE.at.extract(op_own as u32) as u8
}

/// The format of an `op_own` byte (`CQE_FORMAT_COMPRESSED` for a compressed block).
#[inline(always)]
pub(crate) const fn format_of(op_own: u8) -> u8 {
    FORMAT.at.extract(op_own as u32) as u8
}

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

    /// The dword at byte `byte`, host order.
    #[inline(always)]
    fn dword(self, byte: usize) -> u32 {
        // SAFETY: `byte` is a `Cqe64` dword's (`byte + 4 <= CQE_SIZE`, 4-byte aligned, as
        // `FieldDesc::dword` derives it) and the entry is live and aligned (`Cqe::at`'s
        // contract); a volatile read, no reference.
        unsafe { read_be32(self.0.add(byte)) }
    }

    /// Field `f`: one volatile load of its dword.
    #[inline(always)]
    pub(crate) fn get<T: FieldValue>(self, f: Field<T>) -> T {
        T::from_raw(u64::from(f.at.extract(self.dword(f.at.byte))))
    }

    /// Fields `a` and `b`, which share a dword, with one load of it.
    #[inline(always)]
    pub(crate) fn get2<A: FieldValue, B: FieldValue>(self, a: Field<A>, b: Field<B>) -> (A, B) {
        debug_assert_eq!(a.at.byte, b.at.byte, "fields of different dwords");
        let w = self.dword(a.at.byte);
        (
            A::from_raw(u64::from(a.at.extract(w))),
            B::from_raw(u64::from(b.at.extract(w))),
        )
    }

    /// `op_own`: opcode (7:4), format (3:2), solicited (1), owner (0).
    #[inline(always)]
    pub(crate) fn op_own(self) -> u8 {
        // SAFETY: inside the entry (`Cqe::at`'s contract).
        unsafe { read_byte(self.0.add(OP_OWN)) }
    }

    /// Copies entry `src` over this one, keeping this entry's owner bit (the owner bit
    /// belongs to the slot, the rest to the completion), `op_own` last, as rdma-core's
    /// `__mlx5_cq_clean` moves a CQE.
    ///
    /// # Safety
    ///
    /// Both entries are owned by software.
    #[inline]
    pub(crate) unsafe fn move_from(self, src: Cqe) {
        let owner = self.op_own() & 1;
        // SAFETY: both entries are live `CQE_SIZE`-byte entries (`Cqe::at`); volatile.
        unsafe {
            for k in 0..OP_OWN {
                self.0.add(k).write_volatile(src.0.add(k).read_volatile());
            }
            self.0
                .add(OP_OWN)
                .write_volatile((src.op_own() & !1) | owner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rnic_hw_regs::cqe::CqeOpcode;
    use zerocopy::IntoBytes;

    /// An entry with `c`'s bytes, 4-byte aligned as in the ring.
    fn entry(c: &Cqe64) -> [u32; CQE_SIZE / 4] {
        let mut buf = [0u32; CQE_SIZE / 4];
        buf.as_mut_bytes().copy_from_slice(c.as_bytes());
        buf
    }

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
        c.set_opcode(CqeOpcode::ReqErr.raw());
        c.set_format(3);
        c.set_owner(true);
        let mut buf = entry(&c);
        // SAFETY: `buf` is a live, aligned 64-byte entry for the whole test.
        let e = unsafe { Cqe::at(buf.as_mut_ptr().cast()) };
        assert_eq!(e.get2(RQPN, GRH), (0xAB_CDEF, 2));
        assert_eq!(e.get(GRH), 2);
        assert_eq!(e.get(IMM_INVAL_PKEY), 0xDEAD_BEEF);
        assert_eq!(e.get(BYTE_CNT), 0x0001_0203);
        assert_eq!(e.get2(SYNDROME, VENDOR_ERR_SYND), (0x13, 0x81));
        assert_eq!(e.get2(QPN, SEND_OPCODE), (0x123, 0x08));
        assert_eq!(e.get(QPN), 0x123);
        assert_eq!(e.get(WQE_COUNTER), 0xBEEF);
        assert_eq!(e.op_own(), c.op_own());
        assert_eq!(opcode_of(e.op_own()), CqeOpcode::ReqErr.raw());
        assert_eq!(format_of(e.op_own()), 3);
    }

    /// A moved entry takes the source's body and opcode and keeps its own owner bit.
    #[test]
    fn move_keeps_the_owner_bit() {
        let mut src = Cqe64::default();
        src.set_qpn(7);
        src.set_wqe_counter(9);
        src.set_opcode(CqeOpcode::RespSend.raw());
        src.set_owner(false);
        let mut dst = Cqe64::default();
        dst.set_opcode(CqeOpcode::Req.raw());
        dst.set_owner(true);
        let (mut s, mut d) = (entry(&src), entry(&dst));
        // SAFETY: both buffers are live, aligned 64-byte entries for the whole test.
        let (s, d) = unsafe {
            (
                Cqe::at(s.as_mut_ptr().cast()),
                Cqe::at(d.as_mut_ptr().cast()),
            )
        };
        // SAFETY: as above; nothing else touches them.
        unsafe { d.move_from(s) };
        assert_eq!((d.get(QPN), d.get(WQE_COUNTER)), (7, 9));
        assert_eq!(opcode_of(d.op_own()), CqeOpcode::RespSend.raw());
        assert_eq!(d.op_own() & 1, 1);
    }
}
