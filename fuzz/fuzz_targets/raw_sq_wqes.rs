//! WQEs posted to a live emulated raw Ethernet SQ: the input is a flags byte and up to
//! eight 64-byte WQE basic blocks written into a fresh SQ's ring from index 0, the
//! doorbell record's send counter and the UAR doorbell written as the driver writes them
//! (`rnic_fuzz::raw`).
//!
//! The device must answer with requester CQEs only (success or error, each naming a posted
//! block), send at most one frame per block, not panic or hang; the SQ and its CQ then
//! destroy without a command error, and a second raw SQ still sends a frame that completes
//! with success and leaves on the link.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rnic_fuzz::raw::RawHarness;
use std::sync::Mutex;

static HARNESS: Mutex<Option<RawHarness>> = Mutex::new(None);

fuzz_target!(|data: &[u8]| {
    let mut guard = HARNESS.lock().unwrap_or_else(|e| e.into_inner());
    let h = guard.get_or_insert_with(RawHarness::new);
    h.run(data);
});
