//! Devices: discovery, names, and what `ibv_query_device`, `ibv_query_port` and
//! `ibv_query_gid` answer.
//!
//! # Names
//!
//! | name | device |
//! |---|---|
//! | `mlx5_0`, `mlx5_1`, ... | the ConnectX functions bound to vfio-pci, in PCI address order |
//! | `0000:3b:00.0` | the ConnectX function bound to vfio-pci at that PCI address |
//! | `emu0`, `emu1` | an in-process pair of emulated ConnectX devices joined by a link: IPv4 192.0.2.1 and 192.0.2.2 (documentation addresses), created on first open |
//! | `emu:<IPv4>` | an emulated ConnectX whose port speaks RoCE v2 over UDP on `<IPv4>`:4791 |
//! | `emu-tap:<ifname>,<IPv4>/<prefix>` | an emulated ConnectX whose port is the Linux TAP interface `<ifname>` (created if missing, which needs `CAP_NET_ADMIN`), with IPv4 address `<IPv4>` on a `/<prefix>` subnet |
//!
//! Every emulated device has GID 0 = `fe80::` + the modified EUI-64 of its MAC and GID 1 =
//! `::ffff:a.b.c.d` (both RoCE v2), as rxe's table looks; its MAC is derived from its IPv4
//! address ([`emulated_mac`]: `02:52:a:b:c:d`), so two processes agree on each other's MAC
//! without ARP. Opening a name that is already open in this process shares the device (as
//! two `ibv_open_device` calls on one device do).
//!
//! `emu0` and `emu1` are joined by an in-process link ([`rnic_emulator::link::InProcLink`]);
//! an `emu:<IPv4>` device's port is a UDP socket bound to `<IPv4>:4791`
//! ([`rnic_emulator::link::UdpLink`]): it talks to other `emu:` devices, in this process or
//! another, and to Linux rxe. An `emu-tap:` device's port is a TAP interface
//! ([`rnic_emulator::link::TapLink`]): whole Ethernet frames, so on a Linux bridge it is an
//! endpoint of its own, with its port MTU the interface's.
//!
//! No kernel resolves addresses for an `emu-tap:` device or a VFIO-driven function, so rnic
//! does: each runs the driver's port agent (raw Ethernet queues and NIC RX steering) that
//! answers ARP requests, neighbour solicitations and pings for the port's GIDs, announces
//! them (gratuitous ARP) when the device opens, and resolves peers' MACs for
//! [`crate::Context::resolve_mac`], address handles and RC connections (a kernel peer such as
//! rxe finds it by ARP, without a static neighbour entry). The emulated pair and `emu:`
//! devices keep the MAC rule above unless opened with [`OpenOptions::neighbor_agent`].
//! [`EmuOptions`] adds fault injection and pcap capture.

use crate::error::{Error, Result};
use rnic_driver::vfio::discovery;
use rnic_emulator::link::FaultConfig;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// The IEEE OUI ibverbs reports as `vendor_id` for Mellanox / NVIDIA devices.
pub const MELLANOX_OUI: u32 = 0x02c9;

/// IPv4 address of `emu0`.
pub const EMU0_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
/// IPv4 address of `emu1`.
pub const EMU1_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);

