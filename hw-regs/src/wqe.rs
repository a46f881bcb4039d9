//! Work queue entries: the send WQE segments (control, remote address, atomic, UD datagram /
//! address vector, data, inline) and the receive WQE (data segments ended by the invalid
//! lkey), with the send opcodes.
//!
//! A send WQE is a control segment followed by opcode-dependent segments, in 16-byte units
//! ("DS"), occupying one or more 64-byte basic blocks (WQEBBs):
//!
//! | Operation | Segments | DS |
//! |---|---|---|
//! | SEND | ctrl + data | 2 |
//! | UD SEND | ctrl + datagram (3 DS) + data | 5 |
//! | RDMA WRITE / READ | ctrl + raddr + data | 3 |
//! | atomic | ctrl + raddr + atomic + data (8 bytes) | 4 |
//!
//! ```
//! use rnic_hw_regs::wqe::{CtrlSeg, FenceMode, SendOpcode, CE_CQ_UPDATE, ds_to_wqebbs};
//!
//! let mut c = CtrlSeg::default();
//! c.set_send_opcode(SendOpcode::RdmaWrite);
//! c.set_wqe_index(7);
//! c.set_qpn(0x1234);
//! c.set_ds(3);
//! c.set_ce(CE_CQ_UPDATE);
//! c.set_fence_mode(FenceMode::None.raw());
//! assert_eq!(c.0[..8], [0, 0, 7, 0x08, 0, 0x12, 0x34, 3]);
//! assert_eq!(c.0[11], 0x08);
//! assert_eq!(ds_to_wqebbs(3), 1);
//! ```

use crate::status::{UnknownCode, code_enum};

/// Size of a WQE basic block.
pub const WQEBB: usize = 64;
/// Size of the DS unit a WQE's length is counted in.
pub const DS_SIZE: usize = 16;
/// Largest DS count a control segment can carry (6 bits).
pub const MAX_DS: u8 = 63;
/// Largest send WQE, in WQEBBs.
pub const MAX_WQEBBS: usize = 16;
/// The lkey that ends a receive WQE's scatter list early (an invalid key).
pub const INVALID_LKEY: u32 = 0x100;
/// Flag in an inline segment's byte count: the data follows inline.
pub const INLINE_SEG_FLAG: u32 = 0x8000_0000;

/// `ce` (completion mode, `fm_ce_se` bits 3:2) value: generate a CQE only on error.
pub const CE_CQE_ON_ERROR: u8 = 0;
/// `ce` value: generate a CQE on the first error (then flush).
pub const CE_CQE_ON_FIRST_ERROR: u8 = 1;
/// `ce` value: always generate a CQE (CQ_UPDATE, `fm_ce_se` 0x08).
pub const CE_CQ_UPDATE: u8 = 2;

/// The number of WQEBBs a WQE of `ds` 16-byte units occupies.
///
/// ```
/// use rnic_hw_regs::wqe::ds_to_wqebbs;
///
/// assert_eq!(ds_to_wqebbs(2), 1); // SEND: ctrl + data
/// assert_eq!(ds_to_wqebbs(4), 1);
/// assert_eq!(ds_to_wqebbs(5), 2); // UD SEND: 80 bytes
/// ```
pub const fn ds_to_wqebbs(ds: u8) -> usize {
    (ds as usize * DS_SIZE).div_ceil(WQEBB)
}

code_enum! {
    /// Send WQE opcode (control segment byte 3).
    pub enum SendOpcode: u8 {
        /// No operation (still completes).
        Nop = 0x00 => "NOP",
        /// SEND with invalidate of a remote rkey (`imm` holds the rkey).
        SendInval = 0x01 => "SEND_INVAL",
        /// RDMA WRITE.
        RdmaWrite = 0x08 => "RDMA_WRITE",
        /// RDMA WRITE with immediate.
        RdmaWriteImm = 0x09 => "RDMA_WRITE_IMM",
        /// SEND.
        Send = 0x0A => "SEND",
        /// SEND with immediate.
        SendImm = 0x0B => "SEND_IMM",
        /// RDMA READ.
        RdmaRead = 0x10 => "RDMA_READ",
        /// Atomic compare and swap.
        AtomicCs = 0x11 => "ATOMIC_CS",
        /// Atomic fetch and add.
        AtomicFa = 0x12 => "ATOMIC_FA",
        /// Masked atomic compare and swap.
        AtomicMaskedCs = 0x14 => "ATOMIC_MASKED_CS",
        /// Masked atomic fetch and add.
        AtomicMaskedFa = 0x15 => "ATOMIC_MASKED_FA",
        /// Bind a memory window.
        BindMw = 0x18 => "BIND_MW",
        /// Local invalidate.
        LocalInval = 0x1B => "LOCAL_INVAL",
        /// User-mode memory registration.
        Umr = 0x25 => "UMR",
    }
}

