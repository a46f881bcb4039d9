//! Links: where a device's port sends the frames that are not for itself, and where frames
//! from other devices come from. A device has one port and one link.
//!
//! - [`InProcLink::pair`]: two ends joined in-process (crossbeam channels, pooled buffers:
//!   no allocation per frame in steady state). Each end wakes the peer device's thread.
//! - [`UdpLink::bind`]: a UDP socket on `<IPv4>:4791`, the wire Linux rxe speaks; see the
//!   [`udp`] module for what the kernel adds and what is (not) ICRC-verified.
//! - [`TapLink::open`]: a Linux TAP interface (`/dev/net/tun`): whole Ethernet frames, so
//!   the device is an endpoint of its own on a Linux bridge; see the [`tap`] module.
//! - [`FaultyLink`]: wraps any link with seeded, reproducible loss, duplication, reordering,
//!   delay and corruption ([`FaultConfig`], parsed from a spec such as
//!   `loss=0.05,dup=0.01,reorder=0.01,corrupt=0.001,delay=100us,seed=7`).
//! - [`NullLink`]: nowhere (the default).
//!
//! Capture to pcap is a property of the device's port, not of a link: see
//! [`crate::Device::capture_to`].

mod faults;
mod inproc;
pub(crate) mod pcap;
mod rx_ring;
pub mod tap;
mod tap_sys;
pub mod udp;
mod udp_sys;

use std::fmt;
use std::sync::{Arc, Weak};

pub use faults::{FaultConfig, FaultCounters, FaultSpecError, FaultStats, FaultyLink, SplitMix64};
pub use inproc::{HandOffs, InProcLink, QUEUE_FRAMES};
pub use tap::{TAP_RING_FRAMES, TapError, TapLink, TapStats};
pub use udp::{LinkError, UdpLink};

use crate::Clock;

/// Wakes a device (threaded mode); does nothing for a deterministic device.
///
/// Called from inside a device's step (an in-process peer sending), the wake is deferred:
/// once the stepping thread lets go of its own device, it steps the woken device itself if
/// that one is idle, and wakes its thread only if it is busy. Called from anywhere else (a
/// socket's receive thread), it wakes the device's thread.
///
/// ```
/// use rnic_emulator::link::Waker;
///
/// Waker::default().wake(); // a deterministic device's waker does nothing
/// ```
#[derive(Clone, Default)]
pub struct Waker(Option<Weak<dyn Wake>>);

/// What a [`Waker`] wakes: a threaded device (its shared state, weakly held: two devices on
/// an in-process pair hold each other's wakers).
pub(crate) trait Wake: Send + Sync {
    /// Runs the device's pending work soon (see [`Waker`]).
    fn wake(self: Arc<Self>);
    /// Wakes the device's own thread, which takes the pending work on its core.
    fn wake_thread(self: Arc<Self>) {
        self.wake();
    }
    /// How many doorbells the host has rung on the device so far (any two reads that
    /// differ saw the host post in between), if it counts them.
    fn host_doorbells(&self) -> Option<u64> {
        None
    }
    /// Runs the device's pending work in this thread if the device is idle, else as
    /// [`Wake::wake`]; true when it ran here (see [`Waker::run`]).
    fn run(self: Arc<Self>) -> bool {
        self.wake();
        false
    }
}

impl fmt::Debug for Waker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Waker").field(&self.0.is_some()).finish()
    }
}

impl Waker {
    pub(crate) fn new(target: Option<Weak<dyn Wake>>) -> Self {
        Waker(target)
    }

    /// Wakes the device, if it is a threaded one that still exists.
    ///
    /// ```
    /// use rnic_emulator::link::Waker;
    ///
    /// let w = Waker::default(); // what a deterministic device hands its link
    /// w.clone().wake(); // no thread to wake: does nothing
    /// ```
    pub fn wake(&self) {
        if let Some(t) = self.0.as_ref().and_then(Weak::upgrade) {
            t.wake();
        }
    }

    /// Wakes the device's own thread, never running its work in this one: for work worth
    /// a core of its own (see [`InProcLink`]'s hand-off of long runs). Does nothing for a
    /// deterministic device.
    ///
    /// ```
    /// use rnic_emulator::link::Waker;
    ///
    /// Waker::default().wake_thread(); // no thread to wake: does nothing
    /// ```
    pub fn wake_thread(&self) {
        if let Some(t) = self.0.as_ref().and_then(Weak::upgrade) {
            t.wake_thread();
        }
    }

