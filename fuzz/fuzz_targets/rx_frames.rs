//! Frames into a live emulated device's receive path: the input is one Ethernet frame, as
//! the peer of the device's RC, UC and UD QPs would send it (see `rnic_fuzz::LiveDevice`).
//!
//! After each frame: the frame was taken and counted exactly once (handed to the transport,
//! or dropped by one of the port's rules), the drop counters add up to `rx_dropped`, the
//! transport's own drops are of frames it was handed, no completion appeared on a send CQ
//! and every receive completion is one the driver can match to a posted receive; then the
//! QPs the frame moved out of RTS are recovered and a loopback UD SEND still completes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rnic_fuzz::{LiveDevice, Peer, pre_transport_drops};
use std::sync::Mutex;

static DEVICE: Mutex<Option<LiveDevice>> = Mutex::new(None);

fuzz_target!(|frame: &[u8]| {
    let mut guard = DEVICE.lock().unwrap_or_else(|e| e.into_inner());
    let d = guard.get_or_insert_with(|| LiveDevice::new(Peer::Remote));
    let before = d.counters();
    let delivered = d.wire.0.lock().unwrap().delivered;
    d.wire.0.lock().unwrap().to_device.push_back(frame.to_vec());
    d.dev.step();
    let after = d.counters();
    let w = d.wire.0.lock().unwrap();
    assert_eq!(w.delivered, delivered + 1, "the device took the frame");
    assert!(w.to_device.is_empty());
    drop(w);

    // Received = handed to the transport + dropped by the port, once.
    let handed = after.frames_rx - before.frames_rx;
    let port_drops = pre_transport_drops(&after) - pre_transport_drops(&before);
    assert_eq!(handed + port_drops, 1, "{before:?} -> {after:?}");
    assert_eq!(
        after.rx_dropped,
        after.drops.total(),
        "drops add up: {after:?}"
    );
    let transport_drops = (after.rx_dropped - before.rx_dropped) - port_drops;
    assert!(transport_drops <= handed, "{before:?} -> {after:?}");

    d.drain_cqs();
    d.recover();
    d.probe();
});
