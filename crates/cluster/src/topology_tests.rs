use std::collections::{BTreeMap, BTreeSet};

use crate::topology::{even_split, is_valid_name, Leader, Migration, NodeInfo, Shard, Topology};
use crate::SLOTS;

fn node(id: u64, zone: Option<&str>) -> NodeInfo {
    NodeInfo {
        id,
        name: format!("{:040x}", 0xa000 + id),
        host: "127.0.0.1".into(),
        port: 7000 + id as u16,
        raft_port: 17000 + id as u16,
        zone: zone.map(str::to_string),
    }
}

fn nodes(count: u64) -> Vec<NodeInfo> {
    (1..=count).map(|id| node(id, None)).collect()
}

fn shard_names() -> impl FnMut() -> String {
    let mut next = 0u64;
    move || {
        next += 1;
        format!("{:040x}", 0x5000 + next)
    }
}

fn create(node_list: Vec<NodeInfo>, shards: usize, replicas: usize) -> Topology {
    Topology::create(node_list, shards, replicas, shard_names()).expect("create")
}

#[test]
fn split_matches_redis_cli() {
    assert_eq!(even_split(1), vec![(0, 16383)]);
    assert_eq!(
        even_split(3),
        vec![(0, 5460), (5461, 10922), (10923, 16383)]
    );
    assert_eq!(
        even_split(4),
        vec![(0, 4095), (4096, 8191), (8192, 12287), (12288, 16383)]
    );
    assert_eq!(
        even_split(5),
        vec![
            (0, 3276),
            (3277, 6553),
            (6554, 9829),
            (9830, 13106),
            (13107, 16383)
        ]
    );
}

#[test]
fn split_is_contiguous_and_even() {
    for masters in (1..=64).chain([100, 1000, 5000, 16383, 16384]) {
        let ranges = even_split(masters);
        assert_eq!(ranges.len(), masters);
        let mut next = 0u32;
        let floor = u32::from(SLOTS) / masters as u32;
        for &(start, end) in &ranges {
            assert_eq!(u32::from(start), next, "{masters} masters: {ranges:?}");
            let size = u32::from(end) - u32::from(start) + 1;
            assert!(
                size == floor || size == floor + 1,
                "{masters} masters: range {start}-{end} has {size} slots"
            );
            next = u32::from(end) + 1;
        }
        assert_eq!(next, u32::from(SLOTS));
    }
}

#[test]
fn create_three_by_three() {
    let topology = create(nodes(3), 3, 3);
    assert_eq!(topology.epoch, 1);
    assert_eq!(topology.ranges_of(1), vec![(0, 5460)]);
    assert_eq!(topology.ranges_of(2), vec![(5461, 10922)]);
    assert_eq!(topology.ranges_of(3), vec![(10923, 16383)]);
    let replicas: Vec<Vec<u64>> = topology
        .shards
        .values()
        .map(|shard| shard.replicas.clone())
        .collect();
    // Each node is the preferred leader of one shard.
    assert_eq!(replicas, vec![vec![1, 2, 3], vec![2, 3, 1], vec![3, 1, 2]]);
    assert_eq!(topology.metadata_voters, vec![1, 2, 3]);
    assert!(topology.leaders.is_empty());
    assert!(topology.migrations.is_empty());
    assert_eq!(topology.shards_hosted_by(2), vec![1, 2, 3]);
    assert_eq!(topology.shards_led_by(2), vec![2]);
    assert_eq!(topology.slot_owner(0), Some(1));
    assert_eq!(topology.slot_owner(5460), Some(1));
    assert_eq!(topology.slot_owner(5461), Some(2));
    assert_eq!(topology.slot_owner(16383), Some(3));
    assert_eq!(topology.slot_owner(16384), None);
    assert_eq!(topology.node_for_slot(12182).map(|node| node.id), Some(3));
}

