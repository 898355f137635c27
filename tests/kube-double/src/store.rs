//! Objects, resourceVersions and watch history, plus the controllers the API server relies on
//! (garbage collector, namespace lifecycle) run synchronously after each write.

use super::{
    meta,
    registry::{Registry, Special},
    status::ApiError,
};
use serde_json::{Value, json};
use std::{
    collections::{BTreeMap, BTreeSet, HashMap, VecDeque},
    sync::Arc,
};
use tokio::sync::broadcast;

/// `(namespace or "", name)`: the storage order of the real server (etcd keys sort the same way).
pub(crate) type ObjKey = (String, String);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EventKind {
    Added,
    Modified,
    Deleted,
}

impl EventKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventKind::Added => "ADDED",
            EventKind::Modified => "MODIFIED",
            EventKind::Deleted => "DELETED",
        }
    }
}

/// One change, kept for watch replay and for rebuilding older snapshots of a list.
#[derive(Debug)]
pub(crate) struct Event {
    pub(crate) rv: u64,
    pub(crate) kind: EventKind,
    pub(crate) object: Arc<Value>,
    pub(crate) previous: Option<Arc<Value>>,
}

pub(crate) struct TypeData {
    pub(crate) objects: BTreeMap<ObjKey, Arc<Value>>,
    pub(crate) log: VecDeque<Arc<Event>>,
    /// Watches and exact lists from a resourceVersion below this get 410 Gone.
    pub(crate) compacted_through: u64,
    pub(crate) tx: broadcast::Sender<Arc<Event>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Propagation {
    Background,
    Foreground,
    Orphan,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Preconditions {
    pub(crate) uid: Option<String>,
    pub(crate) resource_version: Option<String>,
}

enum Gc {
    /// An object left storage: collect its dependents, wake foreground owners and terminating namespaces.
    Removed {
        uid: String,
        owners: Vec<String>,
        namespace: Option<String>,
    },
    Orphan(String),
    Foreground(String),
    NamespaceTerminating(String),
}

pub(crate) struct Store {
    pub(crate) registry: Arc<Registry>,
    pub(crate) rv: u64,
    window: usize,
    pub(crate) types: Vec<TypeData>,
    uids: HashMap<String, (usize, ObjKey)>,
    dependents: HashMap<String, BTreeSet<(usize, ObjKey)>>,
    gc: VecDeque<Gc>,
}

pub(crate) fn owner_uids(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_string))
        .collect()
}

impl Store {
    pub(crate) fn new(registry: Arc<Registry>, window: usize) -> Self {
        let types = registry
            .types
            .iter()
            .map(|_| TypeData {
                objects: BTreeMap::new(),
                log: VecDeque::new(),
                compacted_through: 0,
                tx: broadcast::channel(window.max(16)).0,
            })
            .collect();
        Self {
            registry,
            rv: 1,
            window,
            types,
            uids: HashMap::new(),
            dependents: HashMap::new(),
            gc: VecDeque::new(),
        }
    }

    pub(crate) fn get(&self, t: usize, key: &ObjKey) -> Option<&Arc<Value>> {
        self.types[t].objects.get(key)
    }

    pub(crate) fn namespace(&self, name: &str) -> Option<&Arc<Value>> {
        let t = self.registry.index("", "namespaces")?;
        self.get(t, &(String::new(), name.to_string()))
    }

    fn record(&mut self, t: usize, kind: EventKind, object: Arc<Value>, previous: Option<Arc<Value>>) {
        let event = Arc::new(Event {
            rv: self.rv,
            kind,
            object,
            previous,
        });
        let data = &mut self.types[t];
        data.log.push_back(event.clone());
        while data.log.len() > self.window {
            if let Some(dropped) = data.log.pop_front() {
                data.compacted_through = dropped.rv;
            }
        }
        // No receiver is fine: nobody is watching.
        let _ = data.tx.send(event);
    }

