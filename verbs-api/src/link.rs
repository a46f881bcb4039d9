//! An in-process Ethernet switch for emulated devices: each device's port is a
//! [`rnic_emulator::port::Link`] that hands frames to the port owning the destination IPv4
//! address, if it is in the same switch (frames for other addresses are dropped, as a switch
//! with no route does). Each switch is a separate segment: the `emu0`/`emu1` pair has one, the
//! `emu:<IPv4>` devices another.
//!
//! A device thread picks frames up when it next runs its port (woken by a doorbell, or within
//! the emulator's idle period of about a millisecond).

use rnic_emulator::port::Link;
use std::collections::{HashMap, VecDeque};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, MutexGuard};

/// Frames queued per port at most (more are dropped, as a switch's full buffer would).
const QUEUE_MAX: usize = 8192;

type Queue = Arc<Mutex<VecDeque<Vec<u8>>>>;

/// A switch: the ports by IPv4 address.
#[derive(Debug, Default)]
pub(crate) struct Switch {
    ports: Mutex<HashMap<Ipv4Addr, Queue>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Switch {
    /// Attaches a port for `ip` (replacing a stale one of a closed device).
    pub(crate) fn attach(self: &Arc<Self>, ip: Ipv4Addr) -> SwitchPort {
        let q: Queue = Arc::default();
        lock(&self.ports).insert(ip, q.clone());
        SwitchPort {
            switch: self.clone(),
            ip,
            rx: q,
            spare: Vec::new(),
        }
    }
}

/// One device's port on a [`Switch`].
#[derive(Debug)]
pub(crate) struct SwitchPort {
    switch: Arc<Switch>,
    ip: Ipv4Addr,
    rx: Queue,
    spare: Vec<Vec<u8>>,
}

/// The destination IPv4 address of an Ethernet frame (with an optional 802.1Q tag).
fn dest_ipv4(frame: &[u8]) -> Option<Ipv4Addr> {
    let mut off = 12;
    let mut et = u16::from_be_bytes([*frame.get(off)?, *frame.get(off + 1)?]);
    if et == 0x8100 {
        off += 4;
        et = u16::from_be_bytes([*frame.get(off)?, *frame.get(off + 1)?]);
    }
    if et != 0x0800 {
        return None;
    }
    let d = frame.get(off + 2 + 16..off + 2 + 20)?;
    Some(Ipv4Addr::new(d[0], d[1], d[2], d[3]))
}

impl Link for SwitchPort {
    fn transmit(&mut self, frame: &[u8]) {
        let Some(dst) = dest_ipv4(frame) else { return };
        let q = lock(&self.switch.ports).get(&dst).cloned();
        if let Some(q) = q {
            let mut b = self.spare.pop().unwrap_or_default();
            b.clear();
            b.extend_from_slice(frame);
            let mut q = lock(&q);
            if q.len() < QUEUE_MAX {
                q.push_back(b);
            }
        }
    }

    fn receive(&mut self, buf: &mut Vec<u8>) -> bool {
        let Some(f) = lock(&self.rx).pop_front() else {
            return false;
        };
        buf.clear();
        buf.extend_from_slice(&f);
        if self.spare.len() < 64 {
            self.spare.push(f);
        }
        true
    }
}

impl Drop for SwitchPort {
    fn drop(&mut self) {
        let mut ports = lock(&self.switch.ports);
        if ports.get(&self.ip).is_some_and(|q| Arc::ptr_eq(q, &self.rx)) {
            ports.remove(&self.ip);
        }
    }
}