    /// How many doorbells the host has rung on the device so far, for a threaded device
    /// that still exists: two reads that differ saw the host post in between.
    ///
    /// ```
    /// use rnic_emulator::link::Waker;
    ///
    /// assert_eq!(Waker::default().host_doorbells(), None);
    /// ```
    pub fn host_doorbells(&self) -> Option<u64> {
        self.0
            .as_ref()
            .and_then(Weak::upgrade)
            .and_then(|t| t.host_doorbells())
    }

    /// For a thread of the link's own (a socket's reader) that has just handed the device
    /// frames: runs the device's work to completion in this thread when the device is idle
    /// (its lock free), as a doorbell's poster does, so no thread has to be woken; else
    /// wakes it as [`Waker::wake`] does. True when it ran here. Frames a step left for its
    /// budget ([`crate::port`]) are the caller's to run again, or to wake the device for.
    ///
    /// ```
    /// use rnic_emulator::link::Waker;
    ///
    /// assert!(!Waker::default().run()); // a deterministic device runs when its test steps it
    /// ```
    pub fn run(&self) -> bool {
        self.0
            .as_ref()
            .and_then(Weak::upgrade)
            .is_some_and(|t| t.run())
    }
}

/// What a device gives its link when it attaches it ([`Link::attach`]).
///
/// ```
/// use rnic_emulator::link::{Link, LinkEnv};
/// use rnic_emulator::{Device, Profile, RunMode};
/// use std::sync::{Arc, Mutex};
///
/// #[derive(Debug)]
/// struct Probe(Arc<Mutex<bool>>);
/// impl Link for Probe {
///     fn transmit(&mut self, _frame: &[u8]) {}
///     fn receive(&mut self, _buf: &mut Vec<u8>) -> bool { false }
///     fn attach(&mut self, env: &LinkEnv) { *self.0.lock().unwrap() = env.clock.is_virtual(); }
/// }
/// let virt = Arc::new(Mutex::new(false));
/// let _dev = Device::with_link(Profile::default(), RunMode::Deterministic, Probe(virt.clone()));
/// assert!(*virt.lock().unwrap()); // a deterministic device hands out its virtual clock
/// ```
#[derive(Clone, Debug)]
pub struct LinkEnv {
    /// The device's clock (virtual in deterministic mode): delays are measured on it.
    pub clock: Clock,
    /// Wakes the device: a link whose frames arrive asynchronously calls it.
    pub waker: Waker,
}

