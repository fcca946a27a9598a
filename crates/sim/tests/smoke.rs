//! Smoke test of the replication stack under turmoil: three replicas, the leader
//! partitioned away, the majority elects a new leader and takes writes, the
//! partition heals and every replica converges to the same state. Replaying a
//! seed replays the run exactly.
//!
//! Reproduce a failure with `SIM_SEED=<seed> cargo nextest run -p sim --test smoke`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use replication::serve::Proposal;
use replication::{Op, Request};
use resp::Frame;
use sim::group::{add_replicas, host_name, now_ms, write, Handles, Storage};
use sim::trace::{lines, note, note_untimed, scratch_dir, seed_from_env, Trace};

fn expect(reply: Result<Frame, String>, expected: Frame, what: &str) -> Result<(), String> {
    match reply {
        Ok(frame) if frame == expected => Ok(()),
        other => Err(format!("{what}: expected {expected:?}, got {other:?}")),
    }
}

/// Runs the scenario with `seed` and returns its trace.
fn run(seed: u64, run: &str) -> Vec<String> {
    run_with(seed, run, Storage::default())
}

fn run_with(seed: u64, run: &str, storage: Storage) -> Vec<String> {
    replication::runtime::seed_rng(seed);
    let root = scratch_dir("sim", seed, run);
    let mut sim = turmoil::Builder::new()
        .simulation_duration(Duration::from_secs(120))
        .tick_duration(Duration::from_millis(1))
        .rng_seed(seed)
        .build();
    let handles = Handles::default();
    add_replicas(
        &mut sim,
        3,
        root.clone(),
        &handles,
        storage,
        &Default::default(),
    );
    let trace: Trace = Arc::default();
    {
        let (handles, trace) = (handles.clone(), trace.clone());
        sim.client("driver", async move {
            scenario(&handles, &trace).await?;
            Ok(())
        });
    }
    let outcome = sim.run();
    let _ = std::fs::remove_dir_all(&root);
    let trace = lines(&trace);
    if let Err(error) = outcome {
        panic!(
            "simulation failed (seed {seed}): {error}\ntrace:\n{}\nreproduce: SIM_SEED={seed} cargo nextest run -p sim --test smoke",
            trace.join("\n")
        );
    }
    trace
}

async fn scenario(handles: &Handles, trace: &Trace) -> Result<(), String> {
    let all = [1, 2, 3];
    let limit = Duration::from_secs(10);
    let first = handles
        .wait_for_leader(&all, limit)
        .await
        .ok_or("no leader was elected")?;
    note(trace, format!("node{first} leads"));
    let leader = handles.get(first).ok_or("leader handle missing")?;
    for count in 1..=5 {
        let reply = write(&leader, &["INCR", "counter"], count).await;
        expect(
            reply,
            Frame::Integer(count as i64),
            "INCR on the first leader",
        )?;
    }

    refusals_hand_back_their_ops(handles, first, &all).await?;
    note(
        trace,
        "a follower refused proposals and handed back their ops".into(),
    );

    // Cut the leader off from both followers.
    let majority: Vec<u64> = all.iter().copied().filter(|id| *id != first).collect();
    for other in &majority {
        turmoil::partition(host_name(first), host_name(*other));
    }
    note(trace, format!("node{first} partitioned away"));
    let cut_at = tokio::time::Instant::now();
    let second = handles
        .wait_for_leader(&majority, limit)
        .await
        .ok_or("the majority elected no leader")?;
    note(
        trace,
        format!(
            "node{second} leads the majority after {} ms",
            cut_at.elapsed().as_millis()
        ),
    );
    let leader = handles.get(second).ok_or("leader handle missing")?;
    for count in 6..=10 {
        let reply = write(&leader, &["INCR", "counter"], count).await;
        expect(
            reply,
            Frame::Integer(count as i64),
            "INCR on the new leader",
        )?;
    }

    // The isolated old leader cannot commit anything.
    let old = handles.get(first).ok_or("old leader handle missing")?;
    let stale = tokio::time::timeout(
        Duration::from_millis(500),
        write(&old, &["SET", "stale", "1"], 99),
    )
    .await;
    if let Ok(Ok(reply)) = stale {
        return Err(format!(
            "the isolated old leader committed a write: {reply:?}"
        ));
    }
    note(trace, "the isolated old leader committed nothing".into());

    for other in &majority {
        turmoil::repair(host_name(first), host_name(*other));
    }
    note(trace, "partition healed".into());
    let converged = converge(handles, &all, limit).await?;
    note_untimed(trace, format!("converged: {converged}"));

    let leader = handles
        .leader_among(&all)
        .and_then(|id| handles.get(id))
        .ok_or("no leader after healing")?;
    expect(
        write(&leader, &["GET", "counter"], 100).await,
        Frame::Bulk("10".into()),
        "GET counter after healing",
    )?;
    expect(
        write(&leader, &["EXISTS", "stale"], 101).await,
        Frame::Integer(0),
        "the unacknowledged write on the old leader",
    )?;
    let converged = converge(handles, &all, limit).await?;
    note_untimed(trace, format!("final: {converged}"));

    // Idle and healed, the leader keeps its place: its heartbeats reach the
    // followers, so none stands for election.
    let before = leader_and_term(handles, &all)?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = leader_and_term(handles, &all)?;
    if before != after {
        return Err(format!(
            "an idle group changed leader: (node, term) {before:?} -> {after:?}"
        ));
    }
    note_untimed(
        trace,
        format!("idle: node{} kept term {}", after.0, after.1),
    );
    Ok(())
}

