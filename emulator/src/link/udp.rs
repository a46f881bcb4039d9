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
//! **Batches.** Frames the device hands over ([`Link::transmit_owned`]) wait in a queue of
//! at most 64 and go out when the device next receives ([`Link::receive`]; it does after
//! every burst it sends), on [`Link::flush`], when the queue is full, or when the link is
//! dropped: each run of frames from one socket in one `sendmmsg`, in order. A borrowed
//! frame ([`Link::transmit`]) goes out before the call returns, as it always did. With
//! [`UdpOffload::gso`] (on by default) a run of equal-sized frames to one destination (the
//! last may be shorter) is one message of the `sendmmsg` with `UDP_SEGMENT` set to the
//! frame's datagram size, so the kernel cuts it at frame boundaries: one RoCE packet per
//! datagram, as rxe needs. An offload the kernel lacks (`setsockopt` fails at bind, or a GSO
//! send fails with `EIO`) leaves the plain path; [`UdpOffload::ENV`] forces either.
//!
//! **IP IDs of a GSO send.** The kernel numbers the datagrams it cuts from one GSO message
//! 0, 1, 2, ...: on an unconnected socket with DF set (`IP_PMTUDISC_DO`, so not
//! `ignore_df`), `ip_select_ident_segs` gives the message's IP header ID 0 (a connected
//! socket would take its own counter, a socket without DF the shared hashed generator), and
//! `inet_gso_segment` gives the segments that ID plus 0, 1, 2, ... (no fixed-ID flag exists
//! for UDP). Every GSO message starts again at 0, whatever was sent before and to whichever
//! destination; a plain send has 0. Measured on Linux 6.18 on a TAP interface (where the
//! kernel segments in software, as for a NIC without UDP segmentation offload, and as the
//! datagrams reach a QEMU guest's rxe): plain, GSO of 3, GSO of 5, plain, GSO of 4 to
//! another address, ..., GSO of 64 left with IDs 0; 0 1 2; 0 1 2 3 4; 0; 0 1 2 3; ...; 0 to
//! 63. (On loopback the kernel does not segment on send at all: a receiver with `UDP_GRO`
//! gets the message whole, one without has it cut on receive by the same function, with the
//! same IDs.) The ICRC covers the IP ID, so the link seals the `k`-th frame of a GSO
//! message for IP ID `k` before the send: the CRC is affine in the ID, so that is an XOR
//! of a constant per ID bit and frame length onto the ICRC, no CRC pass. Every datagram
//! on the wire then carries an ICRC right against its real IP header (the TAP test checks
//! each one). A NIC that segments in hardware is assumed to number as the kernel does (the
//! kernel has no "mangle ID" feature for UDP segmentation); that is not measured here.
//!
//! **Source ports.** Every frame carries its QP's UDP source port (rxe's
//! `rdma_get_udp_sport`, or the address path's `udp_sport`). The link sends each frame from
//! a socket bound to `<IPv4>:<that port>`, opened on first use and kept (one per flow, like
//! rxe's per-QP tunnel sockets). When that port cannot be bound (another program holds it),
//! the frame goes out from the main socket (port 4791) with its source port rewritten and
//! its ICRC recomputed; rxe accepts any source port, so interop holds either way, only the
//! flow id differs (counted in [`UdpStats`]).
//!
//! **Receiving.** A reader thread takes datagrams from the main socket (any source port), up
//! to 16 per `recvmmsg` (with `UDP_GRO`, on by default where the kernel has it, one buffer
//! may hold a run of one sender's datagrams, which the reader cuts at the size the kernel
//! reports: one frame per datagram as sent), and rebuilds the frame the device's receive
//! path expects: Ethernet (both MACs zero, IPv4 ethertype), an IPv4 header (ID 0, or the
//! datagram's place in a GRO buffer, see below; DF, TTL 64, TOS 0, correct checksum; source
//! and destination from the socket), a UDP header (the sender's source port, 4791, length,
//! checksum 0), then the datagram. It takes whatever is queued in one go (non-blocking reads
//! after the first, up to 64 datagrams) and hands the frames to the device through its
//! receive ring. A batch of 8 datagrams or more (a stream: GRO buffers of a WRITE, READ
//! responses) the reader then runs through the device itself when the device is idle, as
//! a doorbell's poster does ([`crate::link::Waker::run`]): no thread to wake, no handoff. A
//! smaller batch (a request, an ACK), or a busy device, wakes the device once per batch.
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
//! TTL and TOS, which the ICRC masks anyway). The rebuilt header has ID 0, but the `k`-th
//! datagram of a `UDP_GRO` buffer has ID `k`: on loopback a buffer of several datagrams is
//! always one GSO send (nothing else coalesces there), which the sender's kernel numbered
//! so. Frames from senders that use IP ID 0 and GSO as the link does (other emulated
//! devices, host programs on unconnected DF sockets) verify exactly. For the rest (rxe
//! uses the kernel's ID counter; without `UDP_GRO`, the later datagrams of a GSO send;
//! off loopback, a buffer a NIC's GRO coalesced from plain sends) the port solves for the one 16-bit ID that makes the
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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crossbeam::queue::ArrayQueue;

use super::rx_ring::{Queues, RingEnd};
use super::{Link, LinkEnv, LinkRxDrops, Waker, udp_sys};
use crate::wire::{Ipv4Packet, ROCE_V2_PORT};

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
    /// Send system calls made (`sendmmsg`, or a plain send after an error): fewer than [`UdpStats::sent`] when frames went out in batches.
    pub send_calls: AtomicU64,
    /// Receive system calls that returned datagrams (`recvmmsg`): fewer than
    /// [`UdpStats::received`] when datagrams came in batches.
    pub recv_calls: AtomicU64,
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

/// Which of the kernel's UDP offloads a [`UdpLink`] uses where the kernel has them (see the
/// module docs). Whatever they say, what arrives is one frame per datagram and what leaves
/// is one datagram per frame; the offloads only change how many system calls that takes.
///
/// ```
/// use rnic_emulator::link::udp::UdpOffload;
///
/// assert_eq!(UdpOffload::default(), UdpOffload { gro: true, gso: true });
/// assert_eq!(UdpOffload::parse("off"), Some(UdpOffload::PLAIN));
/// assert_eq!(UdpOffload::parse("gro"), Some(UdpOffload { gro: true, gso: false }));
/// assert_eq!(UdpOffload::parse("fast"), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpOffload {
    /// Receive with `UDP_GRO`: the kernel may hand over a run of one flow's datagrams as one
    /// buffer, which the reader cuts at the size the kernel reports. Invisible on the wire.
    pub gro: bool,
    /// Send runs of equal-sized frames to one destination with `UDP_SEGMENT` (GSO): one
    /// message, cut by the kernel into one datagram per frame. The kernel numbers the IP
    /// IDs of the datagrams it cuts 0, 1, 2, ... (where a plain send has 0), and the ICRC
    /// covers the IP ID, so the link seals the `k`-th frame of each GSO message for IP ID
    /// `k` before it sends (see the module docs): every datagram on the wire carries an
    /// ICRC right against its real IP header, as Linux rxe checks it.
    pub gso: bool,
}

impl Default for UdpOffload {
    /// Both, where the kernel has them.
    fn default() -> Self {
        UdpOffload {
            gro: true,
            gso: true,
        }
    }
}

impl UdpOffload {
    /// Neither offload: one datagram per buffer each way (still `sendmmsg` / `recvmmsg`).
    pub const PLAIN: UdpOffload = UdpOffload {
        gro: false,
        gso: false,
    };

    /// The environment variable [`UdpLink::bind`] reads: `off` (or `plain`), `gro`, `gso`
    /// or `gro,gso` (both: the default).
    pub const ENV: &'static str = "RNIC_UDP_OFFLOAD";

