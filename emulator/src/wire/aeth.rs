//! The ACK Extended Transport Header (4 bytes): syndrome and MSN.
//!
//! Syndrome (roce-v2.md section 2): bit 7 reserved; bits 6:5 type (00 ACK, 01 RNR NAK,
//! 11 NAK; 10 reserved); bits 4:0 the credit code, RNR timer code or NAK code.

use super::{HeaderKind, WireError, be24, put24};

/// The AETH's fields (roce-v2.md section 2), by byte offset or range, and the syndrome's bits.
mod field {
    use crate::wire::Field;

    /// Syndrome.
    pub(super) const SYNDROME: usize = 0;
    /// MSN.
    pub(super) const MSN: Field = 1..4;

    /// The reserved bit 7 of [`SYNDROME`].
    pub(super) const SYNDROME_RESV: u8 = 0x80;
    /// The shift of the syndrome's type, bits 6:5.
    pub(super) const SYNDROME_TYPE_SHIFT: u32 = 5;
    /// The syndrome's type once shifted down: 2 bits.
    pub(super) const SYNDROME_TYPE_MASK: u8 = 0x3;
    /// Syndrome type 00: ACK.
    pub(super) const TYPE_ACK: u8 = 0b00;
    /// Syndrome type 01: RNR NAK.
    pub(super) const TYPE_RNR_NAK: u8 = 0b01;
    /// Syndrome type 11: NAK (10 is reserved).
    pub(super) const TYPE_NAK: u8 = 0b11;
    /// The syndrome's value, bits 4:0: a credit code, RNR timer code or NAK code.
    pub(super) const SYNDROME_VALUE: u8 = 0x1F;
}

/// Length of the AETH.
pub(crate) const AETH_LEN: usize = field::MSN.end;

/// Credit code 0x1F: "invalid credit count", the code rxe always sends.
pub(crate) const CREDITS_INVALID: u8 = 0x1F;

/// Credit counts for credit codes 0 to 30.
const CREDIT_COUNTS: [u32; 31] = [
    0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
    2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
];

/// RNR timer codes 0 to 31 in microseconds (code 0 is 655.36 ms).
const RNR_TIMER_US: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840,
    5120, 7680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840, 245_760,
    327_680, 491_520,
];

/// A NAK code (syndrome type 11).
///
/// ```
/// use rnic_emulator::wire::{NakCode, Syndrome};
///
/// assert_eq!(NakCode::from_code(2), NakCode::RemoteAccessError);
/// assert_eq!(NakCode::from_code(9), NakCode::Reserved(9));
/// assert_eq!(Syndrome::Nak(NakCode::InvalidRequest).as_u8(), 0x61);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NakCode {
    /// 0: PSN sequence error.
    PsnSequenceError,
    /// 1: invalid request.
    InvalidRequest,
    /// 2: remote access error.
    RemoteAccessError,
    /// 3: remote operational error.
    RemoteOperationalError,
    /// 4: invalid RD request.
    InvalidRdRequest,
    /// 5 to 31: reserved codes (a completer treats them as a remote operational error).
    Reserved(u8),
}

impl NakCode {
    /// The 5-bit code.
    ///
    /// ```
    /// use rnic_emulator::wire::NakCode;
    ///
    /// assert_eq!(NakCode::PsnSequenceError.code(), 0);
    /// assert_eq!(NakCode::Reserved(0x25).code(), 0x05); // masked to 5 bits
    /// ```
    pub const fn code(self) -> u8 {
        match self {
            NakCode::PsnSequenceError => 0,
            NakCode::InvalidRequest => 1,
            NakCode::RemoteAccessError => 2,
            NakCode::RemoteOperationalError => 3,
            NakCode::InvalidRdRequest => 4,
            NakCode::Reserved(c) => c & field::SYNDROME_VALUE,
        }
    }

