//! Address handles for UD: a driver-side address vector (no command), written into each UD
//! send WQE as its datagram segment (`mlx5_wqe_av`: Q_Key, destination QPN, MAC, GRH fields,
//! destination GID; for RoCE the 16-bit `rlid` field carries the UDP source port).
//!
//! [`AddressVector`] is defined here, below the QP: a connected QP's path
//! ([`crate::qp::RtrAttr::av`]) and an address handle are both built from one.
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
use rnic_hw_regs::wqe::WqeAv;
use std::sync::Arc;

// The source-port formulas are a RoCE v2 fact both sides of the Bus compute: hw-regs holds
// them, the driver re-exports them where its users look.
pub use rnic_hw_regs::roce::{
    rdma_calc_flow_label, rdma_flow_label_to_udp_sport, rdma_get_udp_sport,
};

/// A RoCE v2 address vector: where a connected QP's packets (or a UD datagram) go.
///
/// ```
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
/// # qp.to_init(&InitAttr { access: Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC, ..InitAttr::default() })?;
/// // This QP's own RoCE v2 address (GID 1, the configured IPv4) and MAC: loopback.
/// let av = AddressVector { sgid_index: 1, dgid: hca.gids()[1].gid, dmac: hca.mac(), ..AddressVector::default() };
/// qp.to_rtr(&RtrAttr { path_mtu: Some(Mtu::Mtu1024), dest_qpn: Some(qp.qpn()), av: Some(av), ..RtrAttr::default() })?;
/// assert_eq!(qp.query()?.state, QpState::Rtr);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AddressVector {
    /// Local GID table index (source address).
    pub sgid_index: u8,
    /// Destination GID (RoCE v2 over IPv4: `::ffff:a.b.c.d`).
    pub dgid: [u8; 16],
    /// Destination MAC.
    pub dmac: [u8; 6],
    /// Hop limit (IPv4 TTL); 0 means 64.
    pub hop_limit: u8,
    /// Traffic class (DSCP << 2 | ECN).
    pub traffic_class: u8,
    /// IPv6 flow label (20 bits).
    pub flow_label: u32,
    /// Service level (the Ethernet priority: 0 ..= [`MAX_SL`](crate::qp::MAX_SL)).
    pub sl: u8,
    /// UDP source port; `None`: as rxe computes it (`rdma_get_udp_sport` of the flow label
    /// and the QP numbers).
    pub udp_sport: Option<u16>,
}

/// A UD address handle.
///
/// A UD QP sends a datagram to itself through an address handle:
///
/// ```
/// use rnic_driver::ah::AddressHandle;
/// # use rnic_driver::doc_fixture::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let Fixture { hca, pd, cq, qp, mr } = Fixture::new(Arc::new(dev.bus()))?;
/// # drop(qp);
/// let qp = Qp::create(&pd, &QpConfig::new(QpType::Ud, cq.clone(), cq.clone()))?;
/// qp.to_init(&InitAttr { qkey: Some(0x1234), ..InitAttr::default() })?;
/// qp.to_rtr(&RtrAttr::default())?;
/// qp.to_rts(&RtsAttr::default())?;
/// let ah = AddressHandle::new(&pd, &AddressVector { sgid_index: 1, dgid: hca.gids()[1].gid, dmac: hca.mac(), ..AddressVector::default() })?;
/// qp.post_recv(&[RecvWr { wr_id: 1, sgl: &[mr.sge(0, 40 + 64)] }])?; // 40 bytes: the GRH area
/// let ud = UdDest { ah: &ah, remote_qpn: qp.qpn(), remote_qkey: 0x1234 };
/// qp.post_send(&[SendWr { wr_id: 2, op: SendOp::Send, payload: Payload::Inline(b"hi"), flags: SendFlags::NONE, ud: Some(ud) }])?;
/// let wc = wait(&cq);
/// assert_eq!((wc.wr_id, wc.byte_len, wc.src_qp), (1, 40 + 2, qp.qpn()));
/// assert!(wc.flags.contains(WcFlags::GRH));
/// # Ok(()) }
/// ```
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
    ///
    /// ```
    /// use rnic_driver::{ah::AddressHandle, qp::AddressVector, DriverError};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// let av = AddressVector { sgid_index: 5, ..AddressVector::default() };
    /// let err = AddressHandle::new(&pd, &av).unwrap_err(); // only GID 0 (and 1 with an IPv4) exist
    /// assert!(matches!(err, DriverError::InvalidArgument(_)));
    /// let ah = AddressHandle::new(&pd, &AddressVector::default())?;
    /// assert_eq!(ah.av().sgid_index, 0);
    /// # Ok(()) }
    /// ```
    pub fn new(pd: &Arc<Pd>, av: &AddressVector) -> Result<AddressHandle, DriverError> {
        let hca = pd.hca();
        if hca.gid(av.sgid_index).is_none() {
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
    ///
    /// ```
    /// use rnic_driver::{ah::AddressHandle, qp::AddressVector};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// let av = AddressVector { dmac: [2, 0, 0, 0, 0, 1], udp_sport: Some(0xC001), ..AddressVector::default() };
    /// assert_eq!(*AddressHandle::new(&pd, &av)?.av(), av);
    /// # Ok(()) }
    /// ```
    pub fn av(&self) -> &AddressVector {
        &self.av
    }

    /// The PD.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let pd = std::sync::Arc::new(rnic_driver::pd::Pd::alloc(&std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?))?);
    /// let ah = rnic_driver::ah::AddressHandle::new(&pd, &Default::default())?;
    /// assert_eq!(ah.pd().pdn(), pd.pdn());
    /// # Ok(()) }
    /// ```
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
