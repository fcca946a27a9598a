//! Plain redis-cli (no `-c`) through `slotraft router`: the everyday
//! scenarios (counters with expiry, queues, carts, tag sets, leaderboards, a
//! rate limiter and a lock in Lua, MULTI/EXEC, MGET/DEL across slots) give
//! the same output as a real redis-server; and a redis-cli session keeps
//! working while its shard's leader is killed and while its slots move.

use crate::t70_router::{leader_of, seeds, tag_for_slot};
use slotraft_tests::support::assert_cli_output_matches_redis;
use slotraft_tests::support::cluster::Cluster;
use slotraft_tests::support::router::Router;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The sliding-window limiter of the seeds, as one EVAL: KEYS[1] the window,
/// ARGV now, window length, limit.
const LIMITER: &str = "\"redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, ARGV[1] - ARGV[2]) \
local n = redis.call('ZCARD', KEYS[1]) \
if n < tonumber(ARGV[3]) then \
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[1] .. '-' .. n) \
redis.call('EXPIRE', KEYS[1], ARGV[2]) return 1 end return 0\"";

/// Compare-and-delete lock release.
const UNLOCK: &str =
    "\"if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end\"";

fn scenario() -> String {
    let mut lines = vec![
        // Counters with expiry.
        "SET page:home 0".to_owned(),
        "INCR page:home".into(),
        "INCRBY page:home 10".into(),
        "EXPIRE page:home 100".into(),
        "TTL page:home".into(),
        "PERSIST page:home".into(),
        "TTL page:home".into(),
        "GET page:home".into(),
        // A job queue.
        "LPUSH jobs:{q} job1 job2 job3".into(),
        "LLEN jobs:{q}".into(),
        "RPOP jobs:{q}".into(),
        "LMOVE jobs:{q} jobs:{q}:working RIGHT LEFT".into(),
        "LRANGE jobs:{q}:working 0 -1".into(),
        "LRANGE jobs:{q} 0 -1".into(),
        // A cart.
        "HSET cart:{u1} sku1 2 sku2 1".into(),
        "HINCRBY cart:{u1} sku1 3".into(),
        "HGET cart:{u1} sku1".into(),
        "HDEL cart:{u1} sku2".into(),
        "HLEN cart:{u1}".into(),
        "HGETALL cart:{u1}".into(),
        // Tag search with set algebra (sorted, as set order is the server's).
        "SADD tag:{t}:red a b c".into(),
        "SADD tag:{t}:big b c d".into(),
        "SINTERSTORE tag:{t}:both tag:{t}:red tag:{t}:big".into(),
        "SORT tag:{t}:both ALPHA".into(),
        "SUNIONSTORE tag:{t}:any tag:{t}:red tag:{t}:big".into(),
        "SORT tag:{t}:any ALPHA DESC LIMIT 0 3".into(),
        "SDIFF tag:{t}:red tag:{t}:big".into(),
        "SINTERCARD 2 tag:{t}:red tag:{t}:big".into(),
        "SMISMEMBER tag:{t}:red a d".into(),
        // A leaderboard.
        "ZADD board 100 alice 250 bob 175 carol".into(),
        "ZINCRBY board 100 alice".into(),
        "ZREVRANGE board 0 -1 WITHSCORES".into(),
        "ZRANK board carol".into(),
        "ZREVRANK board alice".into(),
        "ZSCORE board bob".into(),
        // Scripts: loaded once, run by hash.
        "SCRIPT LOAD \"return redis.call('INCR', KEYS[1])\"".into(),
        "EVALSHA 61636018f4e6b5817b89791bbed242f93fa089e3 1 {s}:n".into(),
        "EVALSHA 61636018f4e6b5817b89791bbed242f93fa089e3 1 {s}:n".into(),
        "EVALSHA ffffffffffffffffffffffffffffffffffffffff 1 {s}:n".into(),
        // A transaction on one slot.
        "MULTI".into(),
        "INCR {tx}:a".into(),
        "SET {tx}:b x".into(),
        "LPUSH {tx}:b y".into(),
        "EXEC".into(),
        // Multi-key commands across slots.
        "MSET m:1 a m:2 b m:3 c".into(),
        "MGET m:1 m:2 nope m:3".into(),
        "DEL m:1 m:2 nope".into(),
        "EXISTS m:1 m:2 m:3 m:3".into(),
        // A lock with a compare-and-delete release.
        "SET lock:{r} token1 NX PX 30000".into(),
        "SET lock:{r} token2 NX PX 30000".into(),
        format!("EVAL {UNLOCK} 1 lock:{{r}} token2"),
        format!("EVAL {UNLOCK} 1 lock:{{r}} token1"),
        "EXISTS lock:{r}".into(),
    ];
    // The rate limiter: 3 per 60 s window, with the time as an argument.
    for now in [1000, 1001, 1002, 1003, 1100] {
        lines.push(format!("EVAL {LIMITER} 1 rate:{{user1}} {now} 60 3"));
    }
    lines.push("ZCARD rate:{user1}".into());
    lines.push("DBSIZE".into());
    lines.push("FLUSHALL".into());
    lines.push("DBSIZE".into());
    let mut script = lines.join("\n");
    script.push('\n');
    script
}

