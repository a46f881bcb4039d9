//! The QPs whose transport timers are armed, keyed by their earliest deadline: what the
//! device loop asks instead of scanning every QP, so an idle QP costs it nothing.
//!
//! An indexed binary min-heap of `(deadline, qpn)`: one entry per QP with an armed timer
//! (the earlier of its RNR wait and its local ACK timeout), and the heap position of each QP
//! by QPN, so re-arming or disarming a QP moves or removes its one entry in `O(log n)`.
//! Entries are exact (never stale), so the earliest deadline is the heap's top. The storage
//! only grows (to the highest QPN and the most QPs armed at once), so a steady flow of
//! re-arms allocates nothing.

/// Armed QP timers: see the module docs.
#[derive(Debug, Default)]
pub(crate) struct TimerQueue {
    /// The min-heap of `(deadline, qpn)`, ordered by deadline, then QPN.
    heap: Vec<(u64, u32)>,
    /// Heap index + 1 of each QP's entry, by `qpn - first` (0: no entry).
    pos: Vec<u32>,
    /// The first QPN of the QP table.
    first: u32,
    /// PSNs each armed QP has in flight, by `qpn - first` (0 for a QP without an entry).
    charge: Vec<u8>,
    /// The sum of `charge`.
    charged: u32,
}

impl TimerQueue {
    /// An empty queue for QPNs from `first` up.
    pub(crate) fn new(first: u32) -> Self {
        TimerQueue {
            first,
            ..TimerQueue::default()
        }
    }

    /// Number of QPs with an armed timer.
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether QP `qpn` has an armed timer.
    pub(crate) fn contains(&self, qpn: u32) -> bool {
        self.index_of(qpn).is_some()
    }

    /// The earliest deadline of any QP.
    pub(crate) fn earliest(&self) -> Option<u64> {
        self.heap.first().map(|e| e.0)
    }

    /// The deadline QP `qpn` is queued under.
    #[cfg(test)]
    pub(crate) fn get(&self, qpn: u32) -> Option<u64> {
        let i = self.index_of(qpn)?;
        Some(self.heap[i].0)
    }

    /// Sets QP `qpn`'s deadline (`None`: disarmed), moving or removing its entry.
    pub(crate) fn set(&mut self, qpn: u32, at: Option<u64>) {
        match (self.index_of(qpn), at) {
            (None, None) => {}
            (Some(i), Some(at)) => {
                if self.heap[i].0 != at {
                    self.heap[i].0 = at;
                    let i = self.sift_up(i);
                    self.sift_down(i);
                }
            }
            (Some(i), None) => {
                self.set_charge(qpn, 0);
                let last = self.heap.len() - 1;
                self.swap(i, last);
                self.heap.pop();
                self.set_pos(qpn, 0);
                if i < self.heap.len() {
                    let i = self.sift_up(i);
                    self.sift_down(i);
                }
            }
            (None, Some(at)) => {
                let Some(slot) = qpn.checked_sub(self.first).map(|s| s as usize) else {
                    return;
                };
                if self.pos.len() <= slot {
                    self.pos.resize(slot + 1, 0);
                    self.charge.resize(slot + 1, 0);
                }
                self.heap.push((at, qpn));
                let i = self.heap.len() - 1;
                self.set_pos(qpn, i + 1);
                self.sift_up(i);
            }
        }
    }

    /// Records that armed QP `qpn` has `psns` PSNs in flight (ignored for a QP without an
    /// entry: a QP with nothing outstanding holds none of the budget).
    pub(crate) fn set_charge(&mut self, qpn: u32, psns: u32) {
        let psns = psns.min(u32::from(u8::MAX)) as u8;
        if psns != 0 && !self.contains(qpn) {
            return;
        }
        let Some(c) = qpn
            .checked_sub(self.first)
            .and_then(|s| self.charge.get_mut(s as usize))
        else {
            return;
        };
        self.charged = self.charged - u32::from(*c) + u32::from(psns);
        *c = psns;
    }

    /// PSNs QP `qpn` has in flight, as last recorded.
    pub(crate) fn charge(&self, qpn: u32) -> u32 {
        qpn.checked_sub(self.first)
            .and_then(|s| self.charge.get(s as usize))
            .map_or(0, |c| u32::from(*c))
    }

    /// PSNs in flight over all QPs.
    pub(crate) fn charged(&self) -> u32 {
        self.charged
    }

