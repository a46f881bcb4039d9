//! The device's end of a reader thread's receive ring, which the UDP and TAP links share: a
//! thread reads the medium and puts frames on a bounded ring; the device takes them off and
//! hands a buffer back for each, so the reader's pool stays at its size (no allocation per
//! frame); dropping the end stops the thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;

use crossbeam::queue::ArrayQueue;

use super::{LinkEnv, Waker};

/// The two queues of a receive ring, each of the ring's capacity: frames from the reader
/// to the device, and the buffers the device emptied back to the reader. Lock-free and
/// never blocking (neither side ever waits on them: the reader wakes the device, the
/// device never waits for the reader).
#[derive(Debug)]
pub(super) struct Queues {
    /// Frames from the reader.
    pub(super) frames: ArrayQueue<Vec<u8>>,
    /// Emptied buffers back to the reader.
    pub(super) free: ArrayQueue<Vec<u8>>,
}

impl Queues {
    /// A ring of `capacity` frames (at least 1).
    pub(super) fn new(capacity: usize) -> Arc<Queues> {
        let capacity = capacity.max(1);
        Arc::new(Queues {
            frames: ArrayQueue::new(capacity),
            free: ArrayQueue::new(capacity),
        })
    }
}

/// The device's end of a receive ring and the thread that fills it.
#[derive(Debug)]
pub(super) struct RingEnd {
    /// Frames from the reader, buffers back.
    queues: Arc<Queues>,
    /// The device's waker, for the reader (set when the link is attached).
    waker: Arc<OnceLock<Waker>>,
    /// Tells the reader to stop.
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<()>>,
}

impl RingEnd {
    /// The end of the ring `queues` that `reader` fills, waking the device through `waker`
    /// and stopping when `stop` is set.
    pub(super) fn new(
        queues: Arc<Queues>,
        waker: Arc<OnceLock<Waker>>,
        stop: Arc<AtomicBool>,
        reader: JoinHandle<()>,
    ) -> RingEnd {
        RingEnd {
            queues,
            waker,
            stop,
            reader: Some(reader),
        }
    }

    /// Takes the next frame into `buf` and hands the buffer `buf` held back to the reader,
    /// one for the one taken. False when the ring is empty.
    pub(super) fn take(&self, buf: &mut Vec<u8>) -> bool {
        match self.queues.frames.pop() {
            Some(mut f) => {
                std::mem::swap(buf, &mut f);
                f.clear();
                // Never full: the reader has at most the ring's capacity in buffers.
                let _ = self.queues.free.push(f);
                true
            }
            None => false,
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
