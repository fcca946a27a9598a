//! Replicas move between nodes online: a shard's replica moves to a new node
//! (`move-replica`, Raft learner, then voter, then the old copy is closed,
//! its data kept), survives that node's restart, and moves back; a node that holds replicas and a metadata vote leaves (`del-node`
//! moves both first), all while a client keeps writing. Afterwards every
//! acknowledged write is readable, and the moved replicas vote: with one of
//! the original nodes killed, every shard still takes writes only because the
//! new node's replicas complete its majority.

use slotraft_tests::support::cluster::{admin, Cluster};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Writes `move:<n>` = n one key at a time over every shard until `stop`;
/// returns the acknowledged values. SET is idempotent, so an error is retried
/// until acknowledged.
fn writer(urls: Vec<String>, stop: Arc<AtomicBool>) -> Vec<u64> {
    let client = redis::cluster::ClusterClientBuilder::new(urls)
        .retries(30)
        .min_retry_wait(20)
        .max_retry_wait(200)
        .build()
        .unwrap();
    let mut connection = client.get_connection().unwrap();
    let mut acknowledged = Vec::new();
    let mut value = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match redis::cmd("SET")
                .arg(format!("move:{value}"))
                .arg(value)
                .query::<()>(&mut connection)
            {
                Ok(()) => break,
                Err(error) => {
                    assert!(Instant::now() < deadline, "SET kept failing: {error}");
                    std::thread::sleep(Duration::from_millis(20));
                    if let Ok(fresh) = client.get_connection() {
                        connection = fresh;
                    }
                }
            }
        }
        acknowledged.push(value);
        value += 1;
    }
    acknowledged
}

/// The shards member `index` hosts a replica of (`slotraft_shards` in INFO
/// cluster).
fn hosted(cluster: &Cluster, index: usize) -> Vec<u64> {
    let info: String = redis::cmd("INFO")
        .arg("cluster")
        .query(&mut cluster.client(index))
        .unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("slotraft_shards:"))
        .unwrap_or_default()
        .split(',')
        .filter_map(|shard| shard.parse().ok())
        .collect()
}

/// `slotraft cluster move-replica` of shard 1 from node `from` to node
/// `to` (ids), through member `via`; checks it reports success.
fn move_shard_1(cluster: &Cluster, via: usize, from: &str, to: &str) -> String {
    let output = admin(&[
        "move-replica",
        &cluster.address(via),
        "--shard",
        "1",
        "--from",
        from,
        "--to",
        to,
    ]);
    assert!(
        output.contains(&format!(
            "[OK] Shard 1's replica moved from node {from} to node {to}"
        )) || output.contains("already holds"),
        "{output}"
    );
    output
}

