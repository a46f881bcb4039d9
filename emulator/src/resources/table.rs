//! A table of numbered objects, as firmware hands out QPNs, CQNs and the rest.

/// Objects numbered `first .. first + capacity`; numbers are reused after removal, lowest
/// first, so runs are reproducible.
#[derive(Debug)]
pub(crate) struct Table<T> {
    first: u32,
    slots: Vec<Option<T>>,
    capacity: u32,
    live: usize,
}

impl<T> Table<T> {
    pub(crate) fn new(first: u32, capacity: u32) -> Self {
        Table {
            first,
            slots: Vec::new(),
            capacity,
            live: 0,
        }
    }

    /// Inserts `obj` under the lowest free number, or gives it back when the table is full.
    pub(crate) fn insert(&mut self, obj: T) -> Result<u32, T> {
        let idx = match self.slots.iter().position(Option::is_none) {
            Some(i) => i,
            None if self.slots.len() < self.capacity as usize => {
                self.slots.push(None);
                self.slots.len() - 1
            }
            None => return Err(obj),
        };
        self.slots[idx] = Some(obj);
        self.live += 1;
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
}
