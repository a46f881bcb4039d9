//! Event queue entries: the 64-byte EQE ([`Eqe`]), the event types ([`EventType`]), and a
//! typed view of the event data ([`Eqe::event`]).
//!
//! ```
//! use rnic_hw_regs::eqe::{Eqe, EqeEvent, EventType};
//!
//! let mut e = Eqe::default();
//! e.set_event_type(EventType::PageRequest.raw());
//! e.set_func_id(0);
//! e.set_num_pages_signed(-12);
//! assert_eq!(e.event(), Ok(EqeEvent::PageRequest { func_id: 0, num_pages: -12 }));
//! ```

use crate::status::{UnknownCode, code_enum};

/// Size of an EQE.
pub const EQE_SIZE: usize = 64;
/// Byte the driver initializes every EQE's owner byte with (owner 1).
pub const EQE_OWNER_INIT: u8 = 0x01;

code_enum! {
    /// EQE event type (byte 0x01), also the bit number in CREATE_EQ's `event_bitmask`.
    pub enum EventType: u8 {
        /// Completion on a CQ (`cqn` in the data).
        Completion = 0x00 => "COMP",
        /// QP path migrated.
        PathMig = 0x01 => "PATH_MIG",
        /// QP communication established.
        CommEst = 0x02 => "COMM_EST",
        /// Send queue drained.
        SqDrained = 0x03 => "SQ_DRAINED",
        /// CQ error.
        CqError = 0x04 => "CQ_ERROR",
        /// QP catastrophic error.
        WqCatasError = 0x05 => "WQ_CATAS_ERROR",
        /// Path migration failed.
        PathMigFailed = 0x07 => "PATH_MIG_FAILED",
        /// Device internal error.
        InternalError = 0x08 => "INTERNAL_ERROR",
        /// Port state change.
        PortChange = 0x09 => "PORT_CHANGE",
        /// Command completion (slot bitmask in the data).
        Cmd = 0x0A => "CMD",
        /// Page request: firmware wants pages given or taken back.
        PageRequest = 0x0B => "PAGE_REQUEST",
        /// Page fault (on-demand paging).
        PageFault = 0x0C => "PAGE_FAULT",
        /// Invalid request on a QP.
        WqInvalReqError = 0x10 => "WQ_INVAL_REQ_ERROR",
        /// Local access violation on a QP.
        WqAccessError = 0x11 => "WQ_ACCESS_ERROR",
        /// SRQ catastrophic error.
        SrqCatasError = 0x12 => "SRQ_CATAS_ERROR",
        /// Last WQE reached on an SRQ-attached QP.
        SrqLastWqe = 0x13 => "SRQ_LAST_WQE",
        /// SRQ limit reached.
        SrqRqLimit = 0x14 => "SRQ_RQ_LIMIT",
    }
}

impl EventType {
    /// Whether the event is about a QP (its QPN is at 0x38).
    ///
    /// ```
    /// use rnic_hw_regs::eqe::EventType;
    ///
    /// assert!(EventType::WqCatasError.is_qp_event());
    /// assert!(EventType::SrqLastWqe.is_qp_event());
    /// assert!(!EventType::Completion.is_qp_event());
    /// assert!(!EventType::PortChange.is_qp_event());
    /// ```
    pub const fn is_qp_event(self) -> bool {
        matches!(
            self,
            Self::PathMig
                | Self::CommEst
                | Self::SqDrained
                | Self::WqCatasError
                | Self::PathMigFailed
                | Self::WqInvalReqError
                | Self::WqAccessError
                | Self::SrqLastWqe
        )
    }
}

