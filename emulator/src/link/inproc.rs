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
//! device, when it does not capture, takes it unsealed and skips the check. For the same
//! reason it carries runs of packets in one buffer ([`Link::takes_runs`],
//! [`crate::wire::GsoRun`]), as Linux's loopback carries a 64 KiB TCP segment whole: the peer
//! device takes the run as it is, anyone who takes frames as frames gets its packets one
//! by one, each emitted whole and sealed.
//!
//! A long run (64 KiB or more) goes to the peer device's own thread, when the peer's host
//! has rung no doorbell on it since the last one: the copy into the peer's memory then runs
//! on another core while the sender's thread goes back to its application, as a NIC's DMA
//! engine works beside the CPU (`rnic write-bw -q 128 --loopback`: 6,190 -> 8,633 MiB/s,
//! median of 6, on this project's 2-core VM). A host that posts on the peer (a ping-pong, a
//! bidirectional test) keeps the sender's thread stepping the peer itself: with two busy
//! applications a third busy thread would have no core (`write-lat -s 65536`, t_typical
//! 5.0 -> 11.1 us when every run of 16 KiB or more was handed off). Shorter runs and
//! frames never are: their copy costs less than a cross-core hand-off ([`HandOffs`] counts
//! the runs that were).

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

use super::{Cutter, FrameForm, Link, LinkEnv, LinkRxDrops, Waker};
use crate::wire::GsoRun;

/// A run at least this long (bytes, its buffer) is handed to the peer device's own thread
/// while the peer's host rings no doorbells (see the module docs).
const HAND_OFF_BYTES: usize = 64 * 1024;

/// How many long runs an in-process end handed to its peer device's own thread (see the
/// module docs); a handle that stays readable once the end is moved into its device.
///
/// ```
/// use rnic_emulator::link::InProcLink;
///
/// let (a, _b) = InProcLink::pair();
/// let hand_offs = a.hand_offs();
/// assert_eq!(hand_offs.get(), 0); // no device on either end: nothing to hand to
/// ```
#[derive(Clone, Debug, Default)]
pub struct HandOffs(Arc<AtomicU64>);