code_enum! {
    /// Fence mode (`fm_ce_se` bits 7:5). rdma-core's `MLX5_WQE_CTRL_FENCE` (0x80, used for
    /// `IBV_SEND_FENCE`) is [`FenceMode::SmallAndFence`]; `MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE`
    /// (0x20) is [`FenceMode::InitiatorSmall`].
    pub enum FenceMode: u8 {
        /// No fence.
        None = 0 => "NONE",
        /// Initiator small fence (0x20): wait for earlier small operations.
        InitiatorSmall = 1 => "INITIATOR_SMALL",
        /// Fence (0x40): wait for earlier RDMA READs and atomics.
        Fence = 2 => "FENCE",
        /// Strong ordering (0x60).
        StrongOrdering = 3 => "STRONG_ORDERING",
        /// Small and fence (0x80).
        SmallAndFence = 4 => "SMALL_AND_FENCE",
    }
}

prm_layout! {
    /// Send WQE control segment (`mlx5_wqe_ctrl_seg`, 16 bytes).
    pub struct CtrlSeg("", 16) {
        /// Opcode modifier.
        opmod / set_opmod: u8 = dw(0x00, 31, 24);
        /// Producer counter of the WQE's first WQEBB (16 bits, not masked to the queue size).
        wqe_index / set_wqe_index: u16 = dw(0x00, 23, 8);
        /// Send opcode, raw (see [`CtrlSeg::send_opcode`]).
        opcode / set_opcode: u8 = dw(0x00, 7, 0);
        /// QP number.
        qpn / set_qpn: u32 = dw(0x04, 31, 8);
        /// WQE size in 16-byte units, control segment included.
        ds / set_ds: u8 = dw(0x04, 5, 0);
        /// WQE signature (only with `wq_signature`).
        signature / set_signature: u8 = dw(0x08, 31, 24);
        /// Fence mode (see [`FenceMode`]).
        fence_mode / set_fence_mode: u8 = dw(0x08, 7, 5);
        /// Completion mode (see `CE_*`; 2 = CQ_UPDATE: always generate a CQE).
        ce / set_ce: u8 = dw(0x08, 3, 2);
        /// Solicited event.
        se / set_se: bool = dw(0x08, 1, 1);
        /// Immediate data (network order as sent) or the rkey to invalidate.
        imm / set_imm: u32 = dw(0x0C, 31, 0);
    }
}

impl CtrlSeg {
    /// The typed send opcode.
    ///
    /// ```
    /// use rnic_hw_regs::wqe::{CtrlSeg, SendOpcode};
    ///
    /// let mut c = CtrlSeg::default();
    /// c.set_opcode(0x10);
    /// assert_eq!(c.send_opcode(), Ok(SendOpcode::RdmaRead));
    /// c.set_opcode(0xFF);
    /// assert!(c.send_opcode().is_err());
    /// ```
    pub fn send_opcode(&self) -> Result<SendOpcode, UnknownCode> {
        SendOpcode::try_from(self.opcode())
    }

    /// Sets the send opcode.
    ///
    /// ```
    /// use rnic_hw_regs::wqe::{CtrlSeg, SendOpcode};
    ///
    /// let mut c = CtrlSeg::default();
    /// c.set_send_opcode(SendOpcode::AtomicFa);
    /// assert_eq!(c.opcode(), 0x12);
    /// assert_eq!(c.0[3], 0x12); // byte 3 of the segment
    /// ```
    pub fn set_send_opcode(&mut self, op: SendOpcode) {
        self.set_opcode(op.raw());
    }

    /// The `fm_ce_se` byte as a whole (byte 11).
    ///
    /// ```
    /// use rnic_hw_regs::wqe::{CtrlSeg, FenceMode, CE_CQ_UPDATE};
    ///
    /// let mut c = CtrlSeg::default();
    /// c.set_fence_mode(FenceMode::SmallAndFence.raw());
    /// c.set_ce(CE_CQ_UPDATE);
    /// c.set_se(true);
    /// assert_eq!(c.fm_ce_se(), 0x80 | 0x08 | 0x02);
    /// ```
    pub fn fm_ce_se(&self) -> u8 {
        self.0[11]
    }

