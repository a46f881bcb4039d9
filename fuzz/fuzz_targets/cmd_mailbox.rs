//! Command mailboxes through the BAR: a sequence of commands (any opcode, op_mod, lengths
//! and bytes, with damaged deliveries) written as command queue entries and mailbox chains
//! into host memory, the doorbell rung, on a deterministic device that is fresh for each
//! input (a function-level reset of the process's device, `rnic_fuzz::cmd::CmdHost::reset`).
//! Every command must come back to software with a delivery status and, when delivered, a
//! command status the PRM defines; nothing may panic or keep the entry.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rnic_fuzz::cmd::CmdHost;
use std::sync::Mutex;

static HOST: Mutex<Option<CmdHost>> = Mutex::new(None);

fuzz_target!(|data: &[u8]| {
    let mut guard = HOST.lock().unwrap_or_else(|e| e.into_inner());
    let host = guard.get_or_insert_with(CmdHost::new);
    host.reset();
    host.run(data);
    // The device still answers a well-formed command (QUERY_ISSI needs no state).
    let mut q = [0u8; 16];
    q[..2].copy_from_slice(&0x10Au16.to_be_bytes());
    host.exec(&q, 0x70, rnic_fuzz::cmd::Damage(0));
});