/// A parsed device name.
///
/// ```
/// use rnic_verbs::DeviceName;
/// use std::net::Ipv4Addr;
///
/// assert_eq!("emu0".parse::<DeviceName>().unwrap(), DeviceName::EmuPair(0));
/// assert_eq!(
///     "emu:127.0.0.2".parse::<DeviceName>().unwrap(),
///     DeviceName::EmuUdp(Ipv4Addr::new(127, 0, 0, 2))
/// );
/// assert_eq!("mlx5_1".parse::<DeviceName>().unwrap(), DeviceName::Mlx5Index(1));
/// assert!("emu:not-an-ip".parse::<DeviceName>().is_err());
/// assert_eq!(
///     "emu-tap:tap0,10.0.0.1/24".parse::<DeviceName>().unwrap(),
///     DeviceName::EmuTap { ifname: "tap0".into(), ip: Ipv4Addr::new(10, 0, 0, 1), prefix: 24 }
/// );
/// for bad in ["emu-tap:tap0,10.0.0.1", "emu-tap:tap0,10.0.0.1/33", "emu-tap:a/b,10.0.0.1/24",
///             "emu-tap:,10.0.0.1/24", "emu-tap:tap0,224.0.0.1/4", "emu-tap:tap0"] {
///     assert!(bad.parse::<DeviceName>().is_err(), "{bad}");
/// }
/// assert_eq!(DeviceName::EmuPair(1).to_string(), "emu1");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DeviceName {
    /// `emu0` / `emu1`: a member of the in-process pair.
    EmuPair(u8),
    /// `emu:<IPv4>`: an emulated device on that address.
    EmuUdp(Ipv4Addr),
    /// `emu-tap:<ifname>,<IPv4>/<prefix>`: an emulated device on a Linux TAP interface.
    EmuTap {
        /// The TAP interface.
        ifname: String,
        /// The port's IPv4 address.
        ip: Ipv4Addr,
        /// Its subnet's prefix length (0 to 32).
        prefix: u8,
    },
    /// `mlx5_N`: the N-th ConnectX function bound to vfio-pci.
    Mlx5Index(usize),
    /// A PCI address `DDDD:BB:DD.F`.
    Pci(String),
}

impl FromStr for DeviceName {
    type Err = Error;

    fn from_str(s: &str) -> Result<DeviceName> {
        let bad = |why: &str| Error::NoSuchDevice {
            name: s.to_string(),
            why: why.to_string(),
        };
        match s {
            "emu0" => return Ok(DeviceName::EmuPair(0)),
            "emu1" => return Ok(DeviceName::EmuPair(1)),
            _ => {}
        }
        if let Some(ip) = s.strip_prefix("emu:") {
            let ip: Ipv4Addr = ip
                .parse()
                .map_err(|_| bad("emu:<IPv4> needs an IPv4 address, e.g. emu:127.0.0.1"))?;
            if ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() {
                return Err(bad("the address must be a unicast IPv4 address"));
            }
            return Ok(DeviceName::EmuUdp(ip));
        }
        if let Some(spec) = s.strip_prefix("emu-tap:") {
            return parse_tap(spec).map_err(bad);
        }
        if let Some(n) = s.strip_prefix("mlx5_") {
            return n
                .parse()
                .map(DeviceName::Mlx5Index)
                .map_err(|_| bad("mlx5_<N> needs a number"));
        }
        if discovery::is_pci_address(s) {
            return Ok(DeviceName::Pci(s.to_ascii_lowercase()));
        }
        Err(bad(
            "names are emu0, emu1, emu:<IPv4>, emu-tap:<ifname>,<IPv4>/<prefix>, mlx5_<N> or a \
             PCI address DDDD:BB:DD.F",
        ))
    }
}

/// The part of an `emu-tap:` name after the prefix: `<ifname>,<IPv4>/<prefix>`.
fn parse_tap(spec: &str) -> std::result::Result<DeviceName, &'static str> {
    const USAGE: &str = "emu-tap:<ifname>,<IPv4>/<prefix>, e.g. emu-tap:tap0,10.0.0.1/24";
    let (ifname, addr) = spec.split_once(',').ok_or(USAGE)?;
    let (ip, prefix) = addr.split_once('/').ok_or(USAGE)?;
    // What the kernel takes as an interface name (dev_valid_name); TapLink checks it again.
    let name_ok = !ifname.is_empty()
        && ifname.len() < 16
        && !ifname
            .bytes()
            .any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace());
    if !name_ok {
        return Err("the interface name must be 1 to 15 bytes without '/', ':' or spaces");
    }
    let ip: Ipv4Addr = ip.parse().map_err(|_| USAGE)?;
    if ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() {
        return Err("the address must be a unicast IPv4 address");
    }
    let prefix: u8 = prefix.parse().map_err(|_| USAGE)?;
    if prefix > 32 {
        return Err("the prefix length is 0 to 32");
    }
    Ok(DeviceName::EmuTap {
        ifname: ifname.to_string(),
        ip,
        prefix,
    })
}

