//! A TAP link: whole Ethernet frames between the emulated port and a Linux TAP interface
//! (`/dev/net/tun`, `IFF_TAP | IFF_NO_PI`), so the emulated ConnectX is an Ethernet endpoint
//! of its own, on a Linux bridge or a TAP a VM or a test uses, with no kernel IP address or
//! socket on its behalf: what the port sends is what the kernel receives on the interface, and
//! what the kernel sends out of the interface (ARP, IPv6, RoCE from rxe over a bridge, ...) is
//! what the port receives, headers and MACs as they were.
//!
//! **ICRC.** The kernel sees every frame as it is, so the link never takes frames without
//! their ICRC ([`Link::takes_unsealed`] is false): every RoCE frame leaves sealed, and every
//! received frame carries the sender's real IP header, so the port checks its ICRC exactly
//! ([`Link::rx_ip_header_exact`]).
//!
//! **Sending.** [`Link::transmit`] writes the frame to the non-blocking descriptor before it
//! returns: one `write` per frame, no copy, no allocation. A frame longer than the
//! interface's MTU allows (MTU + the Ethernet header + one 802.1Q tag) is dropped and counted
//! ([`TapStats::tx_oversize`]), as a NIC drops it; a write the kernel refuses (the interface
//! is down: `EIO`; its queue full: `EAGAIN`) is dropped and counted
//! ([`TapStats::tx_errors`]).
//!
//! **Receiving.** A reader thread waits on the descriptor (`poll`, so it can stop), reads
//! every frame queued (up to 64 a batch), hands them to the device through a bounded
//! receive ring and wakes it once a batch, as the UDP link does: buffers circulate between
//! the ring and the device and are allocated once each (at most the ring's capacity), so a
//! steady flow allocates nothing. A frame that finds the ring full is read anyway (so the
//! kernel's queue does not back up) and dropped and counted ([`TapStats::ring_full`], the
//! device's [`crate::RxDrops::ring_full`]); one longer than the MTU allows is dropped and
//! counted ([`TapStats::rx_oversize`], the device's [`crate::RxDrops::malformed`]).
//!
//! **Privileges.** Creating a TAP interface, or attaching to one another user owns, needs
//! `CAP_NET_ADMIN`; without it [`TapLink::open`] fails with [`TapError::PermissionDenied`].
//! A persistent TAP made for the user (`ip tuntap add mode tap user $USER name tap0`) opens
//! without it.
//!
//! Setting up a bridge for it (as root):
//!
//! ```text
//! ip link add br0 type bridge && ip link set br0 up
//! ip tuntap add mode tap name rnic0 && ip link set rnic0 master br0 up
//! # then Device::on_tap(profile, RunMode::Threaded, "rnic0")
//! ```

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use super::rx_ring::{Queues, RingEnd};
use super::{Link, LinkEnv, LinkRxDrops, Waker, tap_sys};

/// Why a TAP link could not be opened.
///
/// ```
/// use rnic_emulator::link::{TapError, TapLink};
///
/// let bad = TapLink::open("no/slash");
/// assert!(matches!(bad, Err(TapError::InvalidName(_))));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum TapError {
    /// Not a name the kernel takes for an interface (1 to 15 bytes, no `/`, `:`, white
    /// space or NUL).
    #[error("`{0}` is not a valid interface name (1 to 15 bytes, no '/', ':' or spaces)")]
    InvalidName(String),
    /// `/dev/net/tun` is missing (no TUN/TAP support in the kernel, or not in this
    /// container).
    #[error("{path}: {source} (load the tun module, or pass the device into the container)")]
    NoTunDevice {
        /// The path (`/dev/net/tun`).
        path: &'static str,
        /// What opening it said.
        source: io::Error,
    },
    /// Creating the interface, or attaching to one another user owns, needs `CAP_NET_ADMIN`.
    #[error(
        "TAP {ifname}: permission denied: creating a TAP needs CAP_NET_ADMIN (run as root, or \
         create it for this user: ip tuntap add mode tap user $USER name {ifname})"
    )]
    PermissionDenied {
        /// The interface.
        ifname: String,
    },
    /// The interface exists and is not a free TAP: another program has it open, or it is a
    /// TUN, a bridge or some other kind of interface.
    #[error("TAP {ifname}: busy, or an interface that is not a TAP ({source})")]
    Busy {
        /// The interface.
        ifname: String,
        /// What the kernel said (`EBUSY` or `EINVAL`).
        source: io::Error,
    },
    /// Any other error.
    #[error("TAP {ifname}: {source}")]
    Io {
        /// The interface.
        ifname: String,
        /// The error.
        source: io::Error,
    },
}

