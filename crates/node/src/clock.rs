//! The node's only reads of the wall clock. Everything below the node receives time
//! as an argument (DESIGN invariant 1); keeping the reads here makes the seam the
//! simulation replaces a single file.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// A replacement for the wall clock, set by a simulation.
static SOURCE: OnceLock<fn() -> u64> = OnceLock::new();

/// Makes `source` (Unix microseconds) this process's clock from now on: a
/// simulation runs the node on its own time. Only the first call counts;
/// false for later ones.
pub fn set_source(source: fn() -> u64) -> bool {
    SOURCE.set(source).is_ok()
}

/// Current Unix time in microseconds.
#[allow(clippy::disallowed_methods)]
pub fn unix_micros() -> u64 {
    if let Some(source) = SOURCE.get() {
        return source();
    }
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_micros() as u64)
        .unwrap_or(0)
}

/// Current Unix time in milliseconds.
pub fn unix_ms() -> u64 {
    unix_micros() / 1000
}
