//! The one place the tools talk to the verbs API ([`rnic_verbs`]): opening devices by name
//! with the emulator options, turning verbs errors into one-line tool errors, and the device
//! attributes `devinfo` prints; and what pingpong and perf both use there (MTU enums, the
//! polling back-off, random PSNs), so neither imports the other.

use crate::device_select::DeviceName;
use crate::devinfo::{DeviceAttrs, DeviceEntry, GidEntry, Limits, PortAttrs};
use crate::error::ToolError;
use rnic_verbs as v;
use std::fmt::Write as _;
use std::path::PathBuf;

pub use rnic_verbs::{Context, WorkCompletion};

/// The 40-byte GRH area a UD receive buffer holds in front of the payload.
pub const GRH: usize = rnic_verbs::GRH_LEN;

/// Emulator options from the command line.
#[derive(Debug, Clone, Default)]
pub struct EmuOpts {
    /// `--pcap FILE`.
    pub pcap: Option<PathBuf>,
    /// `--emu-faults SPEC` (the emulator's fault specification: loss, dup, reorder, corrupt,
    /// window, delay, seed).
    pub faults: Option<String>,
}

impl EmuOpts {
    /// Builds and checks the options.
    pub fn new(pcap: Option<PathBuf>, faults: Option<String>) -> Result<EmuOpts, ToolError> {
        if let Some(f) = &faults {
            v::EmuOptions::default()
                .with_fault_spec(f)
                .map_err(|e| ToolError::BadFaults(e.to_string()))?;
        }
        Ok(EmuOpts { pcap, faults })
    }

