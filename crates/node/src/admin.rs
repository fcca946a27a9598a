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

/// Fetches and decodes the topology one node knows.
async fn fetch_topology(address: &str) -> anyhow::Result<Topology> {
    match call(address, &[b"SLOTRAFT", b"TOPOLOGY"]).await? {
        Frame::Bulk(bytes) => Topology::from_bytes(&bytes).map_err(anyhow::Error::msg),
        other => bail!("{address}: no topology ({other:?}); is it part of a cluster?"),
    }
}

fn node_address(topology: &Topology, node: u64) -> Option<String> {
    topology
        .nodes
        .get(&node)
        .map(|info| format!("{}:{}", info.host, info.port))
}

/// Sends a command to whoever leads: starts at `first`, follows `ERR
/// NOTLEADER host:port` answers, and waits a little when no leader is known.
async fn leader_call(first: String, arguments: &[&[u8]]) -> anyhow::Result<Frame> {
    let mut address = first;
    for _ in 0..50 {
        let reply = call(&address, arguments).await;
        match reply {
            Ok(Frame::Error(text)) if text.starts_with(b"ERR NOTLEADER ") => {
                let named = String::from_utf8_lossy(&text[b"ERR NOTLEADER ".len()..]).into_owned();
                if named != "?" {
                    address = named;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok(reply) => return Ok(reply),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    bail!(
        "no leader answered {}",
        String::from_utf8_lossy(arguments[1])
    )
}

fn shard_leader_address(topology: &Topology, shard: u64) -> anyhow::Result<String> {
    topology
        .leader_of(shard)
        .and_then(|node| node_address(topology, node))
        .with_context(|| format!("shard {shard} has no known replica"))
}

/// Proposes a metadata change until it is stored (`:1`), retrying when
/// another change came first (`:0`).
async fn metadata_change(topology: &Topology, arguments: &[&[u8]]) -> anyhow::Result<()> {
    let first = topology
        .metadata_voters
        .first()
        .and_then(|node| node_address(topology, *node))
        .context("no metadata voter")?;
    for _ in 0..50 {
        match leader_call(first.clone(), arguments).await? {
            Frame::Integer(1) => return Ok(()),
            Frame::Integer(_) => tokio::time::sleep(Duration::from_millis(150)).await,
            other => bail!("metadata change refused: {other:?}"),
        }
    }
    bail!("the metadata change kept losing to other changes")
}

fn expect_ok(reply: Frame, what: &str) -> anyhow::Result<Frame> {
    match reply {
        Frame::Error(text) => bail!("{what}: {}", String::from_utf8_lossy(&text)),
        reply => Ok(reply),
    }
}

/// Keys moved per EXPORT/IMPORT round trip.
const MIGRATE_BATCH: usize = 100;

/// Moves one slot from shard `from` to shard `to`: freeze the slot on the
/// source (writes answer TRYAGAIN), copy its keys, mark it gone on the source
/// (everything answers TRYAGAIN), make the target its owner. Returns the keys
/// moved. Rerunning after an interruption is safe: the copy replaces, and
/// nothing writes to a frozen slot.
async fn migrate_slot(address: &str, slot: u16, from: u64, to: u64) -> anyhow::Result<usize> {
    let topology = fetch_topology(address).await?;
    let slot_text = slot.to_string();
    let (from_text, to_text) = (from.to_string(), to.to_string());
    if !topology.migrations.contains_key(&slot) {
        metadata_change(
            &topology,
            &[
                b"SLOTRAFT",
                b"MIGRATE-BEGIN",
                slot_text.as_bytes(),
                to_text.as_bytes(),
            ],
        )
        .await?;
    }
    let source = shard_leader_address(&topology, from)?;
    let target = shard_leader_address(&topology, to)?;
    expect_ok(
        leader_call(
            source.clone(),
            &[
                b"SLOTRAFT",
                b"SLOT-STATE",
                from_text.as_bytes(),
                slot_text.as_bytes(),
                b"1",
            ],
        )
        .await?,
        "freezing the slot",
    )?;
    let mut after = Bytes::new();
    let mut moved = 0;
    let mut first_round = true;
    loop {
        let count = MIGRATE_BATCH.to_string();
        let reply = leader_call(
            source.clone(),
            &[
                b"SLOTRAFT",
                b"EXPORT",
                from_text.as_bytes(),
                slot_text.as_bytes(),
                &after,
                count.as_bytes(),
            ],
        )
        .await?;
        let Frame::Array(items) = expect_ok(reply, "exporting keys")? else {
            bail!("unexpected EXPORT reply");
        };
        let mut import: Vec<Bytes> = vec![
            Bytes::from_static(b"SLOTRAFT"),
            Bytes::from_static(b"IMPORT"),
            Bytes::from(to_text.clone()),
            Bytes::from(slot_text.clone()),
        ];
        let exported = items.len();
        for item in items {
            let Frame::Array(parts) = item else {
                bail!("unexpected EXPORT item");
            };
            let (Some(Frame::Bulk(key)), Some(Frame::Integer(expire)), Some(dump)) =
                (parts.first(), parts.get(1), parts.get(2))
            else {
                bail!("unexpected EXPORT item");
            };
            after = key.clone();
            if let Frame::Bulk(dump) = dump {
                import.push(key.clone());
                import.push(Bytes::from(expire.to_string()));
                import.push(dump.clone());
            }
        }
        if import.len() > 4 {
            moved += (import.len() - 4) / 3;
            let arguments: Vec<&[u8]> = import.iter().map(|part| &part[..]).collect();
            expect_ok(
                leader_call(target.clone(), &arguments).await?,
                "importing keys",
            )?;
        } else if first_round {
            // No keys: the target must still serve the slot.
            expect_ok(
                leader_call(
                    target.clone(),
                    &[
                        b"SLOTRAFT",
                        b"SLOT-STATE",
                        to_text.as_bytes(),
                        slot_text.as_bytes(),
                        b"0",
                    ],
                )
                .await?,
                "opening the slot on the target",
            )?;
        }
        first_round = false;
        if exported < MIGRATE_BATCH {
            break;
        }
    }
    expect_ok(
        leader_call(
            source,
            &[
                b"SLOTRAFT",
                b"DROP-SLOT",
                from_text.as_bytes(),
                slot_text.as_bytes(),
            ],
        )
        .await?,
        "dropping the slot from the source",
    )?;
    metadata_change(
        &topology,
        &[b"SLOTRAFT", b"MIGRATE-FINISH", slot_text.as_bytes()],
    )
    .await?;
    Ok(moved)
}

/// `slotraft cluster reshard HOST:PORT --from SHARD --to SHARD --slots N`:
/// moves the first N slots of one shard to another, online.
pub async fn reshard(address: &str, from: u64, to: u64, slots: usize) -> anyhow::Result<()> {
    let topology = fetch_topology(address).await?;
    for shard in [from, to] {
        if !topology.shards.contains_key(&shard) {
            bail!("there is no shard {shard}");
        }
    }
    if from == to {
        bail!("--from and --to name the same shard");
    }
    let chosen: Vec<u16> = topology
        .ranges_of(from)
        .into_iter()
        .flat_map(|(start, end)| start..=end)
        .take(slots)
        .collect();
    if chosen.is_empty() {
        bail!("shard {from} owns no slots");
    }
    println!(
        ">>> Moving {} slots from shard {from} to shard {to}",
        chosen.len()
    );
    let started = Instant::now();
    let mut keys = 0;
    for (done, slot) in chosen.iter().enumerate() {
        keys += migrate_slot(address, *slot, from, to).await?;
        let width = 40;
        let filled = (done + 1) * width / chosen.len();
        print!(
            "\r[{}{}] {}/{} slots, {keys} keys",
            "#".repeat(filled),
            " ".repeat(width - filled),
            done + 1,
            chosen.len()
        );
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
    }
    println!();
    wait_adopted(address).await?;
    println!(
        "[OK] Moved {} slots ({keys} keys) in {:.1}s.",
        chosen.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Waits until every node reports the metadata's latest epoch (nodes adopt a
/// change within a poll or two).
async fn wait_adopted(address: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let topology = fetch_topology(address).await?;
        let mut behind = false;
        for node in topology.nodes.values() {
            let node_address = format!("{}:{}", node.host, node.port);
            match fetch_topology(&node_address).await {
                Ok(seen) if seen.epoch >= topology.epoch && seen.migrations.is_empty() => {}
                _ => behind = true,
            }
        }
        if !behind && topology.migrations.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the nodes did not all adopt the new topology within 10s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `slotraft cluster check HOST:PORT`: every node of the cluster answers with
/// the same topology epoch, all 16384 slots are owned, every shard has a
/// leader that accepts requests, and no slot is left in migration.
pub async fn check(address: &str) -> anyhow::Result<()> {
    let topology = fetch_topology(address).await?;
    println!(
        ">>> Checking the cluster (epoch {}, {} nodes, {} shards) from {address}",
        topology.epoch,
        topology.nodes.len(),
        topology.shards.len()
    );
    let mut problems = Vec::new();
    for node in topology.nodes.values() {
        let node_address = format!("{}:{}", node.host, node.port);
        match fetch_topology(&node_address).await {
            Ok(seen) if seen.epoch == topology.epoch => {}
            Ok(seen) => problems.push(format!(
                "{node_address} is at epoch {}, not {}",
                seen.epoch, topology.epoch
            )),
            Err(error) => problems.push(format!("{node_address} does not answer: {error}")),
        }
    }
    let assigned = topology.slots.assigned();
    if assigned != 16384 {
        problems.push(format!("only {assigned} of 16384 slots are assigned"));
    }
    for (slot, migration) in &topology.migrations {
        problems.push(format!(
            "slot {slot} is moving from shard {} to shard {}",
            migration.from, migration.to
        ));
    }
    if !leaders_known(address).await {
        problems.push("some shard has no leader accepting requests".to_string());
    }
    if problems.is_empty() {
        println!("[OK] All nodes agree about the topology.");
        println!("[OK] All 16384 slots covered.");
        Ok(())
    } else {
        for problem in &problems {
            println!("[ERR] {problem}");
        }
        bail!("{} problem(s) found", problems.len())
    }
}
