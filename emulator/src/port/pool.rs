//! The port's frame buffers, kept for reuse so a steady flow of packets allocates nothing.
//!
//! A pooled buffer keeps the length of its last frame: the in-process link hands buffers
//! back uncleared, and the frame emitter overwrites every byte it sizes, so only the bytes
//! beyond that length need zeroing when a buffer grows. Buffers are therefore kept in
//! stacks by that length, short (an ACK, a small message), long (a full-MTU packet) and
//! run (a run of packets in one buffer, [`crate::wire::GsoRun`]): a full packet takes a
//! long buffer and an ACK a short one, so a long buffer is not cut to an ACK's length and
//! then zeroed back up to a packet's (without the split, 5% of a 64 KiB WRITE's
//! instructions at MTU 4096 went to that zeroing), and a run takes a buffer that has held
//! one, so it neither grows nor zeroes one.

use crate::wire::{FRAME_CAPACITY, GSO_MAX_BYTES};

/// Buffers kept for reuse, per stack.
const POOL_MAX: usize = 256;

/// The length from which a buffer counts as long: above any ACK, CNP or short request
/// (those are at most about 100 bytes), below a packet at the smallest path MTU (256).
const LONG: usize = 256;

/// The capacity of a run's buffer: the largest run's payload and the first packet's
/// headers.
const RUN_CAPACITY: usize = FRAME_CAPACITY + GSO_MAX_BYTES;

/// A buffer's class, by the length its last frame left it (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// An ACK, a CNP, a short request.
    Short,
    /// A packet of up to one path MTU.
    Long,
    /// A run of packets.
    Run,
}

impl Class {
    /// The class of a buffer holding a frame of `len` bytes.
    #[inline]
    pub(crate) fn of(len: usize) -> Class {
        if len > FRAME_CAPACITY {
            Class::Run
        } else if len >= LONG {
            Class::Long
        } else {
            Class::Short
        }
    }

    /// The capacity a buffer of the class gets (see [`reserve`]).
    fn capacity(self) -> usize {
        match self {
            Class::Run => RUN_CAPACITY,
            _ => FRAME_CAPACITY,
        }
    }
}

/// Long buffers a new pool starts with. Buffers in flight sit in the link (an in-process
/// link's return queue) between a packet's send and the next, so a pool that grew only on
/// demand holds one or two; the first packet of each message would then take the short
/// buffer the last ACK arrived in and zero it up to a packet's length.
const PREFILL: usize = 16;

/// Frame buffers by the length their last frame left them (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct FramePool {
    short: Vec<Vec<u8>>,
    long: Vec<Vec<u8>>,
    run: Vec<Vec<u8>>,
}

impl FramePool {
    /// A pool with [`PREFILL`] long buffers.
    pub(crate) fn new() -> Self {
        FramePool {
            short: Vec::new(),
            long: (0..PREFILL).map(|_| vec![0; FRAME_CAPACITY]).collect(),
            run: Vec::new(),
        }
    }

    /// A buffer whose contents the caller replaces whole (a link's receive swaps its own
    /// buffer in and sends this one back to the sender), of the class the caller expects the
    /// arriving frame to have: the sender has just spent a buffer of that class, and gets
    /// this one in its place. A stream of long packets one way and of ACKs the other then
    /// keeps each side's stacks as they were; sending long buffers back for ACKs would leave
    /// the packets' sender with only short ones after a while.
    pub(crate) fn for_swap(&mut self, class: Class) -> Vec<u8> {
        self.take(class)
    }

    /// An empty buffer.
    pub(crate) fn empty(&mut self) -> Vec<u8> {
        let mut b = self.take(Class::Short);
        b.clear();
        b
    }

    /// A buffer of `len` bytes whose contents are whatever its last use left, for a writer
    /// that overwrites every byte: taken from the stack of its own size, so that at most the
    /// bytes beyond the last frame's length are zeroed.
    #[inline]
    pub(crate) fn sized(&mut self, len: usize) -> Vec<u8> {
        let mut b = self.take(Class::of(len));
        if b.len() >= len {
            b.truncate(len);
        } else {
            b.resize(len, 0);
        }
        b
    }

    /// Gives a buffer back.
    #[inline]
    pub(crate) fn recycle(&mut self, b: Vec<u8>) {
        let stack = self.stack(Class::of(b.len()));
        if stack.len() < POOL_MAX {
            stack.push(b);
        }
    }

