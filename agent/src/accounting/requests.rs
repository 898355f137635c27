//! Request vectors shared by every pod that requests the same amounts.
//!
//! The pods of one workload request the same amounts, so a cluster of 150,000 pods holds a few
//! hundred distinct request vectors, not 150,000. Each distinct vector is stored once, in one flat
//! array (no allocation per vector), and a pod keeps only its 4-byte [`RequestId`]. A vector is
//! freed for reuse when its last pod lets go of it. With every vector distinct it still costs less
//! than a boxed slice per pod (the amounts, a count and a table slot; no allocator header).

use hashbrown::HashTable;
use std::hash::BuildHasher;

/// A stored request vector; valid until its last user releases it.
pub type RequestId = u32;

#[derive(Debug)]
pub struct RequestTable {
    /// Amounts per vector (the ledger's resource count).
    width: usize,
    /// Vector `id` is `amounts[id * width..(id + 1) * width]`.
    amounts: Vec<i64>,
    /// Pods using each vector; 0 for a vacant place.
    users: Vec<u32>,
    vacant: Vec<RequestId>,
    ids: HashTable<RequestId>,
    hasher: foldhash::fast::RandomState,
}

fn slice(amounts: &[i64], width: usize, id: RequestId) -> &[i64] {
    let start = id as usize * width;
    &amounts[start..start + width]
}

impl RequestTable {
    pub fn new(width: usize) -> Self {
        RequestTable {
            width,
            amounts: Vec::new(),
            users: Vec::new(),
            vacant: Vec::new(),
            ids: HashTable::new(),
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    /// The amounts of `id`.
    pub fn get(&self, id: RequestId) -> &[i64] {
        slice(&self.amounts, self.width, id)
    }

    /// The id of `amounts` (stored if new), with one more user. `amounts` has the table's width.
    pub fn acquire(&mut self, amounts: &[i64]) -> RequestId {
        debug_assert_eq!(amounts.len(), self.width);
        let hash = self.hasher.hash_one(amounts);
        let (width, stored) = (self.width, &self.amounts);
        if let Some(&id) = self.ids.find(hash, |&id| slice(stored, width, id) == amounts) {
            self.users[id as usize] += 1;
            return id;
        }
        let id = match self.vacant.pop() {
            Some(id) => {
                let start = id as usize * width;
                self.amounts[start..start + width].copy_from_slice(amounts);
                self.users[id as usize] = 1;
                id
            }
            None => {
                self.amounts.extend_from_slice(amounts);
                self.users.push(1);
                (self.users.len() - 1) as RequestId
            }
        };
        let (stored, hasher) = (&self.amounts, &self.hasher);
        self.ids
            .insert_unique(hash, id, |&other| hasher.hash_one(slice(stored, width, other)));
        id
    }

    /// One user fewer of `id`; the vector is forgotten with its last user.
    pub fn release(&mut self, id: RequestId) {
        let users = &mut self.users[id as usize];
        *users -= 1;
        if *users > 0 {
            return;
        }
        let hash = self.hasher.hash_one(self.get(id));
        if let Ok(entry) = self.ids.find_entry(hash, |&other| other == id) {
            entry.remove();
        }
        self.vacant.push(id);
    }

    /// Distinct vectors in use.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_vectors_share_one_place_until_the_last_user_lets_go() {
        let mut t = RequestTable::new(2);
        let a = t.acquire(&[100, 5]);
        let b = t.acquire(&[100, 5]);
        let c = t.acquire(&[200, 5]);
        assert_eq!((a, t.len()), (b, 2));
        assert_ne!(a, c);
        assert_eq!((t.get(a), t.get(c)), (&[100, 5][..], &[200, 5][..]));
        t.release(a);
        assert_eq!((t.get(b), t.len()), (&[100, 5][..], 2), "one user left");
        t.release(b);
        assert_eq!(t.len(), 1);
        let d = t.acquire(&[300, 1]);
        assert_eq!(d, a, "the vacant place is reused");
        assert_eq!((t.get(d), t.get(c)), (&[300, 1][..], &[200, 5][..]));
        assert_eq!(t.acquire(&[300, 1]), d);
        assert_eq!(t.acquire(&[100, 5]), 2, "a vector freed earlier is stored anew");
    }

    #[test]
    fn many_distinct_vectors_survive_the_table_growing() {
        let mut t = RequestTable::new(3);
        let ids: Vec<RequestId> = (0..10_000).map(|i| t.acquire(&[i, i * 2, -i])).collect();
        for (i, id) in (0..10_000).zip(&ids) {
            assert_eq!(t.get(*id), &[i, i * 2, -i]);
            assert_eq!(t.acquire(&[i, i * 2, -i]), *id);
        }
        for id in &ids {
            t.release(*id);
            t.release(*id);
        }
        assert!(t.is_empty());
    }
}
