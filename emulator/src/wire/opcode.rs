//! The BTH opcode table (roce-v2.md section 4): RC, UC (0x20 + the RC SEND/WRITE codes), UD
//! (0x64, 0x65) and the RoCE v2 CNP (0x81), with which extension headers each opcode carries
//! and what payload it may have.

use super::WireError;

/// The transport service an opcode belongs to (BTH opcode bits 7:5).
///
/// ```
/// use rnic_emulator::wire::{Opcode, Transport};
///
/// assert_eq!(Opcode::UcSendOnly.transport(), Transport::Uc);
/// assert_eq!(Opcode::Cnp.transport(), Transport::Cnp);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Reliable Connected (000).
    Rc,
    /// Unreliable Connected (001).
    Uc,
    /// Unreliable Datagram (011).
    Ud,
    /// RoCE v2 congestion notification (100).
    Cnp,
}

/// What an opcode does, independent of transport and position in the message.
///
/// ```
/// use rnic_emulator::wire::{Opcode, Operation};
///
/// assert_eq!(Opcode::RcRdmaWriteMiddle.operation(), Operation::RdmaWrite);
/// assert_eq!(Opcode::UdSendOnlyWithImm.operation(), Operation::SendWithImm);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// SEND.
    Send,
    /// SEND with immediate data.
    SendWithImm,
    /// SEND with invalidate.
    SendWithInv,
    /// RDMA WRITE.
    RdmaWrite,
    /// RDMA WRITE with immediate data.
    RdmaWriteWithImm,
    /// RDMA READ request.
    RdmaReadRequest,
    /// RDMA READ response.
    RdmaReadResponse,
    /// ACK, NAK or RNR NAK.
    Acknowledge,
    /// ATOMIC ACKNOWLEDGE.
    AtomicAcknowledge,
    /// Atomic compare-and-swap.
    CompareSwap,
    /// Atomic fetch-and-add.
    FetchAdd,
    /// Congestion notification packet.
    Cnp,
}

impl Operation {
    /// Whether its packets carry an ImmDt header (with [`Opcode::has_imm`]'s rule).
    const fn carries_imm(self) -> bool {
        matches!(self, Operation::SendWithImm | Operation::RdmaWriteWithImm)
    }

    /// Whether its packets carry an IETH (with [`Opcode::has_ieth`]'s rule).
    const fn carries_ieth(self) -> bool {
        matches!(self, Operation::SendWithInv)
    }
}

/// Where a packet sits in its message.
///
/// ```
/// use rnic_emulator::wire::{Opcode, Position};
///
/// assert_eq!(Opcode::RcSendFirst.position(), Position::First);
/// assert_eq!(Opcode::RcAcknowledge.position(), Position::Only);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Position {
    /// First packet of a multi-packet message.
    First,
    /// Middle packet of a multi-packet message.
    Middle,
    /// Last packet of a multi-packet message.
    Last,
    /// The only packet of a message (also every ACK, READ request, atomic and CNP).
    Only,
}

/// How much payload an opcode may carry.
///
/// ```
/// use rnic_emulator::wire::{Opcode, PayloadRule};
///
/// assert_eq!(Opcode::RcSendMiddle.payload_rule(), PayloadRule::Pmtu);
/// assert_eq!(Opcode::RcAcknowledge.payload_rule(), PayloadRule::None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PayloadRule {
    /// No payload at all.
    None,
    /// Exactly one path MTU (FIRST and MIDDLE packets).
    Pmtu,
    /// 1 to PMTU bytes (LAST packets).
    OneToPmtu,
    /// 0 to PMTU bytes (ONLY packets).
    ZeroToPmtu,
}

