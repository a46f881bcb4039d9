//! The socket calls of the UDP link ([`super::udp`]) that std does not wrap: socket options,
//! `sendmmsg` (each message one datagram, or a GSO buffer with `UDP_SEGMENT`) on the way
//! out, `recvmmsg` with the `SO_RXQ_OVFL` and `UDP_GRO` control messages on the way in, and
//! `getifaddrs` for the interface that holds the link's address (its MTU is the port's).
//! Every `unsafe` block of the link is here; the headers the kernel reads (`mmsghdr`, `iovec`, `sockaddr_in`, control
//! buffers) are built on the stack for each call, pointing at buffers that outlive it, so
//! nothing is allocated per datagram and nothing holds a raw pointer between calls.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;

/// Datagrams per `sendmmsg` call, and segments per GSO send, at most (the kernel's
/// `UDP_MAX_SEGMENTS` is 64 on older kernels).
pub(super) const MAX_BATCH: usize = 64;

/// Bytes one GSO send may carry at most (a UDP datagram's payload limit over IPv4, 65507,
/// rounded down).
pub(super) const GSO_MAX_BYTES: usize = 65000;

/// Datagrams per `recvmmsg` call.
pub(super) const RX_SLOTS: usize = 16;

/// Bytes per receive slot: the largest UDP datagram, which is also the largest coalesced
/// datagram `UDP_GRO` delivers.
pub(super) const SLOT_BYTES: usize = 65536;

/// `SOL_UDP`: the level of the UDP socket options and control messages.
const SOL_UDP: libc::c_int = 17;
/// `UDP_SEGMENT` (linux/udp.h): the GSO segment size, as a socket option or per send.
const UDP_SEGMENT: libc::c_int = 103;
/// `UDP_GRO` (linux/udp.h): coalesced receive, and the control message with the size.
const UDP_GRO: libc::c_int = 104;

/// Sets an integer socket option.
pub(super) fn setsockopt_int(
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

/// Reads an integer socket option.
pub(super) fn getsockopt_int(
    s: &UdpSocket,
    level: libc::c_int,
    name: libc::c_int,
) -> io::Result<libc::c_int> {
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

/// Whether an option error means "this kernel does not have it" (the plain path follows)
/// rather than a real failure.
fn unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOPROTOOPT | libc::EINVAL | libc::EOPNOTSUPP | libc::ENOSYS)
    )
}

/// Turns on `UDP_GRO` (the kernel may hand over several datagrams of one flow as one
/// buffer, with their size in a control message); false when the kernel lacks it.
pub(super) fn enable_gro(s: &UdpSocket) -> bool {
    match setsockopt_int(s, SOL_UDP, UDP_GRO, 1) {
        Ok(()) => true,
        Err(e) => {
            if !unsupported(&e) {
                log::warn!("UDP link: UDP_GRO: {e}; receiving without it");
            }
            false
        }
    }
}

/// Whether the kernel has `UDP_SEGMENT` (GSO): setting the socket's default segment size
/// to 0 (off; each send says its own) succeeds only where it exists.
pub(super) fn has_gso(s: &UdpSocket) -> bool {
    setsockopt_int(s, SOL_UDP, UDP_SEGMENT, 0).is_ok()
}

/// Whether a GSO send failed because of GSO itself (the kernel or the device cannot do it:
/// `EIO`, which older kernels return when the route's device has no checksum offload (6.18
/// checksums the segments in software), or the option missing), not the datagrams. `EINVAL` is
/// about the message (segments larger than the path MTU allows, too many of them): that
/// message goes the plain way, and GSO stays on.
pub(super) fn gso_refused(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EIO | libc::ENOPROTOOPT | libc::EOPNOTSUPP | libc::ENOSYS)
    )
}

fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

const NO_IOV: libc::iovec = libc::iovec {
    iov_base: std::ptr::null_mut(),
    iov_len: 0,
};