impl fmt::Display for DeviceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceName::EmuPair(i) => write!(f, "emu{i}"),
            DeviceName::EmuUdp(ip) => write!(f, "emu:{ip}"),
            DeviceName::EmuTap { ifname, ip, prefix } => {
                write!(f, "emu-tap:{ifname},{ip}/{prefix}")
            }
            DeviceName::Mlx5Index(i) => write!(f, "mlx5_{i}"),
            DeviceName::Pci(a) => f.write_str(a),
        }
    }
}

impl DeviceName {
    /// The IPv4 address of an emulated device.
    ///
    /// ```
    /// use rnic_verbs::DeviceName;
    /// use std::net::Ipv4Addr;
    ///
    /// assert_eq!(DeviceName::EmuPair(1).emulated_ip(), Some(Ipv4Addr::new(192, 0, 2, 2)));
    /// assert_eq!(DeviceName::Mlx5Index(0).emulated_ip(), None);
    /// ```
    pub fn emulated_ip(&self) -> Option<Ipv4Addr> {
        match self {
            DeviceName::EmuPair(0) => Some(EMU0_IP),
            DeviceName::EmuPair(_) => Some(EMU1_IP),
            DeviceName::EmuUdp(ip) | DeviceName::EmuTap { ip, .. } => Some(*ip),
            _ => None,
        }
    }
}

/// The MAC of the emulated device on `ip`: `02:52:a:b:c:d` (locally administered, unicast).
///
/// ```
/// use rnic_verbs::emulated_mac;
/// use std::net::Ipv4Addr;
///
/// assert_eq!(emulated_mac(Ipv4Addr::new(10, 0, 0, 1)), [0x02, 0x52, 10, 0, 0, 1]);
/// ```
pub fn emulated_mac(ip: Ipv4Addr) -> [u8; 6] {
    let o = ip.octets();
    [0x02, 0x52, o[0], o[1], o[2], o[3]]
}

/// The node GUID of a MAC: its modified EUI-64 (universal/local bit flipped, `ff:fe` in the
/// middle), as rxe derives it; the same 8 bytes as the interface id of GID 0.
///
/// ```
/// use rnic_verbs::node_guid_from_mac;
///
/// assert_eq!(node_guid_from_mac([0x02, 0x52, 10, 0, 0, 1]), 0x0052_0aff_fe00_0001);
/// ```
pub fn node_guid_from_mac(mac: [u8; 6]) -> u64 {
    u64::from_be_bytes([
        mac[0] ^ 0x02,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ])
}

/// Formats a GUID as ibverbs prints it: `xxxx:xxxx:xxxx:xxxx`.
///
/// ```
/// assert_eq!(rnic_verbs::format_guid(0x0052_0aff_fe00_0001), "0052:0aff:fe00:0001");
/// ```
pub fn format_guid(guid: u64) -> String {
    format!(
        "{:04x}:{:04x}:{:04x}:{:04x}",
        guid >> 48,
        (guid >> 32) & 0xffff,
        (guid >> 16) & 0xffff,
        guid & 0xffff
    )
}