    fn index(&mut self, t: usize, key: &ObjKey, old: Option<&Value>, new: Option<&Value>) {
        let old_owners = old.map(owner_uids).unwrap_or_default();
        let new_owners = new.map(owner_uids).unwrap_or_default();
        for o in old_owners.iter().filter(|o| !new_owners.contains(o)) {
            if let Some(set) = self.dependents.get_mut(o) {
                set.remove(&(t, key.clone()));
                if set.is_empty() {
                    self.dependents.remove(o);
                }
            }
        }
        for o in new_owners.iter().filter(|o| !old_owners.contains(o)) {
            self.dependents
                .entry(o.clone())
                .or_default()
                .insert((t, key.clone()));
        }
        match (old.map(meta::uid), new.map(meta::uid)) {
            (Some(u), None) => {
                self.uids.remove(u);
            }
            (_, Some(u)) if !u.is_empty() => {
                self.uids.insert(u.to_string(), (t, key.clone()));
            }
            _ => {}
        }
    }

    /// Stores `object` under a new resourceVersion and tells watchers.
    pub(crate) fn put(&mut self, t: usize, key: ObjKey, mut object: Value) -> Arc<Value> {
        self.rv += 1;
        object["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        let object = Arc::new(object);
        let previous = self.types[t].objects.insert(key.clone(), object.clone());
        self.index(t, &key, previous.as_deref(), Some(&object));
        let kind = if previous.is_some() {
            EventKind::Modified
        } else {
            EventKind::Added
        };
        self.record(t, kind, object.clone(), previous);
        object
    }

    /// Removes an object for good; its `DELETED` event carries the deletion's resourceVersion.
    pub(crate) fn remove(&mut self, t: usize, key: &ObjKey) -> Option<Arc<Value>> {
        let previous = self.types[t].objects.remove(key)?;
        self.rv += 1;
        let mut last = (*previous).clone();
        last["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        let last = Arc::new(last);
        self.index(t, key, Some(&previous), None);
        self.record(t, EventKind::Deleted, last.clone(), Some(previous));
        let namespace = (!key.0.is_empty()).then(|| key.0.clone());
        self.gc.push_back(Gc::Removed {
            uid: meta::uid(&last).to_string(),
            owners: owner_uids(&last),
            namespace,
        });
        Some(last)
    }

    /// Forgets all watch history: any watch or exact list from an older resourceVersion gets 410.
    pub(crate) fn compact(&mut self) {
        for data in &mut self.types {
            data.log.clear();
            data.compacted_through = self.rv;
        }
    }

    /// Objects of type `t` as they were at resourceVersion `rv` (undoing later events), or 410.
    pub(crate) fn snapshot(&self, t: usize, rv: u64) -> Result<BTreeMap<ObjKey, Arc<Value>>, u64> {
        let data = &self.types[t];
        if rv < data.compacted_through {
            return Err(data.compacted_through);
        }
        let mut objects = data.objects.clone();
        for event in data.log.iter().rev().take_while(|e| e.rv > rv) {
            let key = meta::key(&event.object);
            match (&event.kind, &event.previous) {
                (EventKind::Added, _) => {
                    objects.remove(&key);
                }
                (_, Some(prev)) => {
                    objects.insert(key, prev.clone());
                }
                (_, None) => {}
            }
        }
        Ok(objects)
    }

    pub(crate) fn changed_since(&self, t: usize, rv: u64) -> bool {
        self.types[t].log.back().is_some_and(|e| e.rv > rv)
    }

    /// The API's `DELETE`: honours preconditions, finalizers and the propagation policy.
    /// Returns the object's last state and whether it is gone already.
    pub(crate) fn delete(
        &mut self,
        t: usize,
        key: &ObjKey,
        propagation: Propagation,
        preconditions: &Preconditions,
    ) -> Result<(Arc<Value>, bool), ApiError> {
        let rt = &self.registry.types[t];
        let Some(current) = self.get(t, key).cloned() else {
            return Err(ApiError::not_found(&rt.group, &rt.plural, &key.1));
        };
        if let Some(uid) = &preconditions.uid
            && uid != meta::uid(&current)
        {
            let why = format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                meta::uid(&current)
            );
            return Err(ApiError::conflict(&rt.group, &rt.plural, &key.1, &why));
        }
        if let Some(rv) = &preconditions.resource_version
            && rv != meta::resource_version(&current)
        {
            let why = format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                meta::resource_version(&current)
            );
            return Err(ApiError::conflict(&rt.group, &rt.plural, &key.1, &why));
        }
        let result = self.delete_unchecked(t, key, current, propagation);
        self.run_gc();
        Ok(result)
    }

