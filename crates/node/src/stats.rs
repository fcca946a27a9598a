//! What a node records about the commands it runs, as Redis does per process:
//! per-command counts, time and latency histograms (INFO commandstats and
//! latencystats, LATENCY HISTOGRAM), error replies by code (INFO errorstats),
//! the slow log (SLOWLOG) and the latency monitor (LATENCY LATEST/HISTORY).
//!
//! Connections add to a [`LocalStats`] of their own, folded into the shared
//! tables once per batch of requests, so a pipeline of commands takes the
//! shared lock once. The slow log and the latency monitor are written at once
//! (only commands over a threshold reach them).
//!
//! A command's time is measured where it runs: on a standalone node its
//! execution, as Redis measures it; on a replica of a shard a write's time is
//! from its proposal to its reply (the Raft round and the log's fsync
//! included), a read's its execution on the applied state.

use crate::clients::ClientInfo;
use crate::clock;
use bytes::Bytes;
use keyspace::command::{flags, CommandSpec};
use resp::Frame;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

/// Latency histogram buckets: bucket k counts durations under `1024 << k`
/// nanoseconds (about 2^k microseconds), as Redis reports its histograms.
pub const HISTOGRAM_BUCKETS: usize = 40;

/// Most arguments a slow log entry keeps (Redis's `SLOWLOG_ENTRY_MAX_ARGC`).
const SLOWLOG_MAX_ARGUMENTS: usize = 32;
/// Most bytes of one argument a slow log entry keeps.
const SLOWLOG_MAX_ARGUMENT_BYTES: usize = 128;
/// Most commands a replica's connection times at once (a batch holds fewer).
const MAX_PENDING: usize = 4096;
/// Samples the latency monitor keeps per event (Redis's `LATENCY_TS_LEN`).
const LATENCY_SAMPLES: usize = 160;

#[derive(Clone, Copy)]
pub struct CommandStat {
    pub calls: u64,
    pub usec: u64,
    pub rejected: u64,
    pub failed: u64,
    pub histogram: [u64; HISTOGRAM_BUCKETS],
}

impl Default for CommandStat {
    fn default() -> Self {
        CommandStat {
            calls: 0,
            usec: 0,
            rejected: 0,
            failed: 0,
            histogram: [0; HISTOGRAM_BUCKETS],
        }
    }
}

impl CommandStat {
    fn merge(&mut self, other: &CommandStat) {
        self.calls += other.calls;
        self.usec += other.usec;
        self.rejected += other.rejected;
        self.failed += other.failed;
        for (mine, theirs) in self.histogram.iter_mut().zip(other.histogram.iter()) {
            *mine += theirs;
        }
    }

    fn add_call(&mut self, duration_us: u64, failed: bool) {
        self.calls += 1;
        self.usec += duration_us;
        self.failed += u64::from(failed);
        self.histogram[bucket(duration_us)] += 1;
    }

    /// The duration below which `percentile` (0-100) of the calls took, as
    /// the upper bound of its histogram bucket, in microseconds.
    pub fn percentile_us(&self, percentile: f64) -> f64 {
        let total: u64 = self.histogram.iter().sum();
        if total == 0 {
            return 0.0;
        }
        let wanted = ((percentile / 100.0) * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (index, count) in self.histogram.iter().enumerate() {
            seen += count;
            if seen >= wanted {
                return bucket_upper_us(index) as f64;
            }
        }
        bucket_upper_us(HISTOGRAM_BUCKETS - 1) as f64
    }
}

fn bucket(duration_us: u64) -> usize {
    let units = duration_us.saturating_mul(1000) / 1024;
    let index = (u64::BITS - units.leading_zeros()) as usize;
    index.min(HISTOGRAM_BUCKETS - 1)
}

/// The microseconds a histogram bucket reaches up to (1, 2, 4, 8, 16, 32, 65 ...).
pub fn bucket_upper_us(index: usize) -> u64 {
    (1024u64 << index) / 1000
}

/// How a command ended, for its statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Ran; `failed` when it answered an error.
    Ran { failed: bool },
    /// Refused before it ran (authentication, memory, a subscribed
    /// connection, a bad argument count): Redis's `rejected_calls`.
    Rejected,
    /// Queued in MULTI: counted when EXEC runs it.
    Queued,
}

