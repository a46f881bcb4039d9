//! Capability blocks (QUERY_HCA_CAP / SET_HCA_CAP), modelled on the trace's ConnectX-4.
//!
//! Each capability type has a maximum and a current block. The values are those the real
//! ConnectX-4 (firmware 14.12.1220) reported for the fields `rnic_hw_regs::caps` names, with
//! the object limits taken from the [`Profile`]; fields it does not name stay 0. Where the
//! ConnectX-4's maximum and current differ (log_max_qp 23 / 14, cmdif_checksum 3 / 0,
//! log_uar_page_sz 8 / 0, pkey and GID table sizes), so do ours.
//!
//! Differences from the ConnectX-4, on purpose: `cq_resize` is 0 (MODIFY_CQ resize is not
//! modelled), `log_max_mrw_sz` is 31 ([`LOG_MAX_MRW_SZ`]), the Ethernet-offload (1) and flow-table (7) blocks are all zero (no Ethernet
//! offloads or steering), ODP (2) is all zero, and a profile may support
//! `atomic_req_8B_endianness_mode` 1.

use rnic_hw_regs::caps::{AtomicCaps, CmdHcaCap, HcaCapUnion, RoceCap};
use zerocopy::FromZeros;

use crate::profile::Profile;

/// Capability types with a block (QUERY_HCA_CAP `op_mod >> 1`): general (0), Ethernet
/// offloads (1), ODP (2), atomic (3), RoCE (4), flow table (7).
pub(crate) const CAP_TYPES: [u16; 6] = [0, 1, 2, 3, 4, 7];

/// The capability blocks, maximum and current.
#[derive(Debug)]
pub(crate) struct Caps {
    /// `(cap_type, max, current)` for each type in [`CAP_TYPES`].
    blocks: Vec<(u16, Box<HcaCapUnion>, Box<HcaCapUnion>)>,
}

impl Default for Caps {
    fn default() -> Self {
        Caps::new(&Profile::default())
    }
}

/// `log_max_mrw_sz`: the largest MTT region is 2 GiB. CREATE_MKEY carries the whole MTT, and
/// the command interface takes one of 4 KiB pages for that size
/// (`crate::cmd::MAX_CMD_LEN`); the ConnectX-4 reports 64 (its driver registers larger
/// regions with larger pages or UMR, which are not modelled).
pub(crate) const LOG_MAX_MRW_SZ: u8 = 31;

/// Caps a log2 at a field's width.
fn log(v: u8, max: u8) -> u8 {
    v.min(max)
}

/// The general capabilities (`cmd_hca_cap`) of `p`; `max` selects the maximum block.
fn general(p: &Profile, max: bool) -> CmdHcaCap {
    let mut g = CmdHcaCap::new_zeroed();
    g.set_log_max_srq_sz(15);
    g.set_log_max_qp_sz(p.log_max_qp_sz);
    g.set_log_max_qp(if max {
        log(p.log_max_qp, 31)
    } else {
        p.log_max_qp.min(14)
    });
    g.set_log_max_srq(log(p.log_max_srq, 31));
    g.set_log_max_cq_sz(p.log_max_cq_sz);
    g.set_log_max_cq(log(p.log_max_cq, 31));
    g.set_log_max_eq_sz(22);
    g.set_log_max_mkey(log(p.log_max_mkey, 63));
    g.set_log_max_eq(log(p.log_max_eq, 15));
    g.set_max_indirection(4);
    g.set_log_max_mrw_sz(LOG_MAX_MRW_SZ);
    g.set_log_max_klm_list_size(16);
    g.set_log_max_ra_req_dc(4);
    g.set_log_max_ra_res_dc(4);
    g.set_log_max_ra_req_qp(4);
    g.set_log_max_ra_res_qp(4);
    g.set_end_pad(true);
    g.set_cc_query_allowed(true);
    g.set_cc_modify_allowed(true);
    g.set_gid_table_size(if max { 4 } else { 0 });
    g.set_vport_counters(true);
    g.set_max_qp_cnt(0xFF);
    g.set_pkey_table_size(if max { 5 } else { 0 });
    g.set_vport_group_manager(true);
    g.set_nic_flow_table(true);
    g.set_eswitch_manager(true);
    g.set_local_ca_ack_delay(16);
    g.set_port_type(1);
    g.set_num_ports(1);
    g.set_log_max_msg(p.log_max_msg);
    g.set_stat_rate_support(1);
    g.set_cqe_version(1);
    g.set_compact_address_vector(true);
    g.set_striding_rq(true);
    g.set_cmdif_checksum(if max { 3 } else { 0 });
    g.set_wq_signature(true);
    g.set_sctr_data_cqe(true);
    g.set_eth_net_offloads(true);
    g.set_roce(true);
    g.set_atomic(true);
    g.set_cq_oi(true);
    g.set_cq_moderation(true);
    g.set_cq_eq_remap(true);
    g.set_block_lb_mc(true);
    g.set_scqe_break_moderation(true);
    g.set_cq_period_start_from_cqe(true);
    g.set_cd(true);
    g.set_apm(true);
    g.set_qkv(true);
    g.set_pkv(true);
    g.set_xrc(true);
    g.set_ud(true);
    g.set_uc(true);
    g.set_rc(true);
    g.set_uar_sz(5);
    g.set_log_pg_sz(12);
    g.set_bf(true);
    g.set_pad_tx_eth_packet(true);
    g.set_log_bf_reg_size(9);
    g.set_max_wqe_sz_sq(1024);
    g.set_max_wqe_sz_rq(512);
    g.set_max_wqe_sz_sq_dc(256);
    g.set_max_qp_mcg(0x30);
    g.set_log_max_mcg(0x15);
    g.set_log_max_transport_domain(16);
    g.set_log_max_pd(log(p.log_max_pd, 31));
    g.set_log_max_xrcd(24);
    g.set_log_max_rq(23);
    g.set_log_max_sq(23);
    g.set_log_max_tir(23);
    g.set_log_max_tis(23);
    g.set_log_max_rmp(23);
    g.set_log_max_rqt(16);
    g.set_log_max_rqt_size(9);
    g.set_log_max_wq_sz(15);
    g.set_nic_vport_change_event(true);
    g.set_log_max_vlan_list(12);
    g.set_log_max_current_mc_list(14);
    g.set_log_max_current_uc_list(10);
    g.set_log_max_l2_table(16);
    g.set_log_uar_page_sz(if max { 8 } else { 0 });
    g.set_device_frequency_mhz(p.device_frequency_khz / 1000);
    // This ConnectX-4 firmware reports the frequency in MHz only (device_frequency_khz 0).
    g
}

