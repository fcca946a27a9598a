//! Commands the router answers from several shards: the multi-key commands
//! whose Redis semantics allow a split (MGET, MSET, DEL, UNLINK, EXISTS,
//! TOUCH: one sub-command per slot, replies merged in the original order or
//! summed; MSET is not atomic across slots), and whole-cluster commands
//! (DBSIZE, SCAN, KEYS, RANDOMKEY, FLUSHALL/FLUSHDB, SCRIPT/FUNCTION LOAD ...).
//!
//! Per-slot questions (`CLUSTER COUNTKEYSINSLOT`, `CLUSTER GETKEYSINSLOT`)
//! are used where the answer must cover every shard exactly, because a node
//! answers a keyless command from one shard only, even when it leads several.
//!
//! SCAN cursor: the low 14 bits are the hash slot being walked, the bits
//! above it the number of that slot's keys already returned (0 unless a slot
//! held more keys than one call's COUNT). A slot's keys come in byte order
//! from its shard's leader, so a key present for the whole scan is returned
//! exactly once.

use super::client::{backoff, give_up, Call, Client, CLUSTER_DOWN, SLOT_NOT_SERVED};
use super::topology::SLOTS;
use super::upstream::Failure;
use bytes::Bytes;
use keyspace::CommandSpec;
use resp::Frame;
use std::collections::HashMap;
use std::time::Duration;

/// Requests per pipelined write to one node.
const PIPELINE_CHUNK: usize = 1024;
/// Rounds of re-sending the requests that were redirected or failed to connect.
const MAX_ROUNDS: usize = 10;
/// Slots asked about per step of a SCAN.
const SCAN_SLOTS_PER_STEP: usize = 512;
/// The largest COUNT a SCAN step honours.
const MAX_SCAN_COUNT: u64 = 100_000;
const SLOT_BITS: u32 = 14;

fn bytes(text: &str) -> Bytes {
    Bytes::copy_from_slice(text.as_bytes())
}

fn read_call(client: &Client) -> Call {
    Call {
        retry_io: true,
        read_limit: Some(client.upstreams.timeout),
        replica_read: false,
    }
}

/// Runs one request per item (`(slot, arguments)`), pipelined per node, and
/// returns the replies in item order. Requests that were redirected or could
/// not be sent are retried in later rounds against a refreshed map; ASK
/// replies are followed one by one.
pub async fn execute_many(
    client: &mut Client,
    items: &[(u16, Vec<Bytes>)],
    call: Call,
) -> Vec<Frame> {
    if client.router.map().is_empty() {
        client.router.refresh().await;
        if let Some(error) = client.router.no_map_error() {
            return vec![error; items.len()];
        }
    }
    let mut replies: Vec<Option<Frame>> = vec![None; items.len()];
    let mut last: Vec<Frame> = vec![Frame::error(SLOT_NOT_SERVED); items.len()];
    let mut pending: Vec<usize> = (0..items.len()).collect();
    let mut asks: Vec<usize> = Vec::new();
    let mut delay = Duration::from_millis(10);
    for round in 0..MAX_ROUNDS {
        if pending.is_empty() {
            break;
        }
        if round > 0 {
            client.router.refresh().await;
        }
        let map = client.router.map();
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        let mut retry = Vec::new();
        for &index in &pending {
            match map.owner(items[index].0) {
                Some(address) => match groups.iter_mut().find(|(known, _)| known == address) {
                    Some((_, indexes)) => indexes.push(index),
                    None => groups.push((address.to_string(), vec![index])),
                },
                None => retry.push(index),
            }
        }
        for (address, indexes) in groups {
            for chunk in indexes.chunks(PIPELINE_CHUNK) {
                let requests: Vec<&[Bytes]> = chunk
                    .iter()
                    .map(|&index| items[index].1.as_slice())
                    .collect();
                match client
                    .upstreams
                    .exchange(&address, &requests, call.read_limit)
                    .await
                {
                    Ok(frames) => {
                        for (&index, frame) in chunk.iter().zip(frames) {
                            match redirect_kind(&frame) {
                                Kind::Final => replies[index] = Some(frame),
                                Kind::Ask => asks.push(index),
                                Kind::Retry => {
                                    last[index] = frame;
                                    retry.push(index);
                                }
                            }
                        }
                    }
                    Err(failure) => {
                        let error = failure.reply(&address);
                        let retryable = matches!(failure, Failure::Connect(_)) || call.retry_io;
                        for &index in chunk {
                            if retryable {
                                last[index] = error.clone();
                                retry.push(index);
                            } else {
                                replies[index] = Some(error.clone());
                            }
                        }
                    }
                }
            }
        }
        pending = retry;
        if !pending.is_empty() {
            backoff(&mut delay, round).await;
        }
    }
    for index in asks {
        let (slot, arguments) = &items[index];
        replies[index] = Some(client.keyed(*slot, arguments, call).await);
    }
    replies
        .into_iter()
        .zip(last)
        .map(|(reply, last)| reply.unwrap_or_else(|| give_up(last)))
        .collect()
}