/// A command a replica's connection sent whose reply is not written yet.
struct Pending {
    spec: &'static CommandSpec,
    /// Kept for the slow log when the reply may come after the request's
    /// arguments are gone (a write waits for its commit); a plain read is
    /// answered while they are still at hand, and copies them only if it
    /// turned out slow (see [`LocalStats::replied_with`]).
    arguments: Option<Vec<Bytes>>,
    started_ticks: u64,
    outcome: Outcome,
}

/// A command whose reply was written, waiting for [`Monitors::flush`].
struct Finished {
    spec: &'static CommandSpec,
    arguments: Vec<Bytes>,
    duration_us: u64,
    outcome: Outcome,
}

/// One connection's counts since its last fold into the shared tables.
///
/// Two ways of timing: a standalone node runs each command to its reply in
/// one call and times that call ([`Monitors::observe`]); a replica's
/// connection may have several commands in flight (a run of writes shares a
/// proposal), so it keeps them in order ([`LocalStats::start`]) and each
/// written reply ends the oldest ([`LocalStats::replied`]).
pub struct LocalStats {
    commands: Vec<(&'static str, CommandStat)>,
    errors: Vec<(Bytes, u64)>,
    /// How the command being run ended so far.
    pub outcome: Outcome,
    /// Time commands by their replies (replicas).
    track: bool,
    /// `slowlog-log-slower-than` when tracking began: whether a read's
    /// arguments are worth copying.
    slower_than_us: i64,
    /// `latency-monitor-threshold` when tracking began (0: off). A command
    /// faster than both thresholds is counted when its reply is written;
    /// only the others wait for [`Monitors::flush`].
    latency_threshold_ms: u64,
    pending: VecDeque<Pending>,
    finished: Vec<Finished>,
}

impl Default for LocalStats {
    fn default() -> Self {
        LocalStats {
            commands: Vec::new(),
            errors: Vec::new(),
            outcome: Outcome::Ran { failed: false },
            track: false,
            slower_than_us: 0,
            latency_threshold_ms: 0,
            pending: VecDeque::new(),
            finished: Vec::new(),
        }
    }
}

impl LocalStats {
    /// Commands are timed from [`LocalStats::start`] to their reply, and
    /// those that take the slow log's or the latency monitor's threshold
    /// (as `monitors` has them now) or longer are meant for them.
    pub fn track_replies(&mut self, monitors: &Monitors) {
        self.track = true;
        self.slower_than_us = monitors.slower_than_us();
        self.latency_threshold_ms = monitors.latency_threshold_ms();
    }

    /// A command begins (its reply comes later, in order).
    pub fn start(&mut self, spec: &'static CommandSpec, arguments: &[Bytes]) {
        self.outcome = Outcome::Ran { failed: false };
        if self.track {
            // A command that writes no reply of its own would leave its entry
            // behind: bounded, the oldest goes.
            if self.pending.len() >= MAX_PENDING {
                self.pending.pop_front();
            }
            let plain_read = matches!(spec.handler, keyspace::Handler::Keyspace(_))
                && !spec.through_log()
                && !spec.has(flags::BLOCKING);
            self.pending.push_back(Pending {
                spec,
                arguments: (!plain_read).then(|| arguments.to_vec()),
                started_ticks: clock::ticks(),
                outcome: self.outcome,
            });
        }
    }

    /// The command begun last was refused or queued rather than run.
    pub fn set_outcome(&mut self, outcome: Outcome) {
        self.outcome = outcome;
        if let Some(pending) = self.pending.back_mut() {
            pending.outcome = outcome;
        }
    }

    /// A reply was written: it ends the oldest command in flight.
    pub fn replied(&mut self, frame: &Frame) {
        self.replied_with(frame, None);
    }

    /// [`LocalStats::replied`] for a reply written while the request's
    /// `arguments` are at hand: a plain read copies them only if it was slow
    /// enough for the slow log.
    pub fn replied_with(&mut self, frame: &Frame, arguments: Option<&[Bytes]>) {
        let is_error = if let Frame::Error(text) = frame {
            self.error_reply(text);
            true
        } else {
            false
        };
        if let Outcome::Ran { failed } = &mut self.outcome {
            *failed |= is_error;
        }
        if let Some(mut pending) = self.pending.pop_front() {
            if let Outcome::Ran { failed } = &mut pending.outcome {
                *failed |= is_error;
            }
            self.finish(pending, arguments);
        }
    }

