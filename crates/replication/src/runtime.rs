//! The async runtime openraft runs on: tokio, with a random source that a
//! simulation can seed.
//!
//! openraft draws election timeouts from its runtime's RNG. Stock tokio support
//! uses the thread RNG, which makes a simulated run unrepeatable. Here every draw
//! comes from one SplitMix64 sequence: process-wide, seeded from the process id
//! and the clock in production (replicas must not share timeouts); per thread,
//! seeded from the simulation's seed via [`seed_rng`] (a simulation runs all its
//! hosts on one thread, and a sweep runs several simulations side by side).
//! Everything else is tokio's.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;
use std::time::Duration;

use openraft::rt::{AsyncRuntime, OptionalSend};
use openraft_rt_tokio::TokioRuntime;
use rand::rngs::SmallRng;
use rand::SeedableRng;

/// SplitMix64's increment (the golden ratio's fractional bits).
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

static STATE: AtomicU64 = AtomicU64::new(0);
static INIT: Once = Once::new();

thread_local! {
    /// The sequence of a simulation running on this thread.
    static SEEDED: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// Restarts this thread's random sequence from `seed`. A simulation calls this
/// before building its hosts, so the same seed replays the same elections.
pub fn seed_rng(seed: u64) {
    SEEDED.with(|state| state.set(Some(seed)));
}

fn next_seed() -> u64 {
    if let Some(state) = SEEDED.with(|state| state.get()) {
        let state = state.wrapping_add(GAMMA);
        SEEDED.with(|cell| cell.set(Some(state)));
        return mix(state);
    }
    INIT.call_once(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_nanos() as u64)
            .unwrap_or(0);
        STATE.store(
            nanos ^ (u64::from(std::process::id()) << 32),
            Ordering::SeqCst,
        );
    });
    let state = STATE.fetch_add(GAMMA, Ordering::SeqCst).wrapping_add(GAMMA);
    mix(state)
}

fn mix(value: u64) -> u64 {
    let value = (value ^ (value >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let value = (value ^ (value >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    value ^ (value >> 31)
}

/// tokio with a seedable RNG; see the module documentation.
pub struct SeededTokio {
    inner: TokioRuntime,
}

impl std::fmt::Debug for SeededTokio {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("SeededTokio")
    }
}

type Inner = TokioRuntime;

impl AsyncRuntime for SeededTokio {
    type JoinError = <Inner as AsyncRuntime>::JoinError;
    type JoinHandle<T: OptionalSend + 'static> = <Inner as AsyncRuntime>::JoinHandle<T>;
    type Sleep = <Inner as AsyncRuntime>::Sleep;
    type Instant = <Inner as AsyncRuntime>::Instant;
    type TimeoutError = <Inner as AsyncRuntime>::TimeoutError;
    type Timeout<R, T: Future<Output = R> + OptionalSend> = <Inner as AsyncRuntime>::Timeout<R, T>;
    type ThreadLocalRng = SmallRng;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        Inner::spawn(tracing::Instrument::in_current_span(future))
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        Inner::sleep(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        Inner::sleep_until(deadline)
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(
        duration: Duration,
        future: F,
    ) -> Self::Timeout<R, F> {
        Inner::timeout(duration, future)
    }

    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(
        deadline: Self::Instant,
        future: F,
    ) -> Self::Timeout<R, F> {
        Inner::timeout_at(deadline, future)
    }

    fn is_panic(join_error: &Self::JoinError) -> bool {
        Inner::is_panic(join_error)
    }

    fn thread_rng() -> Self::ThreadLocalRng {
        SmallRng::seed_from_u64(next_seed())
    }

    type Mpsc = <Inner as AsyncRuntime>::Mpsc;
    type Watch = <Inner as AsyncRuntime>::Watch;
    type Oneshot = <Inner as AsyncRuntime>::Oneshot;
    type Mutex<T: OptionalSend + 'static> = <Inner as AsyncRuntime>::Mutex<T>;

    fn new(threads: usize) -> Self {
        SeededTokio {
            inner: Inner::new(threads),
        }
    }

    fn block_on<F, T>(&mut self, future: F) -> T
    where
        F: Future<Output = T>,
    {
        self.inner.block_on(future)
    }

    fn spawn_blocking<F, T>(function: F) -> impl Future<Output = Result<T, io::Error>> + Send
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let handle = tokio::task::spawn_blocking(function);
        async move { handle.await.map_err(io::Error::other) }
    }
}

/// Runs `work`, which may take long (a script), without starving the
/// runtime: on a multi-threaded tokio runtime the worker hands its other tasks
/// to another thread for the duration (`block_in_place`); elsewhere (a
/// current-thread runtime, the simulation, no runtime) it simply runs.
pub fn long_running<R>(work: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngExt;

    #[test]
    fn a_seed_replays_the_same_draws() {
        let draw = || -> Vec<u64> {
            (0..4)
                .map(|_| SeededTokio::thread_rng().random_range(150..300))
                .collect()
        };
        seed_rng(7);
        let first = draw();
        seed_rng(7);
        assert_eq!(first, draw());
        seed_rng(8);
        assert_ne!(first, draw());
    }
}
