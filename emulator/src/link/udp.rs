//! A UDP link: RoCE v2 over a kernel UDP socket on `<IPv4>:4791`, the wire Linux rxe and
//! other emulated devices speak.
//!
//! **Sending.** The device emits whole Ethernet frames; the link sends the UDP payload (BTH
//! through ICRC) to the frame's destination IP, port 4791. The kernel builds the IP and UDP
//! headers, so the ICRC (which covers the IP header's total length, **ID**, flags, protocol
//! and addresses, and the UDP ports and length) is right only if the kernel sends exactly what
//! the device put in the frame: the sockets are unconnected and set `IP_MTU_DISCOVER =
//! IP_PMTUDISC_DO`, so Linux sends DF with IP ID 0, as the device's frames have. TTL, TOS and
//! the UDP checksum are masked out of the ICRC (the kernel computes a UDP checksum; harmless).
//!
//! **Source ports.** Every frame carries its QP's UDP source port (rxe's
//! `rdma_get_udp_sport`, or the address path's `udp_sport`). The link sends each frame from
//! a socket bound to `<IPv4>:<that port>`, opened on first use and kept (one per flow, like
//! rxe's per-QP tunnel sockets). When that port cannot be bound (another program holds it),
//! the frame goes out from the main socket (port 4791) with its source port rewritten and
//! its ICRC recomputed; rxe accepts any source port, so interop holds either way, only the
//! flow id differs (counted in [`UdpStats`]).
//!
//! **Receiving.** A reader thread takes datagrams from the main socket (any source port) and
//! rebuilds the frame the device's receive path expects: Ethernet (both MACs zero, IPv4
//! ethertype), an IPv4 header (ID 0, DF, TTL 64, TOS 0, correct checksum; source and
//! destination from the socket), a UDP header (the sender's source port, 4791, length,
//! checksum 0), then the datagram. It takes whatever is queued in one go (non-blocking reads
//! after the first), hands the frames to the device through its receive ring and wakes it
//! once per batch.
//!
//! **Receive ring.** Like a NIC's receive queue, the ring holds a fixed number of frames
//! ([`RX_RING_FRAMES`] unless [`UdpLink::bind_with_ring`] says otherwise), in buffers that
//! circulate between the ring and the device (the device hands back one buffer for each
//! frame it takes), allocated once each on first use: the link never holds more than the
//! ring's capacity in frames, whatever arrives. A datagram that finds the ring full (the
//! device did not keep up, e.g. under a flood) is dropped and counted
//! ([`UdpStats::ring_full`], and in the device's drop counters as
//! [`crate::RxDrops::ring_full`]). A datagram larger than the largest RoCE v2 frame (path
//! MTU 4096) does not fit a ring buffer: dropped and counted as `oversize` (the device's
//! `malformed`).
//!
//! **Receive buffer.** A READ responder sends its responses back to back: 16 outstanding
//! 64 KiB READs at MTU 1024 are ~1000 datagrams at once, and rxe under QEMU emits them ~3 us
//! apart. The kernel's default receive buffer (`net.core.rmem_default`, 208 KiB: ~90 such
//! datagrams, counting the kernel's per-packet overhead) overflows as soon as the reader
//! thread is descheduled for a fraction of a millisecond, and the kernel drops the rest
//! silently (`RcvbufErrors` in `/proc/net/snmp`), which costs a go-back-N retry each time.
//! So the main socket asks for [`RCVBUF_BYTES`]: first with `SO_RCVBUFFORCE`, which a
//! process with `CAP_NET_ADMIN` (root) may set beyond `net.core.rmem_max`, else with
//! `SO_RCVBUF`, which the kernel caps at `rmem_max` (raise it with `sysctl -w
//! net.core.rmem_max=...` when running unprivileged; the link logs a warning when it got
//! less than asked). The size it got is in [`UdpStats::rcvbuf_bytes`]. The memory is only
//! used while datagrams wait. `SO_RXQ_OVFL` makes the kernel report the socket's drop count
//! with each datagram: [`UdpStats::socket_drops`].
//!
//! **What the ICRC verifies on receive.** A socket does not show the sender's IP ID (nor its
//! TTL and TOS, which the ICRC masks anyway). Frames from senders that use IP ID 0 (other
//! emulated devices, host programs on unconnected DF sockets) verify exactly. For the rest
//! (rxe uses the kernel's ID counter) the port solves for the one 16-bit ID that makes the
//! ICRC match, using the CRC's linearity, and accepts the frame if such an ID exists: the
//! addresses, ports, lengths, transport headers and payload stay covered, but a corruption is
//! now missed with probability 2^-16 instead of 2^-32 (counted as `icrc_ip_id_solved` in the
//! device's drop counters). The IP ID, TTL and TOS of the rebuilt header are not the
//! sender's.
//!
//! **MACs.** In UDP mode the kernel resolves the next hop (ARP): the destination MAC the
//! device put in the frame (from the QP's address path or the UD address vector) is not
//! used on the wire. Frames received carry zero MACs.
//!
//! IPv6 frames are not sent (the socket is IPv4) and are counted as `unsendable`.

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam::channel::{Receiver, Sender, TrySendError, bounded};