    /// The oldest command in flight stops being timed (it blocked: the wait
    /// is not its running time).
    pub fn blocked(&mut self) {
        if let Some(pending) = self.pending.pop_front() {
            self.finish(pending, None);
        }
    }

    fn finish(&mut self, pending: Pending, at_hand: Option<&[Bytes]>) {
        let duration_us = clock::ticks_to_micros(pending.started_ticks, clock::ticks());
        let slow = self.slower_than_us >= 0 && duration_us >= self.slower_than_us as u64;
        let late = self.latency_threshold_ms > 0 && duration_us / 1000 >= self.latency_threshold_ms;
        if !slow && !late {
            // Nothing for the logs: counted now, as `Monitors::observe` would.
            match pending.outcome {
                Outcome::Queued => {}
                Outcome::Rejected => self.entry(pending.spec.name).rejected += 1,
                Outcome::Ran { failed } => {
                    self.entry(pending.spec.name).add_call(duration_us, failed)
                }
            }
            return;
        }
        let arguments = match pending.arguments {
            Some(kept) => kept,
            None if slow => {
                match at_hand {
                    Some(arguments) => arguments.to_vec(),
                    // Answered by a path that no longer had them: the slow
                    // log names the command.
                    None => vec![Bytes::from_static(pending.spec.name.as_bytes())],
                }
            }
            None => Vec::new(),
        };
        self.finished.push(Finished {
            spec: pending.spec,
            arguments,
            duration_us,
            outcome: pending.outcome,
        });
    }

    fn entry(&mut self, name: &'static str) -> &mut CommandStat {
        // Names are the table's statics: pipelines repeat one command, so the
        // last entry is the usual hit.
        let found = self
            .commands
            .iter()
            .rposition(|(known, _)| std::ptr::eq(*known, name) || *known == name);
        let index = match found {
            Some(index) => index,
            None => {
                self.commands.push((name, CommandStat::default()));
                self.commands.len() - 1
            }
        };
        &mut self.commands[index].1
    }