#[test]
fn redis_cli_runs_the_scenarios_through_the_router_as_on_redis() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let router = Router::start(&seeds(&cluster), &[]);
    router.wait_serving();
    assert_cli_output_matches_redis(router.port, &scenario());
}

/// A redis-cli process fed one command at a time, as a person or a shell
/// loop would, whose output is collected as it comes.
struct LiveCli {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl LiveCli {
    fn start(port: u16) -> LiveCli {
        let mut child = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-cli is installed (cargo xtask ci installs redis-tools)");
        let stdout = child.stdout.take().expect("stdout piped");
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    return;
                }
            }
        });
        LiveCli {
            stdin: child.stdin.take(),
            child,
            lines,
        }
    }

    fn send(&mut self, command: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{command}").expect("redis-cli takes input");
        stdin.flush().expect("flush");
    }

    /// Closes stdin and returns the non-empty output lines (redis-cli prints
    /// an empty line after an error), one per command sent.
    fn finish(mut self) -> Vec<String> {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                assert!(status.success(), "redis-cli failed: {status}");
                break;
            }
            assert!(Instant::now() < deadline, "redis-cli did not finish");
            std::thread::sleep(Duration::from_millis(20));
        }
        self.lines
            .try_iter()
            .chain(self.lines.iter())
            .filter(|line| !line.is_empty())
            .collect()
    }
}

impl Drop for LiveCli {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs INCR on `{tag}:n` and SET on `{tag}:k<i>` through a live redis-cli
/// for `duration`, calling `disturb` once `calm` has passed; returns the
/// replies in order.
fn live_session(
    port: u16,
    tag: &str,
    calm: Duration,
    duration: Duration,
    disturb: impl FnOnce(),
) -> Vec<String> {
    let mut cli = LiveCli::start(port);
    let started = Instant::now();
    let mut disturb = Some(disturb);
    let mut sent = 0usize;
    while started.elapsed() < duration {
        if started.elapsed() >= calm {
            if let Some(disturb) = disturb.take() {
                disturb();
            }
        }
        if sent.is_multiple_of(2) {
            cli.send(&format!("INCR {{{tag}}}:n"));
        } else {
            cli.send(&format!("SET {{{tag}}}:k{sent} {sent}"));
        }
        sent += 1;
        std::thread::sleep(Duration::from_millis(3));
    }
    let replies = cli.finish();
    assert_eq!(
        replies.len(),
        sent,
        "one reply per command expected: {replies:?}"
    );
    replies
}

/// Checks the replies of [`live_session`]: SETs answer OK, INCRs count up by
/// one (by more only across a failed INCR, whose outcome is unknown); returns
/// the errors and how many commands succeeded after the last one.
fn check_session(replies: &[String]) -> (Vec<String>, usize) {
    let mut errors = Vec::new();
    let mut ok_after_last_error = 0;
    let mut counter = 0i64;
    let mut failed_increments = 0i64;
    for (index, reply) in replies.iter().enumerate() {
        if reply.parse::<i64>().is_err() && reply != "OK" {
            assert!(
                !reply.starts_with("MOVED") && !reply.starts_with("ASK"),
                "the client saw a redirect: {reply}"
            );
            errors.push(reply.clone());
            ok_after_last_error = 0;
            if index.is_multiple_of(2) {
                failed_increments += 1;
            }
            continue;
        }
        ok_after_last_error += 1;
        if index.is_multiple_of(2) {
            let value: i64 = reply.parse().expect("INCR answers an integer");
            assert!(
                value > counter && value <= counter + 1 + failed_increments,
                "INCR answered {value} after {counter} with {failed_increments} unknown outcomes"
            );
            counter = value;
            failed_increments = 0;
        } else {
            assert_eq!(reply, "OK", "SET reply {index}");
        }
    }
    (errors, ok_after_last_error)
}

#[test]
fn a_redis_cli_session_through_the_router_survives_a_killed_shard_leader() {
    let mut cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let router = Router::start(&seeds(&cluster), &[]);
    router.wait_serving();
    let tag = tag_for_slot(100);
    let leader = leader_of(&cluster, 100);
    let replies = live_session(
        router.port,
        &tag,
        Duration::from_millis(500),
        Duration::from_secs(5),
        || cluster.kill(leader),
    );
    let (errors, ok_after_last_error) = check_session(&replies);
    eprintln!(
        "{} commands, {} errors, {ok_after_last_error} after the last one: {:?}",
        replies.len(),
        errors.len(),
        errors.iter().take(3).collect::<Vec<_>>()
    );
    // The documented errors of a lost leader: an unknown outcome for what was
    // in flight, CLUSTERDOWN/TRYAGAIN while no leader is known.
    for error in &errors {
        assert!(
            ["UNKNOWN", "CLUSTERDOWN", "TRYAGAIN", "ERR upstream"]
                .iter()
                .any(|prefix| error.starts_with(prefix)),
            "undocumented error: {error}"
        );
    }
    assert!(
        ok_after_last_error >= 200,
        "the session did not recover: {ok_after_last_error} successes after the last error"
    );
}

#[test]
fn a_redis_cli_session_through_the_router_sees_no_error_during_a_reshard() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let router = Router::start(&seeds(&cluster), &[]);
    router.wait_serving();
    // `reshard --from 1 --to 2 --slots 16` moves shard 1's first 16 slots.
    let tag = tag_for_slot(5);
    let address = format!("127.0.0.1:{}", cluster.members[0].port);
    let reshard = std::cell::RefCell::new(None);
    let replies = live_session(
        router.port,
        &tag,
        Duration::from_millis(300),
        Duration::from_secs(3),
        || {
            *reshard.borrow_mut() = Some(
                Command::new(slotraft_tests::support::binary())
                    .args(["cluster", "reshard", &address])
                    .args(["--from", "1", "--to", "2", "--slots", "16"])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("run slotraft cluster reshard"),
            )
        },
    );
    let output = reshard
        .into_inner()
        .expect("the reshard started")
        .wait_with_output()
        .expect("reshard output");
    assert!(output.status.success(), "reshard failed: {output:?}");
    let (errors, _) = check_session(&replies);
    assert_eq!(errors, Vec::<String>::new(), "errors during the reshard");
    // The slot did move: shard 2's leader serves it now.
    assert_eq!(leader_of(&cluster, 5), leader_of(&cluster, 6000));
}

