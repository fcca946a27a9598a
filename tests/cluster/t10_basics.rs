//! A three-node cluster (three shards, three replicas each): every slot is
//! served, keys land where their slot says, clients follow MOVED.

use slotraft_tests::support::cluster::Cluster;
use slotraft_tests::support::redis_cli;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// A CLUSTER SLOTS range: start, end, and (host, port, id) per node.
type SlotsRange = (i64, i64, Vec<(String, i64, String)>);

fn slots(connection: &mut redis::Connection) -> Vec<SlotsRange> {
    let ranges: Vec<redis::Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query(connection)
        .unwrap();
    ranges
        .into_iter()
        .map(|range| {
            let redis::Value::Array(parts) = range else {
                panic!("a range is an array")
            };
            let number = |value: &redis::Value| match value {
                redis::Value::Int(number) => *number,
                other => panic!("expected an integer, got {other:?}"),
            };
            let text = |value: &redis::Value| match value {
                redis::Value::BulkString(data) => String::from_utf8(data.clone()).unwrap(),
                other => panic!("expected a bulk string, got {other:?}"),
            };
            let nodes = parts[2..]
                .iter()
                .map(|node| {
                    let redis::Value::Array(fields) = node else {
                        panic!("a node is an array")
                    };
                    (text(&fields[0]), number(&fields[1]), text(&fields[2]))
                })
                .collect();
            (number(&parts[0]), number(&parts[1]), nodes)
        })
        .collect()
}

#[test]
fn a_created_cluster_covers_every_slot_and_routes_by_slot() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let mut direct = cluster.client(0);
    let info: String = redis::cmd("CLUSTER")
        .arg("INFO")
        .query(&mut direct)
        .unwrap();
    assert!(info.contains("cluster_state:ok"), "{info}");
    assert!(info.contains("cluster_slots_assigned:16384"), "{info}");
    assert!(info.contains("cluster_size:3"), "{info}");
    let ranges = slots(&mut direct);
    let covered: u32 = ranges
        .iter()
        .map(|(start, end, _)| (end - start + 1) as u32)
        .sum();
    assert_eq!(covered, 16384);
    for (_, _, nodes) in &ranges {
        // A leader and two replicas, all distinct.
        let ports: BTreeSet<i64> = nodes.iter().map(|(_, port, _)| *port).collect();
        assert_eq!(ports.len(), 3, "{nodes:?}");
    }
    // Node ids agree with CLUSTER MYID.
    let myid: String = redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut direct)
        .unwrap();
    assert_eq!(myid.len(), 40);
    assert!(ranges
        .iter()
        .flat_map(|(_, _, nodes)| nodes)
        .any(|(_, port, id)| *port == i64::from(cluster.members[0].port) && *id == myid));

    // The cluster client writes keys of every slot range and reads them back.
    let mut client = cluster.cluster_client();
    for index in 0..300 {
        let key = format!("key:{index}");
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg(index)
            .query(&mut client)
            .unwrap();
    }
    for index in 0..300 {
        let value: i64 = redis::cmd("GET")
            .arg(format!("key:{index}"))
            .query(&mut client)
            .unwrap();
        assert_eq!(value, index);
    }
    // Multi-key commands in one slot work; across slots they are refused.
    let _: () = redis::cmd("MSET")
        .arg("{user1}:a")
        .arg("1")
        .arg("{user1}:b")
        .arg("2")
        .query(&mut client)
        .unwrap();
    let both: Vec<String> = redis::cmd("MGET")
        .arg("{user1}:a")
        .arg("{user1}:b")
        .query(&mut client)
        .unwrap();
    assert_eq!(both, vec!["1".to_string(), "2".to_string()]);
    let error = redis::cmd("MSET")
        .arg("a")
        .arg("1")
        .arg("b")
        .arg("2")
        .query::<()>(&mut direct)
        .unwrap_err();
    assert_eq!(error.code(), Some("CROSSSLOT"), "{error:?}");
}

