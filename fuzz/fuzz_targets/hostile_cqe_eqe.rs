//! A hostile device: arbitrary CQEs and EQEs where the driver reads them. The input is a
//! sequence of 65-byte records, a kind byte then 64 bytes (see `rnic_fuzz::hostile`):
//! a CQE written into an RC QP's send or receive CQ (with a real SEND and a real receive
//! outstanding, so some CQEs are plausible), an EQE written into a driver event queue's
//! ring, or an EQE the device itself generates into the HCA's event queue (GEN_EQE), which
//! `Hca::process_events` then serves (page requests included).
//!
//! Polling must give completions or typed errors (`PollError::BadCqe`, an unknown event
//! type, a `DriverError`), never a panic, a hang or UB; afterwards the objects are
//! destroyed and the device still serves a loopback UD SEND.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rnic_fuzz::hostile::Hostile;
use std::sync::Mutex;

static HARNESS: Mutex<Option<Hostile>> = Mutex::new(None);

fuzz_target!(|data: &[u8]| {
    let mut guard = HARNESS.lock().unwrap_or_else(|e| e.into_inner());
    let h = guard.get_or_insert_with(Hostile::new);
    h.run(data);
});
