//! The system calls of the TAP link ([`super::tap`]) that std does not wrap: `TUNSETIFF` on
//! `/dev/net/tun`, the interface's MTU (`SIOCGIFMTU`), `poll` and plain `read` / `write` on
//! the TAP's file descriptor. Every `unsafe` block of the link is here; each call passes
//! buffers that outlive it, so nothing holds a raw pointer between calls.

use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;

/// The clone device every TUN/TAP interface is opened through.
pub(super) const TUN_PATH: &str = "/dev/net/tun";

/// An interface name as the kernel takes it: at most `IFNAMSIZ - 1` bytes and a NUL.
pub(super) type IfName = [libc::c_char; libc::IFNAMSIZ];

/// `name` as an [`IfName`], if it is one the kernel could take: 1 to 15 bytes, no NUL, no
/// `/` and no white space (what `dev_valid_name` refuses).
pub(super) fn if_name(name: &str) -> Option<IfName> {
    let ok = !name.is_empty()
        && name.len() < libc::IFNAMSIZ
        && name != "."
        && name != ".."
        && !name
            .bytes()
            .any(|b| b == 0 || b == b'/' || b == b':' || b.is_ascii_whitespace());
    if !ok {
        return None;
    }
    let mut out: IfName = [0; libc::IFNAMSIZ];
    for (o, b) in out.iter_mut().zip(name.bytes()) {
        *o = b as libc::c_char;
    }
    Some(out)
}

/// An `ifreq` naming `name`, its union zeroed.
fn ifreq(name: &IfName) -> libc::ifreq {
    // SAFETY: ifreq is plain old data (a name and a union of integers, addresses and a
    // pointer); all zeroes is a valid value of each member.
    let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
    r.ifr_name = *name;
    r
}

/// Opens `/dev/net/tun` (non-blocking, close-on-exec) and attaches the descriptor to the TAP
/// interface `name` (`IFF_TAP | IFF_NO_PI`: whole Ethernet frames, no packet-information
/// prefix), creating the interface if it does not exist.
pub(super) fn open_tap(name: &IfName) -> io::Result<OwnedFd> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(TUN_PATH)?;
    let mut req = ifreq(name);
    // The flags are a c_short in the union; both constants fit.
    req.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: a valid descriptor, TUNSETIFF's argument is a `struct ifreq` the kernel reads
    // and writes back (the name), and `req` lives across the call.
    let r = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &raw mut req) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(OwnedFd::from(file))
}

/// Runs the interface ioctl `req` on `name` through a datagram socket (what `ip link` does
/// through netlink), with `fill` setting the union before the call; returns the `ifreq` as
/// the kernel left it.
fn if_ioctl(
    name: &IfName,
    req: libc::c_ulong,
    fill: impl FnOnce(&mut libc::ifreq),
) -> io::Result<libc::ifreq> {
    let sock = std::net::UdpSocket::bind("0.0.0.0:0")?;
    let mut r = ifreq(name);
    fill(&mut r);
    // SAFETY: a valid socket; every SIOC[GS]IF* request reads and writes the `struct ifreq`
    // passed, which lives across the call.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), req, &raw mut r) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r)
}

/// The MTU of the interface `name` (`SIOCGIFMTU`): the largest IP packet, so the largest
/// Ethernet frame is this plus the header (and a VLAN tag).
pub(super) fn if_mtu(name: &IfName) -> io::Result<u32> {
    let r = if_ioctl(name, libc::SIOCGIFMTU, |_| {})?;
    // SAFETY: SIOCGIFMTU succeeded, so the kernel wrote the `ifru_mtu` member.
    let mtu = unsafe { r.ifr_ifru.ifru_mtu };
    u32::try_from(mtu).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))
}

/// Sets the interface `name` administratively up (`IFF_UP`, as `ip link set up`), keeping
/// its other flags; needs `CAP_NET_ADMIN`.
pub(super) fn if_set_up(name: &IfName) -> io::Result<()> {
    let r = if_ioctl(name, libc::SIOCGIFFLAGS, |_| {})?;
    // SAFETY: SIOCGIFFLAGS succeeded, so the kernel wrote the `ifru_flags` member.
    let flags = unsafe { r.ifr_ifru.ifru_flags };
    if_ioctl(name, libc::SIOCSIFFLAGS, |r| {
        r.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
    })
    .map(drop)
}