/// A BTH opcode from the RoCE v2 opcode table. The discriminant is the byte on the wire.
///
/// ```
/// use rnic_emulator::wire::Opcode;
///
/// let op = Opcode::from_u8(0x0C).unwrap();
/// assert_eq!(op, Opcode::RcRdmaReadRequest);
/// assert!(op.has_reth() && !op.has_aeth());
/// assert_eq!(op.ext_header_len(), 16);
/// assert_eq!(Opcode::from_u8(0x15), None); // not in the table
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[allow(missing_docs)] // the names are the table of roce-v2.md section 4
pub enum Opcode {
    RcSendFirst = 0x00,
    RcSendMiddle = 0x01,
    RcSendLast = 0x02,
    RcSendLastWithImm = 0x03,
    RcSendOnly = 0x04,
    RcSendOnlyWithImm = 0x05,
    RcRdmaWriteFirst = 0x06,
    RcRdmaWriteMiddle = 0x07,
    RcRdmaWriteLast = 0x08,
    RcRdmaWriteLastWithImm = 0x09,
    RcRdmaWriteOnly = 0x0A,
    RcRdmaWriteOnlyWithImm = 0x0B,
    RcRdmaReadRequest = 0x0C,
    RcRdmaReadResponseFirst = 0x0D,
    RcRdmaReadResponseMiddle = 0x0E,
    RcRdmaReadResponseLast = 0x0F,
    RcRdmaReadResponseOnly = 0x10,
    RcAcknowledge = 0x11,
    RcAtomicAcknowledge = 0x12,
    RcCompareSwap = 0x13,
    RcFetchAdd = 0x14,
    RcSendLastWithInv = 0x16,
    RcSendOnlyWithInv = 0x17,
    UcSendFirst = 0x20,
    UcSendMiddle = 0x21,
    UcSendLast = 0x22,
    UcSendLastWithImm = 0x23,
    UcSendOnly = 0x24,
    UcSendOnlyWithImm = 0x25,
    UcRdmaWriteFirst = 0x26,
    UcRdmaWriteMiddle = 0x27,
    UcRdmaWriteLast = 0x28,
    UcRdmaWriteLastWithImm = 0x29,
    UcRdmaWriteOnly = 0x2A,
    UcRdmaWriteOnlyWithImm = 0x2B,
    UdSendOnly = 0x64,
    UdSendOnlyWithImm = 0x65,
    Cnp = 0x81,
}

impl Opcode {
    /// Every opcode in the table, in wire order.
    ///
    /// ```
    /// use rnic_emulator::wire::Opcode;
    ///
    /// assert!(Opcode::ALL.iter().all(|op| Opcode::from_u8(op.as_u8()) == Some(*op)));
    /// ```
    pub const ALL: [Opcode; 38] = [
        Opcode::RcSendFirst,
        Opcode::RcSendMiddle,
        Opcode::RcSendLast,
        Opcode::RcSendLastWithImm,
        Opcode::RcSendOnly,
        Opcode::RcSendOnlyWithImm,
        Opcode::RcRdmaWriteFirst,
        Opcode::RcRdmaWriteMiddle,
        Opcode::RcRdmaWriteLast,
        Opcode::RcRdmaWriteLastWithImm,
        Opcode::RcRdmaWriteOnly,
        Opcode::RcRdmaWriteOnlyWithImm,
        Opcode::RcRdmaReadRequest,
        Opcode::RcRdmaReadResponseFirst,
        Opcode::RcRdmaReadResponseMiddle,
        Opcode::RcRdmaReadResponseLast,
        Opcode::RcRdmaReadResponseOnly,
        Opcode::RcAcknowledge,
        Opcode::RcAtomicAcknowledge,
        Opcode::RcCompareSwap,
        Opcode::RcFetchAdd,
        Opcode::RcSendLastWithInv,
        Opcode::RcSendOnlyWithInv,
        Opcode::UcSendFirst,
        Opcode::UcSendMiddle,
        Opcode::UcSendLast,
        Opcode::UcSendLastWithImm,
        Opcode::UcSendOnly,
        Opcode::UcSendOnlyWithImm,
        Opcode::UcRdmaWriteFirst,
        Opcode::UcRdmaWriteMiddle,
        Opcode::UcRdmaWriteLast,
        Opcode::UcRdmaWriteLastWithImm,
        Opcode::UcRdmaWriteOnly,
        Opcode::UcRdmaWriteOnlyWithImm,
        Opcode::UdSendOnly,
        Opcode::UdSendOnlyWithImm,
        Opcode::Cnp,
    ];

    /// The opcode for a wire byte, or `None` when the byte is not in the table.
    ///
    /// ```
    /// use rnic_emulator::wire::Opcode;
    ///
    /// assert_eq!(Opcode::from_u8(0x81), Some(Opcode::Cnp));
    /// assert_eq!(Opcode::from_u8(0xFF), None);
    /// ```
    pub const fn from_u8(byte: u8) -> Option<Opcode> {
        LOOKUP[byte as usize]
    }