use super::{Link, LinkEnv, LinkRxDrops, Waker};
use crate::wire::{
    EthRepr, EthernetAddress, EthernetFrame, Ipv4Packet, Ipv4Repr, ROCE_V2_PORT, UdpPacket, UdpRepr,
};

/// Why a UDP link could not be set up.
///
/// ```
/// use rnic_emulator::link::{LinkError, UdpLink};
/// use std::net::Ipv4Addr;
///
/// let _first = UdpLink::bind(Ipv4Addr::new(127, 0, 0, 206))?;
/// let again = UdpLink::bind(Ipv4Addr::new(127, 0, 0, 206));
/// assert!(matches!(again, Err(LinkError::AddrInUse(_))));
/// let foreign = UdpLink::bind(Ipv4Addr::new(192, 0, 2, 1)); // TEST-NET-1, on no host
/// assert!(matches!(foreign, Err(LinkError::AddrNotAvailable(_))));
/// # Ok::<(), LinkError>(())
/// ```
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// Another socket holds `<addr>:4791`.
    #[error("{0} is in use")]
    AddrInUse(SocketAddrV4),
    /// The address is not one of this host's.
    #[error("cannot assign {0}: not an address of this host")]
    AddrNotAvailable(SocketAddrV4),
    /// Any other socket error.
    #[error("UDP link on {addr}: {source}")]
    Io {
        /// The address.
        addr: SocketAddrV4,
        /// The error.
        source: io::Error,
    },
}

/// Counters of a [`UdpLink`].
///
/// ```
/// use rnic_emulator::link::{Link, UdpLink};
/// use std::{net::Ipv4Addr, sync::atomic::Ordering};
/// # use rnic_emulator::wire::*;
/// # fn frame(src: Ipv4Addr, dst: Ipv4Addr) -> Vec<u8> {
/// #     let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
/// #     let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(src, dst)), UdpRepr::new(0xC000),
/// #         BthRepr::new(Opcode::RcSendOnly, 0x11, 0));
/// #     let mut f = vec![0; 128];
/// #     let n = repr.emit(&mut f, b"ping").unwrap();
/// #     f.truncate(n);
/// #     f
/// # }
///
/// let mut link = UdpLink::bind(Ipv4Addr::new(127, 0, 0, 204))?;
/// let stats = link.stats();
/// link.transmit(&frame(Ipv4Addr::new(127, 0, 0, 204), Ipv4Addr::new(127, 0, 0, 205)));
/// assert_eq!(stats.sent.load(Ordering::Relaxed), 1);
/// link.transmit(&[0; 60]); // not IPv4/UDP
/// assert_eq!(stats.unsendable.load(Ordering::Relaxed), 1);
/// # Ok::<(), rnic_emulator::link::LinkError>(())
/// ```
#[derive(Debug, Default)]
pub struct UdpStats {
    /// Datagrams sent.
    pub sent: AtomicU64,
    /// Datagrams received.
    pub received: AtomicU64,
    /// Frames sent from the main socket because their source port could not be bound.
    pub sport_fallbacks: AtomicU64,
    /// Frames that could not be sent (not IPv4/UDP, or a socket error).
    pub unsendable: AtomicU64,
    /// Datagrams the kernel dropped on the main socket before the reader took them (a full
    /// receive buffer; the count `SO_RXQ_OVFL` reports, as of the last datagram received).
    /// The device counts them as [`crate::RxDrops::link_overflow`].
    pub socket_drops: AtomicU64,
    /// The main socket's receive buffer in bytes, as the kernel reports it (`SO_RCVBUF`,
    /// which includes the kernel's bookkeeping share: twice the size set).
    pub rcvbuf_bytes: AtomicU64,
    /// Datagrams received and dropped because the receive ring was full (see the module
    /// docs); the device counts them as [`crate::RxDrops::ring_full`].
    pub ring_full: AtomicU64,
    /// Datagrams dropped because they are larger than the largest RoCE v2 frame (a ring
    /// buffer); the device counts them as [`crate::RxDrops::malformed`].
    pub oversize: AtomicU64,
    /// The most frames the receive ring ever held at once (at most its capacity).
    pub ring_high_water: AtomicU64,
    /// Frame buffers the reader allocated (at most the ring's capacity: they are reused).
    pub ring_buffers: AtomicU64,
}

/// The receive buffer the link asks for on its main socket (see the module docs): 16 MiB,
/// room for ~7000 MTU-sized datagrams queued.
pub const RCVBUF_BYTES: usize = 16 << 20;

/// The receive ring's capacity in frames when [`UdpLink::bind`] makes the link: a ConnectX
/// receive queue's usual size. A burst of 16 outstanding 64 KiB READs at MTU 1024 (1024
/// responses back to back) fits with room to spare; buffers of the largest RoCE v2 frame
/// make it ~17 MiB at most.
///
/// ```
/// use rnic_emulator::link::udp::RX_RING_FRAMES;
///
/// assert!(RX_RING_FRAMES >= 1024); // a READ burst of 1024 responses fits
/// ```
pub const RX_RING_FRAMES: usize = 4096;

/// Datagrams the reader takes per batch before it hands them over and wakes the device.
const RX_BATCH: usize = 64;

const ETH_LEN: usize = 14;
const IP_LEN: usize = 20;
const UDP_LEN: usize = 8;