/// Waits until one of `members` leads shard 1 and answers SLOTRAFT VOTERS
/// (the others name the leader instead), then checks the voters are `ids`.
fn expect_shard_1_voters(cluster: &Cluster, members: std::ops::Range<usize>, ids: &[String]) {
    let mut expected: Vec<i64> = ids.iter().map(|id| id.parse().unwrap()).collect();
    expected.sort_unstable();
    let mut voters = Vec::new();
    wait_until("shard 1's leader to answer SLOTRAFT VOTERS", || {
        voters = members
            .clone()
            .filter_map(|index| {
                redis::cmd("SLOTRAFT")
                    .arg("VOTERS")
                    .arg(1)
                    .query::<Vec<i64>>(&mut cluster.client(index))
                    .ok()
            })
            .collect();
        !voters.is_empty()
    });
    assert!(voters.iter().all(|set| *set == expected), "{voters:?}");
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn replicas_and_a_metadata_vote_move_between_nodes_online() {
    let mut cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let extra = cluster.spawn_extra();
    admin(&["add-node", &cluster.address(extra), &cluster.address(0)]);
    let ids: Vec<String> = (0..4).map(|index| cluster.node_id(index)).collect();
    // The writer knows only the nodes that stay.
    let urls: Vec<String> = (1..4).map(|index| cluster.url(index)).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let writing = {
        let (urls, stop) = (urls.clone(), stop.clone());
        std::thread::spawn(move || writer(urls, stop))
    };
    std::thread::sleep(Duration::from_millis(300));

    // Node 0 is shard 1's preferred leader: its replica moves to the new node
    // (leadership is handed over first when node 0 leads).
    let output = move_shard_1(&cluster, 1, &ids[0], &ids[3]);
    assert!(output.contains("[OK] Shard 1's replica moved"), "{output}");
    let group_dir = |index: usize, group: u64| {
        cluster.members[index]
            .dir
            .0
            .join("cluster")
            .join(format!("group-{group}"))
    };
    wait_until("node 0 kept its replica of shard 1", || {
        !hosted(&cluster, 0).contains(&1)
    });
    assert!(hosted(&cluster, 3).contains(&1));
    // The closed replica's vote and log stay on node 0 (a replica placed
    // there again resumes from them).
    assert!(group_dir(0, 1).exists() && group_dir(0, 2).exists() && group_dir(3, 1).exists());
    // Node 3 now hosts one follower and leads nothing; CLUSTER KEYSLOT is
    // still answered there (it reads no shard).
    let slot: i64 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg("somekey")
        .query(&mut cluster.client(3))
        .unwrap();
    assert_eq!(slot, 11058);
    // Moving it again finds the work done.
    let again = move_shard_1(&cluster, 2, &ids[0], &ids[3]);
    assert!(again.contains("already holds"), "{again}");
    // So does adding the new node again.
    let again = admin(&["add-node", &cluster.address(extra), &cluster.address(1)]);
    assert!(again.contains("already part of the cluster"), "{again}");
    // Shard 1's leader counts the new node, not node 0, among its voters.
    expect_shard_1_voters(&cluster, 1..4, &ids[1..]);
    // The new node restarts: it replays its metadata log from the cluster's
    // first topology, which did not place shard 1 on it, and must still
    // host its replica (a voter) afterwards.
    cluster.kill(3);
    cluster.spawn(3);
    wait_until("node 3 hosts shard 1 again after its restart", || {
        hosted(&cluster, 3).contains(&1)
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        hosted(&cluster, 3).contains(&1),
        "node 3 closed its replica of shard 1 after its restart"
    );
    let refused = redis::cmd("SLOTRAFT")
        .arg("VOTERS")
        .arg(1)
        .query::<Vec<i64>>(&mut cluster.client(0));
    assert!(
        refused.is_err_and(|error| error.to_string().contains("NOTLEADER")),
        "node 0 holds no replica of shard 1"
    );

    // Moving it back: node 0 resumes from the data it kept (its vote and
    // log), catches up and votes again; node 3 closes its replica.
    move_shard_1(&cluster, 2, &ids[3], &ids[0]);
    wait_until("node 3 kept its replica of shard 1", || {
        hosted(&cluster, 3).is_empty() && hosted(&cluster, 0).contains(&1)
    });
    expect_shard_1_voters(&cluster, 0..3, &ids[..3]);

    // Node 0 leaves: its three replicas and its metadata vote move to node
    // 3 (the only node without them; shard 1's goes back there again), then
    // it is shut down.
    let output = admin(&["del-node", &cluster.address(1), &ids[0]]);
    assert!(
        output.contains(&format!(
            "[OK] Node {} votes in the metadata group instead of node {}",
            ids[3], ids[0]
        )),
        "{output}"
    );
    assert!(
        cluster.wait_exit(0, Duration::from_secs(10)),
        "the removed node kept running"
    );
    admin(&["check", &cluster.address(3)]);
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let acknowledged = writing.join().unwrap();
    assert!(
        acknowledged.len() > 50,
        "too few writes: {}",
        acknowledged.len()
    );

    // Node 1 dies: shards (replicas on nodes 1, 2, 3) and the metadata group
    // (voters 1, 2, 3) keep a majority only with node 3's votes.
    cluster.kill(1);
    let survivors: Vec<String> = [2, 3].iter().map(|&index| cluster.url(index)).collect();
    let client = redis::cluster::ClusterClientBuilder::new(survivors)
        .retries(30)
        .min_retry_wait(50)
        .max_retry_wait(500)
        .build()
        .unwrap();
    // Until a shard led by node 1 elects another leader (and nodes report
    // it), its slots point at the dead node: retry on fresh connections.
    let retrying = |command: &redis::Cmd| -> redis::Value {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let outcome = client
                .get_connection()
                .and_then(|mut connection| command.query(&mut connection));
            match outcome {
                Ok(value) => return value,
                Err(error) => {
                    assert!(Instant::now() < deadline, "a command kept failing: {error}");
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    };
    for value in &acknowledged {
        let stored = retrying(redis::cmd("GET").arg(format!("move:{value}")));
        assert_eq!(
            stored,
            redis::Value::BulkString(value.to_string().into_bytes()),
            "acknowledged write move:{value} lost"
        );
    }
    for index in 0..100 {
        let reply = retrying(redis::cmd("SET").arg(format!("after:{index}")).arg(index));
        assert_eq!(reply, redis::Value::Okay);
    }
}
