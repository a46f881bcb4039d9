//! Runs of packets in one buffer into a live emulated device's receive path, as an
//! in-process peer's link hands them (`rnic_emulator::wire::GsoRun`; any `Link` may hand
//! the device one): the input is the run's description (`rnic_fuzz::rx::RUN_HEADER` bytes)
//! and its buffer, from the peer of the device's RC, UC and UD QPs.
//!
//! After each run: it was taken once and each packet it claims counted once (handed to the
//! transport, steered, or dropped by one of the port's rules; a run that describes no real
//! packets is dropped whole), the drop counters add up to `rx_dropped`, the transport's own
//! drops are of packets it was handed; then the checks of `rx_frames` (`rnic_fuzz::rx::rx_run`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rnic_fuzz::rx::{log_input, rx_run};
use rnic_fuzz::{LiveDevice, Peer};
use std::sync::Mutex;

static DEVICE: Mutex<Option<LiveDevice>> = Mutex::new(None);

fuzz_target!(|input: &[u8]| {
    let mut guard = DEVICE.lock().unwrap_or_else(|e| e.into_inner());
    let d = guard.get_or_insert_with(|| LiveDevice::new(Peer::Remote));
    log_input(input);
    rx_run(d, input);
});
