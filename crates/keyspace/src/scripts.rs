//! What the keyspace knows about scripting: the replicated script store (the
//! bodies of cached scripts and the code of function libraries), and the seam
//! through which the scripting crate runs EVAL, SCRIPT, FCALL and FUNCTION.
//!
//! The keyspace stays free of Lua: it stores code as bytes, snapshots and
//! digests it like any other state, and hands script commands to a
//! [`ScriptEngine`] built by the factory in [`crate::KeyspaceConfig`]. The
//! engine's compiled functions are derived data, rebuilt from the store on
//! demand, so a cloned or freshly loaded keyspace starts without one.

use crate::{Context, Keyspace};
use bytes::Bytes;
use resp::Frame;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Most scripts one keyspace caches (SCRIPT LOAD and EVAL add; SCRIPT FLUSH
/// empties). A load beyond it is refused rather than growing without bound.
pub const MAX_CACHED_SCRIPTS: usize = 100_000;

/// Most function libraries one keyspace holds.
pub const MAX_LIBRARIES: usize = 10_000;

/// Replicated scripting state: cached script bodies by SHA1 (40 lowercase hex
/// digits) and function library code by library name. Ordered maps, so
/// snapshots and digests are functions of the content alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScriptStore {
    pub scripts: BTreeMap<Bytes, Bytes>,
    pub libraries: BTreeMap<Bytes, Bytes>,
    /// Bumped on every change of `libraries`, so an engine knows when its
    /// compiled functions are stale. Not part of the content.
    pub libraries_version: u64,
}

impl ScriptStore {
    pub fn is_empty(&self) -> bool {
        self.scripts.is_empty() && self.libraries.is_empty()
    }
}

/// Runs the scripting commands of a keyspace. Implemented by the scripting
/// crate; the keyspace lends it itself for the duration of one command.
pub trait ScriptEngine: Send {
    /// Runs EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT LOAD/EXISTS/FLUSH,
    /// FCALL, FCALL_RO or a FUNCTION subcommand (`arguments[0]` names it).
    fn execute(
        &mut self,
        keyspace: &mut Keyspace,
        context: &mut Context,
        arguments: &[Bytes],
    ) -> Frame;

    /// Whether running `arguments` may take long (a script not run before,
    /// or one whose last run was long): the node then runs it off the
    /// runtime's worker, which costs a thread hand-off.
    fn may_run_long(&mut self, _keyspace: &Keyspace, _arguments: &[Bytes]) -> bool {
        true
    }

    /// Whether EVAL, EVALSHA or FCALL `arguments` is refused when memory is
    /// over the limit before it runs (Redis's `denyoom` for scripts whose
    /// declared flags allow writes and not `allow-oom`); a transaction
    /// holding one aborts at EXEC.
    fn denies_oom(&mut self, _keyspace: &Keyspace, _arguments: &[Bytes]) -> bool {
        false
    }

    /// Whether EVAL, EVALSHA or FCALL `arguments` may write (Redis's command
    /// flags for a script: a script that declares flags writes unless it
    /// declares `no-writes`; one without flags, or not found, may write).
    /// CLIENT PAUSE WRITE holds the ones that may.
    fn may_write(&mut self, _keyspace: &Keyspace, _arguments: &[Bytes]) -> bool {
        true
    }
}

/// Builds the engine of one keyspace.
pub type ScriptEngineFactory = fn(Arc<ScriptActivity>) -> Box<dyn ScriptEngine>;

/// How a keyspace gets its script engine: the factory and the activity board
/// the node watches (see [`ScriptActivity`]).
#[derive(Clone)]
pub struct ScriptingSetup {
    pub factory: ScriptEngineFactory,
    pub activity: Arc<ScriptActivity>,
}

impl std::fmt::Debug for ScriptingSetup {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("ScriptingSetup")
    }
}

/// What scripts are doing right now, shared between engines and the node:
/// engines record runs, the node's watchdog marks a long run busy (so other
/// clients get BUSY instead of waiting) and SCRIPT KILL asks a run to stop.
/// Nothing here changes what a script does on a replica: a kill is honoured
/// only by runs whose effects are not replicated (see the scripting crate).
#[derive(Debug, Default)]
pub struct ScriptActivity {
    /// Scripts running now.
    running: AtomicU32,
    /// Bumped at every run's start, so a watchdog tells one long run from
    /// many short ones.
    run_sequence: AtomicU64,
    /// Set by the watchdog while a run has lasted past the busy threshold.
    busy: AtomicBool,
    /// Whether the current run may be killed (it has not written, and its
    /// effects are not replicated).
    killable: AtomicBool,
    /// SCRIPT KILL's request, cleared when a run starts or ends.
    kill_requested: AtomicBool,
    /// Whether the current run has written.
    wrote: AtomicBool,
    /// Whether the current run is a function's (FCALL), which FUNCTION KILL
    /// stops, rather than a script's (EVAL), which SCRIPT KILL stops.
    function: AtomicBool,
    /// The running function, for FUNCTION STATS while it is busy.
    current: Mutex<Option<RunningFunction>>,
}

