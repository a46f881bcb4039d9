//! One frame into the live device's receive path and the checks after it (the `rx_frames`
//! target; `examples/replay_rx.rs` replays a logged sequence of them), and the same for a
//! run of packets in one buffer (the `rx_runs` target).

use rnic_emulator::wire::{GsoRun, Opcode};

use crate::{LiveDevice, pre_transport_drops};

/// Bytes of an `rx_runs` input before the run's buffer: its [`GsoRun`] (count and segment
/// size little-endian, the last packet's opcode, a flags byte: bit 0 AckReq, bit 1 SE).
pub const RUN_HEADER: usize = 6;

/// The run an `rx_runs` input describes and its buffer (an input too short for the header
/// is a run of nothing; an opcode byte that is no opcode reads as RC SEND LAST).
pub fn run_of(input: &[u8]) -> (GsoRun, &[u8]) {
    let mut h = [0u8; RUN_HEADER];
    let n = input.len().min(RUN_HEADER);
    h[..n].copy_from_slice(&input[..n]);
    let run = GsoRun {
        count: u16::from_le_bytes([h[0], h[1]]),
        mss: u16::from_le_bytes([h[2], h[3]]),
        last_opcode: Opcode::from_u8(h[4]).unwrap_or(Opcode::RcSendLast),
        last_ack_req: h[5] & 1 != 0,
        last_solicited: h[5] & 2 != 0,
    };
    (run, &input[n..])
}

/// The `rx_runs` input for `run` and its buffer (what [`run_of`] reads).
pub fn run_input(run: &GsoRun, buffer: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(RUN_HEADER + buffer.len());
    v.extend_from_slice(&run.count.to_le_bytes());
    v.extend_from_slice(&run.mss.to_le_bytes());
    v.push(run.last_opcode.as_u8());
    v.push(u8::from(run.last_ack_req) | u8::from(run.last_solicited) << 1);
    v.extend_from_slice(buffer);
    v
}

/// Feeds the run an `rx_runs` input describes from the link, steps the device and checks
/// what the `rx_runs` target documents; panics on a finding.
pub fn rx_run(d: &mut LiveDevice, input: &[u8]) {
    let (run, buffer) = run_of(input);
    let before = d.counters();
    let delivered = d.wire.0.lock().unwrap().delivered;
    d.wire
        .0
        .lock()
        .unwrap()
        .runs_to_device
        .push_back((buffer.to_vec(), run));
    d.dev.step();
    let after = d.counters();
    let w = d.wire.0.lock().unwrap();
    assert_eq!(w.delivered, delivered + 1, "the device took the run");
    assert!(w.runs_to_device.is_empty());
    drop(w);

    // Each packet the run claims (a run that describes none: the buffer itself) handed to
    // the transport, steered, or dropped by the port, once.
    let packets = u64::from(run.count.max(1));
    let handed = after.frames_rx - before.frames_rx;
    let steered = after.raw_rx - before.raw_rx;
    let port_drops = pre_transport_drops(&after) - pre_transport_drops(&before);
    assert_eq!(
        handed + steered + port_drops,
        packets,
        "{run:?}: {before:?} -> {after:?}"
    );
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
