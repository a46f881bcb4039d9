//! The devices open in this process, by canonical name: what opening a device
//! ([`crate::Context`]) and listing devices ([`crate::devices`]) share. Entries are held
//! type-erased so this room needs neither of them (no import circle).

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, Weak};

/// One open device's handle. A dead entry is a device being closed: its handle's `Drop`
/// removes it once the device is gone.
pub(crate) type Entry = Weak<dyn Any + Send + Sync>;

/// The registry: canonical name -> handle.
pub(crate) type Open = BTreeMap<String, Entry>;

static OPEN: Mutex<Open> = Mutex::new(BTreeMap::new());

/// Locks the registry (a panic while it was held does not poison it: entries are plain
/// weak handles, always consistent).
pub(crate) fn lock() -> MutexGuard<'static, Open> {
    OPEN.lock().unwrap_or_else(|e| e.into_inner())
}

/// The names of the `emu:<IPv4>` and `emu-tap:...` devices open now.
pub(crate) fn open_emulated_by_address() -> Vec<String> {
    lock()
        .iter()
        .filter(|(n, w)| {
            w.strong_count() > 0 && (n.starts_with("emu:") || n.starts_with("emu-tap:"))
        })
        .map(|(n, _)| n.clone())
        .collect()
}