    /// The NAK code for a 5-bit value.
    ///
    /// ```
    /// use rnic_emulator::wire::NakCode;
    ///
    /// assert_eq!(NakCode::from_code(3), NakCode::RemoteOperationalError);
    /// assert_eq!(NakCode::from_code(3 | 0x20), NakCode::RemoteOperationalError); // high bits ignored
    /// ```
    pub const fn from_code(code: u8) -> Self {
        match code & field::SYNDROME_VALUE {
            0 => NakCode::PsnSequenceError,
            1 => NakCode::InvalidRequest,
            2 => NakCode::RemoteAccessError,
            3 => NakCode::RemoteOperationalError,
            4 => NakCode::InvalidRdRequest,
            c => NakCode::Reserved(c),
        }
    }
}

/// A decoded AETH syndrome.
///
/// ```
/// use rnic_emulator::wire::{NakCode, Syndrome};
///
/// assert_eq!(Syndrome::from_u8(0x1F), Ok(Syndrome::ACK_NO_CREDITS));
/// assert_eq!(Syndrome::from_u8(0x2E), Ok(Syndrome::RnrNak { timer: 14 }));
/// assert_eq!(Syndrome::from_u8(0x60), Ok(Syndrome::Nak(NakCode::PsnSequenceError)));
/// assert!(Syndrome::from_u8(0x40).is_err()); // type 10 is reserved
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// ACK with a credit code (0 to 30, or 31 = invalid credit count).
    Ack {
        /// The 5-bit credit code.
        credit_code: u8,
    },
    /// RNR NAK with a timer code (0 to 31).
    RnrNak {
        /// The 5-bit RNR timer code.
        timer: u8,
    },
    /// NAK.
    Nak(NakCode),
}

impl Syndrome {
    /// The ACK rxe sends: credit code 0x1F ("invalid credit count"), syndrome byte 0x1F.
    ///
    /// ```
    /// use rnic_emulator::wire::Syndrome;
    ///
    /// assert_eq!(Syndrome::ACK_NO_CREDITS.as_u8(), 0x1F);
    /// assert_eq!(Syndrome::ACK_NO_CREDITS.credit_count(), None);
    /// ```
    pub const ACK_NO_CREDITS: Syndrome = Syndrome::Ack {
        credit_code: CREDITS_INVALID,
    };

    /// Decodes a syndrome byte, or [`WireError::ReservedSyndrome`] when bit 7 is set or the
    /// type is the reserved 10.
    ///
    /// ```
    /// use rnic_emulator::wire::{Syndrome, WireError};
    ///
    /// assert_eq!(Syndrome::from_u8(0x00), Ok(Syndrome::Ack { credit_code: 0 }));
    /// assert_eq!(Syndrome::from_u8(0x80), Err(WireError::ReservedSyndrome(0x80)));
    /// ```
    pub const fn from_u8(byte: u8) -> Result<Self, WireError> {
        if byte & field::SYNDROME_RESV != 0 {
            return Err(WireError::ReservedSyndrome(byte));
        }
        let value = byte & field::SYNDROME_VALUE;
        match (byte >> field::SYNDROME_TYPE_SHIFT) & field::SYNDROME_TYPE_MASK {
            field::TYPE_ACK => Ok(Syndrome::Ack { credit_code: value }),
            field::TYPE_RNR_NAK => Ok(Syndrome::RnrNak { timer: value }),
            field::TYPE_NAK => Ok(Syndrome::Nak(NakCode::from_code(value))),
            _ => Err(WireError::ReservedSyndrome(byte)),
        }
    }

    /// The syndrome byte (values are masked to 5 bits).
    ///
    /// ```
    /// use rnic_emulator::wire::Syndrome;
    ///
    /// assert_eq!(Syndrome::RnrNak { timer: 1 }.as_u8(), 0x21);
    /// assert_eq!(Syndrome::Ack { credit_code: 3 }.as_u8(), 0x03);
    /// ```
    pub const fn as_u8(self) -> u8 {
        match self {
            Syndrome::Ack { credit_code } => {
                (field::TYPE_ACK << field::SYNDROME_TYPE_SHIFT)
                    | (credit_code & field::SYNDROME_VALUE)
            }
            Syndrome::RnrNak { timer } => {
                (field::TYPE_RNR_NAK << field::SYNDROME_TYPE_SHIFT)
                    | (timer & field::SYNDROME_VALUE)
            }
            Syndrome::Nak(code) => (field::TYPE_NAK << field::SYNDROME_TYPE_SHIFT) | code.code(),
        }
    }

