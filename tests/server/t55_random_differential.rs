//! Random command sequences against a standalone node and a real
//! redis-server, every reply compared (see `support::fuzz`).

use slotraft_tests::support::fuzz;
use slotraft_tests::support::{RedisServer, Server};

fn run(protocol: &str, seeds: std::ops::Range<u64>) {
    let server = Server::start(&[]);
    let redis = RedisServer::start();
    fuzz::run_seeds(
        fuzz::Target::Standalone,
        server.port,
        redis.port,
        protocol,
        &fuzz::seeds(seeds),
        3000,
    );
}

#[test]
fn random_commands_reply_as_redis_does_resp2() {
    run("2", 1..9);
}

#[test]
fn random_commands_reply_as_redis_does_resp3() {
    run("3", 101..105);
}
