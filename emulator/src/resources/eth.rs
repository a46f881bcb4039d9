//! The raw Ethernet objects: transport domains, TISs, TIRs, and the RQ and SQ objects
//! (CREATE_RQ / CREATE_SQ) that carry whole Ethernet frames instead of RoCE messages.

use rnic_hw_regs::ctx::WqState;

use super::{Domain, QueueBuf};

/// First SQ object number. Firmware draws SQNs from the QP number space; here SQNs have a
/// range of their own above every QPN a profile hands out (at most `0x100 + 2^23`), so that
/// a send doorbell's QPN field names exactly one object.
pub(crate) const FIRST_SQN: u32 = 0xC0_0000;
/// First RQ object number (a range of its own, as SQs).
pub(crate) const FIRST_RQN: u32 = 0xD0_0000;
/// RQ and SQ objects each at most.
pub(crate) const MAX_ETH_QUEUES: u32 = 1 << 16;

/// A transport domain (ALLOC_TRANSPORT_DOMAIN).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TransportDomain;

/// A transport interface send object (CREATE_TIS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tis {
    pub transport_domain: u32,
    pub prio: u8,
}

/// A transport interface receive object (CREATE_TIR), direct dispatch to one RQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tir {
    pub transport_domain: u32,
    /// The RQ every packet steered here goes to.
    pub rqn: u32,
}

/// The work queue geometry and place of an RQ or SQ object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EthWq {
    pub buf: QueueBuf,
    pub dbr_addr: u64,
    pub log_size: u8,
    /// log2 of the WQE stride in bytes.
    pub log_stride: u8,
    /// Who the WQEs' lkeys are checked for.
    pub dom: Domain,
    pub cqn: u32,
    pub user_index: u32,
}

impl EthWq {
    /// Number of WQEs (RQ) or WQEBBs (SQ) in the ring.
    pub(crate) fn size(&self) -> u32 {
        1u32 << self.log_size.min(16)
    }
}

/// An Ethernet receive queue (CREATE_RQ).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EthRq {
    pub state: WqState,
    pub wq: EthWq,
    /// `vsd`, `scatter_fcs` and the counter set, as created (QUERY_RQ returns them).
    pub vsd: bool,
    pub counter_set_id: u8,
    /// WQEs consumed.
    pub ci: u16,
}

/// An Ethernet send queue (CREATE_SQ).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EthSq {
    pub state: WqState,
    pub wq: EthWq,
    pub tisn: u32,
    pub uar: u32,
    /// `min_wqe_inline_mode` as created.
    pub min_inline_mode: u8,
    /// WQEBBs consumed (16-bit wrapping, like the doorbell counter).
    pub ci: u16,
}
