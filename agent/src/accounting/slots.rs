//! Node slots: each index keeps its per-node figures in a vector found by node name, and reuses a
//! slot once neither a Node object nor a pod names it (pods may name a node not seen yet).

use super::keys::FastMap;
use std::ops::{Deref, DerefMut};

/// A node as an index keeps it: `S` is what the index reads of the Node object, `X` what it keeps
/// per node beyond what every index does.
#[derive(Debug)]
pub struct NodeSlot<S, X> {
    pub name: Box<str>,
    /// `None` while the Node object is unknown (deleted, or not seen yet) but pods still name it.
    pub state: Option<S>,
    /// Sum of the effective requests of the counted pods bound to this node.
    pub requested: Box<[i128]>,
    pub pods: u32,
    /// The re-list the Node object was last seen in.
    pub epoch: u32,
    pub extra: X,
}

/// Slots by node name; indexing and iterating go through the slice of slots.
#[derive(Debug)]
pub struct NodeSlots<S, X> {
    slots: Vec<NodeSlot<S, X>>,
    vacant: Vec<u32>,
    index: FastMap<Box<str>, u32>,
}

impl<S, X> NodeSlots<S, X> {
    pub fn new() -> Self {
        Self {
            slots: Vec::new(),
            vacant: Vec::new(),
            index: FastMap::default(),
        }
    }

    pub fn slot_of(&self, name: &str) -> Option<u32> {
        self.index.get(name).copied()
    }

    /// The slot of `name`. When it has none, a new one (in a vacant place if any) without a Node
    /// object or pods, requesting nothing of `resources` resources, with `extra`.
    pub fn slot_for(&mut self, name: &str, resources: usize, epoch: u32, extra: impl FnOnce() -> X) -> u32 {
        if let Some(slot) = self.slot_of(name) {
            return slot;
        }
        let fresh = NodeSlot {
            name: name.into(),
            state: None,
            requested: vec![0; resources].into_boxed_slice(),
            pods: 0,
            epoch,
            extra: extra(),
        };
        let slot = match self.vacant.pop() {
            Some(slot) => {
                self.slots[slot as usize] = fresh;
                slot
            }
            None => {
                self.slots.push(fresh);
                (self.slots.len() - 1) as u32
            }
        };
        self.index.insert(name.into(), slot);
        slot
    }

    /// Frees `slot` for reuse when no Node object and no pod names it any more.
    pub fn release_if_unused(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        if s.state.is_none() && s.pods == 0 {
            self.index.remove(&s.name);
            s.name = Box::from("");
            self.vacant.push(slot);
        }
    }

    /// The names of known nodes not seen in re-list `epoch`.
    pub fn unseen(&self, epoch: u32) -> Vec<Box<str>> {
        self.slots
            .iter()
            .filter(|s| s.state.is_some() && s.epoch != epoch)
            .map(|s| s.name.clone())
            .collect()
    }
}

impl<S, X> Deref for NodeSlots<S, X> {
    type Target = [NodeSlot<S, X>];

    fn deref(&self) -> &Self::Target {
        &self.slots
    }
}

impl<S, X> DerefMut for NodeSlots<S, X> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.slots
    }
}