#[test]
fn redis_cli_follows_moved_and_plain_clients_get_redirects() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    // `foo` hashes to slot 12182; whichever node we ask, redis-cli -c gets there.
    for index in 0..3 {
        let port = cluster.members[index].port;
        let output = std::process::Command::new("redis-cli")
            .args(["-c", "-h", "127.0.0.1", "-p", &port.to_string()])
            .args(["SET", "foo", &format!("bar{index}")])
            .output()
            .expect("run redis-cli");
        assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "OK");
    }
    let output = redis_cli(cluster.members[1].port, "GET foo\n");
    let moved_or_value = output.trim().to_string();
    assert!(
        moved_or_value == "bar2" || moved_or_value.starts_with("MOVED 12182 127.0.0.1:"),
        "{moved_or_value}"
    );
    // A plain client on a node that does not lead slot 12182 gets MOVED.
    let mut saw_moved = false;
    for index in 0..3 {
        let mut connection = cluster.client(index);
        match redis::cmd("GET")
            .arg("foo")
            .query::<String>(&mut connection)
        {
            Ok(value) => assert_eq!(value, "bar2"),
            Err(error) => {
                assert_eq!(error.code(), Some("MOVED"), "{error:?}");
                saw_moved = true;
            }
        }
    }
    assert!(saw_moved, "some node must redirect");
}

#[test]
fn a_killed_shard_leader_is_replaced_and_clients_continue() {
    let mut cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let mut client = cluster.cluster_client();
    let _: () = redis::cmd("SET")
        .arg("foo")
        .arg("before")
        .query(&mut client)
        .unwrap();
    // Who leads slot 12182 now?
    let mut direct = cluster.client(0);
    let leader_port = slots(&mut direct)
        .into_iter()
        .find(|(start, end, _)| (*start..=*end).contains(&12182))
        .map(|(_, _, nodes)| nodes[0].1)
        .unwrap();
    let leader = cluster
        .members
        .iter()
        .position(|member| i64::from(member.port) == leader_port)
        .unwrap();
    cluster.kill(leader);
    let survivor = (0..3).find(|index| *index != leader).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut direct = cluster.client(survivor);
        let moved_on = slots(&mut direct)
            .into_iter()
            .find(|(start, end, _)| (*start..=*end).contains(&12182))
            .is_some_and(|(_, _, nodes)| nodes[0].1 != leader_port);
        if moved_on {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "CLUSTER SLOTS never showed a new leader"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut client = cluster.cluster_client();
    let value: String = redis::cmd("GET").arg("foo").query(&mut client).unwrap();
    assert_eq!(value, "before");
    let _: () = redis::cmd("SET")
        .arg("foo")
        .arg("after")
        .query(&mut client)
        .unwrap();
}

#[test]
fn redis_cli_cluster_check_and_redis_benchmark_cluster_accept_it() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let address = format!("127.0.0.1:{}", cluster.members[0].port);
    // Leaders settle on their preferred nodes: every node leads one shard.
    let deadline = Instant::now() + Duration::from_secs(10);
    let check = loop {
        let output = std::process::Command::new("redis-cli")
            .args(["--cluster", "check", &address])
            .output()
            .expect("run redis-cli --cluster check");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        if text.matches("M: ").count() == 3 || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        check.contains("[OK] All nodes agree about slots configuration."),
        "{check}"
    );
    assert!(check.contains("[OK] All 16384 slots covered."), "{check}");
    assert_eq!(check.matches("M: ").count(), 3, "{check}");
    let own = std::process::Command::new(slotraft_tests::support::binary())
        .args(["cluster", "check", &address])
        .output()
        .expect("run slotraft cluster check");
    let own_text = String::from_utf8_lossy(&own.stdout).into_owned();
    assert!(own.status.success(), "{own_text}");
    assert!(
        own_text.contains("[OK] All 16384 slots covered."),
        "{own_text}"
    );
    let output = std::process::Command::new("redis-benchmark")
        .args(["--cluster", "-h", "127.0.0.1"])
        .args(["-p", &cluster.members[0].port.to_string()])
        .args(["-t", "set,get", "-n", "2000", "-q"])
        .output()
        .expect("run redis-benchmark --cluster");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{text}");
    assert!(text.contains("SET: ") && text.contains("GET: "), "{text}");
}

