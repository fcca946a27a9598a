//! Random command sequences through the router of a three-node cluster, every
//! reply compared with a real redis-server's (see `support::fuzz`): the keys
//! share one hash tag, so every command runs whole on one shard's leader,
//! through the router's links and the shard's Raft log, in RESP2 and RESP3.

use crate::t70_router::seeds;
use slotraft_tests::support::cluster::Cluster;
use slotraft_tests::support::fuzz;
use slotraft_tests::support::router::Router;
use slotraft_tests::support::RedisServer;

#[test]
fn random_commands_through_the_router_reply_as_redis_does() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let router = Router::start(&seeds(&cluster), &[]);
    router.wait_serving();
    let redis = RedisServer::start();
    for (protocol, seeds) in [("2", 301..303), ("3", 401..402)] {
        fuzz::run_seeds(
            fuzz::Target::Cluster,
            router.port,
            redis.port,
            protocol,
            &fuzz::seeds(seeds),
            1500,
        );
    }
}
