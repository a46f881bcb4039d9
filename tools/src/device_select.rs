//! Device names on the command line.
//!
//! A device is named as rdma-core names them (`mlx5_0`), by the PCI address of a ConnectX
//! function bound to vfio-pci (`0000:03:00.0`, or the short `03:00.0`), or as an emulated device:
//! `emu:<IPv4>` (a software ConnectX whose port is a UDP link bound to that address, so it
//! talks RoCE v2 to Linux rxe or to another `rnic` process), `emu-tap:<ifname>,<IPv4>/<prefix>`
//! (a software ConnectX whose port is a Linux TAP interface: an Ethernet endpoint of its own on
//! a bridge; the verbs layer checks the part after `emu-tap:`) or `emu0` / `emu1` (the two
//! ends of an in-process pair, used by `--loopback`).

use crate::error::ToolError;
use std::fmt;
use std::net::Ipv4Addr;

/// A parsed device name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceName {
    /// An emulated device on a UDP link bound to this IPv4 address.
    EmuUdp(Ipv4Addr),
    /// An emulated device on a TAP interface: `<ifname>,<IPv4>/<prefix>`, as given.
    EmuTap(String),
    /// One end (0 or 1) of the in-process emulated pair.
    EmuPair(u8),
    /// A real device by its rdma-core style name, `mlx5_N`.
    Mlx5(u32),
    /// A real device by PCI address, normalised to `dddd:bb:dd.f`.
    Pci(String),
}

impl DeviceName {
    /// Parses a `-d` argument.
    pub fn parse(s: &str) -> Result<DeviceName, ToolError> {
        let bad = || ToolError::BadDeviceName(s.to_string());
        if let Some(ip) = s.strip_prefix("emu:") {
            return ip
                .parse::<Ipv4Addr>()
                .map(DeviceName::EmuUdp)
                .map_err(|_| bad());
        }
        if let Some(spec) = s.strip_prefix("emu-tap:") {
            return spec
                .contains(',')
                .then(|| DeviceName::EmuTap(spec.to_string()))
                .ok_or_else(bad);
        }
        match s {
            "emu0" => return Ok(DeviceName::EmuPair(0)),
            "emu1" => return Ok(DeviceName::EmuPair(1)),
            _ => {}
        }
        if let Some(n) = s.strip_prefix("mlx5_") {
            return n.parse::<u32>().map(DeviceName::Mlx5).map_err(|_| bad());
        }
        parse_pci(s).map(DeviceName::Pci).ok_or_else(bad)
    }

    /// True for the emulated devices.
    pub fn is_emulated(&self) -> bool {
        matches!(
            self,
            DeviceName::EmuUdp(_) | DeviceName::EmuTap(_) | DeviceName::EmuPair(_)
        )
    }
}

impl fmt::Display for DeviceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceName::EmuUdp(ip) => write!(f, "emu:{ip}"),
            DeviceName::EmuTap(spec) => write!(f, "emu-tap:{spec}"),
            DeviceName::EmuPair(n) => write!(f, "emu{n}"),
            DeviceName::Mlx5(n) => write!(f, "mlx5_{n}"),
            DeviceName::Pci(a) => f.write_str(a),
        }
    }
}

/// Normalises `dddd:bb:dd.f` or `bb:dd.f` (hex digits) to the long form.
fn parse_pci(s: &str) -> Option<String> {
    let parts: Vec<&str> = s.split(':').collect();
    let (dom, bus, devfn) = match parts.as_slice() {
        [d, b, df] => (*d, *b, *df),
        [b, df] => ("0000", *b, *df),
        _ => return None,
    };
    let (dev, func) = devfn.split_once('.')?;
    let hex = |x: &str, max: usize| {
        (!x.is_empty() && x.len() <= max && x.chars().all(|c| c.is_ascii_hexdigit()))
            .then(|| u32::from_str_radix(x, 16).ok())
            .flatten()
    };
    let (d, b, v, f) = (hex(dom, 4)?, hex(bus, 2)?, hex(dev, 2)?, hex(func, 1)?);
    (v < 32 && f < 8).then(|| format!("{d:04x}:{b:02x}:{v:02x}.{f:x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(
            DeviceName::parse("emu:127.0.0.2").unwrap(),
            DeviceName::EmuUdp(Ipv4Addr::new(127, 0, 0, 2))
        );
        assert_eq!(DeviceName::parse("emu1").unwrap(), DeviceName::EmuPair(1));
        let tap = DeviceName::parse("emu-tap:tap0,10.0.0.1/24").unwrap();
        assert_eq!(tap, DeviceName::EmuTap("tap0,10.0.0.1/24".into()));
        assert!(tap.is_emulated());
        assert_eq!(tap.to_string(), "emu-tap:tap0,10.0.0.1/24");
        assert_eq!(DeviceName::parse("mlx5_3").unwrap(), DeviceName::Mlx5(3));
        assert_eq!(
            DeviceName::parse("03:00.1").unwrap(),
            DeviceName::Pci("0000:03:00.1".into())
        );
        assert_eq!(
            DeviceName::parse("0000:AF:1f.7").unwrap().to_string(),
            "0000:af:1f.7"
        );
        for bad in [
            "emu:1.2.3",
            "emu2",
            "mlx5_",
            "rxe0",
            "0000:03:40.0",
            "",
            "emu:",
            "emu-tap:tap0",
        ] {
            assert!(DeviceName::parse(bad).is_err(), "{bad}");
        }
    }
}