/// The receive ring's capacity in frames when [`TapLink::open`] makes the link: a ConnectX
/// receive queue's usual size (as the UDP link's [`super::udp::RX_RING_FRAMES`]).
pub const TAP_RING_FRAMES: usize = super::udp::RX_RING_FRAMES;

/// Frames the reader takes per batch before it hands them over and wakes the device.
const RX_BATCH: usize = 64;

/// How long the reader waits in `poll` before it looks at the stop flag again (ms).
const POLL_MS: i32 = 20;

/// How long the reader pauses after `poll` or a read failed (the interface was deleted under
/// the descriptor, say), so a broken descriptor costs no CPU.
const POLL_BACKOFF: std::time::Duration = std::time::Duration::from_millis(20);

/// The Ethernet header and one 802.1Q tag: what a frame may carry beyond the MTU.
const L2_OVERHEAD: usize = 14 + 4;

/// Counters of a [`TapLink`].
///
/// ```
/// use rnic_emulator::link::TapStats;
/// use std::sync::atomic::Ordering;
///
/// let s = TapStats::default();
/// assert_eq!(s.sent.load(Ordering::Relaxed), 0);
/// ```
#[derive(Debug, Default)]
pub struct TapStats {
    /// Frames written to the TAP.
    pub sent: AtomicU64,
    /// Frames read from the TAP (kept or dropped).
    pub received: AtomicU64,
    /// Frames the device sent that are longer than the MTU allows: dropped.
    pub tx_oversize: AtomicU64,
    /// Frames the kernel refused (`EIO`: the interface is down; `EAGAIN`: its queue is
    /// full; anything else): dropped.
    pub tx_errors: AtomicU64,
    /// Frames read that are longer than the MTU allows: dropped (the device counts them as
    /// [`crate::RxDrops::malformed`]).
    pub rx_oversize: AtomicU64,
    /// Frames read while the receive ring was full: dropped (the device counts them as
    /// [`crate::RxDrops::ring_full`]).
    pub ring_full: AtomicU64,
    /// Frame buffers the reader allocated (at most the ring's capacity: they are reused).
    pub ring_buffers: AtomicU64,
    /// Waits and reads that failed with an error other than "nothing waiting" (the
    /// interface deleted under the link, say); the reader backs off and goes on.
    pub rx_errors: AtomicU64,
}

/// A link to a Linux TAP interface (see the module docs).
///
/// ```no_run
/// use rnic_emulator::link::TapLink;
/// use rnic_emulator::{Device, Profile, RunMode};
///
/// let link = TapLink::open("rnic0")?; // as root, or a TAP made for this user
/// let _dev = Device::with_link(Profile::default(), RunMode::Threaded, link);
/// # Ok::<(), rnic_emulator::link::TapError>(())
/// ```
#[derive(Debug)]
pub struct TapLink {
    ifname: String,
    /// `ifname` as the kernel takes it.
    name: tap_sys::IfName,
    fd: Arc<OwnedFd>,
    /// The interface's MTU (bytes of IP packet).
    mtu: u32,
    /// The receive ring the reader thread fills.
    ring: RingEnd,
    stats: Arc<TapStats>,
}

impl TapLink {
    /// Attaches to the TAP interface `ifname` (creating it, non-persistent, if it does not
    /// exist: it goes away when the link does) with a receive ring of [`TAP_RING_FRAMES`]
    /// frames, and starts the reader thread. The frame size limit comes from the
    /// interface's MTU as it is now.
    ///
    /// ```no_run
    /// use rnic_emulator::link::TapLink;
    ///
    /// let link = TapLink::open("rnic0")?;
    /// assert_eq!(link.ifname(), "rnic0");
    /// # Ok::<(), rnic_emulator::link::TapError>(())
    /// ```
    pub fn open(ifname: &str) -> Result<TapLink, TapError> {
        Self::open_with_ring(ifname, TAP_RING_FRAMES)
    }