enum Kind {
    Final,
    Ask,
    Retry,
}

fn redirect_kind(frame: &Frame) -> Kind {
    match frame {
        Frame::Error(text) if text.starts_with(b"ASK ") => Kind::Ask,
        Frame::Error(text)
            if text.starts_with(b"MOVED ")
                || text.starts_with(b"TRYAGAIN")
                || text.starts_with(b"CLUSTERDOWN") =>
        {
            Kind::Retry
        }
        _ => Kind::Final,
    }
}

/// MGET, MSET, DEL, UNLINK, EXISTS, TOUCH: forwarded whole when the keys
/// share a slot, else one sub-command per slot, merged.
pub async fn split(client: &mut Client, spec: &CommandSpec, arguments: &[Bytes]) -> Frame {
    let call = client.call_for(spec, arguments);
    let pairs = spec.name == "mset";
    if pairs && arguments.len().is_multiple_of(2) {
        return Frame::error("ERR wrong number of arguments for 'mset' command");
    }
    match keyspace::command_slot(spec, arguments) {
        Ok(Some(slot)) => return client.keyed(slot, arguments, call).await,
        Ok(None) => return client.keyless(arguments, call).await,
        Err(_) => {}
    }
    let step = if pairs { 2 } else { 1 };
    // Key positions (into `arguments`) grouped by slot, in order of first use.
    let mut groups: Vec<(u16, Vec<usize>)> = Vec::new();
    let mut group_of_slot: HashMap<u16, usize> = HashMap::new();
    for position in (1..arguments.len()).step_by(step) {
        let slot = cluster::key_slot(&arguments[position]);
        let group = *group_of_slot.entry(slot).or_insert_with(|| {
            groups.push((slot, Vec::new()));
            groups.len() - 1
        });
        groups[group].1.push(position);
    }
    let items: Vec<(u16, Vec<Bytes>)> = groups
        .iter()
        .map(|(slot, positions)| {
            let mut command = Vec::with_capacity(positions.len() * step + 1);
            command.push(arguments[0].clone());
            for &position in positions {
                command.extend_from_slice(&arguments[position..position + step]);
            }
            (*slot, command)
        })
        .collect();
    let replies = execute_many(client, &items, call).await;
    if let Some(error) = replies.iter().find(|reply| reply.is_error()) {
        return error.clone();
    }
    match spec.name {
        "mset" => Frame::OK,
        "mget" => {
            let mut values = vec![Frame::Null; arguments.len() - 1];
            for ((_, positions), reply) in groups.iter().zip(replies) {
                let Frame::Array(found) = reply else {
                    return Frame::error("ERR unexpected MGET reply from a node");
                };
                if found.len() != positions.len() {
                    return Frame::error("ERR unexpected MGET reply from a node");
                }
                for (&position, value) in positions.iter().zip(found) {
                    values[position - 1] = value;
                }
            }
            Frame::Array(values)
        }
        _ => {
            let mut total: i64 = 0;
            for reply in replies {
                match reply {
                    Frame::Integer(count) => total = total.saturating_add(count),
                    _ => return Frame::error("ERR unexpected reply from a node"),
                }
            }
            Frame::Integer(total)
        }
    }
}

