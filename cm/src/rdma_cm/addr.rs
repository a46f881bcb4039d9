//! Which device stands behind an IP address, as rdma_cm binds an id to the RDMA device of
//! the netdev that owns the address: the emulated pair's addresses name `emu0` and `emu1`,
//! any other IPv4 address the UDP-link device `emu:<IPv4>` (whose address it is); a device
//! already open in this process under that name (with its options, e.g. faults) is the one
//! used. Without a source address, one is picked for the destination as the kernel's route
//! lookup would ([`source_for`]).

use crate::rdma_cm::error::{Error, Result};
use rnic_verbs::{Context, DeviceName};
use std::net::{IpAddr, SocketAddr};

/// The name of the device that owns `ip`.
///
/// ```
/// use rnic_cm::rdma_cm::device_name_for;
/// assert_eq!(device_name_for("192.0.2.2".parse().unwrap()).unwrap(), "emu1");
/// assert_eq!(device_name_for("127.0.0.7".parse().unwrap()).unwrap(), "emu:127.0.0.7");
/// assert!(device_name_for("::1".parse().unwrap()).is_err());
/// assert!(device_name_for("0.0.0.0".parse().unwrap()).is_err());
/// ```
pub fn device_name_for(ip: IpAddr) -> Result<String> {
    let pair = |i| DeviceName::EmuPair(i).emulated_ip();
    match ip {
        IpAddr::V4(a) if Some(a) == pair(0) => Ok("emu0".into()),
        IpAddr::V4(a) if Some(a) == pair(1) => Ok("emu1".into()),
        IpAddr::V4(a) if !a.is_unspecified() && !a.is_multicast() && !a.is_broadcast() => {
            Ok(format!("emu:{a}"))
        }
        _ => Err(Error::NoDevice(ip)),
    }
}

/// The source address rdma_cm uses to reach `dst` when the caller gives none
/// (`rdma_resolve_addr` with no source): the other one of the emulated pair for a pair
/// address, else the address the kernel's routing picks to reach `dst` (a UDP socket
/// connected there, no packet sent).
///
/// ```
/// use rnic_cm::rdma_cm::source_for;
/// assert_eq!(source_for("192.0.2.2".parse().unwrap()).unwrap(), "192.0.2.1".parse::<std::net::IpAddr>().unwrap());
/// assert!(source_for("127.0.0.9".parse().unwrap()).unwrap().is_loopback());
/// ```
pub fn source_for(dst: IpAddr) -> Result<IpAddr> {
    let pair = |i| DeviceName::EmuPair(i).emulated_ip().map(IpAddr::V4);
    if Some(dst) == pair(0) {
        return pair(1).ok_or(Error::NoDevice(dst));
    }
    if Some(dst) == pair(1) {
        return pair(0).ok_or(Error::NoDevice(dst));
    }
    let io = |source| Error::Io {
        what: "rdma_resolve_addr: the route's source address",
        source,
    };
    let any: SocketAddr = match dst {
        IpAddr::V4(_) => ([0, 0, 0, 0], 0).into(),
        IpAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let s = std::net::UdpSocket::bind(any).map_err(io)?;
    // Any port: connect only looks the route up.
    s.connect((dst, 9)).map_err(io)?;
    Ok(s.local_addr().map_err(io)?.ip())
}

/// Opens (or finds open) the device that owns `ip`.
pub(crate) fn open_device_for(ip: IpAddr) -> Result<Context> {
    let name = device_name_for(ip)?;
    Context::open(&name).map_err(|e| match e {
        rnic_verbs::Error::NoSuchDevice { .. } => Error::NoDevice(ip),
        e => Error::Verbs(e),
    })
}
