//! One frame into the live device's receive path and the checks after it (the `rx_frames`
//! target; `examples/replay_rx.rs` replays a logged sequence of them).

use crate::{LiveDevice, pre_transport_drops};

/// Feeds `frame` from the link, steps the device and checks what the `rx_frames` target
/// documents; panics on a finding.
pub fn rx_frame(d: &mut LiveDevice, frame: &[u8]) {
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
    // Handed to the transport, or delivered to a raw RQ by the steering stage.
    let handed = after.frames_rx - before.frames_rx;
    let steered = after.raw_rx - before.raw_rx;
    let port_drops = pre_transport_drops(&after) - pre_transport_drops(&before);
    assert_eq!(handed + steered + port_drops, 1, "{before:?} -> {after:?}");
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
}

/// Appends `data` (length-prefixed) to the file `RNIC_FUZZ_LOG` names, if set: the inputs
/// a live-device target saw, in order, for a finding that depends on earlier inputs.
pub fn log_input(data: &[u8]) {
    use std::io::Write;
    // Looked up once: an environment lookup per input costs a lock and an allocation.
    static LOG: std::sync::OnceLock<Option<std::ffi::OsString>> = std::sync::OnceLock::new();
    if let Some(path) = LOG.get_or_init(|| std::env::var_os("RNIC_FUZZ_LOG")) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("log file");
        f.write_all(&(data.len() as u32).to_le_bytes())
            .expect("log");
        f.write_all(data).expect("log");
    }
}