/// A 128-bit GID (`union ibv_gid`), in network byte order.
///
/// Displays as an IPv6 address (`::ffff:10.0.0.1` for IPv4-mapped ones, as `ibv_devinfo -v`
/// prints them); [`Gid::to_hex`] / [`Gid::from_hex`] are the pingpong tools' wire form.
///
/// ```
/// use rnic_verbs::Gid;
/// use std::net::Ipv4Addr;
///
/// let g = Gid::from_ipv4(Ipv4Addr::new(192, 168, 1, 10));
/// assert_eq!(g.to_string(), "::ffff:192.168.1.10");
/// assert_eq!(g.to_hex(), "00000000000000000000ffffc0a8010a");
/// assert_eq!(Gid::from_hex(&g.to_hex()), Some(g));
/// assert_eq!(g.ipv4(), Some(Ipv4Addr::new(192, 168, 1, 10)));
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// `::ffff:a.b.c.d`.
    ///
    /// ```
    /// use rnic_verbs::Gid;
    ///
    /// let g = Gid::from_ipv4([10, 0, 0, 1].into());
    /// assert_eq!(g.0[10..], [0xff, 0xff, 10, 0, 0, 1]);
    /// ```
    pub fn from_ipv4(ip: Ipv4Addr) -> Gid {
        Gid(ip.to_ipv6_mapped().octets())
    }

    /// The IPv4 address of an IPv4-mapped GID.
    ///
    /// ```
    /// use rnic_verbs::Gid;
    ///
    /// assert_eq!(Gid::from_ipv4([10, 1, 2, 3].into()).ipv4(), Some([10, 1, 2, 3].into()));
    /// assert_eq!(Gid::default().ipv4(), None);
    /// ```
    pub fn ipv4(&self) -> Option<Ipv4Addr> {
        Ipv6Addr::from(self.0).to_ipv4_mapped()
    }

    /// Whether it is all zeros (what the pingpong tools send without `-g`).
    ///
    /// ```
    /// use rnic_verbs::Gid;
    ///
    /// assert!(Gid::default().is_zero());
    /// assert!(!Gid::from_ipv4([10, 0, 0, 1].into()).is_zero());
    /// ```
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }

    /// Whether it is a link-local (`fe80::/64`) GID.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// assert!(ctx.query_gid(1, 0)?.is_link_local());
    /// assert!(!ctx.query_gid(1, 1)?.is_link_local()); // the IPv4 one
    /// # Ok(()) }
    /// ```
    pub fn is_link_local(&self) -> bool {
        self.0[0] == 0xfe && self.0[1] & 0xc0 == 0x80
    }

    /// The MAC a link-local GID's interface id (modified EUI-64) was made from.
    ///
    /// ```
    /// # use rnic_verbs::*; fn main() -> Result<(), Error> {
    /// # let ctx = Context::open("emu0")?;
    /// assert_eq!(ctx.query_gid(1, 0)?.link_local_mac(), Some(ctx.mac()));
    /// assert_eq!(ctx.query_gid(1, 1)?.link_local_mac(), None);
    /// # Ok(()) }
    /// ```
    pub fn link_local_mac(&self) -> Option<[u8; 6]> {
        let g = &self.0;
        (self.is_link_local() && g[11] == 0xff && g[12] == 0xfe)
            .then(|| [g[8] ^ 0x02, g[9], g[10], g[13], g[14], g[15]])
    }

    /// 32 lowercase hex digits in wire order.
    ///
    /// ```
    /// use rnic_verbs::Gid;
    ///
    /// assert_eq!(Gid::from_ipv4([10, 0, 0, 1].into()).to_hex(), "00000000000000000000ffff0a000001");
    /// ```
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parses 32 hex digits.
    ///
    /// ```
    /// use rnic_verbs::Gid;
    ///
    /// let g = Gid::from_hex("fe800000000000000052c0fffe000201").unwrap();
    /// assert!(g.is_link_local());
    /// assert_eq!(Gid::from_hex("fe80"), None); // 32 digits or nothing
    /// ```
    pub fn from_hex(s: &str) -> Option<Gid> {
        let s = s.as_bytes();
        if s.len() != 32 {
            return None;
        }
        let mut g = [0u8; 16];
        for (i, b) in g.iter_mut().enumerate() {
            let h = std::str::from_utf8(&s[2 * i..2 * i + 2]).ok()?;
            *b = u8::from_str_radix(h, 16).ok()?;
        }
        Some(Gid(g))
    }
}

impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&Ipv6Addr::from(self.0), f)
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gid({self})")
    }
}

impl From<Ipv4Addr> for Gid {
    fn from(ip: Ipv4Addr) -> Gid {
        Gid::from_ipv4(ip)
    }
}

/// GID type (`enum ibv_gid_type`).
///
/// ```
/// use rnic_verbs::GidType;
///
/// assert_eq!(GidType::RoceV2.to_string(), "RoCE v2");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GidType {
    /// InfiniBand / RoCE v1.
    Ib,
    /// RoCE v2 (UDP/IP encapsulation): every GID of these devices.
    RoceV2,
}

