use std::collections::BTreeMap;

use crate::topology::{NodeInfo, Shard, SlotMap, Topology};
use crate::view::{Endpoint, ShardNode};

fn name(digit: char) -> String {
    digit.to_string().repeat(40)
}

/// Four nodes; shard 1 = [1, 2] owns 0-5460, shard 2 = [2, 3] owns 5461-10922,
/// shard 3 = [3, 1] owns 10923-16383; node 4 hosts nothing. Node 3 leads
/// shard 2 (reported in term 5), so node 2 leads nothing.
fn fixture() -> Topology {
    let nodes: BTreeMap<u64, NodeInfo> = (1..=4u16)
        .map(|id| {
            (
                u64::from(id),
                NodeInfo {
                    id: u64::from(id),
                    name: name(char::from(b'0' + id as u8)),
                    host: "127.0.0.1".into(),
                    port: 7000 + id,
                    raft_port: 17000 + id,
                    zone: None,
                },
            )
        })
        .collect();
    let shards: BTreeMap<u64, Shard> = [(1, vec![1, 2]), (2, vec![2, 3]), (3, vec![3, 1])]
        .into_iter()
        .map(|(id, replicas)| {
            (
                id,
                Shard {
                    id,
                    name: name(char::from(b'a' + id as u8)),
                    replicas,
                },
            )
        })
        .collect();
    let mut slots = SlotMap::default();
    slots.assign(0, 5460, 1);
    slots.assign(5461, 10922, 2);
    slots.assign(10923, 16383, 3);
    let topology = Topology {
        epoch: 1,
        nodes,
        shards,
        slots,
        leaders: BTreeMap::new(),
        metadata_voters: vec![1, 2, 3],
        migrations: BTreeMap::new(),
    };
    topology.validate().unwrap();
    topology.with_leader(2, 3, 5).unwrap()
}

fn endpoint(id: u16) -> Endpoint {
    Endpoint {
        host: "127.0.0.1".into(),
        port: 7000 + id,
        name: name(char::from(b'0' + id as u8)),
    }
}

const NOW: u64 = 1_700_000_000_000;

#[test]
fn nodes_text_exact() {
    let text = fixture().nodes_text(1, NOW);
    let expected = format!(
        "{n1} 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460\n\
         {n2} 127.0.0.1:7002@17002 slave {n1} 0 {NOW} 1 connected\n\
         {n3} 127.0.0.1:7003@17003 master - 0 {NOW} 1 connected 5461-16383\n\
         {n4} 127.0.0.1:7004@17004 master - 0 {NOW} 1 connected\n",
        n1 = name('1'),
        n2 = name('2'),
        n3 = name('3'),
        n4 = name('4'),
    );
    assert_eq!(text, expected);
}

#[test]
fn nodes_text_from_a_replica() {
    let text = fixture().nodes_text(2, NOW);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        format!(
            "{} 127.0.0.1:7001@17001 master - 0 {NOW} 1 connected 0-5460",
            name('1')
        )
    );
    assert_eq!(
        lines[1],
        format!(
            "{} 127.0.0.1:7002@17002 myself,slave {} 0 0 1 connected",
            name('2'),
            name('1')
        )
    );
}

#[test]
fn nodes_text_single_slots_and_migrations() {
    let topology = fixture()
        .assign_slots(&[(200, 200)], 2)
        .unwrap()
        .begin_migration(100, 2)
        .unwrap()
        .begin_migration(16000, 1)
        .unwrap();
    assert_eq!(topology.epoch, 4);
    let (n1, n3) = (name('1'), name('3'));

    // Node 1 leads shard 1: it migrates 100 to shard 2 (led by node 3) and
    // imports 16000 from shard 3 (led by node 3).
    let from_one = topology.nodes_text(1, NOW);
    assert_eq!(
        from_one.lines().next().unwrap(),
        format!(
            "{n1} 127.0.0.1:7001@17001 myself,master - 0 0 4 connected 0-199 201-5460 \
             [100->-{n3}] [16000-<-{n3}]"
        )
    );
    // Markers only on the myself line.
    assert!(!from_one.lines().nth(2).unwrap().contains('['));

    let from_three = topology.nodes_text(3, NOW);
    assert_eq!(
        from_three.lines().nth(2).unwrap(),
        format!(
            "{n3} 127.0.0.1:7003@17003 myself,master - 0 0 4 connected 200 5461-16383 \
             [100-<-{n1}] [16000->-{n1}]"
        )
    );

    // A node leading neither side shows no markers.
    assert!(!topology.nodes_text(2, NOW).contains('['));
    assert!(!topology.nodes_text(4, NOW).contains('['));
}

