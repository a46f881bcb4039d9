//! The consumer's requests (as `ib_send_cm_*`): each checks the connection's state, sends
//! its message and moves the state on; nothing changes when it fails.

use super::{Endpoint, private_data};
use crate::endpoint::conn::Conn;
use crate::error::CmError;
use crate::event::{Event, MadAddr};
use crate::state::{ConnId, State};
use crate::time::{Instant, iba_time};
use crate::wire::{
    Drep, Dreq, MAD_LEN, Mra, RejReason, Rep, Req, Rtu, SidrRep, SidrReq, SidrStatus,
};
use core::time::Duration;

/// What [`Endpoint::connect`] sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectParams {
    /// The passive side's CM.
    pub to: MadAddr,
    /// The primary path's packet life time, encoded: the REQ's response timeout is twice it
    /// plus the Remote CM Response Timeout, and timewait and MRA waits are made of it.
    pub packet_life_time: u8,
    /// The REQ. The endpoint fills in Local Communication ID and Local CA GUID; the rest
    /// goes out as given (rdma_cm's values: [`crate::cma`]).
    pub req: Req,
}

/// What [`Endpoint::sidr_request`] sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidrParams {
    /// The service's CM.
    pub to: MadAddr,
    /// The SIDR REQ; the endpoint fills in the Request ID.
    pub req: SidrReq,
    /// How long to wait for the SIDR REP before resending.
    pub timeout: Duration,
    /// Resends before giving up.
    pub max_cm_retries: u8,
}

/// What [`Endpoint::accept`] sends: the REP, in which the endpoint fills in both
/// communication IDs, Local CA GUID and Target ACK Delay.
pub type AcceptParams = Rep;

impl Endpoint {
    /// Sends a REQ (active side): the connection is in `ReqSent` until a REP, REJ or MRA
    /// comes, or the retries run out ([`Event::Unreachable`]).
    ///
    /// ```
    /// use rnic_cm::{Config, ConnectParams, Endpoint, MadAddr, State, time::Instant, wire::Req};
    /// let mut ep = Endpoint::new(Config::default());
    /// let p = ConnectParams { to: MadAddr::cm([0; 16], 0), packet_life_time: 18,
    ///     req: Req { max_cm_retries: 15, remote_cm_response_timeout: 20, ..Req::default() } };
    /// let id = ep.connect(Instant::ZERO, &p).unwrap();
    /// assert_eq!(ep.state(id), Some(State::ReqSent));
    /// assert!(ep.poll_transmit().is_some());
    /// ```
    pub fn connect(&mut self, now: Instant, p: &ConnectParams) -> Result<ConnId, CmError> {
        if p.req.transport_service_type > 1 {
            return Err(CmError::InvalidParam("transport service type (RC or UC)"));
        }
        let local = self.alloc_id()?;
        let mut req = p.req;
        req.local_comm_id = local;
        req.local_ca_guid = self.config.ca_guid;
        let tid = self.form_tid(local);
        let mut c = Conn::new(State::ReqSent, p.to, tid);
        c.local_qpn = req.local_qpn;
        c.service_id = req.service_id;
        c.av_timeout = p.packet_life_time.saturating_add(1).min(31);
        // cm.c: twice the packet life time (there and back) plus the peer's CM time.
        c.response_timeout =
            iba_time(p.packet_life_time) * 2 + iba_time(req.remote_cm_response_timeout);
        c.max_cm_retries = req.max_cm_retries;
        self.conns.insert(local, c);
        let mut mad = [0u8; MAD_LEN];
        req.emit(tid, &mut mad);
        self.send_retried(now, local, mad);
        Ok(ConnId(local))
    }

    /// Accepts a REQ with a REP (passive side, in `ReqRcvd` or `MraReqSent`): the
    /// connection is in `RepSent` until the RTU comes.
    pub fn accept(&mut self, now: Instant, id: ConnId, rep: &AcceptParams) -> Result<(), CmError> {
        let c = self.conn(id)?;
        if !matches!(c.state, State::ReqRcvd | State::MraReqSent) {
            return Err(CmError::InvalidState { id, state: c.state });
        }
        let mut rep = *rep;
        rep.local_comm_id = id.0;
        rep.remote_comm_id = c.remote_id;
        rep.local_ca_guid = self.config.ca_guid;
        rep.target_ack_delay = self.config.ack_delay;
        let mut mad = [0u8; MAD_LEN];
        rep.emit(c.tid, &mut mad);
        let c = self.conn_mut(id)?;
        c.state = State::RepSent;
        c.local_qpn = rep.local_qpn;
        c.last_reply = Some(Box::new(mad));
        self.send_retried(now, id.0, mad);
        Ok(())
    }