impl fmt::Display for GidType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GidType::Ib => "IB/RoCE v1",
            GidType::RoceV2 => "RoCE v2",
        })
    }
}

/// One GID table entry (`struct ibv_gid_entry`).
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> {
/// # let ctx = Context::open("emu0")?;
/// for e in ctx.gid_table() {
///     assert_eq!((e.gid_type, e.port_num), (GidType::RoceV2, 1));
///     assert_eq!(ctx.query_gid(1, e.index)?, e.gid);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GidEntry {
    /// Table index.
    pub index: u32,
    /// The GID.
    pub gid: Gid,
    /// Its type.
    pub gid_type: GidType,
    /// The port (1).
    pub port_num: u8,
}

/// Atomic operation support (`enum ibv_atomic_cap`).
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> {
/// # let ctx = Context::open("emu0")?;
/// assert_eq!(ctx.query_device().atomic_cap, AtomicCap::Hca);
/// assert_eq!(AtomicCap::Hca.to_string(), "ATOMIC_HCA (1)"); // as ibv_devinfo prints it
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicCap {
    /// IBV_ATOMIC_NONE (0).
    None = 0,
    /// IBV_ATOMIC_HCA (1): atomic within this HCA.
    Hca = 1,
    /// IBV_ATOMIC_GLOB (2).
    Glob = 2,
}

impl fmt::Display for AtomicCap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            AtomicCap::None => "ATOMIC_NONE",
            AtomicCap::Hca => "ATOMIC_HCA",
            AtomicCap::Glob => "ATOMIC_GLOB",
        };
        write!(f, "{s} ({})", *self as u32)
    }
}

/// What `ibv_query_device` answers (`struct ibv_device_attr`), computed from the device's
/// capabilities as rdma-core's mlx5 provider does.
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> {
/// # let ctx = Context::open("emu0")?;
/// let d: DeviceAttr = ctx.query_device();
/// assert_eq!((d.vendor_id, d.phys_port_cnt), (0x02c9, 1));
/// assert_eq!(format_guid(d.node_guid), format_guid(d.sys_image_guid));
/// assert!(d.max_sge >= 1 && d.max_qp_rd_atom >= 1, "{d:?}");
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceAttr {
    /// Firmware version, `major.minor.subminor` (e.g. `14.12.1220`).
    pub fw_ver: String,
    /// Node GUID (the modified EUI-64 of the port MAC).
    pub node_guid: u64,
    /// System image GUID (equal to the node GUID).
    pub sys_image_guid: u64,
    /// Largest region (bytes).
    pub max_mr_size: u64,
    /// Page sizes supported (bit n: 2^n bytes).
    pub page_size_cap: u64,
    /// IEEE vendor id: 0x02c9.
    pub vendor_id: u32,
    /// PCI device id (4115 = 0x1013 for a ConnectX-4).
    pub vendor_part_id: u32,
    /// Hardware revision.
    pub hw_ver: u32,
    /// Board id: the firmware's PSID (`MT_2430110027`).
    pub board_id: String,
    /// Most QPs.
    pub max_qp: u32,
    /// Most outstanding work requests per queue.
    pub max_qp_wr: u32,
    /// Most SGEs per send or receive work request.
    pub max_sge: u32,
    /// Most SGEs per RDMA READ.
    pub max_sge_rd: u32,
    /// Most CQs.
    pub max_cq: u32,
    /// Most entries per CQ.
    pub max_cqe: u32,
    /// Most memory regions.
    pub max_mr: u32,
    /// Most memory windows (they share the device's mkeys with regions, as on mlx5).
    pub max_mw: u32,
    /// Most protection domains.
    pub max_pd: u32,
    /// Most outstanding RDMA READ / atomic requests a QP serves as responder.
    pub max_qp_rd_atom: u32,
    /// Most outstanding RDMA READ / atomic requests a QP issues as requester.
    pub max_qp_init_rd_atom: u32,
    /// Most responder resources of the device.
    pub max_res_rd_atom: u32,
    /// Atomic support.
    pub atomic_cap: AtomicCap,
    /// Most SRQs.
    pub max_srq: u32,
    /// Most work requests per SRQ.
    pub max_srq_wr: u32,
    /// Most SGEs per SRQ work request.
    pub max_srq_sge: u32,
    /// Most address handles.
    pub max_ah: u32,
    /// P_Key table length.
    pub max_pkeys: u16,
    /// Local CA ACK delay.
    pub local_ca_ack_delay: u8,
    /// Physical ports (1).
    pub phys_port_cnt: u8,
}

/// Port state (`enum ibv_port_state`).
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> {
/// # let ctx = Context::open("emu0")?;
/// let state = ctx.query_port(1)?.state;
/// assert_eq!((state, state.to_string()), (PortState::Active, "PORT_ACTIVE (4)".into()));
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PortState {
    /// IBV_PORT_DOWN (1).
    Down = 1,
    /// IBV_PORT_INIT (2).
    Init = 2,
    /// IBV_PORT_ARMED (3).
    Armed = 3,
    /// IBV_PORT_ACTIVE (4).
    Active = 4,
}

impl fmt::Display for PortState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            PortState::Down => "PORT_DOWN",
            PortState::Init => "PORT_INIT",
            PortState::Armed => "PORT_ARMED",
            PortState::Active => "PORT_ACTIVE",
        };
        write!(f, "{s} ({})", *self as u32)
    }
}

