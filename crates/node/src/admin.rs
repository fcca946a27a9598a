//! `slotraft cluster ...`: the admin CLI. It talks RESP to the nodes, like
//! `redis-cli --cluster`.

use crate::resp_client::call;
use anyhow::{bail, Context as _};
use bytes::Bytes;
use cluster::{NodeInfo, Topology};
use resp::Frame;
use std::time::{Duration, Instant};

/// How long `create` waits for every shard to elect a leader.
const SETTLE_LIMIT: Duration = Duration::from_secs(60);

fn text(frame: &Frame) -> Option<String> {
    match frame {
        Frame::Bulk(data) | Frame::Simple(data) | Frame::Verbatim(data) => {
            let data = if let Frame::Verbatim(data) = frame {
                data.get(4..).unwrap_or_default()
            } else {
                &data[..]
            };
            Some(String::from_utf8_lossy(data).into_owned())
        }
        _ => None,
    }
}

fn error_text(frame: &Frame) -> Option<String> {
    match frame {
        Frame::Error(text) => Some(String::from_utf8_lossy(text).into_owned()),
        _ => None,
    }
}

/// Splits `HOST:PORT`.
fn parse_address(address: &str) -> anyhow::Result<(String, u16)> {
    let Some((host, port)) = address.rsplit_once(':') else {
        bail!("'{address}' is not HOST:PORT");
    };
    let port = port
        .parse()
        .with_context(|| format!("port in '{address}'"))?;
    Ok((host.to_string(), port))
}

/// Asks a node who it is.
async fn node_info(address: &str) -> anyhow::Result<NodeInfo> {
    let (host, port) = parse_address(address)?;
    let reply = call(address, &[b"SLOTRAFT", b"NODE-INFO"]).await?;
    if let Some(error) = error_text(&reply) {
        bail!("{address}: {error} (is it running with --cluster-enabled yes?)");
    }
    let Frame::Array(items) = reply else {
        bail!("{address}: unexpected NODE-INFO reply");
    };
    let (Some(Frame::Integer(id)), Some(name), Some(Frame::Integer(raft_port)), Some(zone)) = (
        items.first(),
        items.get(1).and_then(text),
        items.get(2),
        items.get(3).map(|zone| text(zone).unwrap_or_default()),
    ) else {
        bail!("{address}: malformed NODE-INFO reply");
    };
    Ok(NodeInfo {
        id: *id as u64,
        name,
        host,
        port,
        raft_port: *raft_port as u16,
        zone: (!zone.is_empty()).then_some(zone),
    })
}

/// 40 random lowercase hex characters.
fn random_name(rng: &mut keyspace::Rng) -> String {
    (0..40)
        .map(|_| char::from_digit((rng.next_u64() % 16) as u32, 16).unwrap_or('0'))
        .collect()
}

/// `slotraft cluster create`: forms a cluster of the given running nodes.
pub async fn create(
    addresses: &[String],
    shards: Option<usize>,
    replicas: usize,
    seed: u64,
) -> anyhow::Result<()> {
    if addresses.is_empty() {
        bail!("name at least one node as HOST:PORT");
    }
    let mut nodes = Vec::new();
    for address in addresses {
        nodes.push(node_info(address).await?);
    }
    let shard_count = shards.unwrap_or(nodes.len());
    let mut rng = keyspace::Rng::new(seed);
    let topology = Topology::create(nodes, shard_count, replicas, || random_name(&mut rng))
        .map_err(anyhow::Error::msg)?;
    println!(
        ">>> Creating a cluster of {} nodes: {} shards, {} replicas each",
        topology.nodes.len(),
        topology.shards.len(),
        replicas
    );
    for shard in topology.shards.values() {
        let ranges: Vec<String> = topology
            .ranges_of(shard.id)
            .iter()
            .map(|(start, end)| format!("{start}-{end}"))
            .collect();
        let members: Vec<String> = shard
            .replicas
            .iter()
            .filter_map(|id| topology.nodes.get(id))
            .map(|node| format!("{}:{}", node.host, node.port))
            .collect();
        println!(
            "Shard {} slots {} on {}",
            shard.id,
            ranges.join(","),
            members.join(" ")
        );
    }
    let bytes = topology.to_bytes();
    for address in addresses {
        let reply = call(address, &[b"SLOTRAFT", b"BOOTSTRAP", &bytes]).await?;
        if let Some(error) = error_text(&reply) {
            bail!("{address}: {error}");
        }
    }
    println!(">>> Waiting for every shard to elect a leader");
    wait_settled(addresses, SETTLE_LIMIT).await?;
    println!("[OK] All 16384 slots covered.");
    Ok(())
}

/// Waits until every node reports `cluster_state:ok` and every shard a leader.
pub async fn wait_settled(addresses: &[String], limit: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        let mut settled = true;
        for address in addresses {
            let info = call(address, &[b"CLUSTER", b"INFO"]).await;
            let ok = matches!(&info, Ok(frame) if text(frame).is_some_and(|info| info.contains("cluster_state:ok")));
            let slots = call(address, &[b"CLUSTER", b"SLOTS"]).await;
            let covered = matches!(&slots, Ok(Frame::Array(ranges)) if !ranges.is_empty());
            if !ok || !covered || !leaders_known(address).await {
                settled = false;
                break;
            }
        }
        if settled {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the cluster did not settle within {}s", limit.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Whether a write to a key of every shard succeeds through this node's
/// redirects (each shard has a leader that accepts writes).
async fn leaders_known(address: &str) -> bool {
    let Ok(Frame::Array(ranges)) = call(address, &[b"CLUSTER", b"SLOTS"]).await else {
        return false;
    };
    for range in ranges {
        let Frame::Array(parts) = range else {
            return false;
        };
        let Some(Frame::Array(master)) = parts.get(2) else {
            return false;
        };
        let (Some(host), Some(Frame::Integer(port))) =
            (master.first().and_then(text), master.get(1))
        else {
            return false;
        };
        let Some(Frame::Integer(start)) = parts.first() else {
            return false;
        };
        let key = key_for_slot(*start as u16);
        let master = format!("{host}:{port}");
        match call(&master, &[b"EXISTS", &key]).await {
            Ok(Frame::Integer(_)) => {}
            _ => return false,
        }
    }
    true
}

/// A key that hashes to `slot` (a short hash tag found by search).
pub fn key_for_slot(slot: u16) -> Bytes {
    let mut counter = 0u64;
    loop {
        let candidate = format!("{{{counter}}}");
        if cluster::key_slot(candidate.as_bytes()) == slot {
            return Bytes::from(candidate);
        }
        counter += 1;
    }
}

/// `slotraft cluster info HOST:PORT`: the topology as one node sees it.
pub async fn info(address: &str) -> anyhow::Result<()> {
    let reply = call(address, &[b"CLUSTER", b"NODES"]).await?;
    match text(&reply) {
        Some(nodes) => print!("{nodes}"),
        None => bail!("{address}: unexpected CLUSTER NODES reply {reply:?}"),
    }
    let reply = call(address, &[b"CLUSTER", b"INFO"]).await?;
    if let Some(info) = text(&reply) {
        print!("{}", info.replace("\r\n", "\n"));
    }
    Ok(())
}