    /// [`TapLink::open`] with a receive ring of `frames` frames (at least 1).
    ///
    /// ```
    /// use rnic_emulator::link::{TapError, TapLink};
    ///
    /// // A name the kernel would refuse is refused before anything is opened.
    /// let r = TapLink::open_with_ring("a name with spaces", 16);
    /// assert!(matches!(r, Err(TapError::InvalidName(_))));
    /// ```
    pub fn open_with_ring(ifname: &str, frames: usize) -> Result<TapLink, TapError> {
        let name = tap_sys::if_name(ifname).ok_or_else(|| TapError::InvalidName(ifname.into()))?;
        let io_err = |source| TapError::Io {
            ifname: ifname.into(),
            source,
        };
        let fd = tap_sys::open_tap(&name).map_err(|e| classify(ifname, e))?;
        let mtu = tap_sys::if_mtu(&name).map_err(io_err)?;
        let frames = frames.max(1);
        let queues = Queues::new(frames);
        let fd = Arc::new(fd);
        let waker: Arc<OnceLock<Waker>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(TapStats::default());
        let reader = {
            let r = Reader {
                fd: Arc::clone(&fd),
                queues: Arc::clone(&queues),
                frames,
                max_frame: max_frame(mtu),
                waker: Arc::clone(&waker),
                stop: Arc::clone(&stop),
                stats: Arc::clone(&stats),
            };
            std::thread::Builder::new()
                .name("rnic-tap-rx".into())
                .spawn(move || r.run())
                .map_err(io_err)?
        };
        Ok(TapLink {
            ifname: ifname.into(),
            name,
            fd,
            mtu,
            ring: RingEnd::new(queues, waker, stop, reader),
            stats,
        })
    }

    /// The interface's name.
    ///
    /// ```no_run
    /// # let link = rnic_emulator::link::TapLink::open("rnic0")?;
    /// assert_eq!(link.ifname(), "rnic0");
    /// # Ok::<(), rnic_emulator::link::TapError>(())
    /// ```
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The interface's MTU when the link was opened (bytes of IP packet; a frame may be 18
    /// bytes longer: the Ethernet header and one 802.1Q tag).
    ///
    /// ```no_run
    /// # let link = rnic_emulator::link::TapLink::open("rnic0")?;
    /// assert_eq!(link.mtu(), 1500); // a new TAP's default
    /// # Ok::<(), rnic_emulator::link::TapError>(())
    /// ```
    pub fn mtu(&self) -> u32 {
        self.mtu
    }

    /// Sets the interface administratively up (`ip link set <ifname> up`), which a new TAP
    /// is not: until then the kernel refuses what the port sends (counted as
    /// [`TapStats::tx_errors`]) and sends nothing. Needs `CAP_NET_ADMIN`; an interface an
    /// administrator set up (on a bridge) needs no call.
    ///
    /// ```no_run
    /// # let link = rnic_emulator::link::TapLink::open("rnic0")?;
    /// link.set_up()?;
    /// # Ok::<(), rnic_emulator::link::TapError>(())
    /// ```
    pub fn set_up(&self) -> Result<(), TapError> {
        tap_sys::if_set_up(&self.name).map_err(|e| classify(&self.ifname, e))
    }

    /// Its counters (they stay readable after the link moves into a device).
    ///
    /// ```no_run
    /// use std::sync::atomic::Ordering;
    /// # let link = rnic_emulator::link::TapLink::open("rnic0")?;
    /// let stats = link.stats();
    /// assert_eq!(stats.tx_oversize.load(Ordering::Relaxed), 0);
    /// # Ok::<(), rnic_emulator::link::TapError>(())
    /// ```
    pub fn stats(&self) -> Arc<TapStats> {
        Arc::clone(&self.stats)
    }
}