/// Proposals made on a follower are refused with the leader's id, and each
/// comes back with its own op, alone or batched with another client's (its
/// commands answer with redirects naming their keys' slots).
async fn refusals_hand_back_their_ops(
    handles: &Handles,
    leader: u64,
    ids: &[u64],
) -> Result<(), String> {
    let follower = ids
        .iter()
        .find(|id| **id != leader)
        .and_then(|id| handles.get(*id))
        .ok_or("follower handle missing")?;
    let set = |key: &str| Op::Exec {
        db: 0,
        resp3: false,
        watched: Vec::new(),
        commands: vec![["SET", key, "1"]
            .iter()
            .map(|part| Bytes::copy_from_slice(part.as_bytes()))
            .collect()],
    };
    let expect_refused = |proposal: Proposal, key: &str| match proposal {
        Proposal::Refused(forward, Some(op))
            if forward.leader_id == Some(leader) && op == set(key) =>
        {
            Ok(())
        }
        other => Err(format!("a follower's proposal of {key}: {other:?}")),
    };
    let limit = Duration::from_secs(5);
    expect_refused(
        follower
            .propose(Request::new(now_ms(), 1, set("alone")), limit)
            .await,
        "alone",
    )?;
    let (first, second) = tokio::join!(
        follower.propose_batched(Request::new(now_ms(), 2, set("first")), limit),
        follower.propose_batched(Request::new(now_ms(), 3, set("second")), limit),
    );
    expect_refused(first, "first")?;
    expect_refused(second, "second")
}

/// The leader among `ids` and its term.
fn leader_and_term(handles: &Handles, ids: &[u64]) -> Result<(u64, u64), String> {
    use openraft::async_runtime::WatchReceiver;
    let id = handles.leader_among(ids).ok_or("no leader")?;
    let group = handles.get(id).ok_or("leader handle missing")?;
    let term = group.raft.metrics().borrow_watched().current_term;
    Ok((id, term))
}

/// Waits until every replica has applied the same index with the same digest.
async fn converge(handles: &Handles, ids: &[u64], limit: Duration) -> Result<String, String> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut last = Vec::new();
    while tokio::time::Instant::now() < deadline {
        last = ids
            .iter()
            .map(|id| handles.applied_and_digest(*id))
            .collect::<Vec<_>>();
        if let Some(Some(first)) = last.first() {
            if last.iter().all(|state| state.as_ref() == Some(first)) {
                return Ok(format!("applied {} digest {}", first.0, first.1));
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err(format!("replicas did not converge: {last:?}"))
}

/// The scenario reached its last step (the idle check after converging).
fn assert_ran_to_the_end(trace: &[String]) {
    assert!(
        trace.iter().any(|line| line.contains("idle: node")),
        "scenario ended early:\n{}",
        trace.join("\n")
    );
}

#[test]
fn a_partitioned_leader_is_replaced_and_the_group_converges() {
    let trace = run(seed_from_env(20261123), "once");
    println!("{}", trace.join("\n"));
    assert_ran_to_the_end(&trace);
}

#[test]
fn the_same_seed_replays_the_same_run() {
    let seed = seed_from_env(20261123);
    let first = run(seed, "first");
    let second = run(seed, "second");
    assert_eq!(
        first,
        second,
        "seed {seed} gave two different runs; reproduce: SIM_SEED={seed} cargo nextest run -p sim --test smoke"
    );
}

/// Groups heartbeating with their node's beat, as a node opens them. The
/// registry starts that beat itself when such a group joins it: no one
/// asks it to here, and the group still keeps its leader while idle.
#[test]
fn a_group_on_its_nodes_beat_keeps_its_leader() {
    let storage = Storage {
        node_heartbeats: true,
        ..Storage::default()
    };
    let trace = run_with(seed_from_env(20261123), "node-beat", storage);
    assert_ran_to_the_end(&trace);
}

/// A rolling upgrade: replicas 2 and 3 serve no stream sessions, as a
/// version before them. Whichever replica leads replicates to them by unary
/// appends (and to replica 1 by a session), so the scenario's writes still
/// commit through the partition and every replica converges.
#[test]
fn a_group_with_replicas_of_a_version_without_streams_still_replicates() {
    let storage = Storage {
        without_streams: 1 << 2 | 1 << 3,
        ..Storage::default()
    };
    let trace = run_with(seed_from_env(20261123), "without-streams", storage);
    assert_ran_to_the_end(&trace);
}