/// The RoCE capabilities of `p` (same maximum and current, as on the ConnectX-4).
fn roce(p: &Profile) -> RoceCap {
    let mut r = RoceCap::new_zeroed();
    r.set_l3_type(7);
    r.set_roce_version(7);
    r.set_r_roce_dest_udp_port(4791);
    r.set_r_roce_max_src_udp_port(65535);
    r.set_r_roce_min_src_udp_port(49152);
    r.set_roce_address_table_size(p.gid_table_size);
    r
}

/// The atomic capabilities of `p`: compare-and-swap and fetch-and-add (and their masked
/// forms) on 8 bytes, the ConnectX-4's `atomic_operations` 0xF and sizes 0x3C.
fn atomic(p: &Profile) -> AtomicCaps {
    let mut a = AtomicCaps::new_zeroed();
    a.set_supported_atomic_req_8B_endianness_mode_1(p.atomic_endianness_mode_1);
    a.set_atomic_operations(0xF);
    a.set_atomic_size_qp(0x3C);
    a.set_atomic_size_dc(0x3C);
    a
}

impl Caps {
    pub(crate) fn new(profile: &Profile) -> Self {
        let blocks = CAP_TYPES
            .iter()
            .map(|&t| {
                let mut max = Box::new(HcaCapUnion::new_zeroed());
                let mut cur = Box::new(HcaCapUnion::new_zeroed());
                match t {
                    0 => {
                        *max.cmd_hca_cap_mut() = general(profile, true);
                        *cur.cmd_hca_cap_mut() = general(profile, false);
                    }
                    3 => {
                        *max.atomic_caps_mut() = atomic(profile);
                        *cur.atomic_caps_mut() = atomic(profile);
                    }
                    4 => {
                        *max.roce_cap_mut() = roce(profile);
                        *cur.roce_cap_mut() = roce(profile);
                    }
                    _ => {}
                }
                (t, max, cur)
            })
            .collect();
        Caps { blocks }
    }

    /// The block of `cap_type`, maximum or current; `None` for a type the device lacks.
    pub(crate) fn block(&self, cap_type: u16, max: bool) -> Option<&HcaCapUnion> {
        self.blocks
            .iter()
            .find(|(t, _, _)| *t == cap_type)
            .map(|(_, m, c)| if max { &**m } else { &**c })
    }

    /// The current block of `cap_type`, to change with SET_HCA_CAP.
    pub(crate) fn current_mut(&mut self, cap_type: u16) -> Option<&mut HcaCapUnion> {
        self.blocks
            .iter_mut()
            .find(|(t, _, _)| *t == cap_type)
            .map(|(_, _, c)| &mut **c)
    }

    /// Current general capabilities.
    pub(crate) fn general(&self) -> &CmdHcaCap {
        self.blocks[0].2.cmd_hca_cap()
    }

    /// Maximum general capabilities.
    pub(crate) fn general_max(&self) -> &CmdHcaCap {
        self.blocks[0].1.cmd_hca_cap()
    }

    /// Current atomic capabilities (`atomic_req_8B_endianness_mode` 1: 8-byte atomic
    /// responses in host byte order), for the queue engines' atomics.
    pub(crate) fn atomic(&self) -> &AtomicCaps {
        self.blocks[3].2.atomic_caps()
    }

    /// Current RoCE capabilities. Only the tests read them: the transport always uses UDP
    /// port 4791.
    #[cfg(test)]
    pub(crate) fn roce(&self) -> &RoceCap {
        self.blocks[4].2.roce_cap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connectx4_values() {
        let c = Caps::new(&Profile::connectx4());
        assert_eq!(
            (c.general_max().log_max_qp(), c.general().log_max_qp()),
            (23, 14)
        );
        assert_eq!(c.general().device_frequency_mhz(), 275);
        assert_eq!(c.roce().roce_address_table_size(), 256);
        assert_eq!(c.atomic().atomic_operations(), 0xF);
        assert!(c.block(5, false).is_none());
        assert_eq!(CAP_TYPES[3], 3);
        assert_eq!(CAP_TYPES[4], 4);
    }
}
