//! A table of numbered objects, as firmware hands out QPNs, CQNs and the rest.

/// Objects numbered `first .. first + capacity`. Numbers are reused after removal, lowest
/// first, or (a [`cyclic`](Table::cyclic) table, as firmware hands out QPNs) only once every
/// number after the last one handed out has been used; either way runs are reproducible.
#[derive(Debug)]
pub(crate) struct Table<T> {
    first: u32,
    slots: Vec<Option<T>>,
    capacity: u32,
    live: usize,
    /// A cyclic table's next slot to try.
    next: Option<usize>,
    /// A cyclic table's round: numbers it hands out before it comes back to free ones.
    window: usize,
}

impl<T> Table<T> {
    pub(crate) fn new(first: u32, capacity: u32) -> Self {
        Table {
            first,
            slots: Vec::new(),
            capacity,
            live: 0,
            next: None,
            window: 0,
        }
    }

    /// A table that hands out the number after the last one it handed out, round a window of
    /// `window` numbers (more when that many are live), skipping live ones, as a ConnectX
    /// does QPNs: a connection's peer remembers a closed QPN for its CM timewait and rejects
    /// a new REQ from it as a stale connection (IBTA 12.9.8.3.1), so a number just freed
    /// must not come straight back. The window bounds the slots a long run of creations and
    /// destructions leaves behind.
    pub(crate) fn cyclic(first: u32, capacity: u32, window: u32) -> Self {
        Table {
            next: Some(0),
            window: window.min(capacity) as usize,
            ..Table::new(first, capacity)
        }
    }

    /// Inserts `obj` under the next free number, or gives it back when the table is full.
    pub(crate) fn insert(&mut self, obj: T) -> Result<u32, T> {
        if self.live >= self.capacity as usize {
            return Err(obj);
        }
        let free =
            |slots: &[Option<T>], from: usize, to: usize| (from..to).find(|&i| slots[i].is_none());
        // Slots exist for numbers handed out so far; a table under capacity may make more.
        let len = self.slots.len();
        let idx = match self.next {
            // Cyclic: on from the cursor, a new number while the window has room, round from
            // the start, and a new number past the window when every slot is live.
            Some(next) => free(&self.slots, next.min(len), len)
                .or((len < self.window).then_some(len))
                .or_else(|| free(&self.slots, 0, next.min(len)))
                .or((len < self.capacity as usize).then_some(len)),
            // Lowest first.
            None => free(&self.slots, 0, len).or(Some(len)),
        };
        let Some(idx) = idx else { return Err(obj) };
        if idx == len {
            self.slots.push(None);
        }
        self.slots[idx] = Some(obj);
        self.live += 1;
        if let Some(next) = &mut self.next {
            *next = idx + 1;
        }
        Ok(self.first + idx as u32)
    }

    fn index(&self, n: u32) -> Option<usize> {
        let i = n.checked_sub(self.first)? as usize;
        (i < self.slots.len()).then_some(i)
    }

    pub(crate) fn get(&self, n: u32) -> Option<&T> {
        self.slots.get(self.index(n)?)?.as_ref()
    }

    pub(crate) fn get_mut(&mut self, n: u32) -> Option<&mut T> {
        let i = self.index(n)?;
        self.slots.get_mut(i)?.as_mut()
    }

    pub(crate) fn remove(&mut self, n: u32) -> Option<T> {
        let i = self.index(n)?;
        let obj = self.slots.get_mut(i)?.take();
        if obj.is_some() {
            self.live -= 1;
        }
        obj
    }

    /// Number of live objects.
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// Live objects with their numbers.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        let first = self.first;
        self.slots
            .iter()
            .enumerate()
            .filter_map(move |(i, s)| s.as_ref().map(|o| (first + i as u32, o)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_start_at_first_and_are_reused() {
        let mut t = Table::new(0x10, 2);
        assert_eq!(t.insert('a'), Ok(0x10));
        assert_eq!(t.insert('b'), Ok(0x11));
        assert_eq!(t.insert('c'), Err('c'));
        assert_eq!(t.remove(0x10), Some('a'));
        assert_eq!(t.remove(0x10), None);
        assert_eq!(t.get(0x0F), None);
        assert_eq!(t.insert('d'), Ok(0x10));
        assert_eq!(t.len(), 2);
        assert_eq!(t.iter().map(|(n, _)| n).collect::<Vec<_>>(), [0x10, 0x11]);
    }

    #[test]
    fn a_cyclic_table_hands_a_freed_number_out_after_the_others() {
        let mut t = Table::cyclic(0x100, 4, 4);
        assert_eq!(t.insert('a'), Ok(0x100));
        assert_eq!(t.remove(0x100), Some('a'));
        // Not 0x100 again: the numbers after it first.
        assert_eq!(t.insert('b'), Ok(0x101));
        assert_eq!(t.insert('c'), Ok(0x102));
        assert_eq!(t.insert('d'), Ok(0x103));
        // Wrapped: 0x100 is free, 0x101.. are live.
        assert_eq!(t.insert('e'), Ok(0x100));
        assert_eq!(t.insert('f'), Err('f'));
        assert_eq!(t.remove(0x102), Some('c'));
        assert_eq!(t.insert('g'), Ok(0x102));
        assert_eq!(t.len(), 4);
        // A freed number in the middle is skipped until the cursor comes round to it.
        assert_eq!(t.remove(0x101), Some('b'));
        assert_eq!(t.remove(0x103), Some('d'));
        assert_eq!(t.insert('h'), Ok(0x103));
        assert_eq!(t.insert('i'), Ok(0x101));
    }

    #[test]
    fn a_cyclic_table_goes_round_its_window_and_past_it_only_when_full() {
        let mut t = Table::cyclic(1, 8, 2);
        assert_eq!(t.insert('a'), Ok(1));
        assert_eq!(t.remove(1), Some('a'));
        assert_eq!(t.insert('b'), Ok(2));
        assert_eq!(t.remove(2), Some('b'));
        // Round the window of two: 1 again, not 3.
        assert_eq!(t.insert('c'), Ok(1));
        // Both live: past the window.
        assert_eq!(t.insert('d'), Ok(2));
        assert_eq!(t.insert('e'), Ok(3));
    }
}
