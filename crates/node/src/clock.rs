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

/// How command timings are read: the CPU's time-stamp counter where it ticks
/// at a constant rate (a read costs a few nanoseconds), else the monotonic
/// clock.
enum Timing {
    Tsc { ticks_per_micro: f64 },
    Monotonic { base: std::time::Instant },
}

static TIMING: OnceLock<Timing> = OnceLock::new();

#[cfg(target_arch = "x86_64")]
fn tsc() -> u64 {
    // SAFETY: RDTSC has no preconditions on x86-64; it only reads a counter.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[allow(clippy::disallowed_methods)]
fn calibrate() -> Timing {
    let base = std::time::Instant::now();
    #[cfg(target_arch = "x86_64")]
    {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        if cpuinfo.contains(" constant_tsc") && cpuinfo.contains(" nonstop_tsc") {
            let (start, first) = (std::time::Instant::now(), tsc());
            while start.elapsed() < std::time::Duration::from_millis(2) {
                std::hint::spin_loop();
            }
            let (elapsed, last) = (start.elapsed(), tsc());
            let ticks_per_micro = last.wrapping_sub(first) as f64 / elapsed.as_secs_f64() / 1e6;
            if ticks_per_micro.is_finite() && ticks_per_micro > 100.0 {
                return Timing::Tsc { ticks_per_micro };
            }
        }
    }
    Timing::Monotonic { base }
}

/// A reading for timing commands; differences go through [`ticks_to_micros`].
/// The first call calibrates (about 2 ms).
#[allow(clippy::disallowed_methods)]
pub fn ticks() -> u64 {
    match TIMING.get_or_init(calibrate) {
        #[cfg(target_arch = "x86_64")]
        Timing::Tsc { .. } => tsc(),
        #[cfg(not(target_arch = "x86_64"))]
        Timing::Tsc { .. } => 0,
        Timing::Monotonic { base } => base.elapsed().as_nanos() as u64,
    }
}

/// Microseconds between two [`ticks`] readings (`later` after `earlier`).
pub fn ticks_to_micros(earlier: u64, later: u64) -> u64 {
    let delta = later.saturating_sub(earlier);
    match TIMING.get_or_init(calibrate) {
        Timing::Tsc { ticks_per_micro } => (delta as f64 / ticks_per_micro) as u64,
        Timing::Monotonic { .. } => delta / 1000,
    }
}
