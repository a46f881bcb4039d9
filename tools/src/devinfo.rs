//! `rnic devices` and `rnic devinfo`: the text of rdma-core's `ibv_devices` and `ibv_devinfo`
//! (`libibverbs/examples/device_list.c`, `devinfo.c`), from plain attribute records so the
//! formatting is tested apart from any device.

use std::fmt::Write as _;
use std::net::Ipv6Addr;

/// One device as `ibv_devices` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceEntry {
    /// Name (`mlx5_0`, `emu:10.11.0.1`, ...).
    pub name: String,
    /// Node GUID in host order.
    pub node_guid: u64,
}

/// A GID table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GidEntry {
    /// Index in the port's table.
    pub index: u32,
    /// The GID in wire order.
    pub gid: [u8; 16],
    /// True for a RoCE v2 GID, false for RoCE v1 (IB/RoCE v1 header).
    pub roce_v2: bool,
}

/// The port attributes `ibv_devinfo` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortAttrs {
    /// Port number (1-based).
    pub port: u8,
    /// `ibv_port_state` (4 = PORT_ACTIVE).
    pub state: u8,
    /// `ibv_mtu` enum (1 = 256 ... 5 = 4096).
    pub max_mtu: u8,
    /// `ibv_mtu` enum.
    pub active_mtu: u8,
    /// SM LID (0 on RoCE).
    pub sm_lid: u16,
    /// Port LID (0 on RoCE).
    pub lid: u16,
    /// LMC.
    pub lmc: u8,
    /// True for Ethernet (RoCE), false for InfiniBand.
    pub ethernet: bool,
    /// Largest message.
    pub max_msg_sz: u32,
    /// Port capability flags.
    pub port_cap_flags: u32,
    /// Port capability flags 2.
    pub port_cap_flags2: u16,
    /// Virtual lanes (`ibv_devinfo` prints the enum: 1 = 1 VL).
    pub max_vl_num: u8,
    /// P_Key table length.
    pub pkey_tbl_len: u16,
    /// GID table length.
    pub gid_tbl_len: u32,
    /// Active width enum (1 = 1X, 2 = 4X, ...).
    pub active_width: u8,
    /// Active speed enum (1 = 2.5 Gbps, ... 32 = 25.0 Gbps, 64 = 50.0 Gbps).
    pub active_speed: u8,
    /// The GID table (only non-null entries are printed).
    pub gids: Vec<GidEntry>,
}

/// The device attributes `ibv_devinfo` prints (`-v` adds the limits).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceAttrs {
    /// Device name.
    pub name: String,
    /// Firmware version, `major.minor.subminor`.
    pub fw_ver: String,
    /// Node GUID (host order).
    pub node_guid: u64,
    /// System image GUID (host order).
    pub sys_image_guid: u64,
    /// PCI vendor id.
    pub vendor_id: u32,
    /// PCI device id.
    pub vendor_part_id: u32,
    /// Hardware revision.
    pub hw_ver: u32,
    /// Board id (PSID), empty when unknown.
    pub board_id: String,
    /// Limits printed by `-v`, as `(name, value)` in devinfo's order and format.
    pub limits: Limits,
    /// Ports.
    pub ports: Vec<PortAttrs>,
}

/// The `ibv_device_attr` limits printed by `-v`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[allow(missing_docs)]
pub struct Limits {
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub max_qp: u32,
    pub max_qp_wr: u32,
    pub device_cap_flags: u32,
    pub max_sge: u32,
    pub max_sge_rd: u32,
    pub max_cq: u32,
    pub max_cqe: u32,
    pub max_mr: u32,
    pub max_mw: u32,
    pub max_pd: u32,
    pub max_qp_rd_atom: u32,
    pub max_res_rd_atom: u32,
    pub max_qp_init_rd_atom: u32,
    /// 0 = ATOMIC_NONE, 1 = ATOMIC_HCA, 2 = ATOMIC_GLOB.
    pub atomic_cap: u8,
    pub max_mcast_grp: u32,
    pub max_mcast_qp_attach: u32,
    pub max_total_mcast_qp_attach: u32,
    pub max_ah: u32,
    pub max_srq: u32,
    pub max_srq_wr: u32,
    pub max_srq_sge: u32,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub num_comp_vectors: u32,
}

