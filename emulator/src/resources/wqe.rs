//! Work requests as the queue engines parsed them: the data segments, who their keys are
//! checked for, receive WQEs taken from an RQ or SRQ and send WQEs with the requester's
//! progress on them. Data only: the engines (`crate::sq`, `crate::rq`, `crate::transport`)
//! fill and consume them.

use rnic_hw_regs::cqe::CqeSyndrome;
use rnic_hw_regs::ctx::Qpc;
use rnic_hw_regs::wqe::SendOpcode;

use super::Srq;
use crate::wire::psn::psn_add;

/// One data segment of a WQE: `len` bytes at `addr` under `lkey`, or inline bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Seg {
    /// A scatter/gather entry.
    Key {
        /// Local key.
        lkey: u32,
        /// Address, in the key's address space.
        addr: u64,
        /// Length in bytes.
        len: u32,
    },
    /// Inline data: `len` bytes at `off` in the WQE's inline buffer.
    Inline {
        /// Offset in the inline buffer.
        off: u32,
        /// Length in bytes.
        len: u32,
    },
}

impl Seg {
    /// Length in bytes.
    pub(crate) fn len(&self) -> u64 {
        match *self {
            Seg::Key { len, .. } | Seg::Inline { len, .. } => u64::from(len),
        }
    }
}

/// [`Domain::qpn`] of a check made for no particular QP (an SRQ's receives).
pub(crate) const QPN_NONE: u32 = u32::MAX;

/// Who asks for a key check: the PD the keys must belong to, whether the reserved lkey is
/// allowed (`rlky` of the QP or SRQ), and the QP asking (a type-2 window answers only the QP
/// it is bound to). Built once per WQE or packet from the context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Domain {
    /// Protection domain.
    pub pd: u32,
    /// `rlky`: the reserved lkey may be used.
    pub rlky: bool,
    /// The QP asking, or [`QPN_NONE`].
    pub qpn: u32,
}

impl Default for Domain {
    fn default() -> Self {
        Domain {
            pd: 0,
            rlky: false,
            qpn: QPN_NONE,
        }
    }
}

impl Domain {
    /// The domain of a QP's own accesses (send gather, RQ scatter, READ / atomic results,
    /// responder targets).
    pub(crate) fn of_qp(c: &Qpc) -> Domain {
        Domain {
            pd: c.pd(),
            rlky: c.rlky(),
            qpn: QPN_NONE,
        }
    }

    /// This domain, asking on behalf of QP `qpn` (the responder's remote accesses).
    pub(crate) fn on(self, qpn: u32) -> Domain {
        Domain { qpn, ..self }
    }

    /// The domain of receives taken from an SRQ: the SRQ's PD and `rlky`.
    pub(crate) fn of_srq(s: &Srq) -> Domain {
        Domain {
            pd: s.pd,
            rlky: s.rlky,
            qpn: QPN_NONE,
        }
    }
}

/// A receive WQE taken from an RQ or SRQ.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RecvWqe {
    /// The CQE's `wqe_counter`: the RQ's counter value, or the SRQ WQE index.
    pub counter: u16,
    /// Scatter list.
    pub segs: Vec<Seg>,
    /// Who the lkeys are checked for: the QP's PD and `rlky`, or the SRQ's.
    pub dom: Domain,
    /// The SRQ it came from.
    pub srqn: Option<u32>,
}

/// Where a UD send WQE goes (its datagram segment).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct UdDest {
    /// Q_Key (MSB set: use the QP's Q_Key).
    pub qkey: u32,
    /// Destination QPN.
    pub dqpn: u32,
    /// Destination MAC.
    pub rmac: [u8; 6],
    /// Destination GID.
    pub rgid: [u8; 16],
    /// Hop limit / TTL.
    pub hop_limit: u8,
    /// Traffic class (DSCP << 2 | ECN).
    pub tclass: u8,
    /// Source GID index.
    pub sgid_index: u8,
    /// Flow label.
    pub flow_label: u32,
    /// UDP source port: the address vector's `rlid`, which carries it for RoCE v2 (as the
    /// mlx5 provider writes it); 0 derives it from the flow label and QPNs.
    pub udp_sport: u16,
}

