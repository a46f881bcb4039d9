//! Which device stands behind an IP address, as rdma_cm binds an id to the RDMA device of
//! the netdev that owns the address: the emulated pair's addresses name `emu0` and `emu1`,
//! any other IPv4 address the UDP-link device `emu:<IPv4>` (whose address it is); a device
//! already open in this process under that name (with its options, e.g. faults) is the one
//! used.

use crate::rdma_cm::error::{Error, Result};
use rnic_verbs::{Context, DeviceName};
use std::net::IpAddr;

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

/// Opens (or finds open) the device that owns `ip`.
pub(crate) fn open_device_for(ip: IpAddr) -> Result<Context> {
    let name = device_name_for(ip)?;
    Context::open(&name).map_err(|e| match e {
        rnic_verbs::Error::NoSuchDevice { .. } => Error::NoDevice(ip),
        e => Error::Verbs(e),
    })
}