    /// The first 8 bytes as the big-endian 64-bit value the send doorbell writes to the UAR.
    ///
    /// ```
    /// use rnic_hw_regs::wqe::{CtrlSeg, SendOpcode};
    ///
    /// let mut c = CtrlSeg::default();
    /// c.set_wqe_index(1);
    /// c.set_send_opcode(SendOpcode::Send);
    /// c.set_qpn(0x42);
    /// c.set_ds(2);
    /// assert_eq!(c.doorbell_qword(), 0x0000_010A_0000_4202);
    /// ```
    pub fn doorbell_qword(&self) -> u64 {
        u64::from_be_bytes([
            self.0[0], self.0[1], self.0[2], self.0[3], self.0[4], self.0[5], self.0[6], self.0[7],
        ])
    }
}

prm_layout! {
    /// Remote address segment (`mlx5_wqe_raddr_seg`, 16 bytes).
    pub struct RaddrSeg("", 16) {
        /// Remote virtual address.
        raddr / set_raddr: u64 = qw(0x00);
        /// Remote key.
        rkey / set_rkey: u32 = dw(0x08, 31, 0);
    }
}

prm_layout! {
    /// Atomic segment (`mlx5_wqe_atomic_seg`, 16 bytes).
    pub struct AtomicSeg("", 16) {
        /// Swap value (compare and swap) or addend (fetch and add).
        swap_add / set_swap_add: u64 = qw(0x00);
        /// Compare value (compare and swap).
        compare / set_compare: u64 = qw(0x08);
    }
}

prm_layout! {
    /// Data (scatter/gather) segment (`mlx5_wqe_data_seg`, 16 bytes).
    pub struct DataSeg("", 16) {
        /// Byte count (bit 31 must be 0; 0 in the receive terminator).
        byte_count / set_byte_count: u32 = dw(0x00, 30, 0);
        /// Local key.
        lkey / set_lkey: u32 = dw(0x04, 31, 0);
        /// Bus / virtual address, per the key's translation.
        addr / set_addr: u64 = qw(0x08);
    }
}

impl DataSeg {
    /// A data segment pointing at `len` bytes at `addr` under `lkey`.
    ///
    /// ```
    /// use rnic_hw_regs::wqe::DataSeg;
    ///
    /// let d = DataSeg::new(0x1000, 256, 0x77);
    /// assert_eq!((d.addr(), d.byte_count(), d.lkey()), (0x1000, 256, 0x77));
    /// assert_eq!(d.0[..8], [0, 0, 1, 0, 0, 0, 0, 0x77]);
    /// ```
    pub fn new(addr: u64, len: u32, lkey: u32) -> Self {
        let mut s = Self::default();
        s.set_byte_count(len & 0x7FFF_FFFF);
        s.set_lkey(lkey);
        s.set_addr(addr);
        s
    }

    /// The entry that ends a short receive scatter list: byte count 0, lkey 0x100, addr 0.
    ///
    /// ```
    /// use rnic_hw_regs::wqe::{DataSeg, INVALID_LKEY};
    ///
    /// let t = DataSeg::terminator();
    /// assert_eq!((t.byte_count(), t.lkey(), t.addr()), (0, INVALID_LKEY, 0));
    /// ```
    pub fn terminator() -> Self {
        Self::new(0, 0, INVALID_LKEY)
    }

    /// Whether this is the receive-list terminator.
    ///
    /// ```
    /// use rnic_hw_regs::wqe::DataSeg;
    ///
    /// assert!(DataSeg::terminator().is_terminator());
    /// assert!(!DataSeg::new(0x2000, 64, 5).is_terminator());
    /// ```
    pub fn is_terminator(&self) -> bool {
        self.lkey() == INVALID_LKEY
    }
}

prm_layout! {
    /// Inline data segment header (`mlx5_wqe_inline_seg`, 4 bytes); the data follows and the
    /// whole segment is padded to 16 bytes.
    pub struct InlineSegHeader("", 4) {
        /// Set: data is inline ([`INLINE_SEG_FLAG`]).
        inline / set_inline: bool = dw(0x00, 31, 31);
        /// Length of the inline data in bytes.
        byte_count / set_byte_count: u32 = dw(0x00, 30, 0);
    }
}