    /// With faults injected on our link, the peer may still be retransmitting to us when our
    /// run ends (our last ACK was dropped): keep the device up for a second before closing,
    /// so the peer's last work request completes instead of exhausting its retries.
    pub fn linger(&self) {
        if self.faults.is_some() {
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
    }

    fn is_default(&self) -> bool {
        self.pcap.is_none() && self.faults.is_none()
    }
}

/// A verbs error as a tool error (its text names the verb and the reason).
pub fn verr(e: v::Error) -> ToolError {
    match e {
        v::Error::NoSuchDevice { name, why } => ToolError::NoSuchDevice(name, format!(": {why}")),
        other => ToolError::Verbs(other.to_string()),
    }
}

/// The device a command uses when no `-d` is given, and a note saying so.
pub fn default_device(role_client: bool) -> (String, String) {
    let name = if role_client {
        "emu:127.0.0.2"
    } else {
        "emu:127.0.0.1"
    };
    (
        name.to_string(),
        format!("rnic: no -d given: using the emulated device {name}"),
    )
}

/// Opens `name` (`-d`), with the emulator options for emulated devices.
pub fn open(name: &str, emu: &EmuOpts) -> Result<Context, ToolError> {
    let parsed = DeviceName::parse(name)?;
    if !parsed.is_emulated() && !emu.is_default() {
        return Err(ToolError::Usage(format!(
            "--pcap and --emu-faults apply to emulated devices, not {name}"
        )));
    }
    let mut eo = v::EmuOptions {
        faults: None,
        pcap: emu.pcap.clone(),
    };
    if let Some(f) = &emu.faults {
        eo = eo
            .with_fault_spec(f)
            .map_err(|e| ToolError::BadFaults(e.to_string()))?;
    }
    let opts = v::OpenOptions {
        emu: eo,
        ..v::OpenOptions::default()
    };
    Context::open_with(&parsed.to_string(), &opts).map_err(verr)
}

/// `--emu-counters`: the emulated device's counters after a run, laid out as `rdma
/// statistic show` prints a port's (`link <dev>/<port> <name> <value> ...`, one line), or a
/// note for a device that is not emulated.
pub fn format_emu_counters(dev: &str, ctx: &Context) -> String {
    match ctx.emulator_counters() {
        Some(c) => format_counters(dev, &c),
        None => format!("link {dev}/1: no emulator counters (not an emulated device)\n"),
    }
}

/// The text of [`format_emu_counters`] for counters `c`: device events, then the receive
/// drops per rule (`rx_drop_<rule>`), then the transport's events.
///
/// ```
/// let mut c = rnic_verbs::EmulatorCounters::default();
/// c.frames_rx = 7;
/// c.drops.ring_full = 3;
/// let t = rnic_tools::rdma::format_counters("emu:127.0.0.2", &c);
/// assert!(t.starts_with("link emu:127.0.0.2/1 commands 0 "));
/// assert!(t.contains(" frames_rx 7 ") && t.contains(" rx_drop_ring_full 3 "));
/// ```
pub fn format_counters(dev: &str, c: &rnic_verbs::EmulatorCounters) -> String {
    let (d, t) = (&c.drops, &c.transport);
    let all: &[(&str, u64)] = &[
        ("commands", c.commands),
        ("command_errors", c.command_errors),
        ("delivery_errors", c.delivery_errors),
        ("bad_doorbells", c.bad_doorbells),
        ("iommu_faults", c.iommu_faults),
        ("cq_overruns", c.cq_overruns),
        ("eq_overruns", c.eq_overruns),
        ("cqes_dropped", c.cqes_dropped),
        ("frames_tx", c.frames_tx),
        ("tx_dropped", c.tx_dropped),
        ("frames_rx", c.frames_rx),
        ("rx_dropped", c.rx_dropped),
        ("rx_drop_malformed", d.malformed),
        ("rx_drop_bad_icrc", d.bad_icrc),
        ("rx_drop_not_our_ip", d.not_our_ip),
        ("rx_drop_dest_qp_zero", d.dest_qp_zero),
        ("rx_drop_roce_disabled", d.roce_disabled),
        ("rx_drop_unknown_qp", d.unknown_qp),
        ("rx_drop_no_gsi_qp", d.no_gsi_qp),
        ("rx_drop_wrong_transport", d.wrong_transport),
        ("rx_drop_wrong_state", d.wrong_state),
        ("rx_drop_peer_mismatch", d.peer_mismatch),
        ("rx_drop_pkey", d.pkey),
        ("rx_drop_qkey", d.qkey),
        ("rx_drop_ud_no_wqe", d.ud_no_wqe),
        ("rx_drop_out_of_sequence", d.out_of_sequence),
        ("rx_drop_stale_duplicate", d.stale_duplicate),
        ("rx_drop_uc_error", d.uc_error),
        ("rx_drop_stale_response", d.stale_response),
        ("rx_drop_cnp", d.cnp),
        ("rx_drop_other", d.other),
        ("rx_drop_ring_full", d.ring_full),
        ("rx_drop_link_overflow", d.link_overflow),
        ("rx_drop_steering_no_root", d.steering_no_root),
        ("rx_drop_steering_no_match", d.steering_no_match),
        ("rx_drop_steering_drop_rule", d.steering_drop_rule),
        ("rx_drop_rq_not_ready", d.rq_not_ready),
        ("rx_drop_rq_no_wqe", d.rq_no_wqe),
        ("rx_drop_frame_too_long", d.frame_too_long),
        ("rx_drop_rq_error", d.rq_error),
        ("raw_tx", c.raw_tx),
        ("raw_rx", c.raw_rx),
        ("timeouts", t.timeouts),
        ("retransmits", t.retransmits),
        ("rnr_naks_rx", t.rnr_naks_rx),
        ("seq_naks_rx", t.seq_naks_rx),
        ("duplicates", t.duplicates),
        ("acks_tx", t.acks_tx),
        ("acks_coalesced", t.acks_coalesced),
        ("naks_tx", t.naks_tx),
        ("icrc_ip_id_solved", t.icrc_ip_id_solved),
    ];
    let mut s = format!("link {dev}/1");
    for (name, v) in all {
        let _ = write!(s, " {name} {v}");
    }
    s.push('\n');
    s
}

/// The devices `ibv_devices` would list.
pub fn list() -> Vec<DeviceEntry> {
    v::devices()
        .into_iter()
        .map(|d| {
            let node_guid = d.node_guid.unwrap_or_else(|| {
                Context::open(&d.name)
                    .map(|c| c.query_device().node_guid)
                    .unwrap_or(0)
            });
            DeviceEntry {
                name: d.name,
                node_guid,
            }
        })
        .collect()
}

/// What `ibv_devinfo` prints for an open device.
pub fn device_attrs(ctx: &Context) -> Result<DeviceAttrs, ToolError> {
    let a = ctx.query_device();
    let mut ports = Vec::new();
    for port in 1..=a.phys_port_cnt {
        let p = ctx.query_port(port).map_err(verr)?;
        let gids = ctx
            .gid_table()
            .iter()
            .filter(|g| g.port_num == port)
            .map(|g| GidEntry {
                index: g.index,
                gid: g.gid.0,
                roce_v2: g.gid_type == v::GidType::RoceV2,
            })
            .collect();
        ports.push(PortAttrs {
            port,
            state: p.state as u8,
            max_mtu: p.max_mtu as u8,
            active_mtu: p.active_mtu as u8,
            sm_lid: p.sm_lid,
            lid: p.lid,
            lmc: p.lmc,
            ethernet: p.link_layer == v::LinkLayer::Ethernet,
            max_msg_sz: p.max_msg_sz,
            port_cap_flags: 0x0401_0000,
            port_cap_flags2: 0,
            max_vl_num: 1,
            pkey_tbl_len: p.pkey_tbl_len,
            gid_tbl_len: p.gid_tbl_len,
            active_width: p.active_width,
            active_speed: p.active_speed,
            gids,
        });
    }
    Ok(DeviceAttrs {
        name: ctx.name().to_string(),
        fw_ver: a.fw_ver.clone(),
        node_guid: a.node_guid,
        sys_image_guid: a.sys_image_guid,
        vendor_id: a.vendor_id,
        vendor_part_id: a.vendor_part_id,
        hw_ver: a.hw_ver,
        board_id: a.board_id.clone(),
        limits: Limits {
            max_mr_size: a.max_mr_size,
            page_size_cap: a.page_size_cap,
            max_qp: a.max_qp,
            max_qp_wr: a.max_qp_wr,
            device_cap_flags: 0,
            max_sge: a.max_sge,
            max_sge_rd: a.max_sge_rd,
            max_cq: a.max_cq,
            max_cqe: a.max_cqe,
            max_mr: a.max_mr,
            max_mw: a.max_mw,
            max_pd: a.max_pd,
            max_qp_rd_atom: a.max_qp_rd_atom,
            max_res_rd_atom: a.max_res_rd_atom,
            max_qp_init_rd_atom: a.max_qp_init_rd_atom,
            atomic_cap: a.atomic_cap as u8,
            max_mcast_grp: 0,
            max_mcast_qp_attach: 0,
            max_total_mcast_qp_attach: 0,
            max_ah: a.max_ah,
            max_srq: a.max_srq,
            max_srq_wr: a.max_srq_wr,
            max_srq_sge: a.max_srq_sge,
            max_pkeys: a.max_pkeys,
            local_ca_ack_delay: a.local_ca_ack_delay,
            num_comp_vectors: 1,
        },
        ports,
    })
}

/// The GID at `index` (wire order).
pub fn gid(ctx: &Context, index: u32) -> Result<[u8; 16], ToolError> {
    ctx.query_gid(1, index).map(|g| g.0).map_err(verr)
}

/// The GID index to use: `-g`/`-x` if given, else the IPv4 RoCE v2 GID, else 0.
pub fn pick_gid_index(ctx: &Context, requested: Option<u32>) -> Result<u32, ToolError> {
    let idx = requested.or_else(|| ctx.ipv4_gid_index()).unwrap_or(0);
    gid(ctx, idx)?;
    Ok(idx)
}

/// The port's active MTU enum.
pub fn active_mtu(ctx: &Context) -> Result<u8, ToolError> {
    Ok(ctx.query_port(1).map_err(verr)?.active_mtu as u8)
}

/// The MTU enum of a size in bytes.
pub fn mtu_enum(bytes: u32) -> Option<u8> {
    match bytes {
        256 => Some(1),
        512 => Some(2),
        1024 => Some(3),
        2048 => Some(4),
        4096 => Some(5),
        _ => None,
    }
}

/// Bytes of an MTU enum.
pub fn mtu_bytes(e: u8) -> u32 {
    128u32 << e.clamp(1, 5)
}

/// `rnic_verbs::Mtu` from an enum value 1..=5.
pub fn mtu_from_enum(e: u8) -> v::Mtu {
    match e {
        1 => v::Mtu::Mtu256,
        2 => v::Mtu::Mtu512,
        4 => v::Mtu::Mtu2048,
        5 => v::Mtu::Mtu4096,
        _ => v::Mtu::Mtu1024,
    }
}

/// A failed completion as an error line.
pub fn wc_error(wc: &WorkCompletion, what: &str) -> ToolError {
    ToolError::Completion(format!(
        "{what}: status {:?} ({}) for wr_id {} (vendor error {:#x})",
        wc.status(),
        wc.status() as u32,
        wc.wr_id(),
        wc.vendor_err()
    ))
}

/// Busy-waits a little, then yields the CPU: an emulated device runs on threads of this
/// process, and on a small machine a pure spin would starve them. Every fourth spin: when
/// the two sides of a loopback run share a core, the waiter's yield is the hand-over to
/// the side that writes what it waits for (64 spins before it cost `write-lat --loopback`
/// about 1.7 us a message on a loaded 2-core machine).
pub fn idle(spins: &mut u32) {
    *spins = spins.wrapping_add(1);
    if *spins % 4 == 0 {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// A random 24-bit PSN.
pub fn random_psn() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    (h.finish() as u32) & 0xff_ffff
}