/// One message of [`send_groups`]: the next `count` datagrams, to `to`; with `seg`, one GSO
/// buffer (`UDP_SEGMENT = seg`: each datagram `seg` bytes but the last, which may be
/// shorter, at most [`GSO_MAX_BYTES`] in all), else `count` is 1.
#[derive(Clone, Copy, Debug)]
pub(super) struct Group {
    pub to: SocketAddrV4,
    pub count: usize,
    pub seg: Option<u16>,
}

impl Group {
    /// A placeholder for arrays of groups.
    pub(super) const NONE: Group = Group {
        to: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
        count: 0,
        seg: None,
    };
}

/// Sends `groups` (at most [`MAX_BATCH`], with at most [`MAX_BATCH`] datagrams in all,
/// taken in order from `dgrams`) in one `sendmmsg`: each group one message, a GSO group
/// with its own `UDP_SEGMENT` control message, so the kernel cuts it into one datagram per
/// segment. Returns how many groups the kernel took (the first `k`), or the error of the
/// first when it took none.
pub(super) fn send_groups<'a>(
    s: &UdpSocket,
    groups: &[Group],
    mut dgrams: impl Iterator<Item = &'a [u8]>,
) -> io::Result<usize> {
    let mut addrs = [sockaddr(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)); MAX_BATCH];
    let mut iovs = [NO_IOV; MAX_BATCH];
    // Room per message for one u16 control message (CMSG_SPACE(2) is 24 on 64-bit Linux),
    // aligned.
    let mut ctrl = [[0u64; 4]; MAX_BATCH];
    // SAFETY: all-zero is a valid mmsghdr (null pointers, zero lengths).
    let mut msgs: [libc::mmsghdr; MAX_BATCH] = unsafe { std::mem::zeroed() };
    debug_assert!(groups.iter().map(|g| g.count).sum::<usize>() <= MAX_BATCH);
    let (mut n, mut iov) = (0, 0);
    for g in groups.iter().take(MAX_BATCH) {
        let first = iov;
        for data in dgrams.by_ref().take(g.count) {
            if iov == MAX_BATCH {
                break;
            }
            iovs[iov] = libc::iovec {
                iov_base: data.as_ptr().cast_mut().cast(),
                iov_len: data.len(),
            };
            iov += 1;
        }
        if iov == first {
            break;
        }
        addrs[n] = sockaddr(g.to);
        let h = &mut msgs[n].msg_hdr;
        h.msg_name = (&raw mut addrs[n]).cast();
        h.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        h.msg_iov = &raw mut iovs[first];
        h.msg_iovlen = (iov - first) as _;
        if let Some(seg) = g.seg {
            h.msg_control = ctrl[n].as_mut_ptr().cast();
            // SAFETY: CMSG_SPACE is arithmetic.
            h.msg_controllen = unsafe { libc::CMSG_SPACE(2) } as _;
            // SAFETY: the control buffer holds CMSG_SPACE(2) bytes, so its first header and
            // the two data bytes after it are inside it.
            unsafe {
                let c = libc::CMSG_FIRSTHDR(h);
                (*c).cmsg_level = SOL_UDP;
                (*c).cmsg_type = UDP_SEGMENT;
                (*c).cmsg_len = libc::CMSG_LEN(2) as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), seg);
            }
        }
        n += 1;
    }
    if n == 0 {
        return Ok(0);
    }
    // SAFETY: `msgs[..n]` point at `addrs`, `iovs`, `ctrl` and the callers' datagrams, all
    // alive for the call; the kernel only reads the datagrams (the iovecs' `*mut` is C's).
    let r = unsafe { libc::sendmmsg(s.as_raw_fd(), msgs.as_mut_ptr(), n as _, 0) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Sends `segs` (each `seg` bytes, the last at most that) to `to` as one GSO message of
/// [`send_groups`]: the kernel cuts the bytes into one datagram per segment.
#[cfg(test)]
pub(super) fn send_segmented<'a>(
    s: &UdpSocket,
    segs: impl ExactSizeIterator<Item = &'a [u8]>,
    seg: u16,
    to: SocketAddrV4,
) -> io::Result<()> {
    let g = Group {
        to,
        count: segs.len(),
        seg: Some(seg),
    };
    send_groups(s, &[g], segs).map(drop)
}

