//! Writes of different clients arriving together share one log entry
//! (`ShardGroup::propose_batched`); each client still gets its own replies,
//! and every replica applies them alike.

use slotraft_tests::support::group::Group;
use std::time::Duration;

const CLIENTS: usize = 24;
const ROUNDS: usize = 60;

/// Runs the clients against a fresh group started with `options`; returns
/// (writes, entries they took).
fn run_clients(options: &[&str]) -> (u64, u64) {
    let group = Group::start(3, options);
    let leader = group.wait_leader(Duration::from_secs(10));
    let entries_before: u64 = group
        .info_field(leader, "raft_last_log_index")
        .and_then(|value| value.parse().ok())
        .unwrap();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(CLIENTS));
    let workers: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let mut connection = group.client(leader);
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let mut totals = Vec::with_capacity(ROUNDS);
                for round in 0..ROUNDS {
                    // Client `c` adds c + 1 each time: its replies tell its own
                    // additions from everyone else's.
                    let total: i64 = redis::cmd("INCRBY")
                        .arg("shared")
                        .arg(client + 1)
                        .query(&mut connection)
                        .unwrap();
                    totals.push(total);
                    let set: String = redis::cmd("SET")
                        .arg(format!("own:{client}"))
                        .arg(round)
                        .query(&mut connection)
                        .unwrap();
                    assert_eq!(set, "OK");
                    let own: usize = redis::cmd("GET")
                        .arg(format!("own:{client}"))
                        .query(&mut connection)
                        .unwrap();
                    assert_eq!(own, round, "client {client} read another client's reply");
                }
                totals
            })
        })
        .collect();
    let mut totals: Vec<i64> = workers
        .into_iter()
        .flat_map(|worker| worker.join().unwrap())
        .collect();
    let writes = (CLIENTS * ROUNDS * 2) as u64;
    // Every INCRBY saw a distinct running total, and they add up.
    totals.sort_unstable();
    totals.dedup();
    assert_eq!(totals.len(), CLIENTS * ROUNDS);
    let expected: i64 = (1..=CLIENTS as i64).sum::<i64>() * ROUNDS as i64;
    assert_eq!(totals.last().copied(), Some(expected));
    let mut connection = group.client(leader);
    let shared: i64 = redis::cmd("GET")
        .arg("shared")
        .query(&mut connection)
        .unwrap();
    assert_eq!(shared, expected);
    let entries_after: u64 = group
        .info_field(leader, "raft_last_log_index")
        .and_then(|value| value.parse().ok())
        .unwrap();
    let entries = entries_after - entries_before;
    group.assert_replicas_agree(leader, Duration::from_secs(10));
    (writes, entries)
}

#[test]
fn concurrent_clients_share_entries_and_each_gets_its_own_replies() {
    let (writes, entries) = run_clients(&[]);
    assert!(
        entries < writes,
        "{writes} writes of {CLIENTS} concurrent clients took {entries} entries: none shared one"
    );
}

#[test]
fn without_shared_entries_every_write_has_its_own() {
    let (writes, entries) = run_clients(&["--raft-shared-entries", "no"]);
    // Expiry ticks may add entries of their own.
    assert!(
        entries >= writes,
        "{writes} writes took {entries} entries with shared entries off"
    );
}