prm_layout! {
    /// The Ethernet segment of a raw packet send WQE (`mlx5_wqe_eth_seg`, 16 bytes), after the
    /// control segment: offload flags, then the first `inline_hdr_sz` bytes of the frame
    /// inline, starting at byte 14 ([`ETH_SEG_INLINE_START`]) and running on into the next DS
    /// units; the rest of the frame follows in data segments.
    pub struct EthSeg("", 16) {
        /// Software parser: outer L4 header offset (in 2-byte units).
        swp_outer_l4_offset / set_swp_outer_l4_offset: u8 = dw(0x00, 31, 24);
        /// Software parser: outer L3 header offset.
        swp_outer_l3_offset / set_swp_outer_l3_offset: u8 = dw(0x00, 23, 16);
        /// Software parser: inner L4 header offset.
        swp_inner_l4_offset / set_swp_inner_l4_offset: u8 = dw(0x00, 15, 8);
        /// Software parser: inner L3 header offset.
        swp_inner_l3_offset / set_swp_inner_l3_offset: u8 = dw(0x00, 7, 0);
        /// Checksum offload flags ([`ETH_WQE_L3_CSUM`], [`ETH_WQE_L4_CSUM`]).
        cs_flags / set_cs_flags: u8 = dw(0x04, 31, 24);
        /// Software parser flags.
        swp_flags / set_swp_flags: u8 = dw(0x04, 23, 16);
        /// TCP segmentation: the MSS (0 no LSO).
        mss / set_mss: u16 = dw(0x04, 15, 0);
        /// Metadata for the NIC TX flow table.
        flow_table_metadata / set_flow_table_metadata: u32 = dw(0x08, 31, 0);
        /// Number of frame bytes inlined from [`ETH_SEG_INLINE_START`].
        inline_hdr_sz / set_inline_hdr_sz: u16 = dw(0x0C, 31, 16);
    }
}

/// Byte offset, inside the Ethernet segment, of the first inlined frame byte.
pub const ETH_SEG_INLINE_START: usize = 14;
/// The least a ConnectX-4 needs inlined (`min_wqe_inline_mode` L2): the Ethernet header and
/// one VLAN tag's room, 14 + 4 bytes, as mlx5e's `MLX5E_MIN_INLINE`.
pub const ETH_L2_INLINE_HEADER_SIZE: usize = 18;
/// `cs_flags`: compute the IPv4 header checksum.
pub const ETH_WQE_L3_CSUM: u8 = 1 << 6;
/// `cs_flags`: compute the TCP / UDP checksum.
pub const ETH_WQE_L4_CSUM: u8 = 1 << 7;

/// DS units the Ethernet segment takes with `inline_len` frame bytes inline (the first 2 fit
/// in the segment itself, the rest run on, padded to 16).
///
/// ```
/// use rnic_hw_regs::wqe::{eth_seg_ds, ETH_L2_INLINE_HEADER_SIZE};
///
/// assert_eq!(eth_seg_ds(0), 1);
/// assert_eq!(eth_seg_ds(2), 1);
/// assert_eq!(eth_seg_ds(ETH_L2_INLINE_HEADER_SIZE), 2);
/// assert_eq!(eth_seg_ds(19), 3);
/// ```
#[inline]
pub const fn eth_seg_ds(inline_len: usize) -> usize {
    (ETH_SEG_INLINE_START + inline_len).div_ceil(DS_SIZE)
}

/// DS units an inline segment with `len` data bytes takes: header and data, padded to 16.
///
/// ```
/// use rnic_hw_regs::wqe::inline_seg_ds;
///
/// assert_eq!(inline_seg_ds(0), 1);
/// assert_eq!(inline_seg_ds(12), 1); // 4-byte header + 12 bytes
/// assert_eq!(inline_seg_ds(13), 2);
/// ```
#[inline]
pub const fn inline_seg_ds(len: usize) -> usize {
    (4 + len).div_ceil(DS_SIZE)
}