/// What FUNCTION STATS shows of a running function (its duration is the
/// node's to measure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningFunction {
    pub name: Bytes,
    /// The FCALL or FCALL_RO command that runs it, whole.
    pub command: Vec<Bytes>,
    /// The engine's libraries and functions when it started (nothing can load
    /// or delete any while it runs).
    pub libraries: usize,
    pub functions: usize,
}

impl ScriptActivity {
    pub fn new() -> Arc<ScriptActivity> {
        Arc::new(ScriptActivity::default())
    }

    pub fn start(&self, killable: bool, function: bool) {
        self.kill_requested.store(false, Ordering::SeqCst);
        self.wrote.store(false, Ordering::SeqCst);
        self.killable.store(killable, Ordering::SeqCst);
        self.function.store(function, Ordering::SeqCst);
        self.run_sequence.fetch_add(1, Ordering::SeqCst);
        self.running.fetch_add(1, Ordering::SeqCst);
    }

    /// Records the function a run (just started) executes.
    pub fn describe(&self, function: RunningFunction) {
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(function);
    }

    /// The running function, if a function is running.
    pub fn running_function(&self) -> Option<RunningFunction> {
        if self.running.load(Ordering::SeqCst) == 0 {
            return None;
        }
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn finish(&self) {
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.running.fetch_sub(1, Ordering::SeqCst);
        self.busy.store(false, Ordering::SeqCst);
        self.kill_requested.store(false, Ordering::SeqCst);
        self.killable.store(false, Ordering::SeqCst);
    }

    /// The current (killable) run wrote: from now on it may not be killed.
    pub fn record_write(&self) {
        self.wrote.store(true, Ordering::SeqCst);
        self.killable.store(false, Ordering::SeqCst);
    }

    pub fn has_written(&self) -> bool {
        self.wrote.load(Ordering::SeqCst)
    }

    /// (whether a script runs, the latest run's sequence number).
    pub fn current_run(&self) -> Option<u64> {
        (self.running.load(Ordering::SeqCst) > 0).then(|| self.run_sequence.load(Ordering::SeqCst))
    }

    pub fn set_busy(&self, busy: bool) {
        self.busy.store(busy, Ordering::SeqCst);
    }

    pub fn is_busy(&self) -> bool {
        self.busy.load(Ordering::SeqCst) && self.running.load(Ordering::SeqCst) > 0
    }

    pub fn is_killable(&self) -> bool {
        self.killable.load(Ordering::SeqCst)
    }

    /// Whether the current (or latest) run is a function's.
    pub fn is_function(&self) -> bool {
        self.function.load(Ordering::SeqCst)
    }

    /// Asks the running script to stop; the engine checks at its next hook.
    pub fn request_kill(&self) {
        self.kill_requested.store(true, Ordering::SeqCst);
    }

    pub fn kill_requested(&self) -> bool {
        self.kill_requested.load(Ordering::SeqCst)
    }
}

/// Holds a keyspace's engine. Cloning a keyspace does not clone its engine:
/// the copy builds its own on first use (compiled code is derived data). The
/// mutex only makes the slot shareable between threads (the keyspace is
/// behind its own lock); it is reached through `get_mut`, never locked.
#[derive(Default)]
pub(crate) struct EngineSlot(Mutex<Option<Box<dyn ScriptEngine>>>);

impl Clone for EngineSlot {
    fn clone(&self) -> Self {
        EngineSlot::default()
    }
}

impl EngineSlot {
    fn slot(&mut self) -> &mut Option<Box<dyn ScriptEngine>> {
        self.0
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Keyspace {
    /// Lends the keyspace to its engine (built on first use) for `work`;
    /// `None` when the keyspace has no scripting.
    fn with_engine<R>(
        &mut self,
        work: impl FnOnce(&mut dyn ScriptEngine, &mut Keyspace) -> R,
    ) -> Option<R> {
        let mut engine = match self.engine.slot().take() {
            Some(engine) => engine,
            None => {
                let setup = self.config.scripting.as_ref()?;
                (setup.factory)(setup.activity.clone())
            }
        };
        let result = work(engine.as_mut(), self);
        *self.engine.slot() = Some(engine);
        Some(result)
    }

    /// See [`ScriptEngine::denies_oom`]; false when there is no engine.
    pub fn script_denies_oom(&mut self, arguments: &[Bytes]) -> bool {
        self.with_engine(|engine, keyspace| engine.denies_oom(keyspace, arguments))
            .unwrap_or(false)
    }

    /// See [`ScriptEngine::may_write`]; true when there is no engine.
    pub fn script_may_write(&mut self, arguments: &[Bytes]) -> bool {
        self.with_engine(|engine, keyspace| engine.may_write(keyspace, arguments))
            .unwrap_or(true)
    }

    /// See [`ScriptEngine::may_run_long`]; true when no engine can tell.
    pub fn script_may_run_long(&mut self, arguments: &[Bytes]) -> bool {
        self.with_engine(|engine, keyspace| engine.may_run_long(keyspace, arguments))
            .unwrap_or(true)
    }
}

/// The handler of every scripting command: lends the keyspace to its engine.
pub(crate) fn run_script_command(
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
) -> Frame {
    keyspace
        .with_engine(|engine, keyspace| engine.execute(keyspace, context, arguments))
        .unwrap_or_else(|| Frame::error("ERR scripting is not available on this server"))
}
