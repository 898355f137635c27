//! The `host` source: this machine through the operating system (idle CPU, available memory), for
//! single-node and edge clusters and for running with no cluster at all. It cannot see accelerators,
//! so it reports nothing for any resource but cpu and memory.

use super::{Reading, SourceError};
use crate::accounting::resources::{CPU, MEMORY};
use crate::accounting::{Figures, ResourceSet, ResourceView};
use std::time::Duration;
use sysinfo::{CpuRefreshKind, MemoryRefreshKind, RefreshKind, System};

/// Least time between the two CPU samples a usage figure needs.
pub const MIN_SAMPLE_INTERVAL: Duration = sysinfo::MINIMUM_CPU_UPDATE_INTERVAL;

pub struct HostSource {
    system: System,
}

/// One host measurement, in accounting units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostSample {
    pub cpus: usize,
    /// Busy fraction of all CPUs since the previous sample, 0..=1.
    pub busy: f64,
    pub total_memory: u64,
    pub available_memory: u64,
}

impl HostSource {
    /// Starts measuring; the first [`HostSource::read`] should come at least [`MIN_SAMPLE_INTERVAL`]
    /// later so CPU usage covers a real interval.
    pub fn new() -> Result<Self, SourceError> {
        let kind = RefreshKind::nothing()
            .with_cpu(CpuRefreshKind::nothing().with_usage())
            .with_memory(MemoryRefreshKind::nothing().with_ram());
        let system = System::new_with_specifics(kind).map_err(|e| SourceError::Host(e.to_string()))?;
        Ok(HostSource { system })
    }

    /// CPU usage since the previous read (or since `new`), and memory now.
    pub fn sample(&mut self) -> Result<HostSample, SourceError> {
        self.system.refresh_cpu_usage();
        self.system.refresh_memory();
        let cpus = self.system.cpus().len();
        let busy = f64::from(self.system.global_cpu_usage()) / 100.0;
        let sample = HostSample {
            cpus,
            busy: if busy.is_finite() {
                busy.clamp(0.0, 1.0)
            } else {
                1.0
            },
            total_memory: self.system.total_memory(),
            available_memory: self.system.available_memory(),
        };
        if sample.cpus == 0 || sample.total_memory == 0 {
            return Err(SourceError::Host(format!(
                "the OS reported {} CPUs and {} bytes of memory",
                sample.cpus, sample.total_memory
            )));
        }
        Ok(sample)
    }

    pub fn read(&mut self, resources: &ResourceSet) -> Result<Reading, SourceError> {
        let sample = self.sample()?;
        Ok(Reading {
            source: "host",
            view: view_of(&sample, resources),
            detail: format!(
                "host: {} CPUs {:.0}% busy, {:.1} of {:.1} GiB memory available",
                sample.cpus,
                sample.busy * 100.0,
                sample.available_memory as f64 / f64::from(1u32 << 30),
                sample.total_memory as f64 / f64::from(1u32 << 30)
            ),
        })
    }
}

/// The host is one node: cluster and node figures are the same.
pub fn view_of(sample: &HostSample, resources: &ResourceSet) -> ResourceView {
    let one_node = |free: i128, capacity: i128| Figures {
        cluster_free: free,
        cluster_capacity: capacity,
        node_free: free,
        node_capacity: capacity,
    };
    let cpu_capacity = sample.cpus as i128 * 1000;
    // Rounded down: never claim a millicore that is not idle.
    let cpu_free = (cpu_capacity as f64 * (1.0 - sample.busy)).floor() as i128;
    let figures = resources
        .names()
        .iter()
        .map(|name| match name.as_str() {
            CPU => Some(one_node(cpu_free, cpu_capacity)),
            MEMORY => Some(one_node(
                i128::from(sample.available_memory),
                i128::from(sample.total_memory),
            )),
            _ => None,
        })
        .collect();
    ResourceView {
        figures,
        eligible_nodes: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_becomes_one_node_with_cpu_and_memory_only() {
        let sample = HostSample {
            cpus: 4,
            busy: 0.25,
            total_memory: 16 << 30,
            available_memory: 10 << 30,
        };
        let view = view_of(&sample, &ResourceSet::built_in());
        let cpu = view.figures[0].expect("cpu");
        assert_eq!(
            (cpu.cluster_free, cpu.cluster_capacity, cpu.node_free),
            (3000, 4000, 3000)
        );
        let mem = view.figures[1].expect("memory");
        assert_eq!((mem.cluster_free, mem.node_capacity), (10 << 30, 16 << 30));
        assert_eq!(view.figures[2], None, "the host cannot see GPUs");
        assert_eq!(view.figures[3], None);
    }

    #[test]
    fn this_machine_can_be_read() {
        let mut host = HostSource::new().expect("sysinfo works here");
        std::thread::sleep(MIN_SAMPLE_INTERVAL);
        let reading = host.read(&ResourceSet::built_in()).expect("reading");
        let cpu = reading.view.figures[0].expect("cpu");
        assert!(cpu.cluster_capacity >= 1000 && (0..=cpu.cluster_capacity).contains(&cpu.cluster_free));
        let mem = reading.view.figures[1].expect("memory");
        assert!(mem.cluster_capacity > 0 && mem.cluster_free <= mem.cluster_capacity);
    }
}