/// Link layer (`IBV_LINK_LAYER_*`).
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> {
/// # let ctx = Context::open("emu0")?;
/// assert_eq!(ctx.query_port(1)?.link_layer.to_string(), "Ethernet");
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkLayer {
    /// InfiniBand.
    InfiniBand,
    /// Ethernet (RoCE): every port of these devices.
    Ethernet,
}

impl fmt::Display for LinkLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LinkLayer::InfiniBand => "InfiniBand",
            LinkLayer::Ethernet => "Ethernet",
        })
    }
}

/// What `ibv_query_port` answers (`struct ibv_port_attr`).
///
/// `active_mtu` is what mlx5 and rxe report: the largest IB MTU the port's Ethernet MTU
/// carries ([`crate::Mtu::for_ethernet`]). An emulated device on the UDP link (`emu:<IPv4>`)
/// has the Ethernet MTU of the host interface that holds its address, as rxe has its
/// netdev's: on a 1500-byte interface (a TAP toward a guest's rxe) active MTU 1024, what rxe
/// there has, so they interoperate out of the box; on `lo` (`127.0.0.0/8`, 65536) 4096.
/// `emu0` and `emu1` are joined by an in-process link modelled as a jumbo-frame wire (9000:
/// active MTU 4096). `max_mtu` is 4096.
///
/// ```
/// # use rnic_verbs::*; fn main() -> Result<(), Error> {
/// # let ctx = Context::open("emu0")?;
/// let p: PortAttr = ctx.query_port(1)?;
/// assert_eq!((p.max_mtu, p.active_mtu), (Mtu::Mtu4096, Mtu::Mtu4096));
/// assert_eq!((p.lid, p.link_layer), (0, LinkLayer::Ethernet)); // RoCE: no LIDs
/// assert!(p.gid_tbl_len >= ctx.gid_table().len() as u32);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortAttr {
    /// Port state.
    pub state: PortState,
    /// Largest path MTU.
    pub max_mtu: crate::Mtu,
    /// Path MTU the port's link carries.
    pub active_mtu: crate::Mtu,
    /// GID table length.
    pub gid_tbl_len: u32,
    /// Largest message.
    pub max_msg_sz: u32,
    /// P_Key table length.
    pub pkey_tbl_len: u16,
    /// LID (0 on Ethernet).
    pub lid: u16,
    /// SM LID (0 on Ethernet).
    pub sm_lid: u16,
    /// LMC (0).
    pub lmc: u8,
    /// Link layer.
    pub link_layer: LinkLayer,
    /// Physical state (5 = LINK_UP).
    pub phys_state: u8,
    /// Active width (`IBV_WIDTH_4X` = 2).
    pub active_width: u8,
    /// Active speed (`IBV_SPEED_EDR` = 32: 25 Gb/s per lane).
    pub active_speed: u8,
    /// The port's MAC address.
    pub mac: [u8; 6],
}

