//! The port's own addresses: its MAC and the IPv4 / IPv6 addresses of its GIDs, which the
//! responder answers for and the resolver sends from. Fixed capacity, no allocation.

use std::net::{Ipv4Addr, Ipv6Addr};

/// How many IPv4 and how many IPv6 addresses a [`PortAddrs`] holds.
pub const MAX_ADDRS: usize = 16;

/// A [`PortAddrs`] is full, or the address is not one a port can have.
///
/// ```
/// use rnic_driver::net::{AddrsFull, PortAddrs};
///
/// let mut p = PortAddrs::new([2, 0, 0, 0, 0, 1]);
/// assert_eq!(p.add_ipv4([224, 0, 0, 1].into(), 24), Err(AddrsFull)); // multicast
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the port holds {MAX_ADDRS} addresses of a family at most, each a unicast address")]
pub struct AddrsFull;

/// The port's MAC and IP addresses (see the module docs).
///
/// ```
/// use rnic_driver::net::PortAddrs;
/// use std::net::Ipv4Addr;
///
/// let mut p = PortAddrs::new([2, 0, 0, 0, 0, 1]);
/// p.add_ipv4(Ipv4Addr::new(10, 0, 0, 1), 24)?;
/// assert!(p.has_ipv4(Ipv4Addr::new(10, 0, 0, 1)));
/// assert_eq!(p.ipv4_source_for(Ipv4Addr::new(10, 0, 0, 7)), Some(Ipv4Addr::new(10, 0, 0, 1)));
/// # Ok::<(), rnic_driver::net::AddrsFull>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortAddrs {
    mac: [u8; 6],
    v4: [(Ipv4Addr, u8); MAX_ADDRS],
    n4: usize,
    v6: [Ipv6Addr; MAX_ADDRS],
    n6: usize,
}

impl PortAddrs {
    /// A port with MAC `mac` and no IP address yet.
    ///
    /// ```
    /// use rnic_driver::net::PortAddrs;
    ///
    /// let p = PortAddrs::new([2, 0, 0, 0, 0, 1]);
    /// assert_eq!((p.mac(), p.ipv4().count()), ([2, 0, 0, 0, 0, 1], 0));
    /// ```
    pub fn new(mac: [u8; 6]) -> PortAddrs {
        PortAddrs {
            mac,
            v4: [(Ipv4Addr::UNSPECIFIED, 0); MAX_ADDRS],
            n4: 0,
            v6: [Ipv6Addr::UNSPECIFIED; MAX_ADDRS],
            n6: 0,
        }
    }

    /// The port's MAC.
    ///
    /// ```
    /// # let p = rnic_driver::net::PortAddrs::new([2, 0, 0, 0, 0, 1]);
    /// assert_eq!(p.mac()[0], 2);
    /// ```
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// Adds `ip` with its subnet's prefix length (at most 32); adding it again updates the
    /// prefix. Fails when [`MAX_ADDRS`] are held or `ip` is not a unicast address.
    ///
    /// ```
    /// # let mut p = rnic_driver::net::PortAddrs::new([2, 0, 0, 0, 0, 1]);
    /// p.add_ipv4([192, 0, 2, 1].into(), 24)?;
    /// p.add_ipv4([192, 0, 2, 1].into(), 25)?; // once
    /// assert_eq!(p.ipv4().count(), 1);
    /// # Ok::<(), rnic_driver::net::AddrsFull>(())
    /// ```
    pub fn add_ipv4(&mut self, ip: Ipv4Addr, prefix: u8) -> Result<(), AddrsFull> {
        if !unicast_v4(ip) {
            return Err(AddrsFull);
        }
        let prefix = prefix.min(32);
        if let Some(e) = self.v4[..self.n4].iter_mut().find(|(a, _)| *a == ip) {
            e.1 = prefix;
            return Ok(());
        }
        let slot = self.v4.get_mut(self.n4).ok_or(AddrsFull)?;
        *slot = (ip, prefix);
        self.n4 += 1;
        Ok(())
    }

    /// Adds `ip`. Fails when [`MAX_ADDRS`] are held or `ip` is not a unicast address.
    ///
    /// ```
    /// # let mut p = rnic_driver::net::PortAddrs::new([2, 0, 0, 0, 0, 1]);
    /// p.add_ipv6("fe80::1".parse().unwrap())?;
    /// assert!(p.has_ipv6("fe80::1".parse().unwrap()));
    /// # Ok::<(), rnic_driver::net::AddrsFull>(())
    /// ```
    pub fn add_ipv6(&mut self, ip: Ipv6Addr) -> Result<(), AddrsFull> {
        if ip.is_unspecified() || ip.is_multicast() || ip.is_loopback() {
            return Err(AddrsFull);
        }
        if self.has_ipv6(ip) {
            return Ok(());
        }
        let slot = self.v6.get_mut(self.n6).ok_or(AddrsFull)?;
        *slot = ip;
        self.n6 += 1;
        Ok(())
    }

