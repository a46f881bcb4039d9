//! The device's mutable state: everything firmware knows, behind the device lock.

use crate::caps::Caps;
use crate::hca::HcaState;
use crate::pages::Pages;
use crate::profile::Profile;
use crate::resources::Resources;

/// Counters tests and tools can read (see [`crate::Device::counters`]).
///
/// ```
/// use rnic_emulator::link::{InProcLink, Link};
/// use rnic_emulator::{Device, Profile, RunMode};
///
/// let (a, mut peer) = InProcLink::pair();
/// let dev = Device::with_link(Profile::default(), RunMode::Deterministic, a);
/// peer.transmit(&[0; 60]); // not a RoCE frame
/// dev.step();
/// let c = dev.counters();
/// assert_eq!((c.frames_rx, c.rx_dropped), (0, 1)); // dropped before the transport
/// assert_eq!(c.rx_dropped, c.drops.total());
/// ```
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counters {
    /// Commands executed (whatever their status).
    pub commands: u64,
    /// Commands that completed with a non-zero command status.
    pub command_errors: u64,
    /// Commands that completed with a non-zero delivery status.
    pub delivery_errors: u64,
    /// Doorbells that named no valid object (unknown QP, CQ, EQ or UAR) and were dropped.
    pub bad_doorbells: u64,
    /// Device accesses to host memory that faulted in the IOMMU.
    pub iommu_faults: u64,
    /// CQ overruns.
    pub cq_overruns: u64,
    /// EQEs dropped because their EQ was full (or its buffer faulted).
    pub eq_overruns: u64,
    /// CQEs that could not be written (CQ in error, buffer fault, unknown CQ).
    pub cqes_dropped: u64,
    /// RoCE frames the port transmitted (to the loopback or the link).
    pub frames_tx: u64,
    /// Frames the device built but could not emit, and so never sent (a packet that does not
    /// fit its headers' length fields: an internal error, since the requester sizes packets by
    /// the path MTU). Not part of [`Counters::rx_dropped`], which counts received frames.
    pub tx_dropped: u64,
    /// RoCE frames the port received and handed to the transport.
    pub frames_rx: u64,
    /// Received frames dropped (malformed, bad ICRC, unknown QP, wrong state, Q_Key, ...):
    /// the sum of the counters in [`Counters::drops`].
    pub rx_dropped: u64,
    /// Received frames dropped, one counter per receive rule.
    pub drops: RxDrops,
    /// Transport events (retransmissions, duplicates, NAKs) per kind.
    pub transport: TransportCounters,
    /// Whole Ethernet frames raw SQs transmitted (also counted in `frames_tx`).
    pub raw_tx: u64,
    /// Received frames flow steering delivered into an RQ's WQE.
    pub raw_rx: u64,
}

/// Why received frames were dropped (roce-v2.md section 1 and the transport's own rules):
/// one counter per rule.
///
/// ```
/// use rnic_emulator::link::{InProcLink, Link};
/// use rnic_emulator::{Device, Profile, RunMode};
///
/// let (a, mut peer) = InProcLink::pair();
/// let dev = Device::with_link(Profile::default(), RunMode::Deterministic, a);
/// peer.transmit(&[0xFF; 13]); // shorter than an Ethernet header
/// dev.step();
/// assert_eq!(dev.counters().drops.malformed, 1);
/// peer.transmit(&[0xFF; 60]); // an Ethernet frame, not RoCE v2: for flow steering
/// dev.step();
/// assert_eq!(dev.counters().drops.steering_no_root, 1);
/// ```
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RxDrops {
    /// Not a well-formed RoCE v2 frame (Ethernet, IP version/IHL/checksum, UDP port or
    /// length, BTH TVer, opcode, header or payload sizes), or, dropped by the link, larger
    /// than the largest RoCE v2 frame ([`crate::link::LinkRxDrops::oversize`]).
    pub malformed: u64,
    /// ICRC mismatch.
    pub bad_icrc: u64,
    /// Destination IP is not one of the device's RoCE v2 GIDs.
    pub not_our_ip: u64,
    /// DestQP 0.
    pub dest_qp_zero: u64,
    /// RoCE disabled on the vport.
    pub roce_disabled: u64,
    /// No QP with that number.
    pub unknown_qp: u64,
    /// DestQP 1 and the port has no QP1 (CREATE_QP with st QP1).
    pub no_gsi_qp: u64,
    /// The opcode's transport is not the QP's service type.
    pub wrong_transport: u64,
    /// The QP's state does not receive (RST, INIT, ERR; requests before RTR, responses
    /// before RTS).
    pub wrong_state: u64,
    /// RC / UC request or response whose IP source is not the QP's peer, or whose IP
    /// destination is not the QP's own source GID.
    pub peer_mismatch: u64,
    /// P_Key mismatch.
    pub pkey: u64,
    /// UD Q_Key mismatch (QP1: not the GSI Q_Key 0x80010000).
    pub qkey: u64,
    /// UD datagram with no receive WQE posted.
    pub ud_no_wqe: u64,
    /// RC request with a PSN ahead of the expected one (after the one sequence NAK).
    pub out_of_sequence: u64,
    /// RC duplicate request that cannot be answered (a READ or atomic no longer in the
    /// responder's resources).
    pub stale_duplicate: u64,
    /// UC packet dropped (sequence gap, bad request, no receive WQE, access error).
    pub uc_error: u64,
    /// A response (ACK, READ response, atomic ACK) matching no outstanding request, or out
    /// of order.
    pub stale_response: u64,
    /// CNP (no congestion control here).
    pub cnp: u64,
    /// Anything else (requests the responder refused without an answer).
    pub other: u64,
    /// Dropped by the link before the port saw them: its receive ring was full, the device
    /// did not keep up (a NIC's receive ring out of descriptors; see
    /// [`crate::link::LinkRxDrops::ring_full`]). A flood of junk lands here, not in memory.
    pub ring_full: u64,
    /// Lost before the link took them: the medium's buffer overflowed (a UDP link's kernel
    /// socket buffer; see [`crate::link::LinkRxDrops::overflow`]), like a NIC's port buffer
    /// discards.
    pub link_overflow: u64,
    /// Not RoCE v2 for this function, and no NIC RX root flow table is set.
    pub steering_no_root: u64,
    /// No flow table entry matched and the table's miss action is the default (drop).
    pub steering_no_match: u64,
    /// The matching flow table entry's action is drop.
    pub steering_drop_rule: u64,
    /// Steered to an RQ that is not in RDY.
    pub rq_not_ready: u64,
    /// Steered to an RQ with no receive WQE posted.
    pub rq_no_wqe: u64,
    /// Longer than the RQ's receive WQE (the WQE is not consumed).
    pub frame_too_long: u64,
    /// The RQ's doorbell record or WQE could not be read (an IOMMU fault), or its scatter
    /// failed (an error CQE reports that one; the RQ enters ERR).
    pub rq_error: u64,
}