/// Options for emulated devices, applied when an open creates the device (the `rnic` tools'
/// `--emu-faults` and `--pcap` flags).
///
/// ```
/// use rnic_verbs::EmuOptions;
///
/// let o = EmuOptions::default().with_fault_spec("loss=0.05,dup=0.01,seed=7").unwrap();
/// assert_eq!(o.faults.unwrap().seed, 7);
/// assert!(EmuOptions::default().with_fault_spec("loss=2").is_err());
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EmuOptions {
    /// Faults injected on what the device transmits (seeded, reproducible): loss,
    /// duplication, reordering, corruption, delay.
    pub faults: Option<FaultConfig>,
    /// Write the device's wire traffic (both directions) to this pcap file.
    pub pcap: Option<PathBuf>,
}

impl EmuOptions {
    /// Whether every option is at its default.
    ///
    /// ```
    /// use rnic_verbs::EmuOptions;
    ///
    /// assert!(EmuOptions::default().is_default());
    /// assert!(!EmuOptions { pcap: Some("x.pcap".into()), ..EmuOptions::default() }.is_default());
    /// ```
    pub fn is_default(&self) -> bool {
        *self == EmuOptions::default()
    }

    /// Sets `faults` from a spec such as `loss=0.05,dup=0.01,reorder=0.01,corrupt=0.001,seed=7`
    /// (keys: loss, dup, reorder, corrupt, window, delay, seed).
    ///
    /// ```
    /// use rnic_verbs::EmuOptions;
    ///
    /// # fn main() -> Result<(), rnic_verbs::Error> {
    /// let o = EmuOptions::default().with_fault_spec("reorder=0.01,seed=3")?;
    /// assert_eq!(o.faults.map(|f| f.seed), Some(3));
    /// assert!(EmuOptions::default().with_fault_spec("jitter=1").is_err()); // unknown key
    /// # Ok(()) }
    /// ```
    pub fn with_fault_spec(mut self, spec: &str) -> Result<EmuOptions> {
        let cfg: FaultConfig = spec
            .parse()
            .map_err(|e: rnic_emulator::link::FaultSpecError| {
                Error::invalid("ibv_open_device", format!("--emu-faults {spec:?}: {e}"))
            })?;
        self.faults = Some(cfg);
        Ok(self)
    }
}

/// How to open a device ([`crate::Context::open_with`]).
///
/// ```
/// use rnic_verbs::{Context, OpenOptions};
///
/// # fn main() -> Result<(), rnic_verbs::Error> {
/// // An emulated device's address is in its name: asking for another one is refused.
/// let opts = OpenOptions { ipv4: Some([10, 0, 0, 1].into()), ..OpenOptions::default() };
/// assert!(Context::open_with("emu1", &opts).is_err());
/// assert!(Context::open_with("emu1", &OpenOptions::default())?.is_emulated());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpenOptions {
    /// Emulated devices: fault injection and capture.
    pub emu: EmuOptions,
    /// Real devices: the IPv4 address of GID 1 (the kernel takes it from the netdev; a
    /// VFIO-driven function has none). Emulated devices use the address of their name.
    pub ipv4: Option<Ipv4Addr>,
    /// Emulated pair and `emu:<IPv4>` devices: resolve peers' MACs with rnic's own agent
    /// (ARP / neighbour discovery over raw Ethernet queues, answering for the port too),
    /// as `emu-tap:` devices and VFIO functions always do, instead of taking the MAC an
    /// emulated device on the peer's address has.
    pub neighbor_agent: bool,
}

/// What [`devices`] lists.
///
/// ```
/// use rnic_verbs::{DeviceKind, devices};
///
/// let emu0 = devices().into_iter().find(|d| d.name == "emu0").expect("always listed");
/// assert!(matches!(emu0.kind, DeviceKind::Emulated { .. }));
/// assert!(emu0.node_guid.is_some()); // known without opening it
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The name to open it by.
    pub name: String,
    /// Real or emulated.
    pub kind: DeviceKind,
    /// Node GUID, when known without opening the device.
    pub node_guid: Option<u64>,
}