#[test]
fn placement_properties() {
    for node_count in 1..=9u64 {
        for shards in 1..=14usize {
            for replicas in 1..=(node_count as usize).min(5) {
                let topology = create(nodes(node_count), shards, replicas);
                topology.validate().expect("valid");
                let cap = (shards * replicas).div_ceil(node_count as usize);
                let mut load: BTreeMap<u64, usize> = BTreeMap::new();
                let mut leads: BTreeMap<u64, usize> = BTreeMap::new();
                assert_eq!(topology.shards.len(), shards);
                for shard in topology.shards.values() {
                    assert_eq!(shard.replicas.len(), replicas);
                    let distinct: BTreeSet<u64> = shard.replicas.iter().copied().collect();
                    assert_eq!(distinct.len(), replicas, "two replicas on one node");
                    for &replica in &shard.replicas {
                        *load.entry(replica).or_default() += 1;
                    }
                    *leads.entry(shard.replicas[0]).or_default() += 1;
                }
                let case = format!("{node_count} nodes, {shards} shards, {replicas} replicas");
                assert!(load.values().all(|&count| count <= cap), "{case}: {load:?}");
                // Every node carries work when there is enough to go round.
                if shards * replicas >= node_count as usize {
                    assert_eq!(load.len(), node_count as usize, "{case}: idle node");
                }
                let lead_cap = shards.div_ceil(node_count as usize);
                assert!(
                    leads.values().all(|&count| count <= lead_cap),
                    "{case}: preferred leaders {leads:?}"
                );
                let voters = topology.metadata_voters.len();
                let expected = if node_count >= 5 {
                    5
                } else {
                    node_count.min(3) as usize
                };
                assert_eq!(voters, expected, "{case}");
                let covered: u32 = topology
                    .shards
                    .keys()
                    .flat_map(|&shard| topology.ranges_of(shard))
                    .map(|(start, end)| u32::from(end - start) + 1)
                    .sum();
                assert_eq!(covered, u32::from(SLOTS));
            }
        }
    }
}

#[test]
fn placement_spreads_zones() {
    let zones = ["a", "b", "c"];
    for per_zone in 1..=3u64 {
        let list: Vec<NodeInfo> = (0..per_zone * 3)
            .map(|index| node(index + 1, Some(zones[(index % 3) as usize])))
            .collect();
        for shards in 1..=10 {
            for replicas in 1..=3 {
                let topology = create(list.clone(), shards, replicas);
                for shard in topology.shards.values() {
                    let used: BTreeSet<&str> = shard
                        .replicas
                        .iter()
                        .map(|id| topology.nodes[id].zone.as_deref().unwrap())
                        .collect();
                    assert_eq!(
                        used.len(),
                        replicas,
                        "{per_zone} per zone, {shards} shards: {:?}",
                        shard.replicas
                    );
                }
            }
        }
    }
}

#[test]
fn placement_with_grouped_zone_order() {
    // Nodes listed zone by zone still spread each shard over the zones.
    let list: Vec<NodeInfo> = (1..=6)
        .map(|id| {
            node(
                id,
                Some(if id <= 2 {
                    "a"
                } else if id <= 4 {
                    "b"
                } else {
                    "c"
                }),
            )
        })
        .collect();
    let topology = create(list, 6, 3);
    for shard in topology.shards.values() {
        let used: BTreeSet<&str> = shard
            .replicas
            .iter()
            .map(|id| topology.nodes[id].zone.as_deref().unwrap())
            .collect();
        assert_eq!(used.len(), 3, "{:?}", shard.replicas);
    }
    // Voters: one per zone first, then a second round.
    assert_eq!(topology.metadata_voters, vec![1, 2, 3, 4, 5]);
}

#[test]
fn placement_with_lopsided_zones_stays_within_cap() {
    // One node in zone a, three in b: zone spreading cannot be perfect, and
    // the per-node cap still holds.
    let list = vec![
        node(1, Some("a")),
        node(2, Some("b")),
        node(3, Some("b")),
        node(4, Some("b")),
    ];
    for shards in 1..=12 {
        let topology = create(list.clone(), shards, 3);
        let cap = (shards * 3).div_ceil(4);
        for id in 1..=4 {
            assert!(topology.shards_hosted_by(id).len() <= cap);
        }
    }
}

