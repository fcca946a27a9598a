//! What the smoke scenarios share: the seed they run (from `SIM_SEED`), the
//! trace of what happened that a replay must reproduce, and a scratch
//! directory per run.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Lines describing a run, in order.
pub type Trace = Arc<Mutex<Vec<String>>>;

/// `SIM_SEED` when set, else `default`.
pub fn seed_from_env(default: u64) -> u64 {
    std::env::var("SIM_SEED")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(default)
}

fn push(trace: &Trace, line: String) {
    trace
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(line);
}

/// Records an event with its simulated time.
pub fn note(trace: &Trace, line: String) {
    let elapsed = turmoil::sim_elapsed().unwrap_or_default().as_millis();
    push(trace, format!("{elapsed:>6}ms {line}"));
}

/// Records an event without its time. After a partition heals, reconnection
/// times still vary by a few milliseconds between runs of one seed
/// (suspected: h2 times locally reset streams with the real clock), so events
/// from then on are compared by content.
pub fn note_untimed(trace: &Trace, line: String) {
    push(trace, format!("{:>6}   {line}", "-"));
}

/// A hash of `lines` that is the same in every process (for a log too long
/// to compare or print whole).
pub fn hash(lines: &[String]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    lines.hash(&mut hasher);
    hasher.finish()
}

/// The trace's lines so far.
pub fn lines(trace: &Trace) -> Vec<String> {
    trace
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone()
}

/// An empty directory for one run of `label` with `seed`.
pub fn scratch_dir(label: &str, seed: u64, run: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "slotraft-{label}-{}-{seed}-{run}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}
