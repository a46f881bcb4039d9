//! Received MADs: the header checked, then one handler per message, each finding its
//! connection the way `cm.c` does (by our communication ID, by the peer's, or by the
//! peer's CA GUID and ID) and answering duplicates and stale messages as IBTA 12.9 says.

use super::{Endpoint, State};
use crate::endpoint::conn::{Conn, Timer};
use crate::error::RecvError;
use crate::event::{Event, MadAddr};
use crate::state::ConnId;
use crate::time::{Instant, ack_timeout, iba_time};
use crate::wire::{
    Drep, Dreq, MAD_LEN, Mad, Method, Mra, Rej, RejReason, Rep, Req, Rtu, SidrRep, SidrReq,
    SidrStatus, WireError,
};

/// Attributes of the CM class this CM does not serve: ClassPortInfo, LAP, APR.
const UNSERVED_ATTRS: [u16; 3] = [0x0001, 0x0019, 0x001A];

impl Endpoint {
    pub(super) fn dispatch(
        &mut self,
        now: Instant,
        from: MadAddr,
        mad: &[u8],
    ) -> Result<(), RecvError> {
        let hdr = Mad::parse(mad)?;
        let attr = hdr.attr_id;
        if hdr.method != Method::Send || UNSERVED_ATTRS.contains(&attr) {
            return Err(RecvError::Unsupported {
                method: hdr.method.raw(),
                attr_id: attr,
            });
        }
        let tid = hdr.transaction_id;
        let index = usize::from(attr.wrapping_sub(Req::ATTR_ID));
        // Parse fully (lengths included) before counting it as a message of its kind.
        let msg = match attr {
            Req::ATTR_ID => Msg::Req(Box::new(Req::parse(mad)?)),
            Mra::ATTR_ID => Msg::Mra(Mra::parse(mad)?),
            Rej::ATTR_ID => {
                let rej = Rej::parse(mad)?;
                rej.ari()?;
                Msg::Rej(Box::new(rej))
            }
            Rep::ATTR_ID => Msg::Rep(Box::new(Rep::parse(mad)?)),
            Rtu::ATTR_ID => Msg::Rtu(Rtu::parse(mad)?),
            Dreq::ATTR_ID => Msg::Dreq(Box::new(Dreq::parse(mad)?)),
            Drep::ATTR_ID => Msg::Drep(Drep::parse(mad)?),
            SidrReq::ATTR_ID => Msg::SidrReq(Box::new(SidrReq::parse(mad)?)),
            SidrRep::ATTR_ID => {
                let rep = SidrRep::parse(mad)?;
                if rep.additional_information_length > 72 {
                    return Err(WireError::Length {
                        what: "SIDR REP additional information",
                        len: rep.additional_information_length,
                        max: 72,
                    }
                    .into());
                }
                Msg::SidrRep(Box::new(rep))
            }
            _ => return Err(WireError::UnknownAttribute(attr).into()),
        };
        if let Some(n) = self.counters.rx_by_attr.get_mut(index) {
            *n += 1;
        }
        match msg {
            Msg::Req(req) => self.on_req(now, from, tid, req),
            Msg::Mra(mra) => self.on_mra(now, mra),
            Msg::Rej(rej) => self.on_rej(now, rej),
            Msg::Rep(rep) => self.on_rep(now, from, tid, rep),
            Msg::Rtu(rtu) => self.on_rtu(rtu),
            Msg::Dreq(dreq) => self.on_dreq(from, tid, &dreq),
            Msg::Drep(drep) => self.on_drep(now, drep),
            Msg::SidrReq(req) => self.on_sidr_req(from, tid, req),
            Msg::SidrRep(rep) => self.on_sidr_rep(rep),
        }
    }

    /// Our connection `local` that the peer's `remote` ID belongs to.
    fn exact(&self, local: u32, remote: u32) -> Result<(u32, State), RecvError> {
        match self.conns.get(&local) {
            Some(c) if c.remote_id == remote => Ok((local, c.state)),
            _ => Err(RecvError::Unmatched(local)),
        }
    }

