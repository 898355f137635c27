//! `load`: the test nodes' workload image's one program: keeps `--busy-threads` threads spinning and
//! `--hold-mib` MiB of memory written (so it is resident), until it is stopped. What makes a real
//! kubelet's usage figures move in the tests of the agent's `kubelet` source.

use std::time::Duration;

use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "Burn CPU and hold memory until stopped")]
struct Args {
    /// Threads that spin without pause (each about one core).
    #[arg(long, default_value_t = 0)]
    busy_threads: u16,
    /// MiB of memory to allocate and keep written.
    #[arg(long, default_value_t = 0)]
    hold_mib: u32,
}

fn main() {
    let args = Args::parse();
    // Written page by page, so the memory counts in the container's working set.
    let held: Vec<u8> = vec![1u8; args.hold_mib as usize * 1024 * 1024];
    eprintln!(
        "load: {} busy threads, {} MiB held",
        args.busy_threads,
        held.len() / (1024 * 1024)
    );
    for _ in 0..args.busy_threads {
        std::thread::spawn(|| {
            let mut x: u64 = 0;
            loop {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        });
    }
    loop {
        std::thread::sleep(Duration::from_secs(3600));
        std::hint::black_box(&held);
    }
}