#[test]
fn transactions_run_as_one_log_entry_on_one_slot() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let slot = i64::from(cluster::key_slot(b"{tx}"));
    let mut probe = cluster.client(0);
    let leader_port = slots(&mut probe)
        .into_iter()
        .find(|(start, end, _)| (*start..=*end).contains(&slot))
        .map(|(_, _, nodes)| nodes[0].1)
        .unwrap();
    let index = cluster
        .members
        .iter()
        .position(|member| i64::from(member.port) == leader_port)
        .unwrap();
    let mut connection = cluster.client(index);
    let (set, counter, listed): (String, i64, Vec<String>) = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("{tx}:a")
        .arg(1)
        .cmd("INCRBY")
        .arg("{tx}:a")
        .arg(41)
        .cmd("RPUSH")
        .arg("{tx}:l")
        .arg("x")
        .ignore()
        .cmd("LRANGE")
        .arg("{tx}:l")
        .arg(0)
        .arg(-1)
        .query(&mut connection)
        .unwrap();
    assert_eq!(
        (set.as_str(), counter, listed),
        ("OK", 42, vec!["x".to_string()])
    );
    // Keys of two slots in one transaction: refused while queuing, then
    // EXECABORT.
    let error = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("{tx}:a")
        .arg(1)
        .cmd("SET")
        .arg("elsewhere")
        .arg(2)
        .query::<()>(&mut connection)
        .unwrap_err();
    // The client reports the refusal it saw first (CROSSSLOT while queuing,
    // as Redis Cluster answers); the transaction as a whole was discarded.
    assert!(
        matches!(error.code(), Some("CROSSSLOT" | "EXECABORT")),
        "{error:?}"
    );
    let unchanged: i64 = redis::cmd("GET")
        .arg("{tx}:a")
        .query(&mut connection)
        .unwrap();
    assert_eq!(unchanged, 42);
}

/// A node leading several shards answers DBSIZE, KEYS, SCAN and RANDOMKEY
/// for all of them, as a Redis Cluster master answers for all its slots:
/// summed over the masters (as cluster clients do), every key counts once.
#[test]
fn whole_node_reads_cover_every_shard_a_node_leads() {
    let cluster = Cluster::start(3, &["--replicas", "3", "--shards", "6"], &[]);
    let router = slotraft_tests::support::router::Router::start(
        &cluster
            .members
            .iter()
            .map(|member| format!("127.0.0.1:{}", member.port))
            .collect::<Vec<_>>(),
        &[],
    );
    router.wait_serving();
    let mut connection = router.redis();
    let written: BTreeSet<String> = (0..300).map(|index| format!("whole:{index}")).collect();
    let mut pipe = redis::pipe();
    for key in &written {
        pipe.cmd("SET").arg(key).arg(1).ignore();
    }
    let () = pipe.query(&mut connection).unwrap();
    // The masters, as a cluster client finds them.
    let slots: Vec<Vec<redis::Value>> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query(&mut cluster.client(0))
        .unwrap();
    let masters: BTreeSet<u16> = slots
        .iter()
        .map(|range| {
            let master: Vec<redis::Value> = redis::from_redis_value(&range[2]).unwrap();
            redis::from_redis_value::<u16>(&master[1]).unwrap()
        })
        .collect();
    let (mut counted, mut listed, mut scanned) = (0u64, BTreeSet::new(), Vec::new());
    for index in 0..cluster.members.len() {
        if !masters.contains(&cluster.members[index].port) {
            continue;
        }
        let mut node = cluster.client(index);
        let size: u64 = redis::cmd("DBSIZE").query(&mut node).unwrap();
        counted += size;
        let keys: Vec<String> = redis::cmd("KEYS").arg("whole:*").query(&mut node).unwrap();
        assert_eq!(keys.len() as u64, size, "node {index}");
        listed.extend(keys);
        let mut cursor = 0u64;
        let mut steps = 0;
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("COUNT")
                .arg(7)
                .query(&mut node)
                .unwrap();
            scanned.extend(batch);
            steps += 1;
            assert!(steps < 1000, "SCAN on node {index} does not end");
            if next == 0 {
                break;
            }
            cursor = next;
        }
        if size > 0 {
            let key: Option<String> = redis::cmd("RANDOMKEY").query(&mut node).unwrap();
            assert!(
                key.is_some_and(|key| written.contains(&key)),
                "node {index}"
            );
        }
    }
    assert_eq!(counted, 300);
    assert_eq!(listed, written);
    let unique: BTreeSet<String> = scanned.iter().cloned().collect();
    assert_eq!(unique.len(), scanned.len(), "SCAN returned a key twice");
    assert_eq!(unique, written);
}

