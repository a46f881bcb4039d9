//! The neighbour table: what the resolver knows about each peer address (RFC 4861's
//! neighbour cache states, which Linux's ARP code shares), in a fixed number of entries
//! allocated once; a full table evicts the least recently used entry.

use std::net::IpAddr;

/// A request in flight: how many were sent and when the last one left (ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    /// Requests sent so far.
    pub attempts: u8,
    /// When the last one was sent.
    pub last_sent_ns: u64,
}

/// What the table knows about one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeighbourState {
    /// Asked for (broadcast ARP / multicast NS), no answer yet.
    Incomplete(Probe),
    /// Answered recently: the MAC is good without asking again.
    Reachable {
        /// The MAC.
        mac: [u8; 6],
        /// When an answer last confirmed it (ns).
        confirmed_ns: u64,
    },
    /// Known but not confirmed lately (aged, or heard in passing): usable, and confirmed
    /// with a unicast request when next used.
    Stale {
        /// The MAC.
        mac: [u8; 6],
        /// When it became stale (ns).
        since_ns: u64,
        /// The confirmation in flight, if any.
        probe: Option<Probe>,
    },
    /// Did not answer: resolving it fails at once until the entry is dropped, so a caller
    /// retrying in a loop does not flood the link.
    Failed {
        /// Requests that went unanswered.
        attempts: u8,
        /// When it was given up on (ns).
        at_ns: u64,
    },
}

impl NeighbourState {
    /// The MAC, if the state holds one.
    ///
    /// ```
    /// use rnic_driver::net::NeighbourState;
    ///
    /// let s = NeighbourState::Reachable { mac: [2, 0, 0, 0, 0, 2], confirmed_ns: 0 };
    /// assert_eq!(s.mac(), Some([2, 0, 0, 0, 0, 2]));
    /// ```
    pub fn mac(&self) -> Option<[u8; 6]> {
        match *self {
            NeighbourState::Reachable { mac, .. } | NeighbourState::Stale { mac, .. } => Some(mac),
            _ => None,
        }
    }
}

/// One address in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Neighbour {
    /// The address.
    pub ip: IpAddr,
    /// What is known.
    pub state: NeighbourState,
    /// When a resolve or an answer last touched it (ns): the eviction order.
    pub last_used_ns: u64,
}

/// A bounded neighbour table (see the module docs).
///
/// ```
/// use rnic_driver::net::{NeighbourState, NeighbourTable};
///
/// let mut t = NeighbourTable::new(1);
/// let s = NeighbourState::Reachable { mac: [2, 0, 0, 0, 0, 2], confirmed_ns: 0 };
/// t.insert([10, 0, 0, 2].into(), s, 0);
/// t.insert([10, 0, 0, 3].into(), s, 1); // full: the older one goes
/// assert_eq!((t.len(), t.evictions()), (1, 1));
/// assert!(t.get([10, 0, 0, 2].into()).is_none());
/// ```
#[derive(Debug, Clone)]
pub struct NeighbourTable {
    entries: Vec<Neighbour>,
    capacity: usize,
    evictions: u64,
}

impl NeighbourTable {
    /// A table of `capacity` entries (at least 1), allocated now and never again.
    ///
    /// ```
    /// # use rnic_driver::net::NeighbourTable;
    /// assert_eq!(NeighbourTable::new(0).capacity(), 1);
    /// ```
    pub fn new(capacity: usize) -> NeighbourTable {
        let capacity = capacity.max(1);
        NeighbourTable {
            entries: Vec::with_capacity(capacity),
            capacity,
            evictions: 0,
        }
    }

    /// Entries held.
    ///
    /// ```
    /// # use rnic_driver::net::NeighbourTable;
    /// assert_eq!(NeighbourTable::new(4).len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds nothing.
    ///
    /// ```
    /// # use rnic_driver::net::NeighbourTable;
    /// assert!(NeighbourTable::new(4).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The most entries it holds.
    ///
    /// ```
    /// # use rnic_driver::net::NeighbourTable;
    /// assert_eq!(NeighbourTable::new(4).capacity(), 4);
    /// ```
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Entries evicted to make room so far.
    ///
    /// ```
    /// # use rnic_driver::net::NeighbourTable;
    /// assert_eq!(NeighbourTable::new(4).evictions(), 0);
    /// ```
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    /// The entry of `ip`.
    ///
    /// ```
    /// # use rnic_driver::net::NeighbourTable;
    /// assert!(NeighbourTable::new(4).get([10, 0, 0, 1].into()).is_none());
    /// ```
    pub fn get(&self, ip: IpAddr) -> Option<&Neighbour> {
        self.entries.iter().find(|e| e.ip == ip)
    }