#[test]
fn slots_view_orders_leader_first() {
    let view = fixture().slots_view();
    let summary: Vec<(u16, u16, Vec<Endpoint>)> = view
        .into_iter()
        .map(|range| (range.start, range.end, range.nodes))
        .collect();
    assert_eq!(
        summary,
        vec![
            (0, 5460, vec![endpoint(1), endpoint(2)]),
            (5461, 10922, vec![endpoint(3), endpoint(2)]),
            (10923, 16383, vec![endpoint(3), endpoint(1)]),
        ]
    );
}

#[test]
fn slots_view_repeats_split_ranges() {
    let topology = fixture()
        .assign_slots(&[(100, 199)], 3)
        .unwrap()
        .with_leader(1, 2, 9)
        .unwrap();
    let summary: Vec<(u16, u16, u16)> = topology
        .slots_view()
        .into_iter()
        .map(|range| (range.start, range.end, range.nodes[0].port))
        .collect();
    assert_eq!(
        summary,
        vec![
            (0, 99, 7002),
            (100, 199, 7003),
            (200, 5460, 7002),
            (5461, 10922, 7003),
            (10923, 16383, 7003),
        ]
    );
    assert_eq!(
        topology.slots_view()[0].nodes,
        vec![endpoint(2), endpoint(1)]
    );
}

#[test]
fn shards_view_roles() {
    let view = fixture().shards_view();
    assert_eq!(view.len(), 3);
    assert_eq!(view[1].shard, 2);
    assert_eq!(view[1].slots, vec![(5461, 10922)]);
    let shard_node = |id: u16, role| ShardNode {
        name: name(char::from(b'0' + id as u8)),
        host: "127.0.0.1".into(),
        port: 7000 + id,
        role,
        health: "online",
    };
    assert_eq!(
        view[1].nodes,
        vec![shard_node(3, "master"), shard_node(2, "replica")]
    );
    assert_eq!(
        view[0].nodes,
        vec![shard_node(1, "master"), shard_node(2, "replica")]
    );
}

#[test]
fn shards_view_lists_shards_without_slots() {
    let topology = fixture()
        .add_shard(Shard {
            id: 9,
            name: name('f'),
            replicas: vec![4],
        })
        .unwrap();
    let view = topology.shards_view();
    assert_eq!(view.len(), 4);
    assert_eq!(view[3].shard, 9);
    assert!(view[3].slots.is_empty());
    assert_eq!(view[3].nodes[0].port, 7004);
}

#[test]
fn info_text_exact() {
    let expected = "cluster_state:ok\r\n\
                    cluster_slots_assigned:16384\r\n\
                    cluster_slots_ok:16384\r\n\
                    cluster_slots_pfail:0\r\n\
                    cluster_slots_fail:0\r\n\
                    cluster_known_nodes:4\r\n\
                    cluster_size:3\r\n\
                    cluster_current_epoch:1\r\n\
                    cluster_my_epoch:1\r\n\
                    cluster_stats_messages_sent:0\r\n\
                    cluster_stats_messages_received:0\r\n\
                    total_cluster_links_buffer_limit_exceeded:0\r\n";
    assert_eq!(fixture().info_text(1), expected);
}

#[test]
fn info_text_counts_owning_shards_and_missing_slots() {
    let mut topology = fixture().assign_slots(&[(0, 5460)], 2).unwrap();
    let info = topology.info_text(1);
    assert!(info.contains("cluster_size:2\r\n"), "{info}");
    assert!(info.contains("cluster_current_epoch:2\r\n"), "{info}");
    topology.slots = SlotMap::default();
    topology.slots.assign(0, 16000, 1);
    let info = topology.info_text(1);
    assert!(info.starts_with("cluster_state:fail\r\n"), "{info}");
    assert!(info.contains("cluster_slots_assigned:16001\r\n"), "{info}");
    assert!(info.contains("cluster_size:1\r\n"), "{info}");
}
