//! The standalone server, driven through its real binary: RESP transcripts in both
//! protocol versions, real clients, redis-cli.

mod t10_protocol;
mod t20_clients;
mod t30_redis_cli;
mod t40_server_commands;
mod t45_diagnostics;
mod t46_persistence;
mod t47_acl_and_admin;
mod t48_tracking;
mod t49_migrate;
mod t50_differential;
mod t55_random_differential;
mod t60_blocking;
mod t62_stream_blocking;
mod t64_pause;
mod t70_transactions;
mod t80_scripting;
mod t90_pubsub;
mod t95_eviction;
