//! REQ, the connection request (IBTA table 106), with its primary and alternate paths.

use crate::wire::{Field, MAD_LEN, Mad, WireError, bytes, check, put};

/// Where the fixed fields sit (the paths are at [`PRIMARY_PATH`] and [`ALTERNATE_PATH`]).
mod field {
    use crate::wire::Field;
    pub(super) const LOCAL_COMM_ID: Field = Field::at(0, 0, 32);
    pub(super) const VENDOR_ID: Field = Field::at(5, 0, 24);
    pub(super) const SERVICE_ID: Field = Field::at(8, 0, 64);
    pub(super) const LOCAL_CA_GUID: Field = Field::at(16, 0, 64);
    pub(super) const LOCAL_QKEY: Field = Field::at(28, 0, 32);
    pub(super) const LOCAL_QPN: Field = Field::at(32, 0, 24);
    pub(super) const RESPONDER_RESOURCES: Field = Field::at(35, 0, 8);
    pub(super) const LOCAL_EECN: Field = Field::at(36, 0, 24);
    pub(super) const INITIATOR_DEPTH: Field = Field::at(39, 0, 8);
    pub(super) const REMOTE_EECN: Field = Field::at(40, 0, 24);
    pub(super) const REMOTE_CM_RESPONSE_TIMEOUT: Field = Field::at(43, 0, 5);
    pub(super) const TRANSPORT_SERVICE_TYPE: Field = Field::at(43, 5, 2);
    pub(super) const END_TO_END_FLOW_CONTROL: Field = Field::at(43, 7, 1);
    pub(super) const STARTING_PSN: Field = Field::at(44, 0, 24);
    pub(super) const LOCAL_CM_RESPONSE_TIMEOUT: Field = Field::at(47, 0, 5);
    pub(super) const RETRY_COUNT: Field = Field::at(47, 5, 3);
    pub(super) const PARTITION_KEY: Field = Field::at(48, 0, 16);
    pub(super) const PATH_MTU: Field = Field::at(50, 0, 4);
    pub(super) const RDC_EXISTS: Field = Field::at(50, 4, 1);
    pub(super) const RNR_RETRY_COUNT: Field = Field::at(50, 5, 3);
    pub(super) const MAX_CM_RETRIES: Field = Field::at(51, 0, 4);
    pub(super) const SRQ: Field = Field::at(51, 4, 1);
    pub(super) const EXTENDED_TRANSPORT_TYPE: Field = Field::at(51, 5, 3);
    pub(super) const SAP_SUPPORTED: Field = Field::at(139, 5, 1);
    pub(super) const PRIVATE_DATA: usize = 140;

    /// Offsets inside a path, from its first byte.
    pub(super) mod path {
        pub(in super::super) const LOCAL_LID: usize = 0;
        pub(in super::super) const REMOTE_LID: usize = 2;
        pub(in super::super) const LOCAL_GID: usize = 4;
        pub(in super::super) const REMOTE_GID: usize = 20;
        /// (byte, bit, width) from the path's first byte.
        pub(in super::super) const FLOW_LABEL: (usize, usize, usize) = (36, 0, 20);
        pub(in super::super) const PACKET_RATE: (usize, usize, usize) = (39, 2, 6);
        pub(in super::super) const TRAFFIC_CLASS: (usize, usize, usize) = (40, 0, 8);
        pub(in super::super) const HOP_LIMIT: (usize, usize, usize) = (41, 0, 8);
        pub(in super::super) const SL: (usize, usize, usize) = (42, 0, 4);
        pub(in super::super) const SUBNET_LOCAL: (usize, usize, usize) = (42, 4, 1);
        pub(in super::super) const LOCAL_ACK_TIMEOUT: (usize, usize, usize) = (43, 0, 5);
    }
}

/// The primary path's first byte in the REQ.
const PRIMARY_PATH: usize = 52;
/// The alternate path's.
const ALTERNATE_PATH: usize = 96;

/// A REQ's path (IBTA 12.6.5): on RoCE v2 the LIDs are 0xFFFF (permissive) and the GIDs are
/// the IP addresses' GIDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Path {
    /// The sender's LID.
    pub local_lid: u16,
    /// The receiver's LID.
    pub remote_lid: u16,
    /// The sender's GID.
    pub local_gid: [u8; 16],
    /// The receiver's GID.
    pub remote_gid: [u8; 16],
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Static rate (6 bits, the IB rate enum).
    pub packet_rate: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Service level (4 bits).
    pub sl: u8,
    /// Both ends on one subnet.
    pub subnet_local: u8,
    /// Local ACK timeout: 4.096 us x 2^timeout (5 bits).
    pub local_ack_timeout: u8,
}