    /// The lowest QPN among the QPs whose deadline is at or before `now` (the QP table's
    /// order, which the timer pass keeps). The due entries form the top of the heap, so
    /// this visits only them.
    pub(crate) fn lowest_due(&self, now: u64) -> Option<u32> {
        fn walk(heap: &[(u64, u32)], i: usize, now: u64, best: &mut Option<u32>) {
            let Some(&(at, qpn)) = heap.get(i) else {
                return;
            };
            if at > now {
                return;
            }
            if best.is_none_or(|b| qpn < b) {
                *best = Some(qpn);
            }
            walk(heap, 2 * i + 1, now, best);
            walk(heap, 2 * i + 2, now, best);
        }
        let mut best = None;
        walk(&self.heap, 0, now, &mut best);
        best
    }

    fn index_of(&self, qpn: u32) -> Option<usize> {
        let slot = qpn.checked_sub(self.first)? as usize;
        let p = *self.pos.get(slot)?;
        (p != 0).then(|| p as usize - 1)
    }

    fn set_pos(&mut self, qpn: u32, p: usize) {
        if let Some(s) = qpn.checked_sub(self.first).map(|s| s as usize) {
            if let Some(slot) = self.pos.get_mut(s) {
                *slot = p as u32;
            }
        }
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        let (qa, qb) = (self.heap[a].1, self.heap[b].1);
        self.set_pos(qa, a + 1);
        self.set_pos(qb, b + 1);
    }

    fn sift_up(&mut self, mut i: usize) -> usize {
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.heap[i] >= self.heap[parent] {
                break;
            }
            self.swap(i, parent);
            i = parent;
        }
        i
    }

    fn sift_down(&mut self, mut i: usize) {
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if l < self.heap.len() && self.heap[l] < self.heap[m] {
                m = l;
            }
            if r < self.heap.len() && self.heap[r] < self.heap[m] {
                m = r;
            }
            if m == i {
                return;
            }
            self.swap(i, m);
            i = m;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The queue's view checked against a plain list of deadlines.
    fn check(q: &TimerQueue, model: &[(u32, u64)]) {
        assert_eq!(q.len(), model.len());
        assert_eq!(q.earliest(), model.iter().map(|m| m.1).min());
        for &(n, at) in model {
            assert_eq!(q.get(n), Some(at));
        }
        for now in [0, 5, 10, 15, 20, 25, 100] {
            let want = model.iter().filter(|m| m.1 <= now).map(|m| m.0).min();
            assert_eq!(q.lowest_due(now), want, "now {now}");
        }
    }

    #[test]
    fn rearmed_and_disarmed_timers_are_moved_not_duplicated() {
        let mut q = TimerQueue::new(0x100);
        q.set(0x105, Some(20));
        q.set(0x101, Some(10));
        q.set(0x103, Some(10));
        check(&q, &[(0x105, 20), (0x101, 10), (0x103, 10)]);
        // Re-armed later: one entry, at the new time.
        q.set(0x101, Some(25));
        check(&q, &[(0x105, 20), (0x101, 25), (0x103, 10)]);
        // Re-armed earlier.
        q.set(0x105, Some(5));
        check(&q, &[(0x105, 5), (0x101, 25), (0x103, 10)]);
        // Disarmed: gone, and disarming again is a no-op.
        q.set(0x103, None);
        q.set(0x103, None);
        check(&q, &[(0x105, 5), (0x101, 25)]);
        // A QPN below the table is ignored.
        q.set(0x10, Some(1));
        check(&q, &[(0x105, 5), (0x101, 25)]);
        q.set(0x105, None);
        q.set(0x101, None);
        check(&q, &[]);
    }

    #[test]
    fn matches_a_scan_under_random_rearms() {
        // A small deterministic generator (xorshift), so the sequence is the same every run.
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut q = TimerQueue::new(2);
        let mut model: Vec<Option<u64>> = vec![None; 64];
        for _ in 0..5000 {
            let n = (next() % 64) as usize;
            let at = (next() % 4 != 0).then(|| next() % 30);
            q.set(n as u32 + 2, at);
            model[n] = at;
        }
        let list: Vec<(u32, u64)> = model
            .iter()
            .enumerate()
            .filter_map(|(n, at)| at.map(|a| (n as u32 + 2, a)))
            .collect();
        check(&q, &list);
    }
}