    /// Parses a value of [`UdpOffload::ENV`].
    ///
    /// ```
    /// use rnic_emulator::link::udp::UdpOffload;
    ///
    /// assert_eq!(UdpOffload::parse("gso,gro"), Some(UdpOffload::default()));
    /// ```
    pub fn parse(v: &str) -> Option<UdpOffload> {
        let mut o = UdpOffload::PLAIN;
        for word in v.split(',').map(str::trim) {
            match word {
                "off" | "plain" | "none" | "" => {}
                "gro" => o.gro = true,
                "gso" => o.gso = true,
                _ => return None,
            }
        }
        Some(o)
    }

    /// What [`UdpOffload::ENV`] says, else the default (an unknown value is logged and
    /// ignored).
    ///
    /// ```
    /// use rnic_emulator::link::udp::UdpOffload;
    ///
    /// let _o = UdpOffload::from_env();
    /// ```
    pub fn from_env() -> UdpOffload {
        match std::env::var(Self::ENV) {
            Ok(v) => UdpOffload::parse(&v).unwrap_or_else(|| {
                log::warn!(
                    "{}={v:?}: not off, gro, gso or gro,gso; using gro,gso",
                    Self::ENV
                );
                UdpOffload::default()
            }),
            Err(_) => UdpOffload::default(),
        }
    }
}

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
    /// The source port of the last frame queued, when its socket is bound.
    last_sport: Option<u16>,
    /// The receive ring the reader thread fills.
    ring: RingEnd,
    stats: Arc<UdpStats>,
    /// Frames waiting for the next batch send (at most [`udp_sys::MAX_BATCH`]).
    tx: Vec<Queued>,
    /// Buffers of frames sent, for [`Link::transmit_owned`] to hand back.
    pool: Vec<Vec<u8>>,
    /// The offloads in use (asked for and present in the kernel).
    offload: UdpOffload,
    /// ICRC changes for IP IDs (GSO runs), kept from one batch to the next.
    ids: IdDeltas,
    /// The MTU of the interface holding `ip` (see [`UdpLink::interface_mtu`]).
    interface_mtu: Option<u32>,
}

/// A frame waiting to be sent: the datagram is `buf[start..end]`.
#[derive(Debug)]
struct Queued {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    to: SocketAddrV4,
    /// The source port socket it goes from; None: the main socket.
    sport: Option<u16>,
    /// A RoCE v2 packet (UDP destination port 4791, room for a BTH and an ICRC): its last
    /// four bytes are an ICRC over its IP header, which [`Queued::seal_for_id`] keeps right
    /// for the IP ID the kernel gives it. Only these go out in GSO runs.
    roce: bool,
}

impl Queued {
    fn dgram(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Where the frame's IPv4 header starts.
    fn ip(&self) -> usize {
        self.start - UDP_LEN - IP_LEN
    }

    /// The IPv4 total length: the header through the ICRC.
    fn ip_len(&self) -> usize {
        self.end - self.ip()
    }

    /// Makes the frame's ICRC right for the IP ID `id` (and writes `id` into the frame's
    /// own IP header, which records what the ICRC is sealed for): the kernel builds the IP
    /// header of what it sends, 0 for a plain send and `k` for the `k`-th datagram of a GSO
    /// send (see the module docs). No CRC pass: `ids` gives the change of the ICRC.
    fn seal_for_id(&mut self, id: u16, ids: &mut IdDeltas) {
        if !self.roce {
            return;
        }
        let ip = self.ip();
        let now = u16::from_be_bytes([self.buf[ip + 4], self.buf[ip + 5]]);
        let x = now ^ id;
        if x == 0 {
            return;
        }
        let delta = ids.of(self.ip_len(), x);
        let icrc = &mut self.buf[self.end - 4..self.end];
        let sealed = u32::from_le_bytes([icrc[0], icrc[1], icrc[2], icrc[3]]) ^ delta;
        icrc.copy_from_slice(&sealed.to_le_bytes());
        self.buf[ip + 4..ip + 6].copy_from_slice(&id.to_be_bytes());
    }
}

/// What changing the IPv4 ID of a RoCE packet does to its ICRC, for packets of one IP length
/// at a time. The CRC is affine: changing the ID by `x` (XOR) changes the ICRC by
/// `R2(x) * x^(8k) mod P`, `k` the bytes after the ID up to the ICRC (see
/// [`solve_ip_id_with`]). That is linear in `x`: one product per bit of the ID, computed
/// when first needed and kept while the length stays the same (a GSO run has one length,
/// but for its last frame), then an XOR per set bit.
#[derive(Debug)]
struct IdDeltas {
    /// The IP length the products are for (0: none yet).
    ip_len: usize,
    /// `x^(8k) mod P` for that length.
    shift: u32,
    /// The ICRC change of each single ID bit, where `known` has it.
    bits: [u32; 16],
    known: u16,
}

impl IdDeltas {
    const fn new() -> Self {
        IdDeltas {
            ip_len: 0,
            shift: 0,
            bits: [0; 16],
            known: 0,
        }
    }

