//! The InfiniBand Base Transport Header (12 bytes).

use super::{HeaderKind, Opcode, WireError, be16, be24, check_len, put24};

/// The BTH's fields (roce-v2.md section 2), by byte offset or range.
mod field {
    use crate::wire::Field;

    /// OpCode.
    pub(super) const OPCODE: usize = 0;
    /// SE, M, PadCnt and TVer.
    pub(super) const SE_M_PADCNT_TVER: usize = 1;
    /// P_Key.
    pub(super) const P_KEY: Field = 2..4;
    /// F, B and 6 reserved bits.
    pub(super) const F_B_RESV6: usize = 4;
    /// DestQP.
    pub(super) const DEST_QP: Field = 5..8;
    /// A and 7 reserved bits.
    pub(super) const A_RESV7: usize = 8;
    /// PSN.
    pub(super) const PSN: Field = 9..12;

    /// SE (solicited event) in [`SE_M_PADCNT_TVER`].
    pub(super) const SE: u8 = 0x80;
    /// M (migration request) in [`SE_M_PADCNT_TVER`].
    pub(super) const M: u8 = 0x40;
    /// PadCnt in [`SE_M_PADCNT_TVER`]: bits 5:4.
    pub(super) const PAD_CNT: u8 = 0x30;
    /// The shift of [`PAD_CNT`].
    pub(super) const PAD_CNT_SHIFT: u32 = 4;
    /// TVer in [`SE_M_PADCNT_TVER`]: bits 3:0.
    pub(super) const TVER: u8 = 0x0F;
    /// F (FECN) in [`F_B_RESV6`].
    pub(super) const F: u8 = 0x80;
    /// B (BECN) in [`F_B_RESV6`].
    pub(super) const B: u8 = 0x40;
    /// A (AckReq) in [`A_RESV7`].
    pub(super) const A: u8 = 0x80;
}

/// Length of the BTH.
pub(crate) const BTH_LEN: usize = field::PSN.end;

/// `mask` if `set`, else 0: one flag bit of a header byte.
#[inline]
const fn bit(set: bool, mask: u8) -> u8 {
    if set { mask } else { 0 }
}

/// A zero-copy view of a BTH.
///
/// ```
/// use rnic_emulator::wire::{BthHeader, Opcode};
///
/// // rxe's RC SEND_ONLY to QP 0x11, PSN 0x3A5B2C, P_Key 0xFFFF, AckReq set.
/// let bytes = [0x04, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x11, 0x80, 0x3A, 0x5B, 0x2C];
/// let bth = BthHeader::new_checked(&bytes[..]).unwrap();
/// assert_eq!(bth.opcode(), Ok(Opcode::RcSendOnly));
/// assert_eq!((bth.dest_qp(), bth.psn(), bth.pkey()), (0x11, 0x3A5B2C, 0xFFFF));
/// assert!(bth.ack_req() && !bth.solicited());
/// ```
#[derive(Debug, Clone)]
pub struct BthHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> BthHeader<T> {
    /// The header length in bytes.
    ///
    /// ```
    /// use rnic_emulator::wire::BthHeader;
    ///
    /// assert_eq!(BthHeader::<&[u8]>::LEN, 12);
    /// ```
    pub const LEN: usize = BTH_LEN;

    /// Wraps a buffer without checking its length; getters and setters panic if it is shorter
    /// than [`Self::LEN`]. Use [`Self::new_checked`] for untrusted input.
    ///
    /// ```
    /// use rnic_emulator::wire::{BthHeader, Opcode};
    ///
    /// let mut buf = [0u8; 12];
    /// let mut bth = BthHeader::new_unchecked(&mut buf[..]);
    /// bth.set_opcode(Opcode::RcAcknowledge);
    /// bth.set_psn(7);
    /// assert_eq!((buf[0], buf[11]), (0x11, 7));
    /// ```
    pub const fn new_unchecked(buffer: T) -> Self {
        BthHeader { buffer }
    }

