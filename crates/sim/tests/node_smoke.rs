//! The real node under turmoil: three `slotraft node` replicas (RESP
//! listener, connections, sessions, the replicated request path, Raft RPCs,
//! log store) on simulated hosts, and a client speaking RESP to them. The
//! leader is partitioned away; the majority elects a leader that takes writes
//! (the client follows MOVED as a Redis client would); the isolated leader
//! acknowledges nothing; after healing every replica reports the same state
//! digest. Replaying a seed replays the run.
//!
//! Reproduce a failure with `SIM_SEED=<seed> cargo nextest run -p sim --test node_smoke`.

use std::sync::Arc;
use std::time::Duration;

use resp::Frame;
use sim::group::{host_name, Clocks, Handles, Storage};
use sim::node_host::{add_nodes, add_nodes_with, RespClient};
use sim::trace::{lines, note, note_untimed, scratch_dir, seed_from_env, Trace};

fn text(frame: &Frame) -> String {
    match frame {
        Frame::Simple(bytes) | Frame::Bulk(bytes) | Frame::Error(bytes) => {
            String::from_utf8_lossy(bytes).into_owned()
        }
        other => format!("{other:?}"),
    }
}

/// One command on node `id` over a fresh connection.
async fn call(id: u64, command: &[&str]) -> Result<Frame, String> {
    let mut client = RespClient::connect(id)
        .await
        .map_err(|error| format!("connecting to node{id}: {error}"))?;
    client
        .call(command)
        .await
        .map_err(|error| format!("{command:?} on node{id}: {error}"))
}

