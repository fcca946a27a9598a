//! Random command sequences through a replicated shard's leader, every reply
//! compared with a real redis-server's (see `support::fuzz`), then every
//! replica's state compared: each command applies alike on every replica.

use slotraft_tests::support::fuzz;
use slotraft_tests::support::group::Group;
use slotraft_tests::support::RedisServer;
use std::time::Duration;

#[test]
fn random_commands_reply_as_redis_does_and_replicas_agree() {
    let group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let redis = RedisServer::start();
    for (protocol, seeds) in [("2", 201..203), ("3", 251..252)] {
        fuzz::run_seeds(
            fuzz::Target::Replicated,
            group.members[leader].port,
            redis.port,
            protocol,
            &fuzz::seeds(seeds),
            1500,
        );
    }
    group.assert_replicas_agree(leader, Duration::from_secs(20));
}