    fn on_req(
        &mut self,
        now: Instant,
        from: MadAddr,
        tid: u64,
        req: Box<Req>,
    ) -> Result<(), RecvError> {
        let their = (req.local_comm_id, 0);
        if let Some(&local) = self.remote_ids.get(&(req.local_ca_guid, req.local_comm_id)) {
            return self.dup_req(local, from);
        }
        if let Some(&other) = self.remote_qpns.get(&(req.local_ca_guid, req.local_qpn)) {
            // The peer's QP still belongs to a connection here: refuse, and end the old one.
            let e = self.issue_rej(from, tid, their, 0, RejReason::StaleConn);
            self.stale(now, other);
            return Err(e);
        }
        if !self.listeners.contains(&req.service_id) {
            return Err(self.issue_rej(from, tid, their, 0, RejReason::InvalidServiceId));
        }
        if req.transport_service_type > 1 {
            return Err(self.issue_rej(from, tid, their, 0, RejReason::InvalidTransportType));
        }
        let Ok(local) = self.alloc_id() else {
            return Err(self.issue_rej(from, tid, their, 0, RejReason::NoResources));
        };
        let mut c = Conn::new(State::ReqRcvd, from, tid);
        c.remote_id = req.local_comm_id;
        c.remote_ca_guid = req.local_ca_guid;
        c.remote_qpn = req.local_qpn;
        c.service_id = req.service_id;
        // cm.c: the path's packet life time is the REQ's ACK timeout less one, and the
        // path's timeout that life time plus one.
        c.av_timeout = req.primary.local_ack_timeout.max(1);
        c.response_timeout = iba_time(req.local_cm_response_timeout);
        c.max_cm_retries = req.max_cm_retries;
        self.conns.insert(local, c);
        self.insert_remote(local);
        self.events.push_back(Event::ConnectRequest {
            id: ConnId(local),
            from,
            req,
        });
        Ok(())
    }

    /// A REQ for a connection that exists: an MRA or REP sent for it is sent again, in
    /// timewait the REQ is stale; otherwise it is dropped.
    fn dup_req(&mut self, local: u32, from: MadAddr) -> Result<(), RecvError> {
        let state = self.conns.get(&local).map_or(State::Idle, |c| c.state);
        match state {
            State::MraReqSent | State::RepSent | State::MraRepRcvd => self.resend_reply(local),
            State::Timewait => {
                let mad = self.format_rej(local, RejReason::StaleConn.raw(), &[], &[]);
                self.queue(from, mad);
                return Err(RecvError::Refused(RejReason::StaleConn.raw()));
            }
            _ => {}
        }
        Err(RecvError::Duplicate(ConnId(local)))
    }

    /// Connection `local`'s peer QP turned up in a new connection: an established one is
    /// disconnected (as `cm_match_req`).
    fn stale(&mut self, now: Instant, local: u32) {
        if self.conns.get(&local).map(|c| c.state) == Some(State::Established) {
            // Established is the state `disconnect` needs, so it cannot fail here.
            let _ = self.disconnect(now, ConnId(local), &[]);
        }
    }

    fn on_rep(
        &mut self,
        now: Instant,
        from: MadAddr,
        tid: u64,
        rep: Box<Rep>,
    ) -> Result<(), RecvError> {
        let local = rep.remote_comm_id;
        let Some(c) = self.conns.get(&local) else {
            return Err(RecvError::Unmatched(local));
        };
        let id = ConnId(local);
        match c.state {
            State::ReqSent | State::MraReqRcvd => {
                if self
                    .remote_ids
                    .contains_key(&(rep.local_ca_guid, rep.local_comm_id))
                {
                    return Err(RecvError::Duplicate(id));
                }
                if let Some(&other) = self.remote_qpns.get(&(rep.local_ca_guid, rep.local_qpn)) {
                    let ids = (rep.local_comm_id, local);
                    let e = self.issue_rej(from, tid, ids, 1, RejReason::StaleConn);
                    self.stale(now, other);
                    return Err(e);
                }
                let Some(c) = self.conns.get_mut(&local) else {
                    return Err(RecvError::Unmatched(local));
                };
                c.state = State::RepRcvd;
                c.remote_id = rep.local_comm_id;
                c.remote_ca_guid = rep.local_ca_guid;
                c.remote_qpn = rep.local_qpn;
                c.timer = None;
                c.av_timeout = ack_timeout(rep.target_ack_delay, c.av_timeout.saturating_sub(1));
                self.insert_remote(local);
                self.events.push_back(Event::ConnectReply { id, rep });
                Ok(())
            }
            state if c.remote_id == rep.local_comm_id => match state {
                State::Established | State::MraRepSent => {
                    self.resend_reply(local);
                    Err(RecvError::Duplicate(id))
                }
                State::Timewait => {
                    let mad = self.format_rej(local, RejReason::StaleConn.raw(), &[], &[]);
                    self.queue(from, mad);
                    Err(RecvError::Refused(RejReason::StaleConn.raw()))
                }
                // Taken already, answered by the consumer's RTU or MRA to come.
                State::RepRcvd | State::DreqSent | State::DreqRcvd => Err(RecvError::Duplicate(id)),
                state => Err(RecvError::Unexpected { id, state }),
            },
            state => Err(RecvError::Unexpected { id, state }),
        }
    }