impl Path {
    fn parse(mad: &[u8], base: usize) -> Path {
        use field::path::*;
        let f = |(b, bit, w): (usize, usize, usize)| Field::at(base + b, bit, w).get(mad);
        let lid = |at: usize| Field::at(base + at, 0, 16).get(mad) as u16;
        Path {
            local_lid: lid(LOCAL_LID),
            remote_lid: lid(REMOTE_LID),
            local_gid: bytes(mad, base + LOCAL_GID),
            remote_gid: bytes(mad, base + REMOTE_GID),
            flow_label: f(FLOW_LABEL) as u32,
            packet_rate: f(PACKET_RATE) as u8,
            traffic_class: f(TRAFFIC_CLASS) as u8,
            hop_limit: f(HOP_LIMIT) as u8,
            sl: f(SL) as u8,
            subnet_local: f(SUBNET_LOCAL) as u8,
            local_ack_timeout: f(LOCAL_ACK_TIMEOUT) as u8,
        }
    }

    fn emit(&self, mad: &mut [u8], base: usize) {
        use field::path::*;
        let mut f =
            |(b, bit, w): (usize, usize, usize), v: u64| Field::at(base + b, bit, w).set(mad, v);
        f((LOCAL_LID, 0, 16), u64::from(self.local_lid));
        f((REMOTE_LID, 0, 16), u64::from(self.remote_lid));
        f(FLOW_LABEL, u64::from(self.flow_label));
        f(PACKET_RATE, u64::from(self.packet_rate));
        f(TRAFFIC_CLASS, u64::from(self.traffic_class));
        f(HOP_LIMIT, u64::from(self.hop_limit));
        f(SL, u64::from(self.sl));
        f(SUBNET_LOCAL, u64::from(self.subnet_local));
        f(LOCAL_ACK_TIMEOUT, u64::from(self.local_ack_timeout));
        put(mad, base + LOCAL_GID, &self.local_gid);
        put(mad, base + REMOTE_GID, &self.remote_gid);
    }
}

/// REQ: the active side asks to connect its QP to a service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Req {
    /// The sender's communication ID.
    pub local_comm_id: u32,
    /// Vendor ID (24 bits).
    pub vendor_id: u32,
    /// The service asked for (rdma_cm: port space and port, see [`crate::wire::ip`]).
    pub service_id: u64,
    /// The sender's CA GUID.
    pub local_ca_guid: u64,
    /// The sender's Q_Key (UD; 0 for RC).
    pub local_qkey: u32,
    /// The sender's QPN.
    pub local_qpn: u32,
    /// READs / atomics the sender serves at once.
    pub responder_resources: u8,
    /// The sender's local EE context.
    pub local_eecn: u32,
    /// READs / atomics the sender issues at once.
    pub initiator_depth: u8,
    /// The remote EE context.
    pub remote_eecn: u32,
    /// How long the receiver's CM may take to answer: 4.096 us x 2^t.
    pub remote_cm_response_timeout: u8,
    /// 0 RC, 1 UC, 3 RD.
    pub transport_service_type: u8,
    /// End-to-end flow control.
    pub end_to_end_flow_control: u8,
    /// The sender's first PSN.
    pub starting_psn: u32,
    /// How long the sender's CM may take: 4.096 us x 2^t.
    pub local_cm_response_timeout: u8,
    /// Transport retries (3 bits).
    pub retry_count: u8,
    /// The partition key.
    pub partition_key: u16,
    /// Path MTU (the IB MTU enum, 4 bits).
    pub path_mtu: u8,
    /// RDC exists.
    pub rdc_exists: u8,
    /// RNR retries (3 bits).
    pub rnr_retry_count: u8,
    /// CM retries of this REQ (4 bits).
    pub max_cm_retries: u8,
    /// The sender's QP uses an SRQ.
    pub srq: u8,
    /// Extended transport type (3 bits).
    pub extended_transport_type: u8,
    /// The primary path.
    pub primary: Path,
    /// The alternate path (zero when none).
    pub alternate: Path,
    /// Send alternate path supported.
    pub sap_supported: u8,
    /// Private data (92 bytes; rdma_cm's IP header first).
    pub private_data: [u8; 92],
}

impl Default for Req {
    fn default() -> Self {
        Req {
            local_comm_id: 0,
            vendor_id: 0,
            service_id: 0,
            local_ca_guid: 0,
            local_qkey: 0,
            local_qpn: 0,
            responder_resources: 0,
            local_eecn: 0,
            initiator_depth: 0,
            remote_eecn: 0,
            remote_cm_response_timeout: 0,
            transport_service_type: 0,
            end_to_end_flow_control: 0,
            starting_psn: 0,
            local_cm_response_timeout: 0,
            retry_count: 0,
            partition_key: 0,
            path_mtu: 0,
            rdc_exists: 0,
            rnr_retry_count: 0,
            max_cm_retries: 0,
            srq: 0,
            extended_transport_type: 0,
            primary: Path::default(),
            alternate: Path::default(),
            sap_supported: 0,
            private_data: [0; 92],
        }
    }
}

impl Req {
    /// The MAD attribute ID of a REQ.
    pub const ATTR_ID: u16 = 0x0010;
    /// Bytes of private data a REQ carries.
    pub const PRIVATE_DATA_LEN: usize = 92;