/// The largest frame an interface of MTU `mtu` carries.
fn max_frame(mtu: u32) -> usize {
    usize::try_from(mtu)
        .unwrap_or(usize::MAX)
        .saturating_add(L2_OVERHEAD)
}

/// The typed error for what opening `/dev/net/tun` or `TUNSETIFF` said.
fn classify(ifname: &str, e: io::Error) -> TapError {
    let ifname = ifname.to_owned();
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::ENODEV | libc::ENXIO) => TapError::NoTunDevice {
            path: tap_sys::TUN_PATH,
            source: e,
        },
        Some(libc::EPERM | libc::EACCES) => TapError::PermissionDenied { ifname },
        Some(libc::EBUSY | libc::EINVAL) => TapError::Busy { ifname, source: e },
        _ => TapError::Io { ifname, source: e },
    }
}

impl Link for TapLink {
    fn transmit(&mut self, frame: &[u8]) {
        if frame.len() > max_frame(self.mtu) {
            self.stats.tx_oversize.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let counter = match tap_sys::write_frame(self.fd.as_fd(), frame) {
            Ok(()) => &self.stats.sent,
            Err(_) => &self.stats.tx_errors,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn receive(&mut self, buf: &mut Vec<u8>) -> bool {
        self.ring.take(buf)
    }

    fn attach(&mut self, env: &LinkEnv) {
        self.ring.attach(env);
    }

    fn rx_drops(&self) -> LinkRxDrops {
        LinkRxDrops {
            ring_full: self.stats.ring_full.load(Ordering::Relaxed),
            oversize: self.stats.rx_oversize.load(Ordering::Relaxed),
            overflow: 0,
            malformed: 0,
        }
    }
}

/// The reader thread's side of the link.
struct Reader {
    fd: Arc<OwnedFd>,
    queues: Arc<Queues>,
    /// The ring's capacity, in frames and in buffers.
    frames: usize,
    max_frame: usize,
    waker: Arc<OnceLock<Waker>>,
    stop: Arc<AtomicBool>,
    stats: Arc<TapStats>,
}

impl Reader {
    /// Waits for frames, reads what is queued, hands it over, wakes the device; until the
    /// link (and with it the ring's end) is dropped.
    fn run(self) {
        let cap = self.max_frame + 1;
        let mut allocated = 0usize;
        // A buffer kept from a frame dropped (oversize, ring full) or never filled.
        let mut spare: Option<Vec<u8>> = None;
        // Where a frame is read into, and dropped from, when every ring buffer holds one.
        let mut scratch = Vec::with_capacity(cap);
        let fd = self.fd.as_fd();
        while !self.stop.load(Ordering::Acquire) {
            match tap_sys::poll_readable(fd, POLL_MS) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(_) => {
                    self.stats.rx_errors.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(POLL_BACKOFF);
                    continue;
                }
            }
            let mut delivered = 0;
            for _ in 0..RX_BATCH {
                let f = match spare.take().or_else(|| self.queues.free.pop()) {
                    Some(f) => Some(f),
                    None if allocated < self.frames => {
                        allocated += 1;
                        self.stats.ring_buffers.fetch_add(1, Ordering::Relaxed);
                        Some(Vec::with_capacity(cap))
                    }
                    None => None,
                };
                let Some(mut f) = f else {
                    // Every buffer is on the ring or with the device: the ring is full.
                    match tap_sys::read_frame(fd, &mut scratch) {
                        Ok(Some(_)) => {
                            self.stats.received.fetch_add(1, Ordering::Relaxed);
                            self.stats.ring_full.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                        Ok(None) => break,
                        Err(_) => {
                            self.stats.rx_errors.fetch_add(1, Ordering::Relaxed);
                            std::thread::sleep(POLL_BACKOFF);
                            break;
                        }
                    }
                };
                // A buffer the device handed back may be one it started with (any size).
                f.clear();
                f.reserve(cap);
                let n = match tap_sys::read_frame(fd, &mut f) {
                    Ok(Some(n)) => n,
                    Ok(None) => {
                        spare = Some(f);
                        break;
                    }
                    Err(_) => {
                        // A descriptor that fails keeps failing: back off, do not spin.
                        self.stats.rx_errors.fetch_add(1, Ordering::Relaxed);
                        spare = Some(f);
                        std::thread::sleep(POLL_BACKOFF);
                        break;
                    }
                };
                self.stats.received.fetch_add(1, Ordering::Relaxed);
                // A read that filled the buffer (one byte beyond the largest frame) was cut.
                if n > self.max_frame {
                    self.stats.rx_oversize.fetch_add(1, Ordering::Relaxed);
                    spare = Some(f);
                    continue;
                }
                match self.queues.frames.push(f) {
                    Ok(()) => delivered += 1,
                    Err(f) => {
                        self.stats.ring_full.fetch_add(1, Ordering::Relaxed);
                        spare = Some(f);
                    }
                }
            }
            if delivered > 0
                && let Some(w) = self.waker.get()
            {
                w.wake();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::tap_sys::testing::{PacketSocket, drop_net_admin_in_this_thread, set_mtu};
    use super::*;
    use crate::wire::{
        BthRepr, EthRepr, EthernetAddress, IpRepr, Ipv4Repr, Opcode, PacketRepr, UdpRepr,
    };
    use crate::{Device, Profile, RunMode};
    use std::sync::atomic::AtomicUsize;
    use std::time::{Duration, Instant};

    /// The IEEE local experimental ethertype: no kernel protocol answers frames of it.
    const EXPERIMENTAL: [u8; 2] = [0x88, 0xB5];

    /// A fresh interface name for this process and test.
    fn ifname() -> String {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        format!("rntap{}x{n}", std::process::id() % 100_000)
    }

    /// Why TAP tests cannot run here, if they cannot.
    fn skip_reason() -> Option<&'static str> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Some("not root (creating a TAP needs CAP_NET_ADMIN)");
        }
        if !std::path::Path::new(tap_sys::TUN_PATH).exists() {
            return Some("no /dev/net/tun");
        }
        None
    }

    /// A TAP link with a ring of `frames` on a new, up interface (IPv6 off, so the kernel
    /// sends no solicitations), and a packet socket on it; `None` (with the reason printed)
    /// where the test cannot run.
    fn tap_with_ring(frames: usize) -> Option<(TapLink, PacketSocket)> {
        let name = runnable()?;
        let link = TapLink::open_with_ring(&name, frames).expect("open TAP as root");
        let sock = bring_up(&name);
        Some((link, sock))
    }

    fn tap() -> Option<(TapLink, PacketSocket)> {
        tap_with_ring(TAP_RING_FRAMES)
    }

    /// A fresh interface name, or `None` (the reason printed) where TAP tests cannot run.
    fn runnable() -> Option<String> {
        match skip_reason() {
            Some(why) => {
                eprintln!("skipping TAP test: {why}");
                None
            }
            None => Some(ifname()),
        }
    }

    /// Turns IPv6 off on `name` (no solicitations from the kernel), sets it up, and binds a
    /// packet socket to it.
    fn bring_up(name: &str) -> PacketSocket {
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6"), "1");
        tap_sys::if_set_up(&tap_sys::if_name(name).unwrap()).expect("set the TAP up");
        PacketSocket::bind(name).expect("AF_PACKET socket on the TAP")
    }

    /// A frame of the experimental ethertype carrying `marker`, `len` bytes long.
    fn marked(marker: u8, len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len];
        f[..6].copy_from_slice(&[0xFF; 6]);
        f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x11]);
        f[12..14].copy_from_slice(&EXPERIMENTAL);
        f[14..].fill(marker);
        f
    }

    /// A RoCE v2 SEND ONLY from 10.9.0.1 to 10.9.0.2, sealed.
    fn roce() -> Vec<u8> {
        let eth = EthRepr::new(
            EthernetAddress([2, 0, 0, 0, 0, 2]),
            EthernetAddress([2, 0, 0, 0, 0, 1]),
        );
        let ip = IpRepr::V4(Ipv4Repr::new([10, 9, 0, 1].into(), [10, 9, 0, 2].into()));
        let repr = PacketRepr::new(
            eth,
            ip,
            UdpRepr::new(0xC000),
            BthRepr::new(Opcode::RcSendOnly, 0x11, 7),
        );
        let mut buf = vec![0u8; 256];
        let n = repr.emit(&mut buf, b"over the tap").unwrap();
        buf.truncate(n);
        buf
    }

    /// The first frame the packet socket sees that `want` accepts, within 5 s.
    fn kernel_sees(sock: &PacketSocket, want: impl Fn(&[u8]) -> bool) -> Option<Vec<u8>> {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Some(f) = sock.recv().unwrap()
                && want(&f)
            {
                return Some(f);
            }
        }
        None
    }

