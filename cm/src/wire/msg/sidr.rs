//! SIDR REQ and SIDR REP (IBTA tables 119 and 120): service ID resolution for UD services.

pub use sidr_rep::SidrRep;
pub use sidr_req::SidrReq;

mod sidr_req {
    cm_message! {
        /// SIDR REQ: which UD QP serves this service ID?
        SidrReq, attr 0x0017, private_data 16, 216;
        /// The requester's ID for this request.
        request_id: u32 = (0, 0, 32),
        /// The partition.
        partition_key: u16 = (4, 0, 16),
        /// The service asked for.
        service_id: u64 = (8, 0, 64),
    }
}

mod sidr_rep {
    cm_message! {
        /// SIDR REP: the UD QP and Q_Key of the service, or why not ([`super::SidrStatus`]).
        SidrRep, attr 0x0018, private_data 96, 136;
        /// The SIDR REQ's request ID.
        request_id: u32 = (0, 0, 32),
        /// 0 valid; see [`super::SidrStatus`].
        status: u8 = (4, 0, 8),
        /// Bytes of `additional_information` used.
        additional_information_length: u8 = (5, 0, 8),
        /// The service's QPN.
        qpn: u32 = (8, 0, 24),
        /// The service ID answered.
        service_id: u64 = (12, 0, 64),
        /// The service's Q_Key.
        qkey: u32 = (20, 0, 32);
        /// Additional information (a redirect's class port info).
        additional_information: [u8; 72] = 24,
    }
}

/// A SIDR REP's status (IBTA table 120).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SidrStatus {
    /// 0: the QPN and Q_Key are valid.
    Valid,
    /// 1: no service on that ID.
    ServiceIdNotSupported,
    /// 2: rejected by the service.
    Rejected,
    /// 3: no QP.
    NoQp,
    /// 4: redirect.
    Redirect,
    /// 5: unsupported class version.
    UnsupportedVersion,
}

impl SidrStatus {
    /// The wire value.
    ///
    /// ```
    /// assert_eq!(rnic_cm::wire::SidrStatus::ServiceIdNotSupported.raw(), 1);
    /// ```
    pub const fn raw(self) -> u8 {
        self as u8
    }
}