    fn delete_unchecked(
        &mut self,
        t: usize,
        key: &ObjKey,
        current: Arc<Value>,
        propagation: Propagation,
    ) -> (Arc<Value>, bool) {
        if meta::deleting(&current) {
            return (current, false);
        }
        let rt = &self.registry.types[t];
        let is_namespace = rt.special == Special::Namespace;
        let has_generation = rt.has_generation;
        let mut object = (*current).clone();
        let mut finalizers = meta::finalizers(&object);
        let added = match propagation {
            Propagation::Orphan => Some("orphan"),
            Propagation::Foreground => Some("foregroundDeletion"),
            Propagation::Background => None,
        };
        if let Some(f) = added
            && !finalizers.iter().any(|x| x == f)
        {
            finalizers.push(f.to_string());
        }
        if finalizers.is_empty() && !is_namespace {
            let last = self.remove(t, key).unwrap_or(current);
            return (last, true);
        }
        meta::set_finalizers(&mut object, &finalizers);
        object["metadata"]["deletionTimestamp"] = json!(meta::now());
        object["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        if has_generation {
            let g = object
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if g > 0 {
                object["metadata"]["generation"] = json!(g + 1);
            }
        }
        if is_namespace {
            object["status"]["phase"] = json!("Terminating");
            self.gc.push_back(Gc::NamespaceTerminating(key.1.clone()));
        }
        let uid = meta::uid(&object).to_string();
        match propagation {
            Propagation::Orphan => self.gc.push_back(Gc::Orphan(uid)),
            Propagation::Foreground => self.gc.push_back(Gc::Foreground(uid)),
            Propagation::Background => {}
        }
        (self.put(t, key.clone(), object), false)
    }

    /// Drops one finalizer (a controller finishing its part), removing the object if it was the last.
    fn finish_finalizer(&mut self, t: usize, key: &ObjKey, finalizer: &str) {
        let Some(current) = self.get(t, key).cloned() else {
            return;
        };
        let mut finalizers = meta::finalizers(&current);
        let before = finalizers.len();
        finalizers.retain(|f| f != finalizer);
        if finalizers.len() == before {
            return;
        }
        let mut object = (*current).clone();
        meta::set_finalizers(&mut object, &finalizers);
        self.put(t, key.clone(), object);
        self.remove_if_finalized(t, key);
    }

