//! Replicated shards of real processes: failover, catch-up, snapshots, history.

mod t10_failover;
mod t15_shared_entries;
mod t20_history;
mod t30_snapshots;
mod t40_blocking;
mod t45_pause;
mod t46_no_touch;
mod t50_transactions;
mod t60_scripting;
mod t70_eviction;
mod t80_random_differential;
mod t90_role_and_wait;
mod t92_migrate;
mod t95_tracking;
