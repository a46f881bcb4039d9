//! REP, reply to a REQ (IBTA table 110).

cm_message! {
    /// REP: the passive side accepts a REQ with its QP's parameters.
    Rep, attr 0x0013, private_data 36, 196;
    /// The sender's communication ID.
    local_comm_id: u32 = (0, 0, 32),
    /// The REQ's communication ID.
    remote_comm_id: u32 = (4, 0, 32),
    /// The sender's Q_Key (UD only; 0 for RC).
    local_qkey: u32 = (8, 0, 32),
    /// The sender's QPN.
    local_qpn: u32 = (12, 0, 24),
    /// The sender's EE context number.
    local_eecn: u32 = (16, 0, 24),
    /// The sender's first PSN.
    starting_psn: u32 = (20, 0, 24),
    /// READs / atomics the sender serves at once.
    responder_resources: u8 = (24, 0, 8),
    /// READs / atomics the sender issues at once.
    initiator_depth: u8 = (25, 0, 8),
    /// Its ACK delay: 4.096 us x 2^delay.
    target_ack_delay: u8 = (26, 0, 5),
    /// Alternate path: 0 accepted, 1 not supported, 2 rejected.
    failover_accepted: u8 = (26, 5, 2),
    /// End-to-end flow control.
    end_to_end_flow_control: u8 = (26, 7, 1),
    /// RNR retries the REQ's sender should do.
    rnr_retry_count: u8 = (27, 0, 3),
    /// The sender's QP has an SRQ.
    srq: u8 = (27, 3, 1),
    /// The sender's CA GUID.
    local_ca_guid: u64 = (28, 0, 64),
}
