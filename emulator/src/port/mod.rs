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
//! Frame buffers are pooled (the `pool` module), so a steady flow of packets does not
//! allocate.

use std::collections::VecDeque;
use std::fmt;

mod pool;
pub(crate) mod rx;
pub(crate) mod tx;

use crate::link::pcap::Capture;
use crate::link::{FrameForm, LinkRxDrops};
pub use crate::link::{Link, NullLink};

use pool::FramePool;

/// The port: link, loopback queue, buffer pool.
pub(crate) struct Port {
    link: Box<dyn Link>,
    rx: VecDeque<Vec<u8>>,
    pool: FramePool,
    /// The buffer the link swaps the next received frame into ([`Port::receive_from_link`]).
    rx_spare: Vec<u8>,
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
            pool: FramePool::new(),
            rx_spare: Vec::with_capacity(crate::wire::FRAME_CAPACITY),
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
            malformed: now.malformed.saturating_sub(seen.malformed),
        }
    }

    /// Whether a frame may leave without its ICRC: the link takes unsealed frames
    /// ([`Link::takes_unsealed`]) and the port does not capture.
    pub(crate) fn takes_unsealed(&self) -> bool {
        self.capture.is_none() && self.link.takes_unsealed()
    }

    /// Whether a run of packets may leave in one buffer ([`crate::wire::GsoRun`]): the link
    /// takes runs ([`Link::takes_runs`]) and the port does not capture.
    pub(crate) fn takes_runs(&self) -> bool {
        self.capture.is_none() && self.link.takes_runs()
    }

    /// The link's own next deadline (delayed frames).
    pub(crate) fn link_deadline(&self) -> Option<u64> {
        self.link.next_deadline_ns()
    }

    /// The next frame from the link and its form, if one is waiting. A capturing port
    /// writes what it receives, so it takes every frame whole and sealed.
    ///
    /// The link swaps the frame into the port's spare buffer and sends the spare's old
    /// buffer back to the sender, so the spare is replaced from the pool only when a frame
    /// came (an empty look costs no pool traffic), by one of the class of the frame that
    /// came: streams come in bursts of one class (a message's packets, or its ACKs), and the
    /// next buffer the sender gets back should be of the class it spends
    /// ([`FramePool::for_swap`]).
    pub(crate) fn receive_from_link(&mut self) -> Option<(Vec<u8>, FrameForm)> {
        let form = if self.capture.is_some() {
            self.link
                .receive(&mut self.rx_spare)
                .then_some(FrameForm::Sealed)
        } else {
            self.link.receive_form(&mut self.rx_spare)
        }?;
        let next = self.pool.for_swap(pool::Class::of(self.rx_spare.len()));
        Some((std::mem::replace(&mut self.rx_spare, next), form))
    }

    /// An empty frame buffer.
    pub(crate) fn buffer(&mut self) -> Vec<u8> {
        self.pool.empty()
    }

    /// A frame buffer of `len` bytes whose contents are whatever its last use left: for a
    /// writer that overwrites every byte (the frame emitter), so no zeroing pass is spent
    /// ([`FramePool::sized`]).
    #[inline]
    pub(crate) fn frame_buffer(&mut self, len: usize) -> Vec<u8> {
        self.pool.sized(len)
    }

    /// Gives a frame buffer back to the pool.
    pub(crate) fn recycle(&mut self, b: Vec<u8>) {
        self.pool.recycle(b);
    }

    /// Frames waiting to be processed.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.rx.len()
    }
}