#[test]
fn voters_spread_over_zones() {
    let list = vec![
        node(1, Some("a")),
        node(2, Some("a")),
        node(3, Some("a")),
        node(4, Some("b")),
        node(5, Some("c")),
        node(6, Some("c")),
    ];
    let topology = create(list, 3, 3);
    assert_eq!(topology.metadata_voters, vec![1, 2, 4, 5, 6]);
    let small = create(
        vec![
            node(1, Some("a")),
            node(2, Some("a")),
            node(3, Some("b")),
            node(4, Some("b")),
        ],
        2,
        2,
    );
    assert_eq!(small.metadata_voters, vec![1, 2, 3]);
}

#[test]
fn create_errors() {
    let error = |result: Result<Topology, String>| result.expect_err("should fail");
    assert!(error(Topology::create(vec![], 1, 1, shard_names())).contains("at least one node"));
    assert!(error(Topology::create(nodes(3), 0, 1, shard_names())).contains("at least one shard"));
    assert!(error(Topology::create(nodes(3), 1, 0, shard_names())).contains("at least one replica"));
    assert_eq!(
        error(Topology::create(nodes(2), 3, 3, shard_names())),
        "3 replicas per shard need at least 3 nodes, got 2"
    );
    assert!(error(Topology::create(nodes(3), 16385, 1, shard_names())).contains("16384"));
    let mut twice = nodes(2);
    twice.push(node(1, None));
    assert!(error(Topology::create(twice, 1, 1, shard_names())).contains("node id 1"));
    assert!(
        error(Topology::create(nodes(3), 2, 1, || "not-hex".to_string())).contains("invalid name")
    );
    assert!(
        error(Topology::create(nodes(3), 2, 1, || format!("{:040x}", 7))).contains("used twice")
    );
    let mut shared_address = nodes(2);
    shared_address[1].port = shared_address[0].port;
    assert!(error(Topology::create(shared_address, 1, 1, shard_names())).contains("address"));
}

#[test]
fn names() {
    assert!(is_valid_name(&"0123456789abcdef".repeat(3)[..40]));
    assert!(!is_valid_name(&"A".repeat(40)));
    assert!(!is_valid_name(&"a".repeat(39)));
    assert!(!is_valid_name(&"g".repeat(40)));
}

#[test]
fn slot_owner_agrees_with_ranges() {
    let topology = create(nodes(5), 7, 3)
        .assign_slots(&[(100, 100), (200, 300), (16000, 16383)], 2)
        .unwrap();
    let mut owners = vec![None; usize::from(SLOTS)];
    for &shard in topology.shards.keys() {
        for (start, end) in topology.ranges_of(shard) {
            for slot in start..=end {
                assert_eq!(owners[usize::from(slot)], None, "slot {slot} twice");
                owners[usize::from(slot)] = Some(shard);
            }
        }
    }
    for slot in 0..SLOTS {
        assert_eq!(topology.slot_owner(slot), owners[usize::from(slot)]);
    }
}

#[test]
fn round_trip() {
    let build = || {
        let topology = create(nodes(5), 4, 3);
        let follower = topology.shards[&2].replicas[1];
        topology
            .with_leader(2, follower, 7)
            .unwrap()
            .begin_migration(10, 3)
            .unwrap()
    };
    let topology = build();
    let bytes = topology.to_bytes();
    let decoded = Topology::from_bytes(&bytes).unwrap();
    assert_eq!(decoded, topology);
    decoded.validate().unwrap();
    // Deterministic: the same topology built twice encodes identically.
    assert_eq!(build().to_bytes(), bytes);
}