/// DBSIZE: the sum of CLUSTER COUNTKEYSINSLOT over every slot, each asked of
/// its shard's leader.
pub async fn dbsize(client: &mut Client) -> Frame {
    let items: Vec<(u16, Vec<Bytes>)> = (0..SLOTS as u16)
        .map(|slot| {
            (
                slot,
                vec![
                    bytes("CLUSTER"),
                    bytes("COUNTKEYSINSLOT"),
                    bytes(&slot.to_string()),
                ],
            )
        })
        .collect();
    let call = read_call(client);
    let mut total: i64 = 0;
    for reply in execute_many(client, &items, call).await {
        match reply {
            Frame::Integer(count) => total = total.saturating_add(count),
            Frame::Error(_) => return reply,
            _ => return Frame::error("ERR unexpected COUNTKEYSINSLOT reply from a node"),
        }
    }
    Frame::Integer(total)
}

/// One SCAN step from `cursor`: the next cursor and the keys (MATCH applied).
async fn scan_step(
    client: &mut Client,
    cursor: u64,
    count: u64,
    pattern: Option<&[u8]>,
) -> Result<(u64, Vec<Bytes>), Frame> {
    let mut slot = (cursor & ((1 << SLOT_BITS) - 1)) as usize;
    let mut offset = cursor >> SLOT_BITS;
    let mut keys = Vec::new();
    let call = read_call(client);
    loop {
        if slot >= SLOTS {
            return Ok((0, keys));
        }
        let end = (slot + SCAN_SLOTS_PER_STEP).min(SLOTS);
        let items: Vec<(u16, Vec<Bytes>)> = (slot..end)
            .map(|each| {
                let limit = if each == slot { offset + count } else { count };
                (
                    each as u16,
                    vec![
                        bytes("CLUSTER"),
                        bytes("GETKEYSINSLOT"),
                        bytes(&each.to_string()),
                        bytes(&limit.to_string()),
                    ],
                )
            })
            .collect();
        let replies = execute_many(client, &items, call).await;
        for (each, reply) in (slot..end).zip(replies) {
            let skip = if each == slot { offset } else { 0 };
            let limit = skip + count;
            let Frame::Array(found) = reply else {
                return Err(if reply.is_error() {
                    reply
                } else {
                    Frame::error("ERR unexpected GETKEYSINSLOT reply from a node")
                });
            };
            let full = found.len() as u64 >= limit;
            for key in found.into_iter().skip(skip as usize) {
                let Frame::Bulk(key) = key else {
                    continue;
                };
                if pattern.is_none_or(|pattern| keyspace::glob::glob_match(pattern, &key, false)) {
                    keys.push(key);
                }
            }
            if full {
                // The slot may hold more keys: continue inside it.
                return Ok(((limit << SLOT_BITS) | each as u64, keys));
            }
        }
        slot = end;
        offset = 0;
        if keys.len() as u64 >= count {
            let next = if slot >= SLOTS { 0 } else { slot as u64 };
            return Ok((next, keys));
        }
    }
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type].
pub async fn scan(client: &mut Client, arguments: &[Bytes]) -> Frame {
    let Some(cursor) = std::str::from_utf8(&arguments[1])
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
    else {
        return Frame::error("ERR invalid cursor");
    };
    if cursor >> SLOT_BITS > u64::MAX >> (SLOT_BITS + 1) {
        return Frame::error("ERR invalid cursor");
    }
    let mut count: u64 = 10;
    let mut pattern: Option<&[u8]> = None;
    let mut kind: Option<&[u8]> = None;
    let mut index = 2;
    while index < arguments.len() {
        let option = &arguments[index];
        let Some(value) = arguments.get(index + 1) else {
            return Frame::error("ERR syntax error");
        };
        if option.eq_ignore_ascii_case(b"count") {
            match keyspace::args::parse_i64(value) {
                Ok(number) if number >= 1 => count = (number as u64).min(MAX_SCAN_COUNT),
                Ok(_) => return Frame::error("ERR syntax error"),
                Err(_) => return Frame::error("ERR value is not an integer or out of range"),
            }
        } else if option.eq_ignore_ascii_case(b"match") {
            pattern = Some(value);
        } else if option.eq_ignore_ascii_case(b"type") {
            kind = Some(value);
        } else {
            return Frame::error("ERR syntax error");
        }
        index += 2;
    }
    let (next, mut keys) = match scan_step(client, cursor, count, pattern).await {
        Ok(step) => step,
        Err(error) => return error,
    };
    if let Some(kind) = kind {
        let items: Vec<(u16, Vec<Bytes>)> = keys
            .iter()
            .map(|key| (cluster::key_slot(key), vec![bytes("TYPE"), key.clone()]))
            .collect();
        let call = read_call(client);
        let types = execute_many(client, &items, call).await;
        keys = keys
            .into_iter()
            .zip(types)
            .filter(|(_, found)| {
                found
                    .as_bytes()
                    .is_some_and(|found| !found.is_empty() && found.eq_ignore_ascii_case(kind))
                    && !found.is_error()
            })
            .map(|(key, _)| key)
            .collect();
    }
    Frame::Array(vec![
        Frame::Bulk(bytes(&next.to_string())),
        Frame::Array(keys.into_iter().map(Frame::Bulk).collect()),
    ])
}