/// Waits up to `timeout_ms` for `fd` to be readable; true when it is.
pub(super) fn poll_readable(fd: BorrowedFd<'_>, timeout_ms: i32) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd on the stack, counted as one.
    let r = unsafe { libc::poll(&raw mut p, 1, timeout_ms) };
    match r {
        r if r < 0 => {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            }
        }
        0 => Ok(false),
        // An interface deleted under the descriptor reports an error or a hang-up without
        // data, at once and forever: an error, so the caller backs off instead of spinning.
        _ if p.revents & libc::POLLIN == 0
            && p.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 =>
        {
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
        _ => Ok(p.revents & libc::POLLIN != 0),
    }
}

/// Reads one frame into `buf`'s spare capacity (up to `buf.capacity()` bytes: a longer frame
/// is cut there, which the caller sees as a full buffer) and sets its length. `Ok(None)`:
/// nothing waiting (`EAGAIN`).
pub(super) fn read_frame(fd: BorrowedFd<'_>, buf: &mut Vec<u8>) -> io::Result<Option<usize>> {
    buf.clear();
    let spare = buf.spare_capacity_mut();
    // SAFETY: `spare` is writable memory of `spare.len()` bytes owned by `buf`; read writes
    // at most that many.
    let n = unsafe { libc::read(fd.as_raw_fd(), spare.as_mut_ptr().cast(), spare.len()) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
            _ => Err(e),
        };
    }
    let n = n.unsigned_abs();
    // SAFETY: the kernel initialised the first `n` bytes (n <= capacity).
    unsafe { buf.set_len(n) };
    Ok(Some(n))
}