#[test]
fn decode_errors() {
    let bytes = create(nodes(3), 3, 3).to_bytes();
    assert_eq!(
        Topology::from_bytes(&[]).unwrap_err(),
        "topology decode error: empty input"
    );
    let mut wrong_version = bytes.clone();
    wrong_version[0] = 9;
    assert!(Topology::from_bytes(&wrong_version)
        .unwrap_err()
        .contains("unsupported format version 9"));
    for cut in [1, 2, bytes.len() / 2, bytes.len() - 1] {
        let error = Topology::from_bytes(&bytes[..cut]).unwrap_err();
        assert!(error.starts_with("topology decode error:"), "{error}");
    }
    let mut trailing = bytes.clone();
    trailing.push(0);
    assert_eq!(
        Topology::from_bytes(&trailing).unwrap_err(),
        "topology decode error: 1 trailing bytes"
    );
}

#[test]
fn validation_errors() {
    let base = create(nodes(4), 3, 3);
    base.validate().unwrap();
    let check = |change: &dyn Fn(&mut Topology), expected: &str| {
        let mut topology = base.clone();
        change(&mut topology);
        let error = topology.validate().expect_err(expected);
        assert!(error.contains(expected), "{error:?} lacks {expected:?}");
    };
    check(
        &|t| t.nodes.get_mut(&1).unwrap().name = "x".into(),
        "invalid name",
    );
    check(
        &|t| t.nodes.get_mut(&2).unwrap().name = t.nodes[&1].name.clone(),
        "node name",
    );
    check(
        &|t| t.nodes.get_mut(&2).unwrap().id = 9,
        "stored under id 2",
    );
    check(&|t| t.nodes.get_mut(&2).unwrap().port = 0, "zero port");
    check(&|t| t.nodes.get_mut(&2).unwrap().host.clear(), "empty host");
    check(
        &|t| t.shards.get_mut(&1).unwrap().name = t.shards[&2].name.clone(),
        "shard name",
    );
    check(
        &|t| t.shards.get_mut(&1).unwrap().replicas.clear(),
        "no replicas",
    );
    check(
        &|t| t.shards.get_mut(&1).unwrap().replicas.push(99),
        "unknown node 99",
    );
    check(
        &|t| {
            let shard = t.shards.get_mut(&1).unwrap();
            shard.replicas[1] = shard.replicas[0];
        },
        "two replicas",
    );
    check(
        &|t| {
            let mut shard = t.shards.remove(&1).unwrap();
            shard.id = 0;
            t.shards.insert(0, shard);
        },
        "reserved",
    );
    check(&|t| t.slots.assign(0, 10, 42), "unknown shard 42");
    check(
        &|t| {
            t.slots = crate::SlotMap::default();
            t.slots.assign(1, 16383, 1);
        },
        "slot 0 has no shard",
    );
    check(
        &|t| {
            t.leaders.insert(1, Leader { node: 4, term: 1 });
        },
        "not one of its replicas",
    );
    check(
        &|t| {
            t.leaders.insert(9, Leader { node: 1, term: 1 });
        },
        "unknown shard 9",
    );
    check(&|t| t.metadata_voters.clear(), "no voters");
    check(&|t| t.metadata_voters = vec![2, 1, 3], "sorted");
    check(&|t| t.metadata_voters = vec![1, 2, 77], "voter 77");
    check(
        &|t| {
            t.migrations.insert(0, Migration { from: 2, to: 3 });
        },
        "does not own it",
    );
    check(
        &|t| {
            t.migrations.insert(0, Migration { from: 1, to: 1 });
        },
        "not another known shard",
    );
}