/// A UDP link bound to `<IPv4>:4791` (see the module docs).
///
/// Two links on loopback addresses: what one sends to the other's IP arrives as a frame.
///
/// ```
/// use rnic_emulator::link::{Link, UdpLink};
/// use std::{net::Ipv4Addr, time::{Duration, Instant}};
/// # use rnic_emulator::wire::*;
/// # fn frame(src: Ipv4Addr, dst: Ipv4Addr) -> Vec<u8> {
/// #     let eth = EthRepr::new(EthernetAddress([2, 0, 0, 0, 0, 2]), EthernetAddress([2, 0, 0, 0, 0, 1]));
/// #     let repr = PacketRepr::new(eth, IpRepr::V4(Ipv4Repr::new(src, dst)), UdpRepr::new(0xC000),
/// #         BthRepr::new(Opcode::RcSendOnly, 0x11, 0));
/// #     let mut f = vec![0; 128];
/// #     let n = repr.emit(&mut f, b"ping").unwrap();
/// #     f.truncate(n);
/// #     f
/// # }
///
/// let (ip_a, ip_b) = (Ipv4Addr::new(127, 0, 0, 201), Ipv4Addr::new(127, 0, 0, 202));
/// let (mut a, mut b) = (UdpLink::bind(ip_a)?, UdpLink::bind(ip_b)?);
/// a.transmit(&frame(ip_a, ip_b));
/// let (mut buf, deadline) = (Vec::new(), Instant::now() + Duration::from_secs(5));
/// while !b.receive(&mut buf) && Instant::now() < deadline {
///     std::thread::sleep(Duration::from_millis(1));
/// }
/// let (repr, payload) = PacketRepr::parse(&buf).unwrap(); // the ICRC verifies
/// assert_eq!((repr.bth.dest_qp, payload), (0x11, &b"ping"[..]));
/// # Ok::<(), rnic_emulator::link::LinkError>(())
/// ```
#[derive(Debug)]
pub struct UdpLink {
    ip: Ipv4Addr,
    main: Arc<UdpSocket>,
    /// Per source port sockets (None: the port could not be bound).
    sport: HashMap<u16, Option<UdpSocket>>,
    rx: Receiver<Vec<u8>>,
    free: Sender<Vec<u8>>,
    waker: Arc<OnceLock<Waker>>,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<()>>,
    stats: Arc<UdpStats>,
    scratch: Vec<u8>,
}