    /// Rejects the connection with a REJ of `reason` (IBTA table 109; consumers use 28,
    /// consumer defined), `ari` and `private_data`. From the REQ and REP states the
    /// connection is gone; from `RepSent` / `MraRepRcvd` it waits in timewait.
    pub fn reject(
        &mut self,
        now: Instant,
        id: ConnId,
        reason: u16,
        ari: &[u8],
        private_data: &[u8],
    ) -> Result<(), CmError> {
        check_len(ari, 72, "REJ ARI")?;
        check_len(private_data, 148, "REJ private data")?;
        let c = self.conn(id)?;
        let (state, to) = (c.state, c.peer);
        let mad = self.format_rej(id.0, reason, ari, private_data);
        match state {
            State::ReqSent
            | State::MraReqRcvd
            | State::ReqRcvd
            | State::MraReqSent
            | State::RepRcvd
            | State::MraRepSent => {
                self.queue(to, mad);
                self.remove(id.0);
            }
            State::RepSent | State::MraRepRcvd => {
                self.queue(to, mad);
                self.enter_timewait(now, id.0);
            }
            state => return Err(CmError::InvalidState { id, state }),
        }
        Ok(())
    }

    /// Tells the peer to wait 4.096 us x 2^`service_timeout` longer for the answer to its
    /// REQ (in `ReqRcvd`) or REP (in `RepRcvd`). With `delay` the MRA is only sent to
    /// answer a duplicate, as rdma_cm does (`IB_CM_MRA_FLAG_DELAY`).
    pub fn mra(
        &mut self,
        id: ConnId,
        service_timeout: u8,
        private_data_: &[u8],
        delay: bool,
    ) -> Result<(), CmError> {
        if service_timeout > 31 {
            return Err(CmError::InvalidParam("MRA service timeout (5 bits)"));
        }
        let pd = private_data::<{ Mra::PRIVATE_DATA_LEN }>(private_data_, "MRA private data")?;
        let c = self.conn(id)?;
        let (next, mraed) = match c.state {
            State::ReqRcvd => (State::MraReqSent, 0),
            State::RepRcvd => (State::MraRepSent, 1),
            state => return Err(CmError::InvalidState { id, state }),
        };
        let mra = Mra {
            local_comm_id: id.0,
            remote_comm_id: c.remote_id,
            message_mraed: mraed,
            service_timeout,
            private_data: pd,
        };
        let mut mad = [0u8; MAD_LEN];
        mra.emit(c.tid, &mut mad);
        let c = self.conn_mut(id)?;
        c.state = next;
        if delay {
            c.last_reply = Some(Box::new(mad));
        } else {
            self.send_reply(id.0, mad);
        }
        Ok(())
    }

    /// Sends the RTU (active side, in `RepRcvd` or `MraRepSent`, once the QP is ready):
    /// the connection is established ([`Event::Established`]).
    pub fn ready_to_use(&mut self, id: ConnId, private_data_: &[u8]) -> Result<(), CmError> {
        let pd = private_data::<{ Rtu::PRIVATE_DATA_LEN }>(private_data_, "RTU private data")?;
        let c = self.conn(id)?;
        if !matches!(c.state, State::RepRcvd | State::MraRepSent) {
            return Err(CmError::InvalidState { id, state: c.state });
        }
        let rtu = Rtu {
            local_comm_id: id.0,
            remote_comm_id: c.remote_id,
            private_data: pd,
        };
        let mut mad = [0u8; MAD_LEN];
        rtu.emit(c.tid, &mut mad);
        self.conn_mut(id)?.state = State::Established;
        self.send_reply(id.0, mad);
        self.events.push_back(Event::Established { id });
        Ok(())
    }

    /// Reports that the QP received traffic in `RepSent` / `MraRepRcvd` (the RTU was
    /// lost; `ib_cm_notify` of a communication-established event): the connection is
    /// established.
    pub fn notify_established(&mut self, id: ConnId) -> Result<(), CmError> {
        let c = self.conn_mut(id)?;
        if !matches!(c.state, State::RepSent | State::MraRepRcvd) {
            return Err(CmError::InvalidState { id, state: c.state });
        }
        c.state = State::Established;
        c.timer = None;
        self.events.push_back(Event::Established { id });
        Ok(())
    }

    /// Sends a DREQ (in `Established`): the connection is in `DreqSent` until the DREP
    /// ([`Event::Disconnected`]) or the retries run out (also `Disconnected`), then in
    /// timewait.
    pub fn disconnect(
        &mut self,
        now: Instant,
        id: ConnId,
        private_data_: &[u8],
    ) -> Result<(), CmError> {
        let pd = private_data::<{ Dreq::PRIVATE_DATA_LEN }>(private_data_, "DREQ private data")?;
        let c = self.conn(id)?;
        if c.state != State::Established {
            return Err(CmError::InvalidState { id, state: c.state });
        }
        let dreq = Dreq {
            local_comm_id: id.0,
            remote_comm_id: c.remote_id,
            remote_qpn_eecn: c.remote_qpn,
            private_data: pd,
        };
        let mut mad = [0u8; MAD_LEN];
        dreq.emit(self.form_tid(id.0), &mut mad);
        self.conn_mut(id)?.state = State::DreqSent;
        self.send_retried(now, id.0, mad);
        Ok(())
    }

