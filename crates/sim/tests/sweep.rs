//! The simulation's own acceptance: a fixed budget of seeds with every fault
//! kind passes every checker; one seed replays exactly; and two deliberately
//! broken builds are caught, which shows the checkers can fail: follower state
//! read as if linearizable, and writes acknowledged before their commit.
//!
//! `SIM_SEEDS` (default 200) and `SIM_FROM` (default 1) size the sweep; a
//! failing seed prints the one-line command that replays it.

use sim::client::ReadMode;
use sim::run::{run, Config};
use sim::sweep::sweep;

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(default)
}

/// Sweeps `seeds` seeds of `template` from `from` on one thread; fails
/// listing every failing seed with the command that replays it. One thread:
/// the tests of this file already run side by side.
fn budget(template: &Config, from: u64, seeds: u64) {
    let summary = sweep(template, from, seeds, 1, &|_| {});
    let mut text = String::new();
    for (config, report) in &summary.failures {
        text.push_str(&format!(
            "seed {}: {:?} {:?}\n  reproduce: {}\n",
            report.seed,
            report.error,
            report
                .violations
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>(),
            config.reproduce()
        ));
    }
    println!(
        "{} seeds, {} operations ({} unknown), {} faults, {:.1} simulated minutes in {:.1}s",
        summary.seeds,
        summary.operations,
        summary.unknown,
        summary.faults_applied,
        summary.simulated.as_secs_f64() / 60.0,
        summary.wall.as_secs_f64()
    );
    assert!(summary.failures.is_empty(), "failing seeds:\n{text}");
    assert!(summary.operations > 0);
}

/// The replicas' snapshots are files on the simulated disk, like their logs:
/// built, renamed into place, sent to lagging replicas and installed there,
/// and a crash loses what was not synced. Each replica ends the run with
/// one.
#[test]
fn snapshots_live_on_the_simulated_disk() {
    for config in [Config::new(5), Config::on_cluster(5)] {
        let report = run(&config);
        assert!(report.passed(), "{report:?}");
        assert!(
            report.snapshot_files >= 3,
            "{} snapshot files on the disks: {report:?}",
            report.snapshot_files
        );
    }
}

/// The first half of the `SIM_SEEDS` seeds of the every-fault sweep; the
/// second half is a test of its own, so the two run side by side (this
/// sweep is the suite's longest test).
#[test]
fn a_budget_of_seeds_with_every_fault_passes_the_checkers() {
    let (from, seeds) = (env_number("SIM_FROM", 1), env_number("SIM_SEEDS", 200));
    budget(&Config::new(0), from, seeds / 2);
}

#[test]
fn the_second_half_of_the_budget_with_every_fault_passes_the_checkers() {
    let (from, seeds) = (env_number("SIM_FROM", 1), env_number("SIM_SEEDS", 200));
    budget(&Config::new(0), from + seeds / 2, seeds - seeds / 2);
}

/// The same faults and checkers with the real `slotraft node` on the hosts
/// and clients speaking RESP to it.
#[test]
fn a_budget_of_seeds_on_the_real_node_passes_the_checkers() {
    budget(
        &Config::on_nodes(0),
        env_number("SIM_NODE_FROM", 1),
        env_number("SIM_NODE_SEEDS", 60),
    );
}

#[test]
fn one_seed_on_the_real_node_replays_the_same_trace() {
    let seed = env_number("SIM_NODE_FROM", 5);
    let first = run(&Config::on_nodes(seed));
    let second = run(&Config::on_nodes(seed));
    assert!(first.passed(), "{first:?}");
    assert!(first.operations > 100, "{first:?}");
    // Blocking pops both took elements and timed out.
    assert!(first.pops.0 > 0 && first.pops.1 > 0, "{first:?}");
    assert_eq!(
        first.trace_hash, second.trace_hash,
        "seed {seed} on the node gave two different runs: {first:?} vs {second:?}"
    );
}

/// The same faults, workload and checkers on a cluster of real nodes (a
/// metadata group and 3 shards x 3 replicas, formed by the admin's
/// `create`), whose clients follow MOVED, while slots holding workload keys
/// move between shards (`migrate_slots`) and the admin adds a fourth node,
/// moves replicas to and from it and deletes it again (`add_node`,
/// `move_replica`, `del_node`); after healing every migration and change is
/// finished, every group converges and the admin's `check` passes.
#[test]
fn a_budget_of_seeds_on_the_cluster_passes_the_checkers() {
    budget(
        &Config::on_cluster(0),
        env_number("SIM_CLUSTER_FROM", 1),
        env_number("SIM_CLUSTER_SEEDS", 40),
    );
}