    /// The byte on the wire.
    ///
    /// ```
    /// use rnic_emulator::wire::Opcode;
    ///
    /// assert_eq!(Opcode::UdSendOnly.as_u8(), 0x64);
    /// ```
    pub const fn as_u8(self) -> u8 {
        self as u8
    }

    /// The transport service (BTH opcode bits 7:5).
    ///
    /// ```
    /// use rnic_emulator::wire::{Opcode, Transport};
    ///
    /// assert_eq!(Opcode::RcFetchAdd.transport(), Transport::Rc);
    /// assert_eq!(Opcode::UdSendOnly.transport(), Transport::Ud);
    /// ```
    pub const fn transport(self) -> Transport {
        match self.as_u8() >> 5 {
            0 => Transport::Rc,
            1 => Transport::Uc,
            3 => Transport::Ud,
            _ => Transport::Cnp,
        }
    }

    /// The operation, independent of transport and position.
    ///
    /// ```
    /// use rnic_emulator::wire::{Opcode, Operation};
    ///
    /// assert_eq!(Opcode::RcRdmaReadResponseLast.operation(), Operation::RdmaReadResponse);
    /// ```
    pub const fn operation(self) -> Operation {
        PROPS[self as usize].operation
    }

    /// [`Opcode::operation`], worked out (for [`PROPS`]).
    const fn operation_of(self) -> Operation {
        if matches!(self, Opcode::Cnp) {
            return Operation::Cnp;
        }
        match self.as_u8() & 0x1F {
            0x00..=0x02 | 0x04 => Operation::Send,
            0x03 | 0x05 => Operation::SendWithImm,
            0x06..=0x08 | 0x0A => Operation::RdmaWrite,
            0x09 | 0x0B => Operation::RdmaWriteWithImm,
            0x0C => Operation::RdmaReadRequest,
            0x0D..=0x10 => Operation::RdmaReadResponse,
            0x11 => Operation::Acknowledge,
            0x12 => Operation::AtomicAcknowledge,
            0x13 => Operation::CompareSwap,
            0x14 => Operation::FetchAdd,
            _ => Operation::SendWithInv,
        }
    }

    /// First, middle, last or only packet of its message.
    ///
    /// ```
    /// use rnic_emulator::wire::{Opcode, Position};
    ///
    /// assert_eq!(Opcode::UcRdmaWriteLastWithImm.position(), Position::Last);
    /// ```
    pub const fn position(self) -> Position {
        PROPS[self as usize].position
    }

    /// [`Opcode::position`], worked out (for [`PROPS`]).
    const fn position_of(self) -> Position {
        if matches!(self, Opcode::Cnp) {
            return Position::Only;
        }
        match self.as_u8() & 0x1F {
            0x00 | 0x06 | 0x0D => Position::First,
            0x01 | 0x07 | 0x0E => Position::Middle,
            0x02 | 0x03 | 0x08 | 0x09 | 0x0F | 0x16 => Position::Last,
            _ => Position::Only,
        }
    }

    /// Carries a DETH (UD).
    ///
    /// ```
    /// use rnic_emulator::wire::Opcode;
    ///
    /// assert!(Opcode::UdSendOnly.has_deth());
    /// assert!(!Opcode::RcSendOnly.has_deth());
    /// ```
    pub const fn has_deth(self) -> bool {
        matches!(self.transport(), Transport::Ud)
    }

    /// Carries a RETH (WRITE FIRST / ONLY, READ request).
    ///
    /// ```
    /// use rnic_emulator::wire::Opcode;
    ///
    /// assert!(Opcode::RcRdmaWriteFirst.has_reth());
    /// assert!(!Opcode::RcRdmaWriteMiddle.has_reth()); // only the first packet carries it
    /// ```
    pub const fn has_reth(self) -> bool {
        matches!(
            self,
            Opcode::RcRdmaWriteFirst
                | Opcode::RcRdmaWriteOnly
                | Opcode::RcRdmaWriteOnlyWithImm
                | Opcode::RcRdmaReadRequest
                | Opcode::UcRdmaWriteFirst
                | Opcode::UcRdmaWriteOnly
                | Opcode::UcRdmaWriteOnlyWithImm
        )
    }