    /// For an ACK, the number of credits its code stands for; `None` for code 31 ("invalid",
    /// no end-to-end flow control) and for NAKs.
    ///
    /// ```
    /// use rnic_emulator::wire::Syndrome;
    ///
    /// assert_eq!(Syndrome::Ack { credit_code: 0 }.credit_count(), Some(0));
    /// assert_eq!(Syndrome::Ack { credit_code: 31 }.credit_count(), None); // "invalid"
    /// assert_eq!(Syndrome::RnrNak { timer: 0 }.credit_count(), None);
    /// ```
    pub const fn credit_count(self) -> Option<u32> {
        match self {
            Syndrome::Ack { credit_code } if (credit_code as usize) < CREDIT_COUNTS.len() => {
                Some(CREDIT_COUNTS[credit_code as usize])
            }
            _ => None,
        }
    }

    /// For an RNR NAK, the time to wait before retrying, in microseconds.
    ///
    /// ```
    /// use rnic_emulator::wire::Syndrome;
    ///
    /// assert_eq!(Syndrome::RnrNak { timer: 1 }.rnr_timer_us(), Some(10));
    /// assert_eq!(Syndrome::RnrNak { timer: 0 }.rnr_timer_us(), Some(655_360)); // the longest
    /// assert_eq!(Syndrome::ACK_NO_CREDITS.rnr_timer_us(), None);
    /// ```
    pub const fn rnr_timer_us(self) -> Option<u32> {
        match self {
            Syndrome::RnrNak { timer } => {
                Some(RNR_TIMER_US[(timer & field::SYNDROME_VALUE) as usize])
            }
            _ => None,
        }
    }

    /// Is an ACK (not an RNR NAK or NAK).
    ///
    /// ```
    /// use rnic_emulator::wire::{NakCode, Syndrome};
    ///
    /// assert!(Syndrome::ACK_NO_CREDITS.is_ack());
    /// assert!(!Syndrome::Nak(NakCode::InvalidRequest).is_ack());
    /// ```
    pub const fn is_ack(self) -> bool {
        matches!(self, Syndrome::Ack { .. })
    }
}

header_view!(
    /// A zero-copy view of an AETH: Syndrome(1), MSN(3).
    ///
    /// ```
    /// use rnic_emulator::wire::{AethHeader, Syndrome};
    ///
    /// let h = AethHeader::new_checked(&[0x1F, 0, 0, 7][..]).unwrap();
    /// assert_eq!((h.syndrome_raw(), h.msn()), (0x1F, 7));
    /// assert_eq!(h.syndrome(), Ok(Syndrome::ACK_NO_CREDITS));
    /// ```
    AethHeader,
    AETH_LEN,
    HeaderKind::Aeth
);

impl<T: AsRef<[u8]>> AethHeader<T> {
    /// The raw syndrome byte.
    pub fn syndrome_raw(&self) -> u8 {
        self.buffer.as_ref()[field::SYNDROME]
    }

    /// The decoded syndrome.
    pub fn syndrome(&self) -> Result<Syndrome, WireError> {
        Syndrome::from_u8(self.syndrome_raw())
    }