/// Where frames that are not for this device go, and where frames from other devices come
/// from.
///
/// A link that records what the device sends and has nothing to deliver:
///
/// ```
/// use rnic_emulator::link::Link;
///
/// #[derive(Debug, Default)]
/// struct Recorder(Vec<Vec<u8>>);
/// impl Link for Recorder {
///     fn transmit(&mut self, frame: &[u8]) { self.0.push(frame.to_vec()); }
///     fn receive(&mut self, _buf: &mut Vec<u8>) -> bool { false }
/// }
/// let mut r = Recorder::default();
/// assert_eq!(r.transmit_owned(vec![1, 2, 3]), [1, 2, 3]); // the default copies and hands back
/// assert_eq!(r.0, [vec![1, 2, 3]]);
/// ```
pub trait Link: Send + fmt::Debug {
    /// Sends a whole Ethernet frame (the link copies what it needs).
    fn transmit(&mut self, frame: &[u8]);
    /// Sends a whole Ethernet frame the link may keep; returns a buffer for the caller to
    /// reuse (cleared or not). The default copies ([`Link::transmit`]) and hands `frame`
    /// back; a link that moves buffers (the in-process pair) avoids the copy.
    fn transmit_owned(&mut self, frame: Vec<u8>) -> Vec<u8> {
        self.transmit(&frame);
        frame
    }
    /// Receives the next frame into `buf` (cleared first), if one is waiting. A link that
    /// holds frames back for a batch send ([`Link::flush`]) sends them first: a device
    /// receives after every burst it sends.
    fn receive(&mut self, buf: &mut Vec<u8>) -> bool;
    /// Whether the link takes frames whose ICRC is left out ([`Link::transmit_unsealed`]):
    /// only a link nothing can observe between the two ports, as Linux's loopback leaves out
    /// checksums. The device asks before each frame and never sends one unsealed while it
    /// captures. False unless the link says so (a fault injector, a socket: false).
    ///
    /// ```
    /// use rnic_emulator::link::{FaultyLink, InProcLink, Link};
    ///
    /// let (a, _b) = InProcLink::pair();
    /// assert!(a.takes_unsealed()); // an in-process pair: nothing in between
    /// let faulty = FaultyLink::new(a, "corrupt=1,seed=1".parse().unwrap());
    /// assert!(!faulty.takes_unsealed()); // faults must meet a real ICRC check
    /// ```
    fn takes_unsealed(&self) -> bool {
        false
    }
    /// Sends a whole RoCE v2 frame whose 4 ICRC bytes are not filled in (only when
    /// [`Link::takes_unsealed`]); returns a buffer for reuse as [`Link::transmit_owned`]. The
    /// default fills the ICRC in and transmits it as any frame, so a link that does not carry
    /// unsealed frames never sees one.
    ///
    /// ```
    /// use rnic_emulator::link::{InProcLink, Link};
    /// # use rnic_emulator::wire::*;
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let ip = IpRepr::V4(Ipv4Repr::new([10, 0, 0, 1].into(), [10, 0, 0, 2].into()));
    /// # let repr = PacketRepr::new(eth, ip, UdpRepr::new(0xC000), BthRepr::new(Opcode::RcSendOnly, 1, 0));
    /// # let mut buf = [0u8; 128];
    /// # let len = repr.emit(&mut buf, b"data").unwrap();
    /// let sealed = buf[..len].to_vec(); // a RoCE v2 frame
    /// let mut unsealed = sealed.clone();
    /// unsealed[len - 4..].fill(0); // its ICRC left out
    /// let (mut a, mut b) = InProcLink::pair();
    /// a.transmit_unsealed(unsealed);
    /// let mut got = Vec::new();
    /// assert!(b.receive(&mut got)); // whoever receives it as a frame sees it sealed
    /// assert_eq!(got, sealed);
    /// ```
    fn transmit_unsealed(&mut self, mut frame: Vec<u8>) -> Vec<u8> {
        crate::wire::icrc::seal(&mut frame);
        self.transmit_owned(frame)
    }
    /// Receives the next frame into `buf` as [`Link::receive`] does, but may leave a frame
    /// sent with [`Link::transmit_unsealed`] without its ICRC: returns `Some(true)` for a
    /// sealed frame, `Some(false)` for an unsealed one, `None` when nothing is waiting. A
    /// device receives this way only when it does not capture; the default is
    /// [`Link::receive`] (every frame sealed).
    ///
    /// ```
    /// use rnic_emulator::link::{InProcLink, Link};
    ///
    /// let (mut a, mut b) = InProcLink::pair();
    /// a.transmit(&[0xAB; 60]);
    /// let mut buf = Vec::new();
    /// assert_eq!(b.receive_unsealed(&mut buf), Some(true)); // transmit sends sealed frames
    /// assert_eq!(b.receive_unsealed(&mut buf), None);
    /// ```
    fn receive_unsealed(&mut self, buf: &mut Vec<u8>) -> Option<bool> {
        self.receive(buf).then_some(true)
    }
    /// Whether the link takes runs of packets in one buffer ([`Link::transmit_run`]): as
    /// [`Link::takes_unsealed`], only a link nothing can observe between the two ports (an
    /// in-process pair). The device asks before it builds a run and never sends one while it
    /// captures. False unless the link says so.
    ///
    /// ```
    /// use rnic_emulator::link::{FaultyLink, InProcLink, Link};
    ///
    /// let (a, _b) = InProcLink::pair();
    /// assert!(a.takes_runs());
    /// let faulty = FaultyLink::new(a, "loss=0.1,seed=1".parse().unwrap());
    /// assert!(!faulty.takes_runs()); // loss and corruption are per packet
    /// ```
    fn takes_runs(&self) -> bool {
        false
    }
    /// Sends a run of RoCE v2 packets of one message in one buffer (the first packet's
    /// headers, then every packet's payload: see [`crate::wire::GsoRun`]); only when
    /// [`Link::takes_runs`]. Returns a buffer for reuse as [`Link::transmit_owned`]. The
    /// default cuts the run into its packets, each whole and sealed, and transmits them one
    /// by one (a run it cannot cut is dropped), so a link that does not carry runs never sees
    /// one.
    ///
    /// ```
    /// use rnic_emulator::link::{InProcLink, Link};
    /// # use rnic_emulator::wire::*;
    /// # let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
    /// # let ip = IpRepr::V4(Ipv4Repr::new([10, 0, 0, 1].into(), [10, 0, 0, 2].into()));
    /// let first = PacketRepr::new(eth, ip, UdpRepr::new(0xC000), BthRepr::new(Opcode::RcSendFirst, 1, 0));
    /// let run = GsoRun { count: 2, mss: 256, last_opcode: Opcode::RcSendLast,
    ///                    last_ack_req: true, last_solicited: false };
    /// let mut buffer = vec![0u8; first.buffer_len(256)];
    /// first.emit(&mut buffer, &[0; 256]).unwrap(); // the first packet's headers...
    /// buffer.truncate(first.header_len());
    /// buffer.extend_from_slice(&[7; 300]); // ...then the payload of both
    /// let (mut a, mut b) = InProcLink::pair();
    /// a.transmit_run(buffer, run);
    /// let mut got = Vec::new();
    /// assert!(b.receive(&mut got)); // taken as frames: the two packets, whole and sealed
    /// assert_eq!(PacketRepr::parse(&got)?.0.bth.opcode, Opcode::RcSendFirst);
    /// assert!(b.receive(&mut got));
    /// let (last, data) = PacketRepr::parse(&got)?;
    /// assert_eq!((last.bth.opcode, last.bth.psn, data.len()), (Opcode::RcSendLast, 1, 44));
    /// assert!(!b.receive(&mut got));
    /// # Ok::<(), WireError>(())
    /// ```
    fn transmit_run(&mut self, frame: Vec<u8>, run: crate::wire::GsoRun) -> Vec<u8> {
        if let Some(mut cut) = Cutter::new(&frame, run) {
            let mut packet = Vec::new();
            while cut.next_packet(&frame, &mut packet) {
                self.transmit(&packet);
            }
        }
        frame
    }
    /// Receives the next frame into `buf` in the form it travels ([`FrameForm`]): sealed,
    /// unsealed ([`Link::transmit_unsealed`]) or a run of packets ([`Link::transmit_run`]);
    /// `None` when nothing is waiting. A device receives this way when it does not capture;
    /// the default is [`Link::receive_unsealed`].
    ///
    /// ```
    /// use rnic_emulator::link::{FrameForm, InProcLink, Link};
    ///
    /// let (mut a, mut b) = InProcLink::pair();
    /// a.transmit(&[0xAB; 60]);
    /// let mut buf = Vec::new();
    /// assert_eq!(b.receive_form(&mut buf), Some(FrameForm::Sealed));
    /// assert_eq!(b.receive_form(&mut buf), None);
    /// ```
    fn receive_form(&mut self, buf: &mut Vec<u8>) -> Option<FrameForm> {
        self.receive_unsealed(buf).map(|sealed| {
            if sealed {
                FrameForm::Sealed
            } else {
                FrameForm::Unsealed
            }
        })
    }
    /// Sends the frames the link holds back to batch them (the UDP link queues what
    /// [`Link::transmit_owned`] hands it, up to 64 frames, for one system call); a link
    /// that sends at once does nothing. [`Link::receive`] flushes too.
    ///
    /// ```
    /// use rnic_emulator::link::{Link, NullLink};
    ///
    /// let mut l = NullLink::default();
    /// l.flush(); // sends at once: nothing held back
    /// ```
    fn flush(&mut self) {}
    /// Called once when the link is attached to a device.
    fn attach(&mut self, _env: &LinkEnv) {}
    /// The device-clock time (ns) at which the link next has something to do on its own
    /// (a delayed frame to release), if any.
    fn next_deadline_ns(&self) -> Option<u64> {
        None
    }
    /// Whether received frames carry the sender's real IP header. False for a UDP socket,
    /// which sees no IP ID (see [`udp`]).
    fn rx_ip_header_exact(&self) -> bool {
        true
    }
    /// Received frames the link dropped before the device saw them, counted since the link
    /// was made. The device adds them to its drop counters ([`crate::RxDrops::ring_full`],
    /// [`crate::RxDrops::malformed`], [`crate::RxDrops::link_overflow`]). Links without a
    /// receive ring of their own report 0.
    fn rx_drops(&self) -> LinkRxDrops {
        LinkRxDrops::default()
    }
}