    /// Removes a deleting object whose finalizers are all gone (after an update or a controller step).
    pub(crate) fn remove_if_finalized(&mut self, t: usize, key: &ObjKey) -> Option<Arc<Value>> {
        let current = self.get(t, key)?;
        let namespace_pending = self.registry.types[t].special == Special::Namespace
            && current
                .pointer("/spec/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty());
        if meta::deleting(current) && meta::finalizers(current).is_empty() && !namespace_pending {
            self.remove(t, key)
        } else {
            None
        }
    }

    fn lookup_uid(&self, uid: &str) -> Option<(usize, ObjKey)> {
        self.uids.get(uid).cloned()
    }

    /// Runs the garbage collector and the namespace controller until nothing is left to do.
    pub(crate) fn run_gc(&mut self) {
        while let Some(work) = self.gc.pop_front() {
            match work {
                Gc::Removed {
                    uid,
                    owners,
                    namespace,
                } => {
                    for (t, key) in self.dependents.get(&uid).cloned().unwrap_or_default() {
                        self.collect_dependent(t, &key);
                    }
                    for owner in owners {
                        self.gc.push_back(Gc::Foreground(owner));
                    }
                    if let Some(ns) = namespace
                        && self.namespace(&ns).is_some_and(|n| meta::deleting(n))
                    {
                        self.gc.push_back(Gc::NamespaceTerminating(ns));
                    }
                }
                Gc::Orphan(uid) => {
                    let Some((t, key)) = self.lookup_uid(&uid) else {
                        continue;
                    };
                    for (dt, dkey) in self.dependents.get(&uid).cloned().unwrap_or_default() {
                        self.drop_owner_reference(dt, &dkey, &uid);
                    }
                    self.finish_finalizer(t, &key, "orphan");
                }
                Gc::Foreground(uid) => {
                    let Some((t, key)) = self.lookup_uid(&uid) else {
                        continue;
                    };
                    let waiting = self.get(t, &key).is_some_and(|o| {
                        meta::deleting(o) && meta::finalizers(o).iter().any(|f| f == "foregroundDeletion")
                    });
                    if !waiting {
                        continue;
                    }
                    let dependents = self.dependents.get(&uid).cloned().unwrap_or_default();
                    for (dt, dkey) in &dependents {
                        if let Some(d) = self.get(*dt, dkey).cloned() {
                            self.delete_unchecked(*dt, dkey, d, Propagation::Foreground);
                        }
                    }
                    let blocked = self.dependents.get(&uid).is_some_and(|set| {
                        set.iter()
                            .any(|(dt, dkey)| self.get(*dt, dkey).is_some_and(|d| blocks_owner(d, &uid)))
                    });
                    if !blocked {
                        self.finish_finalizer(t, &key, "foregroundDeletion");
                    }
                }
                Gc::NamespaceTerminating(ns) => self.empty_namespace(&ns),
            }
        }
    }

    /// A dependent whose owner left: deleted when no owner remains, otherwise the dangling reference goes.
    fn collect_dependent(&mut self, t: usize, key: &ObjKey) {
        let Some(object) = self.get(t, key).cloned() else {
            return;
        };
        let owners = owner_uids(&object);
        let (alive, gone): (Vec<String>, Vec<String>) =
            owners.into_iter().partition(|u| self.uids.contains_key(u));
        if alive.is_empty() {
            self.delete_unchecked(t, key, object, Propagation::Background);
        } else {
            for uid in gone {
                self.drop_owner_reference(t, key, &uid);
            }
        }
    }

    fn drop_owner_reference(&mut self, t: usize, key: &ObjKey, owner_uid: &str) {
        let Some(object) = self.get(t, key).cloned() else {
            return;
        };
        let mut object = (*object).clone();
        if let Some(refs) = object
            .pointer_mut("/metadata/ownerReferences")
            .and_then(Value::as_array_mut)
        {
            refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(owner_uid));
            if refs.is_empty()
                && let Some(m) = object["metadata"].as_object_mut()
            {
                m.remove("ownerReferences");
            }
        }
        self.put(t, key.clone(), object);
    }

    /// The namespace controller: deletes everything inside, then lets the namespace go.
    fn empty_namespace(&mut self, ns: &str) {
        let mut remaining = false;
        for t in 0..self.types.len() {
            if !self.registry.types[t].namespaced {
                continue;
            }
            let keys: Vec<ObjKey> = self.types[t]
                .objects
                .range((ns.to_string(), String::new())..)
                .take_while(|(k, _)| k.0 == ns)
                .map(|(k, _)| k.clone())
                .collect();
            for key in keys {
                if let Some(object) = self.get(t, &key).cloned() {
                    let (_, removed) = self.delete_unchecked(t, &key, object, Propagation::Background);
                    remaining |= !removed;
                }
            }
        }
        if remaining {
            return;
        }
        let Some(t) = self.registry.index("", "namespaces") else {
            return;
        };
        let key = (String::new(), ns.to_string());
        let Some(current) = self.get(t, &key).cloned() else {
            return;
        };
        if current
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
        {
            let mut object = (*current).clone();
            object["spec"]["finalizers"] = json!([]);
            self.put(t, key.clone(), object);
        }
        self.remove_if_finalized(t, &key);
    }
}

/// Whether `dependent` holds up its owner's foreground deletion (`blockOwnerDeletion: true`).
fn blocks_owner(dependent: &Value, owner_uid: &str) -> bool {
    dependent
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|r| {
            r.get("uid").and_then(Value::as_str) == Some(owner_uid)
                && r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true)
        })
}