/// `ibv_devices`' table.
pub fn format_devices(devs: &[DeviceEntry]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "    {:<16}\t   node GUID", "device");
    let _ = writeln!(s, "    {:<16}\t----------------", "------");
    for d in devs {
        let _ = writeln!(s, "    {:<16}\t{:016x}", d.name, d.node_guid);
    }
    s
}

/// `ibv_devinfo -l`.
pub fn format_list(names: &[String]) -> String {
    let mut s = format!(
        "{} HCA{} found:\n",
        names.len(),
        if names.len() != 1 { "s" } else { "" }
    );
    for n in names {
        let _ = writeln!(s, "\t{n}");
    }
    s.push('\n');
    s
}

/// `node_guid` as devinfo prints it: four groups of 4 hex digits.
pub fn guid_str(g: u64) -> String {
    format!(
        "{:04x}:{:04x}:{:04x}:{:04x}",
        (g >> 48) & 0xffff,
        (g >> 32) & 0xffff,
        (g >> 16) & 0xffff,
        g & 0xffff
    )
}

/// A GID as glibc's `inet_ntop(AF_INET6)` prints it (which rdma-core's tools use).
pub fn gid_ntop(gid: &[u8; 16]) -> String {
    let a = Ipv6Addr::from(*gid);
    // glibc prints IPv4-compatible addresses (::a.b.c.d) in dotted form, Rust does not.
    if gid[..12].iter().all(|&b| b == 0) && (gid[12] != 0 || gid[13] != 0) {
        return format!("::{}.{}.{}.{}", gid[12], gid[13], gid[14], gid[15]);
    }
    a.to_string()
}

fn mtu_str(m: u8) -> &'static str {
    match m {
        1 => "256",
        2 => "512",
        3 => "1024",
        4 => "2048",
        5 => "4096",
        _ => "invalid MTU",
    }
}

fn port_state_str(s: u8) -> &'static str {
    match s {
        0 => "PORT_NOP",
        1 => "PORT_DOWN",
        2 => "PORT_INIT",
        3 => "PORT_ARMED",
        4 => "PORT_ACTIVE",
        5 => "PORT_ACTIVE_DEFER",
        _ => "invalid state",
    }
}

fn atomic_str(a: u8) -> &'static str {
    match a {
        0 => "ATOMIC_NONE",
        1 => "ATOMIC_HCA",
        2 => "ATOMIC_GLOB",
        _ => "invalid atomic capability",
    }
}

fn width_str(w: u8) -> &'static str {
    match w {
        1 => "1",
        2 => "4",
        4 => "8",
        8 => "12",
        16 => "2",
        _ => "invalid width",
    }
}

fn speed_str(s: u8) -> &'static str {
    match s {
        1 => "2.5 Gbps",
        2 => "5.0 Gbps",
        4 | 8 => "10.0 Gbps",
        16 => "14.0 Gbps",
        32 => "25.0 Gbps",
        64 => "50.0 Gbps",
        128 => "100.0 Gbps",
        _ => "invalid speed",
    }
}

fn vl_str(v: u8) -> &'static str {
    match v {
        1 => "1",
        2 => "2",
        3 => "4",
        4 => "8",
        5 => "15",
        _ => "invalid value",
    }
}

