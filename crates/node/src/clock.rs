//! The node's only reads of the wall clock. Everything below the node receives time
//! as an argument (DESIGN invariant 1); keeping the reads here makes the seam the
//! simulation replaces a single file.

use std::time::{SystemTime, UNIX_EPOCH};

/// Current Unix time in microseconds.
#[allow(clippy::disallowed_methods)]
pub fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_micros() as u64)
        .unwrap_or(0)
}

/// Current Unix time in milliseconds.
pub fn unix_ms() -> u64 {
    unix_micros() / 1000
}
