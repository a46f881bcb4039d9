//! MRA, message receipt acknowledgement (IBTA table 107): "I got it, I need more time".

cm_message! {
    /// MRA: asks the peer to wait `service_timeout` longer for the answer to a REQ, REP or LAP.
    Mra, attr 0x0011, private_data 10, 222;
    /// The sender's communication ID.
    local_comm_id: u32 = (0, 0, 32),
    /// The receiver's communication ID (0 when MRAing a REQ).
    remote_comm_id: u32 = (4, 0, 32),
    /// Which message: 0 REQ, 1 REP, 2 LAP.
    message_mraed: u8 = (8, 0, 2),
    /// 4.096 us x 2^timeout more to wait.
    service_timeout: u8 = (9, 0, 5),
}