/// Whether a device is a real ConnectX or an emulated one.
///
/// ```
/// use rnic_verbs::{DeviceKind, devices};
///
/// for d in devices() {
///     match d.kind {
///         DeviceKind::Vfio { .. } => assert!(d.name.starts_with("mlx5_")),
///         DeviceKind::Emulated { .. } => assert!(d.name.starts_with("emu")),
///     }
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    /// A ConnectX function bound to vfio-pci.
    Vfio {
        /// Its PCI address.
        pci_address: String,
        /// Its model (`ConnectX-5`, ...).
        model: &'static str,
    },
    /// An emulated ConnectX.
    Emulated {
        /// Its IPv4 address.
        ip: Ipv4Addr,
    },
}

/// Lists the devices (`ibv_get_device_list`): the ConnectX functions bound to vfio-pci as
/// `mlx5_N`, then the emulated pair `emu0` / `emu1`, then the `emu:<IPv4>` devices open in
/// this process. Emulated devices on other addresses exist as soon as they are opened.
///
/// ```
/// let names: Vec<String> = rnic_verbs::devices().into_iter().map(|d| d.name).collect();
/// assert!(names.contains(&"emu0".to_string()) && names.contains(&"emu1".to_string()));
/// ```
pub fn devices() -> Vec<DeviceInfo> {
    devices_in(Path::new(discovery::SYSFS_PCI_DEVICES))
}

/// [`devices`] with PCI functions read from `sysfs_pci_devices` (tests use a fake tree).
///
/// ```
/// use rnic_verbs::devices_in;
///
/// // An empty sysfs tree: no PCI functions, only the emulated devices.
/// let dir = std::env::temp_dir().join(format!("rnic-doc-sysfs-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let list = devices_in(&dir);
/// assert!(list.iter().all(|d| !d.name.starts_with("mlx5_")));
/// assert_eq!(list[0].name, "emu0");
/// std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn devices_in(sysfs_pci_devices: &Path) -> Vec<DeviceInfo> {
    let mut out: Vec<DeviceInfo> = discovery::connectx_vfio_functions(sysfs_pci_devices)
        .into_iter()
        .enumerate()
        .map(|(i, f)| DeviceInfo {
            name: format!("mlx5_{i}"),
            kind: DeviceKind::Vfio {
                model: f.connectx_model().unwrap_or("ConnectX"),
                pci_address: f.address,
            },
            node_guid: None,
        })
        .collect();
    let emu = |name: String, ip: Ipv4Addr| DeviceInfo {
        name,
        kind: DeviceKind::Emulated { ip },
        node_guid: Some(node_guid_from_mac(emulated_mac(ip))),
    };
    out.push(emu("emu0".into(), EMU0_IP));
    out.push(emu("emu1".into(), EMU1_IP));
    for name in crate::registry::open_emulated_by_address() {
        if let Some(ip) = name
            .parse::<DeviceName>()
            .ok()
            .and_then(|n| n.emulated_ip())
        {
            out.push(emu(name, ip));
        }
    }
    out
}

/// The PCI address of a vfio device name.
pub(crate) fn resolve_pci(name: &DeviceName, root: &Path) -> Result<String> {
    let funcs = discovery::connectx_vfio_functions(root);
    match name {
        DeviceName::Mlx5Index(i) => {
            funcs
                .get(*i)
                .map(|f| f.address.clone())
                .ok_or_else(|| Error::NoSuchDevice {
                    name: name.to_string(),
                    why: format!(
                        "{} ConnectX function(s) bound to vfio-pci under {}",
                        funcs.len(),
                        root.display()
                    ),
                })
        }
        DeviceName::Pci(a) => {
            if funcs.iter().any(|f| f.address == *a) {
                Ok(a.clone())
            } else {
                Err(Error::NoSuchDevice {
                    name: a.clone(),
                    why: "no ConnectX function bound to vfio-pci at this address".into(),
                })
            }
        }
        _ => Err(Error::invalid("ibv_open_device", "not a PCI device name")),
    }
}
