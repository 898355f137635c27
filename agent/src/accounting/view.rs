//! What a source reports about a cluster: per resource, free amounts and capacities in accounting
//! units (millicores for cpu, bytes for memory, whole units otherwise).

/// The four figures of one resource.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Figures {
    /// Sum of (allocatable − requested) over the eligible nodes; may be negative when overcommitted.
    pub cluster_free: i128,
    /// Sum of allocatable over the eligible nodes.
    pub cluster_capacity: i128,
    /// The largest (allocatable − requested) of any eligible node; 0 when there is none.
    pub node_free: i128,
    /// The largest allocatable of any eligible node; 0 when there is none.
    pub node_capacity: i128,
}

/// Figures per resource (indexed like the agent's `ResourceSet`); `None` where the source cannot
/// tell (the host source knows nothing about GPUs, for example).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceView {
    pub figures: Vec<Option<Figures>>,
    pub eligible_nodes: usize,
}

impl ResourceView {
    /// Several sources combined: each figure is the smallest any source reports for that resource,
    /// so enabling another source can only make the scores more conservative, never rosier.
    pub fn combine(views: &[ResourceView]) -> ResourceView {
        let len = views.iter().map(|v| v.figures.len()).max().unwrap_or(0);
        let figures = (0..len)
            .map(|r| {
                views
                    .iter()
                    .filter_map(|v| v.figures.get(r).copied().flatten())
                    .reduce(|a, b| Figures {
                        cluster_free: a.cluster_free.min(b.cluster_free),
                        cluster_capacity: a.cluster_capacity.min(b.cluster_capacity),
                        node_free: a.node_free.min(b.node_free),
                        node_capacity: a.node_capacity.min(b.node_capacity),
                    })
            })
            .collect();
        let eligible_nodes = views.iter().map(|v| v.eligible_nodes).min().unwrap_or(0);
        ResourceView {
            figures,
            eligible_nodes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(cluster_free: i128, node_free: i128) -> Figures {
        Figures {
            cluster_free,
            cluster_capacity: 100,
            node_free,
            node_capacity: 50,
        }
    }

    #[test]
    fn combining_takes_the_most_conservative_figure_per_resource() {
        let a = ResourceView {
            figures: vec![Some(figures(40, 30)), Some(figures(7, 7)), None],
            eligible_nodes: 3,
        };
        let b = ResourceView {
            figures: vec![Some(figures(60, 10)), None, None],
            eligible_nodes: 1,
        };
        let c = ResourceView::combine(&[a, b]);
        assert_eq!(c.figures[0], Some(figures(40, 10)));
        assert_eq!(
            c.figures[1],
            Some(figures(7, 7)),
            "a figure only one source knows is kept"
        );
        assert_eq!(c.figures[2], None, "no source knows it");
        assert_eq!(c.eligible_nodes, 1);
    }
}
