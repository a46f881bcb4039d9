//! rdma_cm's conventions on top of the CM (the kernel's `cma.c`, librdmacm): a service ID
//! made of a port space and a port, and the IP header that starts a REQ's private data
//! (`struct cma_hdr`): version, IP version, the source port, the source and destination
//! addresses (IPv4 in the last 4 of 16 bytes).

use super::WireError;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// rdma_cm port spaces (`enum rdma_ucm_port_space`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortSpace {
    /// RDMA_PS_IPOIB (0x0002).
    Ipoib,
    /// RDMA_PS_IB (0x013F).
    Ib,
    /// RDMA_PS_TCP (0x0106): connected QPs (RC), what rping and perftest use.
    Tcp,
    /// RDMA_PS_UDP (0x0111): UD over SIDR, what udaddy uses.
    Udp,
}

impl PortSpace {
    /// The port space number.
    ///
    /// ```
    /// assert_eq!(rnic_cm::wire::ip::PortSpace::Tcp.raw(), 0x0106);
    /// ```
    pub const fn raw(self) -> u16 {
        match self {
            PortSpace::Ipoib => 0x0002,
            PortSpace::Ib => 0x013F,
            PortSpace::Tcp => 0x0106,
            PortSpace::Udp => 0x0111,
        }
    }
}

/// The prefix of IP-based service IDs: `0x0000000001` in the top 40 bits.
const SERVICE_ID_PREFIX: u64 = 0x0000_0000_0100_0000;

/// The service ID of `port` in `ps`: the prefix, the port space's low byte, the port.
///
/// ```
/// use rnic_cm::wire::ip::{port_of, service_id, PortSpace};
/// let sid = service_id(PortSpace::Tcp, 0x4853);
/// assert_eq!(sid, 0x0000_0000_0106_4853); // rping's default port, 18515
/// assert_eq!(port_of(sid, PortSpace::Tcp), Some(18515));
/// assert_eq!(port_of(sid, PortSpace::Udp), None);
/// ```
pub const fn service_id(ps: PortSpace, port: u16) -> u64 {
    SERVICE_ID_PREFIX | (((ps.raw() & 0xFF) as u64) << 16) | port as u64
}

/// The port of a service ID in port space `ps`, `None` when it is not one.
pub const fn port_of(sid: u64, ps: PortSpace) -> Option<u16> {
    if sid & !0xFFFF == service_id(ps, 0) {
        Some((sid & 0xFFFF) as u16)
    } else {
        None
    }
}

/// Size of the IP header in private data.
pub const IP_HEADER_LEN: usize = 36;

mod field {
    pub(super) const VERSION: usize = 0;
    pub(super) const IP_VERSION: usize = 1;
    pub(super) const PORT: usize = 2;
    pub(super) const SRC: usize = 4;
    pub(super) const DST: usize = 20;
}

/// The header rdma_cm puts first in a REQ's private data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpHeader {
    /// `cma_version`: major in the high nibble, minor in the low (0x00 today).
    pub cma_version: u8,
    /// The active side's port.
    pub src_port: u16,
    /// The active side's address.
    pub src: IpAddr,
    /// The passive side's address.
    pub dst: IpAddr,
}

impl IpHeader {
    /// Reads the header from the start of `private_data`.
    ///
    /// ```
    /// use rnic_cm::wire::ip::IpHeader;
    /// let h = IpHeader { cma_version: 0, src_port: 0xddea, src: [10, 11, 0, 3].into(), dst: [10, 11, 0, 2].into() };
    /// let mut pd = [0u8; 92];
    /// h.emit(&mut pd).unwrap();
    /// assert_eq!(IpHeader::parse(&pd), Ok(h));
    /// pd[1] = 0x50; // IP version 5
    /// assert!(IpHeader::parse(&pd).is_err());
    /// ```
    pub fn parse(private_data: &[u8]) -> Result<IpHeader, WireError> {
        use field::*;
        let p = private_data;
        if p.len() < IP_HEADER_LEN {
            return Err(WireError::Short { len: p.len() });
        }
        let addr = |at: usize| -> [u8; 16] { p[at..at + 16].try_into().unwrap_or([0; 16]) };
        let (src, dst) = match p[IP_VERSION] >> 4 {
            4 => {
                let v4 = |a: [u8; 16]| IpAddr::V4(Ipv4Addr::new(a[12], a[13], a[14], a[15]));
                (v4(addr(SRC)), v4(addr(DST)))
            }
            6 => (
                IpAddr::V6(Ipv6Addr::from(addr(SRC))),
                IpAddr::V6(Ipv6Addr::from(addr(DST))),
            ),
            v => {
                return Err(WireError::Length {
                    what: "rdma_cm IP version",
                    len: v,
                    max: 6,
                });
            }
        };
        Ok(IpHeader {
            cma_version: p[VERSION],
            src_port: u16::from_be_bytes([p[PORT], p[PORT + 1]]),
            src,
            dst,
        })
    }

    /// Writes the header at the start of `private_data` (both addresses of one family).
    pub fn emit(&self, private_data: &mut [u8]) -> Result<(), WireError> {
        use field::*;
        let p = private_data;
        if p.len() < IP_HEADER_LEN {
            return Err(WireError::Short { len: p.len() });
        }
        let (ver, s, d) = match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let v4 = |a: Ipv4Addr| {
                    let mut b = [0u8; 16];
                    b[12..].copy_from_slice(&a.octets());
                    b
                };
                (4u8, v4(s), v4(d))
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => (6, s.octets(), d.octets()),
            _ => {
                return Err(WireError::Length {
                    what: "rdma_cm addresses of two IP versions",
                    len: 0,
                    max: 0,
                });
            }
        };
        p[VERSION] = self.cma_version;
        p[IP_VERSION] = ver << 4;
        p[PORT..PORT + 2].copy_from_slice(&self.src_port.to_be_bytes());
        p[SRC..SRC + 16].copy_from_slice(&s);
        p[DST..DST + 16].copy_from_slice(&d);
        Ok(())
    }
}
