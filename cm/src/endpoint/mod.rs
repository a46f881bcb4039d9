//! The CM endpoint of one port: a sans-IO state machine (no threads, sockets or clock).
//! The caller feeds it received MADs with their source ([`Endpoint::receive`]), makes the
//! consumer's calls (connect, accept, reject, ...), runs its timers ([`Endpoint::poll`] at
//! [`Endpoint::poll_at`]) and takes out MADs to send ([`Endpoint::poll_transmit`]) and
//! events ([`Endpoint::poll_event`]). Time is whatever [`Instant`] the caller passes.
//!
//! Rooms: `conn` (a connection's record), `calls` (the consumer's requests), `recv` (one
//! handler per received message), `timers` (retries, MRA waits, timewait); this file holds
//! the tables and what they share.

mod calls;
mod conn;
mod recv;
mod timers;

use crate::state::{ConnId, State};
pub use calls::{AcceptParams, ConnectParams, SidrParams};

use crate::counters::Counters;
use crate::error::{CmError, RecvError};
use crate::event::{Event, MadAddr, Transmit};
use crate::time::{Instant, iba_time};
use crate::wire::{MAD_LEN, Rej, RejReason, Req};
use conn::{Conn, Timer};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// What an endpoint is: its CA, and how it numbers what it sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// The CA's node GUID (REQ / REP's Local CA GUID, a timeout REJ's ARI).
    pub ca_guid: u64,
    /// The CA's local ACK delay, encoded (REP's Target ACK Delay; 15 for rxe).
    pub ack_delay: u8,
    /// Mixed into communication IDs so that a restarted endpoint does not reuse its old
    /// ones (the kernel's `random_id_operand`); take it from a random source.
    pub comm_id_seed: u32,
    /// The high 32 bits of the transaction IDs this endpoint starts (the MAD agent's
    /// `hi_tid`); the low 32 are the communication ID.
    pub tid_high: u32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            ca_guid: 0,
            ack_delay: 15,
            comm_id_seed: 0,
            tid_high: 1,
        }
    }
}

/// The CM of one port. See the [module docs](self).
#[derive(Debug)]
pub struct Endpoint {
    config: Config,
    /// Connections by local communication ID.
    conns: BTreeMap<u32, Conn>,
    listeners: BTreeSet<u64>,
    /// (remote CA GUID, remote communication ID) -> local ID: duplicate REQs and REPs.
    remote_ids: BTreeMap<(u64, u32), u32>,
    /// (remote CA GUID, remote QPN) -> local ID: stale connections.
    remote_qpns: BTreeMap<(u64, u32), u32>,
    /// (requester's GID, request ID) -> local ID: duplicate SIDR REQs.
    sidr_remote: BTreeMap<([u8; 16], u32), u32>,
    next_id: u32,
    tx: VecDeque<Transmit>,
    events: VecDeque<Event>,
    counters: Counters,
}