    /// A buffer of the class asked for, else of another (short and long take each other's
    /// before a run's, a run takes a long one first), else a new one; with room for any frame
    /// of its class.
    #[inline]
    fn take(&mut self, class: Class) -> Vec<u8> {
        let (a, b, c) = match class {
            Class::Short => (&mut self.short, &mut self.long, &mut self.run),
            Class::Long => (&mut self.long, &mut self.short, &mut self.run),
            Class::Run => (&mut self.run, &mut self.long, &mut self.short),
        };
        let mut buf = a
            .pop()
            .or_else(|| b.pop())
            .or_else(|| c.pop())
            .unwrap_or_default();
        reserve(&mut buf, class.capacity());
        buf
    }

    /// The stack of a class.
    fn stack(&mut self, class: Class) -> &mut Vec<Vec<u8>> {
        match class {
            Class::Short => &mut self.short,
            Class::Long => &mut self.long,
            Class::Run => &mut self.run,
        }
    }
}

/// Every pooled buffer gets the capacity of the largest frame of its class (a RoCE v2
/// packet, or a run): a buffer swapped in from a link may be smaller (an ACK); growing it
/// once here keeps a later, larger frame from reallocating on the data path.
fn reserve(b: &mut Vec<u8>, capacity: usize) {
    if b.capacity() < capacity {
        b.reserve(capacity - b.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_packet_takes_a_long_buffer_and_an_ack_a_short_one() {
        let mut p = FramePool::default();
        p.recycle(vec![7; 60]);
        p.recycle(vec![9; 4000]);
        let ack = p.sized(58);
        assert_eq!(
            (ack.len(), ack[0]),
            (58, 7),
            "the ACK took the short buffer"
        );
        let pkt = p.sized(4100);
        assert_eq!(pkt.len(), 4100);
        assert_eq!(pkt[0], 9, "the packet took the long buffer");
        assert!(
            pkt[4000..].iter().all(|&x| x == 0),
            "only the new tail is zeroed"
        );
        assert!(pkt.capacity() >= FRAME_CAPACITY && ack.capacity() >= FRAME_CAPACITY);
    }

    #[test]
    fn either_stack_serves_when_the_other_is_empty() {
        let mut p = FramePool::default();
        p.recycle(vec![1; 4000]);
        assert_eq!(p.sized(60).len(), 60);
        p.recycle(vec![2; 60]);
        assert_eq!(p.sized(4000)[..60], [2; 60]);
        assert_eq!(p.sized(10), vec![0; 10], "a new buffer when both are empty");
    }

    #[test]
    fn a_swap_buffer_is_of_the_class_asked_for_and_an_empty_one_is_empty() {
        let mut p = FramePool::default();
        for _ in 0..2 {
            p.recycle(vec![1; 60]);
            p.recycle(vec![2; 1000]);
        }
        assert_eq!(p.for_swap(Class::Long).len(), 1000);
        assert_eq!(p.for_swap(Class::Short).len(), 60);
        assert!(p.empty().is_empty());
        assert_eq!(
            p.for_swap(Class::Short).len(),
            1000,
            "the other class when one is empty"
        );
        assert!(
            p.for_swap(Class::Long).capacity() >= FRAME_CAPACITY,
            "a new one is sized"
        );
    }

    #[test]
    fn a_run_takes_a_run_buffer_and_gives_one_back() {
        let mut p = FramePool::default();
        p.recycle(vec![1; 60]);
        p.recycle(vec![2; 1000]);
        p.recycle(vec![3; 20_000]);
        assert_eq!(Class::of(20_000), Class::Run);
        // An ACK and a packet leave the run's buffer alone...
        assert_eq!(p.sized(58)[0], 1);
        assert_eq!(p.sized(1000)[0], 2);
        // ...and a run gets it, grown to the largest run without a new allocation later.
        let run = p.sized(30_000);
        assert_eq!(run[0], 3);
        assert!(run.capacity() >= RUN_CAPACITY);
        p.recycle(run);
        assert_eq!(
            p.for_swap(Class::Run).len(),
            30_000,
            "swapped for a run that came"
        );
        // With no run buffer left, a run takes a long one and grows it.
        p.recycle(vec![4; 4000]);
        let grown = p.sized(GSO_MAX_BYTES);
        assert_eq!((grown[0], grown.capacity() >= RUN_CAPACITY), (4, true));
    }

    #[test]
    fn each_stack_is_bounded() {
        let mut p = FramePool::default();
        for _ in 0..POOL_MAX + 5 {
            p.recycle(vec![0; 10]);
            p.recycle(vec![0; 1000]);
        }
        assert_eq!((p.short.len(), p.long.len()), (POOL_MAX, POOL_MAX));
    }
}
