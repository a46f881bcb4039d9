//! An in-process link: two ends joined by bounded lock-free queues (crossbeam's
//! `ArrayQueue`: nothing here blocks, so a channel's waker bookkeeping would be spent for
//! nothing on every frame).
//!
//! Frames travel in pooled buffers: the receiving end swaps the sender's buffer into the
//! device's and sends its old buffer back on a return queue, so a steady flow allocates
//! nothing (the queues are bounded, array-backed: [`QUEUE_FRAMES`] frames per direction;
//! a frame sent into a full queue is dropped, as a NIC drops a frame its full receive ring
//! cannot take, and counted on both ends: the sender's [`InProcLink::dropped`] and the
//! receiver's [`Link::rx_drops`] `ring_full`, which its device counts as
//! [`crate::RxDrops::ring_full`]).
//! Each end wakes the peer device when it sends, so a threaded device runs as soon as a frame
//! arrives.
//!
//! Nothing sits between the two ends, so the pair takes frames without their ICRC
//! ([`Link::takes_unsealed`]), as Linux's loopback leaves out checksums: a frame is sealed
//! (its ICRC filled in) only when someone takes it as a frame ([`Link::receive`]); the peer
//! device, when it does not capture, takes it unsealed and skips the check.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam::queue::ArrayQueue;

/// Frames each direction holds before it drops (a 1 MiB READ at MTU 256 is 4096 frames).
///
/// ```
/// use rnic_emulator::link::{InProcLink, Link, QUEUE_FRAMES};
///
/// let (mut a, b) = InProcLink::pair();
/// for _ in 0..=QUEUE_FRAMES {
///     a.transmit(&[0; 60]);
/// }
/// assert_eq!((b.pending(), a.dropped()), (QUEUE_FRAMES, 1)); // a full queue drops
/// ```
pub const QUEUE_FRAMES: usize = 16384;

use super::{Link, LinkEnv, LinkRxDrops, Waker};

/// One direction's frames, each with whether its ICRC is filled in.
type Frames = ArrayQueue<(Vec<u8>, bool)>;

/// One end of an in-process link (see [`InProcLink::pair`]).
///
/// ```
/// use rnic_emulator::link::{InProcLink, Link};
///
/// let (mut a, mut b) = InProcLink::pair();
/// a.transmit(b"first");
/// a.transmit(b"second");
/// let mut buf = Vec::new();
/// assert!(b.receive(&mut buf) && buf == b"first"); // in order
/// assert!(b.receive(&mut buf) && buf == b"second");
/// assert!(!b.receive(&mut buf));
/// ```
#[derive(Debug)]
pub struct InProcLink {
    /// Frames to the peer, each with whether its ICRC is filled in (see
    /// [`Link::transmit_unsealed`]). Shared with the peer only: a count of one means the
    /// peer is gone.
    tx: Arc<Frames>,
    /// Frames from the peer, each with whether its ICRC is filled in.
    rx: Arc<Frames>,
    /// Empty buffers the peer gave back (for our transmits).
    free_rx: Arc<ArrayQueue<Vec<u8>>>,
    /// Where our emptied buffers go (the peer's transmits).
    free_tx: Arc<ArrayQueue<Vec<u8>>>,
    /// The peer device's waker (set when the peer attaches).
    peer: Arc<OnceLock<Waker>>,
    /// Our device's waker slot (the peer wakes it).
    me: Arc<OnceLock<Waker>>,
    /// Frames dropped because the peer's queue was full (or the peer is gone).
    dropped: Arc<AtomicU64>,
    /// Frames the peer sent that our full queue dropped (shared with the peer's end).
    rx_full: Arc<AtomicU64>,
    /// Frames we sent that the peer's full queue dropped (the peer's `rx_full`).
    peer_rx_full: Arc<AtomicU64>,
}

impl InProcLink {
    /// Two joined ends: what one transmits, the other receives, in order, without loss.
    ///
    /// ```
    /// use rnic_emulator::link::{InProcLink, Link};
    ///
    /// let (mut a, mut b) = InProcLink::pair();
    /// b.transmit(&[0xAB; 60]);
    /// let mut buf = Vec::new();
    /// assert!(a.receive(&mut buf));
    /// assert_eq!(buf, [0xAB; 60]);
    /// ```
    pub fn pair() -> (InProcLink, InProcLink) {
        let ab = Arc::new(ArrayQueue::new(QUEUE_FRAMES));
        let ba = Arc::new(ArrayQueue::new(QUEUE_FRAMES));
        // Buffers the A side received go back to B (B transmits A's receives) and vice versa.
        let free_to_b = Arc::new(ArrayQueue::new(QUEUE_FRAMES));
        let free_to_a = Arc::new(ArrayQueue::new(QUEUE_FRAMES));
        let wa: Arc<OnceLock<Waker>> = Arc::default();
        let wb: Arc<OnceLock<Waker>> = Arc::default();
        let (full_a, full_b): (Arc<AtomicU64>, Arc<AtomicU64>) = (Arc::default(), Arc::default());
        let a = InProcLink {
            tx: Arc::clone(&ab),
            rx: Arc::clone(&ba),
            free_rx: Arc::clone(&free_to_a),
            free_tx: Arc::clone(&free_to_b),
            peer: Arc::clone(&wb),
            me: Arc::clone(&wa),
            dropped: Arc::default(),
            rx_full: Arc::clone(&full_a),
            peer_rx_full: Arc::clone(&full_b),
        };
        let b = InProcLink {
            tx: ba,
            rx: ab,
            free_rx: free_to_b,
            free_tx: free_to_a,
            peer: wa,
            me: wb,
            dropped: Arc::default(),
            rx_full: full_b,
            peer_rx_full: full_a,
        };
        (a, b)
    }