impl<L: Link + ?Sized> Link for Box<L> {
    fn transmit(&mut self, frame: &[u8]) {
        (**self).transmit(frame);
    }
    fn transmit_owned(&mut self, frame: Vec<u8>) -> Vec<u8> {
        (**self).transmit_owned(frame)
    }
    fn receive(&mut self, buf: &mut Vec<u8>) -> bool {
        (**self).receive(buf)
    }
    fn takes_unsealed(&self) -> bool {
        (**self).takes_unsealed()
    }
    fn transmit_unsealed(&mut self, frame: Vec<u8>) -> Vec<u8> {
        (**self).transmit_unsealed(frame)
    }
    fn receive_unsealed(&mut self, buf: &mut Vec<u8>) -> Option<bool> {
        (**self).receive_unsealed(buf)
    }
    fn takes_runs(&self) -> bool {
        (**self).takes_runs()
    }
    fn transmit_run(&mut self, frame: Vec<u8>, run: crate::wire::GsoRun) -> Vec<u8> {
        (**self).transmit_run(frame, run)
    }
    fn receive_form(&mut self, buf: &mut Vec<u8>) -> Option<FrameForm> {
        (**self).receive_form(buf)
    }
    fn flush(&mut self) {
        (**self).flush();
    }
    fn attach(&mut self, env: &LinkEnv) {
        (**self).attach(env);
    }
    fn next_deadline_ns(&self) -> Option<u64> {
        (**self).next_deadline_ns()
    }
    fn rx_ip_header_exact(&self) -> bool {
        (**self).rx_ip_header_exact()
    }
    fn rx_drops(&self) -> LinkRxDrops {
        (**self).rx_drops()
    }
}