    /// Carries an AtomicETH (COMPARE_SWAP, FETCH_ADD).
    ///
    /// ```
    /// use rnic_emulator::wire::Opcode;
    ///
    /// assert!(Opcode::RcCompareSwap.has_atomic_eth());
    /// assert!(!Opcode::RcAtomicAcknowledge.has_atomic_eth());
    /// ```
    pub const fn has_atomic_eth(self) -> bool {
        matches!(self, Opcode::RcCompareSwap | Opcode::RcFetchAdd)
    }

    /// Carries an AETH (ACK, ATOMIC ACK, READ response FIRST / LAST / ONLY).
    ///
    /// ```
    /// use rnic_emulator::wire::Opcode;
    ///
    /// assert!(Opcode::RcRdmaReadResponseFirst.has_aeth());
    /// assert!(!Opcode::RcRdmaReadResponseMiddle.has_aeth());
    /// ```
    pub const fn has_aeth(self) -> bool {
        matches!(
            self,
            Opcode::RcRdmaReadResponseFirst
                | Opcode::RcRdmaReadResponseLast
                | Opcode::RcRdmaReadResponseOnly
                | Opcode::RcAcknowledge
                | Opcode::RcAtomicAcknowledge
        )
    }

    /// Carries an AtomicAckETH (ATOMIC ACKNOWLEDGE).
    ///
    /// ```
    /// use rnic_emulator::wire::Opcode;
    ///
    /// assert!(Opcode::RcAtomicAcknowledge.has_atomic_ack_eth());
    /// ```
    pub const fn has_atomic_ack_eth(self) -> bool {
        matches!(self, Opcode::RcAtomicAcknowledge)
    }

    /// Carries an ImmDt (the `*_WITH_IMMEDIATE` opcodes).
    ///
    /// ```
    /// use rnic_emulator::wire::Opcode;
    ///
    /// assert!(Opcode::RcRdmaWriteLastWithImm.has_imm());
    /// assert!(!Opcode::RcRdmaWriteFirst.has_imm());
    /// ```
    pub const fn has_imm(self) -> bool {
        self.operation().carries_imm()
    }

    /// Carries an IETH (SEND_*_WITH_INVALIDATE).
    ///
    /// ```
    /// use rnic_emulator::wire::Opcode;
    ///
    /// assert!(Opcode::RcSendOnlyWithInv.has_ieth());
    /// ```
    pub const fn has_ieth(self) -> bool {
        self.operation().carries_ieth()
    }

    /// Is the RoCE v2 CNP (carries 16 reserved bytes).
    ///
    /// ```
    /// use rnic_emulator::wire::Opcode;
    ///
    /// assert!(Opcode::Cnp.is_cnp());
    /// assert!(!Opcode::RcAcknowledge.is_cnp());
    /// ```
    pub const fn is_cnp(self) -> bool {
        matches!(self, Opcode::Cnp)
    }

    /// Bytes of extension headers between the BTH and the payload.
    ///
    /// ```
    /// use rnic_emulator::wire::Opcode;
    ///
    /// assert_eq!(Opcode::RcSendOnly.ext_header_len(), 0);
    /// assert_eq!(Opcode::UdSendOnlyWithImm.ext_header_len(), 8 + 4); // DETH + ImmDt
    /// assert_eq!(Opcode::RcCompareSwap.ext_header_len(), 28);
    /// ```
    pub const fn ext_header_len(self) -> usize {
        PROPS[self as usize].ext_header_len as usize
    }

    /// [`Opcode::ext_header_len`], worked out (for [`PROPS`]).
    const fn ext_header_len_of(self) -> usize {
        let mut len = 0;
        if self.has_deth() {
            len += super::deth::DETH_LEN;
        }
        if self.has_reth() {
            len += super::reth::RETH_LEN;
        }
        if self.has_atomic_eth() {
            len += super::atomic::ATOMIC_ETH_LEN;
        }
        if self.has_aeth() {
            len += super::aeth::AETH_LEN;
        }
        if self.has_atomic_ack_eth() {
            len += super::atomic::ATOMIC_ACK_ETH_LEN;
        }
        // The operation as worked out, not from `PROPS`, which this builds.
        if self.operation_of().carries_imm() {
            len += super::imm::IMM_DT_LEN;
        }
        if self.operation_of().carries_ieth() {
            len += super::ieth::IETH_LEN;
        }
        if self.is_cnp() {
            len += super::cnp::CNP_LEN;
        }
        len
    }