    /// Wraps a buffer that holds at least [`Self::LEN`] bytes.
    ///
    /// ```
    /// use rnic_emulator::wire::{BthHeader, HeaderKind, WireError};
    ///
    /// let err = BthHeader::new_checked(&[0u8; 11][..]).unwrap_err();
    /// assert!(matches!(err, WireError::Truncated { header: HeaderKind::Bth, needed: 12, .. }));
    /// ```
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        check_len(buffer.as_ref(), BTH_LEN, HeaderKind::Bth)?;
        Ok(BthHeader { buffer })
    }

    /// Returns the underlying buffer.
    ///
    /// ```
    /// use rnic_emulator::wire::BthHeader;
    ///
    /// let bth = BthHeader::new_checked(vec![0u8; 12]).unwrap();
    /// assert_eq!(bth.into_inner().len(), 12);
    /// ```
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The raw opcode byte.
    ///
    /// ```
    /// use rnic_emulator::wire::BthHeader;
    ///
    /// let bytes = [0x15u8; 12]; // 0x15 is not a RoCE opcode
    /// let bth = BthHeader::new_checked(&bytes[..]).unwrap();
    /// assert_eq!(bth.opcode_raw(), 0x15);
    /// assert!(bth.opcode().is_err());
    /// ```
    pub fn opcode_raw(&self) -> u8 {
        self.buffer.as_ref()[field::OPCODE]
    }

    /// The opcode, or [`WireError::UnknownOpcode`].
    ///
    /// ```
    /// use rnic_emulator::wire::{BthHeader, Opcode, WireError};
    ///
    /// let mut bytes = [0u8; 12];
    /// bytes[0] = 0x64;
    /// assert_eq!(BthHeader::new_checked(&bytes[..]).unwrap().opcode(), Ok(Opcode::UdSendOnly));
    /// bytes[0] = 0x30;
    /// assert!(matches!(BthHeader::new_checked(&bytes[..]).unwrap().opcode(), Err(WireError::UnknownOpcode(0x30))));
    /// ```
    pub fn opcode(&self) -> Result<Opcode, WireError> {
        Opcode::try_from(self.opcode_raw())
    }

    /// SE: solicited event.
    pub fn solicited(&self) -> bool {
        self.buffer.as_ref()[field::SE_M_PADCNT_TVER] & field::SE != 0
    }

    /// M: migration request.
    pub fn mig_req(&self) -> bool {
        self.buffer.as_ref()[field::SE_M_PADCNT_TVER] & field::M != 0
    }

    /// PadCnt: pad bytes between payload and ICRC (0 to 3).
    pub fn pad_count(&self) -> u8 {
        (self.buffer.as_ref()[field::SE_M_PADCNT_TVER] & field::PAD_CNT) >> field::PAD_CNT_SHIFT
    }

    /// TVer: transport header version (must be 0).
    pub fn tver(&self) -> u8 {
        self.buffer.as_ref()[field::SE_M_PADCNT_TVER] & field::TVER
    }

    /// P_Key.
    pub fn pkey(&self) -> u16 {
        be16(self.buffer.as_ref(), field::P_KEY.start)
    }

    /// F: forward explicit congestion notification.
    pub fn fecn(&self) -> bool {
        self.buffer.as_ref()[field::F_B_RESV6] & field::F != 0
    }

    /// B: backward explicit congestion notification.
    pub fn becn(&self) -> bool {
        self.buffer.as_ref()[field::F_B_RESV6] & field::B != 0
    }

    /// Destination QP number (24 bits).
    pub fn dest_qp(&self) -> u32 {
        be24(self.buffer.as_ref(), field::DEST_QP.start)
    }

    /// A: acknowledge request.
    pub fn ack_req(&self) -> bool {
        self.buffer.as_ref()[field::A_RESV7] & field::A != 0
    }

    /// Packet sequence number (24 bits).
    pub fn psn(&self) -> u32 {
        be24(self.buffer.as_ref(), field::PSN.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> BthHeader<T> {
    /// Sets the opcode byte.
    pub fn set_opcode(&mut self, op: Opcode) {
        self.buffer.as_mut()[field::OPCODE] = op.as_u8();
    }

    /// Sets byte 1 from SE, M, PadCnt (low 2 bits used) and TVer (low 4 bits used).
    pub fn set_flags(&mut self, solicited: bool, mig_req: bool, pad_count: u8, tver: u8) {
        self.buffer.as_mut()[field::SE_M_PADCNT_TVER] = bit(solicited, field::SE)
            | bit(mig_req, field::M)
            | ((pad_count << field::PAD_CNT_SHIFT) & field::PAD_CNT)
            | (tver & field::TVER);
    }

    /// Sets the P_Key.
    pub fn set_pkey(&mut self, pkey: u16) {
        self.buffer.as_mut()[field::P_KEY].copy_from_slice(&pkey.to_be_bytes());
    }

    /// Sets byte 4 from FECN and BECN (reserved bits zero).
    pub fn set_congestion(&mut self, fecn: bool, becn: bool) {
        self.buffer.as_mut()[field::F_B_RESV6] = bit(fecn, field::F) | bit(becn, field::B);
    }

    /// Sets the destination QP (low 24 bits used).
    pub fn set_dest_qp(&mut self, qpn: u32) {
        put24(self.buffer.as_mut(), field::DEST_QP.start, qpn);
    }

    /// Sets byte 8 from AckReq (reserved bits zero).
    pub fn set_ack_req(&mut self, ack_req: bool) {
        self.buffer.as_mut()[field::A_RESV7] = bit(ack_req, field::A);
    }

    /// Sets the PSN (low 24 bits used).
    pub fn set_psn(&mut self, psn: u32) {
        put24(self.buffer.as_mut(), field::PSN.start, psn);
    }
}

/// A parsed BTH. Reserved bits are ignored on parse and sent as zero; TVer is always 0.
///
/// ```
/// use rnic_emulator::wire::{BthHeader, BthRepr, Opcode};
///
/// let mut repr = BthRepr::new(Opcode::RcRdmaWriteFirst, 0x11, 0x00AB_CDEF);
/// repr.ack_req = true;
/// let mut buf = [0u8; 12];
/// repr.emit(&mut BthHeader::new_unchecked(&mut buf[..]));
/// assert_eq!(buf[..4], [0x06, 0, 0xFF, 0xFF]); // opcode, flags, P_Key 0xFFFF
/// assert_eq!(buf[8..], [0x80, 0xAB, 0xCD, 0xEF]); // AckReq, PSN
/// assert_eq!(BthRepr::parse(&BthHeader::new_checked(&buf[..])?)?, repr);
/// # Ok::<(), rnic_emulator::wire::WireError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BthRepr {
    /// The opcode.
    pub opcode: Opcode,
    /// SE: solicited event.
    pub solicited: bool,
    /// M: migration request (rxe sends 0, Mellanox hardware often 1).
    pub mig_req: bool,
    /// PadCnt (0 to 3). [`super::PacketRepr::emit`] computes it from the payload length.
    pub pad_count: u8,
    /// P_Key (rxe sends 0xFFFF).
    pub pkey: u16,
    /// FECN.
    pub fecn: bool,
    /// BECN (set on CNPs).
    pub becn: bool,
    /// Destination QP (24 bits).
    pub dest_qp: u32,
    /// AckReq.
    pub ack_req: bool,
    /// PSN (24 bits).
    pub psn: u32,
}

impl BthRepr {
    /// A BTH with the default P_Key 0xFFFF and all flags clear.
    ///
    /// ```
    /// use rnic_emulator::wire::{BthRepr, Opcode};
    ///
    /// let b = BthRepr::new(Opcode::UdSendOnly, 0x1_000001, 0x1_000002);
    /// assert_eq!((b.dest_qp, b.psn), (1, 2)); // masked to 24 bits
    /// assert_eq!(b.pkey, 0xFFFF);
    /// ```
    pub const fn new(opcode: Opcode, dest_qp: u32, psn: u32) -> Self {
        BthRepr {
            opcode,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            pkey: 0xFFFF,
            fecn: false,
            becn: false,
            dest_qp: dest_qp & 0x00FF_FFFF,
            ack_req: false,
            psn: psn & 0x00FF_FFFF,
        }
    }

    /// Parses a BTH: the opcode must be known and TVer 0.
    pub fn parse<T: AsRef<[u8]>>(header: &BthHeader<T>) -> Result<Self, WireError> {
        let opcode = header.opcode()?;
        if header.tver() != 0 {
            return Err(WireError::BadTver(header.tver()));
        }
        Ok(BthRepr {
            opcode,
            solicited: header.solicited(),
            mig_req: header.mig_req(),
            pad_count: header.pad_count(),
            pkey: header.pkey(),
            fecn: header.fecn(),
            becn: header.becn(),
            dest_qp: header.dest_qp(),
            ack_req: header.ack_req(),
            psn: header.psn(),
        })
    }

    /// The header length in bytes (12).
    pub const fn buffer_len(&self) -> usize {
        BTH_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut BthHeader<T>) {
        header.set_opcode(self.opcode);
        header.set_flags(self.solicited, self.mig_req, self.pad_count, 0);
        header.set_pkey(self.pkey);
        header.set_congestion(self.fecn, self.becn);
        header.set_dest_qp(self.dest_qp);
        header.set_ack_req(self.ack_req);
        header.set_psn(self.psn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // BTH of roce-v2.md worked example (a): UC_SEND_ONLY, M=1, PadCnt=2, QP 211, PSN 13571856.
    const EXAMPLE: [u8; 12] = [
        0x24, 0x60, 0xff, 0xff, 0x00, 0x00, 0x00, 0xd3, 0x00, 0xcf, 0x17, 0x10,
    ];

    #[test]
    fn parse_and_emit() {
        let repr = BthRepr::parse(&BthHeader::new_checked(&EXAMPLE[..]).unwrap()).unwrap();
        assert_eq!(repr.opcode, Opcode::UcSendOnly);
        assert!(repr.mig_req && !repr.solicited && !repr.ack_req);
        assert_eq!(repr.pad_count, 2);
        assert_eq!(repr.pkey, 0xFFFF);
        assert_eq!(repr.dest_qp, 211);
        assert_eq!(repr.psn, 13_571_856);
        let mut out = [0u8; 12];
        repr.emit(&mut BthHeader::new_unchecked(&mut out[..]));
        assert_eq!(out, EXAMPLE);
    }

    #[test]
    fn errors() {
        assert_eq!(
            BthHeader::new_checked(&EXAMPLE[..11]).unwrap_err(),
            WireError::Truncated {
                header: HeaderKind::Bth,
                needed: 12,
                available: 11
            }
        );
        let mut bad = EXAMPLE;
        bad[1] |= 0x01;
        assert_eq!(
            BthRepr::parse(&BthHeader::new_unchecked(&bad[..])),
            Err(WireError::BadTver(1))
        );
        bad = EXAMPLE;
        bad[0] = 0x15;
        assert_eq!(
            BthRepr::parse(&BthHeader::new_unchecked(&bad[..])),
            Err(WireError::UnknownOpcode(0x15))
        );
    }
}