/// Writes one whole frame; the TAP takes it or refuses it whole.
pub(super) fn write_frame(fd: BorrowedFd<'_>, frame: &[u8]) -> io::Result<()> {
    // SAFETY: `frame` is readable for `frame.len()` bytes across the call.
    let n = unsafe { libc::write(fd.as_raw_fd(), frame.as_ptr().cast(), frame.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// What the TAP tests need beside the link: the kernel's side of the interface (an
/// `AF_PACKET` socket bound to it, its MTU set), and a thread without `CAP_NET_ADMIN`.
#[cfg(test)]
pub(super) mod testing {
    use super::*;
    use std::os::fd::{AsFd, FromRawFd, RawFd};

    /// Sets the interface's MTU (`SIOCSIFMTU`).
    pub(crate) fn set_mtu(name: &IfName, mtu: i32) -> io::Result<()> {
        if_ioctl(name, libc::SIOCSIFMTU, |r| r.ifr_ifru.ifru_mtu = mtu).map(drop)
    }

    /// `a` as the `sockaddr` of an IPv4 address (port 0).
    fn sockaddr_v4(a: std::net::Ipv4Addr) -> libc::sockaddr {
        let sin = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr {
                s_addr: u32::from(a).to_be(),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: sockaddr_in and sockaddr are both 16 bytes of plain old data; the kernel
        // reads the address family first and the IPv4 fields where sockaddr_in has them.
        unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
    }

    /// Gives the interface the IPv4 address `addr/prefix` (`SIOCSIFADDR`, `SIOCSIFNETMASK`:
    /// the kernel adds the subnet's route); needs `CAP_NET_ADMIN`.
    pub(crate) fn set_ipv4(name: &IfName, addr: std::net::Ipv4Addr, prefix: u32) -> io::Result<()> {
        if_ioctl(name, libc::SIOCSIFADDR, |r| {
            r.ifr_ifru.ifru_addr = sockaddr_v4(addr);
        })?;
        let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
        if_ioctl(name, libc::SIOCSIFNETMASK, |r| {
            r.ifr_ifru.ifru_netmask = sockaddr_v4(mask.into());
        })
        .map(drop)
    }

    /// A permanent neighbour entry on the interface (`SIOCSARP`, as `ip neigh add ... nud
    /// permanent`): frames to `ip` go to `mac` at once, with no ARP request first.
    pub(crate) fn add_neighbour(
        name: &IfName,
        ip: std::net::Ipv4Addr,
        mac: [u8; 6],
    ) -> io::Result<()> {
        // SAFETY: arpreq is plain old data; zeroes are valid.
        let mut req: libc::arpreq = unsafe { std::mem::zeroed() };
        req.arp_pa = sockaddr_v4(ip);
        req.arp_ha.sa_family = libc::ARPHRD_ETHER;
        for (d, m) in req.arp_ha.sa_data.iter_mut().zip(mac) {
            *d = m as libc::c_char;
        }
        req.arp_flags = libc::ATF_PERM | libc::ATF_COM;
        req.arp_dev = *name;
        let sock = std::net::UdpSocket::bind("0.0.0.0:0")?;
        // SAFETY: a valid socket; SIOCSARP reads the `struct arpreq` passed, which lives
        // across the call.
        let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSARP, &raw mut req) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// A raw `AF_PACKET` socket bound to one interface: what the kernel sees on it.
    pub(crate) struct PacketSocket(OwnedFd);

    impl PacketSocket {
        /// Binds to `ifname`, every protocol, with a receive timeout of 100 ms.
        pub(crate) fn bind(ifname: &str) -> io::Result<PacketSocket> {
            let c = std::ffi::CString::new(ifname).map_err(io::Error::other)?;
            // SAFETY: a NUL-terminated name that lives across the call.
            let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
            if index == 0 {
                return Err(io::Error::last_os_error());
            }
            let proto = (libc::ETH_P_ALL as u16).to_be();
            // SAFETY: plain socket creation.
            let fd: RawFd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, proto.into()) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: a descriptor just returned to us and owned by nothing else.
            let sock = PacketSocket(unsafe { OwnedFd::from_raw_fd(fd) });
            // SAFETY: sockaddr_ll is plain old data; zeroes are valid.
            let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_protocol = proto;
            sll.sll_ifindex = i32::try_from(index).map_err(io::Error::other)?;
            // SAFETY: a valid socket and a sockaddr_ll of its size, living across the call.
            let r = unsafe {
                libc::bind(
                    fd,
                    (&raw const sll).cast(),
                    std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
                )
            };
            if r < 0 {
                return Err(io::Error::last_os_error());
            }
            let tv = libc::timeval {
                tv_sec: 0,
                tv_usec: 100_000,
            };
            // SAFETY: a valid socket and a timeval of its size.
            let r = unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_RCVTIMEO,
                    (&raw const tv).cast(),
                    std::mem::size_of::<libc::timeval>() as libc::socklen_t,
                )
            };
            if r < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(sock)
        }

        /// Sends one whole frame out of the interface (to the TAP's reader).
        pub(crate) fn send(&self, frame: &[u8]) -> io::Result<()> {
            write_frame(self.0.as_fd(), frame)
        }

        /// The next frame the interface received (from the TAP's writer) or sent, within
        /// the timeout; `None` when nothing came.
        pub(crate) fn recv(&self) -> io::Result<Option<Vec<u8>>> {
            let mut buf = Vec::with_capacity(65536);
            match read_frame(self.0.as_fd(), &mut buf) {
                Ok(Some(_)) => Ok(Some(buf)),
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            }
        }
    }

    /// `CAP_NET_ADMIN` (linux/capability.h).
    const CAP_NET_ADMIN: u32 = 12;
    /// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
    const CAP_V3: u32 = 0x2008_0522;

    /// Takes `CAP_NET_ADMIN` out of the calling thread's effective set. Capabilities are
    /// per thread in Linux and the raw `capset` changes the caller only (glibc's wrappers
    /// that broadcast to every thread are for the uid calls), so the rest of the test
    /// process keeps it.
    pub(crate) fn drop_net_admin_in_this_thread() -> io::Result<()> {
        #[repr(C)]
        struct Header {
            version: u32,
            pid: i32,
        }
        #[repr(C)]
        #[derive(Clone, Copy, Default)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        let mut h = Header {
            version: CAP_V3,
            pid: 0,
        };
        let mut d = [Data::default(); 2];
        // SAFETY: capget writes two Data words for version 3, both on the stack.
        let r = unsafe { libc::syscall(libc::SYS_capget, &raw mut h, d.as_mut_ptr()) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        d[0].effective &= !(1 << CAP_NET_ADMIN);
        // SAFETY: capset reads the header and two Data words, both on the stack.
        let r = unsafe { libc::syscall(libc::SYS_capset, &raw mut h, d.as_ptr()) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names_are_checked_as_the_kernel_does() {
        assert!(if_name("rnictap0").is_some());
        assert_eq!(
            if_name("tap0").unwrap()[..5],
            [b't' as libc::c_char, b'a' as _, b'p' as _, b'0' as _, 0]
        );
        assert!(if_name("fifteen_bytes_x").is_some());
        for bad in [
            "",
            "sixteen_bytes_xx",
            "a/b",
            "a b",
            "a\0b",
            ".",
            "..",
            "a:1",
        ] {
            assert!(if_name(bad).is_none(), "{bad:?}");
        }
    }
}