/// Sends `command` to the nodes in `ids` until one of them takes it (a
/// follower answers MOVED to the leader, which is tried next; no leader yet
/// answers CLUSTERDOWN or TRYAGAIN): the reply and the node that gave it.
async fn on_leader(ids: &[u64], command: &[&str]) -> Result<(u64, Frame), String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut last = String::new();
    while tokio::time::Instant::now() < deadline {
        for &id in ids {
            match call(id, command).await {
                Ok(Frame::Error(error)) => last = String::from_utf8_lossy(&error).into_owned(),
                Ok(reply) => return Ok((id, reply)),
                Err(error) => last = error,
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(format!("no node of {ids:?} took {command:?}: {last}"))
}

async fn expect_on_leader(ids: &[u64], command: &[&str], expected: Frame) -> Result<u64, String> {
    let (id, reply) = on_leader(ids, command).await?;
    if reply != expected {
        return Err(format!("{command:?}: expected {expected:?}, got {reply:?}"));
    }
    Ok(id)
}

/// Waits until every node reports the same DEBUG DIGEST (read with READONLY,
/// so followers answer from their own state).
async fn converge(ids: &[u64]) -> Result<String, String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut last = Vec::new();
    while tokio::time::Instant::now() < deadline {
        last.clear();
        for &id in ids {
            let digest = match RespClient::connect(id).await {
                Ok(mut client) => match client.call(&["READONLY"]).await {
                    Ok(_) => client
                        .call(&["DEBUG", "DIGEST"])
                        .await
                        .map(|frame| text(&frame))
                        .unwrap_or_default(),
                    Err(_) => String::new(),
                },
                Err(_) => String::new(),
            };
            last.push(digest);
        }
        if !last[0].is_empty() && last.iter().all(|digest| *digest == last[0]) {
            return Ok(last[0].clone());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(format!("the nodes did not converge: {last:?}"))
}

async fn scenario(trace: &Trace) -> Result<(), String> {
    let all = [1, 2, 3];
    let first = expect_on_leader(&all, &["SET", "probe", "1"], Frame::OK).await?;
    note(trace, format!("node{first} leads"));
    for count in 1..=5 {
        expect_on_leader(&[first], &["INCR", "counter"], Frame::Integer(count)).await?;
    }

    let majority: Vec<u64> = all.iter().copied().filter(|id| *id != first).collect();
    for other in &majority {
        turmoil::partition(host_name(first), host_name(*other));
    }
    note(trace, format!("node{first} partitioned away"));
    let cut_at = tokio::time::Instant::now();
    let second = expect_on_leader(&majority, &["INCR", "counter"], Frame::Integer(6)).await?;
    note(
        trace,
        format!(
            "node{second} took a write after {} ms",
            cut_at.elapsed().as_millis()
        ),
    );
    for count in 7..=10 {
        expect_on_leader(&majority, &["INCR", "counter"], Frame::Integer(count)).await?;
    }

    // The isolated old leader acknowledges nothing: it answers an error or
    // never answers.
    let stale = tokio::time::timeout(
        Duration::from_millis(1500),
        call(first, &["SET", "stale", "1"]),
    )
    .await;
    match stale {
        Ok(Ok(Frame::Error(error))) => note(
            trace,
            format!(
                "the isolated node answered {}",
                String::from_utf8_lossy(&error)
                    .split(' ')
                    .next()
                    .unwrap_or_default()
            ),
        ),
        Err(_) => note(trace, "the isolated node did not answer".into()),
        Ok(other) => return Err(format!("the isolated old leader answered {other:?}")),
    }

    for other in &majority {
        turmoil::repair(host_name(first), host_name(*other));
    }
    note(trace, "partition healed".into());
    let digest = converge(&all).await?;
    note_untimed(trace, format!("converged: {digest}"));
    let (_, counter) = on_leader(&all, &["GET", "counter"]).await?;
    note_untimed(trace, format!("counter = {}", text(&counter)));
    if counter != Frame::Bulk("10".into()) {
        return Err(format!("counter after healing: {counter:?}"));
    }
    let (_, stale) = on_leader(&all, &["EXISTS", "stale"]).await?;
    if stale != Frame::Integer(0) {
        return Err(format!("the unacknowledged write took effect: {stale:?}"));
    }
    Ok(())
}

/// Runs the scenario with `seed` and returns its trace.
fn run(seed: u64, run: &str) -> Vec<String> {
    replication::runtime::seed_rng(seed);
    let root = scratch_dir("node-sim", seed, run);
    let mut sim = turmoil::Builder::new()
        .simulation_duration(Duration::from_secs(120))
        .tick_duration(Duration::from_millis(1))
        .rng_seed(seed)
        .build();
    add_nodes(&mut sim, 3, root.clone(), seed);
    let trace: Trace = Arc::default();
    {
        let trace = trace.clone();
        sim.client("driver", async move {
            scenario(&trace).await?;
            Ok(())
        });
    }
    let outcome = sim.run();
    let _ = std::fs::remove_dir_all(&root);
    let trace = lines(&trace);
    if let Err(error) = outcome {
        panic!(
            "simulation failed (seed {seed}): {error}\ntrace:\n{}\nreproduce: SIM_SEED={seed} cargo nextest run -p sim --test node_smoke",
            trace.join("\n")
        );
    }
    trace
}

#[test]
fn the_real_node_fails_over_under_a_partition_and_converges() {
    let trace = run(seed_from_env(20261126), "a");
    println!("{}", trace.join("\n"));
    assert!(trace.iter().any(|line| line.contains("converged")));
}

#[test]
fn the_same_seed_replays_the_same_node_run() {
    let seed = seed_from_env(20261126);
    let first = run(seed, "first");
    let second = run(seed, "second");
    assert_eq!(first, second, "seed {seed} replayed differently");
}

/// Each simulated node reads its own skewed wall clock (TIME answers it).
#[test]
fn each_node_keeps_its_own_clock() {
    let seed = seed_from_env(20261126);
    let root = scratch_dir("node-sim", seed, "clocks");
    let mut sim = turmoil::Builder::new()
        .simulation_duration(Duration::from_secs(60))
        .tick_duration(Duration::from_millis(1))
        .rng_seed(seed)
        .build();
    add_nodes_with(
        &mut sim,
        3,
        root.clone(),
        seed,
        &Handles::default(),
        Storage::default(),
        &Default::default(),
        Clocks::with_offsets(&[(1, 0), (2, 60_000), (3, -60_000)]),
    );
    sim.client("driver", async move {
        let mut seconds = Vec::new();
        for id in 1..=3 {
            match call(id, &["TIME"]).await? {
                Frame::Array(parts) => seconds.push(text(&parts[0]).parse::<i64>()?),
                other => return Err(format!("TIME answered {other:?}").into()),
            }
        }
        assert!((seconds[1] - seconds[0] - 60).abs() <= 1, "{seconds:?}");
        assert!((seconds[0] - seconds[2] - 60).abs() <= 1, "{seconds:?}");
        Ok(())
    });
    let outcome = sim.run();
    let _ = std::fs::remove_dir_all(&root);
    outcome.unwrap();
}
