//! Address handles for UD: a driver-side address vector (no command), written into each UD
//! send WQE as its datagram segment (`mlx5_wqe_av`: Q_Key, destination QPN, MAC, GRH fields,
//! destination GID; for RoCE the 16-bit `rlid` field carries the UDP source port).
//!
//! ```
//! use rnic_driver::ah::{rdma_get_udp_sport, rdma_flow_label_to_udp_sport};
//!
//! assert_eq!(rdma_flow_label_to_udp_sport(0), 0xC000);
//! assert_eq!(rdma_get_udp_sport(0x12345, 1, 2), rdma_flow_label_to_udp_sport(0x12345));
//! assert!(rdma_get_udp_sport(0, 0x11, 0x12) >= 0xC000);
//! ```

use crate::error::DriverError;
use crate::pd::Pd;
use crate::qp::AddressVector;
use rnic_hw_regs::wqe::WqeAv;
use std::sync::Arc;

/// The kernel's flow label of a QP pair: `FL = lqpn * rqpn`, folded (roce-v2.md section 1).
pub const fn rdma_calc_flow_label(lqpn: u32, rqpn: u32) -> u32 {
    let mut fl = lqpn as u64 * rqpn as u64;
    fl ^= fl >> 20;
    fl ^= fl >> 40;
    (fl & 0xF_FFFF) as u32
}

/// The kernel's folding of a flow label into a UDP source port (0xC000..=0xFFFF).
pub const fn rdma_flow_label_to_udp_sport(flow_label: u32) -> u16 {
    let low = flow_label & 0x3FFF;
    let high = (flow_label & 0xF_C000) >> 14;
    0xC000 | ((low ^ high) as u16)
}

/// rxe's (`rdma_get_udp_sport`) source port: the flow label if non-zero, else one derived
/// from the QP numbers.
pub const fn rdma_get_udp_sport(flow_label: u32, lqpn: u32, rqpn: u32) -> u16 {
    let fl = if flow_label == 0 {
        rdma_calc_flow_label(lqpn, rqpn)
    } else {
        flow_label
    };
    rdma_flow_label_to_udp_sport(fl)
}

/// A UD address handle.
#[derive(Debug)]
pub struct AddressHandle {
    pd: Arc<Pd>,
    av: AddressVector,
    /// The 48-byte address vector as six big-endian qwords (host values), Q_Key and QPN 0.
    words: [u64; 6],
}

impl AddressHandle {
    /// Builds the address vector for `av` (checks the source GID index exists). With no
    /// UDP source port given, the port is the flow label's (or 0xC000 with flow label 0).
    pub fn new(pd: &Arc<Pd>, av: &AddressVector) -> Result<AddressHandle, DriverError> {
        let hca = pd.hca();
        if !hca
            .gids()
            .iter()
            .any(|g| g.index == u16::from(av.sgid_index))
        {
            return Err(DriverError::InvalidArgument(format!(
                "address handle: GID index {} is not programmed",
                av.sgid_index
            )));
        }
        if av.flow_label > 0xF_FFFF || av.sl > 15 {
            return Err(DriverError::InvalidArgument(format!(
                "address handle: flow label {:#x} / SL {} out of range",
                av.flow_label, av.sl
            )));
        }
        let mut w = WqeAv::default();
        w.set_sl(av.sl);
        w.set_rmac(av.dmac);
        w.set_tclass(av.traffic_class);
        w.set_hop_limit(if av.hop_limit == 0 { 64 } else { av.hop_limit });
        w.set_grh(true);
        w.set_sgid_index(av.sgid_index);
        w.set_flow_label(av.flow_label);
        w.set_rgid(av.dgid);
        let sport = av
            .udp_sport
            .unwrap_or_else(|| rdma_flow_label_to_udp_sport(av.flow_label));
        w.set_rlid(sport);
        let mut words = [0u64; 6];
        for (i, c) in w.0.chunks_exact(8).enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            words[i] = u64::from_be_bytes(b);
        }
        Ok(AddressHandle {
            pd: pd.clone(),
            av: *av,
            words,
        })
    }

    /// The address vector.
    pub fn av(&self) -> &AddressVector {
        &self.av
    }

    /// The PD.
    pub fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }

    /// The datagram segment for `remote_qpn` / `remote_qkey`, as six qwords.
    #[inline(always)]
    pub(crate) fn words(&self, remote_qpn: u32, remote_qkey: u32) -> [u64; 6] {
        let mut w = self.words;
        w[0] = (u64::from(remote_qkey) << 32) | (w[0] & 0xFFFF_FFFF);
        w[1] = (w[1] & !(0xFF_FFFFu64 << 32)) | (u64::from(remote_qpn & 0xFF_FFFF) << 32);
        w
    }
}