/// What the kernel said about one received datagram (or `UDP_GRO` run of datagrams).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Received {
    /// Bytes in the slot.
    pub len: usize,
    /// The IPv4 sender.
    pub from: Option<SocketAddrV4>,
    /// The datagram did not fit the slot (`MSG_TRUNC`).
    pub truncated: bool,
    /// `UDP_GRO`: the buffer is several datagrams of this size (the last may be shorter).
    pub segment: Option<usize>,
    /// The socket's drop count (`SO_RXQ_OVFL`), when the kernel reported it.
    pub drops: Option<u32>,
}

/// The receive side's buffers for `recvmmsg`: [`RX_SLOTS`] slots of [`SLOT_BYTES`],
/// allocated once, and what the last call said about each.
pub(super) struct RecvBatch {
    bufs: Box<[u8]>,
    got: [Received; RX_SLOTS],
}

impl RecvBatch {
    pub(super) fn new() -> Self {
        RecvBatch {
            bufs: vec![0u8; RX_SLOTS * SLOT_BYTES].into_boxed_slice(),
            got: [Received::default(); RX_SLOTS],
        }
    }

    /// Takes up to [`RX_SLOTS`] datagrams in one `recvmmsg`: waiting (up to the socket's
    /// read timeout) for the first when `wait`, else only what is queued. Returns how many.
    pub(super) fn recv(&mut self, s: &UdpSocket, wait: bool) -> io::Result<usize> {
        // SAFETY: all-zero is a valid sockaddr_in / mmsghdr.
        let mut addrs: [libc::sockaddr_in; RX_SLOTS] = unsafe { std::mem::zeroed() };
        // Room per slot for two int control messages (SO_RXQ_OVFL, UDP_GRO: CMSG_SPACE(4)
        // is 24 each on 64-bit Linux), aligned.
        let mut ctrl = [[0u64; 8]; RX_SLOTS];
        let mut iovs = [NO_IOV; RX_SLOTS];
        // SAFETY: as above.
        let mut msgs: [libc::mmsghdr; RX_SLOTS] = unsafe { std::mem::zeroed() };
        for (i, chunk) in self.bufs.chunks_exact_mut(SLOT_BYTES).enumerate() {
            iovs[i] = libc::iovec {
                iov_base: chunk.as_mut_ptr().cast(),
                iov_len: SLOT_BYTES,
            };
            let h = &mut msgs[i].msg_hdr;
            h.msg_name = (&raw mut addrs[i]).cast();
            h.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            h.msg_iov = &raw mut iovs[i];
            h.msg_iovlen = 1;
            h.msg_control = ctrl[i].as_mut_ptr().cast();
            h.msg_controllen = std::mem::size_of_val(&ctrl[i]) as _;
        }
        let flags = if wait {
            libc::MSG_WAITFORONE
        } else {
            libc::MSG_DONTWAIT
        };
        // SAFETY: every `msgs[i]` points at live buffers of the sizes it states (a slot of
        // `bufs`, `addrs[i]`, `ctrl[i]`), for the whole call.
        let r = unsafe {
            libc::recvmmsg(
                s.as_raw_fd(),
                msgs.as_mut_ptr(),
                RX_SLOTS as _,
                flags as _,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = r as usize;
        for i in 0..n {
            let (m, a) = (&msgs[i], &addrs[i]);
            let h = &m.msg_hdr;
            let from = (h.msg_namelen as usize >= std::mem::size_of::<libc::sockaddr_in>()
                && libc::c_int::from(a.sin_family) == libc::AF_INET)
                .then(|| {
                    SocketAddrV4::new(
                        Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                        u16::from_be(a.sin_port),
                    )
                });
            let mut got = Received {
                len: (m.msg_len as usize).min(SLOT_BYTES),
                from,
                truncated: h.msg_flags & libc::MSG_TRUNC != 0,
                segment: None,
                drops: None,
            };
            // SAFETY: the CMSG macros walk the control buffer the kernel filled, within
            // its `msg_controllen`; the data of SO_RXQ_OVFL is a u32, of UDP_GRO an int.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(h);
                while !c.is_null() {
                    let data = libc::CMSG_DATA(c);
                    match ((*c).cmsg_level, (*c).cmsg_type) {
                        (libc::SOL_SOCKET, libc::SO_RXQ_OVFL) => {
                            got.drops = Some(std::ptr::read_unaligned(data.cast::<u32>()));
                        }
                        (SOL_UDP, UDP_GRO) => {
                            let size = std::ptr::read_unaligned(data.cast::<libc::c_int>());
                            got.segment = usize::try_from(size).ok().filter(|&s| s > 0);
                        }
                        _ => {}
                    }
                    c = libc::CMSG_NXTHDR(h, c);
                }
            }
            self.got[i] = got;
        }
        Ok(n)
    }

    /// Slot `i` of the last [`RecvBatch::recv`]: its bytes and what the kernel said.
    pub(super) fn slot(&self, i: usize) -> (&[u8], Received) {
        let got = self.got[i];
        let start = i * SLOT_BYTES;
        (&self.bufs[start..start + got.len], got)
    }
}

/// The MTU of the interface that holds `ip`: the one with `ip` as an address, else the one
/// whose IPv4 subnet contains it (127.0.0.2 is on `lo`, whose address is 127.0.0.1/8).
/// `None` when no interface has it or the MTU cannot be read.
pub(super) fn interface_mtu(ip: Ipv4Addr) -> Option<u32> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head it allocated into `head`, freed below.
    if unsafe { libc::getifaddrs(&raw mut head) } != 0 {
        return None;
    }
    let want = u32::from(ip);
    // (prefix length, name) of the best match so far: an exact address beats any subnet.
    let mut best: Option<(u32, super::tap_sys::IfName)> = None;
    let mut at = head;
    while !at.is_null() {
        // SAFETY: `at` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*at };
        at = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_netmask.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: non-null, and sa_family says which sockaddr it is.
        if i32::from(unsafe { (*ifa.ifa_addr).sa_family }) != libc::AF_INET {
            continue;
        }
        // SAFETY: AF_INET: both are sockaddr_in.
        let (addr, mask) = unsafe {
            let a = &*ifa.ifa_addr.cast::<libc::sockaddr_in>();
            let m = &*ifa.ifa_netmask.cast::<libc::sockaddr_in>();
            (
                u32::from_be(a.sin_addr.s_addr),
                u32::from_be(m.sin_addr.s_addr),
            )
        };
        let rank = if addr == want {
            33
        } else if addr & mask == want & mask {
            mask.count_ones()
        } else {
            continue;
        };
        if best.as_ref().is_some_and(|(r, _)| *r >= rank) {
            continue;
        }
        let mut name: super::tap_sys::IfName = [0; libc::IFNAMSIZ];
        // SAFETY: ifa_name is a NUL-terminated string of at most IFNAMSIZ bytes.
        let bytes = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }.to_bytes();
        for (d, s) in name.iter_mut().zip(bytes.iter().take(libc::IFNAMSIZ - 1)) {
            *d = *s as libc::c_char;
        }
        best = Some((rank, name));
    }
    // SAFETY: `head` came from getifaddrs and nothing points into the list any more.
    unsafe { libc::freeifaddrs(head) };
    super::tap_sys::if_mtu(&best?.1).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_addresses_are_on_lo_with_its_mtu() {
        let lo = super::super::tap_sys::if_name("lo").expect("lo");
        let Ok(mtu) = super::super::tap_sys::if_mtu(&lo) else {
            return; // no lo here: nothing to compare with
        };
        assert_eq!(interface_mtu(Ipv4Addr::LOCALHOST), Some(mtu));
        assert_eq!(
            interface_mtu(Ipv4Addr::new(127, 0, 0, 2)),
            Some(mtu),
            "in 127/8"
        );
        // TEST-NET-3: no test here puts an interface there (TEST-NET-1 has TAPs of them).
        assert_eq!(
            interface_mtu(Ipv4Addr::new(203, 0, 113, 77)),
            None,
            "nowhere"
        );
    }
}