impl Endpoint {
    /// An endpoint with no listeners and no connections.
    ///
    /// ```
    /// use rnic_cm::{Config, Endpoint};
    /// let ep = Endpoint::new(Config { ca_guid: 0x5054_00ff_fe11_0002, ..Config::default() });
    /// assert_eq!(ep.poll_at(), None);
    /// ```
    pub fn new(config: Config) -> Endpoint {
        Endpoint {
            config,
            conns: BTreeMap::new(),
            listeners: BTreeSet::new(),
            remote_ids: BTreeMap::new(),
            remote_qpns: BTreeMap::new(),
            sidr_remote: BTreeMap::new(),
            next_id: 0,
            tx: VecDeque::new(),
            events: VecDeque::new(),
            counters: Counters::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Takes REQs and SIDR REQs for `service_id` (exact match).
    pub fn listen(&mut self, service_id: u64) -> Result<(), CmError> {
        if !self.listeners.insert(service_id) {
            return Err(CmError::AlreadyListening(service_id));
        }
        Ok(())
    }

    /// Stops taking requests for `service_id`; connections made through it stay.
    pub fn unlisten(&mut self, service_id: u64) -> Result<(), CmError> {
        if !self.listeners.remove(&service_id) {
            return Err(CmError::NotListening(service_id));
        }
        Ok(())
    }

    /// The state of connection `id`, `None` once it is gone.
    pub fn state(&self, id: ConnId) -> Option<State> {
        self.conns.get(&id.0).map(|c| c.state)
    }

    /// The peer's QPN and communication ID of `id` (0 until known).
    pub fn remote(&self, id: ConnId) -> Option<(u32, u32)> {
        self.conns.get(&id.0).map(|c| (c.remote_qpn, c.remote_id))
    }

    /// Connections (and SIDR requests) in the table.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// The counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The next MAD to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.tx.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`poll`](Self::poll) has work next (the earliest timer), `None` when no timer
    /// runs.
    pub fn poll_at(&self) -> Option<Instant> {
        self.conns
            .values()
            .filter_map(|c| c.timer.as_ref().map(Timer::at))
            .min()
    }

    /// Runs the timers due at `now`: retransmissions, MRA waits running out, timewait
    /// exits.
    pub fn poll(&mut self, now: Instant) {
        let due: Vec<u32> = self
            .conns
            .iter()
            .filter(|(_, c)| c.timer.as_ref().is_some_and(|t| t.at() <= now))
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            self.expire(now, id);
        }
    }

    /// Takes a MAD received on QP 1 from `from`. `Ok` when the state machine took it;
    /// otherwise why not (answered with a REJ, a DREP or a SIDR REP where the spec says
    /// so). Either way it is counted.
    pub fn receive(&mut self, now: Instant, from: MadAddr, mad: &[u8]) -> Result<(), RecvError> {
        self.counters.rx_mads += 1;
        let r = self.dispatch(now, from, mad);
        let c = &mut self.counters;
        *match r {
            Ok(()) => &mut c.rx_handled,
            Err(RecvError::Malformed(_)) => &mut c.rx_malformed,
            Err(RecvError::Unsupported { .. }) => &mut c.rx_unsupported,
            Err(RecvError::Unmatched(_)) => &mut c.rx_unmatched,
            Err(RecvError::Duplicate(_)) => &mut c.rx_duplicates,
            Err(RecvError::Unexpected { .. }) => &mut c.rx_unexpected,
            Err(RecvError::Refused(_)) => &mut c.rx_rejected,
        } += 1;
        r
    }

    // ---- what the rooms share ----

    /// A fresh local communication ID: a counter, byte-swapped and mixed with the seed as
    /// the kernel makes them (`xa_alloc_cyclic` ^ `random_id_operand` on a little-endian
    /// host), never 0 and never one in use.
    fn alloc_id(&mut self) -> Result<u32, CmError> {
        for _ in 0..1024 {
            self.next_id = self.next_id.wrapping_add(1);
            let id = self.next_id.swap_bytes() ^ self.config.comm_id_seed;
            if id != 0 && !self.conns.contains_key(&id) {
                return Ok(id);
            }
        }
        Err(CmError::NoCommId)
    }

    /// The transaction ID of a message this endpoint starts for `local_id`: `tid_high`
    /// above the communication ID in host (little-endian) byte order, as `cm_form_tid`.
    fn form_tid(&self, local_id: u32) -> u64 {
        (u64::from(self.config.tid_high) << 32) | u64::from(local_id.swap_bytes())
    }

    fn conn(&self, id: ConnId) -> Result<&Conn, CmError> {
        self.conns.get(&id.0).ok_or(CmError::UnknownId(id))
    }

    fn conn_mut(&mut self, id: ConnId) -> Result<&mut Conn, CmError> {
        self.conns.get_mut(&id.0).ok_or(CmError::UnknownId(id))
    }

    /// Queues `mad` for `to`, counted by attribute.
    fn queue(&mut self, to: MadAddr, mad: [u8; MAD_LEN]) {
        let attr = usize::from(u16::from_be_bytes([mad[16], mad[17]]));
        if let Some(n) = attr
            .checked_sub(usize::from(Req::ATTR_ID))
            .and_then(|i| self.counters.tx_by_attr.get_mut(i))
        {
            *n += 1;
        }
        self.tx.push_back(Transmit { to, mad });
    }

    /// Queues `mad` to the peer of `local` and resends it after the connection's response
    /// timeout, `max_cm_retries` times, until an answer cancels the timer.
    fn send_retried(&mut self, now: Instant, local: u32, mad: [u8; MAD_LEN]) {
        let Some(c) = self.conns.get_mut(&local) else {
            return;
        };
        let (to, timeout) = (c.peer, c.response_timeout);
        c.timer = Some(Timer::Retry {
            at: now + timeout,
            mad: Box::new(mad),
            left: c.max_cm_retries,
            timeout,
        });
        self.queue(to, mad);
    }

    /// Sends `mad` to the peer of `local` once and keeps it as the answer to a duplicate.
    fn send_reply(&mut self, local: u32, mad: [u8; MAD_LEN]) {
        let Some(c) = self.conns.get_mut(&local) else {
            return;
        };
        c.last_reply = Some(Box::new(mad));
        let to = c.peer;
        self.queue(to, mad);
    }

    /// Resends the kept answer of `local`, if any.
    fn resend_reply(&mut self, local: u32) {
        if let Some(c) = self.conns.get(&local)
            && let Some(m) = c.last_reply.as_deref()
        {
            let (to, m) = (c.peer, *m);
            self.queue(to, m);
        }
    }

    /// Enters timewait: the IDs stay known (duplicates and stale REQs are answered) for
    /// the path's timeout, as `cm_enter_timewait`.
    fn enter_timewait(&mut self, now: Instant, local: u32) {
        if let Some(c) = self.conns.get_mut(&local) {
            c.state = State::Timewait;
            c.timer = Some(Timer::Timewait {
                at: now + iba_time(c.av_timeout),
            });
        }
    }

    /// Records the peer's IDs for duplicate and stale detection.
    fn insert_remote(&mut self, local: u32) {
        if let Some(c) = self.conns.get_mut(&local) {
            c.in_remote_tables = true;
            self.remote_ids
                .insert((c.remote_ca_guid, c.remote_id), local);
            self.remote_qpns
                .insert((c.remote_ca_guid, c.remote_qpn), local);
        }
    }

    /// Forgets connection `local` (back to Idle) with its table entries.
    fn remove(&mut self, local: u32) {
        let Some(c) = self.conns.remove(&local) else {
            return;
        };
        if c.in_remote_tables {
            let id_key = (c.remote_ca_guid, c.remote_id);
            if self.remote_ids.get(&id_key) == Some(&local) {
                self.remote_ids.remove(&id_key);
            }
            let qp_key = (c.remote_ca_guid, c.remote_qpn);
            if self.remote_qpns.get(&qp_key) == Some(&local) {
                self.remote_qpns.remove(&qp_key);
            }
        }
        if matches!(c.state, State::SidrReqRcvd) {
            self.sidr_remote.remove(&(c.peer.gid, c.remote_id));
        }
    }

    /// A REJ from connection `local` in its current state (which message it refuses as
    /// `cm_format_rej` says).
    fn format_rej(
        &self,
        local: u32,
        reason: u16,
        ari: &[u8],
        private_data: &[u8],
    ) -> [u8; MAD_LEN] {
        let mut rej = Rej {
            local_comm_id: local,
            reason,
            ..Rej::default()
        };
        let mut tid = 0;
        if let Some(c) = self.conns.get(&local) {
            rej.remote_comm_id = c.remote_id;
            rej.message_rejected = match c.state {
                State::ReqRcvd | State::MraReqSent => 0,
                State::RepRcvd | State::MraRepSent => 1,
                _ => 2,
            };
            tid = c.tid;
        }
        let n = ari.len().min(rej.ari.len());
        rej.ari[..n].copy_from_slice(&ari[..n]);
        rej.rejected_info_length = n as u8;
        let n = private_data.len().min(rej.private_data.len());
        rej.private_data[..n].copy_from_slice(&private_data[..n]);
        let mut mad = [0u8; MAD_LEN];
        rej.emit(tid, &mut mad);
        mad
    }

    /// A REJ for a message no connection takes, to its sender (`cm_issue_rej`): the IDs
    /// swapped, the transaction ID echoed.
    fn issue_rej(
        &mut self,
        to: MadAddr,
        tid: u64,
        (their_id, our_id): (u32, u32),
        message_rejected: u8,
        reason: RejReason,
    ) -> RecvError {
        let rej = Rej {
            local_comm_id: our_id,
            remote_comm_id: their_id,
            message_rejected,
            reason: reason.raw(),
            ..Rej::default()
        };
        let mut mad = [0u8; MAD_LEN];
        rej.emit(tid, &mut mad);
        self.queue(to, mad);
        RecvError::Refused(reason.raw())
    }
}

/// `data` in a private-data field of `N` bytes, zero-padded.
fn private_data<const N: usize>(data: &[u8], what: &'static str) -> Result<[u8; N], CmError> {
    if data.len() > N {
        return Err(CmError::TooLong {
            what,
            len: data.len(),
            max: N,
        });
    }
    let mut out = [0u8; N];
    out[..data.len()].copy_from_slice(data);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comm_ids_skip_zero_and_ids_in_use_and_tids_carry_them_byte_swapped() {
        // A seed that makes the first ID 0: it is skipped.
        let mut ep = Endpoint::new(Config {
            comm_id_seed: 1u32.swap_bytes(),
            tid_high: 2,
            ..Config::default()
        });
        let a = ep.alloc_id().unwrap();
        assert_eq!(a, 2u32.swap_bytes() ^ 1u32.swap_bytes());
        ep.conns.insert(
            3u32.swap_bytes() ^ 1u32.swap_bytes(),
            Conn::new(State::ReqSent, MadAddr::default(), 0),
        );
        assert_eq!(
            ep.alloc_id().unwrap(),
            4u32.swap_bytes() ^ 1u32.swap_bytes()
        );
        // The kernel's REQ: communication ID 0xee8cb11f in transaction 0x2_1fb18cee.
        assert_eq!(ep.form_tid(0xee8c_b11f), 0x0000_0002_1fb1_8cee);
    }

    #[test]
    fn removing_a_connection_leaves_no_index_entry_behind() {
        let mut ep = Endpoint::new(Config::default());
        let mut c = Conn::new(State::Established, MadAddr::default(), 0);
        (c.remote_ca_guid, c.remote_id, c.remote_qpn) = (9, 8, 7);
        ep.conns.insert(5, c);
        ep.insert_remote(5);
        assert_eq!((ep.remote_ids.len(), ep.remote_qpns.len()), (1, 1));
        ep.remove(5);
        assert_eq!(
            (ep.remote_ids.len(), ep.remote_qpns.len(), ep.conns.len()),
            (0, 0, 0)
        );
    }
}