    fn on_rtu(&mut self, rtu: Rtu) -> Result<(), RecvError> {
        let (local, state) = self.exact(rtu.remote_comm_id, rtu.local_comm_id)?;
        let id = ConnId(local);
        match state {
            State::RepSent | State::MraRepRcvd => {
                if let Some(c) = self.conns.get_mut(&local) {
                    c.state = State::Established;
                    c.timer = None;
                }
                self.events.push_back(Event::Established { id });
                Ok(())
            }
            State::Established => Err(RecvError::Duplicate(id)),
            state => Err(RecvError::Unexpected { id, state }),
        }
    }

    fn on_mra(&mut self, now: Instant, mra: Mra) -> Result<(), RecvError> {
        let local = mra.remote_comm_id;
        let (waiting, mraed_state) = match mra.message_mraed {
            // The REQ's sender does not know the peer's ID yet.
            0 => match self.conns.get(&local) {
                Some(c) if c.remote_id == 0 || c.remote_id == mra.local_comm_id => {
                    (State::ReqSent, State::MraReqRcvd)
                }
                _ => return Err(RecvError::Unmatched(local)),
            },
            1 => {
                self.exact(local, mra.local_comm_id)?;
                (State::RepSent, State::MraRepRcvd)
            }
            // An MRA of a LAP (or a reserved value): never expected without LAP.
            _ => {
                let (local, state) = self.exact(local, mra.local_comm_id)?;
                return Err(RecvError::Unexpected {
                    id: ConnId(local),
                    state,
                });
            }
        };
        let id = ConnId(local);
        let Some(c) = self.conns.get_mut(&local) else {
            return Err(RecvError::Unmatched(local));
        };
        if c.state == mraed_state {
            return Err(RecvError::Duplicate(id));
        }
        if c.state != waiting {
            return Err(RecvError::Unexpected { id, state: c.state });
        }
        // Stop resending; wait the service time plus the trip back.
        c.state = mraed_state;
        c.timer = Some(Timer::MraWait {
            at: now + iba_time(mra.service_timeout) + iba_time(c.av_timeout),
        });
        self.events.push_back(Event::MraReceived {
            id,
            service_timeout: mra.service_timeout,
        });
        Ok(())
    }

    fn on_rej(&mut self, now: Instant, rej: Box<Rej>) -> Result<(), RecvError> {
        let ari = rej.ari().unwrap_or(&[]);
        let local = if rej.reason == RejReason::Timeout.raw() && ari.len() >= 8 {
            // A timeout REJ names its sender by CA GUID (it may not know our ID).
            let mut g = [0u8; 8];
            g.copy_from_slice(&ari[..8]);
            self.remote_ids
                .get(&(u64::from_be_bytes(g), rej.local_comm_id))
                .copied()
                .ok_or(RecvError::Unmatched(rej.remote_comm_id))?
        } else if rej.message_rejected == 0 {
            match self.conns.get(&rej.remote_comm_id) {
                Some(c) if c.remote_id == 0 || c.remote_id == rej.local_comm_id => {
                    rej.remote_comm_id
                }
                _ => return Err(RecvError::Unmatched(rej.remote_comm_id)),
            }
        } else {
            self.exact(rej.remote_comm_id, rej.local_comm_id)?.0
        };
        let id = ConnId(local);
        let state = self.conns.get(&local).map_or(State::Idle, |c| c.state);
        let stale = rej.reason == RejReason::StaleConn.raw();
        match state {
            State::ReqSent
            | State::MraReqRcvd
            | State::RepSent
            | State::MraRepRcvd
            | State::ReqRcvd
            | State::MraReqSent => {
                if stale {
                    self.enter_timewait(now, local);
                } else {
                    self.remove(local);
                }
            }
            State::DreqSent | State::RepRcvd | State::MraRepSent | State::Established => {
                self.enter_timewait(now, local)
            }
            state => return Err(RecvError::Unexpected { id, state }),
        }
        self.events.push_back(Event::Rejected { id, rej });
        Ok(())
    }