/// KEYS pattern: a whole scan, concatenated.
pub async fn keys(client: &mut Client, arguments: &[Bytes]) -> Frame {
    let pattern = arguments[1].clone();
    let mut cursor = 0;
    let mut all = Vec::new();
    loop {
        match scan_step(client, cursor, 10_000, Some(&pattern)).await {
            Ok((next, keys)) => {
                all.extend(keys.into_iter().map(Frame::Bulk));
                if next == 0 {
                    return Frame::Array(all);
                }
                cursor = next;
            }
            Err(error) => return error,
        }
    }
}

/// RANDOMKEY: the masters in a rotating order; the first key any returns.
pub async fn random_key(client: &mut Client) -> Frame {
    let masters = client.router.map().masters().to_vec();
    if masters.is_empty() {
        return Frame::error(CLUSTER_DOWN);
    }
    let start = crate::clock::unix_micros() as usize % masters.len();
    let request = [bytes("RANDOMKEY")];
    let mut last = Frame::Null;
    for offset in 0..masters.len() {
        let address = &masters[(start + offset) % masters.len()];
        match client
            .upstreams
            .exchange(address, &[&request], Some(client.upstreams.timeout))
            .await
        {
            Ok(mut replies) => match replies.pop() {
                Some(Frame::Null) | None => {}
                Some(reply) => return reply,
            },
            Err(failure) => last = failure.reply(address),
        }
    }
    last
}

/// Sends the command to every master: the first error, else the first reply.
async fn to_every_master(client: &mut Client, arguments: &[Bytes]) -> Result<Vec<Frame>, Frame> {
    let mut masters = client.router.map().masters().to_vec();
    if masters.is_empty() {
        client.router.refresh().await;
        masters = client.router.map().masters().to_vec();
    }
    if masters.is_empty() {
        return Err(Frame::error(CLUSTER_DOWN));
    }
    let mut replies = Vec::with_capacity(masters.len());
    let mut first_error = None;
    for address in &masters {
        match client
            .upstreams
            .exchange(address, &[arguments], Some(client.upstreams.timeout))
            .await
        {
            Ok(mut frames) => {
                let reply = frames.pop().unwrap_or(Frame::Null);
                if reply.is_error() && first_error.is_none() {
                    first_error = Some(reply.clone());
                }
                replies.push(reply);
            }
            Err(failure) => {
                if first_error.is_none() {
                    first_error = Some(failure.reply(address));
                }
            }
        }
    }
    match first_error {
        Some(error) => Err(error),
        None => Ok(replies),
    }
}

/// FLUSHALL, FLUSHDB, SCRIPT LOAD/FLUSH, FUNCTION LOAD/FLUSH/DELETE/RESTORE.
pub async fn broadcast(client: &mut Client, arguments: &[Bytes]) -> Frame {
    match to_every_master(client, arguments).await {
        Ok(replies) => replies.into_iter().next().unwrap_or(Frame::OK),
        Err(error) => error,
    }
}