    /// Counts an error reply by its code (the text up to the first space).
    pub fn error_reply(&mut self, text: &Bytes) {
        let end = text
            .iter()
            .position(|&byte| byte == b' ')
            .unwrap_or(text.len());
        let code = text.slice(..end.min(128));
        match self.errors.iter_mut().find(|(known, _)| *known == code) {
            Some((_, count)) => *count += 1,
            None => self.errors.push((code, 1)),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.commands.is_empty() && self.errors.is_empty() && self.finished.is_empty()
    }
}

pub struct SlowEntry {
    pub id: u64,
    pub started_s: u64,
    pub duration_us: u64,
    pub arguments: Vec<Bytes>,
    pub peer: String,
    pub name: String,
}

#[derive(Default)]
struct LatencyEvent {
    /// (Unix seconds, milliseconds), oldest first; one per second (the
    /// highest of that second).
    samples: VecDeque<(u64, u64)>,
    max_ms: u64,
}

#[derive(Default)]
struct Logs {
    slow: VecDeque<SlowEntry>,
    next_slow_id: u64,
    latency: BTreeMap<&'static str, LatencyEvent>,
}

/// The node's shared tables and the thresholds that decide what is logged
/// (kept here as atomics so a command reads no configuration lock).
pub struct Monitors {
    slower_than_us: AtomicI64,
    slowlog_max_len: AtomicU64,
    latency_threshold_ms: AtomicU64,
    pub total_error_replies: AtomicU64,
    commands: Mutex<BTreeMap<&'static str, CommandStat>>,
    errors: Mutex<BTreeMap<Bytes, u64>>,
    logs: Mutex<Logs>,
}

impl Default for Monitors {
    fn default() -> Self {
        Monitors {
            slower_than_us: AtomicI64::new(10_000),
            slowlog_max_len: AtomicU64::new(128),
            latency_threshold_ms: AtomicU64::new(0),
            total_error_replies: AtomicU64::new(0),
            commands: Mutex::default(),
            errors: Mutex::default(),
            logs: Mutex::default(),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Monitors {
    /// Takes `slowlog-log-slower-than`, `slowlog-max-len` and
    /// `latency-monitor-threshold` from the configuration.
    pub fn configure(&self, slower_than_us: i64, slowlog_max_len: u64, latency_threshold_ms: u64) {
        self.slower_than_us.store(slower_than_us, Ordering::Relaxed);
        self.slowlog_max_len
            .store(slowlog_max_len, Ordering::Relaxed);
        self.latency_threshold_ms
            .store(latency_threshold_ms, Ordering::Relaxed);
        let mut logs = lock(&self.logs);
        while logs.slow.len() as u64 > slowlog_max_len {
            logs.slow.pop_back();
        }
    }

    /// `slowlog-log-slower-than` in microseconds (negative: nothing is logged).
    pub fn slower_than_us(&self) -> i64 {
        self.slower_than_us.load(Ordering::Relaxed)
    }

    /// Records one command that started at `started_ms` (Unix milliseconds)
    /// and took `duration_us`.
    #[allow(clippy::too_many_arguments)]
    pub fn observe(
        &self,
        local: &mut LocalStats,
        spec: &'static CommandSpec,
        arguments: &[Bytes],
        client: &ClientInfo,
        started_ms: u64,
        duration_us: u64,
        outcome: Outcome,
    ) {
        let failed = match outcome {
            Outcome::Queued => return,
            Outcome::Rejected => {
                local.entry(spec.name).rejected += 1;
                return;
            }
            Outcome::Ran { failed } => failed,
        };
        local.entry(spec.name).add_call(duration_us, failed);
        let slower_than = self.slower_than_us.load(Ordering::Relaxed);
        if slower_than >= 0 && duration_us >= slower_than as u64 && !spec.has(flags::SKIP_SLOWLOG) {
            self.log_slow(arguments, client, started_ms, duration_us);
        }
        let threshold = self.latency_threshold_ms.load(Ordering::Relaxed);
        if threshold > 0 && duration_us / 1000 >= threshold {
            let event = if spec.has(flags::FAST) {
                "fast-command"
            } else {
                "command"
            };
            self.add_latency_sample(event, started_ms / 1000, duration_us / 1000);
        }
    }

    fn log_slow(
        &self,
        arguments: &[Bytes],
        client: &ClientInfo,
        started_ms: u64,
        duration_us: u64,
    ) {
        let max_len = self.slowlog_max_len.load(Ordering::Relaxed);
        if max_len == 0 {
            return;
        }
        let redacted = crate::pubsub::redacted_arguments(arguments);
        let kept = if arguments.len() > SLOWLOG_MAX_ARGUMENTS {
            SLOWLOG_MAX_ARGUMENTS - 1
        } else {
            arguments.len()
        };
        let mut logged: Vec<Bytes> = arguments[..kept]
            .iter()
            .enumerate()
            .map(|(index, argument)| {
                if redacted.contains(&index) {
                    Bytes::from_static(b"(redacted)")
                } else if argument.len() > SLOWLOG_MAX_ARGUMENT_BYTES {
                    let mut text = argument[..SLOWLOG_MAX_ARGUMENT_BYTES].to_vec();
                    text.extend_from_slice(
                        format!(
                            "... ({} more bytes)",
                            argument.len() - SLOWLOG_MAX_ARGUMENT_BYTES
                        )
                        .as_bytes(),
                    );
                    Bytes::from(text)
                } else {
                    argument.clone()
                }
            })
            .collect();
        if kept < arguments.len() {
            logged.push(Bytes::from(format!(
                "... ({} more arguments)",
                arguments.len() - kept
            )));
        }
        let name = client.details().name.clone();
        let mut logs = lock(&self.logs);
        let id = logs.next_slow_id;
        logs.next_slow_id += 1;
        logs.slow.push_front(SlowEntry {
            id,
            started_s: started_ms / 1000,
            duration_us,
            arguments: logged,
            peer: client.peer.to_string(),
            name,
        });
        while logs.slow.len() as u64 > max_len {
            logs.slow.pop_back();
        }
    }

    fn add_latency_sample(&self, event: &'static str, now_s: u64, latency_ms: u64) {
        let mut logs = lock(&self.logs);
        let series = logs.latency.entry(event).or_default();
        series.max_ms = series.max_ms.max(latency_ms);
        match series.samples.back_mut() {
            Some((second, highest)) if *second == now_s => *highest = (*highest).max(latency_ms),
            _ => {
                series.samples.push_back((now_s, latency_ms));
                if series.samples.len() > LATENCY_SAMPLES {
                    series.samples.pop_front();
                }
            }
        }
    }

    /// Folds a connection's counts into the shared tables.
    pub fn flush(&self, local: &mut LocalStats, client: &ClientInfo) {
        // Commands timed by their replies ended just now: one clock reading
        // dates them all (the slow log and latency samples keep seconds).
        let now_ms = if local.finished.is_empty() {
            0
        } else {
            clock::unix_ms()
        };
        for done in std::mem::take(&mut local.finished) {
            self.observe(
                local,
                done.spec,
                &done.arguments,
                client,
                now_ms.saturating_sub(done.duration_us / 1000),
                done.duration_us,
                done.outcome,
            );
        }
        if !local.commands.is_empty() {
            let mut commands = lock(&self.commands);
            for (name, stat) in local.commands.drain(..) {
                commands.entry(name).or_default().merge(&stat);
            }
        }
        if !local.errors.is_empty() {
            let mut errors = lock(&self.errors);
            let mut total = 0;
            for (code, count) in local.errors.drain(..) {
                total += count;
                *errors.entry(code).or_default() += count;
            }
            self.total_error_replies.fetch_add(total, Ordering::Relaxed);
        }
    }

    /// CONFIG RESETSTAT: command, error and latency statistics start over.
    pub fn reset_stats(&self) {
        lock(&self.commands).clear();
        lock(&self.errors).clear();
        self.total_error_replies.store(0, Ordering::Relaxed);
    }

    pub fn command_stats(&self) -> Vec<(&'static str, CommandStat)> {
        lock(&self.commands)
            .iter()
            .map(|(name, stat)| (*name, *stat))
            .collect()
    }

    pub fn error_stats(&self) -> Vec<(Bytes, u64)> {
        lock(&self.errors)
            .iter()
            .map(|(code, count)| (code.clone(), *count))
            .collect()
    }

    // ---- SLOWLOG -------------------------------------------------------------

    pub fn slowlog_get(&self, count: Option<usize>) -> Frame {
        let logs = lock(&self.logs);
        let count = count.unwrap_or(logs.slow.len());
        Frame::Array(
            logs.slow
                .iter()
                .take(count)
                .map(|entry| {
                    Frame::Array(vec![
                        Frame::Integer(entry.id as i64),
                        Frame::Integer(entry.started_s as i64),
                        Frame::Integer(entry.duration_us as i64),
                        Frame::Array(entry.arguments.iter().cloned().map(Frame::Bulk).collect()),
                        Frame::Bulk(Bytes::from(entry.peer.clone())),
                        Frame::Bulk(Bytes::from(entry.name.clone())),
                    ])
                })
                .collect(),
        )
    }

    pub fn slowlog_len(&self) -> usize {
        lock(&self.logs).slow.len()
    }

    pub fn slowlog_reset(&self) {
        lock(&self.logs).slow.clear();
    }

    // ---- LATENCY ------------------------------------------------------------

    pub fn latency_threshold_ms(&self) -> u64 {
        self.latency_threshold_ms.load(Ordering::Relaxed)
    }

    /// LATENCY LATEST: per event, the time and value of its latest sample and
    /// its all-time highest.
    pub fn latency_latest(&self) -> Frame {
        let logs = lock(&self.logs);
        Frame::Array(
            logs.latency
                .iter()
                .filter_map(|(event, series)| {
                    let (second, latest) = *series.samples.back()?;
                    Some(Frame::Array(vec![
                        Frame::Bulk(Bytes::from_static(event.as_bytes())),
                        Frame::Integer(second as i64),
                        Frame::Integer(latest as i64),
                        Frame::Integer(series.max_ms as i64),
                    ]))
                })
                .collect(),
        )
    }

    /// The samples of `event`, oldest first.
    pub fn latency_history(&self, event: &[u8]) -> Vec<(u64, u64)> {
        let logs = lock(&self.logs);
        logs.latency
            .iter()
            .find(|(name, _)| name.as_bytes().eq_ignore_ascii_case(event))
            .map(|(_, series)| series.samples.iter().copied().collect())
            .unwrap_or_default()
    }

    /// The all-time highest of `event`, if it has samples.
    pub fn latency_max(&self, event: &[u8]) -> Option<u64> {
        let logs = lock(&self.logs);
        logs.latency
            .iter()
            .find(|(name, _)| name.as_bytes().eq_ignore_ascii_case(event))
            .map(|(_, series)| series.max_ms)
    }

    /// LATENCY RESET: forgets the named events (every event when none is
    /// named); how many were forgotten.
    pub fn latency_reset(&self, events: &[Bytes]) -> usize {
        let mut logs = lock(&self.logs);
        if events.is_empty() {
            let count = logs.latency.len();
            logs.latency.clear();
            return count;
        }
        let mut count = 0;
        for event in events {
            let found = logs
                .latency
                .keys()
                .find(|name| name.as_bytes().eq_ignore_ascii_case(event))
                .copied();
            if let Some(name) = found {
                logs.latency.remove(name);
                count += 1;
            }
        }
        count
    }

    /// (event, samples, average ms, highest ms of the samples, all-time
    /// highest ms), for LATENCY DOCTOR.
    pub fn latency_summary(&self) -> Vec<(&'static str, usize, f64, u64, u64)> {
        let logs = lock(&self.logs);
        logs.latency
            .iter()
            .filter(|(_, series)| !series.samples.is_empty())
            .map(|(event, series)| {
                let count = series.samples.len();
                let sum: u64 = series.samples.iter().map(|(_, ms)| ms).sum();
                let highest = series.samples.iter().map(|(_, ms)| *ms).max().unwrap_or(0);
                (
                    *event,
                    count,
                    sum as f64 / count as f64,
                    highest,
                    series.max_ms,
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_double_from_one_microsecond() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1), 0);
        assert_eq!(bucket(2), 1);
        assert_eq!(bucket(3), 2);
        assert_eq!(bucket(5), 3);
        assert_eq!(bucket(u64::MAX), HISTOGRAM_BUCKETS - 1);
        let bounds: Vec<u64> = (0..8).map(bucket_upper_us).collect();
        assert_eq!(bounds, [1, 2, 4, 8, 16, 32, 65, 131]);
        for duration in [0, 1, 2, 7, 100, 5_000, 1_000_000] {
            assert!(
                duration <= bucket_upper_us(bucket(duration)) + 1,
                "{duration}"
            );
        }
    }

    #[test]
    fn percentiles_come_from_the_histogram() {
        let mut stat = CommandStat::default();
        for _ in 0..99 {
            stat.add_call(1, false);
        }
        stat.add_call(1000, true);
        assert_eq!(stat.calls, 100);
        assert_eq!(stat.failed, 1);
        assert_eq!(stat.usec, 1099);
        assert_eq!(stat.percentile_us(50.0), 1.0);
        assert_eq!(stat.percentile_us(99.0), 1.0);
        assert_eq!(stat.percentile_us(99.9), 1048.0);
    }

    #[test]
    fn error_codes_are_counted_by_their_first_word() {
        let mut local = LocalStats::default();
        local.error_reply(&Bytes::from_static(b"ERR wrong number of arguments"));
        local.error_reply(&Bytes::from_static(b"ERR syntax error"));
        local.error_reply(&Bytes::from_static(b"WRONGTYPE Operation against a key"));
        let monitors = Monitors::default();
        let client = ClientInfo::new(1, "127.0.0.1:5000".parse().unwrap(), None, 0);
        monitors.flush(&mut local, &client);
        assert!(local.is_empty());
        let errors: Vec<(String, u64)> = monitors
            .error_stats()
            .into_iter()
            .map(|(code, count)| (String::from_utf8_lossy(&code).into_owned(), count))
            .collect();
        assert_eq!(
            errors,
            [("ERR".to_string(), 2), ("WRONGTYPE".to_string(), 1)]
        );
        assert_eq!(monitors.total_error_replies.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn latency_samples_keep_one_per_second_and_the_highest() {
        let monitors = Monitors::default();
        monitors.add_latency_sample("command", 100, 5);
        monitors.add_latency_sample("command", 100, 9);
        monitors.add_latency_sample("command", 101, 3);
        assert_eq!(monitors.latency_history(b"COMMAND"), [(100, 9), (101, 3)]);
        assert_eq!(monitors.latency_max(b"command"), Some(9));
        for second in 0..200 {
            monitors.add_latency_sample("command", 1000 + second, 1);
        }
        assert_eq!(monitors.latency_history(b"command").len(), LATENCY_SAMPLES);
        assert_eq!(monitors.latency_reset(&[Bytes::from_static(b"nothing")]), 0);
        assert_eq!(monitors.latency_reset(&[]), 1);
        assert_eq!(monitors.latency_history(b"command"), []);
    }
}