fn setsockopt_int(
    s: &UdpSocket,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: a valid socket fd, a c_int option value of the right size.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            name,
            (&raw const v).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn getsockopt_int(s: &UdpSocket, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: a valid socket fd; `v` and `len` describe a c_int-sized output buffer.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            level,
            name,
            (&raw mut v).cast(),
            &raw mut len,
        )
    };
    if r == 0 {
        Ok(v)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sizes the receive buffer to `bytes` (`SO_RCVBUFFORCE`, else `SO_RCVBUF` capped by
/// `net.core.rmem_max`) and returns what the kernel reports (twice the size it set).
fn grow_rcvbuf(s: &UdpSocket, bytes: usize) -> usize {
    let want = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    if setsockopt_int(s, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, want).is_err() {
        // Not privileged: the kernel silently caps the size at rmem_max.
        let _ = setsockopt_int(s, libc::SOL_SOCKET, libc::SO_RCVBUF, want);
    }
    let got = getsockopt_int(s, libc::SOL_SOCKET, libc::SO_RCVBUF)
        .map_or(0, |v| usize::try_from(v).unwrap_or(0));
    if got < bytes {
        log::warn!(
            "UDP link: receive buffer {got} bytes, asked for {bytes} (SO_RCVBUFFORCE needs \
             CAP_NET_ADMIN; SO_RCVBUF is capped by net.core.rmem_max): bursts of READ \
             responses may overflow it"
        );
    }
    got
}

fn bind(addr: SocketAddrV4) -> Result<UdpSocket, LinkError> {
    let s = UdpSocket::bind(addr).map_err(|e| match e.kind() {
        io::ErrorKind::AddrInUse => LinkError::AddrInUse(addr),
        io::ErrorKind::AddrNotAvailable => LinkError::AddrNotAvailable(addr),
        _ => LinkError::Io { addr, source: e },
    })?;
    setsockopt_int(
        &s,
        libc::IPPROTO_IP,
        libc::IP_MTU_DISCOVER,
        libc::IP_PMTUDISC_DO,
    )
    .map_err(|source| LinkError::Io { addr, source })?;
    Ok(s)
}

impl UdpLink {
    /// Binds `<ip>:4791` and starts the reader thread.
    ///
    /// ```
    /// use rnic_emulator::link::UdpLink;
    /// use rnic_emulator::{Device, Profile, RunMode};
    /// use std::net::Ipv4Addr;
    ///
    /// let link = UdpLink::bind(Ipv4Addr::new(127, 0, 0, 207))?;
    /// let _dev = Device::with_link(Profile::default(), RunMode::Threaded, link);
    /// # Ok::<(), rnic_emulator::link::LinkError>(())
    /// ```
    pub fn bind(ip: Ipv4Addr) -> Result<UdpLink, LinkError> {
        Self::bind_with_ring(ip, RX_RING_FRAMES)
    }

    /// Binds `<ip>:4791` with a receive ring of `frames` frames (at least 1; see the
    /// module docs) and starts the reader thread.
    ///
    /// ```
    /// use rnic_emulator::link::{Link, UdpLink};
    /// use std::{net::{Ipv4Addr, UdpSocket}, sync::atomic::Ordering, time::{Duration, Instant}};
    ///
    /// let link = UdpLink::bind_with_ring(Ipv4Addr::new(127, 0, 0, 209), 2)?;
    /// let peer = UdpSocket::bind("127.0.0.210:0").unwrap();
    /// for _ in 0..5 {
    ///     peer.send_to(&[0; 64], "127.0.0.209:4791").unwrap(); // nobody takes them
    /// }
    /// let stats = link.stats();
    /// let deadline = Instant::now() + Duration::from_secs(5);
    /// while stats.received.load(Ordering::Relaxed) < 5 && Instant::now() < deadline {
    ///     std::thread::sleep(Duration::from_millis(1));
    /// }
    /// assert_eq!(stats.ring_full.load(Ordering::Relaxed), 3); // two fit, three dropped
    /// assert_eq!(link.rx_drops().ring_full, 3);
    /// # Ok::<(), rnic_emulator::link::LinkError>(())
    /// ```
    pub fn bind_with_ring(ip: Ipv4Addr, frames: usize) -> Result<UdpLink, LinkError> {
        let frames = frames.max(1);
        let addr = SocketAddrV4::new(ip, ROCE_V2_PORT);
        let main = bind(addr)?;
        let rcvbuf = grow_rcvbuf(&main, RCVBUF_BYTES);
        // The drop count with each datagram; without it the link only loses the counter.
        let _ = setsockopt_int(&main, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1);
        let main = Arc::new(main);
        let reader_sock = main
            .try_clone()
            .map_err(|source| LinkError::Io { addr, source })?;
        reader_sock
            .set_read_timeout(Some(Duration::from_millis(20)))
            .map_err(|source| LinkError::Io { addr, source })?;
        let (tx, rx) = bounded(frames);
        // Buffers going back to the reader: never more than the ring's (one per frame taken).
        let (free, free_rx) = bounded::<Vec<u8>>(frames);
        let waker: Arc<OnceLock<Waker>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(UdpStats::default());
        stats.rcvbuf_bytes.store(rcvbuf as u64, Ordering::Relaxed);
        let reader = {
            let (waker, stop, stats) = (Arc::clone(&waker), Arc::clone(&stop), Arc::clone(&stats));
            std::thread::Builder::new()
                .name("rnic-udp-rx".into())
                .spawn(move || {
                    let ring = Ring {
                        tx,
                        free: free_rx,
                        frames,
                    };
                    reader(reader_sock, ip, ring, waker, stop, stats);
                })
                .map_err(|source| LinkError::Io { addr, source })?
        };
        Ok(UdpLink {
            ip,
            main,
            sport: HashMap::new(),
            rx,
            free,
            waker,
            stop,
            reader: Some(reader),
            stats,
            scratch: Vec::new(),
        })
    }

    /// The address it is bound to.
    ///
    /// ```
    /// use rnic_emulator::link::UdpLink;
    /// use std::net::Ipv4Addr;
    ///
    /// let link = UdpLink::bind(Ipv4Addr::new(127, 0, 0, 203))?;
    /// assert_eq!(link.local_addr().to_string(), "127.0.0.203:4791");
    /// # Ok::<(), rnic_emulator::link::LinkError>(())
    /// ```
    pub fn local_addr(&self) -> SocketAddrV4 {
        SocketAddrV4::new(self.ip, ROCE_V2_PORT)
    }

    /// Its counters.
    ///
    /// ```
    /// use rnic_emulator::link::UdpLink;
    /// use std::{net::Ipv4Addr, sync::atomic::Ordering};
    ///
    /// let link = UdpLink::bind(Ipv4Addr::new(127, 0, 0, 208))?;
    /// let stats = link.stats(); // stays readable after the link moves into a device
    /// assert_eq!(stats.received.load(Ordering::Relaxed), 0);
    /// assert!(stats.rcvbuf_bytes.load(Ordering::Relaxed) > 0);
    /// # Ok::<(), rnic_emulator::link::LinkError>(())
    /// ```
    pub fn stats(&self) -> Arc<UdpStats> {
        Arc::clone(&self.stats)
    }

    fn socket_for(&mut self, sport: u16) -> Option<&UdpSocket> {
        let ip = self.ip;
        self.sport
            .entry(sport)
            .or_insert_with(|| bind(SocketAddrV4::new(ip, sport)).ok())
            .as_ref()
    }
}

/// The reader's side of the receive ring: frames to the device, buffers back.
struct Ring {
    tx: Sender<Vec<u8>>,
    free: Receiver<Vec<u8>>,
    /// Capacity, in frames and in buffers.
    frames: usize,
}

/// The reader thread: datagrams in, rebuilt frames out, in batches of what is queued.
fn reader(
    sock: UdpSocket,
    ip: Ipv4Addr,
    ring: Ring,
    waker: Arc<OnceLock<Waker>>,
    stop: Arc<AtomicBool>,
    stats: Arc<UdpStats>,
) {
    let mut buf = vec![0u8; 65536];
    // Buffers allocated so far (at most `ring.frames`), and one kept from a frame the full
    // ring refused.
    let (mut allocated, mut spare) = (0usize, None::<Vec<u8>>);
    while !stop.load(Ordering::Acquire) {
        let mut got = 0;
        while got < RX_BATCH {
            // The first read blocks (up to the socket's read timeout), the rest only take
            // what is already queued.
            let flags = if got == 0 { 0 } else { libc::MSG_DONTWAIT };
            let Ok((n, from, drops)) = recv_dgram(&sock, &mut buf, flags) else {
                break;
            };
            if let Some(d) = drops {
                stats
                    .socket_drops
                    .fetch_max(u64::from(d), Ordering::Relaxed);
            }
            let Some(from) = from else { continue };
            got += 1;
            stats.received.fetch_add(1, Ordering::Relaxed);
            if ETH_LEN + IP_LEN + UDP_LEN + n > crate::wire::FRAME_CAPACITY {
                stats.oversize.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let f = spare.take().or_else(|| ring.free.try_recv().ok());
            let mut f = match f {
                Some(f) => f,
                None if allocated < ring.frames => {
                    allocated += 1;
                    stats.ring_buffers.fetch_add(1, Ordering::Relaxed);
                    Vec::with_capacity(crate::wire::FRAME_CAPACITY)
                }
                None => {
                    // Every buffer holds a frame the device has not taken: the ring is full.
                    stats.ring_full.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            };
            f.clear();
            rebuild_frame(&mut f, *from.ip(), from.port(), ip, &buf[..n]);
            match ring.tx.try_send(f) {
                Ok(()) => {
                    stats
                        .ring_high_water
                        .fetch_max(ring.tx.len() as u64, Ordering::Relaxed);
                }
                Err(TrySendError::Full(f)) => {
                    stats.ring_full.fetch_add(1, Ordering::Relaxed);
                    spare = Some(f);
                }
                Err(TrySendError::Disconnected(_)) => return,
            }
        }
        if got > 0 {
            if let Some(w) = waker.get() {
                w.wake();
            }
        }
    }
}

/// One datagram: its length, its IPv4 sender, and the socket's drop count when the kernel
/// reported it (`SO_RXQ_OVFL`).
fn recv_dgram(
    sock: &UdpSocket,
    buf: &mut [u8],
    flags: libc::c_int,
) -> io::Result<(usize, Option<SocketAddrV4>, Option<u32>)> {
    // SAFETY: all-zero is a valid sockaddr_in / msghdr.
    let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    // Room for one u32 control message (CMSG_SPACE(4) is 24 on 64-bit Linux), aligned.
    let mut ctrl = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: as above.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&raw mut addr).cast();
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctrl.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&ctrl) as _;
    // SAFETY: `msg` points at live buffers of the sizes it states, for the whole call.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &raw mut msg, flags) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let from = (msg.msg_namelen as usize >= std::mem::size_of::<libc::sockaddr_in>()
        && libc::c_int::from(addr.sin_family) == libc::AF_INET)
        .then(|| {
            SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(addr.sin_addr.s_addr)),
                u16::from_be(addr.sin_port),
            )
        });
    let mut drops = None;
    // SAFETY: the CMSG macros walk the control buffer the kernel filled, within
    // `msg_controllen`; the data of an SO_RXQ_OVFL message is one u32.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&raw const msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SO_RXQ_OVFL {
                drops = Some(std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<u32>()));
            }
            c = libc::CMSG_NXTHDR(&raw const msg, c);
        }
    }
    Ok((n as usize, from, drops))
}

