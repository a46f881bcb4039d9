//! RTU, ready to use (IBTA table 111): the active side's last word of a connection.

cm_message! {
    /// RTU: the active side tells the passive side the connection is established.
    Rtu, attr 0x0014, private_data 8, 224;
    /// The sender's communication ID.
    local_comm_id: u32 = (0, 0, 32),
    /// The receiver's communication ID.
    remote_comm_id: u32 = (4, 0, 32),
}