    /// The entry of `ip`, to change.
    pub(crate) fn get_mut(&mut self, ip: IpAddr) -> Option<&mut Neighbour> {
        self.entries.iter_mut().find(|e| e.ip == ip)
    }

    /// Every entry, in no particular order.
    ///
    /// ```
    /// # use rnic_driver::net::NeighbourTable;
    /// assert_eq!(NeighbourTable::new(4).iter().count(), 0);
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = &Neighbour> + '_ {
        self.entries.iter()
    }

    /// Every entry, to change.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Neighbour> + '_ {
        self.entries.iter_mut()
    }

    /// Entries whose requests are in flight for an address not yet known.
    pub(crate) fn incomplete(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| matches!(e.state, NeighbourState::Incomplete(_)))
            .count()
    }

    /// Sets `ip`'s state (adding an entry, and evicting the least recently used one when
    /// full: one whose resolution is not in flight if there is one).
    ///
    /// ```
    /// # use rnic_driver::net::{NeighbourState, NeighbourTable};
    /// let mut t = NeighbourTable::new(2);
    /// let s = NeighbourState::Failed { attempts: 3, at_ns: 0 };
    /// t.insert([10, 0, 0, 2].into(), s, 5);
    /// t.insert([10, 0, 0, 2].into(), s, 6); // the same entry
    /// assert_eq!(t.len(), 1);
    /// ```
    pub fn insert(&mut self, ip: IpAddr, state: NeighbourState, now_ns: u64) {
        if let Some(e) = self.get_mut(ip) {
            e.state = state;
            e.last_used_ns = now_ns;
            return;
        }
        if self.entries.len() >= self.capacity {
            let victim = self
                .lru(|e| !matches!(e.state, NeighbourState::Incomplete(_)))
                .or_else(|| self.lru(|_| true));
            if let Some(i) = victim {
                self.entries.swap_remove(i);
                self.evictions += 1;
            }
        }
        // Within capacity: the push never reallocates.
        self.entries.push(Neighbour {
            ip,
            state,
            last_used_ns: now_ns,
        });
    }

    /// The index of the least recently used entry `pick` accepts.
    fn lru(&self, pick: impl Fn(&Neighbour) -> bool) -> Option<usize> {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| pick(e))
            .min_by_key(|(_, e)| e.last_used_ns)
            .map(|(i, _)| i)
    }

    /// Drops `ip`'s entry; true if there was one.
    ///
    /// ```
    /// # use rnic_driver::net::NeighbourTable;
    /// assert!(!NeighbourTable::new(2).remove([10, 0, 0, 2].into()));
    /// ```
    pub fn remove(&mut self, ip: IpAddr) -> bool {
        match self.entries.iter().position(|e| e.ip == ip) {
            Some(i) => {
                self.entries.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// Keeps the entries `keep` accepts; returns how many it dropped.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&Neighbour) -> bool) -> usize {
        let before = self.entries.len();
        self.entries.retain(|e| keep(e));
        before - self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eviction_spares_resolutions_in_flight() {
        let mut t = NeighbourTable::new(2);
        let probe = NeighbourState::Incomplete(Probe {
            attempts: 1,
            last_sent_ns: 0,
        });
        let known = NeighbourState::Reachable {
            mac: [2, 0, 0, 0, 0, 9],
            confirmed_ns: 0,
        };
        t.insert([10, 0, 0, 1].into(), probe, 0); // oldest, but in flight
        t.insert([10, 0, 0, 2].into(), known, 1);
        t.insert([10, 0, 0, 3].into(), known, 2);
        assert!(t.get([10, 0, 0, 1].into()).is_some());
        assert!(t.get([10, 0, 0, 2].into()).is_none());
        assert_eq!((t.len(), t.evictions(), t.incomplete()), (2, 1, 1));
        let cap = t.entries.capacity();
        for i in 0..100u8 {
            t.insert([10, 1, 0, i].into(), known, 10 + u64::from(i));
        }
        assert_eq!(t.entries.capacity(), cap, "never grows");
        assert_eq!(t.len(), 2);
    }
}