prm_layout! {
    /// UD address vector (`mlx5_wqe_av` of rdma-core's `mlx5dv.h`, 48 bytes); it is the whole
    /// datagram segment (`mlx5_wqe_datagram_seg`) of a UD send WQE.
    pub struct WqeAv("", 48) {
        /// Q_Key of the destination QP (first word of the 8-byte `key`; the DC key overlays
        /// both words).
        qkey / set_qkey: u32 = dw(0x00, 31, 0);
        /// DC access key (overlays `qkey` and the reserved word after it).
        dc_key / set_dc_key: u64 = qw(0x00);
        /// Extended AV flag (`MLX5_EXTENDED_UD_AV`).
        ext / set_ext: bool = dw(0x08, 31, 31);
        /// Destination QP (or DCT) number.
        dqp_dct / set_dqp_dct: u32 = dw(0x08, 23, 0);
        /// Static rate.
        stat_rate / set_stat_rate: u8 = dw(0x0C, 31, 28);
        /// Service level.
        sl / set_sl: u8 = dw(0x0C, 27, 24);
        /// Force loopback.
        fl / set_fl: bool = dw(0x0C, 23, 23);
        /// Source path bits (InfiniBand).
        mlid / set_mlid: u8 = dw(0x0C, 22, 16);
        /// Remote LID (InfiniBand).
        rlid / set_rlid: u16 = dw(0x0C, 15, 0);
        /// Destination MAC (RoCE).
        rmac / set_rmac: [u8; 6] = bytes(0x14, 6);
        /// Traffic class.
        tclass / set_tclass: u8 = dw(0x18, 15, 8);
        /// Hop limit.
        hop_limit / set_hop_limit: u8 = dw(0x18, 7, 0);
        /// A GRH is present (always on RoCE).
        grh / set_grh: bool = dw(0x1C, 30, 30);
        /// Source GID index.
        sgid_index / set_sgid_index: u8 = dw(0x1C, 27, 20);
        /// Flow label.
        flow_label / set_flow_label: u32 = dw(0x1C, 19, 0);
        /// Destination GID.
        rgid / set_rgid: [u8; 16] = bytes(0x20, 16);
    }
}

