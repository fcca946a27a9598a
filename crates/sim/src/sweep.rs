//! Many seeds, run side by side on worker threads (each simulation runs on
//! one thread), summarized.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::run::{run, Config, Report};

/// What a sweep found.
pub struct Summary {
    pub seeds: u64,
    pub failures: Vec<(Config, Report)>,
    pub operations: usize,
    pub unknown: usize,
    pub faults_applied: usize,
    /// Slot migrations completed, and attempts that failed (cluster runs).
    pub migrations: (usize, usize),
    /// Cluster changes completed, and attempts that failed (cluster runs).
    pub changes: (usize, usize),
    pub simulated: Duration,
    pub wall: Duration,
}

/// Runs `seeds` seeds from `from` on `threads` threads; `template` gives every
/// setting but the seed. `progress` is called after each seed.
pub fn sweep(
    template: &Config,
    from: u64,
    seeds: u64,
    threads: usize,
    progress: &(dyn Fn(&Report) + Sync),
) -> Summary {
    let started = Instant::now();
    let next = AtomicU64::new(from);
    let reports: Mutex<Vec<(Config, Report)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| loop {
                let seed = next.fetch_add(1, Ordering::SeqCst);
                if seed >= from + seeds {
                    break;
                }
                let config = Config {
                    seed,
                    ..template.clone()
                };
                // A panic inside the simulated code is a failure of that seed.
                let report = std::panic::catch_unwind(|| run(&config)).unwrap_or_else(|panic| {
                    let text = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|text| text.to_string()))
                        .unwrap_or_default();
                    Report {
                        seed,
                        trace_hash: 0,
                        operations: 0,
                        acknowledged: 0,
                        unknown: 0,
                        failed: 0,
                        admissions: (0, 0),
                        pops: (0, 0),
                        migrations: (0, 0),
                        changes: (0, 0),
                        snapshot_files: 0,
                        faults_applied: 0,
                        fault_log: Vec::new(),
                        simulated: Duration::ZERO,
                        violations: Vec::new(),
                        error: Some(format!("panicked: {text}")),
                    }
                });
                progress(&report);
                reports
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .push((config, report));
            });
        }
    });
    let mut reports = reports
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    reports.sort_by_key(|(config, _)| config.seed);
    let total = |field: fn(&Report) -> usize| reports.iter().map(|(_, report)| field(report)).sum();
    Summary {
        seeds,
        operations: total(|report| report.operations),
        unknown: total(|report| report.unknown),
        faults_applied: total(|report| report.faults_applied),
        changes: (
            total(|report| report.changes.0),
            total(|report| report.changes.1),
        ),
        migrations: (
            total(|report| report.migrations.0),
            total(|report| report.migrations.1),
        ),
        simulated: reports.iter().map(|(_, report)| report.simulated).sum(),
        wall: started.elapsed(),
        failures: reports
            .into_iter()
            .filter(|(_, report)| !report.passed())
            .collect(),
    }
}