    /// The first frame the link receives that `want` accepts, within 5 s.
    fn link_gets(link: &mut TapLink, want: impl Fn(&[u8]) -> bool) -> Option<Vec<u8>> {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut buf = Vec::new();
        while Instant::now() < deadline {
            if link.receive(&mut buf) {
                if want(&buf) {
                    return Some(buf);
                }
            } else {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        None
    }

    #[test]
    fn frames_cross_both_ways() {
        let Some((mut link, sock)) = tap() else {
            return;
        };
        assert_eq!(link.mtu(), 1500);
        link.set_up()
            .expect("up already: setting it up again changes nothing");
        let out = marked(0xA1, 60);
        link.transmit(&out);
        let seen = kernel_sees(&sock, |f| f == out).expect("the kernel sees the frame sent");
        assert_eq!(seen, out);
        let back = marked(0xB2, 100);
        sock.send(&back).unwrap();
        let got = link_gets(&mut link, |f| f[12..14] == EXPERIMENTAL);
        assert_eq!(
            got.as_deref(),
            Some(&back[..]),
            "the link receives what the kernel sends"
        );
        let stats = link.stats();
        assert_eq!(stats.sent.load(Ordering::Relaxed), 1);
        assert!(stats.received.load(Ordering::Relaxed) >= 1);
        assert_eq!(stats.tx_errors.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn roce_frames_leave_and_arrive_with_a_correct_icrc() {
        let Some((mut link, sock)) = tap() else {
            return;
        };
        assert!(!link.takes_unsealed(), "the kernel looks at every frame");
        assert!(link.rx_ip_header_exact());
        let sealed = roce();
        let mut unsealed = sealed.clone();
        let n = unsealed.len();
        unsealed[n - 4..].fill(0);
        // What a device hands a link that does not take unsealed frames: sealed on the way.
        let _ = link.transmit_unsealed(unsealed);
        let seen = kernel_sees(&sock, |f| f.len() == n && f[12..14] == [0x08, 0x00])
            .expect("the kernel sees the RoCE frame");
        let (repr, payload) = PacketRepr::parse(&seen).expect("the ICRC the kernel sees verifies");
        assert_eq!((repr.bth.dest_qp, payload), (0x11, &b"over the tap"[..]));
        assert_eq!(seen, sealed);
        sock.send(&sealed).unwrap();
        let got = link_gets(&mut link, |f| f.len() == n).expect("the link receives it");
        assert!(
            PacketRepr::parse(&got).is_ok(),
            "arrives with its real headers and ICRC"
        );
    }

    #[test]
    fn frames_longer_than_the_mtu_are_dropped_and_counted() {
        let Some((mut link, sock)) = tap() else {
            return;
        };
        let stats = link.stats();
        link.transmit(&marked(1, 1500 + 18 + 1));
        assert_eq!(stats.tx_oversize.load(Ordering::Relaxed), 1);
        assert_eq!(stats.sent.load(Ordering::Relaxed), 0);
        link.transmit(&marked(2, 1500 + 18)); // the largest tagged frame fits
        assert_eq!(stats.sent.load(Ordering::Relaxed), 1);
        // The interface's MTU raised behind the link's back: the kernel sends a frame the
        // link (opened at 1500) does not take.
        set_mtu(&link.name, 9000).unwrap();
        sock.send(&marked(3, 2000)).unwrap();
        sock.send(&marked(4, 64)).unwrap();
        let got = link_gets(&mut link, |f| f[12..14] == EXPERIMENTAL).unwrap();
        assert_eq!(
            got,
            marked(4, 64),
            "the long one dropped, the next one kept"
        );
        assert_eq!(stats.rx_oversize.load(Ordering::Relaxed), 1);
        assert_eq!(link.rx_drops().oversize, 1);
    }

    #[test]
    fn a_full_ring_drops_and_counts() {
        let Some((link, sock)) = tap_with_ring(2) else {
            return;
        };
        for i in 0..5 {
            sock.send(&marked(i, 60)).unwrap();
        }
        let stats = link.stats();
        let deadline = Instant::now() + Duration::from_secs(5);
        while stats.received.load(Ordering::Relaxed) < 5 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(
            stats.ring_full.load(Ordering::Relaxed),
            3,
            "two fit, three dropped"
        );
        assert_eq!(link.rx_drops().ring_full, 3);
        assert_eq!(
            stats.ring_buffers.load(Ordering::Relaxed),
            2,
            "no buffer beyond the ring"
        );
    }

    #[test]
    fn without_cap_net_admin_opening_is_permission_denied() {
        let Some(name) = runnable() else {
            return;
        };
        // Capabilities are per thread: this thread alone loses CAP_NET_ADMIN.
        let r = std::thread::spawn(move || {
            drop_net_admin_in_this_thread().unwrap();
            TapLink::open(&name)
        })
        .join()
        .unwrap();
        let e = r.expect_err("no TAP without CAP_NET_ADMIN");
        assert!(matches!(e, TapError::PermissionDenied { .. }), "{e}");
        assert!(e.to_string().contains("CAP_NET_ADMIN"));
    }

    #[test]
    fn an_interface_in_use_is_busy() {
        let Some(name) = runnable() else {
            return;
        };
        let _first = TapLink::open(&name).unwrap();
        let e = TapLink::open(&name).expect_err("one descriptor per TAP");
        assert!(matches!(e, TapError::Busy { .. }), "{e}");
    }

    #[test]
    fn an_interface_deleted_under_the_link_costs_errors_not_cpu() {
        let Some((mut link, sock)) = tap() else {
            return;
        };
        drop(sock);
        let deleted = std::process::Command::new("ip")
            .args(["link", "del", link.ifname()])
            .status();
        if !deleted.is_ok_and(|s| s.success()) {
            eprintln!("skipping: `ip link del` not available");
            return;
        }
        let stats = link.stats();
        std::thread::sleep(Duration::from_millis(200));
        let errors = stats.rx_errors.load(Ordering::Relaxed);
        // The hang-up is seen as an error (not as "nothing yet", which would spin on a
        // descriptor that is always ready), and each one costs a 20 ms pause.
        assert!((1..=20).contains(&errors), "{errors} errors in 200 ms");
        link.transmit(&marked(1, 60));
        assert_eq!(
            stats.tx_errors.load(Ordering::Relaxed),
            1,
            "the kernel refuses the write"
        );
        assert!(!link.receive(&mut Vec::new()));
    }

    #[test]
    fn a_device_on_a_tap_receives_and_captures() {
        let Some(name) = runnable() else {
            return;
        };
        let (dev, stats) = Device::on_tap(Profile::default(), RunMode::Deterministic, &name)
            .expect("a device on a new TAP");
        let sock = bring_up(&name);
        let path = std::env::temp_dir().join(format!("rnic-tap-{name}.pcap"));
        dev.capture_to(&path).unwrap();
        // A RoCE frame for an IP the device does not have (no GIDs set): received, checked
        // (the ICRC is right), and dropped as not ours.
        sock.send(&roce()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while dev.counters().drops.not_our_ip == 0 && Instant::now() < deadline {
            dev.step();
            std::thread::sleep(Duration::from_millis(1));
        }
        let c = dev.counters();
        assert_eq!((c.drops.not_our_ip, c.drops.bad_icrc), (1, 0), "{c:?}");
        assert!(stats.received.load(Ordering::Relaxed) >= 1);
        assert!(
            dev.stop_capture().unwrap() >= 1,
            "received frames are captured"
        );
        let _ = std::fs::remove_file(&path);
    }
}