    /// The XOR that turns the ICRC of a packet of IP length `ip_len` (at least the IPv4
    /// header, the UDP header, a BTH and the ICRC) with IP ID `a` into that of the same
    /// packet with ID `a ^ x`.
    fn of(&mut self, ip_len: usize, x: u16) -> u32 {
        if ip_len != self.ip_len {
            // Bytes after the ID (at 4..6 of the IP header) up to the ICRC.
            *self = IdDeltas {
                ip_len,
                shift: gf2::fwd_shift(ip_len - 4 - 6),
                ..IdDeltas::new()
            };
        }
        let (mut delta, mut rest) = (0, x);
        while rest != 0 {
            let b = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            if self.known & (1 << b) == 0 {
                self.bits[b] = gf2::mul(gf2::r2(1 << b), self.shift);
                self.known |= 1 << b;
            }
            delta ^= self.bits[b];
        }
        delta
    }
}

/// Sizes the receive buffer to `bytes` (`SO_RCVBUFFORCE`, else `SO_RCVBUF` capped by
/// `net.core.rmem_max`) and returns what the kernel reports (twice the size it set).
fn grow_rcvbuf(s: &UdpSocket, bytes: usize) -> usize {
    let want = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    if udp_sys::setsockopt_int(s, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, want).is_err() {
        // Not privileged: the kernel silently caps the size at rmem_max.
        let _ = udp_sys::setsockopt_int(s, libc::SOL_SOCKET, libc::SO_RCVBUF, want);
    }
    let got = udp_sys::getsockopt_int(s, libc::SOL_SOCKET, libc::SO_RCVBUF)
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
    udp_sys::setsockopt_int(
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
        Self::bind_with(ip, frames, UdpOffload::from_env())
    }

    /// Binds `<ip>:4791` with a receive ring of `frames` frames, using the kernel's UDP
    /// offloads as `offload` says where the kernel has them (see [`UdpLink::offload`]),
    /// and starts the reader thread.
    ///
    /// ```
    /// use rnic_emulator::link::udp::{UdpLink, UdpOffload, RX_RING_FRAMES};
    /// use std::net::Ipv4Addr;
    ///
    /// let link = UdpLink::bind_with(Ipv4Addr::new(127, 0, 0, 211), RX_RING_FRAMES, UdpOffload::PLAIN)?;
    /// assert_eq!(link.offload(), UdpOffload::PLAIN);
    /// # Ok::<(), rnic_emulator::link::LinkError>(())
    /// ```
    pub fn bind_with(
        ip: Ipv4Addr,
        frames: usize,
        offload: UdpOffload,
    ) -> Result<UdpLink, LinkError> {
        let frames = frames.max(1);
        let addr = SocketAddrV4::new(ip, ROCE_V2_PORT);
        let main = bind(addr)?;
        let rcvbuf = grow_rcvbuf(&main, RCVBUF_BYTES);
        // The drop count with each datagram; without it the link only loses the counter.
        let _ = udp_sys::setsockopt_int(&main, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1);
        // Offloads the kernel lacks fall back to the plain path, decided here, once.
        let offload = UdpOffload {
            gro: offload.gro && udp_sys::enable_gro(&main),
            gso: offload.gso && udp_sys::has_gso(&main),
        };
        let main = Arc::new(main);
        let reader_sock = main
            .try_clone()
            .map_err(|source| LinkError::Io { addr, source })?;
        reader_sock
            .set_read_timeout(Some(Duration::from_millis(20)))
            .map_err(|source| LinkError::Io { addr, source })?;
        let queues = Queues::new(frames);
        let waker: Arc<OnceLock<Waker>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(UdpStats::default());
        stats.rcvbuf_bytes.store(rcvbuf as u64, Ordering::Relaxed);
        let reader = {
            let (waker, stop, stats) = (Arc::clone(&waker), Arc::clone(&stop), Arc::clone(&stats));
            let queues = Arc::clone(&queues);
            std::thread::Builder::new()
                .name("rnic-udp-rx".into())
                .spawn(move || {
                    let ring = Ring { queues, frames };
                    reader(reader_sock, ip, ring, waker, stop, stats);
                })
                .map_err(|source| LinkError::Io { addr, source })?
        };
        Ok(UdpLink {
            ip,
            main,
            sport: HashMap::new(),
            last_sport: None,
            ring: RingEnd::new(queues, waker, stop, reader),
            stats,
            tx: Vec::with_capacity(udp_sys::MAX_BATCH),
            pool: Vec::with_capacity(udp_sys::MAX_BATCH),
            offload,
            ids: IdDeltas::new(),
            interface_mtu: udp_sys::interface_mtu(ip),
        })
    }

    /// The offloads in use: those asked for that the kernel has (an option the kernel
    /// refuses with `ENOPROTOOPT` or `EINVAL` at bind means the plain path).
    ///
    /// ```
    /// use rnic_emulator::link::udp::{UdpLink, UdpOffload, RX_RING_FRAMES};
    /// use std::net::Ipv4Addr;
    ///
    /// let all = UdpOffload { gro: true, gso: true };
    /// let link = UdpLink::bind_with(Ipv4Addr::new(127, 0, 0, 212), RX_RING_FRAMES, all)?;
    /// let got = link.offload(); // what this kernel has of it
    /// assert!(!got.gro || all.gro);
    /// # Ok::<(), rnic_emulator::link::LinkError>(())
    /// ```
    pub fn offload(&self) -> UdpOffload {
        self.offload
    }

    /// The MTU of the host interface that holds its address (`lo` for 127.0.0.0/8), read
    /// at bind; `None` when no interface has the address. A port on this link is as large
    /// as that interface allows, as rxe's port follows its netdev's MTU: on `lo` (65536) its
    /// active MTU is 4096, on a 1500-byte interface 1024.
    ///
    /// ```
    /// use rnic_emulator::link::UdpLink;
    /// use std::net::Ipv4Addr;
    ///
    /// let link = UdpLink::bind(Ipv4Addr::new(127, 0, 0, 213))?;
    /// if let Some(mtu) = link.interface_mtu() {
    ///     assert!(mtu >= 1280); // lo's: 65536 unless someone changed it
    /// }
    /// # Ok::<(), rnic_emulator::link::LinkError>(())
    /// ```
    pub fn interface_mtu(&self) -> Option<u32> {
        self.interface_mtu
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
    queues: Arc<Queues>,
    /// Capacity, in frames and in buffers.
    frames: usize,
}

/// The reader thread: datagrams in (a `recvmmsg` at a time, each `UDP_GRO` buffer cut back
/// into its datagrams), rebuilt frames out, in batches of what is queued.
fn reader(
    sock: UdpSocket,
    ip: Ipv4Addr,
    ring: Ring,
    waker: Arc<OnceLock<Waker>>,
    stop: Arc<AtomicBool>,
    stats: Arc<UdpStats>,
) {
    let mut batch = udp_sys::RecvBatch::new();
    let mut pool = RingPool {
        ring,
        allocated: 0,
        spare: None,
    };
    // Until when (reader clock) the reader polls instead of blocking.
    let clock = std::time::Instant::now();
    let mut busy_until = Duration::ZERO;
    while !stop.load(Ordering::Acquire) {
        let mut got = 0;
        let polling = clock.elapsed() < busy_until;
        while got < RX_BATCH {
            // The first call blocks (up to the socket's read timeout) for one datagram unless
            // the reader is polling; the rest only take what is already queued.
            let Ok(n) = batch.recv(&sock, got == 0 && !polling) else {
                break;
            };
            if n == 0 {
                break;
            }
            stats.recv_calls.fetch_add(1, Ordering::Relaxed);
            for i in 0..n {
                let (data, meta) = batch.slot(i);
                if let Some(d) = meta.drops {
                    stats
                        .socket_drops
                        .fetch_max(u64::from(d), Ordering::Relaxed);
                }
                let Some(from) = meta.from else { continue };
                if meta.truncated {
                    // Larger than a slot (so than any RoCE v2 frame).
                    got += 1;
                    stats.received.fetch_add(1, Ordering::Relaxed);
                    stats.oversize.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                // One datagram, or a GRO run of them: every `segment` bytes (the last may be
                // shorter) is one datagram as the sender sent it. The `k`-th of a run gets
                // IP ID `k` in its rebuilt header: what the sender's kernel gave it when the
                // run was one GSO send (on loopback, always: nothing else coalesces there).
                let seg = meta.segment.unwrap_or(data.len()).max(1);
                for (k, dgram) in data.chunks(seg).enumerate() {
                    got += 1;
                    let id = u16::try_from(k).unwrap_or(0);
                    pool.deliver(&stats, from, ip, id, dgram);
                }
                if data.is_empty() {
                    got += 1;
                    pool.deliver(&stats, from, ip, 0, data);
                }
            }
            if n < udp_sys::RX_SLOTS {
                break; // the socket ran dry
            }
        }
        if got == 0 {
            if polling {
                std::thread::yield_now();
            }
            continue;
        }
        busy_until = clock.elapsed() + BUSY_POLL;
        if let Some(w) = waker.get() {
            if got >= RUN_BATCH || polling {
                run_device(w, &pool.ring.queues.frames);
            } else {
                w.wake();
            }
        }
    }
}

/// Datagrams in one batch from which the reader, woken from a blocking receive, runs the
/// device's work itself ([`run_device`]) rather than waking the device: a stream's bursts
/// (GRO buffers of a WRITE, a READ's responses) cost no handoff and no wake-up, while a lone
/// request or ACK goes to the device thread at once and the reader is back at the socket
/// for the next datagram (measured: `write-lat` over the link, t_typical 42 us with every
/// batch run in the reader, 33 us handed over). While the reader polls ([`BUSY_POLL`]) it
/// runs every batch itself: the device thread's wake-up is then the only one left.
const RUN_BATCH: usize = 8;

/// How long after its last datagram the reader keeps looking at the socket without blocking
/// (yielding the CPU between empty looks) before it blocks again: NAPI's busy polling. A
/// blocked thread's wake-up is what a lone request or ACK waits for otherwise, and on a
/// virtual machine it is long: a plain UDP ping-pong between two processes on a 2-core VM
/// took 51 us a round trip with blocking receives and 5.6 us polling, and `write-lat` over
/// this link went from 25 to 18 us (t_typical, medians of 5 runs). An idle link blocks
/// again after this, costing nothing.
const BUSY_POLL: Duration = Duration::from_micros(200);

/// After the reader put frames on `ring`: the device takes them in this thread while it is
/// idle (no thread to wake, no handoff: a NIC's interrupt handler that polls to completion,
/// as NAPI does), again while a step leaves frames for its budget, and is woken when it is
/// busy (its own thread, or the one stepping it, takes them) or takes none.
fn run_device(w: &Waker, ring: &ArrayQueue<Vec<u8>>) {
    loop {
        let before = ring.len();
        if before == 0 || !w.run() {
            return;
        }
        if ring.len() >= before {
            // Nothing taken (firmware dead, say): the device thread decides.
            w.wake();
            return;
        }
    }
}

/// The reader's buffers: those it allocated (at most the ring's capacity), and one kept
/// from a frame the full ring refused.
struct RingPool {
    ring: Ring,
    allocated: usize,
    spare: Option<Vec<u8>>,
}

impl RingPool {
    /// One datagram from `from` to `ip`: rebuilt into a frame (with IP ID `id`) on the
    /// ring, or dropped and counted.
    fn deliver(
        &mut self,
        stats: &UdpStats,
        from: SocketAddrV4,
        ip: Ipv4Addr,
        id: u16,
        dgram: &[u8],
    ) {
        stats.received.fetch_add(1, Ordering::Relaxed);
        if ETH_LEN + IP_LEN + UDP_LEN + dgram.len() > crate::wire::FRAME_CAPACITY {
            stats.oversize.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let q = &self.ring.queues;
        let f = self.spare.take().or_else(|| q.free.pop());
        let mut f = match f {
            Some(f) => f,
            None if self.allocated < self.ring.frames => {
                self.allocated += 1;
                stats.ring_buffers.fetch_add(1, Ordering::Relaxed);
                Vec::with_capacity(crate::wire::FRAME_CAPACITY)
            }
            None => {
                // Every buffer holds a frame the device has not taken: the ring is full.
                stats.ring_full.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        f.clear();
        rebuild_frame(&mut f, *from.ip(), from.port(), ip, id, dgram);
        match q.frames.push(f) {
            Ok(()) => {
                stats
                    .ring_high_water
                    .fetch_max(q.frames.len() as u64, Ordering::Relaxed);
            }
            Err(f) => {
                stats.ring_full.fetch_add(1, Ordering::Relaxed);
                self.spare = Some(f);
            }
        }
    }
}

/// The Ethernet/IPv4/UDP headers a datagram from `src:sport` to `dst:4791` came with, as far
/// as a socket can tell (see the module docs: zero MACs and the IPv4 header rxe sends, with
/// IP ID `id`), followed by the datagram. The headers are written as bytes, the IPv4
/// checksum summed over the header's ten words: this runs once per datagram received.
pub(crate) fn rebuild_frame(
    f: &mut Vec<u8>,
    src: Ipv4Addr,
    sport: u16,
    dst: Ipv4Addr,
    id: u16,
    dgram: &[u8],
) {
    let udp_len = (UDP_LEN + dgram.len()).min(0xFFFF - IP_LEN) as u16;
    let mut h = [0u8; ETH_LEN + IP_LEN + UDP_LEN];
    // Ethernet: both MACs zero, IPv4.
    h[12..14].copy_from_slice(&[0x08, 0x00]);
    // IPv4: version 4, IHL 5, TOS 0, total length, ID, DF, TTL 64, UDP, checksum, addresses.
    let ip = &mut h[ETH_LEN..ETH_LEN + IP_LEN];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(IP_LEN as u16 + udp_len).to_be_bytes());
    ip[4..6].copy_from_slice(&id.to_be_bytes());
    ip[6] = 0x40;
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let sum = ip
        .chunks_exact(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum::<u32>();
    let sum = (sum & 0xFFFF) + (sum >> 16);
    let sum = (sum & 0xFFFF) + (sum >> 16);
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    // UDP: the sender's port, 4791, the length, checksum 0.
    let udp = &mut h[ETH_LEN + IP_LEN..];
    udp[0..2].copy_from_slice(&sport.to_be_bytes());
    udp[2..4].copy_from_slice(&ROCE_V2_PORT.to_be_bytes());
    udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
    f.reserve(h.len() + dgram.len());
    f.extend_from_slice(&h);
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
    crate::wire::fill_ipv4_checksum(&mut header);
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

    /// x^(8 * d * 16^w) mod P for `step` = x^8 (or its inverse): `t[w][d]`, four nibble
    /// tables that cover every k < 2^16.
    const fn shift_tables(mut step: u32) -> [[u32; 16]; 4] {
        let mut t = [[ONE; 16]; 4];
        let mut w = 0;
        while w < 4 {
            let mut d = 1;
            while d < 16 {
                t[w][d] = mul(t[w][d - 1], step);
                d += 1;
            }
            step = mul(t[w][15], step); // step^(16^(w + 1))
            w += 1;
        }
        t
    }

    /// x^8 = (x^1)^8 (x is `ONE >> 1`), and x^-8 = (x^-1)^8.
    const fn eighth_power(x: u32) -> u32 {
        let mut step = x;
        let mut i = 0;
        while i < 3 {
            step = mul(step, step);
            i += 1;
        }
        step
    }

    /// `INV[w][d]` = x^(-8 * d * 16^w) mod P.
    const INV: [[u32; 16]; 4] = shift_tables(eighth_power(X_INV));
    /// `FWD[w][d]` = x^(8 * d * 16^w) mod P.
    const FWD: [[u32; 16]; 4] = shift_tables(eighth_power(ONE >> 1));

    fn shift(t: &[[u32; 16]; 4], k: usize) -> u32 {
        let n = |w: usize| t[w][(k >> (4 * w)) & 0xF];
        mul(mul(n(0), n(1)), mul(n(2), n(3)))
    }

    /// x^(-8k) mod P, for k < 2^16: undoes k zero bytes of CRC.
    pub(super) fn inv_shift(k: usize) -> u32 {
        shift(&INV, k)
    }

    /// x^(8k) mod P, for k < 2^16: what k bytes after a change do to its effect on the CRC.
    pub(super) fn fwd_shift(k: usize) -> u32 {
        shift(&FWD, k)
    }

    /// The CRC register after the bytes of the 16-bit `x` (big-endian), from zero.
    pub(super) const fn r2(x: u16) -> u32 {
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
                assert_eq!(fwd_shift(k), fwd, "k = {k}");
            }
            for x in [1u16, 0x8000, 0x1234, 0xFFFF] {
                assert_eq!(solve_r2(r2(x)), Some(x));
            }
        }
    }
}

/// Where a frame's datagram is and goes: `(start, end, destination, source port)`, and
/// whether it is a RoCE v2 packet ([`Queued::roce`]).
type Route = (usize, usize, SocketAddrV4, u16, bool);

/// The datagram of an Ethernet frame (an 802.1Q tag is dropped with the rest of the L2
/// header) carrying IPv4/UDP, if it is one.
fn route(frame: &[u8]) -> Option<Route> {
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
        return None;
    }
    let ip = off + 2;
    let iph = frame.get(ip..ip + IP_LEN)?;
    if iph[0] != 0x45 || iph[9] != 17 {
        return None;
    }
    let dst = Ipv4Addr::new(iph[16], iph[17], iph[18], iph[19]);
    let udp = ip + IP_LEN;
    let uh = frame.get(udp..udp + UDP_LEN)?;
    let sport = u16::from_be_bytes([uh[0], uh[1]]);
    let dport = u16::from_be_bytes([uh[2], uh[3]]);
    let ulen = usize::from(u16::from_be_bytes([uh[4], uh[5]]));
    let end = udp + ulen.max(UDP_LEN);
    frame.get(udp + UDP_LEN..end)?;
    // A BTH and an ICRC at least.
    let roce = dport == ROCE_V2_PORT && ulen >= UDP_LEN + 12 + 4;
    Some((
        udp + UDP_LEN,
        end,
        SocketAddrV4::new(dst, ROCE_V2_PORT),
        sport,
        roce,
    ))
}

impl UdpLink {
    /// Queues `frame` for the next batch send (sending the queue first when it is full);
    /// hands `frame` back when it is not IPv4/UDP (counted as unsendable).
    fn enqueue(&mut self, mut frame: Vec<u8>) -> Result<(), Vec<u8>> {
        let Some((start, end, to, sport, roce)) = route(&frame) else {
            self.stats.unsendable.fetch_add(1, Ordering::Relaxed);
            return Err(frame);
        };
        // A flow's frames come in runs: the last port found bound needs no map lookup.
        let bound = self.last_sport == Some(sport) || self.socket_for(sport).is_some();
        let sport = if bound {
            self.last_sport = Some(sport);
            Some(sport)
        } else {
            // Rewrite the source port and recompute the ICRC for the main socket's port,
            // in the frame itself (the port has captured it already).
            self.stats.sport_fallbacks.fetch_add(1, Ordering::Relaxed);
            let (ip, n) = (start - UDP_LEN - IP_LEN, end);
            frame[ip + IP_LEN..ip + IP_LEN + 2].copy_from_slice(&ROCE_V2_PORT.to_be_bytes());
            // The same bytes as before batching: the CRC taken over the packet with its old
            // ICRC in it.
            match crate::wire::icrc::compute(&frame[ip..n]) {
                Ok(c) => frame[n - 4..n].copy_from_slice(&c.to_le_bytes()),
                Err(_) => {
                    self.stats.unsendable.fetch_add(1, Ordering::Relaxed);
                    return Err(frame);
                }
            }
            None
        };
        if self.tx.len() == udp_sys::MAX_BATCH {
            self.flush_tx();
        }
        self.tx.push(Queued {
            buf: frame,
            start,
            end,
            to,
            sport,
            roce,
        });
        Ok(())
    }

    /// Sends every queued frame, in order: each run of frames from one socket in as few
    /// system calls as the kernel allows.
    fn flush_tx(&mut self) {
        let mut i = 0;
        while i < self.tx.len() {
            let sport = self.tx[i].sport;
            let run = self.tx[i..].iter().take_while(|q| q.sport == sport).count();
            let sock = match sport {
                Some(p) => self.sport.get(&p).and_then(Option::as_ref),
                None => Some(&*self.main),
            };
            let frames = &mut self.tx[i..i + run];
            match sock {
                Some(sock) => send_run(
                    sock,
                    frames,
                    &mut self.offload.gso,
                    &mut self.ids,
                    &self.stats,
                ),
                None => {
                    self.stats
                        .unsendable
                        .fetch_add(run as u64, Ordering::Relaxed);
                }
            }
            i += run;
        }
        for q in self.tx.drain(..) {
            if self.pool.len() < udp_sys::MAX_BATCH {
                self.pool.push(q.buf);
            }
        }
    }
}

/// Sends `frames` (all from `sock`, in order). With `gso`, in one `sendmmsg` as far as the
/// kernel takes them: each run of equal-sized frames to one destination one GSO message,
/// every other frame a message of its own, each frame sealed for the IP ID the kernel
/// will give it ([`Queued::seal_for_id`]: its place in its GSO message, else 0). A GSO
/// message the kernel refuses because it cannot segment (`EIO`, or the option missing)
/// turns GSO off (`gso` = false); the frames of a refused message go the plain way.
fn send_run(
    sock: &UdpSocket,
    frames: &mut [Queued],
    gso: &mut bool,
    ids: &mut IdDeltas,
    stats: &UdpStats,
) {
    let mut k = 0;
    while *gso && k < frames.len() {
        let mut groups = [udp_sys::Group::NONE; udp_sys::MAX_BATCH];
        let (mut n, mut end) = (0, k);
        while end < frames.len() && n < groups.len() {
            let run = gso_run(&frames[end..]);
            let seg = (run >= 2).then(|| frames[end].dgram().len() as u16);
            for (j, q) in frames[end..end + run].iter_mut().enumerate() {
                // j < MAX_BATCH: it fits.
                q.seal_for_id(if seg.is_some() { j as u16 } else { 0 }, ids);
            }
            groups[n] = udp_sys::Group {
                to: frames[end].to,
                count: run,
                seg,
            };
            n += 1;
            end += run;
        }
        stats.send_calls.fetch_add(1, Ordering::Relaxed);
        let dgrams = frames[k..end].iter().map(Queued::dgram);
        match udp_sys::send_groups(sock, &groups[..n], dgrams) {
            Ok(m) if m > 0 => {
                let sent: usize = groups[..m].iter().map(|g| g.count).sum();
                stats.sent.fetch_add(sent as u64, Ordering::Relaxed);
                k += sent;
            }
            r => {
                let g = groups[0];
                if let Err(e) = r
                    && g.seg.is_some()
                    && udp_sys::gso_refused(&e)
                {
                    log::warn!("UDP link: GSO send: {e}; sending without GSO from now on");
                    *gso = false;
                }
                // The first message refused: its frames the plain way, each its verdict.
                send_plain(sock, &mut frames[k..k + g.count], ids, stats);
                k += g.count;
            }
        }
    }
    if k < frames.len() {
        send_plain(sock, &mut frames[k..], ids, stats);
    }
}

/// Sends `frames` (all from `sock`, in order) one datagram per message, in `sendmmsg`s,
/// each sealed for IP ID 0 (what the kernel gives a plain send); a datagram the kernel
/// refuses is sent once more on its own, and counted unsendable if it fails again.
fn send_plain(sock: &UdpSocket, frames: &mut [Queued], ids: &mut IdDeltas, stats: &UdpStats) {
    for q in frames.iter_mut() {
        q.seal_for_id(0, ids);
    }
    let mut k = 0;
    while k < frames.len() {
        let mut groups = [udp_sys::Group::NONE; udp_sys::MAX_BATCH];
        for (g, q) in groups.iter_mut().zip(&frames[k..]) {
            *g = udp_sys::Group {
                to: q.to,
                count: 1,
                seg: None,
            };
        }
        let n = (frames.len() - k).min(groups.len());
        stats.send_calls.fetch_add(1, Ordering::Relaxed);
        let dgrams = frames[k..].iter().map(Queued::dgram);
        match udp_sys::send_groups(sock, &groups[..n], dgrams) {
            Ok(m) if m > 0 => {
                stats.sent.fetch_add(m as u64, Ordering::Relaxed);
                k += m;
            }
            _ => {
                // The first datagram was refused (or sendmmsg is missing): on its own, as
                // the plain path sends, for its own verdict.
                let q = &frames[k];
                stats.send_calls.fetch_add(1, Ordering::Relaxed);
                let counter = if sock.send_to(q.dgram(), q.to).is_ok() {
                    &stats.sent
                } else {
                    &stats.unsendable
                };
                counter.fetch_add(1, Ordering::Relaxed);
                k += 1;
            }
        }
    }
}

/// How many of `frames` from the first one GSO message can carry (1: the first goes alone):
/// one destination, all the first's size but the last (which may be shorter), within the
/// kernel's limits.
fn gso_run(frames: &[Queued]) -> usize {
    let Some(first) = frames.first() else {
        return 0;
    };
    let seg = first.dgram().len();
    if !first.roce || seg > usize::from(u16::MAX) {
        return 1;
    }
    // A first frame larger than a run of equal frames after it (a WRITE FIRST's RETH, a
    // READ response's AETH) goes alone, so the run after it is one GSO message.
    if let [_, second, third, ..] = frames
        && second.dgram().len() < seg
        && second.dgram().len() == third.dgram().len()
    {
        return 1;
    }
    let (mut n, mut bytes) = (1, seg);
    for q in &frames[1..] {
        let len = q.dgram().len();
        if n == udp_sys::MAX_BATCH
            || q.to != first.to
            || !q.roce
            || len > seg
            || bytes + len > udp_sys::GSO_MAX_BYTES
        {
            break;
        }
        n += 1;
        bytes += len;
        if len < seg {
            break;
        }
    }
    n
}

impl Link for UdpLink {
    /// Sends the frame now (with any frames queued before it): a caller that holds a
    /// borrowed frame gets today's behaviour, one datagram out before it returns.
    fn transmit(&mut self, frame: &[u8]) {
        let mut b = self.pool.pop().unwrap_or_default();
        b.clear();
        b.extend_from_slice(frame);
        if let Err(b) = self.enqueue(b) {
            self.pool.push(b);
        }
        self.flush_tx();
    }

    /// Queues the frame (no copy) for a batch send at the next [`Link::receive`] or
    /// [`Link::flush`], or when 64 frames wait; hands back a buffer of a frame sent before.
    fn transmit_owned(&mut self, frame: Vec<u8>) -> Vec<u8> {
        match self.enqueue(frame) {
            Ok(()) => self.pool.pop().unwrap_or_default(),
            Err(frame) => frame,
        }
    }

    fn flush(&mut self) {
        if !self.tx.is_empty() {
            self.flush_tx();
        }
    }

    fn next_deadline_ns(&self) -> Option<u64> {
        // Frames waiting to go: due now (the device's loop receives, which sends them).
        (!self.tx.is_empty()).then_some(0)
    }

    /// Sends what is queued first (the port receives after every burst it sends), then
    /// takes the next frame off the receive ring.
    fn receive(&mut self, buf: &mut Vec<u8>) -> bool {
        self.flush();
        self.ring.take(buf)
    }

    fn attach(&mut self, env: &LinkEnv) {
        self.ring.attach(env);
    }

    fn rx_ip_header_exact(&self) -> bool {
        false
    }

    fn rx_drops(&self) -> LinkRxDrops {
        LinkRxDrops {
            ring_full: self.stats.ring_full.load(Ordering::Relaxed),
            oversize: self.stats.oversize.load(Ordering::Relaxed),
            overflow: self.stats.socket_drops.load(Ordering::Relaxed),
            malformed: 0,
        }
    }
}

impl Drop for UdpLink {
    fn drop(&mut self) {
        // The reader stops when the ring end is dropped, after this.
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{EthRepr, EthernetAddress, EthernetFrame, Ipv4Repr, UdpPacket, UdpRepr};

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

    /// A RoCE v2 frame from `src:sport` to `dst` with `len` payload bytes (a pattern of `seed`).
    fn roce_frame(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, psn: u32, len: usize) -> Vec<u8> {
        use crate::wire::{BthRepr, EthRepr, EthernetAddress, IpRepr, Opcode, PacketRepr};
        let repr = PacketRepr::new(
            EthRepr::new(EthernetAddress([2; 6]), EthernetAddress([4; 6])),
            IpRepr::V4(Ipv4Repr::new(src, dst)),
            UdpRepr::new(sport),
            BthRepr::new(Opcode::RcSendOnly, 0x11, psn),
        );
        let payload: Vec<u8> = (0..len).map(|i| (i as u32 * 7 + psn) as u8).collect();
        let mut b = vec![0u8; repr.buffer_len(len)];
        let n = repr.emit(&mut b, &payload).expect("emit");
        b.truncate(n);
        b
    }

    /// Frames of one flow as a WRITE sends them: many of one size, then a shorter last,
    /// then a few of other sizes.
    fn burst(src: Ipv4Addr, dst: Ipv4Addr, sport: u16) -> Vec<Vec<u8>> {
        let mut sizes = vec![1024; 70];
        sizes.extend([300, 1024, 1024, 8, 0, 4096, 4096, 17]);
        sizes
            .iter()
            .enumerate()
            .map(|(i, &len)| roce_frame(src, dst, sport, i as u32, len))
            .collect()
    }

    /// The datagram of a frame (without the Ethernet padding of a short one).
    fn dgram_of(f: &[u8]) -> &[u8] {
        let (start, end, ..) = route(f).expect("IPv4/UDP");
        &f[start..end]
    }

    /// `f` with IP ID `id` and its ICRC sealed for it (by a CRC pass over the frame).
    fn sealed_for(f: &[u8], id: u16) -> Vec<u8> {
        let mut f = f.to_vec();
        let (start, end, ..) = route(&f).expect("IPv4/UDP");
        let ip = start - UDP_LEN - IP_LEN;
        f[ip + 4..ip + 6].copy_from_slice(&id.to_be_bytes());
        let icrc = crate::wire::icrc::compute(&f[ip..end - 4]).expect("RoCE");
        f[end - 4..end].copy_from_slice(&icrc.to_le_bytes());
        f
    }

    /// The IP ID the datagram `got`, which a socket received for the frame `f`, is sealed
    /// for: `got` must be `f`'s datagram but for the ICRC, and its ICRC right for some ID.
    fn sealed_id(f: &[u8], got: &[u8]) -> u16 {
        let want = dgram_of(f);
        assert_eq!(got.len(), want.len(), "the frame's datagram");
        let n = got.len();
        assert_eq!(
            got[..n - 4],
            want[..n - 4],
            "the frame's bytes but the ICRC"
        );
        let (start, end, ..) = route(f).expect("IPv4/UDP");
        let mut ip = f[start - UDP_LEN - IP_LEN..end].to_vec();
        ip[4..6].fill(0);
        let len = ip.len();
        ip[len - 4..].copy_from_slice(&got[n - 4..]);
        assert!(solve_ip_id(&mut ip), "the ICRC is right for some IP ID");
        u16::from_be_bytes([ip[4], ip[5]])
    }

    /// The IP IDs datagrams were sealed for, in the order sent, as the kernel numbers them:
    /// each 0 (a plain send, or the first of a GSO send) or one more than the one before
    /// (the next of a GSO send); all 0 without GSO, and some not 0 with it.
    fn assert_kernel_numbering(ids: &[u16], gso: bool, what: &str) {
        for w in ids.windows(2) {
            assert!(w[1] == 0 || w[1] == w[0] + 1, "{what}: IDs {ids:?}");
        }
        if gso {
            assert!(ids.iter().any(|&i| i > 0), "{what}: GSO sends, IDs {ids:?}");
        } else {
            assert!(ids.iter().all(|&i| i == 0), "{what}: IDs {ids:?}");
        }
    }

    /// A link on `me` sending with `offload`, and a plain socket on `peer`:4791 that
    /// waits up to 5 s for each datagram.
    fn sender_and_plain_receiver(
        offload: UdpOffload,
        me: Ipv4Addr,
        peer: Ipv4Addr,
    ) -> (UdpLink, UdpSocket) {
        let link = UdpLink::bind_with(me, 64, offload).expect("bind");
        let plain = UdpSocket::bind(SocketAddrV4::new(peer, ROCE_V2_PORT)).expect("peer");
        plain
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        (link, plain)
    }

    /// Each offload choice, with the link's and the peer's address (from 127.0.0.`base`).
    fn cases(base: u8) -> [(UdpOffload, Ipv4Addr, Ipv4Addr); 3] {
        let ip = |k: u8| Ipv4Addr::new(127, 0, 0, base + k);
        [
            (UdpOffload::PLAIN, ip(0), ip(1)),
            (
                UdpOffload {
                    gso: false,
                    ..UdpOffload::default()
                },
                ip(2),
                ip(3),
            ),
            (UdpOffload::default(), ip(4), ip(5)),
        ]
    }

    /// The link's batches (sendmmsg, and GSO where asked and present) reach a plain socket
    /// frame for frame: one datagram per frame, its bytes, its source port, in order, each
    /// sealed for the IP ID the sender's kernel gave it (0, or its place in a GSO send).
    #[test]
    fn a_batch_arrives_frame_for_frame_on_a_plain_socket() {
        for (k, (offload, me, peer)) in cases(31).into_iter().enumerate() {
            let k = k as u8;
            let (mut link, plain) = sender_and_plain_receiver(offload, me, peer);
            let stats = link.stats();
            let frames = burst(me, peer, 0xC000 + u16::from(k));
            for f in &frames {
                let spare = link.transmit_owned(f.clone());
                drop(spare);
            }
            assert!(
                stats.sent.load(Ordering::Relaxed) < frames.len() as u64,
                "held back for a batch"
            );
            link.flush();
            assert_eq!(stats.sent.load(Ordering::Relaxed), frames.len() as u64);
            let calls = stats.send_calls.load(Ordering::Relaxed);
            // Plain: a full queue of 64, then the 14 left; GSO: a call per run of one size.
            let most = if link.offload().gso { 10 } else { 2 };
            assert!(
                calls <= most,
                "{offload:?}: {calls} send calls for {} frames",
                frames.len()
            );
            let mut buf = vec![0u8; 65536];
            let mut ids = Vec::new();
            for f in &frames {
                let (n, from) = plain.recv_from(&mut buf).expect("a datagram per frame");
                ids.push(sealed_id(f, &buf[..n]));
                assert_eq!(
                    from,
                    std::net::SocketAddr::from((me, 0xC000 + u16::from(k)))
                );
            }
            assert_kernel_numbering(&ids, link.offload().gso, &format!("{offload:?}"));
            plain.set_nonblocking(true).expect("nonblocking");
            assert!(
                plain.recv_from(&mut buf).is_err(),
                "no more datagrams than frames"
            );
            // A borrowed frame goes out before transmit returns.
            link.transmit(&frames[0]);
            assert_eq!(stats.sent.load(Ordering::Relaxed), frames.len() as u64 + 1);
        }
    }

    /// Datagrams from a plain socket (one send each), and from a GSO send (one buffer the
    /// kernel cuts, each sealed for the IP ID the kernel gives it), arrive at the link
    /// frame for frame, each the frame a socket implies: with GRO (runs cut back at the
    /// kernel's segment size, the `k`-th of a run with IP ID `k`: every ICRC verifies) and
    /// without (IP ID 0: the `k`-th of a GSO send verifies once its ID is solved).
    #[test]
    fn plain_and_segmented_datagrams_arrive_frame_for_frame() {
        use std::time::Instant;
        for (offload, me, peer) in cases(41) {
            let mut link = UdpLink::bind_with(me, 1024, offload).expect("bind");
            let plain = UdpSocket::bind(SocketAddrV4::new(peer, 0xC100)).expect("peer");
            let to = SocketAddrV4::new(me, ROCE_V2_PORT);
            let frames = burst(peer, me, 0xC100);
            let dgram = |f: &[u8]| dgram_of(f).to_vec();
            for f in &frames {
                plain.send_to(&dgram(f), to).expect("send");
            }
            // 40 frames of one size in one GSO send, when the kernel has UDP_SEGMENT.
            let even: Vec<Vec<u8>> = (0..40)
                .map(|i| {
                    let f = roce_frame(peer, me, 0xC100, 100 + i, 1024);
                    dgram(&sealed_for(&f, i as u16))
                })
                .collect();
            let gso = udp_sys::has_gso(&plain)
                && udp_sys::send_segmented(
                    &plain,
                    even.iter().map(Vec::as_slice),
                    even[0].len() as u16,
                    to,
                )
                .is_ok();
            // (datagram, the IP ID it is sealed for)
            let mut want: Vec<(Vec<u8>, u16)> = frames.iter().map(|f| (dgram(f), 0)).collect();
            if gso {
                want.extend(even.into_iter().zip(0..));
            }
            let mut buf = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(10);
            for (i, (d, id)) in want.iter().enumerate() {
                while !link.receive(&mut buf) {
                    assert!(
                        Instant::now() < deadline,
                        "{offload:?}: frame {i} of {}",
                        want.len()
                    );
                    std::thread::sleep(Duration::from_millis(1));
                }
                // With GRO the link knows a GSO datagram's place; without, it says 0.
                let rebuilt_id = if link.offload().gro { *id } else { 0 };
                let mut expect = Vec::new();
                rebuild_frame(&mut expect, peer, 0xC100, me, rebuilt_id, d);
                assert_eq!(buf, expect, "{offload:?} frame {i}");
                let verified = crate::wire::RocePacket::new_checked(&buf[..])
                    .expect("valid")
                    .verify_icrc();
                if rebuilt_id == *id {
                    verified.expect("the IP ID the sender's kernel gave it: the ICRC verifies");
                } else {
                    assert!(verified.is_err());
                    assert!(solve_ip_id(&mut buf[ETH_LEN..]));
                    assert_eq!(u16::from_be_bytes([buf[18], buf[19]]), *id);
                }
            }
            std::thread::sleep(Duration::from_millis(20));
            assert!(!link.receive(&mut buf), "no more frames than datagrams");
            let stats = link.stats();
            assert_eq!(stats.received.load(Ordering::Relaxed), want.len() as u64);
            let calls = stats.recv_calls.load(Ordering::Relaxed);
            assert!(
                calls < want.len() as u64,
                "{offload:?}: {calls} receive calls"
            );
        }
    }

    /// A datagram the kernel refuses in the middle of a batch (larger than UDP allows) is
    /// counted unsendable; the frames around it go out, in order, with each offload.
    #[test]
    fn a_refused_datagram_in_a_batch_is_counted_and_the_rest_go() {
        for (offload, me, peer) in cases(51) {
            let (mut link, plain) = sender_and_plain_receiver(offload, me, peer);
            let stats = link.stats();
            // Ethernet, IPv4 (to `peer`), UDP of length 65535: 65527 bytes of datagram,
            // more than the 65507 a UDP socket may send over IPv4.
            let mut huge = vec![0u8; ETH_LEN + IP_LEN + 0xFFFF];
            huge[12..14].copy_from_slice(&[0x08, 0x00]);
            huge[ETH_LEN] = 0x45;
            huge[ETH_LEN + 9] = 17;
            huge[ETH_LEN + 16..ETH_LEN + 20].copy_from_slice(&peer.octets());
            let udp = ETH_LEN + IP_LEN;
            huge[udp..udp + 2].copy_from_slice(&0xC200u16.to_be_bytes());
            huge[udp + 4..udp + 6].copy_from_slice(&[0xFF, 0xFF]);
            let good: Vec<Vec<u8>> = (0..4)
                .map(|i| roce_frame(me, peer, 0xC200, i, 1024))
                .collect();
            for f in [&good[0], &good[1], &huge, &good[2], &good[3]] {
                drop(link.transmit_owned(f.clone()));
            }
            link.flush();
            assert_eq!(stats.sent.load(Ordering::Relaxed), 4, "{offload:?}");
            assert_eq!(stats.unsendable.load(Ordering::Relaxed), 1, "{offload:?}");
            assert!(
                link.offload().gso == offload.gso,
                "a bad datagram keeps GSO on"
            );
            let mut buf = vec![0u8; 65536];
            let mut ids = Vec::new();
            for f in &good {
                let (n, _) = plain.recv_from(&mut buf).expect("the good frames");
                ids.push(sealed_id(f, &buf[..n]));
            }
            let want: &[u16] = if offload.gso { &[0, 1, 0, 1] } else { &[0; 4] };
            assert_eq!(ids, want, "{offload:?}");
        }
    }

    /// Why the TAP test cannot run here, if it cannot.
    fn tap_skip_reason() -> Option<&'static str> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Some("not root (creating a TAP needs CAP_NET_ADMIN)");
        }
        if !std::path::Path::new(super::super::tap_sys::TUN_PATH).exists() {
            return Some("no /dev/net/tun");
        }
        None
    }

    /// The wire, as rxe sees it: frames the link sends in GSO runs leave through a TAP
    /// interface (where the kernel cuts them in software, as for a NIC without UDP
    /// segmentation offload, and as a QEMU guest's rxe receives them), each datagram with
    /// the IP ID the kernel gave it; every ICRC is recomputed against the real IP header
    /// the TAP captured, and is right. Runs of 2 to 62 frames (and 64: 62 and 2), a shorter
    /// last frame, a larger first one, plain frames before and after GSO runs in one batch
    /// and in batches of their own, two destinations.
    #[test]
    fn gso_datagrams_leave_with_an_icrc_right_for_their_real_ip_header() {
        use super::super::tap::TapLink;
        use super::super::tap_sys::{if_name, if_set_up, testing};
        use crate::wire::{BthRepr, EthRepr, EthernetAddress, IpRepr, Opcode, PacketRepr};
        use crate::wire::{RethRepr, RocePacket};
        use std::time::Instant;
        if let Some(why) = tap_skip_reason() {
            eprintln!("skipping the GSO wire test: {why}");
            return;
        }
        let pid = std::process::id();
        let name = format!("rngso{}", pid % 100_000);
        let mut tap = TapLink::open(&name).expect("a TAP, as root");
        let ifname = if_name(&name).expect("name");
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6"), "1");
        // 198.18.0.0/15 is for benchmarks; a /24 of it per process.
        let net = |h: u8| Ipv4Addr::new(198, 19, (pid % 250) as u8, h);
        let (me, peers) = (net(1), [net(2), net(3)]);
        testing::set_ipv4(&ifname, me, 24).expect("address");
        if_set_up(&ifname).expect("up");
        for (i, p) in peers.iter().enumerate() {
            testing::add_neighbour(&ifname, *p, [2, 0, 0, 0, 0, 2 + i as u8]).expect("neigh");
        }
        let all = UdpOffload {
            gro: true,
            gso: true,
        };
        let mut link = UdpLink::bind_with(me, 64, all).expect("bind");
        if !link.offload().gso {
            eprintln!("skipping the GSO wire test: this kernel has no UDP_SEGMENT");
            return;
        }
        // A frame to `peers[dst]` with `len` payload bytes, PSN `psn` (its name on the
        // wire); `first`: a WRITE FIRST (16 bytes of RETH more).
        let frame = |dst: usize, psn: u32, len: usize, first: bool| {
            let op = if first {
                Opcode::RcRdmaWriteFirst
            } else {
                Opcode::RcRdmaWriteMiddle
            };
            let mut repr = PacketRepr::new(
                EthRepr::new(EthernetAddress([2; 6]), EthernetAddress([4; 6])),
                IpRepr::V4(Ipv4Repr::new(me, peers[dst])),
                UdpRepr::new(0xC300),
                BthRepr::new(op, 0x11, psn),
            );
            if first {
                repr.ext.reth = Some(RethRepr {
                    virtual_addr: 0x1000,
                    rkey: 7,
                    dma_len: 1 << 16,
                });
            }
            let payload: Vec<u8> = (0..len).map(|i| (i as u32 ^ psn) as u8).collect();
            let mut b = vec![0u8; repr.buffer_len(len)];
            let n = repr.emit(&mut b, &payload).expect("emit");
            b.truncate(n);
            b
        };
        // Batches, each a list of (destination, payload length, WRITE FIRST, the IP ID the
        // kernel gives it); each batch is sent with one flush.
        let mut batches: Vec<Vec<(usize, usize, bool, u16)>> = Vec::new();
        let run = |dst, n: u16, last: usize| -> Vec<(usize, usize, bool, u16)> {
            (0..n)
                .map(|k| (dst, if k + 1 == n { last } else { 1024 }, false, k))
                .collect()
        };
        batches.push(vec![(0, 1024, false, 0)]); // plain alone
        for n in [2, 3, 5, 17, 62] {
            batches.push(run(0, n, 1024)); // GSO alone
        }
        batches.push(run(1, 9, 300)); // a shorter last frame, the other destination
        let mut b = run(0, 64, 1024); // more than one GSO message carries
        for (k, f) in b.iter_mut().enumerate().skip(62) {
            f.3 = (k - 62) as u16;
        }
        batches.push(b);
        // Plain, then GSO, in one batch; and GSO, then plain.
        let mut b = vec![(1, 200, false, 0)];
        b.extend(run(0, 6, 1024));
        batches.push(b);
        let mut b = run(0, 7, 1024);
        b.push((1, 1024, false, 0));
        b.push((0, 700, false, 0));
        batches.push(b);
        // A WRITE's shape: FIRST (larger, alone), MIDDLEs, a shorter LAST.
        let mut b = vec![(0, 1024, true, 0)];
        b.extend(run(0, 12, 512));
        batches.push(b);
        // Destinations alternating: every frame alone.
        batches.push((0..6).map(|k| (k % 2, 1024, false, 0)).collect());
        batches.push(vec![(1, 64, false, 0)]); // plain after all that
        let mut want = std::collections::HashMap::new();
        let mut psn = 0u32;
        for batch in &batches {
            for &(dst, len, first, id) in batch {
                let f = frame(dst, psn, len, first);
                want.insert(psn, (f.clone(), id));
                drop(link.transmit_owned(f));
                psn += 1;
            }
            link.flush();
        }
        let stats = link.stats();
        assert_eq!(stats.sent.load(Ordering::Relaxed), u64::from(psn));
        // What the kernel sent out of the TAP: every datagram, its real IP header.
        let mut seen = std::collections::HashMap::new();
        let mut buf = Vec::new();
        // RNIC_GSO_PCAP=FILE keeps what the TAP saw, for other tools to check.
        let mut pcap = std::env::var_os("RNIC_GSO_PCAP")
            .map(|p| super::super::pcap::Capture::create(p.as_ref()).expect("pcap"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while seen.len() < want.len() {
            assert!(
                Instant::now() < deadline,
                "{} of {} frames",
                seen.len(),
                want.len()
            );
            if !tap.receive(&mut buf) {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            let Ok(pkt) = RocePacket::new_checked(&buf[..]) else {
                continue; // not RoCE (the kernel's own traffic, if any)
            };
            if let Some(c) = pcap.as_mut() {
                c.write(0, &buf);
            }
            let (repr, _) = PacketRepr::parse(&buf).expect("a RoCE v2 frame");
            let IpRepr::V4(ip) = repr.ip else {
                panic!("IPv4")
            };
            assert_eq!(ip.src, me);
            pkt.verify_icrc()
                .unwrap_or_else(|e| panic!("PSN {}, IP ID {}: {e:?}", repr.bth.psn, ip.ident));
            let (f, id) = &want[&repr.bth.psn];
            assert_eq!(
                ip.ident, *id,
                "PSN {}: the IP ID the kernel gives it",
                repr.bth.psn
            );
            let (sent, got) = (dgram_of(f), dgram_of(&buf));
            assert_eq!(got.len(), sent.len());
            assert_eq!(
                got[..got.len() - 4],
                sent[..sent.len() - 4],
                "the frame's bytes"
            );
            assert!(seen.insert(repr.bth.psn, ip.ident).is_none(), "once each");
        }
        if let Some(c) = pcap {
            c.finish().expect("pcap");
        }
        let gso_ids = seen.values().filter(|&&i| i > 0).count();
        assert!(
            gso_ids > 100,
            "{gso_ids} datagrams of GSO sends after the first"
        );
        println!(
            "{} frames in {} send calls left the TAP with ICRCs right for their IP IDs \
             (largest ID {})",
            seen.len(),
            stats.send_calls.load(Ordering::Relaxed),
            seen.values().max().copied().unwrap_or(0)
        );
        // The link's socket goes first (the TAP's address with it).
        drop(link);
    }

    /// The headers [`rebuild_frame`] writes by hand are those the wire module's `Repr`s
    /// emit: zero MACs, IPv4 (ID, DF, TTL 64, a checksum that verifies), UDP checksum 0.
    #[test]
    fn rebuilt_headers_are_the_reprs_headers() {
        for (len, id) in [
            (0usize, 0u16),
            (16, 1),
            (1040, 61),
            (4112, 0xFFFF),
            (65507, 7),
        ] {
            let dgram: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let (src, dst) = (Ipv4Addr::new(10, 1, 2, 3), Ipv4Addr::new(192, 168, 200, 9));
            let mut got = vec![0xEE; 3]; // appends to what the buffer holds
            rebuild_frame(&mut got, src, 0xC0DE, dst, id, &dgram);
            let udp_len = (UDP_LEN + len).min(0xFFFF - IP_LEN);
            let mut want = vec![0xEE; 3 + ETH_LEN + IP_LEN + UDP_LEN];
            let (eth, ip, udp) = (3, 3 + ETH_LEN, 3 + ETH_LEN + IP_LEN);
            EthRepr::new(EthernetAddress([0; 6]), EthernetAddress([0; 6]))
                .emit(&mut EthernetFrame::new_unchecked(&mut want[eth..ip]));
            let mut v4 = Ipv4Repr::new(src, dst);
            v4.ident = id;
            v4.emit(&mut Ipv4Packet::new_unchecked(&mut want[ip..udp]), udp_len);
            UdpRepr::new(0xC0DE).emit(
                &mut UdpPacket::new_unchecked(&mut want[udp..]),
                udp_len - UDP_LEN,
            );
            want.extend_from_slice(&dgram);
            assert_eq!(got, want, "{len} bytes, ID {id}");
            assert!(Ipv4Packet::new_unchecked(&got[ip..udp]).verify_checksum());
        }
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
            rebuild_frame(&mut rebuilt, src, sport, dst, 0, &f[42..34 + udp_len]);
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