/// `ibv_devinfo [-i port] [-v]` for one device.
pub fn format_devinfo(d: &DeviceAttrs, only_port: Option<u8>, verbose: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "hca_id:\t{}", d.name);
    let _ = writeln!(s, "\ttransport:\t\t\tInfiniBand (0)");
    if !d.fw_ver.is_empty() {
        let _ = writeln!(s, "\tfw_ver:\t\t\t\t{}", d.fw_ver);
    }
    let _ = writeln!(s, "\tnode_guid:\t\t\t{}", guid_str(d.node_guid));
    let _ = writeln!(s, "\tsys_image_guid:\t\t\t{}", guid_str(d.sys_image_guid));
    let _ = writeln!(s, "\tvendor_id:\t\t\t0x{:04x}", d.vendor_id);
    let _ = writeln!(s, "\tvendor_part_id:\t\t\t{}", d.vendor_part_id);
    let _ = writeln!(s, "\thw_ver:\t\t\t\t0x{:X}", d.hw_ver);
    if !d.board_id.is_empty() {
        let _ = writeln!(s, "\tboard_id:\t\t\t{}", d.board_id);
    }
    let _ = writeln!(s, "\tphys_port_cnt:\t\t\t{}", d.ports.len());
    if verbose {
        let l = &d.limits;
        let _ = writeln!(s, "\tmax_mr_size:\t\t\t0x{:x}", l.max_mr_size);
        let _ = writeln!(s, "\tpage_size_cap:\t\t\t0x{:x}", l.page_size_cap);
        let _ = writeln!(s, "\tmax_qp:\t\t\t\t{}", l.max_qp);
        let _ = writeln!(s, "\tmax_qp_wr:\t\t\t{}", l.max_qp_wr);
        let _ = writeln!(s, "\tdevice_cap_flags:\t\t0x{:08x}", l.device_cap_flags);
        let _ = writeln!(s, "\tmax_sge:\t\t\t{}", l.max_sge);
        let _ = writeln!(s, "\tmax_sge_rd:\t\t\t{}", l.max_sge_rd);
        let _ = writeln!(s, "\tmax_cq:\t\t\t\t{}", l.max_cq);
        let _ = writeln!(s, "\tmax_cqe:\t\t\t{}", l.max_cqe);
        let _ = writeln!(s, "\tmax_mr:\t\t\t\t{}", l.max_mr);
        let _ = writeln!(s, "\tmax_pd:\t\t\t\t{}", l.max_pd);
        let _ = writeln!(s, "\tmax_qp_rd_atom:\t\t\t{}", l.max_qp_rd_atom);
        let _ = writeln!(s, "\tmax_ee_rd_atom:\t\t\t0");
        let _ = writeln!(s, "\tmax_res_rd_atom:\t\t{}", l.max_res_rd_atom);
        let _ = writeln!(s, "\tmax_qp_init_rd_atom:\t\t{}", l.max_qp_init_rd_atom);
        let _ = writeln!(s, "\tmax_ee_init_rd_atom:\t\t0");
        let _ = writeln!(
            s,
            "\tatomic_cap:\t\t\t{} ({})",
            atomic_str(l.atomic_cap),
            l.atomic_cap
        );
        let _ = writeln!(s, "\tmax_ee:\t\t\t\t0");
        let _ = writeln!(s, "\tmax_rdd:\t\t\t0");
        let _ = writeln!(s, "\tmax_mw:\t\t\t\t{}", l.max_mw);
        let _ = writeln!(s, "\tmax_raw_ipv6_qp:\t\t0");
        let _ = writeln!(s, "\tmax_raw_ethy_qp:\t\t0");
        let _ = writeln!(s, "\tmax_mcast_grp:\t\t\t{}", l.max_mcast_grp);
        let _ = writeln!(s, "\tmax_mcast_qp_attach:\t\t{}", l.max_mcast_qp_attach);
        let _ = writeln!(
            s,
            "\tmax_total_mcast_qp_attach:\t{}",
            l.max_total_mcast_qp_attach
        );
        let _ = writeln!(s, "\tmax_ah:\t\t\t\t{}", l.max_ah);
        let _ = writeln!(s, "\tmax_fmr:\t\t\t0");
        let _ = writeln!(s, "\tmax_srq:\t\t\t{}", l.max_srq);
        if l.max_srq != 0 {
            let _ = writeln!(s, "\tmax_srq_wr:\t\t\t{}", l.max_srq_wr);
            let _ = writeln!(s, "\tmax_srq_sge:\t\t\t{}", l.max_srq_sge);
        }
        let _ = writeln!(s, "\tmax_pkeys:\t\t\t{}", l.max_pkeys);
        let _ = writeln!(s, "\tlocal_ca_ack_delay:\t\t{}", l.local_ca_ack_delay);
        let _ = writeln!(s, "\tnum_comp_vectors:\t\t{}", l.num_comp_vectors);
    }
    for p in &d.ports {
        if only_port.is_some_and(|o| o != p.port) {
            continue;
        }
        let _ = writeln!(s, "\t\tport:\t{}", p.port);
        let _ = writeln!(
            s,
            "\t\t\tstate:\t\t\t{} ({})",
            port_state_str(p.state),
            p.state
        );
        let _ = writeln!(
            s,
            "\t\t\tmax_mtu:\t\t{} ({})",
            mtu_str(p.max_mtu),
            p.max_mtu
        );
        let _ = writeln!(
            s,
            "\t\t\tactive_mtu:\t\t{} ({})",
            mtu_str(p.active_mtu),
            p.active_mtu
        );
        let _ = writeln!(s, "\t\t\tsm_lid:\t\t\t{}", p.sm_lid);
        let _ = writeln!(s, "\t\t\tport_lid:\t\t{}", p.lid);
        let _ = writeln!(s, "\t\t\tport_lmc:\t\t0x{:02x}", p.lmc);
        let _ = writeln!(
            s,
            "\t\t\tlink_layer:\t\t{}",
            if p.ethernet { "Ethernet" } else { "InfiniBand" }
        );
        if verbose {
            let _ = writeln!(s, "\t\t\tmax_msg_sz:\t\t0x{:x}", p.max_msg_sz);
            let _ = writeln!(s, "\t\t\tport_cap_flags:\t\t0x{:08x}", p.port_cap_flags);
            let _ = writeln!(s, "\t\t\tport_cap_flags2:\t0x{:04x}", p.port_cap_flags2);
            let _ = writeln!(
                s,
                "\t\t\tmax_vl_num:\t\t{} ({})",
                vl_str(p.max_vl_num),
                p.max_vl_num
            );
            let _ = writeln!(s, "\t\t\tbad_pkey_cntr:\t\t0x0");
            let _ = writeln!(s, "\t\t\tqkey_viol_cntr:\t\t0x0");
            let _ = writeln!(s, "\t\t\tsm_sl:\t\t\t0");
            let _ = writeln!(s, "\t\t\tpkey_tbl_len:\t\t{}", p.pkey_tbl_len);
            let _ = writeln!(s, "\t\t\tgid_tbl_len:\t\t{}", p.gid_tbl_len);
            let _ = writeln!(s, "\t\t\tsubnet_timeout:\t\t0");
            let _ = writeln!(s, "\t\t\tinit_type_reply:\t0");
            let _ = writeln!(
                s,
                "\t\t\tactive_width:\t\t{}X ({})",
                width_str(p.active_width),
                p.active_width
            );
            let _ = writeln!(
                s,
                "\t\t\tactive_speed:\t\t{} ({})",
                speed_str(p.active_speed),
                p.active_speed
            );
            for g in &p.gids {
                if g.gid[8..].iter().all(|&b| b == 0) {
                    continue; // devinfo's null_gid()
                }
                let kind = if p.ethernet {
                    if g.roce_v2 { ", RoCE v2" } else { ", RoCE v1" }
                } else {
                    ""
                };
                if g.roce_v2 {
                    let _ = writeln!(s, "\t\t\tGID[{:3}]:\t\t{}{kind}", g.index, gid_ntop(&g.gid));
                } else {
                    let h: Vec<String> = g
                        .gid
                        .chunks(2)
                        .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
                        .collect();
                    let _ = writeln!(s, "\t\t\tGID[{:3}]:\t\t{}{kind}", g.index, h.join(":"));
                }
            }
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev() -> DeviceAttrs {
        let mut v4 = [0u8; 16];
        v4[10] = 0xff;
        v4[11] = 0xff;
        v4[12..].copy_from_slice(&[10, 11, 0, 1]);
        let mut ll = [0u8; 16];
        ll[0] = 0xfe;
        ll[1] = 0x80;
        ll[8..].copy_from_slice(&[0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55]);
        DeviceAttrs {
            name: "emu:10.11.0.1".into(),
            fw_ver: "12.28.2006".into(),
            node_guid: 0x0211_22ff_fe33_4455,
            sys_image_guid: 0x0211_22ff_fe33_4455,
            vendor_id: 0x02c9,
            vendor_part_id: 4115,
            hw_ver: 0,
            board_id: String::new(),
            limits: Limits {
                atomic_cap: 1,
                ..Limits::default()
            },
            ports: vec![PortAttrs {
                port: 1,
                state: 4,
                max_mtu: 5,
                active_mtu: 3,
                sm_lid: 0,
                lid: 0,
                lmc: 0,
                ethernet: true,
                max_msg_sz: 0x4000_0000,
                port_cap_flags: 0x0403_0000,
                port_cap_flags2: 0,
                max_vl_num: 1,
                pkey_tbl_len: 1,
                gid_tbl_len: 256,
                active_width: 2,
                active_speed: 32,
                gids: vec![
                    GidEntry {
                        index: 0,
                        gid: ll,
                        roce_v2: true,
                    },
                    GidEntry {
                        index: 1,
                        gid: v4,
                        roce_v2: true,
                    },
                    GidEntry {
                        index: 2,
                        gid: [0; 16],
                        roce_v2: true,
                    },
                ],
            }],
        }
    }

    #[test]
    fn devices_table() {
        let t = format_devices(&[DeviceEntry {
            name: "mlx5_0".into(),
            node_guid: 0x248a_0703_00a1_b2c3,
        }]);
        assert_eq!(
            t,
            "    device          \t   node GUID\n    ------          \t----------------\n    mlx5_0          \t248a070300a1b2c3\n"
        );
    }

    #[test]
    fn list() {
        assert_eq!(format_list(&["a".into()]), "1 HCA found:\n\ta\n\n");
        assert_eq!(
            format_list(&["a".into(), "b".into()]),
            "2 HCAs found:\n\ta\n\tb\n\n"
        );
    }

    #[test]
    fn devinfo_text() {
        let t = format_devinfo(&dev(), None, false);
        let want = "hca_id:\temu:10.11.0.1\n\
                    \ttransport:\t\t\tInfiniBand (0)\n\
                    \tfw_ver:\t\t\t\t12.28.2006\n\
                    \tnode_guid:\t\t\t0211:22ff:fe33:4455\n\
                    \tsys_image_guid:\t\t\t0211:22ff:fe33:4455\n\
                    \tvendor_id:\t\t\t0x02c9\n\
                    \tvendor_part_id:\t\t\t4115\n\
                    \thw_ver:\t\t\t\t0x0\n\
                    \tphys_port_cnt:\t\t\t1\n\
                    \t\tport:\t1\n\
                    \t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\
                    \t\t\tmax_mtu:\t\t4096 (5)\n\
                    \t\t\tactive_mtu:\t\t1024 (3)\n\
                    \t\t\tsm_lid:\t\t\t0\n\
                    \t\t\tport_lid:\t\t0\n\
                    \t\t\tport_lmc:\t\t0x00\n\
                    \t\t\tlink_layer:\t\tEthernet\n\n";
        assert_eq!(t, want);
    }

    #[test]
    fn devinfo_verbose_gids() {
        let t = format_devinfo(&dev(), Some(1), true);
        assert!(t.contains("\tatomic_cap:\t\t\tATOMIC_HCA (1)\n"), "{t}");
        assert!(t.contains("\t\t\tGID[  0]:\t\tfe80::211:22ff:fe33:4455, RoCE v2\n"));
        assert!(t.contains("\t\t\tGID[  1]:\t\t::ffff:10.11.0.1, RoCE v2\n"));
        assert!(!t.contains("GID[  2]"));
        assert!(t.contains("\t\t\tactive_speed:\t\t25.0 Gbps (32)\n"));
        assert_eq!(
            format_devinfo(&dev(), Some(2), false)
                .matches("\t\tport:\t")
                .count(),
            0
        );
    }

    #[test]
    fn ntop_like_glibc() {
        assert_eq!(gid_ntop(&[0; 16]), "::");
        let mut g = [0u8; 16];
        g[12..].copy_from_slice(&[10, 0, 0, 1]);
        assert_eq!(gid_ntop(&g), "::10.0.0.1");
        g[15] = 1;
        g[12] = 0;
        g[13] = 0;
        g[14] = 0;
        assert_eq!(gid_ntop(&g), "::1");
    }
}