#[test]
fn one_seed_on_the_cluster_replays_the_same_trace() {
    let seed = env_number("SIM_CLUSTER_FROM", 2);
    let first = run(&Config::on_cluster(seed));
    let second = run(&Config::on_cluster(seed));
    assert!(first.passed(), "{first:?}");
    assert!(first.operations > 100, "{first:?}");
    // Slots and replicas moved under the workload.
    assert!(first.migrations.0 > 0, "{first:?}");
    assert!(first.changes.0 > 0, "{first:?}");
    assert_eq!(
        first.trace_hash, second.trace_hash,
        "seed {seed} on the cluster gave two different runs: {first:?} vs {second:?}"
    );
}

/// EXEC of a transaction whose slot was frozen (writes) or dropped by a
/// migration by the time its entry applied answers an array with Redis's
/// TRYAGAIN text once per command, which reads as a transaction that ran
/// with every command failing (the transfer checkers saw its "balances").
/// Redis answers such an EXEC with the one TRYAGAIN (or MOVED/ASK) and
/// discards the transaction, as the node now does. Found by the first
/// cluster sweep.
#[test]
fn seed_3_on_the_cluster_exec_in_a_moving_slot_answers_one_error() {
    let report = run(&Config::on_cluster(3).with_spare(0));
    assert!(report.passed(), "seed 3 on the cluster: {report:?}");
}

/// A slot moved to a shard whose log time is behind the source's: the
/// limiter's `TIME` went back about 460 ms for its key (3222 -> 2762 ms),
/// so by the times the script itself read it admitted 6 within 936 ms.
/// Each shard's log time follows its own leaders' clocks; a migration
/// carries keys (their scores, their absolute TTLs) from one timeline to
/// another; an IMPORT entry now carries at least the source's log time.
/// Found by the first cluster sweep.
#[test]
fn seed_39_on_the_cluster_time_does_not_go_back_for_a_moved_key() {
    let report = run(&Config::on_cluster(39).with_spare(0));
    assert!(report.passed(), "seed 39 on the cluster: {report:?}");
}

/// `del-node` interrupted while it moved a replica away from the leaving
/// node (the new replica placed, the vote not handed over yet) could not be
/// rerun: every other node now hosted the shard, so it found no node to
/// move the replica to. It now resumes the interrupted move, to the
/// replica the group does not count as a voter yet. Found when the cluster
/// simulation started adding and deleting nodes. The same seed then found
/// that a restarting node, replaying its metadata log, deleted the data of
/// a replica an older topology did not place on it (see
/// `ClusterNode::close_departed`), and its shard's leader panicked on the
/// voter's log going back.
#[test]
fn seed_39_on_the_cluster_del_node_resumes_an_interrupted_move() {
    let report = run(&Config::on_cluster(39));
    assert!(
        report.passed(),
        "seed 39 on the cluster with a spare: {report:?}"
    );
}

/// A shard led by a node without a metadata replica: its leadership report
/// went to the first metadata voter only, which did not lead the metadata
/// group then and refused it, so the cluster kept presenting the former
/// leader, which answered MOVED, after healing. Reports now follow the
/// NOTLEADER reply to the metadata leader. Found when the cluster
/// simulation started moving replicas to a fourth node.
#[test]
fn seed_155_on_the_cluster_a_leader_without_metadata_replica_is_recorded() {
    pinned_on_cluster(&[155]);
}

/// A replica moved away from a node and later back to it started from
/// empty storage, its vote and log deleted when it left. A node cut off
/// during the first move, still following the configuration that counted
/// the returning node as a voter, asked it for its vote: the empty replica
/// granted it, and with the two votes (a majority of that old
/// configuration) the stale node led the shard without the entries the
/// real majority had committed (an acknowledged list element lost, reads
/// answered from old state). A left replica's data now stays on its node
/// and a replica placed there again resumes from it. Found by the
/// 10,000-seed cluster sweep with a spare node (4155 lost an element;
/// 2275 and 8913 read stale; 1736 and 1042 diverged after healing).
#[test]
fn seeds_4155_2275_8913_1736_1042_on_the_cluster_a_returning_replica_keeps_its_vote() {
    pinned_on_cluster(&[4155, 2275, 8913, 1736, 1042]);
}