/// `slotraft cluster info` shows CLUSTER NODES and CLUSTER INFO, then the
/// node and shard ids the other admin commands take.
#[test]
fn cluster_info_shows_the_ids_the_admin_commands_take() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let output = std::process::Command::new(slotraft_tests::support::binary())
        .args(["cluster", "info", &cluster.address(0)])
        .output()
        .expect("run slotraft cluster info");
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("cluster_state:ok"), "{text}");
    let mut ids = Vec::new();
    for index in 0..3 {
        let id = cluster.node_id(index);
        let line = text
            .lines()
            .find(|line| line.starts_with(&format!("node {id} ")))
            .unwrap_or_else(|| panic!("no line for node {id}:\n{text}"));
        assert!(
            line.ends_with(&format!(" {} metadata-voter", cluster.address(index))),
            "{line}"
        );
        ids.push(id);
    }
    for (shard, range) in [(1, "0-5460"), (2, "5461-10922"), (3, "10923-16383")] {
        let line = text
            .lines()
            .find(|line| line.starts_with(&format!("shard {shard} ")))
            .unwrap_or_else(|| panic!("no line for shard {shard}:\n{text}"));
        let words: Vec<&str> = line.split(' ').collect();
        assert_eq!(words[2], range, "{line}");
        let mut replicas: Vec<&str> = words[3].split(',').collect();
        replicas.sort_unstable();
        let mut expected: Vec<&str> = ids.iter().map(String::as_str).collect();
        expected.sort_unstable();
        assert_eq!(replicas, expected, "{line}");
    }
}

/// The `slotraft_shard_<id>:` fields of member `index`'s INFO cluster, by shard.
fn shard_progress(cluster: &Cluster, index: usize) -> Vec<(u64, Vec<(String, String)>)> {
    let info: String = redis::cmd("INFO")
        .arg("cluster")
        .query(&mut cluster.client(index))
        .unwrap();
    info.lines()
        .filter_map(|line| line.strip_prefix("slotraft_shard_"))
        .map(|line| {
            let (shard, fields) = line.split_once(':').expect("shard line has a colon");
            let fields = fields
                .split(',')
                .map(|field| {
                    let (key, value) = field.split_once('=').expect("key=value");
                    (key.to_string(), value.to_string())
                })
                .collect();
            (shard.parse().expect("shard id"), fields)
        })
        .collect()
}