    /// How much payload this opcode may carry.
    ///
    /// ```
    /// use rnic_emulator::wire::{Opcode, PayloadRule};
    ///
    /// assert_eq!(Opcode::RcSendOnly.payload_rule(), PayloadRule::ZeroToPmtu);
    /// assert_eq!(Opcode::RcSendLast.payload_rule(), PayloadRule::OneToPmtu);
    /// assert_eq!(Opcode::RcRdmaReadRequest.payload_rule(), PayloadRule::None);
    /// ```
    pub const fn payload_rule(self) -> PayloadRule {
        PROPS[self as usize].payload_rule
    }

    /// [`Opcode::payload_rule`], worked out (for [`PROPS`]).
    const fn payload_rule_of(self) -> PayloadRule {
        match self.operation_of() {
            Operation::RdmaReadRequest
            | Operation::Acknowledge
            | Operation::AtomicAcknowledge
            | Operation::CompareSwap
            | Operation::FetchAdd
            | Operation::Cnp => PayloadRule::None,
            _ => match self.position_of() {
                Position::First | Position::Middle => PayloadRule::Pmtu,
                Position::Last => PayloadRule::OneToPmtu,
                Position::Only => PayloadRule::ZeroToPmtu,
            },
        }
    }

    /// May carry payload bytes.
    ///
    /// ```
    /// use rnic_emulator::wire::Opcode;
    ///
    /// assert!(Opcode::RcRdmaReadResponseOnly.has_payload());
    /// assert!(!Opcode::RcAcknowledge.has_payload());
    /// ```
    pub const fn has_payload(self) -> bool {
        !matches!(self.payload_rule(), PayloadRule::None)
    }

    /// Sent by a requester (SEND, WRITE, READ request, atomics).
    ///
    /// ```
    /// use rnic_emulator::wire::Opcode;
    ///
    /// assert!(Opcode::RcRdmaReadRequest.is_request());
    /// assert!(!Opcode::RcRdmaReadResponseFirst.is_request());
    /// ```
    pub const fn is_request(self) -> bool {
        !self.is_response() && !self.is_cnp()
    }

    /// Sent by a responder (READ responses, ACK / NAK, ATOMIC ACK).
    ///
    /// ```
    /// use rnic_emulator::wire::Opcode;
    ///
    /// assert!(Opcode::RcAtomicAcknowledge.is_response());
    /// assert!(!Opcode::UdSendOnly.is_response());
    /// ```
    pub const fn is_response(self) -> bool {
        matches!(
            self.operation(),
            Operation::RdmaReadResponse | Operation::Acknowledge | Operation::AtomicAcknowledge
        )
    }
}

/// What the packet paths ask of an opcode, worked out once per opcode at compile time: the
/// matches behind them ran several times for every packet built and parsed.
#[derive(Clone, Copy)]
struct Props {
    operation: Operation,
    position: Position,
    payload_rule: PayloadRule,
    ext_header_len: u8,
}

/// [`Props`] by opcode byte (bytes that are no opcode keep a placeholder no `Opcode` reads).
const PROPS: [Props; 256] = {
    let mut table = [Props {
        operation: Operation::Cnp,
        position: Position::Only,
        payload_rule: PayloadRule::None,
        ext_header_len: 0,
    }; 256];
    let mut i = 0;
    while i < Opcode::ALL.len() {
        let op = Opcode::ALL[i];
        table[op.as_u8() as usize] = Props {
            operation: op.operation_of(),
            position: op.position_of(),
            payload_rule: op.payload_rule_of(),
            ext_header_len: op.ext_header_len_of() as u8,
        };
        i += 1;
    }
    table
};

/// Wire byte to opcode, built from [`Opcode::ALL`] at compile time.
const LOOKUP: [Option<Opcode>; 256] = {
    let mut table = [None; 256];
    let mut i = 0;
    while i < Opcode::ALL.len() {
        table[Opcode::ALL[i].as_u8() as usize] = Some(Opcode::ALL[i]);
        i += 1;
    }
    table
};