    /// Parses a whole CM MAD carrying a REQ.
    ///
    /// ```
    /// use rnic_cm::wire::{Req, MAD_LEN};
    /// let r = Req { local_qpn: 0x21, starting_psn: 0x80b384, path_mtu: 3, ..Req::default() };
    /// let mut mad = [0u8; MAD_LEN];
    /// r.emit(1, &mut mad);
    /// assert_eq!(Req::parse(&mad), Ok(r));
    /// ```
    pub fn parse(mad: &[u8]) -> Result<Req, WireError> {
        use field::*;
        check(mad, Self::ATTR_ID)?;
        let g = |f: Field| f.get(mad);
        Ok(Req {
            local_comm_id: g(LOCAL_COMM_ID) as u32,
            vendor_id: g(VENDOR_ID) as u32,
            service_id: g(SERVICE_ID),
            local_ca_guid: g(LOCAL_CA_GUID),
            local_qkey: g(LOCAL_QKEY) as u32,
            local_qpn: g(LOCAL_QPN) as u32,
            responder_resources: g(RESPONDER_RESOURCES) as u8,
            local_eecn: g(LOCAL_EECN) as u32,
            initiator_depth: g(INITIATOR_DEPTH) as u8,
            remote_eecn: g(REMOTE_EECN) as u32,
            remote_cm_response_timeout: g(REMOTE_CM_RESPONSE_TIMEOUT) as u8,
            transport_service_type: g(TRANSPORT_SERVICE_TYPE) as u8,
            end_to_end_flow_control: g(END_TO_END_FLOW_CONTROL) as u8,
            starting_psn: g(STARTING_PSN) as u32,
            local_cm_response_timeout: g(LOCAL_CM_RESPONSE_TIMEOUT) as u8,
            retry_count: g(RETRY_COUNT) as u8,
            partition_key: g(PARTITION_KEY) as u16,
            path_mtu: g(PATH_MTU) as u8,
            rdc_exists: g(RDC_EXISTS) as u8,
            rnr_retry_count: g(RNR_RETRY_COUNT) as u8,
            max_cm_retries: g(MAX_CM_RETRIES) as u8,
            srq: g(SRQ) as u8,
            extended_transport_type: g(EXTENDED_TRANSPORT_TYPE) as u8,
            primary: Path::parse(mad, PRIMARY_PATH),
            alternate: Path::parse(mad, ALTERNATE_PATH),
            sap_supported: g(SAP_SUPPORTED) as u8,
            private_data: bytes(mad, PRIVATE_DATA),
        })
    }

    /// Writes the whole MAD of this REQ in transaction `transaction_id`.
    ///
    /// ```
    /// use rnic_cm::wire::{Mad, Req, MAD_LEN};
    /// let mut mad = [0u8; MAD_LEN];
    /// Req::default().emit(0x21fb18cee, &mut mad);
    /// assert_eq!(Mad::parse(&mad).unwrap().transaction_id, 0x21fb18cee);
    /// ```
    pub fn emit(&self, transaction_id: u64, mad: &mut [u8; MAD_LEN]) {
        use field::*;
        mad.fill(0);
        Mad::send(Self::ATTR_ID, transaction_id).emit(mad);
        let fields = [
            (LOCAL_COMM_ID, u64::from(self.local_comm_id)),
            (VENDOR_ID, u64::from(self.vendor_id)),
            (SERVICE_ID, self.service_id),
            (LOCAL_CA_GUID, self.local_ca_guid),
            (LOCAL_QKEY, u64::from(self.local_qkey)),
            (LOCAL_QPN, u64::from(self.local_qpn)),
            (RESPONDER_RESOURCES, u64::from(self.responder_resources)),
            (LOCAL_EECN, u64::from(self.local_eecn)),
            (INITIATOR_DEPTH, u64::from(self.initiator_depth)),
            (REMOTE_EECN, u64::from(self.remote_eecn)),
            (
                REMOTE_CM_RESPONSE_TIMEOUT,
                u64::from(self.remote_cm_response_timeout),
            ),
            (
                TRANSPORT_SERVICE_TYPE,
                u64::from(self.transport_service_type),
            ),
            (
                END_TO_END_FLOW_CONTROL,
                u64::from(self.end_to_end_flow_control),
            ),
            (STARTING_PSN, u64::from(self.starting_psn)),
            (
                LOCAL_CM_RESPONSE_TIMEOUT,
                u64::from(self.local_cm_response_timeout),
            ),
            (RETRY_COUNT, u64::from(self.retry_count)),
            (PARTITION_KEY, u64::from(self.partition_key)),
            (PATH_MTU, u64::from(self.path_mtu)),
            (RDC_EXISTS, u64::from(self.rdc_exists)),
            (RNR_RETRY_COUNT, u64::from(self.rnr_retry_count)),
            (MAX_CM_RETRIES, u64::from(self.max_cm_retries)),
            (SRQ, u64::from(self.srq)),
            (
                EXTENDED_TRANSPORT_TYPE,
                u64::from(self.extended_transport_type),
            ),
        ];
        for (f, v) in fields {
            f.set(mad, v);
        }
        self.primary.emit(mad, PRIMARY_PATH);
        self.alternate.emit(mad, ALTERNATE_PATH);
        SAP_SUPPORTED.set(mad, u64::from(self.sap_supported));
        put(mad, PRIVATE_DATA, &self.private_data);
    }
}