/// How a frame travels on a link ([`Link::receive_form`]).
///
/// ```
/// use rnic_emulator::link::FrameForm;
///
/// assert_ne!(FrameForm::Sealed, FrameForm::Unsealed);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameForm {
    /// A whole RoCE v2 (or any Ethernet) frame, RoCE frames with their ICRC.
    Sealed,
    /// A whole RoCE v2 frame whose ICRC is left out ([`Link::transmit_unsealed`]).
    Unsealed,
    /// A run of packets of one message in one buffer, unsealed ([`Link::transmit_run`]).
    Run(crate::wire::GsoRun),
}

/// A run of packets ([`crate::wire::GsoRun`]) being cut into its packets, each emitted
/// whole and sealed, as its sender would have sent them one by one: for whoever takes
/// frames as frames.
#[derive(Debug)]
pub(crate) struct Cutter {
    first: crate::wire::PacketRepr,
    run: crate::wire::GsoRun,
    next: u16,
}

impl Cutter {
    /// The cutter of the run in `frame`; `None` when it describes no real packets
    /// ([`crate::wire::GsoRun::parse`]).
    pub(crate) fn new(frame: &[u8], run: crate::wire::GsoRun) -> Option<Cutter> {
        run.parse(frame).ok().map(|first| Cutter::of(first, run))
    }

    /// The cutter of a run already parsed: `first` is its first packet's headers.
    pub(crate) fn of(first: crate::wire::PacketRepr, run: crate::wire::GsoRun) -> Cutter {
        Cutter {
            first,
            run,
            next: 0,
        }
    }

    /// Emits the next packet of the run (whose buffer is `frame`) into `out`; false when
    /// none is left.
    pub(crate) fn next_packet(&mut self, frame: &[u8], out: &mut Vec<u8>) -> bool {
        if self.next == self.run.count {
            return false;
        }
        let payload = frame.get(self.first.header_len()..).unwrap_or(&[]);
        out.resize(self.first.buffer_len(usize::from(self.run.mss)), 0);
        let Ok(n) = self.run.emit_packet(&self.first, payload, self.next, out) else {
            return false;
        };
        out.truncate(n);
        self.next += 1;
        true
    }
}

/// Received frames a link dropped before its device saw them ([`Link::rx_drops`]).
///
/// ```
/// use rnic_emulator::link::{Link, LinkRxDrops, NullLink};
///
/// assert_eq!(NullLink::default().rx_drops(), LinkRxDrops::default()); // no ring, no drops
/// ```
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LinkRxDrops {
    /// The link's receive ring was full (the device did not keep up).
    pub ring_full: u64,
    /// Larger than the largest RoCE v2 frame (MTU 4096), so larger than a ring buffer.
    pub oversize: u64,
    /// Lost before the link could take them: the medium's own buffer overflowed (a UDP
    /// link's kernel socket buffer, as `SO_RXQ_OVFL` reports it).
    pub overflow: u64,
    /// Not frames the link could hand out: a run of packets ([`crate::wire::GsoRun`]) that
    /// describes no real packets, taken by someone who takes frames as frames.
    pub malformed: u64,
}

/// A link to nowhere: frames sent are dropped, nothing arrives.
///
/// ```
/// use rnic_emulator::link::{Link, NullLink};
///
/// let mut l = NullLink::default();
/// l.transmit(&[0; 60]);
/// assert_eq!(l.dropped, 1);
/// assert!(!l.receive(&mut Vec::new()));
/// ```
#[derive(Debug, Default)]
pub struct NullLink {
    /// Frames dropped so far.
    pub dropped: u64,
}

impl Link for NullLink {
    fn transmit(&mut self, _frame: &[u8]) {
        self.dropped += 1;
    }

    fn receive(&mut self, _buf: &mut Vec<u8>) -> bool {
        false
    }
}
