//! Re-lists: a full list of one kind of object replaces what an index knew of that kind. Each
//! object carries the epoch of the re-list it was last seen in; those the list did not name again
//! are dropped when it finishes.

use super::keys::FastMap;

/// The re-lists of one kind of object.
#[derive(Debug, Default)]
pub struct Relist {
    epoch: u32,
    running: bool,
}

impl Relist {
    pub fn begin(&mut self) {
        self.running = true;
        self.epoch = self.epoch.wrapping_add(1);
    }

    /// The epoch an object seen now carries.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    pub fn running(&self) -> bool {
        self.running
    }

    /// Ends the re-list; returns the epoch of what it saw.
    pub fn finish(&mut self) -> u32 {
        self.running = false;
        self.epoch
    }

    /// The keys of `entries` not seen since the re-list began.
    pub fn unseen<V>(&self, entries: &FastMap<Box<str>, V>, seen_in: impl Fn(&V) -> u32) -> Vec<Box<str>> {
        entries
            .iter()
            .filter(|(_, e)| seen_in(e) != self.epoch)
            .map(|(k, _)| k.clone())
            .collect()
    }
}