/// A shard added while its first replica's node crashed 12 ms after it
/// formed the group: the log writer had made the founder's vote (for its
/// first election) durable before the membership entry appended ahead of
/// it, the crash kept the vote and lost the entry, and openraft then counted
/// the replica initialized (a vote of term 1) with no members: the shard
/// never elected a leader. A saved vote or committed index now waits for
/// the entries appended before it. Found by the cluster sweep once it added
/// a shard under faults.
#[test]
fn seeds_372_686_on_the_cluster_a_crashed_founder_still_forms_its_shard() {
    pinned_on_cluster(&[372, 686]);
}

/// The simulation's own bug: all three founders had just restarted and were
/// replaying their metadata logs, so the newest topology any of them showed
/// predated the spare node; `del_node` answered "no node 4 in the cluster",
/// which the simulation took for a removal already done and shut the spare
/// down for good while the cluster still placed two replicas on it. That
/// shortcut now needs every node to agree on a topology at least as new as
/// any seen before.
#[test]
fn seed_4117_on_the_cluster_a_replaying_cluster_is_not_taken_for_a_finished_del_node() {
    pinned_on_cluster(&[4117]);
}

/// A shard's second leader of one Raft term (openraft orders leaders by term,
/// then node id) had its leadership report refused by the metadata group,
/// which kept the first one: every node but the leaders' own sent that
/// shard's clients MOVED to a follower for as long as the term lasted. Found
/// by the 4,000-seed cluster sweep (the admin's check after healing).
#[test]
fn seed_2506_on_the_cluster_a_later_leader_of_one_term_is_recorded() {
    let report = run(&Config::on_cluster(2506).with_spare(0));
    assert!(report.passed(), "seed 2506 on the cluster: {report:?}");
}

/// Reads sent with READONLY to whichever node the client is connected to,
/// followers included, and taken as linearizable: the node's own follower
/// read path, which the checkers must flag.
#[test]
fn readonly_reads_on_followers_are_caught_on_the_real_node() {
    let template = Config {
        read_mode: ReadMode::AnyReplica,
        ..Config::on_nodes(0)
    };
    assert!(
        flagged(&template, &["linearizable"]) > 0,
        "READONLY reads taken as linearizable went unnoticed in 20 seeds"
    );
}

/// EXEC of a transaction that did not run (refused with CLUSTERDOWN, or
/// proposed and lost: UNKNOWN) answered an array holding that error once
/// per command, which reads as a transaction that ran with every command
/// failing; the transfer checker saw its "balances". Found in the first
/// sweep of the real node (seeds 3, 10, 15, 17, 18 of 1..=20); EXEC now
/// answers the one error.
#[test]
fn seed_3_on_the_real_node_exec_that_did_not_run_answers_one_error() {
    let report = run(&Config::on_nodes(3));
    assert!(report.passed(), "seed 3 on the node: {report:?}");
}

#[test]
fn one_seed_replays_the_same_trace() {
    let seed = env_number("SIM_FROM", 7);
    let first = run(&Config::new(seed));
    let second = run(&Config::new(seed));
    assert!(first.passed(), "{first:?}");
    assert!(first.operations > 100, "{first:?}");
    // The workload exercises the limiter both ways.
    assert!(
        first.admissions.0 > 0 && first.admissions.1 > 0,
        "{first:?}"
    );
    assert_eq!(
        first.trace_hash, second.trace_hash,
        "seed {seed} gave two different runs: {first:?} vs {second:?}"
    );
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |count| count.get())
}

/// How many of seeds 1..=20 of `template` some of `checkers` flagged.
fn flagged(template: &Config, checkers: &[&str]) -> usize {
    sweep(template, 1, 20, threads(), &|_| {})
        .failures
        .iter()
        .filter(|(_, report)| {
            report
                .violations
                .iter()
                .any(|violation| checkers.contains(&violation.checker))
        })
        .count()
}

#[test]
fn stale_follower_reads_are_caught_by_the_checkers() {
    let template = Config {
        read_mode: ReadMode::AnyReplica,
        ..Config::new(0)
    };
    assert!(
        flagged(&template, &["linearizable"]) > 0,
        "reading followers as if linearizable went unnoticed in 20 seeds"
    );
}

