//! What the endpoint hands its caller: MADs to send ([`Transmit`], addressed by
//! [`MadAddr`]) and what happened ([`Event`]).

use crate::state::ConnId;
use crate::wire::{MAD_LEN, Rej, Rep, Req, SidrRep, SidrReq};

/// Where a MAD comes from or goes to on a port: the peer port's GID (on RoCE v2, its IP
/// address as a GID), its QP (1 for the CM, the GSI QP) and the P_Key index it used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MadAddr {
    /// The peer's GID (the source GID of a received MAD's GRH).
    pub gid: [u8; 16],
    /// The peer's QP: the source QPN of a received MAD, 1 for a CM.
    pub qpn: u32,
    /// The P_Key index the MAD was received with or is to be sent with.
    pub pkey_index: u16,
}

impl MadAddr {
    /// The CM (QP 1) at `gid`, P_Key index `pkey_index`.
    ///
    /// ```
    /// let a = rnic_cm::MadAddr::cm([1; 16], 0);
    /// assert_eq!(a.qpn, 1);
    /// ```
    pub const fn cm(gid: [u8; 16], pkey_index: u16) -> MadAddr {
        MadAddr {
            gid,
            qpn: 1,
            pkey_index,
        }
    }
}

/// A MAD for the caller to send from its GSI QP (QP 1, Q_Key 0x80010000) to `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// The destination.
    pub to: MadAddr,
    /// The whole MAD.
    pub mad: [u8; MAD_LEN],
}

/// Something that happened to a connection (names after `ib_cm_event_type` and rdma_cm's
/// events).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A REQ for a service this endpoint listens on: answer with
    /// [`accept`](crate::Endpoint::accept), [`reject`](crate::Endpoint::reject) or
    /// [`mra`](crate::Endpoint::mra).
    ConnectRequest {
        /// The new connection (passive side).
        id: ConnId,
        /// Who sent the REQ.
        from: MadAddr,
        /// The REQ as received.
        req: Box<Req>,
    },
    /// The passive side accepted (REP received): move the QP to RTR and RTS, then call
    /// [`ready_to_use`](crate::Endpoint::ready_to_use).
    ConnectReply {
        /// The connection (active side).
        id: ConnId,
        /// The REP as received.
        rep: Box<Rep>,
    },
    /// The connection is established: RTU received (passive), RTU sent (active), or the
    /// caller reported traffic on the QP.
    Established {
        /// The connection.
        id: ConnId,
    },
    /// The peer sent a REJ; the connection is gone (or in timewait).
    Rejected {
        /// The connection.
        id: ConnId,
        /// The REJ as received (reason, ARI, private data).
        rej: Box<Rej>,
    },
    /// The peer did not answer a REQ, REP or SIDR REQ in time, retries included (a REJ
    /// with reason timeout went out for a REQ or REP); the connection is gone.
    Unreachable {
        /// The connection.
        id: ConnId,
    },
    /// The peer asked for more time (MRA received).
    MraReceived {
        /// The connection.
        id: ConnId,
        /// The extra time it asked for, encoded (4.096 us x 2^t).
        service_timeout: u8,
    },
    /// The peer disconnects (DREQ received): move the QP to error, then call
    /// [`disconnect_reply`](crate::Endpoint::disconnect_reply).
    DisconnectRequest {
        /// The connection.
        id: ConnId,
        /// The DREQ's private data.
        private_data: Box<[u8]>,
    },
    /// Our disconnect finished: DREP received, or the DREQ's retries ran out. The
    /// connection is in timewait.
    Disconnected {
        /// The connection.
        id: ConnId,
    },
    /// Timewait is over: the connection and its QP number may be reused.
    TimewaitExit {
        /// The connection, now gone.
        id: ConnId,
    },
    /// A SIDR REQ for a service this endpoint listens on: answer with
    /// [`sidr_reply`](crate::Endpoint::sidr_reply).
    SidrRequest {
        /// The request (passive side).
        id: ConnId,
        /// Who asked.
        from: MadAddr,
        /// The SIDR REQ as received.
        req: Box<SidrReq>,
    },
    /// The answer to our SIDR REQ.
    SidrReply {
        /// The request, now gone.
        id: ConnId,
        /// The SIDR REP as received (status, QPN, Q_Key, private data).
        rep: Box<SidrRep>,
    },
}