#[test]
fn leaders_move_forward_without_epoch() {
    let topology = create(nodes(3), 3, 3);
    assert_eq!(topology.leader_of(1), Some(1));
    let moved = topology.with_leader(1, 3, 5).unwrap();
    assert_eq!(moved.epoch, topology.epoch);
    assert_eq!(moved.leader_of(1), Some(3));
    assert_eq!(moved.members_leader_first(1), vec![3, 1, 2]);
    let stale = moved.with_leader(1, 2, 4).unwrap();
    assert_eq!(stale, moved);
    let same = moved.with_leader(1, 3, 5).unwrap();
    assert_eq!(same, moved);
    // One term, two leaders in turn: the higher node id came later.
    assert_eq!(moved.with_leader(1, 2, 5).unwrap(), moved);
    assert_eq!(
        moved
            .with_leader(1, 2, 5)
            .unwrap()
            .with_leader(1, 3, 5)
            .unwrap(),
        moved
    );
    let lower = topology.with_leader(1, 2, 5).unwrap();
    assert_eq!(lower.with_leader(1, 3, 5).unwrap().leader_of(1), Some(3));
    assert_eq!(moved.with_leader(1, 2, 6).unwrap().leader_of(1), Some(2));
    assert!(topology.with_leader(9, 1, 1).is_err());
    let four = create(nodes(4), 1, 3);
    assert!(four
        .with_leader(1, 4, 1)
        .unwrap_err()
        .contains("not a replica"));
}

#[test]
fn assign_slots_moves_ownership() {
    let topology = create(nodes(3), 3, 3);
    let next = topology.assign_slots(&[(5000, 5999)], 3).unwrap();
    assert_eq!(next.epoch, 2);
    next.validate().unwrap();
    assert_eq!(next.ranges_of(1), vec![(0, 4999)]);
    assert_eq!(next.ranges_of(2), vec![(6000, 10922)]);
    assert_eq!(next.ranges_of(3), vec![(5000, 5999), (10923, 16383)]);
    // Giving back the rest merges ranges.
    let merged = next.assign_slots(&[(6000, 10922)], 3).unwrap();
    assert_eq!(merged.ranges_of(3), vec![(5000, 16383)]);
    assert_eq!(merged.slots.ranges().len(), 2);
    merged.validate().unwrap();
    assert!(topology.assign_slots(&[(5, 4)], 1).is_err());
    assert!(topology.assign_slots(&[(0, 16384)], 1).is_err());
    assert!(topology.assign_slots(&[(0, 1)], 9).is_err());
}

#[test]
fn migrations() {
    let topology = create(nodes(3), 3, 3);
    let started = topology.begin_migration(42, 2).unwrap();
    assert_eq!(started.epoch, 2);
    assert_eq!(started.migrations[&42], Migration { from: 1, to: 2 });
    assert_eq!(started.slot_owner(42), Some(1));
    started.validate().unwrap();
    assert!(started
        .begin_migration(42, 3)
        .unwrap_err()
        .contains("already migrating"));
    assert!(started
        .begin_migration(43, 1)
        .unwrap_err()
        .contains("already belongs"));
    assert!(started
        .assign_slots(&[(0, 100)], 3)
        .unwrap_err()
        .contains("slot 42"));
    let finished = started.finish_migration(42).unwrap();
    assert_eq!(finished.epoch, 3);
    assert!(finished.migrations.is_empty());
    assert_eq!(finished.slot_owner(42), Some(2));
    assert_eq!(finished.ranges_of(1), vec![(0, 41), (43, 5460)]);
    finished.validate().unwrap();
    assert!(finished.finish_migration(42).is_err());
    let cancelled = started.cancel_migration(42).unwrap();
    assert_eq!(cancelled.slot_owner(42), Some(1));
    assert!(cancelled.migrations.is_empty());
}

#[test]
fn nodes_and_shards_come_and_go() {
    let topology = create(nodes(3), 3, 3);
    let added = topology.add_node(node(4, Some("z"))).unwrap();
    assert_eq!(added.epoch, 2);
    assert!(added.add_node(node(4, None)).is_err());
    let mut clash = node(5, None);
    clash.name = added.nodes[&1].name.clone();
    assert!(added.add_node(clash).is_err());
    assert!(added.remove_node(1).unwrap_err().contains("holds replicas"));
    let removed = added.remove_node(4).unwrap();
    assert_eq!(removed.nodes.len(), 3);
    assert!(removed.remove_node(4).is_err());

    let shard = Shard {
        id: 4,
        name: format!("{:040x}", 0xbeef),
        replicas: vec![4, 1, 2],
    };
    assert!(
        topology.add_shard(shard.clone()).is_err(),
        "node 4 is unknown"
    );
    let with_shard = added.add_shard(shard.clone()).unwrap();
    assert!(with_shard.ranges_of(4).is_empty());
    assert!(with_shard.add_shard(shard).is_err());
    assert!(with_shard.remove_node(4).is_err());
    let resharded = with_shard.assign_slots(&[(0, 99)], 4).unwrap();
    assert!(resharded
        .remove_shard(4)
        .unwrap_err()
        .contains("owns slots"));
    let back = resharded.assign_slots(&[(0, 99)], 1).unwrap();
    let gone = back.remove_shard(4).unwrap();
    assert!(!gone.shards.contains_key(&4));
    gone.validate().unwrap();
}