prm_layout! {
    /// A 64-byte EQE (`mlx5_eqe`). The data at 0x20..0x3B depends on the event type; its
    /// fields overlap and are only meaningful for their event (see [`Eqe::event`]).
    pub struct Eqe("", 64) {
        /// Event type, raw (see [`EventType`]).
        event_type / set_event_type: u8 = dw(0x00, 23, 16);
        /// Event sub-type (e.g. the port state change kind).
        sub_type / set_sub_type: u8 = dw(0x00, 7, 0);
        /// Raw event data (0x20..0x3B).
        data / set_data: [u8; 28] = bytes(0x20, 28);
        /// Completion event: the CQ.
        comp_cqn / set_comp_cqn: u32 = dw(0x38, 23, 0);
        /// QP / SRQ event: the QP (or SRQ) number.
        qp_srq_n / set_qp_srq_n: u32 = dw(0x38, 23, 0);
        /// CQ error event: the CQ.
        cq_err_cqn / set_cq_err_cqn: u32 = dw(0x20, 23, 0);
        /// CQ error event: the syndrome (byte 0x2B).
        cq_err_syndrome / set_cq_err_syndrome: u8 = dw(0x28, 7, 0);
        /// Command completion event: bitmask of completed command slots.
        cmd_vector / set_cmd_vector: u32 = dw(0x20, 31, 0);
        /// Page request event: the function.
        func_id / set_func_id: u16 = dw(0x20, 15, 0);
        /// Page request event: page count, raw (signed; see [`Eqe::num_pages_signed`]).
        num_pages / set_num_pages: u32 = dw(0x24, 31, 0);
        /// Port change event: the port (1-based).
        port / set_port: u8 = dw(0x28, 31, 28);
        /// Signature.
        signature / set_signature: u8 = dw(0x3C, 15, 8);
        /// Owner bit.
        owner / set_owner: bool = dw(0x3C, 0, 0);
    }
}

/// The event an EQE reports, with the data fields that event defines.
///
/// ```
/// use rnic_hw_regs::eqe::{Eqe, EqeEvent, EventType};
///
/// let mut e = Eqe::default();
/// e.set_event_type(EventType::Completion.raw());
/// e.set_comp_cqn(0x42);
/// assert_eq!(e.event(), Ok(EqeEvent::Completion { cqn: 0x42 }));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EqeEvent {
    /// A CQ has a new completion (and was armed).
    Completion {
        /// The CQ.
        cqn: u32,
    },
    /// A CQ overran or hit an error.
    CqError {
        /// The CQ.
        cqn: u32,
        /// Error syndrome.
        syndrome: u8,
    },
    /// An affiliated QP / SRQ event.
    Qp {
        /// Which event.
        kind: EventType,
        /// The QP (or SRQ) number.
        qpn: u32,
    },
    /// A port changed state.
    PortChange {
        /// The change kind (EQE sub-type: 1 down, 4 active, ...).
        sub_type: u8,
        /// The port (1-based).
        port: u8,
    },
    /// Commands completed.
    CmdCompletion {
        /// Bitmask of completed slots.
        slots: u32,
    },
    /// Firmware asks for pages (positive) or gives some back (negative).
    PageRequest {
        /// The function.
        func_id: u16,
        /// Pages to give (> 0) or to take back (< 0).
        num_pages: i32,
    },
    /// Another known event type with no decoded data.
    Other(EventType),
}

impl Eqe {
    /// The typed event type.
    ///
    /// ```
    /// use rnic_hw_regs::eqe::{Eqe, EventType};
    ///
    /// let mut e = Eqe::default();
    /// e.set_event_type(0x09);
    /// assert_eq!(e.typed_event_type(), Ok(EventType::PortChange));
    /// e.set_event_type(0xEE);
    /// assert!(e.typed_event_type().is_err());
    /// ```
    pub fn typed_event_type(&self) -> Result<EventType, UnknownCode> {
        EventType::try_from(self.event_type())
    }