/// Feeds `lines` to a live redis-cli on `port`, `gap` apart, and returns its
/// output lines.
fn run_live(port: u16, lines: &[String], gap: Duration) -> Vec<String> {
    let mut cli = LiveCli::start(port);
    for line in lines {
        cli.send(line);
        std::thread::sleep(gap);
    }
    cli.finish()
}

#[test]
fn the_scenarios_through_the_router_match_redis_while_their_slots_move() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let router = Router::start(&seeds(&cluster), &[]);
    router.wait_serving();
    // Without the closing DBSIZE, FLUSHALL, DBSIZE: while a slot is being
    // copied its keys exist on both shards, which a whole-cluster count sees.
    let script = scenario();
    let mut lines: Vec<String> = script.lines().map(str::to_owned).collect();
    lines.truncate(lines.len() - 3);
    assert_eq!(lines.last().map(String::as_str), Some("ZCARD rate:{user1}"));
    let redis = slotraft_tests::support::RedisServer::start();
    let expected = run_live(redis.port, &lines, Duration::ZERO);
    // Every slot of shard 1 moves to shard 2, a step of slots at a time,
    // while the scenario runs one command at a time.
    let address = format!("127.0.0.1:{}", cluster.members[0].port);
    let reshard = Command::new(slotraft_tests::support::binary())
        .args(["cluster", "reshard", &address])
        .args(["--from", "1", "--to", "2", "--slots", "5461"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run slotraft cluster reshard");
    let mut reshard = reshard;
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        reshard.try_wait().expect("reshard status").is_none(),
        "the reshard ended before the scenario started"
    );
    let started = Instant::now();
    let actual = run_live(router.port, &lines, Duration::from_millis(25));
    let scenario_time = started.elapsed();
    let output = reshard.wait_with_output().expect("reshard output");
    eprintln!(
        "scenario {scenario_time:?}, reshard ended {:?} after the scenario started",
        started.elapsed()
    );
    assert!(output.status.success(), "reshard failed: {output:?}");
    assert_eq!(
        actual, expected,
        "the scenario's output through the router during a reshard differs from redis-server's"
    );
    // The scenario's keys of shard 1 moved with their slots: shard 2 now
    // serves slot 0.
    assert_eq!(leader_of(&cluster, 0), leader_of(&cluster, 6000));
}