#[test]
fn move_replica_keeps_position() {
    let topology = create(nodes(3), 3, 3)
        .add_node(node(4, None))
        .unwrap()
        .with_leader(2, 2, 3)
        .unwrap();
    let moved = topology.move_replica(2, 2, 4).unwrap();
    assert_eq!(moved.shards[&2].replicas, vec![4, 3, 1]);
    assert!(!moved.leaders.contains_key(&2), "the leader left");
    assert_eq!(moved.leader_of(2), Some(4));
    moved.validate().unwrap();
    assert!(topology.move_replica(2, 4, 1).is_err());
    assert!(topology.move_replica(2, 2, 9).is_err());
    assert!(topology
        .move_replica(2, 2, 2)
        .unwrap_err()
        .contains("already holds"));
}

/// A move in two steps: the new replica is placed last, then takes the
/// leaving replica's place.
#[test]
fn a_replica_added_then_moved_takes_the_leavers_place() {
    let topology = create(nodes(3), 3, 3).add_node(node(4, None)).unwrap();
    let before = topology.shards[&2].replicas.clone();
    let added = topology.add_replica(2, 4).unwrap();
    assert_eq!(added.epoch, topology.epoch + 1);
    let mut expected = before.clone();
    expected.push(4);
    assert_eq!(added.shards[&2].replicas, expected);
    added.validate().unwrap();
    assert!(added
        .add_replica(2, 4)
        .unwrap_err()
        .contains("already holds"));
    assert!(added.add_replica(9, 4).is_err());
    assert!(added.add_replica(2, 9).is_err());
    let leaving = before[1];
    let moved = added.move_replica(2, leaving, 4).unwrap();
    let mut expected = before.clone();
    expected[1] = 4;
    assert_eq!(moved.shards[&2].replicas, expected);
    moved.validate().unwrap();
    assert!(moved
        .shards_hosted_by(leaving)
        .iter()
        .all(|&shard| shard != 2));
}

#[test]
fn large_cluster() {
    let topology = create(nodes(50), 2000, 3);
    topology.validate().unwrap();
    let mut leads: BTreeMap<u64, usize> = BTreeMap::new();
    for shard in topology.shards.values() {
        *leads.entry(shard.replicas[0]).or_default() += 1;
    }
    assert!(leads.values().all(|&count| count == 40), "{leads:?}");
    for id in 1..=50 {
        assert_eq!(topology.shards_hosted_by(id).len(), 120);
    }
}

#[test]
fn a_metadata_voter_is_replaced_in_order() {
    let topology = create(nodes(3), 3, 3).add_node(node(4, None)).unwrap();
    assert_eq!(topology.metadata_voters, vec![1, 2, 3]);
    let next = topology.replace_metadata_voter(1, 4).unwrap();
    assert_eq!(next.metadata_voters, vec![2, 3, 4]);
    assert_eq!(next.epoch, topology.epoch + 1);
    assert!(next.replace_metadata_voter(1, 4).is_err());
    assert!(next
        .replace_metadata_voter(2, 3)
        .unwrap_err()
        .contains("already"));
    assert!(next.replace_metadata_voter(2, 9).is_err());
    assert!(topology.remove_node(1).is_err());
}
