//! WQEs posted to a live emulated SQ or RQ: the input's first byte picks the RC, UC or UD
//! QP (byte % 3; each connected to itself, see `rnic_fuzz::Peer::Itself`) and the queue
//! (bit 7: the RQ). For the SQ the rest is up to eight 64-byte WQE basic blocks written
//! from index 0, the doorbell record and the UAR doorbell written as a driver writes them;
//! for the RQ up to four receive WQEs, then a real SEND the QP sends itself consumes the
//! first (`rnic_fuzz::wqe`).
//!
//! The device must answer with CQEs a device may write (requester success or error on the
//! send CQ, responder completions on the receive CQ, each naming a WQE that exists), or
//! with nothing; it must not panic or hang. Afterwards the QP is reset and brought back to
//! RTS, and a loopback UD SEND still completes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rnic_fuzz::{LiveDevice, Peer, wqe};
use std::sync::Mutex;

static DEVICE: Mutex<Option<LiveDevice>> = Mutex::new(None);

fuzz_target!(|data: &[u8]| {
    let Some((&sel, wqes)) = data.split_first() else {
        return;
    };
    let mut guard = DEVICE.lock().unwrap_or_else(|e| e.into_inner());
    let d = guard.get_or_insert_with(|| LiveDevice::new(Peer::Itself));
    let i = usize::from(sel % 3);
    if sel & 0x80 == 0 {
        let nbb = wqe::post_raw(d, i, wqes);
        d.dev.step();
        for t in d.targets() {
            wqe::check_cqes(&t.send_cq, true, nbb);
            wqe::check_cqes(&t.recv_cq, false, u16::MAX);
        }
    } else {
        // Receive WQEs, consumed by a real SEND the QP sends itself (one send block).
        wqe::post_raw_recv(d, i, wqes);
        d.dev.step();
        for t in d.targets() {
            wqe::check_cqes(&t.send_cq, true, 1);
            wqe::check_cqes(&t.recv_cq, false, u16::MAX);
        }
    }
    wqe::reset_target(d, i);
    d.recover();
    d.probe();
});
