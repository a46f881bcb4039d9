//! RoCE v2 facts that both sides of the Bus compute: the UDP destination port, and the flow
//! label and UDP source port of a QP pair, as Linux derives them (`rdma_calc_flow_label`,
//! `rdma_flow_label_to_udp_sport`, `rdma_get_udp_sport` in `include/rdma/ib_verbs.h`).
//!
//! The driver writes the source port into a UD address vector or a QP's address path; the
//! emulator stamps it on the frames it builds. One definition keeps the two equal, which
//! rxe's captures check.
//!
//! ```
//! use rnic_hw_regs::roce::{rdma_flow_label_to_udp_sport, rdma_get_udp_sport};
//!
//! assert_eq!(rdma_flow_label_to_udp_sport(0), 0xC000);
//! assert_eq!(rdma_get_udp_sport(0x12345, 1, 2), rdma_flow_label_to_udp_sport(0x12345));
//! assert!(rdma_get_udp_sport(0, 0x11, 0x12) >= 0xC000);
//! ```

/// The IANA UDP destination port of RoCE v2.
///
/// ```
/// assert_eq!(rnic_hw_regs::roce::ROCE_V2_PORT, 4791);
/// ```
pub const ROCE_V2_PORT: u16 = 4791;

/// The QP number of the General Services Interface (IBTA Vol. 1, 3.9.1): every port's
/// management datagrams (the CM's among them) go to and come from QP 1.
///
/// ```
/// assert_eq!(rnic_hw_regs::roce::GSI_QPN, 1);
/// ```
pub const GSI_QPN: u32 = 1;

/// The Q_Key of QP1 (IBTA Vol. 1, 13.4.5.3, the well-known GSI Q_Key): datagrams to QP 1
/// carry it, and QP1 drops the ones that do not.
///
/// ```
/// assert_eq!(rnic_hw_regs::roce::GSI_QKEY, 0x8001_0000);
/// ```
pub const GSI_QKEY: u32 = 0x8001_0000;

/// The bytes a UD receive buffer holds in front of the payload: the 40-byte Global Route
/// Header area (`sizeof(struct ibv_grh)`), which the device fills for every UD message.
///
/// ```
/// assert_eq!(rnic_hw_regs::roce::GRH_LEN, 40);
/// ```
pub const GRH_LEN: usize = 40;

/// The lowest source port the kernel's folding produces (the top two bits are set, so flow
/// source ports stay out of the well-known and registered ranges).
///
/// ```
/// use rnic_hw_regs::roce::{UDP_SPORT_BASE, rdma_flow_label_to_udp_sport};
/// assert_eq!(rdma_flow_label_to_udp_sport(0), UDP_SPORT_BASE);
/// ```
pub const UDP_SPORT_BASE: u16 = 0xC000;

/// The flow label the kernel derives from a QP pair when the address vector's is 0:
/// `FL = lqpn * rqpn` (64-bit), `FL ^= FL >> 20`, `FL ^= FL >> 40`, low 20 bits.
///
/// ```
/// use rnic_hw_regs::roce::rdma_calc_flow_label;
///
/// assert_eq!(rdma_calc_flow_label(0x11, 0x12), 0x11 * 0x12); // small products pass through
/// assert_eq!(rdma_calc_flow_label(7, 0), 0);
/// assert!(rdma_calc_flow_label(0xFF_FFFF, 0xFF_FFFE) < 1 << 20);
/// ```
pub const fn rdma_calc_flow_label(lqpn: u32, rqpn: u32) -> u32 {
    let mut fl = lqpn as u64 * rqpn as u64;
    fl ^= fl >> 20;
    fl ^= fl >> 40;
    (fl & 0xF_FFFF) as u32
}

/// The kernel's folding of a 20-bit flow label into a source port:
/// `0xC000 | ((FL & 0x3FFF) ^ ((FL & 0xFC000) >> 14))`.
///
/// ```
/// use rnic_hw_regs::roce::rdma_flow_label_to_udp_sport;
///
/// assert_eq!(rdma_flow_label_to_udp_sport(0x12345), 0xE341);
/// assert_eq!(rdma_flow_label_to_udp_sport(0x4001), 0xC000); // low 14 bits ^ high 6 bits
/// assert_eq!(rdma_flow_label_to_udp_sport(0x3FFF), 0xFFFF);
/// ```
pub const fn rdma_flow_label_to_udp_sport(flow_label: u32) -> u16 {
    let low = flow_label & 0x3FFF;
    let high = (flow_label & 0xF_C000) >> 14;
    UDP_SPORT_BASE | ((low ^ high) as u16)
}

/// The source port of a connected QP (`rdma_get_udp_sport`, Linux 6.x rxe and mlx5): the
/// flow label if non-zero, else [`rdma_calc_flow_label`]`(lqpn, rqpn)`, folded by
/// [`rdma_flow_label_to_udp_sport`].
///
/// ```
/// use rnic_hw_regs::roce::{rdma_calc_flow_label, rdma_flow_label_to_udp_sport, rdma_get_udp_sport};
///
/// let derived = rdma_flow_label_to_udp_sport(rdma_calc_flow_label(0x11, 0x12));
/// assert_eq!(rdma_get_udp_sport(0, 0x11, 0x12), derived); // no flow label: from the QPNs
/// assert_eq!(rdma_get_udp_sport(0x12345, 0x11, 0x12), 0xE341); // the flow label wins
/// ```
pub const fn rdma_get_udp_sport(flow_label: u32, lqpn: u32, rqpn: u32) -> u16 {
    let fl = if flow_label == 0 {
        rdma_calc_flow_label(lqpn, rqpn)
    } else {
        flow_label
    };
    rdma_flow_label_to_udp_sport(fl)
}

/// Bytes of an Ethernet MTU a RoCE packet's headers may take beyond its payload, the most
/// any packet has: the IP header counted as a GRH (40), UDP 8, BTH 12, XRC 4, AtomicETH 28
/// and ICRC 4, as Linux's `iboe_get_mtu` reserves for mlx5 ports (rxe reserves 80).
///
/// ```
/// assert_eq!(rnic_hw_regs::roce::ROCE_MTU_HEADROOM, 96);
/// ```
pub const ROCE_MTU_HEADROOM: u32 = 40 + 8 + 12 + 4 + 28 + 4;

/// The IB MTU code (1 = 256 .. 5 = 4096) of the largest path MTU a port with Ethernet MTU
/// `eth_mtu` carries, 0 if not even 256: what the port reports as its `active_mtu`, and the
/// payload limit of a UD datagram on it.
///
/// ```
/// use rnic_hw_regs::roce::roce_mtu_code;
///
/// assert_eq!(roce_mtu_code(1500), 3); // 1024: a standard Ethernet port
/// assert_eq!(roce_mtu_code(9000), 5); // 4096: jumbo frames
/// assert_eq!(roce_mtu_code(2048 + 96), 4);
/// assert_eq!(roce_mtu_code(2048 + 95), 3);
/// assert_eq!(roce_mtu_code(300), 0);
/// ```
pub const fn roce_mtu_code(eth_mtu: u32) -> u8 {
    let room = eth_mtu.saturating_sub(ROCE_MTU_HEADROOM);
    let mut code = 5;
    while code > 0 && (128u32 << code) > room {
        code -= 1;
    }
    code
}