/// A send WQE as the SQ engine parsed it, with the requester's progress on it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SendWqe {
    /// The control segment's `wqe_index` (the CQE's `wqe_counter`).
    pub wqe_index: u16,
    /// Send opcode, raw (checked by the SQ engine).
    pub opcode: u8,
    /// CQ_UPDATE: a CQE on success too.
    pub signaled: bool,
    /// Solicited event.
    pub solicited: bool,
    /// Wait for earlier READs and atomics before starting.
    pub fence: bool,
    /// Immediate data, or the rkey to invalidate.
    pub imm: u32,
    /// Remote address (WRITE, READ, atomics).
    pub raddr: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap (CMP_SWAP) or add (FETCH_ADD) value.
    pub swap_add: u64,
    /// Compare value (CMP_SWAP).
    pub compare: u64,
    /// UD destination.
    pub ud: Option<UdDest>,
    /// Data segments.
    pub segs: Vec<Seg>,
    /// Inline data of the inline segments.
    pub inline: Vec<u8>,
    /// Message length.
    pub len: u64,
    /// The requester has started it (PSNs assigned, local checks done).
    pub started: bool,
    /// First PSN.
    pub first_psn: u32,
    /// PSNs it takes (READ: one per response packet; 0 for NOP).
    pub npkts: u32,
    /// Packets sent so far (the next one to send).
    pub next_pkt: u32,
    /// Complete (acknowledged, or needs no acknowledgement).
    pub done: bool,
    /// READ: response packets received in order so far (a retry asks for the rest).
    pub rd_rcvd: u32,
    /// READ: inside a multi-packet response (FIRST seen, LAST not yet).
    pub rd_in_msg: bool,
    /// READ: reissued for its remaining bytes (go-back-N) and no response taken since: the
    /// response at the expected PSN may start the sequence afresh (FIRST / ONLY, a responder
    /// that treats the retry as a new request) or continue the original one (MIDDLE / LAST,
    /// as rxe replays a READ retried mid-message); see the completer.
    pub rd_resumed: bool,
    /// Failed with this syndrome: completes with an error CQE and moves the QP to ERR (UD, UC:
    /// SQE).
    pub error: Option<CqeSyndrome>,
    /// UMR: what the WQE asks of the mkey its control segment's `imm` names.
    pub umr: UmrWqe,
}

/// A UMR WQE as the SQ engine parsed it: the UMR control segment, the mkey segment's fields
/// and the first inline KLM (a window bind carries exactly one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct UmrWqe {
    /// `UMR_CTRL_*` flags.
    pub flags: u8,
    /// `MKEY_MASK_*`: the mkey segment fields that apply.
    pub mask: u64,
    /// KLM octowords that followed the mkey segment.
    pub klm_octowords: u16,
    /// mkey segment `free`.
    pub free: bool,
    /// mkey segment access bits.
    pub lw: bool,
    pub rr: bool,
    pub rw: bool,
    pub a: bool,
    /// mkey segment `qpn` (0xFFFFFF: bound to no QP).
    pub qpn: u32,
    /// mkey segment `mkey_7_0`: the new variant byte.
    pub mkey_7_0: u8,
    /// mkey segment `start_addr` and `len`.
    pub start_addr: u64,
    pub len: u64,
    /// The first KLM: byte count, key and address.
    pub klm: Option<(u32, u32, u64)>,
}

impl SendWqe {
    /// The opcode, typed.
    pub(crate) fn op(&self) -> Option<SendOpcode> {
        SendOpcode::try_from(self.opcode).ok()
    }

    /// A READ or an atomic (counts against max_rd_atomic; fences wait for them).
    pub(crate) fn is_rd_atomic(&self) -> bool {
        matches!(
            self.op(),
            Some(SendOpcode::RdmaRead | SendOpcode::AtomicCs | SendOpcode::AtomicFa)
        )
    }

    /// Last PSN (meaningful once started and `npkts > 0`).
    pub(crate) fn last_psn(&self) -> u32 {
        psn_add(self.first_psn, self.npkts.saturating_sub(1))
    }

    /// Packets the requester sends for it: a READ or atomic is one request packet (its
    /// other PSNs belong to the responses).
    pub(crate) fn packets(&self) -> u32 {
        if self.is_rd_atomic() {
            self.npkts.min(1)
        } else {
            self.npkts
        }
    }

    /// Every packet has been sent.
    pub(crate) fn fully_sent(&self) -> bool {
        self.started && self.next_pkt >= self.packets()
    }
}