    /// A zeroed EQE of event type `t`, for the writer to fill with `t`'s data fields.
    ///
    /// ```
    /// use rnic_hw_regs::eqe::{Eqe, EqeEvent, EventType};
    ///
    /// let mut e = Eqe::of(EventType::CqError);
    /// e.set_cq_err_cqn(7);
    /// e.set_cq_err_syndrome(1);
    /// assert_eq!(e.typed_event_type(), Ok(EventType::CqError));
    /// assert_eq!(e.cq_err_cqn(), 7);
    /// ```
    pub fn of(t: EventType) -> Self {
        let mut e = Self::default();
        e.set_event_type(t.raw());
        e
    }

    /// `num_pages` as the signed count it is.
    ///
    /// ```
    /// use rnic_hw_regs::eqe::Eqe;
    ///
    /// let mut e = Eqe::default();
    /// e.set_num_pages(0xFFFF_FFFE);
    /// assert_eq!(e.num_pages_signed(), -2); // firmware gives 2 pages back
    /// ```
    pub fn num_pages_signed(&self) -> i32 {
        i32::from_be_bytes(self.num_pages().to_be_bytes())
    }

    /// Sets `num_pages` from a signed count.
    ///
    /// ```
    /// use rnic_hw_regs::eqe::Eqe;
    ///
    /// let mut e = Eqe::default();
    /// e.set_num_pages_signed(-1);
    /// assert_eq!(e.num_pages(), 0xFFFF_FFFF);
    /// assert_eq!(e.num_pages_signed(), -1);
    /// ```
    pub fn set_num_pages_signed(&mut self, n: i32) {
        self.set_num_pages(u32::from_be_bytes(n.to_be_bytes()));
    }

    /// Decodes the event and its data; an unknown event type is an error.
    ///
    /// ```
    /// use rnic_hw_regs::eqe::{Eqe, EqeEvent, EventType};
    ///
    /// let mut e = Eqe::default();
    /// e.set_event_type(EventType::WqAccessError.raw());
    /// e.set_qp_srq_n(0x123);
    /// assert_eq!(e.event(), Ok(EqeEvent::Qp { kind: EventType::WqAccessError, qpn: 0x123 }));
    /// e.set_event_type(EventType::InternalError.raw());
    /// assert_eq!(e.event(), Ok(EqeEvent::Other(EventType::InternalError)));
    /// ```
    pub fn event(&self) -> Result<EqeEvent, UnknownCode> {
        let t = self.typed_event_type()?;
        Ok(match t {
            EventType::Completion => EqeEvent::Completion {
                cqn: self.comp_cqn(),
            },
            EventType::CqError => EqeEvent::CqError {
                cqn: self.cq_err_cqn(),
                syndrome: self.cq_err_syndrome(),
            },
            EventType::PortChange => EqeEvent::PortChange {
                sub_type: self.sub_type(),
                port: self.port(),
            },
            EventType::Cmd => EqeEvent::CmdCompletion {
                slots: self.cmd_vector(),
            },
            EventType::PageRequest => EqeEvent::PageRequest {
                func_id: self.func_id(),
                num_pages: self.num_pages_signed(),
            },
            t if t.is_qp_event() => EqeEvent::Qp {
                kind: t,
                qpn: self.qp_srq_n(),
            },
            t => EqeEvent::Other(t),
        })
    }
}