    /// Message sequence number (24 bits).
    pub fn msn(&self) -> u32 {
        be24(self.buffer.as_ref(), field::MSN.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> AethHeader<T> {
    /// Sets the syndrome.
    pub fn set_syndrome(&mut self, syndrome: Syndrome) {
        self.buffer.as_mut()[field::SYNDROME] = syndrome.as_u8();
    }

    /// Sets the MSN (low 24 bits).
    pub fn set_msn(&mut self, msn: u32) {
        put24(self.buffer.as_mut(), field::MSN.start, msn);
    }
}

/// A parsed AETH.
///
/// ```
/// use rnic_emulator::wire::{AethHeader, AethRepr, Syndrome};
///
/// let repr = AethRepr { syndrome: Syndrome::RnrNak { timer: 5 }, msn: 0x10 };
/// let mut buf = [0u8; 4];
/// repr.emit(&mut AethHeader::new_unchecked(&mut buf[..]));
/// assert_eq!(buf, [0x25, 0, 0, 0x10]);
/// assert_eq!(AethRepr::parse(&AethHeader::new_checked(&buf[..])?)?, repr);
/// # Ok::<(), rnic_emulator::wire::WireError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AethRepr {
    /// The syndrome.
    pub syndrome: Syndrome,
    /// Message sequence number (24 bits).
    pub msn: u32,
}

impl AethRepr {
    /// Parses an AETH; a reserved syndrome is [`WireError::ReservedSyndrome`].
    pub fn parse<T: AsRef<[u8]>>(header: &AethHeader<T>) -> Result<Self, WireError> {
        Ok(AethRepr {
            syndrome: header.syndrome()?,
            msn: header.msn(),
        })
    }

    /// The header length in bytes (4).
    pub const fn buffer_len(&self) -> usize {
        AETH_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut AethHeader<T>) {
        header.set_syndrome(self.syndrome);
        header.set_msn(self.msn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syndromes() {
        assert_eq!(Syndrome::from_u8(0x1F), Ok(Syndrome::ACK_NO_CREDITS));
        assert_eq!(Syndrome::ACK_NO_CREDITS.credit_count(), None);
        assert_eq!(Syndrome::from_u8(0x00).unwrap().credit_count(), Some(0));
        assert_eq!(Syndrome::from_u8(0x05).unwrap().credit_count(), Some(6));
        assert_eq!(Syndrome::from_u8(0x1E).unwrap().credit_count(), Some(32768));
        let rnr = Syndrome::from_u8(0x20 | 12).unwrap();
        assert_eq!(rnr, Syndrome::RnrNak { timer: 12 });
        assert_eq!(rnr.rnr_timer_us(), Some(640));
        assert_eq!(Syndrome::RnrNak { timer: 0 }.rnr_timer_us(), Some(655_360));
        assert_eq!(
            Syndrome::from_u8(0x60),
            Ok(Syndrome::Nak(NakCode::PsnSequenceError))
        );
        assert_eq!(
            Syndrome::from_u8(0x61),
            Ok(Syndrome::Nak(NakCode::InvalidRequest))
        );
        assert_eq!(
            Syndrome::from_u8(0x62),
            Ok(Syndrome::Nak(NakCode::RemoteAccessError))
        );
        assert_eq!(
            Syndrome::from_u8(0x63),
            Ok(Syndrome::Nak(NakCode::RemoteOperationalError))
        );
        assert_eq!(
            Syndrome::from_u8(0x64),
            Ok(Syndrome::Nak(NakCode::InvalidRdRequest))
        );
        assert_eq!(
            Syndrome::from_u8(0x7F),
            Ok(Syndrome::Nak(NakCode::Reserved(31)))
        );
        assert_eq!(
            Syndrome::from_u8(0x40),
            Err(WireError::ReservedSyndrome(0x40))
        );
        assert_eq!(
            Syndrome::from_u8(0x9F),
            Err(WireError::ReservedSyndrome(0x9F))
        );
        for b in 0..=255u8 {
            if let Ok(s) = Syndrome::from_u8(b) {
                assert_eq!(s.as_u8(), b);
            }
        }
    }

    #[test]
    fn round_trip() {
        let repr = AethRepr {
            syndrome: Syndrome::ACK_NO_CREDITS,
            msn: 0x00_0102,
        };
        let mut buf = [0u8; 4];
        repr.emit(&mut AethHeader::new_unchecked(&mut buf[..]));
        assert_eq!(buf, [0x1F, 0x00, 0x01, 0x02]);
        assert_eq!(
            AethRepr::parse(&AethHeader::new_checked(&buf[..]).unwrap()),
            Ok(repr)
        );
        assert!(AethHeader::new_checked(&buf[..3]).is_err());
    }
}