    /// Answers a DREQ with a DREP (in `DreqRcvd`, once the QP is in error): the
    /// connection enters timewait.
    pub fn disconnect_reply(
        &mut self,
        now: Instant,
        id: ConnId,
        private_data_: &[u8],
    ) -> Result<(), CmError> {
        let pd = private_data::<{ Drep::PRIVATE_DATA_LEN }>(private_data_, "DREP private data")?;
        let c = self.conn(id)?;
        if c.state != State::DreqRcvd {
            return Err(CmError::InvalidState { id, state: c.state });
        }
        let drep = Drep {
            local_comm_id: id.0,
            remote_comm_id: c.remote_id,
            private_data: pd,
        };
        let mut mad = [0u8; MAD_LEN];
        drep.emit(c.tid, &mut mad);
        self.enter_timewait(now, id.0);
        self.send_reply(id.0, mad);
        Ok(())
    }

    /// Sends a SIDR REQ: the request waits in `SidrReqSent` for the SIDR REP
    /// ([`Event::SidrReply`]) or until the retries run out ([`Event::Unreachable`]).
    pub fn sidr_request(&mut self, now: Instant, p: &SidrParams) -> Result<ConnId, CmError> {
        let local = self.alloc_id()?;
        let mut req = p.req;
        req.request_id = local;
        let tid = self.form_tid(local);
        let mut c = Conn::new(State::SidrReqSent, p.to, tid);
        c.service_id = req.service_id;
        c.response_timeout = p.timeout;
        c.max_cm_retries = p.max_cm_retries;
        self.conns.insert(local, c);
        let mut mad = [0u8; MAD_LEN];
        req.emit(tid, &mut mad);
        self.send_retried(now, local, mad);
        Ok(ConnId(local))
    }

    /// Answers a SIDR REQ (in `SidrReqRcvd`) with `rep`; the endpoint fills in the
    /// Request ID and Service ID. The request is then gone.
    pub fn sidr_reply(&mut self, id: ConnId, rep: &SidrRep) -> Result<(), CmError> {
        if rep.additional_information_length > 72 {
            return Err(CmError::TooLong {
                what: "SIDR REP additional information",
                len: usize::from(rep.additional_information_length),
                max: 72,
            });
        }
        let c = self.conn(id)?;
        if c.state != State::SidrReqRcvd {
            return Err(CmError::InvalidState { id, state: c.state });
        }
        let mut rep = *rep;
        rep.request_id = c.remote_id;
        rep.service_id = c.service_id;
        let mut mad = [0u8; MAD_LEN];
        rep.emit(c.tid, &mut mad);
        let to = c.peer;
        self.queue(to, mad);
        self.remove(id.0);
        Ok(())
    }

    /// Ends connection `id` whatever its state, as `ib_destroy_cm_id`: an unanswered REQ
    /// gets a timeout REJ, an undecided or unanswered REQ or REP a consumer REJ, an
    /// established connection one DREQ (no retries), a DREQ its DREP, a SIDR REQ a
    /// rejecting SIDR REP. Past the REP the connection waits out timewait (and reports
    /// [`Event::TimewaitExit`]); otherwise it is gone at once.
    pub fn destroy(&mut self, now: Instant, id: ConnId) -> Result<(), CmError> {
        let c = self.conn(id)?;
        let (state, to, remote_id, remote_qpn) = (c.state, c.peer, c.remote_id, c.remote_qpn);
        match state {
            State::ReqSent | State::MraReqRcvd => {
                let guid = self.config.ca_guid.to_be_bytes();
                let mad = self.format_rej(id.0, RejReason::Timeout.raw(), &guid, &[]);
                self.queue(to, mad);
                self.remove(id.0);
            }
            State::ReqRcvd
            | State::MraReqSent
            | State::RepRcvd
            | State::MraRepSent
            | State::RepSent
            | State::MraRepRcvd => {
                self.reject(now, id, RejReason::ConsumerDefined.raw(), &[], &[])?;
            }
            State::Established => {
                let dreq = Dreq {
                    local_comm_id: id.0,
                    remote_comm_id: remote_id,
                    remote_qpn_eecn: remote_qpn,
                    ..Dreq::default()
                };
                let mut mad = [0u8; MAD_LEN];
                dreq.emit(self.form_tid(id.0), &mut mad);
                self.queue(to, mad);
                self.enter_timewait(now, id.0);
            }
            State::DreqSent => self.enter_timewait(now, id.0),
            State::DreqRcvd => self.disconnect_reply(now, id, &[])?,
            State::Timewait => {}
            State::SidrReqRcvd => {
                let rep = SidrRep {
                    status: SidrStatus::Rejected.raw(),
                    ..SidrRep::default()
                };
                self.sidr_reply(id, &rep)?;
            }
            State::SidrReqSent | State::Idle => self.remove(id.0),
        }
        Ok(())
    }
}

fn check_len(data: &[u8], max: usize, what: &'static str) -> Result<(), CmError> {
    if data.len() > max {
        return Err(CmError::TooLong {
            what,
            len: data.len(),
            max,
        });
    }
    Ok(())
}
