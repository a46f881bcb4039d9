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
//! checksum 0), then the datagram. It wakes the device.
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
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam::channel::{Receiver, Sender, unbounded};

use super::{Link, LinkEnv, Waker};
use crate::wire::ROCE_V2_PORT;

/// Why a UDP link could not be set up.
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
}

const IP_LEN: usize = 20;
const UDP_LEN: usize = 8;

/// A UDP link bound to `<IPv4>:4791` (see the module docs).
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

fn set_pmtudisc_do(s: &UdpSocket) -> io::Result<()> {
    let v: libc::c_int = libc::IP_PMTUDISC_DO;
    // SAFETY: a valid socket fd, a c_int option value of the right size.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
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

fn bind(addr: SocketAddrV4) -> Result<UdpSocket, LinkError> {
    let s = UdpSocket::bind(addr).map_err(|e| match e.kind() {
        io::ErrorKind::AddrInUse => LinkError::AddrInUse(addr),
        io::ErrorKind::AddrNotAvailable => LinkError::AddrNotAvailable(addr),
        _ => LinkError::Io { addr, source: e },
    })?;
    set_pmtudisc_do(&s).map_err(|source| LinkError::Io { addr, source })?;
    Ok(s)
}

impl UdpLink {
    /// Binds `<ip>:4791` and starts the reader thread.
    pub fn bind(ip: Ipv4Addr) -> Result<UdpLink, LinkError> {
        let addr = SocketAddrV4::new(ip, ROCE_V2_PORT);
        let main = Arc::new(bind(addr)?);
        let reader_sock = main
            .try_clone()
            .map_err(|source| LinkError::Io { addr, source })?;
        reader_sock
            .set_read_timeout(Some(Duration::from_millis(20)))
            .map_err(|source| LinkError::Io { addr, source })?;
        let (tx, rx) = unbounded();
        let (free, free_rx) = unbounded::<Vec<u8>>();
        let waker: Arc<OnceLock<Waker>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(UdpStats::default());
        let reader = {
            let (waker, stop, stats) = (Arc::clone(&waker), Arc::clone(&stop), Arc::clone(&stats));
            std::thread::Builder::new()
                .name("rnic-udp-rx".into())
                .spawn(move || reader(reader_sock, ip, tx, free_rx, waker, stop, stats))
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
    pub fn local_addr(&self) -> SocketAddrV4 {
        SocketAddrV4::new(self.ip, ROCE_V2_PORT)
    }

    /// Its counters.
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

/// The reader thread: datagrams in, rebuilt frames out.
fn reader(
    sock: UdpSocket,
    ip: Ipv4Addr,
    tx: Sender<Vec<u8>>,
    free: Receiver<Vec<u8>>,
    waker: Arc<OnceLock<Waker>>,
    stop: Arc<AtomicBool>,
    stats: Arc<UdpStats>,
) {
    let mut buf = vec![0u8; 65536];
    while !stop.load(Ordering::Acquire) {
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(_) => continue,
        };
        let SocketAddr::V4(from) = from else { continue };
        stats.received.fetch_add(1, Ordering::Relaxed);
        let mut f = free.try_recv().unwrap_or_default();
        f.clear();
        rebuild_frame(&mut f, *from.ip(), from.port(), ip, &buf[..n]);
        if tx.send(f).is_err() {
            return;
        }
        if let Some(w) = waker.get() {
            w.wake();
        }
    }
}

/// The Ethernet/IPv4/UDP headers a datagram from `src:sport` to `dst:4791` came with, as far
/// as a socket can tell (see the module docs), followed by the datagram.
pub(crate) fn rebuild_frame(
    f: &mut Vec<u8>,
    src: Ipv4Addr,
    sport: u16,
    dst: Ipv4Addr,
    dgram: &[u8],
) {
    let udp_len = (UDP_LEN + dgram.len()).min(0xFFFF) as u16;
    let total = (IP_LEN + usize::from(udp_len)).min(0xFFFF) as u16;
    f.extend_from_slice(&[0; 12]);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let mut ip = [0u8; IP_LEN];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let sum = ipv4_checksum(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&ROCE_V2_PORT.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(dgram);
}

/// The IPv4 header checksum of `ip` (its checksum field taken as zero).
pub(crate) fn ipv4_checksum(ip: &[u8]) -> u16 {
    let mut sum = 0u32;
    for (i, w) in ip.chunks(2).enumerate() {
        if i == 5 {
            continue;
        }
        let hi = u32::from(w[0]) << 8;
        let lo = w.get(1).map_or(0, |b| u32::from(*b));
        sum += hi | lo;
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

/// For an IPv4 RoCE packet (from the IP header on) whose ICRC does not match with the IP ID
/// it has: finds the IP ID that makes it match, if there is one, writes it (and the header
/// checksum) and returns true. The ICRC is affine in the ID's 16 bits, so 17 CRCs and a
/// 16-column elimination over GF(2) decide it.
pub(crate) fn solve_ip_id(ip_pkt: &mut [u8]) -> bool {
    use crate::wire::icrc;
    if ip_pkt.len() < IP_LEN + UDP_LEN + 12 + 4 || ip_pkt[0] != 0x45 {
        return false;
    }
    // The packet ends where the IP total length says (a short frame is padded).
    let n = usize::from(u16::from_be_bytes([ip_pkt[2], ip_pkt[3]]));
    if n < IP_LEN + UDP_LEN + 12 + 4 || n > ip_pkt.len() {
        return false;
    }
    let want = u32::from_le_bytes([ip_pkt[n - 4], ip_pkt[n - 3], ip_pkt[n - 2], ip_pkt[n - 1]]);
    let crc_with = |p: &mut [u8], id: u16| -> Option<u32> {
        p[4..6].copy_from_slice(&id.to_be_bytes());
        icrc::compute(&p[..n - 4]).ok()
    };
    let Some(base) = crc_with(ip_pkt, 0) else {
        return false;
    };
    // Basis: the ICRC change each ID bit causes; eliminate to find x with sum = want ^ base.
    let mut rows: Vec<(u32, u16)> = Vec::with_capacity(16);
    for bit in 0..16 {
        let Some(c) = crc_with(ip_pkt, 1 << bit) else {
            return false;
        };
        let mut v = (c ^ base, 1u16 << bit);
        for &(r, m) in &rows {
            if v.0 ^ r < v.0 {
                v = (v.0 ^ r, v.1 ^ m);
            }
        }
        if v.0 != 0 {
            rows.push(v);
            rows.sort_by_key(|r| std::cmp::Reverse(r.0));
        }
    }
    let mut target = want ^ base;
    let mut x = 0u16;
    for &(r, m) in &rows {
        if target ^ r < target {
            target ^= r;
            x ^= m;
        }
    }
    if target != 0 {
        return false;
    }
    ip_pkt[4..6].copy_from_slice(&x.to_be_bytes());
    let sum = ipv4_checksum(&ip_pkt[..IP_LEN]);
    ip_pkt[10..12].copy_from_slice(&sum.to_be_bytes());
    true
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
                let _ = self.free.send(f);
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
