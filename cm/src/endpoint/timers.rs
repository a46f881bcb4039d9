//! A connection's timer running out: a retry resends, the last one gives up (a REQ or REP
//! with a timeout REJ, a DREQ into timewait), an MRA wait gives up, timewait ends.

use super::{Endpoint, State};
use crate::endpoint::conn::Timer;
use crate::event::Event;
use crate::state::ConnId;
use crate::time::Instant;
use crate::wire::RejReason;

impl Endpoint {
    pub(super) fn expire(&mut self, now: Instant, local: u32) {
        let Some(c) = self.conns.get_mut(&local) else {
            return;
        };
        let id = ConnId(local);
        match c.timer.take() {
            Some(Timer::Retry {
                mad, left, timeout, ..
            }) if left > 0 => {
                let to = c.peer;
                c.timer = Some(Timer::Retry {
                    at: now + timeout,
                    mad: mad.clone(),
                    left: left - 1,
                    timeout,
                });
                self.counters.tx_retries += 1;
                self.queue(to, *mad);
            }
            Some(Timer::Retry { .. }) | Some(Timer::MraWait { .. }) => {
                self.counters.timeouts += 1;
                match c.state {
                    State::DreqSent => {
                        // No DREP: the connection is over all the same.
                        self.enter_timewait(now, local);
                        self.events.push_back(Event::Disconnected { id });
                    }
                    State::SidrReqSent => {
                        self.remove(local);
                        self.events.push_back(Event::Unreachable { id });
                    }
                    _ => {
                        // REQ or REP unanswered: tell the peer, naming ourselves by CA GUID.
                        let guid = self.config.ca_guid.to_be_bytes();
                        let to = c.peer;
                        let mad = self.format_rej(local, RejReason::Timeout.raw(), &guid, &[]);
                        self.queue(to, mad);
                        self.remove(local);
                        self.events.push_back(Event::Unreachable { id });
                    }
                }
            }
            Some(Timer::Timewait { .. }) => {
                self.remove(local);
                self.events.push_back(Event::TimewaitExit { id });
            }
            None => {}
        }
    }
}