/// The Ethernet/IPv4/UDP headers a datagram from `src:sport` to `dst:4791` came with, as far
/// as a socket can tell (see the module docs: zero MACs and the IPv4 header rxe sends, with
/// ID 0), followed by the datagram.
pub(crate) fn rebuild_frame(
    f: &mut Vec<u8>,
    src: Ipv4Addr,
    sport: u16,
    dst: Ipv4Addr,
    dgram: &[u8],
) {
    let udp_len = (UDP_LEN + dgram.len()).min(0xFFFF - IP_LEN);
    let eth = f.len();
    let (ip, udp) = (eth + ETH_LEN, eth + ETH_LEN + IP_LEN);
    f.resize(udp + UDP_LEN, 0);
    EthRepr::new(EthernetAddress([0; 6]), EthernetAddress([0; 6]))
        .emit(&mut EthernetFrame::new_unchecked(&mut f[eth..ip]));
    Ipv4Repr::new(src, dst).emit(&mut Ipv4Packet::new_unchecked(&mut f[ip..udp]), udp_len);
    UdpRepr::new(sport).emit(
        &mut UdpPacket::new_unchecked(&mut f[udp..]),
        udp_len - UDP_LEN,
    );
    f.extend_from_slice(dgram);
}

/// For an IPv4 RoCE packet (from the IP header on) whose ICRC does not match with the IP ID
/// it has: finds the IP ID that makes it match, if there is one, writes it (and the header
/// checksum) and returns true. Computes the packet's ICRC once; see [`solve_ip_id_with`].
#[cfg(test)]
pub(crate) fn solve_ip_id(ip_pkt: &mut [u8]) -> bool {
    let n = ip_total_len(ip_pkt);
    n.and_then(|n| crate::wire::icrc::compute(&ip_pkt[..n - 4]).ok())
        .is_some_and(|computed| solve_ip_id_with(ip_pkt, computed))
}

