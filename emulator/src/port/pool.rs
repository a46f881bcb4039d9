//! The port's frame buffers, kept for reuse so a steady flow of packets allocates nothing.
//!
//! A pooled buffer keeps the length of its last frame: the in-process link hands buffers
//! back uncleared, and the frame emitter overwrites every byte it sizes, so only the bytes
//! beyond that length need zeroing when a buffer grows. Buffers are therefore kept in two
//! stacks by that length, short (an ACK, a small message) and long (a full-MTU packet):
//! a full packet takes a long buffer and an ACK a short one, so a long buffer is not cut to
//! an ACK's length and then zeroed back up to a packet's (without the split, 5% of a 64 KiB
//! WRITE's instructions at MTU 4096 went to that zeroing).

use crate::wire::FRAME_CAPACITY;

/// Buffers kept for reuse, per stack.
const POOL_MAX: usize = 256;

/// The length from which a buffer counts as long: above any ACK, CNP or short request
/// (those are at most about 100 bytes), below a packet at the smallest path MTU (256).
const LONG: usize = 256;

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
}

impl FramePool {
    /// A pool with [`PREFILL`] long buffers.
    pub(crate) fn new() -> Self {
        FramePool {
            short: Vec::new(),
            long: (0..PREFILL).map(|_| vec![0; FRAME_CAPACITY]).collect(),
        }
    }

    /// A buffer whose contents the caller replaces whole (a link's receive swaps its own
    /// buffer in and sends this one back to the sender), of the class the caller expects the
    /// arriving frame to have (`long`): the sender has just spent a buffer of that class, and
    /// gets this one in its place. A stream of long packets one way and of ACKs the other
    /// then keeps each side's stacks as they were; sending long buffers back for ACKs would
    /// leave the packets' sender with only short ones after a while.
    pub(crate) fn for_swap(&mut self, long: bool) -> Vec<u8> {
        self.take(long)
    }

    /// An empty buffer.
    pub(crate) fn empty(&mut self) -> Vec<u8> {
        let mut b = self.take(false);
        b.clear();
        b
    }

    /// A buffer of `len` bytes whose contents are whatever its last use left, for a writer
    /// that overwrites every byte: taken from the stack of its own size, so that at most the
    /// bytes beyond the last frame's length are zeroed.
    pub(crate) fn sized(&mut self, len: usize) -> Vec<u8> {
        let mut b = self.take(is_long(len));
        if b.len() >= len {
            b.truncate(len);
        } else {
            b.resize(len, 0);
        }
        b
    }

    /// Gives a buffer back.
    pub(crate) fn recycle(&mut self, b: Vec<u8>) {
        let stack = self.stacks(is_long(b.len())).0;
        if stack.len() < POOL_MAX {
            stack.push(b);
        }
    }

    /// A buffer of the class asked for, else of the other, else a new one; with room for
    /// any frame.
    fn take(&mut self, long: bool) -> Vec<u8> {
        let (first, second) = self.stacks(long);
        let mut b = first.pop().or_else(|| second.pop()).unwrap_or_default();
        reserve_frame(&mut b);
        b
    }

    /// The stack of the class asked for, then the other.
    fn stacks(&mut self, long: bool) -> (&mut Vec<Vec<u8>>, &mut Vec<Vec<u8>>) {
        if long {
            (&mut self.long, &mut self.short)
        } else {
            (&mut self.short, &mut self.long)
        }
    }
}

/// Whether a frame of `len` bytes is a long one (see [`LONG`]).
pub(crate) fn is_long(len: usize) -> bool {
    len >= LONG
}

/// Every pooled buffer gets the capacity of the largest RoCE v2 frame: a buffer swapped in
/// from a link may be smaller (an ACK); growing it once here keeps a later, larger packet
/// from reallocating on the data path.
fn reserve_frame(b: &mut Vec<u8>) {
    if b.capacity() < FRAME_CAPACITY {
        b.reserve(FRAME_CAPACITY - b.len());
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
        assert_eq!(p.for_swap(true).len(), 1000);
        assert_eq!(p.for_swap(false).len(), 60);
        assert!(p.empty().is_empty());
        assert_eq!(
            p.for_swap(false).len(),
            1000,
            "the other class when one is empty"
        );
        assert!(
            p.for_swap(true).capacity() >= FRAME_CAPACITY,
            "a new one is sized"
        );
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