#[test]
fn info_cluster_shows_each_hosted_shards_role_and_progress() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let mut connection = cluster.cluster_client();
    for index in 0..100 {
        let _: () = redis::cmd("SET")
            .arg(format!("key{index}"))
            .arg(index)
            .query(&mut connection)
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // Per shard: the roles and leaders the three members report, and the
        // applied index of the one that leads.
        let mut seen: std::collections::BTreeMap<u64, Vec<(String, String, u64)>> =
            Default::default();
        for index in 0..3 {
            let shards = shard_progress(&cluster, index);
            let ids: Vec<u64> = shards.iter().map(|(shard, _)| *shard).collect();
            assert_eq!(ids, vec![1, 2, 3], "member {index} hosts every shard");
            for (shard, fields) in shards {
                let field = |key: &str| {
                    fields
                        .iter()
                        .find(|(name, _)| name == key)
                        .map(|(_, value)| value.clone())
                        .unwrap_or_else(|| panic!("no {key} in {fields:?}"))
                };
                for key in ["term", "last_log_index", "snapshot_index"] {
                    field(key).parse::<u64>().expect("a number");
                }
                let applied: u64 = field("last_applied").parse().unwrap();
                seen.entry(shard)
                    .or_default()
                    .push((field("role"), field("leader"), applied));
            }
        }
        let settled = seen.values().all(|members| {
            let leaders = members
                .iter()
                .filter(|(role, _, _)| role == "leader")
                .count();
            leaders == 1
                && members.iter().all(|(_, leader, _)| *leader == members[0].1)
                && members
                    .iter()
                    .all(|(role, _, _)| role == "leader" || role == "follower")
        });
        if settled {
            // 100 writes spread over the three shards went through their logs.
            let applied: u64 = seen
                .values()
                .flat_map(|members| members.iter().filter(|(role, _, _)| role == "leader"))
                .map(|(_, _, applied)| *applied)
                .sum();
            assert!(
                applied >= 100,
                "leaders applied {applied} entries: {seen:?}"
            );
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no single leader per shard: {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The other CLUSTER subcommands Redis Cluster answers: REPLICAS (SLAVES)
/// lists the CLUSTER NODES lines of a master's replicas, with Redis's errors
/// for an unknown node and for a replica; COUNT-FAILURE-REPORTS, LINKS,
/// SAVECONFIG and HELP answer; the subcommands that change the topology
/// Redis's way are refused with a text that names slotraft's way.
#[test]
fn cluster_replicas_and_the_other_redis_cluster_subcommands_answer() {
    let cluster = Cluster::start(4, &["--replicas", "3", "--shards", "3"], &[]);
    let mut direct = cluster.client(0);
    let cluster_cmd = |words: &[&str]| {
        let mut command = redis::cmd("CLUSTER");
        command.arg(words);
        command
    };
    let nodes: String = cluster_cmd(&["NODES"]).query(&mut direct).unwrap();
    let lines: Vec<Vec<&str>> = nodes
        .lines()
        .map(|line| line.split(' ').collect())
        .collect();
    assert_eq!(lines.len(), 4, "{nodes}");
    let mut replicas_seen = 0;
    for fields in &lines {
        let answer: redis::RedisResult<Vec<String>> =
            cluster_cmd(&["REPLICAS", fields[0]]).query(&mut direct);
        if fields[2].split(',').any(|flag| flag == "master") {
            // The pong time (the sixth field) is the time of the answer.
            let without_pong = |line: &str| {
                let mut fields: Vec<&str> = line.split(' ').collect();
                fields[5] = "-";
                fields.join(" ")
            };
            let mut listed: Vec<String> = answer
                .unwrap()
                .iter()
                .map(|line| without_pong(line))
                .collect();
            let mut expected: Vec<String> = nodes
                .lines()
                .filter(|line| line.split(' ').nth(3) == Some(fields[0]))
                .map(without_pong)
                .collect();
            listed.sort();
            expected.sort();
            replicas_seen += expected.len();
            assert_eq!(listed, expected);
            let slaves: Vec<String> = cluster_cmd(&["SLAVES", fields[0]])
                .query(&mut direct)
                .unwrap();
            assert_eq!(slaves.len(), listed.len());
        } else {
            assert_eq!(
                answer.unwrap_err().to_string(),
                "An error was signalled by the server - ResponseError: The specified node is not a master"
            );
        }
        let reports: i64 = cluster_cmd(&["COUNT-FAILURE-REPORTS", fields[0]])
            .query(&mut direct)
            .unwrap();
        assert_eq!(reports, 0);
    }
    assert!(
        replicas_seen > 0,
        "a node that leads no shard is a replica: {nodes}"
    );
    let unknown: redis::RedisResult<Vec<String>> =
        cluster_cmd(&["REPLICAS", "nosuch"]).query(&mut direct);
    assert_eq!(
        unknown.unwrap_err().to_string(),
        "An error was signalled by the server - ResponseError: Unknown node nosuch"
    );
    let links: Vec<redis::Value> = cluster_cmd(&["LINKS"]).query(&mut direct).unwrap();
    assert!(links.is_empty());
    let saved: String = cluster_cmd(&["SAVECONFIG"]).query(&mut direct).unwrap();
    assert_eq!(saved, "OK");
    let help: Vec<String> = cluster_cmd(&["HELP"]).query(&mut direct).unwrap();
    assert!(help[0].starts_with("CLUSTER <subcommand>"), "{help:?}");
    let meet: redis::RedisResult<()> = cluster_cmd(&["MEET", "127.0.0.1", "1"]).query(&mut direct);
    let meet = meet.unwrap_err().to_string();
    assert!(
        meet.contains("CLUSTER MEET is not supported: slotraft changes its topology"),
        "{meet}"
    );
}

/// `redis-cli --cluster import` moves a standalone Redis's keys into the
/// cluster (MIGRATE from Redis to each slot's leader): every type arrives,
/// a stream with its consumer group and pending entries included.
#[test]
fn redis_cli_cluster_import_moves_a_redis_keyspace_in() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let redis = slotraft_tests::support::RedisServer::start();
    let mut source = redis::Client::open(format!("redis://127.0.0.1:{}/", redis.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let mut pipe = redis::pipe();
    for index in 0..200 {
        pipe.cmd("SET")
            .arg(format!("key:{index}"))
            .arg(index)
            .ignore();
    }
    let commands: &[&[&str]] = &[
        &["RPUSH", "queue", "a", "b", "c"],
        &["HSET", "cart:1", "apple", "2", "pear", "1"],
        &["SADD", "tags:redis", "db", "cache"],
        &["ZADD", "board", "10", "ann", "20", "bob"],
        &["PFADD", "visitors", "a", "b", "c"],
        &["SET", "session:1", "data", "EX", "1000"],
        &["XADD", "events", "1-1", "kind", "login"],
        &["XADD", "events", "2-1", "kind", "logout", "user", "7"],
        &["XGROUP", "CREATE", "events", "workers", "0"],
        &[
            "XREADGROUP",
            "GROUP",
            "workers",
            "w1",
            "COUNT",
            "1",
            "STREAMS",
            "events",
            ">",
        ],
    ];
    for command in commands {
        pipe.cmd(command[0]).arg(&command[1..]).ignore();
    }
    let () = pipe.query(&mut source).unwrap();
    let output = std::process::Command::new("redis-cli")
        .args(["--cluster", "import"])
        .arg(format!("127.0.0.1:{}", cluster.members[0].port))
        .arg("--cluster-from")
        .arg(format!("127.0.0.1:{}", redis.port))
        .arg("--cluster-copy")
        .output()
        .expect("run redis-cli --cluster import");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{text}");
    let mut client = cluster.cluster_client();
    for index in 0..200 {
        let value: i64 = redis::cmd("GET")
            .arg(format!("key:{index}"))
            .query(&mut client)
            .unwrap();
        assert_eq!(value, index);
    }
    let show = |connection: &mut dyn redis::ConnectionLike, words: &[&str]| -> redis::Value {
        let mut command = redis::cmd(words[0]);
        command.arg(&words[1..]);
        command.query(connection).unwrap()
    };
    for words in [
        &["LRANGE", "queue", "0", "-1"][..],
        &["HGET", "cart:1", "apple"],
        &["SCARD", "tags:redis"],
        &["ZRANGE", "board", "0", "-1", "WITHSCORES"],
        &["PFCOUNT", "visitors"],
        &["GET", "session:1"],
        &["XRANGE", "events", "-", "+"],
        &["XINFO", "GROUPS", "events"],
        &["XPENDING", "events", "workers"],
    ] {
        assert_eq!(
            show(&mut client, words),
            show(&mut source, words),
            "{words:?}"
        );
    }
    let ttl: i64 = redis::cmd("TTL")
        .arg("session:1")
        .query(&mut client)
        .unwrap();
    assert!((900..=1000).contains(&ttl), "{ttl}");
}

/// MIGRATE on a cluster node: the keys' slot leader moves them to a Redis
/// and deletes them through its shard's log; other nodes redirect, keys of
/// several slots are CROSSSLOT, as in Redis Cluster.
#[test]
fn migrate_moves_keys_of_one_slot_out_of_the_cluster() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let redis = slotraft_tests::support::RedisServer::start();
    let port = redis.port.to_string();
    let mut client = cluster.cluster_client();
    for key in ["{user:7}:name", "{user:7}:cart", "other"] {
        let () = redis::cmd("SET")
            .arg(key)
            .arg(key)
            .query(&mut client)
            .unwrap();
    }
    let migrate = |words: &[&str]| {
        let mut command = redis::cmd("MIGRATE");
        command.arg(&["127.0.0.1", &port]).arg(words);
        command
    };
    let keys = ["", "0", "5000", "KEYS", "{user:7}:name", "{user:7}:cart"];
    let mut moved_by = None;
    for index in 0..3 {
        let mut direct = cluster.client(index);
        match migrate(&keys).query::<String>(&mut direct) {
            Ok(reply) => {
                assert_eq!(reply, "OK");
                moved_by = Some(index);
            }
            Err(error) => assert_eq!(error.code(), Some("MOVED"), "{error:?}"),
        }
    }
    assert!(moved_by.is_some(), "one node leads the keys' slot");
    let mut direct = cluster.client(moved_by.unwrap());
    let crossslot = migrate(&["", "0", "5000", "KEYS", "{user:7}:name", "other"])
        .query::<String>(&mut direct)
        .unwrap_err();
    assert_eq!(crossslot.code(), Some("CROSSSLOT"), "{crossslot:?}");
    let mut target = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    for key in ["{user:7}:name", "{user:7}:cart"] {
        let there: String = redis::cmd("GET").arg(key).query(&mut target).unwrap();
        assert_eq!(there, key);
        let here: Option<String> = redis::cmd("GET").arg(key).query(&mut client).unwrap();
        assert_eq!(here, None);
    }
    let other: String = redis::cmd("GET").arg("other").query(&mut client).unwrap();
    assert_eq!(other, "other");
}
