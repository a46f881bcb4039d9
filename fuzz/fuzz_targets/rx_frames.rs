//! Frames into a live emulated device's receive path: the input is one Ethernet frame, as
//! the peer of the device's RC, UC and UD QPs would send it (see `rnic_fuzz::LiveDevice`).
//!
//! After each frame: the frame was taken and counted exactly once (handed to the transport,
//! or dropped by one of the port's rules), the drop counters add up to `rx_dropped`, the
//! transport's own drops are of frames it was handed, no completion appeared on a send CQ
//! and every receive completion is one the driver can match to a posted receive; then the
//! QPs the frame moved out of RTS are recovered and a loopback UD SEND still completes
//! (`rnic_fuzz::rx::rx_frame`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rnic_fuzz::rx::{log_input, rx_frame};
use rnic_fuzz::{LiveDevice, Peer};
use std::sync::Mutex;

static DEVICE: Mutex<Option<LiveDevice>> = Mutex::new(None);

fuzz_target!(|frame: &[u8]| {
    let mut guard = DEVICE.lock().unwrap_or_else(|e| e.into_inner());
    let d = guard.get_or_insert_with(|| LiveDevice::new(Peer::Remote));
    log_input(frame);
    rx_frame(d, frame);
});
