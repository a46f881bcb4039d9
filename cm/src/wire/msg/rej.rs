//! REJ, reject (IBTA table 108) and its reason codes (table 109).

cm_message! {
    /// REJ: a REQ, REP or the connection refused, with the reason.
    Rej, attr 0x0012, private_data 84, 148;
    /// The sender's communication ID.
    local_comm_id: u32 = (0, 0, 32),
    /// The receiver's communication ID.
    remote_comm_id: u32 = (4, 0, 32),
    /// Which message: 0 REQ, 1 REP, 2 other (a connection in use).
    message_rejected: u8 = (8, 0, 2),
    /// Bytes of `ari` used.
    rejected_info_length: u8 = (9, 0, 7),
    /// The reason ([`RejReason`]).
    reason: u16 = (10, 0, 16);
    /// Additional rejection information.
    ari: [u8; 72] = 12,
}

impl Rej {
    /// The used part of the additional rejection information.
    ///
    /// ```
    /// use rnic_cm::wire::Rej;
    /// let r = Rej { rejected_info_length: 2, ari: { let mut a = [0; 72]; a[..2].copy_from_slice(b"hi"); a }, ..Rej::default() };
    /// assert_eq!(r.ari().unwrap(), b"hi");
    /// assert!(Rej { rejected_info_length: 100, ..Rej::default() }.ari().is_err());
    /// ```
    pub fn ari(&self) -> Result<&[u8], crate::wire::WireError> {
        let n = self.rejected_info_length;
        self.ari
            .get(..usize::from(n))
            .ok_or(crate::wire::WireError::Length {
                what: "REJ ARI",
                len: n,
                max: 72,
            })
    }
}

/// REJ reasons (IBTA table 109, as Linux's `ib_cm_rej_reason` numbers them); the CM reads
/// any value, these are the ones it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejReason {
    /// 1: no QP available.
    NoQp,
    /// 3: no resources.
    NoResources,
    /// 4: the peer timed out waiting.
    Timeout,
    /// 5: unsupported request.
    Unsupported,
    /// 6: invalid communication ID.
    InvalidCommId,
    /// 8: invalid service ID (nothing listens on it).
    InvalidServiceId,
    /// 9: invalid transport service type.
    InvalidTransportType,
    /// 10: stale connection.
    StaleConn,
    /// 12: invalid GID.
    InvalidGid,
    /// 26: invalid MTU.
    InvalidMtu,
    /// 28: consumer defined (the private data says why).
    ConsumerDefined,
    /// 30: duplicate local communication ID.
    DuplicateLocalCommId,
    /// 31: invalid class version.
    InvalidClassVersion,
}

impl RejReason {
    /// The wire value.
    ///
    /// ```
    /// use rnic_cm::wire::RejReason;
    /// assert_eq!(RejReason::InvalidServiceId.raw(), 8);
    /// assert_eq!(RejReason::from_raw(28), Some(RejReason::ConsumerDefined));
    /// assert_eq!(RejReason::from_raw(99), None);
    /// ```
    pub const fn raw(self) -> u16 {
        match self {
            RejReason::NoQp => 1,
            RejReason::NoResources => 3,
            RejReason::Timeout => 4,
            RejReason::Unsupported => 5,
            RejReason::InvalidCommId => 6,
            RejReason::InvalidServiceId => 8,
            RejReason::InvalidTransportType => 9,
            RejReason::StaleConn => 10,
            RejReason::InvalidGid => 12,
            RejReason::InvalidMtu => 26,
            RejReason::ConsumerDefined => 28,
            RejReason::DuplicateLocalCommId => 30,
            RejReason::InvalidClassVersion => 31,
        }
    }

    /// The named reason of wire value `v`.
    pub const fn from_raw(v: u16) -> Option<RejReason> {
        Some(match v {
            1 => RejReason::NoQp,
            3 => RejReason::NoResources,
            4 => RejReason::Timeout,
            5 => RejReason::Unsupported,
            6 => RejReason::InvalidCommId,
            8 => RejReason::InvalidServiceId,
            9 => RejReason::InvalidTransportType,
            10 => RejReason::StaleConn,
            12 => RejReason::InvalidGid,
            26 => RejReason::InvalidMtu,
            28 => RejReason::ConsumerDefined,
            30 => RejReason::DuplicateLocalCommId,
            31 => RejReason::InvalidClassVersion,
            _ => return None,
        })
    }
}
