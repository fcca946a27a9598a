//! Clusters of real `slotraft node` processes formed by `slotraft cluster
//! create`: slot routing, redirects, CLUSTER replies, real cluster clients.

mod t10_basics;
mod t20_clients;
mod t25_redis_rs;
mod t30_dev;
mod t40_reshard;
mod t50_scale;
mod t55_moves;
mod t60_pubsub;
mod t70_router;
mod t72_router_random_differential;
mod t75_router_cli;
mod t80_deploy;