/// The IPv4 total length of a RoCE packet (from the IP header on), if it can hold the
/// headers and an ICRC and fits in `ip_pkt` (a short frame is padded).
fn ip_total_len(ip_pkt: &[u8]) -> Option<usize> {
    const MIN: usize = IP_LEN + UDP_LEN + 12 + 4;
    if ip_pkt.len() < MIN || ip_pkt[0] != 0x45 {
        return None;
    }
    let n = usize::from(u16::from_be_bytes([ip_pkt[2], ip_pkt[3]]));
    (MIN..=ip_pkt.len()).contains(&n).then_some(n)
}

/// [`solve_ip_id`] given `computed`, the ICRC of the packet with the IP ID it has (what the
/// receive path's check computed): no further CRC pass, a constant amount of arithmetic.
///
/// The CRC is affine: changing the ID by `x` changes the ICRC by `R2(x) * x^(8k) mod P`,
/// where `R2(x)` is the CRC register (zero start, no final XOR) after the two bytes of `x`
/// and `k` the number of bytes after the ID. So `R2(x) = delta * x^(-8k) mod P` (x is
/// invertible mod P: P has a constant term), and `R2`, an injective linear map of 16 bits,
/// is inverted by a fixed elimination table.
pub(crate) fn solve_ip_id_with(ip_pkt: &mut [u8], computed: u32) -> bool {
    let Some(n) = ip_total_len(ip_pkt) else {
        return false;
    };
    let want = u32::from_le_bytes([ip_pkt[n - 4], ip_pkt[n - 3], ip_pkt[n - 2], ip_pkt[n - 1]]);
    // Bytes after the ID up to the ICRC (the ID is at 4..6 of the IP header).
    let k = n - 4 - 6;
    let Some(x) = gf2::solve_r2(gf2::mul(want ^ computed, gf2::inv_shift(k))) else {
        return false;
    };
    let mut header = Ipv4Packet::new_unchecked(&mut ip_pkt[..IP_LEN]);
    let id = header.ident() ^ x;
    header.set_ident(id);
    header.fill_checksum();
    true
}

/// CRC-32 arithmetic over GF(2) for [`solve_ip_id_with`], in the CRC's reflected bit order
/// (bit 31 is the coefficient of x^0, bit 0 that of x^31), all computed at compile time.
mod gf2 {
    /// The CRC-32 polynomial, reflected (Ethernet / zlib).
    const POLY: u32 = 0xEDB8_8320;
    /// The polynomial 1.
    const ONE: u32 = 1 << 31;
    /// x^-1 mod P: (P - 1) / x, reflected.
    const X_INV: u32 = (POLY << 1) | 1;

    /// a * b mod P.
    pub(super) const fn mul(a: u32, mut b: u32) -> u32 {
        let (mut p, mut m) = (0u32, ONE);
        while m != 0 {
            if a & m != 0 {
                p ^= b;
            }
            m >>= 1;
            b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
        }
        p
    }

    /// `INV[w][d]` = x^(-8 * d * 16^w) mod P: four nibble tables cover every k < 2^16.
    const INV: [[u32; 16]; 4] = {
        let mut t = [[ONE; 16]; 4];
        // x^-8 = (x^-1)^8.
        let mut step = X_INV;
        let mut i = 0;
        while i < 3 {
            step = mul(step, step);
            i += 1;
        }
        let mut w = 0;
        while w < 4 {
            let mut d = 1;
            while d < 16 {
                t[w][d] = mul(t[w][d - 1], step);
                d += 1;
            }
            step = mul(t[w][15], step); // x^(-8 * 16^(w + 1))
            w += 1;
        }
        t
    };

    /// x^(-8k) mod P, for k < 2^16: undoes k zero bytes of CRC.
    pub(super) fn inv_shift(k: usize) -> u32 {
        let n = |w: usize| INV[w][(k >> (4 * w)) & 0xF];
        mul(mul(n(0), n(1)), mul(n(2), n(3)))
    }

    /// The CRC register after the bytes of the 16-bit `x` (big-endian), from zero.
    const fn r2(x: u16) -> u32 {
        let mut r = 0u32;
        let b = x.to_be_bytes();
        let mut i = 0;
        while i < 2 {
            r ^= b[i] as u32;
            let mut j = 0;
            while j < 8 {
                r = if r & 1 != 0 { (r >> 1) ^ POLY } else { r >> 1 };
                j += 1;
            }
            i += 1;
        }
        r
    }

    /// `R2`'s image in echelon form: entry `b` is a vector whose highest set bit is `b`
    /// (or 0) and the ID bits that make it.
    const PIVOTS: [(u32, u16); 32] = {
        let mut t = [(0u32, 0u16); 32];
        let mut bit = 0;
        while bit < 16 {
            let (mut v, mut m) = (r2(1 << bit), 1u16 << bit);
            while v != 0 {
                let h = 31 - v.leading_zeros() as usize;
                if t[h].0 == 0 {
                    t[h] = (v, m);
                    break;
                }
                v ^= t[h].0;
                m ^= t[h].1;
            }
            assert!(v != 0, "R2 is injective");
            bit += 1;
        }
        t
    };