impl TryFrom<u8> for Opcode {
    type Error = WireError;

    fn try_from(byte: u8) -> Result<Self, WireError> {
        Opcode::from_u8(byte).ok_or(WireError::UnknownOpcode(byte))
    }
}

impl From<Opcode> for u8 {
    fn from(op: Opcode) -> u8 {
        op.as_u8()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_round_trips_or_is_unknown() {
        let mut known = 0;
        for b in 0..=255u8 {
            match Opcode::try_from(b) {
                Ok(op) => {
                    known += 1;
                    assert_eq!(op.as_u8(), b);
                }
                Err(e) => assert_eq!(e, WireError::UnknownOpcode(b)),
            }
        }
        assert_eq!(known, 38);
        assert!(Opcode::from_u8(0x15).is_none());
        assert!(Opcode::from_u8(0x2C).is_none());
        assert!(Opcode::from_u8(0x66).is_none());
    }

    /// The compile-time table answers as the rules it was built from, for every opcode.
    #[test]
    fn props_are_the_rules() {
        for op in Opcode::ALL {
            assert_eq!(op.operation(), op.operation_of(), "{op:?}");
            assert_eq!(op.position(), op.position_of(), "{op:?}");
            assert_eq!(op.payload_rule(), op.payload_rule_of(), "{op:?}");
            assert_eq!(op.ext_header_len(), op.ext_header_len_of(), "{op:?}");
        }
    }

    #[test]
    fn header_sets() {
        assert_eq!(Opcode::RcRdmaWriteFirst.ext_header_len(), 16);
        assert_eq!(Opcode::RcRdmaWriteOnlyWithImm.ext_header_len(), 20);
        assert_eq!(Opcode::UcRdmaWriteOnlyWithImm.ext_header_len(), 20);
        assert_eq!(Opcode::RcRdmaReadRequest.ext_header_len(), 16);
        assert_eq!(Opcode::RcAtomicAcknowledge.ext_header_len(), 12);
        assert_eq!(Opcode::RcCompareSwap.ext_header_len(), 28);
        assert_eq!(Opcode::UdSendOnly.ext_header_len(), 8);
        assert_eq!(Opcode::UdSendOnlyWithImm.ext_header_len(), 12);
        assert_eq!(Opcode::RcSendOnlyWithInv.ext_header_len(), 4);
        assert_eq!(Opcode::RcRdmaReadResponseMiddle.ext_header_len(), 0);
        assert_eq!(Opcode::RcRdmaReadResponseLast.ext_header_len(), 4);
        assert_eq!(Opcode::Cnp.ext_header_len(), 16);
        assert_eq!(Opcode::RcRdmaReadRequest.payload_rule(), PayloadRule::None);
        assert_eq!(Opcode::RcSendFirst.payload_rule(), PayloadRule::Pmtu);
        assert_eq!(Opcode::UcSendLast.payload_rule(), PayloadRule::OneToPmtu);
        assert_eq!(
            Opcode::RcRdmaReadResponseOnly.payload_rule(),
            PayloadRule::ZeroToPmtu
        );
        assert!(Opcode::RcRdmaReadResponseLast.is_response());
        assert!(Opcode::RcFetchAdd.is_request());
        assert!(!Opcode::Cnp.is_request() && !Opcode::Cnp.is_response());
        assert_eq!(Opcode::UcRdmaWriteLastWithImm.transport(), Transport::Uc);
        assert_eq!(
            Opcode::UdSendOnlyWithImm.operation(),
            Operation::SendWithImm
        );
        assert_eq!(Opcode::RcSendLastWithInv.position(), Position::Last);
        assert_eq!(
            Opcode::RcSendLastWithInv.operation(),
            Operation::SendWithInv
        );
    }

    #[test]
    fn uc_is_rc_plus_0x20() {
        for op in Opcode::ALL {
            if op.transport() == Transport::Uc {
                let rc = Opcode::from_u8(op.as_u8() - 0x20).expect("RC twin");
                assert_eq!(rc.operation(), op.operation());
                assert_eq!(rc.position(), op.position());
                assert_eq!(rc.ext_header_len(), op.ext_header_len());
            }
        }
    }
}
