//! Objects whose resources could not be read: the error, and the report both indexes keep of them
//! until they are read again, deleted or left out of a re-list. Such an object is not counted.

use super::keys::FastMap;
use super::objects::SlimNode;
use super::pod::RequestError;
use super::quantity::QuantityError;

/// An object whose resources could not be read; it is not counted while it stays that way.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ObjectError {
    #[error("pod {key}: {source}")]
    Pod {
        key: String,
        #[source]
        source: RequestError,
    },
    #[error("node {name}: allocatable {resource}: {source}")]
    Node {
        name: String,
        resource: String,
        #[source]
        source: QuantityError,
    },
}

/// The unreadable objects by key, each with the re-list epoch it was last seen in.
#[derive(Debug, Default)]
pub struct InvalidObjects {
    pods: FastMap<Box<str>, (ObjectError, u32)>,
    nodes: FastMap<Box<str>, (ObjectError, u32)>,
}

impl InvalidObjects {
    /// Passes on pod `key`'s requests as read (seen in re-list `epoch`), reporting the pod while
    /// they cannot be read.
    pub fn read_pod<T>(
        &mut self,
        key: &str,
        read: Result<T, RequestError>,
        epoch: u32,
    ) -> Result<T, ObjectError> {
        match read {
            Ok(requests) => {
                self.forget_pod(key);
                Ok(requests)
            }
            Err(source) => {
                let error = ObjectError::Pod {
                    key: key.to_owned(),
                    source,
                };
                self.pods.insert(key.into(), (error.clone(), epoch));
                Err(error)
            }
        }
    }

    /// Reads each allocatable entry of `node` with `read` (resource name, quantity) until one
    /// cannot be read, reporting the node (seen in re-list `epoch`) while one cannot.
    pub fn read_node(
        &mut self,
        node: &SlimNode,
        epoch: u32,
        mut read: impl FnMut(&str, &str) -> Result<(), QuantityError>,
    ) -> Result<(), ObjectError> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let unreadable = node.status.allocatable.0.iter().find_map(|(resource, quantity)| {
            read(resource, &quantity.0).err().map(|source| ObjectError::Node {
                name: name.to_owned(),
                resource: resource.clone(),
                source,
            })
        });
        match unreadable {
            Some(error) => {
                self.nodes.insert(name.into(), (error.clone(), epoch));
                Err(error)
            }
            None => {
                self.forget_node(name);
                Ok(())
            }
        }
    }

    pub fn forget_pod(&mut self, key: &str) {
        // Usually there are none: no need to hash the key.
        if !self.pods.is_empty() {
            self.pods.remove(key);
        }
    }

    pub fn forget_node(&mut self, name: &str) {
        self.nodes.remove(name);
    }

    /// Drops the reports of pods a re-list (`epoch`) did not list again.
    pub fn keep_pods_seen_in(&mut self, epoch: u32) {
        self.pods.retain(|_, (_, e)| *e == epoch);
    }

    /// Drops the reports of nodes a re-list (`epoch`) did not list again.
    pub fn keep_nodes_seen_in(&mut self, epoch: u32) {
        self.nodes.retain(|_, (_, e)| *e == epoch);
    }

    /// Nodes first, then pods.
    pub fn iter(&self) -> impl Iterator<Item = &ObjectError> {
        self.nodes.values().chain(self.pods.values()).map(|(e, _)| e)
    }
}