/// The datagram segment of a UD send WQE is exactly an address vector.
///
/// ```
/// use rnic_hw_regs::wqe::{DatagramSeg, WqeAv, DS_SIZE};
/// use rnic_hw_regs::PrmLayout;
///
/// assert_eq!(DatagramSeg::SIZE, 3 * DS_SIZE); // the 3 DS of a UD send
/// let _: WqeAv = DatagramSeg::default();
/// ```
pub type DatagramSeg = WqeAv;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PrmLayout;
    use zerocopy::IntoBytes;

    #[test]
    fn sizes() {
        assert_eq!(CtrlSeg::SIZE, 16);
        assert_eq!(RaddrSeg::SIZE, 16);
        assert_eq!(AtomicSeg::SIZE, 16);
        assert_eq!(DataSeg::SIZE, 16);
        assert_eq!(InlineSegHeader::SIZE, 4);
        assert_eq!(WqeAv::SIZE, 48);
        assert_eq!((WQEBB, DS_SIZE, MAX_DS), (64, 16, 63));
        assert_eq!(MAX_DS as usize * DS_SIZE / WQEBB, MAX_WQEBBS - 1);
    }

    #[test]
    fn ctrl_segment_bytes_match_the_prm() {
        let mut c = CtrlSeg::default();
        c.set_opmod(0xAA);
        c.set_wqe_index(0xBEEF);
        c.set_send_opcode(SendOpcode::SendImm);
        c.set_qpn(0x00AB_CDEF);
        c.set_ds(63);
        c.set_signature(0x5A);
        c.set_fence_mode(FenceMode::SmallAndFence.raw());
        c.set_ce(CE_CQ_UPDATE);
        c.set_se(true);
        c.set_imm(0x0102_0304);
        assert_eq!(
            c.as_bytes(),
            &[
                0xAA, 0xBE, 0xEF, 0x0B, 0xAB, 0xCD, 0xEF, 63, 0x5A, 0, 0, 0x8A, 1, 2, 3, 4
            ]
        );
        assert_eq!(c.fm_ce_se(), 0x80 | 0x08 | 0x02);
        assert_eq!(c.send_opcode(), Ok(SendOpcode::SendImm));
        assert_eq!(c.doorbell_qword(), 0xAABE_EF0B_ABCD_EF3F);
        c.set_fence_mode(FenceMode::InitiatorSmall.raw());
        c.set_ce(0);
        c.set_se(false);
        assert_eq!(c.fm_ce_se(), 0x20);
        c.set_opcode(0x7F);
        assert!(c.send_opcode().is_err());
    }

    #[test]
    fn send_opcodes_match_the_prm() {
        let expect = [
            (0x00, SendOpcode::Nop),
            (0x01, SendOpcode::SendInval),
            (0x08, SendOpcode::RdmaWrite),
            (0x09, SendOpcode::RdmaWriteImm),
            (0x0A, SendOpcode::Send),
            (0x0B, SendOpcode::SendImm),
            (0x10, SendOpcode::RdmaRead),
            (0x11, SendOpcode::AtomicCs),
            (0x12, SendOpcode::AtomicFa),
            (0x14, SendOpcode::AtomicMaskedCs),
            (0x15, SendOpcode::AtomicMaskedFa),
            (0x18, SendOpcode::BindMw),
            (0x1B, SendOpcode::LocalInval),
            (0x25, SendOpcode::Umr),
        ];
        for (raw, op) in expect {
            assert_eq!(SendOpcode::try_from(raw), Ok(op));
        }
        assert_eq!(SendOpcode::ALL.len(), expect.len());
    }

    #[test]
    fn data_raddr_atomic_inline_segments() {
        let d = DataSeg::new(0x1122_3344_5566_7788, 4096, 0xABCD);
        assert_eq!(
            d.as_bytes(),
            &[
                0, 0, 0x10, 0, 0, 0, 0xAB, 0xCD, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88
            ]
        );
        let t = DataSeg::terminator();
        assert_eq!(
            t.as_bytes(),
            &[0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        assert!(t.is_terminator() && !d.is_terminator());

        let mut r = RaddrSeg::default();
        r.set_raddr(0x0102_0304_0506_0708);
        r.set_rkey(0xDEAD_BEEF);
        assert_eq!(
            &r.as_bytes()[..12],
            &[1, 2, 3, 4, 5, 6, 7, 8, 0xDE, 0xAD, 0xBE, 0xEF]
        );

        let mut a = AtomicSeg::default();
        a.set_swap_add(1);
        a.set_compare(2);
        assert_eq!((a.0[7], a.0[15]), (1, 2));

        let mut h = InlineSegHeader::default();
        h.set_inline(true);
        h.set_byte_count(60);
        assert_eq!(u32::from_be_bytes(h.0), INLINE_SEG_FLAG | 60);
        assert_eq!(
            (inline_seg_ds(0), inline_seg_ds(12), inline_seg_ds(13)),
            (1, 1, 2)
        );
        assert_eq!(
            (ds_to_wqebbs(4), ds_to_wqebbs(5), ds_to_wqebbs(63)),
            (1, 2, 16)
        );
    }

    #[test]
    fn address_vector_matches_mlx5dv() {
        let mut av = WqeAv::default();
        av.set_qkey(0x8001_0000);
        av.set_ext(true);
        av.set_dqp_dct(0x12_3456);
        av.set_stat_rate(0x3);
        av.set_sl(0x5);
        av.set_fl(true);
        av.set_mlid(0x7F);
        av.set_rlid(0xBEEF);
        av.set_rmac([0x02, 0, 0, 0, 0, 0x01]);
        av.set_tclass(0x60);
        av.set_hop_limit(64);
        av.set_grh(true);
        av.set_sgid_index(3);
        av.set_flow_label(0xABCDE);
        av.set_rgid([0xFE; 16]);
        let b = av.as_bytes();
        assert_eq!(&b[0..4], &[0x80, 0x01, 0, 0]);
        assert_eq!(&b[8..12], &[0x80, 0x12, 0x34, 0x56]);
        assert_eq!(&b[12..16], &[0x35, 0xFF, 0xBE, 0xEF]);
        assert_eq!(&b[0x14..0x1A], &[0x02, 0, 0, 0, 0, 0x01]);
        assert_eq!(&b[0x1A..0x1C], &[0x60, 64]);
        assert_eq!(
            u32::from_be_bytes([b[0x1C], b[0x1D], b[0x1E], b[0x1F]]),
            1 << 30 | 3 << 20 | 0xABCDE
        );
        assert_eq!(&b[0x20..0x30], &[0xFE; 16]);
        assert_eq!(av.dc_key() >> 32, 0x8001_0000);
    }
}

#[cfg(test)]
mod eth_seg_tests {
    use super::*;
    use zerocopy::IntoBytes;

    #[test]
    fn eth_seg_inline_header_size_and_start() {
        let mut e = EthSeg::default();
        e.set_inline_hdr_sz(ETH_L2_INLINE_HEADER_SIZE as u16);
        e.set_cs_flags(ETH_WQE_L3_CSUM | ETH_WQE_L4_CSUM);
        let b = e.as_bytes();
        assert_eq!(&b[12..14], &[0, 18]);
        assert_eq!(b[4], 0xC0);
        assert_eq!(ETH_SEG_INLINE_START, 14);
    }
}