impl RxDrops {
    /// The sum of all counters.
    ///
    /// ```
    /// use rnic_emulator::{Device, Profile, RunMode};
    ///
    /// let dev = Device::new(Profile::default(), RunMode::Deterministic);
    /// let c = dev.counters();
    /// assert_eq!(c.drops.total(), c.rx_dropped); // always the same sum
    /// assert_eq!(c.drops.total(), 0);
    /// ```
    pub fn total(&self) -> u64 {
        self.malformed
            + self.bad_icrc
            + self.not_our_ip
            + self.dest_qp_zero
            + self.no_gsi_qp
            + self.roce_disabled
            + self.unknown_qp
            + self.wrong_transport
            + self.wrong_state
            + self.peer_mismatch
            + self.pkey
            + self.qkey
            + self.ud_no_wqe
            + self.out_of_sequence
            + self.stale_duplicate
            + self.uc_error
            + self.stale_response
            + self.cnp
            + self.other
            + self.ring_full
            + self.link_overflow
            + self.steering_no_root
            + self.steering_no_match
            + self.steering_drop_rule
            + self.rq_not_ready
            + self.rq_no_wqe
            + self.frame_too_long
            + self.rq_error
    }
}

/// Transport events, for tests and tools.
///
/// ```
/// use rnic_emulator::{Device, Profile, RunMode};
///
/// let dev = Device::new(Profile::default(), RunMode::Deterministic);
/// let t = dev.counters().transport;
/// assert_eq!((t.retransmits, t.acks_tx, t.naks_tx), (0, 0, 0));
/// ```
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransportCounters {
    /// Local ACK timeouts that led to a retransmission.
    pub timeouts: u64,
    /// Go-back-N retransmissions started (timeout, sequence NAK, response gap).
    pub retransmits: u64,
    /// RNR NAKs received.
    pub rnr_naks_rx: u64,
    /// Sequence NAKs received.
    pub seq_naks_rx: u64,
    /// Duplicate requests the responder answered (re-ACK, re-read, atomic replay).
    pub duplicates: u64,
    /// ACKs sent.
    pub acks_tx: u64,
    /// ACKs saved by coalescing (several AckReq packets answered by one ACK).
    pub acks_coalesced: u64,
    /// NAKs sent (sequence, RNR, invalid request, access, operational).
    pub naks_tx: u64,
    /// Received frames whose ICRC matched only with a solved IP ID (UDP link, see
    /// [`crate::link::udp`]).
    pub icrc_ip_id_solved: u64,
}

/// Everything the device's firmware holds.
#[derive(Debug)]
pub(crate) struct DeviceState {
    pub profile: Profile,
    pub hca: HcaState,
    pub pages: Pages,
    pub caps: Caps,
    pub res: Resources,
    pub counters: Counters,
    /// The device's one port: loopback and link.
    pub port: crate::port::Port,
    /// Scatter lists of completed receive WQEs, reused by the next ones
    /// ([`crate::rq::recycle`]), so a steady stream of receives allocates nothing.
    pub spare_recv_segs: Vec<Vec<crate::resources::Seg>>,
    /// QPs with an own RQ that entered ERR: receive WQEs the host posts to them later are
    /// flushed at the next step ([`crate::rq::flush_in_error`]), as a ConnectX flushes
    /// receives posted in ERR (what a drain relies on). Entries whose QP left ERR or was
    /// destroyed are dropped there.
    pub rq_flush_watch: Vec<u32>,
}

impl DeviceState {
    pub(crate) fn new(profile: Profile) -> Self {
        DeviceState {
            hca: HcaState::default(),
            pages: Pages::new(&profile),
            caps: Caps::new(&profile),
            res: Resources::new(&profile),
            counters: Counters::default(),
            port: crate::port::Port::new(),
            spare_recv_segs: Vec::new(),
            rq_flush_watch: Vec::new(),
            profile,
        }
    }
}