    /// The `x` with `R2(x) = target`, if there is one.
    pub(super) fn solve_r2(mut target: u32) -> Option<u16> {
        let mut x = 0u16;
        while target != 0 {
            let (v, m) = PIVOTS[31 - target.leading_zeros() as usize];
            if v == 0 {
                return None;
            }
            target ^= v;
            x ^= m;
        }
        Some(x)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn inverse_and_shift() {
            assert_eq!(mul(X_INV, ONE >> 1), ONE, "x^-1 * x = 1");
            for k in [0usize, 1, 7, 16, 255, 1024, 4321, 65535] {
                // x^(8k) by repeated multiplication by x^8.
                let mut fwd = ONE;
                let x8 = (0..8).fold(ONE, |a, _| mul(a, ONE >> 1));
                for _ in 0..k {
                    fwd = mul(fwd, x8);
                }
                assert_eq!(mul(fwd, inv_shift(k)), ONE, "k = {k}");
            }
            for x in [1u16, 0x8000, 0x1234, 0xFFFF] {
                assert_eq!(solve_r2(r2(x)), Some(x));
            }
        }
    }
}

impl Link for UdpLink {
    fn transmit(&mut self, frame: &[u8]) {
        let bad = |s: &UdpStats| {
            s.unsendable.fetch_add(1, Ordering::Relaxed);
        };
        // Ethernet (an 802.1Q tag is dropped with the rest of the L2 header), IPv4, UDP.
        let mut off = 12;
        let et = |o: usize| {
            frame
                .get(o..o + 2)
                .map(|b| u16::from_be_bytes([b[0], b[1]]))
        };
        if et(off) == Some(0x8100) {
            off += 4;
        }
        if et(off) != Some(0x0800) {
            return bad(&self.stats);
        }
        let ip = off + 2;
        let Some(iph) = frame.get(ip..ip + IP_LEN) else {
            return bad(&self.stats);
        };
        if iph[0] != 0x45 || iph[9] != 17 {
            return bad(&self.stats);
        }
        let dst = Ipv4Addr::new(iph[16], iph[17], iph[18], iph[19]);
        let udp = ip + IP_LEN;
        let Some(uh) = frame.get(udp..udp + UDP_LEN) else {
            return bad(&self.stats);
        };
        let sport = u16::from_be_bytes([uh[0], uh[1]]);
        let ulen = usize::from(u16::from_be_bytes([uh[4], uh[5]]));
        let Some(dgram) = frame.get(udp + UDP_LEN..udp + ulen.max(UDP_LEN)) else {
            return bad(&self.stats);
        };
        let to = SocketAddrV4::new(dst, ROCE_V2_PORT);
        let sent = if let Some(s) = self.socket_for(sport) {
            s.send_to(dgram, to).is_ok()
        } else {
            // Rewrite the source port and recompute the ICRC for the main socket's port.
            self.stats.sport_fallbacks.fetch_add(1, Ordering::Relaxed);
            let mut f = std::mem::take(&mut self.scratch);
            f.clear();
            f.extend_from_slice(&frame[ip..udp + ulen.max(UDP_LEN)]);
            f[IP_LEN..IP_LEN + 2].copy_from_slice(&ROCE_V2_PORT.to_be_bytes());
            let n = f.len();
            let ok = match crate::wire::icrc::compute(&f) {
                Ok(c) => {
                    f[n - 4..].copy_from_slice(&c.to_le_bytes());
                    self.main.send_to(&f[IP_LEN + UDP_LEN..], to).is_ok()
                }
                Err(_) => false,
            };
            self.scratch = f;
            ok
        };
        if sent {
            self.stats.sent.fetch_add(1, Ordering::Relaxed);
        } else {
            bad(&self.stats);
        }
    }

    fn receive(&mut self, buf: &mut Vec<u8>) -> bool {
        match self.rx.try_recv() {
            Ok(mut f) => {
                std::mem::swap(buf, &mut f);
                f.clear();
                // One buffer back for the one taken: the reader's pool stays at its size.
                let _ = self.free.try_send(f);
                true
            }
            Err(_) => false,
        }
    }

    fn attach(&mut self, env: &LinkEnv) {
        let _ = self.waker.set(env.waker.clone());
    }

    fn rx_ip_header_exact(&self) -> bool {
        false
    }

    fn rx_drops(&self) -> LinkRxDrops {
        LinkRxDrops {
            ring_full: self.stats.ring_full.load(Ordering::Relaxed),
            oversize: self.stats.oversize.load(Ordering::Relaxed),
            overflow: self.stats.socket_drops.load(Ordering::Relaxed),
        }
    }
}

