//! DREP, disconnect reply (IBTA table 113).

cm_message! {
    /// DREP: the answer to a DREQ.
    Drep, attr 0x0016, private_data 8, 224;
    /// The sender's communication ID.
    local_comm_id: u32 = (0, 0, 32),
    /// The receiver's communication ID.
    remote_comm_id: u32 = (4, 0, 32),
}
