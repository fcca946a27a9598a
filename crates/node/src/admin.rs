//! `slotraft cluster ...`: the admin CLI. It talks RESP to the nodes, like
//! `redis-cli --cluster`.

use crate::resp_client::call;
use anyhow::{bail, Context as _};
use bytes::Bytes;
use cluster::topology::METADATA_GROUP;
use cluster::{NodeInfo, Topology};
use resp::Frame;
use std::collections::BTreeMap;
use std::time::Duration;
// tokio's clock: the same as the system's in a real run, the simulated one in
// a simulation.
use tokio::time::Instant;

/// Set by a simulation that runs the admin many times over: its progress
/// lines are then not printed.
static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Prints no progress lines from now on (`quiet`), or prints them again.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, std::sync::atomic::Ordering::Relaxed);
}

/// `println!` unless [`set_quiet`].
macro_rules! say {
    ($($line:tt)*) => {
        if !QUIET.load(std::sync::atomic::Ordering::Relaxed) {
            println!($($line)*);
        }
    };
}

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
pub fn random_name(rng: &mut keyspace::Rng) -> String {
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
    if formed_already(addresses, &nodes).await? {
        say!(">>> The nodes already form one cluster; nothing to create");
        wait_settled(addresses, SETTLE_LIMIT).await?;
        say!("[OK] All 16384 slots covered.");
        return Ok(());
    }
    let shard_count = shards.unwrap_or(nodes.len());
    let mut rng = keyspace::Rng::new(seed);
    let topology = Topology::create(nodes, shard_count, replicas, || random_name(&mut rng))
        .map_err(anyhow::Error::msg)?;
    say!(
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
        say!(
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
    say!(">>> Waiting for every shard to elect a leader");
    wait_settled(addresses, SETTLE_LIMIT).await?;
    say!("[OK] All 16384 slots covered.");
    Ok(())
}

/// Whether the named nodes already form one cluster: each holds a topology
/// that lists every one of them, and all name the same shards. Running
/// `create` again (a deployment's job restarted, a second `docker compose
/// up`) then changes nothing and succeeds. A node that belongs to a cluster
/// while another does not, or to a different one, is an error found before
/// any node is handed a topology, so no node is left half-formed.
async fn formed_already(addresses: &[String], nodes: &[NodeInfo]) -> anyhow::Result<bool> {
    let mut shards_seen: Option<Vec<String>> = None;
    let mut fresh = Vec::new();
    for address in addresses {
        let topology = match call(address, &[b"SLOTRAFT", b"TOPOLOGY"]).await? {
            Frame::Bulk(bytes) => Topology::from_bytes(&bytes).map_err(anyhow::Error::msg)?,
            Frame::Null => {
                fresh.push(address.as_str());
                continue;
            }
            other => bail!("{address}: unexpected TOPOLOGY reply {other:?}"),
        };
        if let Some(stranger) = nodes
            .iter()
            .find(|node| !topology.nodes.contains_key(&node.id))
        {
            bail!(
                "{address} already belongs to a cluster that does not include {}:{}",
                stranger.host,
                stranger.port
            );
        }
        let names: Vec<String> = topology
            .shards
            .values()
            .map(|shard| shard.name.clone())
            .collect();
        match &shards_seen {
            Some(seen) if *seen != names => {
                bail!(
                    "{address} belongs to a different cluster than {}",
                    addresses[0]
                )
            }
            _ => shards_seen = Some(names),
        }
    }
    match (shards_seen.is_some(), fresh.first()) {
        (true, Some(fresh)) => bail!(
            "some nodes already belong to a cluster and {fresh} does not; add it with \
             `slotraft cluster add-node`"
        ),
        (true, None) => Ok(true),
        (false, _) => Ok(false),
    }
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
    // The ids the other admin commands take (--shard, --from, --to, NODE).
    let topology = fetch_topology(address).await?;
    print!("{}", ids_table(&topology));
    Ok(())
}

/// The nodes and shards by the ids the admin commands take.
fn ids_table(topology: &Topology) -> String {
    let mut table = String::from("# nodes: id name address [metadata voter]\n");
    for (id, node) in &topology.nodes {
        let voter = if topology.metadata_voters.contains(id) {
            " metadata-voter"
        } else {
            ""
        };
        table.push_str(&format!(
            "node {id} {} {}:{}{voter}\n",
            node.name, node.host, node.port
        ));
    }
    table.push_str("# shards: id slots replicas (node ids, preferred leader first)\n");
    for (id, shard) in &topology.shards {
        let ranges: Vec<String> = topology
            .slots
            .ranges_of(*id)
            .iter()
            .map(|(first, last)| format!("{first}-{last}"))
            .collect();
        let replicas: Vec<String> = shard.replicas.iter().map(u64::to_string).collect();
        let ranges = if ranges.is_empty() {
            "-".to_string()
        } else {
            ranges.join(",")
        };
        table.push_str(&format!("shard {id} {ranges} {}\n", replicas.join(",")));
    }
    table
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

/// Errors a shard answers while it has no leader for a moment (an election,
/// a leader that lost its quorum, a write whose outcome is unknown).
const TRANSIENT: [&[u8]; 3] = [b"CLUSTERDOWN ", b"TRYAGAIN ", b"UNKNOWN "];

/// A migration step sent to a shard's leader: like [`leader_call`], but
/// retried while the shard answers a transient error, for up to
/// [`STEP_LIMIT`]. Every step is idempotent (setting a slot's state, reading
/// a batch, writing a batch of keys whose slots are frozen, dropping slots),
/// so repeating one whose outcome was unknown is safe. Errors are returned
/// as errors, naming `what`.
async fn shard_step(first: &str, arguments: &[&[u8]], what: &str) -> anyhow::Result<Frame> {
    let deadline = Instant::now() + STEP_LIMIT;
    loop {
        let reply = leader_call(first.to_string(), arguments).await?;
        match &reply {
            Frame::Error(text)
                if TRANSIENT.iter().any(|prefix| text.starts_with(prefix))
                    && Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            _ => return expect_ok(reply, what),
        }
    }
}

/// How long a migration step is retried while its shard has no leader.
const STEP_LIMIT: Duration = Duration::from_secs(30);

fn shard_leader_address(topology: &Topology, shard: u64) -> anyhow::Result<String> {
    topology
        .leader_of(shard)
        .and_then(|node| node_address(topology, node))
        .with_context(|| format!("shard {shard} has no known replica"))
}

/// Proposes a metadata change until it is stored, retrying when another
/// change came first (`:0`); returns the epoch it created.
async fn metadata_change(topology: &Topology, arguments: &[&[u8]]) -> anyhow::Result<u64> {
    let first = topology
        .metadata_voters
        .first()
        .and_then(|node| node_address(topology, *node))
        .context("no metadata voter")?;
    for _ in 0..50 {
        match leader_call(first.clone(), arguments).await? {
            Frame::Integer(epoch) if epoch > 0 => return Ok(epoch as u64),
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
const MIGRATE_BATCH: usize = 1000;

/// Keys the source deletes per entry once the slots have moved.
const DROP_BATCH: usize = 5000;

/// Slots moved together: one metadata change, one freeze, one drop.
const SLOTS_PER_STEP: usize = 256;

fn join_slots(slots: &[u16]) -> String {
    slots
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Moves `slots` (all owned by shard `from`) to shard `to`: the metadata
/// records the migrations; the source's log starts recording the keys that
/// change in the slots, and their keys are copied while they still take
/// writes; then the source's log freezes the slots (writes answer TRYAGAIN)
/// and only the keys that changed meanwhile are copied again (or deleted on
/// the target); the source's log closes the slots (everything answers
/// TRYAGAIN), the metadata makes the target their owner, and once every
/// node has adopted that, the source's log deletes the slots' keys. Writes
/// thus wait only for the second, short copy and the change of owner. Where the source does not know
/// what changed (a replica that loaded a snapshot leads it now, or the
/// record outgrew its bound), the target's copy of the slot is emptied and
/// the frozen slot copied whole. Returns the keys copied. Rerunning after
/// an interruption is safe: every copy replaces, a record that starts
/// afresh first empties the target's slot, and a dropped slot is never
/// emptied on the target (which then holds its only copy).
pub async fn migrate_slots(
    address: &str,
    slots: &[u16],
    from: u64,
    to: u64,
) -> anyhow::Result<usize> {
    let topology = fetch_topology(address).await?;
    let (from_text, to_text) = (from.to_string(), to.to_string());
    let fresh: Vec<u16> = slots
        .iter()
        .copied()
        .filter(|slot| !topology.migrations.contains_key(slot))
        .collect();
    let recorded = if fresh.is_empty() {
        topology.clone()
    } else {
        let list = join_slots(&fresh);
        let epoch = metadata_change(
            &topology,
            &[
                b"SLOTRAFT",
                b"MIGRATE-BEGIN",
                list.as_bytes(),
                to_text.as_bytes(),
            ],
        )
        .await?;
        topology_at(address, epoch).await?
    };
    // The metadata records each migration's source from its own slot map;
    // one read from a node that had not yet adopted an earlier change could
    // name another source, whose frozen, exported and dropped slot would
    // hold none of the keys: refuse to go on then.
    for slot in slots {
        match recorded.migrations.get(slot) {
            Some(migration) if migration.from == from && migration.to == to => {}
            Some(migration) => bail!(
                "slot {slot} is moving from shard {} to shard {}, not from {from} to {to}",
                migration.from,
                migration.to
            ),
            None => bail!("slot {slot} is not recorded as moving"),
        }
    }
    let list = join_slots(slots);
    let source = shard_leader_address(&topology, from)?;
    let target = shard_leader_address(&topology, to)?;
    let fresh = slot_state(&source, from, &list, b"3", "recording the slots' changes").await?;
    let fresh = slots_of(&fresh)?;
    if !fresh.is_empty() {
        // Keys an earlier, interrupted move left there are not covered by a
        // record that starts now.
        empty_on_target(&target, to, &join_slots(&fresh)).await?;
    }
    slot_state(&target, to, &list, b"0", "opening the slots on the target").await?;
    let mut moved = copy_slots(&source, &target, &list, from, to, Export::All)
        .await?
        .0;
    slot_state(&source, from, &list, b"1", "freezing the slots").await?;
    let (changed, untracked) =
        copy_slots(&source, &target, &list, from, to, Export::Changes).await?;
    moved += changed;
    if !untracked.is_empty() {
        // The source does not know what changed there: copy them whole.
        let untracked = join_slots(&untracked);
        empty_on_target(&target, to, &untracked).await?;
        slot_state(
            &target,
            to,
            &untracked,
            b"0",
            "opening the slots on the target",
        )
        .await?;
        moved += copy_slots(&source, &target, &untracked, from, to, Export::All)
            .await?
            .0;
    }
    // Gone from the source (everything there answers TRYAGAIN), its keys
    // still in place: deleting them all in one entry keeps the source's
    // replicas busy for a while, which the slots' clients need not wait for.
    slot_state(
        &source,
        from,
        &list,
        b"2",
        "closing the slots on the source",
    )
    .await?;
    let epoch = metadata_change(
        &topology,
        &[b"SLOTRAFT", b"MIGRATE-FINISH", list.as_bytes()],
    )
    .await?;
    // The next step reads the topology from the nodes: wait until they have
    // this one.
    wait_adopted(address, epoch).await?;
    // A bounded number of keys per entry, so the source's replicas serve
    // their other clients between the deletions.
    let limit = DROP_BATCH.to_string();
    loop {
        let dropped = shard_step(
            &source,
            &[
                b"SLOTRAFT",
                b"DROP-SLOT",
                from_text.as_bytes(),
                list.as_bytes(),
                limit.as_bytes(),
            ],
            "dropping the slots' keys from the source",
        )
        .await?;
        if !matches!(dropped, Frame::Integer(count) if count > 0) {
            break;
        }
    }
    Ok(moved)
}

/// The slot numbers of a reply that lists them.
fn slots_of(reply: &Frame) -> anyhow::Result<Vec<u16>> {
    let Frame::Array(items) = reply else {
        bail!("unexpected slot list {reply:?}");
    };
    items
        .iter()
        .map(|item| match item {
            Frame::Integer(slot) => u16::try_from(*slot).map_err(Into::into),
            _ => Err(anyhow::anyhow!("unexpected slot list {reply:?}")),
        })
        .collect()
}

/// `SLOTRAFT SLOT-STATE shard list state` on the shard's leader at
/// `address` (states: 0 serving, 1 frozen, 2 closed, 3 recording changes).
async fn slot_state(
    address: &str,
    shard: u64,
    list: &str,
    state: &[u8],
    what: &str,
) -> anyhow::Result<Frame> {
    let shard = shard.to_string();
    let arguments: [&[u8]; 5] = [
        b"SLOTRAFT",
        b"SLOT-STATE",
        shard.as_bytes(),
        list.as_bytes(),
        state,
    ];
    shard_step(address, &arguments, what).await
}

/// Deletes the target's keys of slots it does not own yet (`list`), before
/// a copy that must find them empty; the caller serves them there again.
async fn empty_on_target(target: &str, to: u64, list: &str) -> anyhow::Result<()> {
    let to_text = to.to_string();
    shard_step(
        target,
        &[
            b"SLOTRAFT",
            b"DROP-SLOT",
            to_text.as_bytes(),
            list.as_bytes(),
        ],
        "emptying the slots on the target",
    )
    .await?;
    Ok(())
}

/// An IMPORT under way in its own task, aborted when dropped: a copy that
/// fails or is given up leaves no import behind to land later, when a rerun
/// may already have copied newer values of the same keys (the first copy
/// runs while the slots still take writes).
struct Importing(tokio::task::JoinHandle<anyhow::Result<()>>);

impl Drop for Importing {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What [`copy_slots`] copies.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Export {
    /// Every key of the slots.
    All,
    /// The keys the source recorded as changed (SLOTRAFT EXPORT-CHANGES);
    /// those gone from the source are deleted on the target.
    Changes,
}

/// Copies slots' keys (`list`: comma-separated) from the source leader to
/// the target's, a batch per round trip; the next batch is exported while
/// the last one is imported. Returns the keys copied (and deleted) and, for
/// [`Export::Changes`], the slots whose changes the source does not know.
async fn copy_slots(
    source: &str,
    target: &str,
    list: &str,
    from: u64,
    to: u64,
    export: Export,
) -> anyhow::Result<(usize, Vec<u16>)> {
    let (from_text, to_text) = (from.to_string(), to.to_string());
    let count = MIGRATE_BATCH.to_string();
    let mut after = Bytes::new();
    let mut moved = 0;
    let mut importing: Option<Importing> = None;
    let mut latest_time = 0i64;
    let mut untracked = Vec::new();
    let command: &[u8] = match export {
        Export::All => b"EXPORT",
        Export::Changes => b"EXPORT-CHANGES",
    };
    loop {
        let reply = shard_step(
            source,
            &[
                b"SLOTRAFT",
                command,
                from_text.as_bytes(),
                list.as_bytes(),
                &after,
                count.as_bytes(),
            ],
            "exporting keys",
        )
        .await?;
        let Frame::Array(mut reply) = reply else {
            bail!("unexpected EXPORT reply");
        };
        if export == Export::Changes && reply.len() == 3 {
            untracked = slots_of(&reply.remove(1))?;
        }
        let [Frame::Integer(source_time), Frame::Array(items)] = <[Frame; 2]>::try_from(reply)
            .map_err(|reply| anyhow::anyhow!("unexpected EXPORT reply {reply:?}"))?
        else {
            bail!("unexpected EXPORT reply");
        };
        latest_time = latest_time.max(source_time.max(0));
        if items.is_empty() {
            break;
        }
        let mut import: Vec<Bytes> = vec![
            Bytes::from_static(b"SLOTRAFT"),
            Bytes::from_static(b"IMPORT"),
            Bytes::from(to_text.clone()),
            Bytes::from(list.to_string()),
            Bytes::from(source_time.max(0).to_string()),
        ];
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
            match dump {
                Frame::Bulk(dump) => {
                    import.push(key.clone());
                    import.push(Bytes::from(expire.to_string()));
                    import.push(dump.clone());
                }
                // Changed, and gone from the source since: deleted there.
                _ if export == Export::Changes => {
                    import.push(key.clone());
                    import.push(Bytes::from_static(b"-2"));
                    import.push(Bytes::new());
                }
                _ => {}
            }
        }
        if let Some(mut previous) = importing.take() {
            (&mut previous.0).await??;
        }
        if import.len() > 5 {
            moved += (import.len() - 5) / 3;
            let target = target.to_string();
            importing = Some(Importing(tokio::spawn(async move {
                let arguments: Vec<&[u8]> = import.iter().map(|part| &part[..]).collect();
                shard_step(&target, &arguments, "importing keys").await?;
                Ok(())
            })));
        }
    }
    if let Some(mut last) = importing {
        (&mut last.0).await??;
    }
    // The target's time reaches the latest time the source exported at, even
    // when nothing (or nothing more) was copied: a key the export skipped as
    // expired must not be alive on the target's clock (a limiter's window
    // lost its admissions, found by the cluster simulation, seed 924).
    let time = latest_time.to_string();
    shard_step(
        target,
        &[
            b"SLOTRAFT",
            b"IMPORT",
            to_text.as_bytes(),
            list.as_bytes(),
            time.as_bytes(),
        ],
        "moving the target's time",
    )
    .await?;
    Ok((moved, untracked))
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
    say!(
        ">>> Moving {} slots from shard {from} to shard {to}",
        chosen.len()
    );
    let started = Instant::now();
    let mut keys = 0;
    let mut done = 0;
    for batch in chosen.chunks(SLOTS_PER_STEP) {
        keys += migrate_slots(address, batch, from, to).await?;
        done += batch.len();
        let width = 40;
        let filled = done * width / chosen.len();
        print!(
            "\r[{}{}] {}/{} slots, {keys} keys",
            "#".repeat(filled),
            " ".repeat(width - filled),
            done,
            chosen.len()
        );
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
    }
    say!();
    say!(
        "[OK] Moved {} slots ({keys} keys) in {:.1}s.",
        chosen.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The topology `address` knows once it has adopted `epoch` (within 10 s).
async fn topology_at(address: &str, epoch: u64) -> anyhow::Result<Topology> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let topology = fetch_topology(address).await?;
        if topology.epoch >= epoch {
            return Ok(topology);
        }
        if Instant::now() > deadline {
            bail!("{address} did not reach epoch {epoch} within 10s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until every node reports at least `epoch` (nodes adopt a change
/// within a poll or two).
async fn wait_adopted(address: &str, epoch: u64) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let topology = fetch_topology(address).await?;
        let mut behind = topology.epoch < epoch;
        for node in topology.nodes.values() {
            let node_address = format!("{}:{}", node.host, node.port);
            match call(&node_address, &[b"SLOTRAFT", b"TOPOLOGY"]).await {
                Ok(Frame::Bulk(bytes)) => {
                    if Topology::from_bytes(&bytes).map_or(true, |seen| seen.epoch < epoch) {
                        behind = true;
                    }
                }
                // Not handed the topology yet (a node being added).
                Ok(Frame::Null) => {}
                _ => behind = true,
            }
        }
        if !behind {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the nodes did not all reach epoch {epoch} within 10s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `slotraft cluster check HOST:PORT`: every node of the cluster answers with
/// the same topology epoch, all 16384 slots are owned, every shard has a
/// leader that accepts requests, and no slot is left in migration.
pub async fn check(address: &str) -> anyhow::Result<()> {
    let topology = fetch_topology(address).await?;
    say!(
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
        say!("[OK] All nodes agree about the topology.");
        say!("[OK] All 16384 slots covered.");
        Ok(())
    } else {
        for problem in &problems {
            say!("[ERR] {problem}");
        }
        // The problems again in the error, for callers that print no
        // progress (a simulation's report).
        bail!(
            "{} problem(s) found: {}",
            problems.len(),
            problems.join("; ")
        )
    }
}

/// `slotraft cluster add-node NEW_HOST:PORT EXISTING_HOST:PORT`: adds a
/// running, cluster-enabled node that belongs to no cluster yet. It joins
/// without replicas: it routes requests (MOVED) until a shard is placed on it
/// (`add-shard`, `move-replica`). Rerunning after an interruption continues:
/// a node the metadata already lists is handed the topology if it does not
/// have one yet.
pub async fn add_node(new: &str, existing: &str) -> anyhow::Result<()> {
    let info = node_info(new).await?;
    let topology = fetch_topology(existing).await?;
    let listed = topology.nodes.contains_key(&info.id);
    if listed && !matches!(call(new, &[b"SLOTRAFT", b"TOPOLOGY"]).await?, Frame::Null) {
        say!("[OK] {new} is already part of the cluster.");
        return Ok(());
    }
    let id = info.id.to_string();
    let port = info.port.to_string();
    let raft_port = info.raft_port.to_string();
    let zone = info.zone.clone().unwrap_or_default();
    let epoch = if listed {
        topology.epoch
    } else {
        metadata_change(
            &topology,
            &[
                b"SLOTRAFT",
                b"ADD-NODE",
                id.as_bytes(),
                info.name.as_bytes(),
                info.host.as_bytes(),
                port.as_bytes(),
                raft_port.as_bytes(),
                zone.as_bytes(),
            ],
        )
        .await?
    };
    wait_adopted(existing, epoch).await?;
    let joined = fetch_topology(existing).await?;
    let reply = call(new, &[b"SLOTRAFT", b"BOOTSTRAP", &joined.to_bytes()]).await?;
    expect_ok(reply, "handing the topology to the new node")?;
    say!(
        "[OK] {new} joined the cluster as node {} ({}).",
        info.id,
        info.name
    );
    Ok(())
}

/// `slotraft cluster del-node EXISTING_HOST:PORT NODE_ID|NAME`: moves the
/// node's replicas to the other nodes (each to the node holding fewest
/// replicas among those without one of that shard), hands its metadata vote to
/// a node without one, removes it from the cluster, then shuts it down.
pub async fn del_node(existing: &str, node: &str) -> anyhow::Result<()> {
    let topology = fetch_topology(existing).await?;
    let found = topology
        .nodes
        .values()
        .find(|info| info.name == node || info.id.to_string() == node)
        .cloned()
        .with_context(|| format!("no node {node} in the cluster"))?;
    let address = format!("{}:{}", found.host, found.port);
    if address == existing {
        bail!("name another node of the cluster as EXISTING_HOST:PORT than the one leaving");
    }
    for shard in topology.shards_hosted_by(found.id) {
        let topology = fetch_topology(existing).await?;
        // A move an earlier run began is resumed, to the same node.
        let target = match interrupted_move(&topology, shard, found.id).await? {
            Some(node) => Some(node),
            None => least_loaded(&topology, found.id, |node| {
                !topology.shards_hosted_by(node).contains(&shard)
            }),
        }
        .with_context(|| format!("no other node can take the replica of shard {shard}"))?;
        move_replica(existing, shard, found.id, target).await?;
    }
    let topology = fetch_topology(existing).await?;
    if topology.metadata_voters.contains(&found.id) {
        let target = least_loaded(&topology, found.id, |node| {
            !topology.metadata_voters.contains(&node)
        })
        .context("no other node can take the metadata vote")?;
        replace_metadata_voter(existing, found.id, target).await?;
    }
    let topology = fetch_topology(existing).await?;
    let id = found.id.to_string();
    let removal = metadata_change(&topology, &[b"SLOTRAFT", b"REMOVE-NODE", id.as_bytes()]).await;
    let epoch = match removal {
        Ok(epoch) => epoch,
        // A removal whose reply was lost is sent again, and refused: the
        // node is gone already.
        Err(error) => {
            let now = fetch_topology(existing).await?;
            if now.nodes.contains_key(&found.id) {
                return Err(error);
            }
            now.epoch
        }
    };
    wait_adopted(existing, epoch).await?;
    // The node answers nothing after SHUTDOWN; a closed connection is success.
    let _ = call(&address, &[b"SHUTDOWN"]).await;
    say!(
        "[OK] Node {} ({address}) left the cluster and was shut down.",
        found.id
    );
    Ok(())
}

/// The node an interrupted move of `shard`'s replica away from `leaving` was
/// taking it to, if one was under way. While `leaving` still votes: the
/// last replica in the topology's order (where the move placed it) that the
/// group does not count as a voter yet (only a move leaves a replica
/// outside the voters). Once `leaving` no longer votes: any other replica,
/// as the topology's change then only drops `leaving`.
async fn interrupted_move(
    topology: &Topology,
    shard: u64,
    leaving: u64,
) -> anyhow::Result<Option<u64>> {
    let Some(info) = topology.shards.get(&shard) else {
        return Ok(None);
    };
    let group = shard.to_string();
    let reply = shard_step(
        &shard_leader_address(topology, shard)?,
        &[b"SLOTRAFT", b"VOTERS", group.as_bytes()],
        "reading the group's voters",
    )
    .await?;
    let Frame::Array(items) = reply else {
        bail!("unexpected SLOTRAFT VOTERS reply {reply:?}");
    };
    let voters: Vec<u64> = items
        .iter()
        .filter_map(|item| match item {
            Frame::Integer(id) => u64::try_from(*id).ok(),
            _ => None,
        })
        .collect();
    let mut others = info
        .replicas
        .iter()
        .copied()
        .filter(|&node| node != leaving);
    Ok(if voters.contains(&leaving) {
        others.rfind(|node| !voters.contains(node))
    } else {
        others.next_back()
    })
}

/// Among the nodes other than `leaving` that `eligible` accepts, the one
/// holding fewest replicas (lowest id first on ties).
fn least_loaded(topology: &Topology, leaving: u64, eligible: impl Fn(u64) -> bool) -> Option<u64> {
    topology
        .nodes
        .keys()
        .copied()
        .filter(|&node| node != leaving && eligible(node))
        .min_by_key(|&node| (topology.shards_hosted_by(node).len(), node))
}

/// How long one voter replacement may take: the new replica receives the
/// group's whole state first.
const REPLACE_LIMIT: Duration = Duration::from_secs(600);

/// Drives `SLOTRAFT REPLACE-VOTER` on the leader of `group` (starting at
/// `first`) until its Raft membership has node `to` voting instead of `from`.
async fn replace_voter(first: String, group: u64, from: u64, to: u64) -> anyhow::Result<()> {
    let (group_text, from_text, to_text) = (group.to_string(), from.to_string(), to.to_string());
    let arguments: [&[u8]; 5] = [
        b"SLOTRAFT",
        b"REPLACE-VOTER",
        group_text.as_bytes(),
        from_text.as_bytes(),
        to_text.as_bytes(),
    ];
    let deadline = Instant::now() + REPLACE_LIMIT;
    let mut last_step = String::new();
    loop {
        match leader_call(first.clone(), &arguments).await? {
            Frame::Simple(_) => return Ok(()),
            Frame::Error(text) if text.starts_with(b"TRYAGAIN") => {
                let step = String::from_utf8_lossy(&text[b"TRYAGAIN ".len().min(text.len())..])
                    .into_owned();
                if step != last_step {
                    say!("  {step}");
                    last_step = step;
                }
            }
            other => bail!("replacing node {from} by node {to} in group {group}: {other:?}"),
        }
        if Instant::now() > deadline {
            bail!("node {to} did not join group {group} within {REPLACE_LIMIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `slotraft cluster move-replica EXISTING_HOST:PORT --shard S --from NODE
/// --to NODE`: moves a shard's replica between nodes, online. The new node is
/// placed in the topology (it opens the group and waits), added to the group
/// as a Raft learner until it has caught up, made a voter in place of the
/// leaving one (leadership first handed over if the leaving one leads), and
/// only then is the topology changed, which makes the leaving node close its
/// replica and delete its data. Rerunning after an interruption continues.
pub async fn move_replica(existing: &str, shard: u64, from: u64, to: u64) -> anyhow::Result<()> {
    let topology = fetch_topology(existing).await?;
    let info = topology
        .shards
        .get(&shard)
        .with_context(|| format!("no shard {shard} in the cluster"))?;
    if !topology.nodes.contains_key(&to) {
        bail!("no node {to} in the cluster");
    }
    if !info.replicas.contains(&from) {
        if info.replicas.contains(&to) {
            say!("[OK] Node {to} already holds the replica of shard {shard}.");
            return Ok(());
        }
        bail!("node {from} holds no replica of shard {shard}");
    }
    let started = Instant::now();
    say!(">>> Moving shard {shard}'s replica from node {from} to node {to}");
    let (shard_text, from_text, to_text) = (shard.to_string(), from.to_string(), to.to_string());
    if !info.replicas.contains(&to) {
        let epoch = metadata_change(
            &topology,
            &[
                b"SLOTRAFT",
                b"ADD-REPLICA",
                shard_text.as_bytes(),
                to_text.as_bytes(),
            ],
        )
        .await?;
        wait_adopted(existing, epoch).await?;
    }
    replace_voter(shard_leader_address(&topology, shard)?, shard, from, to).await?;
    let topology = fetch_topology(existing).await?;
    let epoch = metadata_change(
        &topology,
        &[
            b"SLOTRAFT",
            b"MOVE-REPLICA",
            shard_text.as_bytes(),
            from_text.as_bytes(),
            to_text.as_bytes(),
        ],
    )
    .await?;
    wait_adopted(existing, epoch).await?;
    say!(
        "[OK] Shard {shard}'s replica moved from node {from} to node {to} in {:.1}s.",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Makes node `to` a metadata voter in place of node `from`: `to` opens its
/// metadata replica, the metadata group's membership changes as for a shard,
/// then the topology records it. `from` no longer receives the metadata log,
/// so the new topology is handed to it directly (it then closes its replica
/// and follows the voters like any other node).
pub async fn replace_metadata_voter(existing: &str, from: u64, to: u64) -> anyhow::Result<()> {
    let topology = fetch_topology(existing).await?;
    let to_address = node_address(&topology, to).with_context(|| format!("no node {to}"))?;
    let from_address = node_address(&topology, from).with_context(|| format!("no node {from}"))?;
    say!(">>> Handing node {from}'s metadata vote to node {to}");
    let reply = call(&to_address, &[b"SLOTRAFT", b"OPEN-METADATA"]).await?;
    expect_ok(reply, "opening the metadata replica")?;
    let first = topology
        .metadata_voters
        .iter()
        .find(|&&voter| voter != from)
        .and_then(|&voter| node_address(&topology, voter))
        .context("no other metadata voter")?;
    replace_voter(first, METADATA_GROUP, from, to).await?;
    let (from_text, to_text) = (from.to_string(), to.to_string());
    let epoch = metadata_change(
        &topology,
        &[
            b"SLOTRAFT",
            b"REPLACE-METADATA-VOTER",
            from_text.as_bytes(),
            to_text.as_bytes(),
        ],
    )
    .await?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let current = loop {
        let current = fetch_topology(&to_address).await?;
        if current.epoch >= epoch {
            break current;
        }
        if Instant::now() > deadline {
            bail!("node {to} did not reach epoch {epoch}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let reply = call(
        &from_address,
        &[b"SLOTRAFT", b"BOOTSTRAP", &current.to_bytes()],
    )
    .await?;
    expect_ok(reply, "handing the topology to the former voter")?;
    wait_adopted(&to_address, epoch).await?;
    say!("[OK] Node {to} votes in the metadata group instead of node {from}.");
    Ok(())
}

/// `slotraft cluster add-shard EXISTING_HOST:PORT --nodes ID,ID,...`: adds a
/// shard without slots whose replicas live on the given nodes (first =
/// preferred leader); `rebalance` then gives it slots.
pub async fn add_shard(existing: &str, nodes: &[u64], seed: u64) -> anyhow::Result<()> {
    let topology = fetch_topology(existing).await?;
    for node in nodes {
        if !topology.nodes.contains_key(node) {
            bail!("no node {node} in the cluster");
        }
    }
    let id = topology.shards.keys().max().copied().unwrap_or(0) + 1;
    let mut rng = keyspace::Rng::new(seed);
    let name = random_name(&mut rng);
    let id_text = id.to_string();
    let replica_texts: Vec<String> = nodes.iter().map(u64::to_string).collect();
    let mut arguments: Vec<&[u8]> = vec![
        b"SLOTRAFT",
        b"ADD-SHARD",
        id_text.as_bytes(),
        name.as_bytes(),
    ];
    arguments.extend(replica_texts.iter().map(|text| text.as_bytes()));
    let epoch = metadata_change(&topology, &arguments).await?;
    wait_adopted(existing, epoch).await?;
    // Wait until the new shard has a leader that accepts requests.
    let deadline = Instant::now() + SETTLE_LIMIT;
    loop {
        let topology = fetch_topology(existing).await?;
        let leader = shard_leader_address(&topology, id)?;
        let probe = call(
            &leader,
            &[b"SLOTRAFT", b"EXPORT", id_text.as_bytes(), b"0", b"", b"1"],
        )
        .await;
        if matches!(probe, Ok(Frame::Array(_))) {
            break;
        }
        if Instant::now() > deadline {
            bail!("shard {id} did not elect a leader");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    say!("[OK] Shard {id} added on nodes {replica_texts:?}; it owns no slots yet.");
    Ok(())
}

/// `slotraft cluster rebalance EXISTING_HOST:PORT`: moves slots from shards
/// above an even share to shards below it until every shard owns its share
/// (within one slot).
pub async fn rebalance(existing: &str) -> anyhow::Result<()> {
    let topology = fetch_topology(existing).await?;
    let shards: Vec<u64> = topology.shards.keys().copied().collect();
    if shards.is_empty() {
        bail!("the cluster has no shards");
    }
    let share = 16384 / shards.len();
    let extra = 16384 % shards.len();
    // The target count per shard: an even split, the first shards taking the
    // remainder.
    let target: BTreeMap<u64, usize> = shards
        .iter()
        .enumerate()
        .map(|(index, shard)| (*shard, share + usize::from(index < extra)))
        .collect();
    let mut owned: BTreeMap<u64, Vec<u16>> = shards
        .iter()
        .map(|shard| {
            let slots = topology
                .ranges_of(*shard)
                .into_iter()
                .flat_map(|(start, end)| start..=end)
                .collect();
            (*shard, slots)
        })
        .collect();
    let mut moves: Vec<(u16, u64, u64)> = Vec::new();
    for receiver in &shards {
        while owned[receiver].len() < target[receiver] {
            let Some(giver) = shards
                .iter()
                .copied()
                .filter(|giver| owned[giver].len() > target[giver])
                .max_by_key(|giver| owned[giver].len() - target[giver])
            else {
                break;
            };
            let slot = owned
                .get_mut(&giver)
                .and_then(Vec::pop)
                .context("slot list")?;
            owned.get_mut(receiver).context("receiver")?.push(slot);
            moves.push((slot, giver, *receiver));
        }
    }
    if moves.is_empty() {
        say!("[OK] The slots are already balanced.");
        return Ok(());
    }
    say!(">>> Rebalancing: moving {} slots", moves.len());
    let started = Instant::now();
    let mut keys = 0;
    // Moves between the same pair of shards go together, in steps.
    moves.sort_by_key(|(slot, giver, receiver)| (*giver, *receiver, *slot));
    let mut done = 0;
    let mut index = 0;
    while index < moves.len() {
        let (_, from, to) = moves[index];
        let batch: Vec<u16> = moves[index..]
            .iter()
            .take_while(|(_, giver, receiver)| (*giver, *receiver) == (from, to))
            .take(SLOTS_PER_STEP)
            .map(|(slot, _, _)| *slot)
            .collect();
        index += batch.len();
        keys += migrate_slots(existing, &batch, from, to).await?;
        done += batch.len();
        say!("  {done}/{} slots moved, {keys} keys", moves.len());
    }
    say!(
        "[OK] Moved {} slots ({keys} keys) in {:.1}s.",
        moves.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