/// SCRIPT EXISTS: a script exists when every master has it.
pub async fn script_exists(client: &mut Client, arguments: &[Bytes]) -> Frame {
    let replies = match to_every_master(client, arguments).await {
        Ok(replies) => replies,
        Err(error) => return error,
    };
    let mut merged = vec![1i64; arguments.len() - 2];
    for reply in replies {
        let Frame::Array(flags) = reply else {
            return Frame::error("ERR unexpected SCRIPT EXISTS reply from a node");
        };
        for (slot, flag) in merged.iter_mut().zip(flags) {
            let present = match flag {
                Frame::Integer(value) => value,
                Frame::Boolean(value) => i64::from(value),
                _ => 0,
            };
            *slot = (*slot).min(present);
        }
    }
    Frame::Array(merged.into_iter().map(Frame::Integer).collect())
}

/// INFO: one node's report, with the Keyspace section (when asked for) made
/// of every master's keyspace: keys and expires summed per database, the
/// average TTL weighted by each master's expiring keys.
pub async fn info(client: &mut Client, arguments: &[Bytes]) -> Frame {
    let call = Call {
        retry_io: true,
        read_limit: Some(client.upstreams.timeout),
        replica_read: false,
    };
    let reply = client.keyless(arguments, call).await;
    let wants_keyspace = arguments.len() == 1
        || arguments[1..].iter().any(|section| {
            ["default", "all", "everything", "keyspace"]
                .iter()
                .any(|name| keyspace::args::is_keyword(section, name))
        });
    let (text, verbatim) = match &reply {
        Frame::Bulk(text) => (text.clone(), false),
        Frame::Verbatim(text) => (text.slice(text.len().min(4)..), true),
        _ => return reply,
    };
    if !wants_keyspace {
        return reply;
    }
    let question = [Bytes::from_static(b"INFO"), Bytes::from_static(b"keyspace")];
    let replies = match to_every_master(client, &question).await {
        Ok(replies) => replies,
        Err(error) => return error,
    };
    // Per database: keys, expires, and TTL x expires (for the average).
    let mut totals: std::collections::BTreeMap<u64, (u64, u64, u128)> = Default::default();
    for reply in &replies {
        let Some(report) = reply.as_bytes() else {
            continue;
        };
        for line in String::from_utf8_lossy(report).lines() {
            let Some((database, fields)) = line.split_once(':') else {
                continue;
            };
            let Some(Ok(index)) = database.strip_prefix("db").map(str::parse::<u64>) else {
                continue;
            };
            let field = |name: &str| -> u64 {
                fields
                    .split(',')
                    .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
                    .and_then(|value| value.trim().parse().ok())
                    .unwrap_or(0)
            };
            let (keys, expires, average) = (field("keys"), field("expires"), field("avg_ttl"));
            let entry = totals.entry(index).or_default();
            entry.0 += keys;
            entry.1 += expires;
            entry.2 += u128::from(average) * u128::from(expires);
        }
    }
    let mut section = String::from("# Keyspace\r\n");
    for (index, (keys, expires, weighted)) in totals {
        let average = weighted.checked_div(u128::from(expires)).unwrap_or(0);
        section.push_str(&format!(
            "db{index}:keys={keys},expires={expires},avg_ttl={average}\r\n"
        ));
    }
    let text = String::from_utf8_lossy(&text).into_owned();
    let merged = match text.find("# Keyspace\r\n") {
        Some(start) => {
            let rest = &text[start + "# Keyspace\r\n".len()..];
            let end = rest
                .find("\r\n# ")
                .map(|offset| start + "# Keyspace\r\n".len() + offset)
                .unwrap_or(text.len());
            format!("{}{section}{}", &text[..start], &text[end..])
        }
        None if text.is_empty() => section,
        None => format!("{text}\r\n{section}"),
    };
    if verbatim {
        Frame::Verbatim(Bytes::from(format!("txt:{merged}")))
    } else {
        Frame::Bulk(Bytes::from(merged))
    }
}
