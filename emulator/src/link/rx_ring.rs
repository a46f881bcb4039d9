//! The device's end of a reader thread's receive ring, which the UDP and TAP links share: a
//! thread reads the medium and puts frames on a bounded ring; the device takes them off and
//! hands a buffer back for each, so the reader's pool stays at its size (no allocation per
//! frame); dropping the end stops the thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;

use crossbeam::channel::{Receiver, Sender};

use super::{LinkEnv, Waker};

/// The device's end of a receive ring and the thread that fills it.
#[derive(Debug)]
pub(super) struct RingEnd {
    /// Frames from the reader.
    rx: Receiver<Vec<u8>>,
    /// Emptied buffers back to the reader.
    free: Sender<Vec<u8>>,
    /// The device's waker, for the reader (set when the link is attached).
    waker: Arc<OnceLock<Waker>>,
    /// Tells the reader to stop.
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<()>>,
}

impl RingEnd {
    /// The end of the ring `rx` / `free` that `reader` fills, waking the device through
    /// `waker` and stopping when `stop` is set.
    pub(super) fn new(
        rx: Receiver<Vec<u8>>,
        free: Sender<Vec<u8>>,
        waker: Arc<OnceLock<Waker>>,
        stop: Arc<AtomicBool>,
        reader: JoinHandle<()>,
    ) -> RingEnd {
        RingEnd {
            rx,
            free,
            waker,
            stop,
            reader: Some(reader),
        }
    }

    /// Takes the next frame into `buf` and hands the buffer `buf` held back to the reader,
    /// one for the one taken. False when the ring is empty.
    pub(super) fn take(&self, buf: &mut Vec<u8>) -> bool {
        match self.rx.try_recv() {
            Ok(mut f) => {
                std::mem::swap(buf, &mut f);
                f.clear();
                let _ = self.free.try_send(f);
                true
            }
            Err(_) => false,
        }
    }

    /// Gives the reader the device's waker ([`super::Link::attach`]).
    pub(super) fn attach(&self, env: &LinkEnv) {
        let _ = self.waker.set(env.waker.clone());
    }
}

impl Drop for RingEnd {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.reader.take() {
            // The reader runs the device's work in its own thread at times (see
            // `Waker::run`): when the device's last handle went away meanwhile, the device,
            // and this end with it, is dropped there. It stops on its own once this returns.
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}