    /// Frames waiting at this end.
    ///
    /// ```
    /// use rnic_emulator::link::{InProcLink, Link};
    ///
    /// let (mut a, b) = InProcLink::pair();
    /// a.transmit(&[0; 60]);
    /// a.transmit(&[0; 60]);
    /// assert_eq!((a.pending(), b.pending()), (0, 2));
    /// ```
    pub fn pending(&self) -> usize {
        self.rx.len()
    }

    /// Frames this end could not deliver (the peer's queue full, or the peer gone).
    ///
    /// ```
    /// use rnic_emulator::link::{InProcLink, Link};
    ///
    /// let (mut a, b) = InProcLink::pair();
    /// drop(b); // the peer is gone
    /// a.transmit(&[0; 60]);
    /// assert_eq!(a.dropped(), 1);
    /// ```
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

impl Link for InProcLink {
    fn transmit(&mut self, frame: &[u8]) {
        let mut b = self.free_rx.pop().unwrap_or_default();
        b.clear();
        b.extend_from_slice(frame);
        self.send(b, true);
    }

    fn transmit_owned(&mut self, frame: Vec<u8>) -> Vec<u8> {
        // The frame travels as is; a buffer the peer gave back replaces it.
        let spare = self.free_rx.pop().unwrap_or_default();
        self.send(frame, true);
        spare
    }

    fn receive(&mut self, buf: &mut Vec<u8>) -> bool {
        match self.receive_unsealed(buf) {
            Some(sealed) => {
                // Whoever takes a frame this way may look at it: it gets its ICRC.
                if !sealed {
                    crate::wire::icrc::seal(buf);
                }
                true
            }
            None => false,
        }
    }

    /// An in-process pair has nothing between its ends that could look at or change a
    /// frame: the receiving device skips the ICRC check of a frame sent unsealed.
    fn takes_unsealed(&self) -> bool {
        true
    }

    fn transmit_unsealed(&mut self, frame: Vec<u8>) -> Vec<u8> {
        let spare = self.free_rx.pop().unwrap_or_default();
        self.send(frame, false);
        spare
    }

    fn receive_unsealed(&mut self, buf: &mut Vec<u8>) -> Option<bool> {
        let (mut f, sealed) = self.rx.pop()?;
        std::mem::swap(buf, &mut f);
        // Not cleared: whoever reuses it sizes it (a frame emitter then overwrites the old
        // bytes instead of zeroing them first).
        let _ = self.free_tx.push(f);
        Some(sealed)
    }

    fn attach(&mut self, env: &LinkEnv) {
        let _ = self.me.set(env.waker.clone());
    }

    fn rx_drops(&self) -> LinkRxDrops {
        LinkRxDrops {
            ring_full: self.rx_full.load(Ordering::Relaxed),
            ..LinkRxDrops::default()
        }
    }
}

impl InProcLink {
    /// Queues `b` (its ICRC filled in when `sealed`) for the peer and wakes it.
    fn send(&mut self, b: Vec<u8>, sealed: bool) {
        // A peer that is gone drops the frame, as an unplugged cable does; a full queue
        // drops it as congestion does.
        if Arc::strong_count(&self.tx) == 1 {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        match self.tx.push((b, sealed)) {
            Ok(()) => {
                if let Some(w) = self.peer.get() {
                    w.wake();
                }
            }
            Err(_) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                self.peer_rx_full.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_cross_in_order_and_buffers_are_reused() {
        let (mut a, mut b) = InProcLink::pair();
        let mut buf = Vec::new();
        for i in 0..10u8 {
            a.transmit(&[i; 100]);
        }
        assert_eq!(b.pending(), 10);
        for i in 0..10u8 {
            assert!(b.receive(&mut buf));
            assert_eq!(buf, [i; 100]);
        }
        assert!(!b.receive(&mut buf));
        // B's emptied buffers are now A's to reuse.
        assert!(a.free_rx.len() >= 9);
        drop(b);
        a.transmit(&[1]);
        assert_eq!(a.dropped(), 1, "the peer is gone");
    }

    #[test]
    fn a_full_queue_is_the_receivers_ring_full() {
        let (mut a, mut b) = InProcLink::pair();
        for _ in 0..QUEUE_FRAMES + 3 {
            a.transmit(&[0; 60]);
        }
        assert_eq!(a.dropped(), 3);
        assert_eq!(b.rx_drops().ring_full, 3, "counted where the ring was full");
        assert_eq!(a.rx_drops().ring_full, 0);
        let mut buf = Vec::new();
        assert!(b.receive(&mut buf));
        b.transmit(&[1; 60]);
        assert_eq!(
            a.rx_drops(),
            LinkRxDrops::default(),
            "A's own queue never overflowed"
        );
    }
}
