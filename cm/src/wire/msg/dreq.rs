//! DREQ, disconnect request (IBTA table 112).

cm_message! {
    /// DREQ: either side ends the connection.
    Dreq, attr 0x0015, private_data 12, 220;
    /// The sender's communication ID.
    local_comm_id: u32 = (0, 0, 32),
    /// The receiver's communication ID.
    remote_comm_id: u32 = (4, 0, 32),
    /// The receiver's QPN (or EECN).
    remote_qpn_eecn: u32 = (8, 0, 24),
}