#[test]
fn acknowledging_before_commit_is_caught_by_the_checkers() {
    let template = Config {
        ack_before_commit: true,
        ..Config::new(0)
    };
    assert!(
        flagged(&template, &["linearizable", "no-lost-elements"]) > 0,
        "acknowledging writes before their commit went unnoticed in 20 seeds"
    );
}

/// Runs a seed pinned to a bug it once found; it must pass every checker.
fn pinned(seed: u64) {
    let report = run(&Config::new(seed));
    assert!(report.passed(), "seed {seed}: {report:?}");
}

/// Runs pinned cluster seeds (with the default spare node).
fn pinned_on_cluster(seeds: &[u64]) {
    for &seed in seeds {
        let report = run(&Config::on_cluster(seed));
        assert!(report.passed(), "seed {seed} on the cluster: {report:?}");
    }
}

/// A restarted leader used to restore its leadership without an election
/// and serve reads that missed writes it had acknowledged (its committed index
/// on disk was behind): first seen at seed 8 of the first sweep. With the
/// present harness, seeds 7, 35, 103, 105 and 144 of 1..=300 fail that way when
/// the restore is enabled; seed 7 stays as the regression test.
#[test]
fn seed_7_a_restarted_leader_serves_no_stale_read() {
    pinned(7);
}

/// A leader that demoted itself to learner kept leading with a lapsed lease
/// and no other replica was elected: the group stalled. Membership changes
/// now hand leadership over before demoting the leader. (Found while
/// partitions still dropped TCP segments; kept as a regression run.)
#[test]
fn seed_428_a_demoted_leader_hands_over_first() {
    pinned(428);
}

/// A leader that handed its leadership over still passed its own lease check
/// and served a stale read while the new leader took writes. The lease no
/// longer vouches for reads once a hand-over starts. (Found while partitions
/// still dropped TCP segments; with partitions as stalls, 1,000 seeds did not
/// reproduce it without the fix. Kept as a regression run.)
#[test]
fn seed_268_a_leader_handing_over_serves_no_lease_read() {
    pinned(268);
}

/// Log time was not kept in snapshots: a replica restored from one applied
/// later entries at their own (skewed) leader time instead of the group's
/// log time, and its digest diverged (a TTL set from the script's TIME).
/// First seen at seed 1329; with the present harness seed 829 is the one of
/// 1..=1500 that fails without the fix.
#[test]
fn seed_829_log_time_survives_snapshots() {
    pinned(829);
}

/// A history the checker once gave up on: 101 operations on one queue key,
/// 10 of them of unknown outcome, took 2.5 million configurations to
/// linearize, beyond the search's budget of the time (2 million). Found by
/// the 10,000-seed cluster sweep; the search now tries operations of known
/// outcome first and remembers configurations by fingerprint, with a budget
/// of 10 million.
#[test]
fn seed_1691_on_the_cluster_a_queue_with_many_unknown_outcomes_is_checked_to_the_end() {
    pinned_on_cluster(&[1691]);
}

/// A spare node that took a deleted founder's metadata vote crashed right
/// after. It restarted from the topology it was handed when it joined,
/// which listed neither it as a voter nor the founder as gone, so it asked
/// only that founder for news: nobody answered, and it stayed at that old
/// topology for good, hosting none of its replicas. Found by the cluster
/// sweep once it deleted founders; a node without a metadata replica now
/// asks the other voters, then every node of its view, for the topology.
#[test]
fn seeds_2672_3407_on_the_cluster_a_restarted_new_voter_finds_the_topology() {
    pinned_on_cluster(&[2672, 3407]);
}

/// The same restarted voter, but with the deleted founder still running: a
/// `del-node` cut short before it shut the founder down left it answering
/// with the last topology it applied (its metadata replica, removed from
/// the group, stayed a candidate). The restarted node asked that founder
/// first on every round and stopped at its answer, so it never learned it
/// had become a voter, the nodes never agreed on the newest topology, and
/// the removal could not finish. A node without a metadata replica now asks
/// a different voter of its view first on each round. Found by the cluster
/// sweep of seeds 30001..=33000.
#[test]
fn seed_30412_on_the_cluster_a_stale_founder_does_not_hold_back_a_new_voter() {
    pinned_on_cluster(&[30412]);
}