impl HandOffs {
    /// The runs handed off so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// One direction's frames, each in the form it travels.
type Frames = ArrayQueue<(Vec<u8>, FrameForm)>;

/// A run of packets handed out one packet at a time, to a receiver that takes frames as
/// frames: its buffer and where the cut is.
#[derive(Debug)]
struct Cutting {
    buf: Vec<u8>,
    cut: Cutter,
}

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
    /// Frames to the peer, each in the form it travels (see [`Link::transmit_unsealed`],
    /// [`Link::transmit_run`]). Shared with the peer only: a count of one means the peer is
    /// gone.
    tx: Arc<Frames>,
    /// Frames from the peer.
    rx: Arc<Frames>,
    /// The run whose packets [`Link::receive`] is handing out.
    cutting: Option<Cutting>,
    /// Runs from the peer that described no real packets (never from a device's emitter).
    malformed: u64,
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
    /// The peer host's doorbell count when we last sent a long run (see [`HAND_OFF_BYTES`]).
    peer_doorbells: Option<u64>,
    /// Long runs handed to the peer device's thread.
    hand_offs: HandOffs,
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
            cutting: None,
            malformed: 0,
            free_rx: Arc::clone(&free_to_a),
            free_tx: Arc::clone(&free_to_b),
            peer: Arc::clone(&wb),
            me: Arc::clone(&wa),
            dropped: Arc::default(),
            rx_full: Arc::clone(&full_a),
            peer_rx_full: Arc::clone(&full_b),
            peer_doorbells: None,
            hand_offs: HandOffs::default(),
        };
        let b = InProcLink {
            tx: ba,
            rx: ab,
            cutting: None,
            malformed: 0,
            free_rx: free_to_b,
            free_tx: free_to_a,
            peer: wa,
            me: wb,
            dropped: Arc::default(),
            rx_full: full_b,
            peer_rx_full: full_a,
            peer_doorbells: None,
            hand_offs: HandOffs::default(),
        };
        (a, b)
    }

    /// Frames waiting at this end (a run of packets counts as one).
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

    /// The count of long runs this end handed to its peer device's own thread (see the
    /// module docs).
    ///
    /// ```
    /// use rnic_emulator::link::InProcLink;
    ///
    /// let (a, _b) = InProcLink::pair();
    /// assert_eq!(a.hand_offs().get(), 0);
    /// ```
    pub fn hand_offs(&self) -> HandOffs {
        self.hand_offs.clone()
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
        self.send(b, FrameForm::Sealed);
    }

    fn transmit_owned(&mut self, frame: Vec<u8>) -> Vec<u8> {
        // The frame travels as is; a buffer the peer gave back replaces it.
        let spare = self.free_rx.pop().unwrap_or_default();
        self.send(frame, FrameForm::Sealed);
        spare
    }

    fn receive(&mut self, buf: &mut Vec<u8>) -> bool {
        match self.take(buf, false) {
            Some(form) => {
                // Whoever takes a frame this way may look at it: it gets its ICRC.
                if form == FrameForm::Unsealed {
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
        self.send(frame, FrameForm::Unsealed);
        spare
    }

    fn receive_unsealed(&mut self, buf: &mut Vec<u8>) -> Option<bool> {
        self.take(buf, false).map(|form| form == FrameForm::Sealed)
    }

    /// Nothing sits between the ends: the peer device takes a run whole.
    fn takes_runs(&self) -> bool {
        true
    }

    fn transmit_run(&mut self, frame: Vec<u8>, run: GsoRun) -> Vec<u8> {
        let spare = self.free_rx.pop().unwrap_or_default();
        self.send(frame, FrameForm::Run(run));
        spare
    }

    fn receive_form(&mut self, buf: &mut Vec<u8>) -> Option<FrameForm> {
        self.take(buf, true)
    }

    fn attach(&mut self, env: &LinkEnv) {
        let _ = self.me.set(env.waker.clone());
    }

    fn rx_drops(&self) -> LinkRxDrops {
        LinkRxDrops {
            ring_full: self.rx_full.load(Ordering::Relaxed),
            malformed: self.malformed,
            ..LinkRxDrops::default()
        }
    }
}

impl InProcLink {
    /// Queues `b` (in `form`) for the peer and wakes it.
    #[inline(always)]
    fn send(&mut self, b: Vec<u8>, form: FrameForm) {
        let frames = match form {
            FrameForm::Run(run) => u64::from(run.count),
            _ => 1,
        };
        // A peer that is gone drops the frame, as an unplugged cable does; a full queue
        // drops it as congestion does (a run: each of its packets).
        if Arc::strong_count(&self.tx) == 1 {
            self.dropped.fetch_add(frames, Ordering::Relaxed);
            return;
        }
        let long_run = matches!(form, FrameForm::Run(_)) && b.len() >= HAND_OFF_BYTES;
        let hand_off = long_run && self.peer_host_idle();
        match self.tx.push((b, form)) {
            Ok(()) => {
                if let Some(w) = self.peer.get() {
                    if hand_off {
                        self.hand_offs.0.fetch_add(1, Ordering::Relaxed);
                        w.wake_thread();
                    } else {
                        w.wake();
                    }
                }
            }
            Err(_) => {
                self.dropped.fetch_add(frames, Ordering::Relaxed);
                self.peer_rx_full.fetch_add(frames, Ordering::Relaxed);
            }
        }
    }

    /// Whether the peer's host rang no doorbell on it since our last long run (false the
    /// first time, and for a peer that does not count them).
    fn peer_host_idle(&mut self) -> bool {
        let n = self.peer.get().and_then(Waker::host_doorbells);
        n.is_some() && std::mem::replace(&mut self.peer_doorbells, n) == n
    }

    /// The next frame into `buf`: the next packet of a run being cut, else the next frame
    /// in the form it came, a run cut into its packets unless `runs` (the taker takes runs
    /// whole).
    #[inline(always)]
    fn take(&mut self, buf: &mut Vec<u8>, runs: bool) -> Option<FrameForm> {
        loop {
            if self.cutting.is_some()
                && let Some(form) = self.cut_next(buf)
            {
                return Some(form);
            }
            // Most looks find nothing: the cheap test first.
            if self.rx.is_empty() {
                return None;
            }
            let (mut f, form) = self.rx.pop()?;
            if !runs && matches!(form, FrameForm::Run(_)) {
                if self.cut(f, form, buf) {
                    return Some(FrameForm::Sealed);
                }
                continue;
            }
            std::mem::swap(buf, &mut f);
            // Not cleared: whoever reuses it sizes it (a frame emitter then overwrites the
            // old bytes instead of zeroing them first).
            let _ = self.free_tx.push(f);
            return Some(form);
        }
    }

    /// The next packet of the run being cut into `buf`; `None` once it is done (its buffer
    /// goes back to the sender).
    #[cold]
    #[inline(never)]
    fn cut_next(&mut self, buf: &mut Vec<u8>) -> Option<FrameForm> {
        let c = self.cutting.as_mut()?;
        if c.cut.next_packet(&c.buf, buf) {
            return Some(FrameForm::Sealed);
        }
        if let Some(c) = self.cutting.take() {
            let _ = self.free_tx.push(c.buf);
        }
        None
    }

    /// Starts cutting the run `f` (its form `form`) into packets, for a taker that takes
    /// frames as frames: its first packet into `buf`. False for a run that describes no real
    /// packets: dropped and counted.
    #[cold]
    #[inline(never)]
    fn cut(&mut self, f: Vec<u8>, form: FrameForm, buf: &mut Vec<u8>) -> bool {
        let FrameForm::Run(run) = form else {
            let _ = self.free_tx.push(f);
            return false;
        };
        if let Some(mut cut) = Cutter::new(&f, run)
            && cut.next_packet(&f, buf)
        {
            self.cutting = Some(Cutting { buf: f, cut });
            return true;
        }
        let _ = self.free_tx.push(f);
        // Each packet it claims, and at least the buffer that came.
        self.malformed += u64::from(run.count.max(1));
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A peer device as the link sees it: its host's doorbell count, and how it was woken.
    #[derive(Default)]
    struct Peer {
        doorbells: AtomicU64,
        wakes: AtomicU64,
        thread_wakes: AtomicU64,
    }

    impl crate::link::Wake for Peer {
        fn wake(self: Arc<Self>) {
            self.wakes.fetch_add(1, Ordering::Relaxed);
        }
        fn wake_thread(self: Arc<Self>) {
            self.thread_wakes.fetch_add(1, Ordering::Relaxed);
        }
        fn host_doorbells(&self) -> Option<u64> {
            Some(self.doorbells.load(Ordering::Relaxed))
        }
    }

    fn run_of(len: usize) -> (Vec<u8>, GsoRun) {
        let run = GsoRun {
            count: 17,
            mss: 4096,
            last_opcode: crate::wire::Opcode::RcRdmaWriteLast,
            last_ack_req: true,
            last_solicited: false,
        };
        (vec![0; len], run)
    }

    #[test]
    fn long_runs_go_to_the_peers_thread_while_its_host_is_idle() {
        let (mut a, _b) = InProcLink::pair();
        let peer = Arc::new(Peer::default());
        let weak: std::sync::Weak<dyn crate::link::Wake> =
            Arc::downgrade(&(Arc::clone(&peer) as Arc<dyn crate::link::Wake>));
        assert!(a.peer.set(Waker::new(Some(weak))).is_ok());
        let seen = |p: &Peer| {
            (
                p.wakes.load(Ordering::Relaxed),
                p.thread_wakes.load(Ordering::Relaxed),
            )
        };
        let (f, run) = run_of(HAND_OFF_BYTES + 60);
        // The first long run: nothing known of the peer's host yet.
        a.transmit_run(f.clone(), run);
        assert_eq!(seen(&peer), (1, 0));
        // No doorbell on the peer since: handed off.
        a.transmit_run(f.clone(), run);
        assert_eq!(seen(&peer), (1, 1));
        // The peer's host posts: the sender's thread steps the peer again.
        peer.doorbells.fetch_add(1, Ordering::Relaxed);
        a.transmit_run(f.clone(), run);
        assert_eq!(seen(&peer), (2, 1));
        // Short runs and frames never go, idle host or not.
        let (short, run) = run_of(HAND_OFF_BYTES - 1);
        a.transmit_run(short, run);
        a.transmit(&[0; 60]);
        assert_eq!(seen(&peer), (4, 1));
        a.transmit_run(f, run);
        assert_eq!(seen(&peer), (4, 2));
        assert_eq!(a.hand_offs().get(), 2);
    }

    #[test]
    fn a_peer_that_counts_no_doorbells_is_never_handed_runs() {
        let (mut a, _b) = InProcLink::pair();
        let (f, run) = run_of(HAND_OFF_BYTES);
        for _ in 0..3 {
            a.transmit_run(f.clone(), run);
        }
        assert_eq!(
            a.hand_offs().get(),
            0,
            "no waker: a deterministic or absent peer"
        );
    }

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