    fn on_dreq(&mut self, from: MadAddr, tid: u64, dreq: &Dreq) -> Result<(), RecvError> {
        let Ok((local, state)) = self.exact(dreq.remote_comm_id, dreq.local_comm_id) else {
            // Nothing to disconnect (it ended already): say so, as `cm_issue_drep`.
            let drep = Drep {
                local_comm_id: dreq.remote_comm_id,
                remote_comm_id: dreq.local_comm_id,
                ..Drep::default()
            };
            let mut mad = [0u8; MAD_LEN];
            drep.emit(tid, &mut mad);
            self.queue(from, mad);
            return Err(RecvError::Unmatched(dreq.remote_comm_id));
        };
        let id = ConnId(local);
        let Some(c) = self.conns.get_mut(&local) else {
            return Err(RecvError::Unmatched(local));
        };
        if c.local_qpn != dreq.remote_qpn_eecn {
            return Err(RecvError::Unexpected { id, state });
        }
        match state {
            State::RepSent | State::MraRepRcvd | State::Established | State::DreqSent => {
                c.state = State::DreqRcvd;
                c.timer = None;
                c.tid = tid;
                self.events.push_back(Event::DisconnectRequest {
                    id,
                    private_data: Box::new(dreq.private_data),
                });
                Ok(())
            }
            State::Timewait => {
                let kept_drep = c
                    .last_reply
                    .as_deref()
                    .is_some_and(|m| m[16..18] == Drep::ATTR_ID.to_be_bytes());
                if kept_drep {
                    self.resend_reply(local);
                } else {
                    let drep = Drep {
                        local_comm_id: local,
                        remote_comm_id: dreq.local_comm_id,
                        ..Drep::default()
                    };
                    let mut mad = [0u8; MAD_LEN];
                    drep.emit(tid, &mut mad);
                    self.queue(from, mad);
                }
                Err(RecvError::Duplicate(id))
            }
            State::DreqRcvd => Err(RecvError::Duplicate(id)),
            state => Err(RecvError::Unexpected { id, state }),
        }
    }

    fn on_drep(&mut self, now: Instant, drep: Drep) -> Result<(), RecvError> {
        let (local, state) = self.exact(drep.remote_comm_id, drep.local_comm_id)?;
        let id = ConnId(local);
        match state {
            State::DreqSent | State::DreqRcvd => {
                self.enter_timewait(now, local);
                self.events.push_back(Event::Disconnected { id });
                Ok(())
            }
            State::Timewait => Err(RecvError::Duplicate(id)),
            state => Err(RecvError::Unexpected { id, state }),
        }
    }

    fn on_sidr_req(&mut self, from: MadAddr, tid: u64, req: Box<SidrReq>) -> Result<(), RecvError> {
        if let Some(&local) = self.sidr_remote.get(&(from.gid, req.request_id)) {
            return Err(RecvError::Duplicate(ConnId(local)));
        }
        let refuse = |status: SidrStatus| SidrRep {
            request_id: req.request_id,
            status: status.raw(),
            service_id: req.service_id,
            ..SidrRep::default()
        };
        let status = if !self.listeners.contains(&req.service_id) {
            Some(SidrStatus::ServiceIdNotSupported)
        } else {
            None
        };
        let local = match (status, self.alloc_id()) {
            (None, Ok(local)) => local,
            (status, _) => {
                let status = status.unwrap_or(SidrStatus::NoQp);
                let mut mad = [0u8; MAD_LEN];
                refuse(status).emit(tid, &mut mad);
                self.queue(from, mad);
                return Err(RecvError::Refused(u16::from(status.raw())));
            }
        };
        let mut c = Conn::new(State::SidrReqRcvd, from, tid);
        c.remote_id = req.request_id;
        c.service_id = req.service_id;
        self.conns.insert(local, c);
        self.sidr_remote.insert((from.gid, req.request_id), local);
        self.events.push_back(Event::SidrRequest {
            id: ConnId(local),
            from,
            req,
        });
        Ok(())
    }

    fn on_sidr_rep(&mut self, rep: Box<SidrRep>) -> Result<(), RecvError> {
        let local = rep.request_id;
        let Some(c) = self.conns.get(&local) else {
            return Err(RecvError::Unmatched(local));
        };
        let id = ConnId(local);
        if c.state != State::SidrReqSent {
            return Err(RecvError::Unexpected { id, state: c.state });
        }
        self.remove(local);
        self.events.push_back(Event::SidrReply { id, rep });
        Ok(())
    }
}

/// A parsed CM message.
enum Msg {
    Req(Box<Req>),
    Mra(Mra),
    Rej(Box<Rej>),
    Rep(Box<Rep>),
    Rtu(Rtu),
    Dreq(Box<Dreq>),
    Drep(Drep),
    SidrReq(Box<SidrReq>),
    SidrRep(Box<SidrRep>),
}