    /// Removes `ip` (IPv4 or IPv6); true if it was there.
    ///
    /// ```
    /// # let mut p = rnic_driver::net::PortAddrs::new([2, 0, 0, 0, 0, 1]);
    /// # p.add_ipv4([192, 0, 2, 1].into(), 24).unwrap();
    /// assert!(p.remove([192, 0, 2, 1].into()));
    /// assert!(!p.remove([192, 0, 2, 1].into()));
    /// ```
    pub fn remove(&mut self, ip: std::net::IpAddr) -> bool {
        match ip {
            std::net::IpAddr::V4(ip) => match self.v4[..self.n4].iter().position(|(a, _)| *a == ip)
            {
                Some(i) => {
                    self.v4.copy_within(i + 1..self.n4, i);
                    self.n4 -= 1;
                    true
                }
                None => false,
            },
            std::net::IpAddr::V6(ip) => match self.v6[..self.n6].iter().position(|a| *a == ip) {
                Some(i) => {
                    self.v6.copy_within(i + 1..self.n6, i);
                    self.n6 -= 1;
                    true
                }
                None => false,
            },
        }
    }

    /// The IPv4 addresses, in the order added.
    ///
    /// ```
    /// # let p = rnic_driver::net::PortAddrs::new([2, 0, 0, 0, 0, 1]);
    /// assert_eq!(p.ipv4().next(), None);
    /// ```
    pub fn ipv4(&self) -> impl Iterator<Item = Ipv4Addr> + '_ {
        self.v4[..self.n4].iter().map(|(a, _)| *a)
    }

    /// The IPv6 addresses, in the order added.
    ///
    /// ```
    /// # let p = rnic_driver::net::PortAddrs::new([2, 0, 0, 0, 0, 1]);
    /// assert_eq!(p.ipv6().next(), None);
    /// ```
    pub fn ipv6(&self) -> impl Iterator<Item = Ipv6Addr> + '_ {
        self.v6[..self.n6].iter().copied()
    }

    /// Whether `ip` is one of the port's IPv4 addresses.
    ///
    /// ```
    /// # let p = rnic_driver::net::PortAddrs::new([2, 0, 0, 0, 0, 1]);
    /// assert!(!p.has_ipv4([10, 0, 0, 1].into()));
    /// ```
    pub fn has_ipv4(&self, ip: Ipv4Addr) -> bool {
        self.ipv4().any(|a| a == ip)
    }

    /// Whether `ip` is one of the port's IPv6 addresses.
    ///
    /// ```
    /// # let p = rnic_driver::net::PortAddrs::new([2, 0, 0, 0, 0, 1]);
    /// assert!(!p.has_ipv6("fe80::1".parse().unwrap()));
    /// ```
    pub fn has_ipv6(&self, ip: Ipv6Addr) -> bool {
        self.ipv6().any(|a| a == ip)
    }

    /// The address to ask for `peer` from: one of the port's whose subnet holds `peer`,
    /// else the first.
    ///
    /// ```
    /// # let mut p = rnic_driver::net::PortAddrs::new([2, 0, 0, 0, 0, 1]);
    /// p.add_ipv4([10, 0, 0, 1].into(), 24)?;
    /// p.add_ipv4([10, 1, 0, 1].into(), 16)?;
    /// assert_eq!(p.ipv4_source_for([10, 1, 2, 3].into()), Some([10, 1, 0, 1].into()));
    /// assert_eq!(p.ipv4_source_for([8, 8, 8, 8].into()), Some([10, 0, 0, 1].into()));
    /// # Ok::<(), rnic_driver::net::AddrsFull>(())
    /// ```
    pub fn ipv4_source_for(&self, peer: Ipv4Addr) -> Option<Ipv4Addr> {
        let within = |(a, p): &(Ipv4Addr, u8)| {
            let mask = u32::MAX.checked_shl(32 - u32::from(*p)).unwrap_or(0);
            u32::from(*a) & mask == u32::from(peer) & mask
        };
        let held = &self.v4[..self.n4];
        held.iter()
            .find(|e| within(e))
            .or_else(|| held.first())
            .map(|(a, _)| *a)
    }

    /// The address to ask for `peer` from: a link-local one of the port's when `peer` is
    /// link-local, else one that is not, else the first.
    ///
    /// ```
    /// # let mut p = rnic_driver::net::PortAddrs::new([2, 0, 0, 0, 0, 1]);
    /// p.add_ipv6("2001:db8::1".parse().unwrap())?;
    /// p.add_ipv6("fe80::1".parse().unwrap())?;
    /// assert_eq!(p.ipv6_source_for("fe80::9".parse().unwrap()), Some("fe80::1".parse().unwrap()));
    /// # Ok::<(), rnic_driver::net::AddrsFull>(())
    /// ```
    pub fn ipv6_source_for(&self, peer: Ipv6Addr) -> Option<Ipv6Addr> {
        let ll = peer.is_unicast_link_local();
        self.ipv6()
            .find(|a| a.is_unicast_link_local() == ll)
            .or_else(|| self.ipv6().next())
    }
}

/// Whether `ip` can be a host's own or a neighbour's IPv4 address.
pub(crate) fn unicast_v4(ip: Ipv4Addr) -> bool {
    !(ip.is_unspecified() || ip.is_multicast() || ip.is_broadcast() || ip.is_loopback())
}
