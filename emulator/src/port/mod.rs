//! The device's one Ethernet port: where the transport's frames leave and arrive.
//!
//! A frame the transport emits whose destination IP is one of this device's own GIDs (GID
//! table entries with RoCE v2) is looped back to the receive path inside the port, as a NIC's
//! internal loopback does; any other frame goes to the port's [`Link`]. Received frames are
//! queued and processed by the device's `step` until the port is idle: each is checked
//! (structure, ICRC, destination QP, destination IP), then handed to the responder (requests)
//! or the completer (ACKs and responses). Malformed or unroutable frames are dropped and
//! counted in `rx_dropped` and, per rule, in [`crate::Counters::drops`]. ACKs the responder
//! owes are coalesced: one ACK per QP for each burst of received frames, sent when the port
//! runs out of frames (or before any other response of that QP, to keep the order). The
//! port can also write everything it sends and receives to a pcap file
//! ([`crate::Device::capture_to`]).
//!
//! The port takes at most a budget of frames before it sends what it owes (READ responses,
//! coalesced ACKs) and hands back to the device, which runs its doorbells and timers: a
//! link that never runs dry (a flood) does not starve a live connection.
//!
//! Frame buffers are pooled, so a steady flow of packets does not allocate.

use std::collections::VecDeque;
use std::fmt;

pub(crate) mod rx;
pub(crate) mod tx;

use crate::link::LinkRxDrops;
use crate::link::pcap::Capture;
pub use crate::link::{Link, NullLink};

/// Frame buffers kept for reuse.
const POOL_MAX: usize = 256;

// Every pooled buffer gets the capacity of the largest RoCE v2 frame: buffers swapped in
// from a link may be smaller (an ACK); growing them once here keeps a later, larger packet
// from reallocating on the data path.
pub(crate) use crate::wire::FRAME_CAPACITY;

/// The port: link, loopback queue, buffer pool.
pub(crate) struct Port {
    link: Box<dyn Link>,
    rx: VecDeque<Vec<u8>>,
    pool: Vec<Vec<u8>>,
    /// A reusable payload buffer for the transport (gather / READ responses).
    pub(crate) scratch: Vec<u8>,
    /// QPs whose responder owes an ACK (coalesced, sent when the port is idle).
    pub(crate) ack_pending: Vec<u32>,
    /// QPs whose responder has READ responses left to send.
    pub(crate) read_pending: VecDeque<u32>,
    /// The capture file, when capturing.
    pub(crate) capture: Option<Capture>,
    /// The link's [`Link::rx_drops`] as last added to the counters.
    link_drops_seen: LinkRxDrops,
}

impl fmt::Debug for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Port")
            .field("link", &self.link)
            .field("rx_queued", &self.rx.len())
            .finish_non_exhaustive()
    }
}

impl Port {
    /// A port with a [`NullLink`].
    pub(crate) fn new() -> Self {
        Port {
            link: Box::new(NullLink::default()),
            rx: VecDeque::new(),
            pool: Vec::new(),
            scratch: Vec::new(),
            ack_pending: Vec::new(),
            read_pending: VecDeque::new(),
            capture: None,
            link_drops_seen: LinkRxDrops::default(),
        }
    }

    /// After a function-level reset: the link and the capture stay (the cable is still
    /// plugged in), what was queued for the old QPs goes.
    pub(crate) fn reset(&mut self) {
        self.rx.clear();
        self.ack_pending.clear();
        self.read_pending.clear();
    }

    /// Replaces the port's link.
    pub(crate) fn set_link(&mut self, link: Box<dyn Link>) {
        self.link_drops_seen = link.rx_drops();
        self.link = link;
    }

    /// The frames the link dropped since the last call ([`rx::sync_link_drops`] adds them to
    /// the counters).
    pub(crate) fn take_link_drops(&mut self) -> LinkRxDrops {
        let now = self.link.rx_drops();
        let seen = std::mem::replace(&mut self.link_drops_seen, now);
        LinkRxDrops {
            ring_full: now.ring_full.saturating_sub(seen.ring_full),
            oversize: now.oversize.saturating_sub(seen.oversize),
            overflow: now.overflow.saturating_sub(seen.overflow),
        }
    }

    /// Whether a frame may leave without its ICRC: the link takes unsealed frames
    /// ([`Link::takes_unsealed`]) and the port does not capture.
    pub(crate) fn takes_unsealed(&self) -> bool {
        self.capture.is_none() && self.link.takes_unsealed()
    }

    /// The link's own next deadline (delayed frames).
    pub(crate) fn link_deadline(&self) -> Option<u64> {
        self.link.next_deadline_ns()
    }

    /// A buffer for [`crate::link::Link::receive`], which replaces its contents: not
    /// cleared, so the bytes it keeps go back to the link's pool sized (an in-process
    /// peer's emitter then overwrites them instead of zeroing them first, see
    /// [`Port::frame_buffer`]).
    pub(crate) fn rx_buffer(&mut self) -> Vec<u8> {
        let mut b = self.pool.pop().unwrap_or_default();
        if b.capacity() < FRAME_CAPACITY {
            b.reserve(FRAME_CAPACITY - b.len());
        }
        b
    }

    /// An empty frame buffer.
    pub(crate) fn buffer(&mut self) -> Vec<u8> {
        let mut b = self.pool.pop().unwrap_or_default();
        b.clear();
        b.reserve(FRAME_CAPACITY);
        b
    }

    /// A frame buffer of `len` bytes whose contents are whatever its last use left: for a
    /// writer that overwrites every byte (the frame emitter), so no zeroing pass is spent.
    /// Pooled buffers keep the length of their last frame (the in-process link hands them
    /// back uncleared), so only bytes beyond it are zeroed.
    pub(crate) fn frame_buffer(&mut self, len: usize) -> Vec<u8> {
        let mut b = self.pool.pop().unwrap_or_default();
        if b.capacity() < FRAME_CAPACITY {
            b.reserve(FRAME_CAPACITY - b.len());
        }
        if b.len() >= len {
            b.truncate(len);
        } else {
            b.resize(len, 0);
        }
        b
    }

    /// Gives a frame buffer back to the pool.
    pub(crate) fn recycle(&mut self, b: Vec<u8>) {
        if self.pool.len() < POOL_MAX {
            self.pool.push(b);
        }
    }

    /// Frames waiting to be processed.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.rx.len()
    }
}
