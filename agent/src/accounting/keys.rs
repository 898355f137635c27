//! Keys of watched objects: a pod's `namespace/name`, and the map both indexes keep objects in.

use super::objects::SlimPod;
use std::collections::HashMap;

/// Maps keyed by pod and node names: foldhash is several times faster than the default SipHash on
/// such keys, and seeds every map randomly, so crafted names cannot be aimed at one bucket across
/// agents.
pub type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// `namespace/name` of a pod.
pub fn pod_key(pod: &SlimPod) -> String {
    join_key(
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// `namespace/name`.
pub fn join_key(namespace: &str, name: &str) -> String {
    let mut key = String::with_capacity(namespace.len() + 1 + name.len());
    key.push_str(namespace);
    key.push('/');
    key.push_str(name);
    key
}