impl Drop for UdpLink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.reader.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring of 4: datagrams beyond what the device has taken are dropped and counted,
    /// and the buffers are the same 4 however many datagrams pass.
    #[test]
    fn a_full_ring_drops_and_counts_and_buffers_are_reused() {
        use std::time::Instant;
        let mut link = UdpLink::bind_with_ring(Ipv4Addr::new(127, 0, 0, 11), 4).expect("bind");
        let peer = UdpSocket::bind("127.0.0.12:0").expect("peer");
        let stats = link.stats();
        let settle = |received: u64| {
            let deadline = Instant::now() + Duration::from_secs(10);
            while stats.received.load(Ordering::Relaxed) < received {
                assert!(Instant::now() < deadline, "{stats:?}");
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        for i in 0..10u8 {
            peer.send_to(&[i; 64], "127.0.0.11:4791").expect("send");
        }
        settle(10);
        assert_eq!(stats.ring_full.load(Ordering::Relaxed), 6);
        assert_eq!(link.rx_drops().ring_full, 6);
        assert_eq!(stats.ring_high_water.load(Ordering::Relaxed), 4);
        // The first four are there, in order; the device's buffers go back to the ring.
        let mut buf = Vec::with_capacity(crate::wire::FRAME_CAPACITY);
        for i in 0..4u8 {
            assert!(link.receive(&mut buf));
            assert_eq!(buf[ETH_LEN + IP_LEN + UDP_LEN..], [i; 64]);
        }
        assert!(!link.receive(&mut buf));
        for round in 0..50u64 {
            for _ in 0..4 {
                peer.send_to(&[7; 64], "127.0.0.11:4791").expect("send");
            }
            settle(14 + 4 * round);
            for _ in 0..4 {
                assert!(link.receive(&mut buf));
            }
        }
        assert_eq!(
            stats.ring_buffers.load(Ordering::Relaxed),
            4,
            "no more buffers"
        );
        assert_eq!(stats.ring_full.load(Ordering::Relaxed), 6);
        // Larger than any RoCE v2 frame: dropped, counted, no buffer grows for it.
        peer.send_to(&[0; 9000], "127.0.0.11:4791").expect("send");
        settle(211);
        assert_eq!(link.rx_drops().oversize, 1);
        assert!(!link.receive(&mut buf));
    }

    #[test]
    fn bind_errors_are_typed() {
        let a = UdpLink::bind(Ipv4Addr::new(127, 0, 0, 9)).expect("bind 127.0.0.9");
        assert!(matches!(
            UdpLink::bind(Ipv4Addr::new(127, 0, 0, 9)),
            Err(LinkError::AddrInUse(_))
        ));
        assert!(matches!(
            UdpLink::bind(Ipv4Addr::new(192, 0, 2, 77)),
            Err(LinkError::AddrNotAvailable(_))
        ));
        assert_eq!(a.local_addr().port(), 4791);
    }

    /// rxe's own frames (IP IDs from the kernel's counter), as a UDP socket would deliver
    /// them: the rebuilt frame has ID 0; solving restores rxe's ID and the ICRC verifies.
    #[test]
    fn rxe_frames_verify_through_a_socket_by_solving_the_ip_id() {
        use pcap_file::pcap::PcapReader;
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/pcaps/rdma_read_multi.pcap"
        );
        let mut r = PcapReader::new(std::fs::File::open(path).expect("capture")).expect("pcap");
        let mut n = 0;
        while let Some(p) = r.next_packet() {
            let f = p.expect("record").data.into_owned();
            let ip = &f[14..34];
            let (src, dst) = (
                Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]),
                Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]),
            );
            let id = u16::from_be_bytes([ip[4], ip[5]]);
            assert_ne!(id, 0, "rxe uses the kernel's ID counter");
            let udp_len = usize::from(u16::from_be_bytes([f[38], f[39]]));
            let sport = u16::from_be_bytes([f[34], f[35]]);
            let mut rebuilt = Vec::new();
            rebuild_frame(&mut rebuilt, src, sport, dst, &f[42..34 + udp_len]);
            let pkt = crate::wire::RocePacket::new_checked(&rebuilt[..]).expect("valid frame");
            assert!(pkt.verify_icrc().is_err(), "ID 0 is not rxe's");
            assert!(solve_ip_id(&mut rebuilt[14..]));
            assert_eq!(u16::from_be_bytes([rebuilt[18], rebuilt[19]]), id);
            let pkt = crate::wire::RocePacket::new_checked(&rebuilt[..]).expect("valid frame");
            assert!(pkt.verify_icrc().is_ok());
            n += 1;
        }
        assert_eq!(n, 20, "every frame of the capture");
    }

    #[test]
    fn the_ip_id_is_recovered_from_the_icrc() {
        // rxe's SEND ONLY from the captures has a non-zero IP ID; zero it and solve.
        use crate::wire::{
            BthRepr, EthRepr, EthernetAddress, IpRepr, Ipv4Repr, Opcode, PacketRepr, UdpRepr,
        };
        let mut v4 = Ipv4Repr::new(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        v4.ident = 0x1234;
        let repr = PacketRepr::new(
            EthRepr::new(EthernetAddress([2; 6]), EthernetAddress([4; 6])),
            IpRepr::V4(v4),
            UdpRepr::new(0xC000),
            BthRepr::new(Opcode::RcSendOnly, 0x11, 5),
        );
        let mut b = vec![0u8; repr.buffer_len(64)];
        let n = repr.emit(&mut b, &[7; 64]).unwrap();
        b.truncate(n);
        let mut ip = b[14..].to_vec();
        ip[4..6].copy_from_slice(&[0, 0]);
        assert!(solve_ip_id(&mut ip));
        assert_eq!(&ip[4..6], &[0x12, 0x34]);
        assert_eq!(ip, b[14..]);
        // A corrupted payload has no such ID (with overwhelming probability).
        let mut bad = b[14..].to_vec();
        bad[50] ^= 0x10;
        assert!(!solve_ip_id(&mut bad));
    }
}