/// Whether the EQE with owner byte `owner_byte` at consumer index `ci` of an EQ of
/// `2^log_size` entries belongs to software: its owner bit equals `(ci >> log_size) & 1`.
/// (The driver initializes every owner bit to 1, so the first pass sees 0 on new entries.)
///
/// ```
/// use rnic_hw_regs::eqe::{eqe_is_sw_owned, EQE_OWNER_INIT};
///
/// // An 8-entry EQ (log_size 3) the driver initialized with owner 1.
/// assert!(!eqe_is_sw_owned(EQE_OWNER_INIT, 0, 3));
/// assert!(eqe_is_sw_owned(0x00, 0, 3)); // the device wrote it on the first pass
/// assert!(eqe_is_sw_owned(0x01, 8, 3)); // second pass
/// ```
pub const fn eqe_is_sw_owned(owner_byte: u8, ci: u32, log_size: u8) -> bool {
    let parity = match ci.checked_shr(log_size as u32) {
        Some(v) => (v & 1) as u8,
        None => 0,
    };
    (owner_byte & 1) == parity
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PrmLayout;
    use zerocopy::IntoBytes;

    #[test]
    fn offsets_match_the_prm() {
        assert_eq!(Eqe::SIZE, EQE_SIZE);
        let mut e = Eqe::default();
        e.set_event_type(0x0B);
        e.set_sub_type(0x04);
        e.set_func_id(0x1234);
        e.set_num_pages_signed(-2);
        e.set_owner(true);
        let b = e.as_bytes();
        assert_eq!((b[0x01], b[0x03]), (0x0B, 0x04));
        assert_eq!(&b[0x22..0x24], &[0x12, 0x34]);
        assert_eq!(&b[0x24..0x28], &[0xFF, 0xFF, 0xFF, 0xFE]);
        assert_eq!(b[0x3F], 1);
        assert_eq!(
            e.event(),
            Ok(EqeEvent::PageRequest {
                func_id: 0x1234,
                num_pages: -2
            })
        );

        let mut e = Eqe::default();
        e.set_comp_cqn(0xAB_CDEF);
        assert_eq!(&e.as_bytes()[0x38..0x3C], &[0, 0xAB, 0xCD, 0xEF]);
        assert_eq!(e.event(), Ok(EqeEvent::Completion { cqn: 0xAB_CDEF }));

        let mut e = Eqe::default();
        e.set_event_type(EventType::Cmd.raw());
        e.set_cmd_vector(0x8000_0001);
        assert_eq!(&e.as_bytes()[0x20..0x24], &[0x80, 0, 0, 1]);
        assert_eq!(
            e.event(),
            Ok(EqeEvent::CmdCompletion { slots: 0x8000_0001 })
        );

        let mut e = Eqe::default();
        e.set_event_type(EventType::CqError.raw());
        e.set_cq_err_cqn(7);
        e.set_cq_err_syndrome(1);
        assert_eq!((e.as_bytes()[0x23], e.as_bytes()[0x2B]), (7, 1));
        assert_eq!(
            e.event(),
            Ok(EqeEvent::CqError {
                cqn: 7,
                syndrome: 1
            })
        );

        let mut e = Eqe::default();
        e.set_event_type(EventType::CommEst.raw());
        e.set_qp_srq_n(0x99);
        assert_eq!(
            e.event(),
            Ok(EqeEvent::Qp {
                kind: EventType::CommEst,
                qpn: 0x99
            })
        );

        let mut e = Eqe::default();
        e.set_event_type(EventType::PortChange.raw());
        e.set_sub_type(4);
        e.set_port(1);
        assert_eq!(e.as_bytes()[0x28], 0x10);
        assert_eq!(
            e.event(),
            Ok(EqeEvent::PortChange {
                sub_type: 4,
                port: 1
            })
        );

        e.set_event_type(0x77);
        assert!(e.event().is_err());
    }

    #[test]
    fn event_types_match_the_prm() {
        for (raw, t) in [
            (0x00, EventType::Completion),
            (0x04, EventType::CqError),
            (0x09, EventType::PortChange),
            (0x0A, EventType::Cmd),
            (0x0B, EventType::PageRequest),
        ] {
            assert_eq!(EventType::try_from(raw), Ok(t));
        }
        for raw in [0x01u8, 0x02, 0x03, 0x05, 0x10, 0x11, 0x13] {
            assert!(EventType::try_from(raw).unwrap().is_qp_event(), "{raw:#x}");
        }
    }

    #[test]
    fn ownership_rule() {
        assert!(!eqe_is_sw_owned(EQE_OWNER_INIT, 0, 4));
        assert!(eqe_is_sw_owned(0, 0, 4));
        assert!(eqe_is_sw_owned(1, 16, 4));
        assert!(eqe_is_sw_owned(0, 3, 200));
    }
}
