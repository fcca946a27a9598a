//! Property test: random command sequences against the keyspace, compared reply by
//! reply with a deliberately simple reference model (a BTreeMap of key -> value and
//! optional expiry time, lists as a VecDeque, hashes as a BTreeMap, sets as a
//! BTreeSet, sorted sets as a BTreeMap of member -> score sorted on demand),
//! including time moving forward between commands.

use bytes::Bytes;
use keyspace::{commands, Context, Keyspace};
use proptest::prelude::*;
use resp::Frame;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

const KEYS: &[&str] = &["a", "b", "c", "{t}d"];
const FIELDS: &[&str] = &["f", "g", "1", "-2", "h"];
const VALUES: &[&str] = &[
    "1",
    "-5",
    "x",
    "10",
    "007",
    "",
    "hello",
    "9223372036854775806",
];

#[derive(Debug, Clone)]
enum Operation {
    Set(usize, usize),
    SetPx(usize, usize, u64),
    Get(usize),
    Del(usize),
    Exists(usize),
    IncrBy(usize, i64),
    Append(usize, usize),
    Strlen(usize),
    Pexpire(usize, u64),
    Persist(usize),
    Pttl(usize),
    Rename(usize, usize),
    Keys,
    Advance(u64),
    Push(usize, bool, Vec<usize>),
    Pop(usize, bool, Option<usize>),
    Llen(usize),
    Lrange(usize, i64, i64),
    Lindex(usize, i64),
    Lrem(usize, i64, usize),
    Ltrim(usize, i64, i64),
    Lmove(usize, usize, bool, bool),
    Type(usize),
    Hset(usize, Vec<(usize, usize)>),
    Hget(usize, usize),
    Hdel(usize, Vec<usize>),
    Hlen(usize),
    Hgetall(usize),
    Hincrby(usize, usize, i64),
    Hexists(usize, usize),
    Sadd(usize, Vec<usize>),
    Srem(usize, Vec<usize>),
    Scard(usize),
    Sismember(usize, usize),
    Smembers(usize),
    Smove(usize, usize, usize),
    /// SINTER, SUNION or SDIFF (0, 1, 2) of two keys, optionally stored.
    SetAlgebra(u8, usize, usize, Option<usize>),
    Spop(usize, usize),
    Z(ZOp),
}

/// Set members: the values and a few more integers (intset encodings).
const MEMBERS: &[&str] = &["1", "-5", "x", "10", "007", "", "hello", "2", "3"];

fn aggregate_operation() -> impl Strategy<Value = Operation> {
    let key = 0..KEYS.len();
    let field = 0..FIELDS.len();
    let value = 0..VALUES.len();
    let member = 0..MEMBERS.len();
    prop_oneof![
        (
            key.clone(),
            proptest::collection::vec((field.clone(), value), 1..4)
        )
            .prop_map(|(k, pairs)| Operation::Hset(k, pairs)),
        (key.clone(), field.clone()).prop_map(|(k, f)| Operation::Hget(k, f)),
        (key.clone(), proptest::collection::vec(field.clone(), 1..3))
            .prop_map(|(k, fields)| Operation::Hdel(k, fields)),
        key.clone().prop_map(Operation::Hlen),
        key.clone().prop_map(Operation::Hgetall),
        (key.clone(), field.clone(), -3i64..4).prop_map(|(k, f, n)| Operation::Hincrby(k, f, n)),
        (key.clone(), field).prop_map(|(k, f)| Operation::Hexists(k, f)),
        (key.clone(), proptest::collection::vec(member.clone(), 1..5))
            .prop_map(|(k, members)| Operation::Sadd(k, members)),
        (key.clone(), proptest::collection::vec(member.clone(), 1..3))
            .prop_map(|(k, members)| Operation::Srem(k, members)),
        key.clone().prop_map(Operation::Scard),
        (key.clone(), member.clone()).prop_map(|(k, m)| Operation::Sismember(k, m)),
        key.clone().prop_map(Operation::Smembers),
        (key.clone(), key.clone(), member).prop_map(|(from, to, m)| Operation::Smove(from, to, m)),
        (
            0u8..3,
            key.clone(),
            key.clone(),
            proptest::option::of(key.clone())
        )
            .prop_map(|(kind, a, b, store)| Operation::SetAlgebra(kind, a, b, store)),
        (key, 0usize..4).prop_map(|(k, count)| Operation::Spop(k, count)),
    ]
}

fn list_operation() -> impl Strategy<Value = Operation> {
    let key = 0..KEYS.len();
    let value = 0..VALUES.len();
    let index = -6i64..6;
    prop_oneof![
        (
            key.clone(),
            any::<bool>(),
            proptest::collection::vec(value.clone(), 1..4)
        )
            .prop_map(|(k, left, values)| Operation::Push(k, left, values)),
        (key.clone(), any::<bool>(), proptest::option::of(0usize..4))
            .prop_map(|(k, left, count)| Operation::Pop(k, left, count)),
        key.clone().prop_map(Operation::Llen),
        (key.clone(), index.clone(), index.clone())
            .prop_map(|(k, a, b)| Operation::Lrange(k, a, b)),
        (key.clone(), index.clone()).prop_map(|(k, i)| Operation::Lindex(k, i)),
        (key.clone(), -3i64..4, value).prop_map(|(k, n, v)| Operation::Lrem(k, n, v)),
        (key.clone(), index.clone(), index).prop_map(|(k, a, b)| Operation::Ltrim(k, a, b)),
        (key.clone(), key.clone(), any::<bool>(), any::<bool>())
            .prop_map(|(from, to, left, right)| Operation::Lmove(from, to, left, right)),
        key.prop_map(Operation::Type),
    ]
}

fn operation() -> impl Strategy<Value = Operation> {
    let key = 0..KEYS.len();
    let value = 0..VALUES.len();
    prop_oneof![
        (key.clone(), value.clone()).prop_map(|(k, v)| Operation::Set(k, v)),
        (key.clone(), value.clone(), 1u64..50).prop_map(|(k, v, ms)| Operation::SetPx(k, v, ms)),
        key.clone().prop_map(Operation::Get),
        key.clone().prop_map(Operation::Del),
        key.clone().prop_map(Operation::Exists),
        (key.clone(), -3i64..4).prop_map(|(k, n)| Operation::IncrBy(k, n)),
        (key.clone(), value).prop_map(|(k, v)| Operation::Append(k, v)),
        key.clone().prop_map(Operation::Strlen),
        (key.clone(), 1u64..50).prop_map(|(k, ms)| Operation::Pexpire(k, ms)),
        key.clone().prop_map(Operation::Persist),
        key.clone().prop_map(Operation::Pttl),
        (key.clone(), key).prop_map(|(from, to)| Operation::Rename(from, to)),
        Just(Operation::Keys),
        (0u64..30).prop_map(Operation::Advance),
        list_operation(),
        list_operation(),
        aggregate_operation(),
        aggregate_operation(),
        zset_operation(),
        zset_operation(),
        zset_operation(),
    ]
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// A hash in the model: field -> value.
type ModelHash = BTreeMap<Vec<u8>, Vec<u8>>;

/// A stored value in the model.
#[derive(Clone)]
enum Stored {
    String(Vec<u8>),
    List(VecDeque<Vec<u8>>),
    Hash(ModelHash),
    Set(BTreeSet<Vec<u8>>),
    ZSet(BTreeMap<Vec<u8>, f64>),
}

/// Redis's start/stop resolution over `length` elements (inclusive), if any.
fn model_range(start: i64, stop: i64, length: usize) -> Option<(usize, usize)> {
    let length = length as i64;
    let start = if start < 0 {
        (length + start).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        length + stop
    } else {
        stop.min(length - 1)
    };
    (start <= stop && start < length).then_some((start as usize, stop as usize))
}

/// The reference: live keys only, values as bytes, expiry as absolute ms.
#[derive(Default)]
struct Model {
    now_ms: u64,
    keys: BTreeMap<Vec<u8>, (Stored, Option<u64>)>,
}

impl Model {
    fn purge(&mut self) {
        let now = self.now_ms;
        self.keys.retain(|_, (_, at)| at.is_none_or(|at| now <= at));
    }

    fn apply(&mut self, operation: &Operation) -> Frame {
        self.purge();
        let key = |index: &usize| KEYS[*index].as_bytes().to_vec();
        let value = |index: &usize| VALUES[*index].as_bytes().to_vec();
        match operation {
            Operation::Set(k, v) => {
                self.keys.insert(key(k), (Stored::String(value(v)), None));
                Frame::OK
            }
            Operation::SetPx(k, v, ms) => {
                self.keys
                    .insert(key(k), (Stored::String(value(v)), Some(self.now_ms + ms)));
                Frame::OK
            }
            Operation::Get(k) => match self.keys.get(&key(k)) {
                Some((Stored::String(data), _)) => Frame::bulk(data.clone()),
                Some(_) => Frame::error(WRONGTYPE),
                None => Frame::Null,
            },
            Operation::Del(k) | Operation::Exists(k) => {
                let present = self.keys.contains_key(&key(k));
                if matches!(operation, Operation::Del(_)) {
                    self.keys.remove(&key(k));
                }
                Frame::Integer(present as i64)
            }
            Operation::IncrBy(k, by) => {
                let (current, at) = match self.keys.get(&key(k)).cloned() {
                    Some((Stored::String(data), at)) => (data, at),
                    Some(_) => return Frame::error(WRONGTYPE),
                    None => (b"0".to_vec(), None),
                };
                let parsed = std::str::from_utf8(&current)
                    .ok()
                    .and_then(|text| text.parse::<i64>().ok())
                    .filter(|number| number.to_string().as_bytes() == current.as_slice());
                let Some(number) = parsed else {
                    return Frame::error("ERR value is not an integer or out of range");
                };
                let Some(sum) = number.checked_add(*by) else {
                    return Frame::error("ERR increment or decrement would overflow");
                };
                self.keys
                    .insert(key(k), (Stored::String(sum.to_string().into_bytes()), at));
                Frame::Integer(sum)
            }
            Operation::Append(k, v) => {
                let entry = self
                    .keys
                    .entry(key(k))
                    .or_insert((Stored::String(Vec::new()), None));
                match &mut entry.0 {
                    Stored::String(data) => {
                        data.extend(value(v));
                        Frame::Integer(data.len() as i64)
                    }
                    _ => Frame::error(WRONGTYPE),
                }
            }
            Operation::Strlen(k) => match self.keys.get(&key(k)) {
                Some((Stored::String(data), _)) => Frame::Integer(data.len() as i64),
                Some(_) => Frame::error(WRONGTYPE),
                None => Frame::Integer(0),
            },
            Operation::Pexpire(k, ms) => match self.keys.get_mut(&key(k)) {
                Some((_, at)) => {
                    *at = Some(self.now_ms + ms);
                    Frame::Integer(1)
                }
                None => Frame::Integer(0),
            },
            Operation::Persist(k) => match self.keys.get_mut(&key(k)) {
                Some((_, at)) if at.is_some() => {
                    *at = None;
                    Frame::Integer(1)
                }
                _ => Frame::Integer(0),
            },
            Operation::Pttl(k) => match self.keys.get(&key(k)) {
                None => Frame::Integer(-2),
                Some((_, None)) => Frame::Integer(-1),
                Some((_, Some(at))) => Frame::Integer((at - self.now_ms) as i64),
            },
            Operation::Rename(from, to) => match self.keys.remove(&key(from)) {
                None => Frame::error("ERR no such key"),
                Some(entry) => {
                    self.keys.insert(key(to), entry);
                    Frame::OK
                }
            },
            Operation::Keys => Frame::Array(
                self.keys
                    .keys()
                    .map(|key| Frame::bulk(key.clone()))
                    .collect(),
            ),
            Operation::Advance(ms) => {
                self.now_ms += ms;
                Frame::OK
            }
            Operation::Type(k) => Frame::simple(match self.keys.get(&key(k)) {
                None => "none",
                Some((Stored::String(_), _)) => "string",
                Some((Stored::List(_), _)) => "list",
                Some((Stored::Hash(_), _)) => "hash",
                Some((Stored::Set(_), _)) => "set",
                Some((Stored::ZSet(_), _)) => "zset",
            }),
            Operation::Hset(..)
            | Operation::Hget(..)
            | Operation::Hdel(..)
            | Operation::Hlen(_)
            | Operation::Hgetall(_)
            | Operation::Hincrby(..)
            | Operation::Hexists(..)
            | Operation::Sadd(..)
            | Operation::Srem(..)
            | Operation::Scard(_)
            | Operation::Sismember(..)
            | Operation::Smembers(_)
            | Operation::Smove(..)
            | Operation::SetAlgebra(..) => {
                let reply = match self.aggregate_reply(operation) {
                    Ok(reply) | Err(reply) => reply,
                };
                self.drop_empty_aggregates();
                reply
            }
            Operation::Spop(..) => unreachable!("checked against the reply"),
            Operation::Z(operation) => self.apply_zset(operation),
            _ => self.apply_list(operation),
        }
    }

    /// The list at `key`: Ok(None) when absent, WRONGTYPE for a string.
    fn list(&mut self, key: &[u8]) -> Result<Option<&mut VecDeque<Vec<u8>>>, Frame> {
        match self.keys.get_mut(key) {
            None => Ok(None),
            Some((Stored::List(list), _)) => Ok(Some(list)),
            Some(_) => Err(Frame::error(WRONGTYPE)),
        }
    }

    /// Deletes `key` if it holds an empty list.
    fn drop_if_empty(&mut self, key: &[u8]) {
        if matches!(self.keys.get(key), Some((Stored::List(list), _)) if list.is_empty()) {
            self.keys.remove(key);
        }
    }

    fn hash(&mut self, key: &[u8]) -> Result<Option<&mut ModelHash>, Frame> {
        match self.keys.get_mut(key) {
            None => Ok(None),
            Some((Stored::Hash(hash), _)) => Ok(Some(hash)),
            Some(_) => Err(Frame::error(WRONGTYPE)),
        }
    }

    fn set(&mut self, key: &[u8]) -> Result<Option<&mut BTreeSet<Vec<u8>>>, Frame> {
        match self.keys.get_mut(key) {
            None => Ok(None),
            Some((Stored::Set(set), _)) => Ok(Some(set)),
            Some(_) => Err(Frame::error(WRONGTYPE)),
        }
    }

    fn drop_empty_aggregates(&mut self) {
        self.keys.retain(|_, (stored, _)| match stored {
            Stored::Hash(hash) => !hash.is_empty(),
            Stored::Set(set) => !set.is_empty(),
            _ => true,
        });
    }

    fn aggregate_reply(&mut self, operation: &Operation) -> Result<Frame, Frame> {
        let key = |index: &usize| KEYS[*index].as_bytes().to_vec();
        let field = |index: &usize| FIELDS[*index].as_bytes().to_vec();
        let member = |index: &usize| MEMBERS[*index].as_bytes().to_vec();
        Ok(match operation {
            Operation::Hset(k, pairs) => {
                if self.hash(&key(k))?.is_none() {
                    self.keys
                        .insert(key(k), (Stored::Hash(BTreeMap::new()), None));
                }
                let hash = self.hash(&key(k))?.expect("created");
                let added = pairs
                    .iter()
                    .filter(|(f, v)| {
                        hash.insert(field(f), VALUES[*v].as_bytes().to_vec())
                            .is_none()
                    })
                    .count();
                Frame::Integer(added as i64)
            }
            Operation::Hget(k, f) => match self.hash(&key(k))? {
                Some(hash) => hash
                    .get(&field(f))
                    .map_or(Frame::Null, |value| Frame::bulk(value.clone())),
                None => Frame::Null,
            },
            Operation::Hdel(k, fields) => match self.hash(&key(k))? {
                Some(hash) => Frame::Integer(
                    fields
                        .iter()
                        .filter(|f| hash.remove(&field(f)).is_some())
                        .count() as i64,
                ),
                None => Frame::Integer(0),
            },
            Operation::Hlen(k) => {
                Frame::Integer(self.hash(&key(k))?.map_or(0, |hash| hash.len() as i64))
            }
            Operation::Hgetall(k) => Frame::Map(
                self.hash(&key(k))?
                    .map(|hash| {
                        hash.iter()
                            .map(|(f, v)| (Frame::bulk(f.clone()), Frame::bulk(v.clone())))
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            Operation::Hexists(k, f) => Frame::Integer(
                self.hash(&key(k))?
                    .is_some_and(|hash| hash.contains_key(&field(f))) as i64,
            ),
            Operation::Hincrby(k, f, by) => {
                let current = match self.hash(&key(k))? {
                    Some(hash) => hash.get(&field(f)).cloned(),
                    None => None,
                };
                let number = match current {
                    None => 0,
                    Some(text) => {
                        let parsed = std::str::from_utf8(&text)
                            .ok()
                            .and_then(|text| text.parse::<i64>().ok())
                            .filter(|number| number.to_string().as_bytes() == text.as_slice());
                        match parsed {
                            Some(number) => number,
                            None => return Err(Frame::error("ERR hash value is not an integer")),
                        }
                    }
                };
                let Some(sum) = number.checked_add(*by) else {
                    return Err(Frame::error("ERR increment or decrement would overflow"));
                };
                if self.hash(&key(k))?.is_none() {
                    self.keys
                        .insert(key(k), (Stored::Hash(BTreeMap::new()), None));
                }
                let hash = self.hash(&key(k))?.expect("created");
                hash.insert(field(f), sum.to_string().into_bytes());
                Frame::Integer(sum)
            }
            Operation::Sadd(k, members) => {
                if self.set(&key(k))?.is_none() {
                    self.keys
                        .insert(key(k), (Stored::Set(BTreeSet::new()), None));
                }
                let set = self.set(&key(k))?.expect("created");
                Frame::Integer(members.iter().filter(|m| set.insert(member(m))).count() as i64)
            }
            Operation::Srem(k, members) => match self.set(&key(k))? {
                Some(set) => {
                    Frame::Integer(members.iter().filter(|m| set.remove(&member(m))).count() as i64)
                }
                None => Frame::Integer(0),
            },
            Operation::Scard(k) => {
                Frame::Integer(self.set(&key(k))?.map_or(0, |set| set.len() as i64))
            }
            Operation::Sismember(k, m) => Frame::Integer(
                self.set(&key(k))?
                    .is_some_and(|set| set.contains(&member(m))) as i64,
            ),
            Operation::Smembers(k) => Frame::Set(
                self.set(&key(k))?
                    .map(|set| set.iter().map(|m| Frame::bulk(m.clone())).collect())
                    .unwrap_or_default(),
            ),
            Operation::Smove(from, to, m) => {
                if self.set(&key(from))?.is_none() {
                    return Ok(Frame::Integer(0));
                }
                self.set(&key(to))?;
                let source = self.set(&key(from))?.expect("checked");
                if !source.remove(&member(m)) {
                    return Ok(Frame::Integer(0));
                }
                // Into the destination (the same set when the keys match).
                if self.set(&key(to))?.is_none() {
                    self.keys
                        .insert(key(to), (Stored::Set(BTreeSet::new()), None));
                }
                self.set(&key(to))?.expect("created").insert(member(m));
                Frame::Integer(1)
            }
            Operation::SetAlgebra(kind, a, b, store) => {
                let first = self.set(&key(a))?.cloned();
                let second = self.set(&key(b))?.cloned();
                let (first, second) = (first.unwrap_or_default(), second.unwrap_or_default());
                let result: BTreeSet<Vec<u8>> = match kind {
                    0 => first.intersection(&second).cloned().collect(),
                    1 => first.union(&second).cloned().collect(),
                    _ => first.difference(&second).cloned().collect(),
                };
                match store {
                    None => Frame::Set(result.iter().map(|m| Frame::bulk(m.clone())).collect()),
                    Some(destination) => {
                        let size = result.len();
                        self.keys.remove(&key(destination));
                        if size > 0 {
                            self.keys
                                .insert(key(destination), (Stored::Set(result), None));
                        }
                        Frame::Integer(size as i64)
                    }
                }
            }
            _ => unreachable!("not a hash or set operation"),
        })
    }

    fn apply_list(&mut self, operation: &Operation) -> Frame {
        let key = |index: &usize| KEYS[*index].as_bytes().to_vec();
        let reply = match self.list_reply(operation) {
            Ok(reply) | Err(reply) => reply,
        };
        for index in 0..KEYS.len() {
            self.drop_if_empty(&key(&index));
        }
        reply
    }

    fn list_reply(&mut self, operation: &Operation) -> Result<Frame, Frame> {
        let key = |index: &usize| KEYS[*index].as_bytes().to_vec();
        let bulk = |data: &Vec<u8>| Frame::bulk(data.clone());
        Ok(match operation {
            Operation::Push(k, left, values) => {
                if self.list(&key(k))?.is_none() {
                    self.keys
                        .insert(key(k), (Stored::List(VecDeque::new()), None));
                }
                let list = self.list(&key(k))?.expect("created");
                for v in values {
                    let data = VALUES[*v].as_bytes().to_vec();
                    if *left {
                        list.push_front(data)
                    } else {
                        list.push_back(data)
                    }
                }
                Frame::Integer(list.len() as i64)
            }
            Operation::Pop(k, left, count) => {
                let Some(list) = self.list(&key(k))? else {
                    return Ok(if count.is_some() {
                        Frame::NullArray
                    } else {
                        Frame::Null
                    });
                };
                let mut pop = || {
                    if *left {
                        list.pop_front()
                    } else {
                        list.pop_back()
                    }
                };
                match count {
                    None => pop().map_or(Frame::Null, |data| bulk(&data)),
                    Some(count) => Frame::Array(
                        (0..*count)
                            .map_while(|_| pop())
                            .map(|data| bulk(&data))
                            .collect(),
                    ),
                }
            }
            Operation::Llen(k) => {
                Frame::Integer(self.list(&key(k))?.map_or(0, |list| list.len() as i64))
            }
            Operation::Lrange(k, start, stop) => {
                let list = self.list(&key(k))?.cloned().unwrap_or_default();
                Frame::Array(match model_range(*start, *stop, list.len()) {
                    Some((first, last)) => (first..=last).map(|index| bulk(&list[index])).collect(),
                    None => Vec::new(),
                })
            }
            Operation::Lindex(k, index) => {
                let Some(list) = self.list(&key(k))? else {
                    return Ok(Frame::Null);
                };
                let position = if *index < 0 {
                    list.len() as i64 + index
                } else {
                    *index
                };
                usize::try_from(position)
                    .ok()
                    .and_then(|position| list.get(position))
                    .map_or(Frame::Null, bulk)
            }
            Operation::Lrem(k, count, v) => {
                let Some(list) = self.list(&key(k))? else {
                    return Ok(Frame::Integer(0));
                };
                let target = VALUES[*v].as_bytes();
                let limit = count.unsigned_abs() as usize;
                let mut removed = 0;
                let mut order: Vec<usize> = (0..list.len()).collect();
                if *count < 0 {
                    order.reverse();
                }
                let mut doomed = Vec::new();
                for index in order {
                    if list[index] == target && (limit == 0 || removed < limit) {
                        removed += 1;
                        doomed.push(index);
                    }
                }
                doomed.sort_unstable();
                for index in doomed.into_iter().rev() {
                    list.remove(index);
                }
                Frame::Integer(removed as i64)
            }
            Operation::Ltrim(k, start, stop) => {
                if let Some(list) = self.list(&key(k))? {
                    *list = match model_range(*start, *stop, list.len()) {
                        Some((first, last)) => list.range(first..=last).cloned().collect(),
                        None => VecDeque::new(),
                    };
                }
                Frame::OK
            }
            Operation::Lmove(from, to, left, right) => {
                if self.list(&key(from))?.is_none() {
                    return Ok(Frame::Null);
                }
                self.list(&key(to))?;
                let source = self.list(&key(from))?.expect("checked");
                let data = if *left {
                    source.pop_front()
                } else {
                    source.pop_back()
                }
                .expect("never empty");
                if self.list(&key(to))?.is_none() {
                    self.keys
                        .insert(key(to), (Stored::List(VecDeque::new()), None));
                }
                let destination = self.list(&key(to))?.expect("created");
                if *right {
                    destination.push_back(data.clone())
                } else {
                    destination.push_front(data.clone())
                }
                bulk(&data)
            }
            _ => unreachable!("not a list operation"),
        })
    }
}

fn words(operation: &Operation) -> Option<Vec<String>> {
    let key = |index: &usize| KEYS[*index].to_string();
    let value = |index: &usize| VALUES[*index].to_string();
    Some(match operation {
        Operation::Set(k, v) => vec!["SET".into(), key(k), value(v)],
        Operation::SetPx(k, v, ms) => {
            vec!["SET".into(), key(k), value(v), "PX".into(), ms.to_string()]
        }
        Operation::Get(k) => vec!["GET".into(), key(k)],
        Operation::Del(k) => vec!["DEL".into(), key(k)],
        Operation::Exists(k) => vec!["EXISTS".into(), key(k)],
        Operation::IncrBy(k, by) => vec!["INCRBY".into(), key(k), by.to_string()],
        Operation::Append(k, v) => vec!["APPEND".into(), key(k), value(v)],
        Operation::Strlen(k) => vec!["STRLEN".into(), key(k)],
        Operation::Pexpire(k, ms) => vec!["PEXPIRE".into(), key(k), ms.to_string()],
        Operation::Persist(k) => vec!["PERSIST".into(), key(k)],
        Operation::Pttl(k) => vec!["PTTL".into(), key(k)],
        Operation::Rename(from, to) => vec!["RENAME".into(), key(from), key(to)],
        Operation::Keys => vec!["KEYS".into(), "*".into()],
        Operation::Advance(_) => return None,
        Operation::Push(k, left, values) => {
            let mut words = vec![if *left { "LPUSH" } else { "RPUSH" }.into(), key(k)];
            words.extend(values.iter().map(value));
            words
        }
        Operation::Pop(k, left, count) => {
            let mut words = vec![if *left { "LPOP" } else { "RPOP" }.into(), key(k)];
            words.extend(count.map(|count| count.to_string()));
            words
        }
        Operation::Llen(k) => vec!["LLEN".into(), key(k)],
        Operation::Lrange(k, start, stop) => {
            vec!["LRANGE".into(), key(k), start.to_string(), stop.to_string()]
        }
        Operation::Lindex(k, index) => vec!["LINDEX".into(), key(k), index.to_string()],
        Operation::Lrem(k, count, v) => vec!["LREM".into(), key(k), count.to_string(), value(v)],
        Operation::Ltrim(k, start, stop) => {
            vec!["LTRIM".into(), key(k), start.to_string(), stop.to_string()]
        }
        Operation::Lmove(from, to, left, right) => vec![
            "LMOVE".into(),
            key(from),
            key(to),
            if *left { "LEFT" } else { "RIGHT" }.into(),
            if *right { "RIGHT" } else { "LEFT" }.into(),
        ],
        Operation::Type(k) => vec!["TYPE".into(), key(k)],
        Operation::Hset(k, pairs) => {
            let mut words = vec!["HSET".into(), key(k)];
            for (f, v) in pairs {
                words.push(FIELDS[*f].into());
                words.push(value(v));
            }
            words
        }
        Operation::Hget(k, f) => vec!["HGET".into(), key(k), FIELDS[*f].into()],
        Operation::Hdel(k, fields) => {
            let mut words = vec!["HDEL".into(), key(k)];
            words.extend(fields.iter().map(|f| FIELDS[*f].to_string()));
            words
        }
        Operation::Hlen(k) => vec!["HLEN".into(), key(k)],
        Operation::Hgetall(k) => vec!["HGETALL".into(), key(k)],
        Operation::Hincrby(k, f, by) => {
            vec!["HINCRBY".into(), key(k), FIELDS[*f].into(), by.to_string()]
        }
        Operation::Hexists(k, f) => vec!["HEXISTS".into(), key(k), FIELDS[*f].into()],
        Operation::Sadd(k, members) | Operation::Srem(k, members) => {
            let name = if matches!(operation, Operation::Sadd(..)) {
                "SADD"
            } else {
                "SREM"
            };
            let mut words = vec![name.into(), key(k)];
            words.extend(members.iter().map(|m| MEMBERS[*m].to_string()));
            words
        }
        Operation::Scard(k) => vec!["SCARD".into(), key(k)],
        Operation::Sismember(k, m) => vec!["SISMEMBER".into(), key(k), MEMBERS[*m].into()],
        Operation::Smembers(k) => vec!["SMEMBERS".into(), key(k)],
        Operation::Smove(from, to, m) => {
            vec!["SMOVE".into(), key(from), key(to), MEMBERS[*m].into()]
        }
        Operation::SetAlgebra(kind, a, b, store) => {
            let name = ["SINTER", "SUNION", "SDIFF"][*kind as usize];
            match store {
                None => vec![name.into(), key(a), key(b)],
                Some(destination) => vec![format!("{name}STORE"), key(destination), key(a), key(b)],
            }
        }
        Operation::Spop(k, count) => vec!["SPOP".into(), key(k), count.to_string()],
        Operation::Z(operation) => zset_words(operation),
    })
}

// ---- Sorted sets ---------------------------------------------------------------------

/// Members: the long one (past the listpack limit) turns a set into a skiplist.
const ZSET_MEMBERS: &[&str] = &[
    "a",
    "b",
    "bb",
    "c",
    "d",
    "",
    "mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm",
];
const SCORES: &[&str] = &["1", "2", "-1.5", "0", "3", "inf", "-inf", "2.5", "-0"];
const SCORE_BOUNDS: &[&str] = &[
    "-inf", "+inf", "0", "(0", "1", "(1", "2.5", "(2.5", "-1.5", "(3", "3",
];
const LEX_BOUNDS: &[&str] = &["-", "+", "[a", "(a", "[b", "(bb", "[c", "(d", "[", "("];
/// The key lexicographic operations use; every member there scores 0.
const LEX_KEY: &str = "{t}lex";

#[derive(Debug, Clone)]
enum ZOp {
    /// Flags (a ZADD option list by index), then (score, member) pairs.
    Add(usize, usize, Vec<(usize, usize)>),
    IncrBy(usize, usize, usize),
    Rem(usize, Vec<usize>),
    Card(usize),
    Score(usize, usize),
    Rank(usize, usize, bool),
    RangeByRank(usize, i64, i64, bool, bool),
    /// Key, min, max, reverse, limit, with scores.
    RangeByScore(usize, usize, usize, bool, Option<(i64, i64)>, bool),
    Count(usize, usize, usize),
    RemByRank(usize, i64, i64),
    RemByScore(usize, usize, usize),
    Pop(usize, bool, Option<usize>),
    /// Operation (0 union, 1 inter, 2 diff), destination, sources, weights,
    /// aggregate (0 sum, 1 min, 2 max).
    Store(u8, usize, Vec<usize>, Option<Vec<usize>>, u8),
    LexAdd(Vec<usize>),
    LexRange(usize, usize, bool, Option<(i64, i64)>),
    LexCount(usize, usize),
    LexRem(usize, usize),
}

const ADD_FLAGS: &[&[&str]] = &[
    &[],
    &[],
    &["NX"],
    &["XX"],
    &["GT"],
    &["LT"],
    &["CH"],
    &["XX", "GT", "CH"],
    &["NX", "CH"],
    &["LT", "CH"],
    &["NX", "XX"],
    &["GT", "LT"],
];

fn zset_operation() -> impl Strategy<Value = Operation> {
    let key = 0..KEYS.len();
    let member = 0..ZSET_MEMBERS.len();
    let score = 0..SCORES.len();
    let bound = 0..SCORE_BOUNDS.len();
    let lex = 0..LEX_BOUNDS.len();
    let index = -5i64..5;
    let limit = proptest::option::of((-1i64..4, -1i64..4));
    let operation = prop_oneof![
        (
            key.clone(),
            0..ADD_FLAGS.len(),
            proptest::collection::vec((score.clone(), member.clone()), 1..4)
        )
            .prop_map(|(k, flags, pairs)| ZOp::Add(k, flags, pairs)),
        (
            key.clone(),
            Just(0usize),
            proptest::collection::vec((score.clone(), member.clone()), 1..4)
        )
            .prop_map(|(k, flags, pairs)| ZOp::Add(k, flags, pairs)),
        (key.clone(), score.clone(), member.clone()).prop_map(|(k, s, m)| ZOp::IncrBy(k, s, m)),
        (key.clone(), proptest::collection::vec(member.clone(), 1..3))
            .prop_map(|(k, members)| ZOp::Rem(k, members)),
        key.clone().prop_map(ZOp::Card),
        (key.clone(), member.clone()).prop_map(|(k, m)| ZOp::Score(k, m)),
        (key.clone(), member.clone(), any::<bool>()).prop_map(|(k, m, r)| ZOp::Rank(k, m, r)),
        (
            key.clone(),
            index.clone(),
            index.clone(),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(|(k, a, b, r, w)| ZOp::RangeByRank(k, a, b, r, w)),
        (
            key.clone(),
            bound.clone(),
            bound.clone(),
            any::<bool>(),
            limit.clone(),
            any::<bool>()
        )
            .prop_map(|(k, a, b, r, l, w)| ZOp::RangeByScore(k, a, b, r, l, w)),
        (key.clone(), bound.clone(), bound.clone()).prop_map(|(k, a, b)| ZOp::Count(k, a, b)),
        (key.clone(), index.clone(), index).prop_map(|(k, a, b)| ZOp::RemByRank(k, a, b)),
        (key.clone(), bound.clone(), bound).prop_map(|(k, a, b)| ZOp::RemByScore(k, a, b)),
        (key.clone(), any::<bool>(), proptest::option::of(0usize..4))
            .prop_map(|(k, max, count)| ZOp::Pop(k, max, count)),
        (
            0u8..3,
            key.clone(),
            proptest::collection::vec(key, 1..4),
            proptest::option::of(proptest::collection::vec(score, 3)),
            0u8..3
        )
            .prop_map(|(op, destination, sources, weights, aggregate)| {
                let weights = weights.map(|mut weights| {
                    weights.truncate(sources.len());
                    weights
                });
                ZOp::Store(op, destination, sources, weights, aggregate)
            }),
        proptest::collection::vec(member, 1..4).prop_map(ZOp::LexAdd),
        (lex.clone(), lex.clone(), any::<bool>(), limit)
            .prop_map(|(a, b, r, l)| ZOp::LexRange(a, b, r, l)),
        (lex.clone(), lex.clone()).prop_map(|(a, b)| ZOp::LexCount(a, b)),
        (lex.clone(), lex).prop_map(|(a, b)| ZOp::LexRem(a, b)),
    ];
    operation.prop_map(Operation::Z)
}

fn zset_words(operation: &ZOp) -> Vec<String> {
    let key = |index: &usize| KEYS[*index].to_string();
    let member = |index: &usize| ZSET_MEMBERS[*index].to_string();
    let score = |index: &usize| SCORES[*index].to_string();
    let bound = |index: &usize| SCORE_BOUNDS[*index].to_string();
    let lex = |index: &usize| LEX_BOUNDS[*index].to_string();
    let strings = |words: &[&str]| {
        words
            .iter()
            .map(|word| word.to_string())
            .collect::<Vec<_>>()
    };
    let limit_words = |limit: &Option<(i64, i64)>| match limit {
        Some((offset, count)) => vec!["LIMIT".into(), offset.to_string(), count.to_string()],
        None => Vec::new(),
    };
    match operation {
        ZOp::Add(k, flags, pairs) => {
            let mut words = vec!["ZADD".into(), key(k)];
            words.extend(strings(ADD_FLAGS[*flags]));
            for (s, m) in pairs {
                words.push(score(s));
                words.push(member(m));
            }
            words
        }
        ZOp::IncrBy(k, s, m) => vec!["ZINCRBY".into(), key(k), score(s), member(m)],
        ZOp::Rem(k, members) => {
            let mut words = vec!["ZREM".into(), key(k)];
            words.extend(members.iter().map(member));
            words
        }
        ZOp::Card(k) => vec!["ZCARD".into(), key(k)],
        ZOp::Score(k, m) => vec!["ZSCORE".into(), key(k), member(m)],
        ZOp::Rank(k, m, reverse) => vec![
            if *reverse { "ZREVRANK" } else { "ZRANK" }.into(),
            key(k),
            member(m),
        ],
        ZOp::RangeByRank(k, start, stop, reverse, with_scores) => {
            let mut words = vec!["ZRANGE".into(), key(k), start.to_string(), stop.to_string()];
            if *reverse {
                words.push("REV".into());
            }
            if *with_scores {
                words.push("WITHSCORES".into());
            }
            words
        }
        ZOp::RangeByScore(k, min, max, reverse, limit, with_scores) => {
            let (first, second) = if *reverse { (max, min) } else { (min, max) };
            let mut words = vec![
                if *reverse {
                    "ZREVRANGEBYSCORE"
                } else {
                    "ZRANGEBYSCORE"
                }
                .into(),
                key(k),
                bound(first),
                bound(second),
            ];
            if *with_scores {
                words.push("WITHSCORES".into());
            }
            words.extend(limit_words(limit));
            words
        }
        ZOp::Count(k, min, max) => vec!["ZCOUNT".into(), key(k), bound(min), bound(max)],
        ZOp::RemByRank(k, start, stop) => vec![
            "ZREMRANGEBYRANK".into(),
            key(k),
            start.to_string(),
            stop.to_string(),
        ],
        ZOp::RemByScore(k, min, max) => {
            vec!["ZREMRANGEBYSCORE".into(), key(k), bound(min), bound(max)]
        }
        ZOp::Pop(k, max, count) => {
            let mut words = vec![if *max { "ZPOPMAX" } else { "ZPOPMIN" }.into(), key(k)];
            words.extend(count.map(|count| count.to_string()));
            words
        }
        ZOp::Store(op, destination, sources, weights, aggregate) => {
            let name = ["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"][*op as usize];
            let mut words = vec![name.into(), key(destination), sources.len().to_string()];
            words.extend(sources.iter().map(key));
            if *op != 2 {
                if let Some(weights) = weights {
                    words.push("WEIGHTS".into());
                    words.extend(weights.iter().map(score));
                }
                words.push("AGGREGATE".into());
                words.push(["SUM", "MIN", "MAX"][*aggregate as usize].into());
            }
            words
        }
        ZOp::LexAdd(members) => {
            let mut words = vec!["ZADD".into(), LEX_KEY.into()];
            for m in members {
                words.push("0".into());
                words.push(member(m));
            }
            words
        }
        ZOp::LexRange(min, max, reverse, limit) => {
            let (first, second) = if *reverse { (max, min) } else { (min, max) };
            let mut words = vec![
                if *reverse {
                    "ZREVRANGEBYLEX"
                } else {
                    "ZRANGEBYLEX"
                }
                .into(),
                LEX_KEY.into(),
                lex(first),
                lex(second),
            ];
            words.extend(limit_words(limit));
            words
        }
        ZOp::LexCount(min, max) => vec!["ZLEXCOUNT".into(), LEX_KEY.into(), lex(min), lex(max)],
        ZOp::LexRem(min, max) => vec!["ZREMRANGEBYLEX".into(), LEX_KEY.into(), lex(min), lex(max)],
    }
}

/// A score bound: value and exclusiveness.
fn model_bound(text: &str) -> (f64, bool) {
    let (exclusive, number) = match text.strip_prefix('(') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let value = match number {
        "-inf" => f64::NEG_INFINITY,
        "+inf" | "inf" => f64::INFINITY,
        other => other.parse().expect("a number"),
    };
    (value, exclusive)
}

fn in_score_range(score: f64, min: &str, max: &str) -> bool {
    let ((low, low_exclusive), (high, high_exclusive)) = (model_bound(min), model_bound(max));
    let above = if low_exclusive {
        score > low
    } else {
        score >= low
    };
    let below = if high_exclusive {
        score < high
    } else {
        score <= high
    };
    above && below
}

fn in_lex_range(member: &[u8], min: &str, max: &str) -> bool {
    let above = match min {
        "-" => true,
        "+" => false,
        _ if min.starts_with('(') => member > &min.as_bytes()[1..],
        _ => member >= &min.as_bytes()[1..],
    };
    let below = match max {
        "-" => false,
        "+" => true,
        _ if max.starts_with('(') => member < &max.as_bytes()[1..],
        _ => member <= &max.as_bytes()[1..],
    };
    above && below
}

/// The set's entries in score order (then bytes).
fn ordered(set: &BTreeMap<Vec<u8>, f64>) -> Vec<(Vec<u8>, f64)> {
    let mut entries: Vec<(Vec<u8>, f64)> = set.iter().map(|(m, s)| (m.clone(), *s)).collect();
    entries.sort_by(|a, b| {
        a.1.partial_cmp(&b.1)
            .expect("no NaN")
            .then_with(|| a.0.cmp(&b.0))
    });
    entries
}

fn entries_frame(entries: &[(Vec<u8>, f64)], with_scores: bool) -> Frame {
    let mut items = Vec::new();
    for (member, score) in entries {
        items.push(Frame::bulk(member.clone()));
        if with_scores {
            items.push(Frame::Double(*score));
        }
    }
    Frame::Array(items)
}

/// Redis's LIMIT over a selection: a negative offset, or one at or past the
/// set's size, selects nothing; a negative count takes all.
fn apply_limit(
    selected: Vec<(Vec<u8>, f64)>,
    limit: &Option<(i64, i64)>,
    set_size: usize,
) -> Vec<(Vec<u8>, f64)> {
    let Some((offset, count)) = *limit else {
        return selected;
    };
    if offset < 0 || (offset > 0 && offset as usize >= set_size) {
        return Vec::new();
    }
    let count = if count < 0 {
        usize::MAX
    } else {
        count as usize
    };
    selected
        .into_iter()
        .skip(offset as usize)
        .take(count)
        .collect()
}

impl Model {
    /// The sorted set at `key`: Ok(None) when absent, WRONGTYPE for other types.
    fn zset(&mut self, key: &[u8]) -> Result<Option<&mut BTreeMap<Vec<u8>, f64>>, Frame> {
        match self.keys.get_mut(key) {
            None => Ok(None),
            Some((Stored::ZSet(set), _)) => Ok(Some(set)),
            Some(_) => Err(Frame::error(WRONGTYPE)),
        }
    }

    fn apply_zset(&mut self, operation: &ZOp) -> Frame {
        let reply = match self.zset_reply(operation) {
            Ok(reply) | Err(reply) => reply,
        };
        let empty: Vec<Vec<u8>> = self
            .keys
            .iter()
            .filter(|(_, (stored, _))| matches!(stored, Stored::ZSet(set) if set.is_empty()))
            .map(|(key, _)| key.clone())
            .collect();
        for key in empty {
            self.keys.remove(&key);
        }
        reply
    }

    fn zset_reply(&mut self, operation: &ZOp) -> Result<Frame, Frame> {
        let key = |index: &usize| KEYS[*index].as_bytes().to_vec();
        let member = |index: &usize| ZSET_MEMBERS[*index].as_bytes().to_vec();
        let score = |index: &usize| -> f64 {
            match SCORES[*index] {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                other => other.parse().expect("a number"),
            }
        };
        Ok(match operation {
            ZOp::Add(k, flags, pairs) => {
                let flags = ADD_FLAGS[*flags];
                let has = |flag: &str| flags.contains(&flag);
                if has("NX") && has("XX") {
                    return Err(Frame::error(
                        "ERR XX and NX options at the same time are not compatible",
                    ));
                }
                if has("GT") && has("LT") {
                    return Err(Frame::error(
                        "ERR GT, LT, and/or NX options at the same time are not compatible",
                    ));
                }
                let (nx, xx, gt, lt) = (has("NX"), has("XX"), has("GT"), has("LT"));
                if self.zset(&key(k))?.is_none() {
                    if xx {
                        return Ok(Frame::Integer(0));
                    }
                    self.keys
                        .insert(key(k), (Stored::ZSet(BTreeMap::new()), None));
                }
                let set = self.zset(&key(k))?.expect("created");
                let (mut added, mut updated) = (0, 0);
                for (s, m) in pairs {
                    let (new, m) = (score(s), member(m));
                    match set.get(&m).copied() {
                        Some(_) if nx => {}
                        Some(current) => {
                            if (lt && new >= current) || (gt && new <= current) {
                                continue;
                            }
                            if new != current {
                                set.insert(m, new);
                                updated += 1;
                            }
                        }
                        None if xx => {}
                        None => {
                            set.insert(m, new);
                            added += 1;
                        }
                    }
                }
                Frame::Integer(if has("CH") { added + updated } else { added })
            }
            ZOp::IncrBy(k, s, m) => {
                if self.zset(&key(k))?.is_none() {
                    self.keys
                        .insert(key(k), (Stored::ZSet(BTreeMap::new()), None));
                }
                let set = self.zset(&key(k))?.expect("created");
                let new = set
                    .get(&member(m))
                    .map_or(score(s), |current| current + score(s));
                if new.is_nan() {
                    return Err(Frame::error("ERR resulting score is not a number (NaN)"));
                }
                set.insert(member(m), new);
                Frame::Double(new)
            }
            ZOp::Rem(k, members) => {
                let Some(set) = self.zset(&key(k))? else {
                    return Ok(Frame::Integer(0));
                };
                let mut removed = 0;
                for m in members {
                    removed += i64::from(set.remove(&member(m)).is_some());
                }
                Frame::Integer(removed)
            }
            ZOp::Card(k) => Frame::Integer(self.zset(&key(k))?.map_or(0, |set| set.len() as i64)),
            ZOp::Score(k, m) => self
                .zset(&key(k))?
                .and_then(|set| set.get(&member(m)).copied())
                .map_or(Frame::Null, Frame::Double),
            ZOp::Rank(k, m, reverse) => {
                let Some(set) = self.zset(&key(k))? else {
                    return Ok(Frame::Null);
                };
                let mut entries = ordered(set);
                if *reverse {
                    entries.reverse();
                }
                entries
                    .iter()
                    .position(|(candidate, _)| *candidate == member(m))
                    .map_or(Frame::Null, |rank| Frame::Integer(rank as i64))
            }
            ZOp::RangeByRank(k, start, stop, reverse, with_scores) => {
                let mut entries = self
                    .zset(&key(k))?
                    .map(|set| ordered(set))
                    .unwrap_or_default();
                if *reverse {
                    entries.reverse();
                }
                match model_range(*start, *stop, entries.len()) {
                    Some((first, last)) => entries_frame(&entries[first..=last], *with_scores),
                    None => Frame::Array(Vec::new()),
                }
            }
            ZOp::RangeByScore(k, min, max, reverse, limit, with_scores) => {
                let entries = self
                    .zset(&key(k))?
                    .map(|set| ordered(set))
                    .unwrap_or_default();
                let size = entries.len();
                let (min, max) = (SCORE_BOUNDS[*min], SCORE_BOUNDS[*max]);
                let mut selected: Vec<_> = entries
                    .into_iter()
                    .filter(|(_, score)| in_score_range(*score, min, max))
                    .collect();
                if *reverse {
                    selected.reverse();
                }
                entries_frame(&apply_limit(selected, limit, size), *with_scores)
            }
            ZOp::Count(k, min, max) => {
                let (min, max) = (SCORE_BOUNDS[*min], SCORE_BOUNDS[*max]);
                Frame::Integer(self.zset(&key(k))?.map_or(0, |set| {
                    set.values()
                        .filter(|score| in_score_range(**score, min, max))
                        .count() as i64
                }))
            }
            ZOp::RemByRank(k, start, stop) => {
                let Some(set) = self.zset(&key(k))? else {
                    return Ok(Frame::Integer(0));
                };
                let entries = ordered(set);
                let Some((first, last)) = model_range(*start, *stop, entries.len()) else {
                    return Ok(Frame::Integer(0));
                };
                for (member, _) in &entries[first..=last] {
                    set.remove(member);
                }
                Frame::Integer((last - first + 1) as i64)
            }
            ZOp::RemByScore(k, min, max) => {
                let (min, max) = (SCORE_BOUNDS[*min], SCORE_BOUNDS[*max]);
                let Some(set) = self.zset(&key(k))? else {
                    return Ok(Frame::Integer(0));
                };
                let before = set.len();
                set.retain(|_, score| !in_score_range(*score, min, max));
                Frame::Integer((before - set.len()) as i64)
            }
            ZOp::Pop(k, highest, count) => {
                let Some(set) = self.zset(&key(k))? else {
                    return Ok(Frame::Array(Vec::new()));
                };
                let mut entries = ordered(set);
                if *highest {
                    entries.reverse();
                }
                entries.truncate(count.unwrap_or(1));
                for (member, _) in &entries {
                    set.remove(member);
                }
                entries_frame(&entries, true)
            }
            ZOp::Store(op, destination, sources, weights, aggregate) => {
                let mut inputs = Vec::new();
                for (position, source) in sources.iter().enumerate() {
                    // A plain set takes part with every member scoring 1.
                    let set = match self.keys.get(&key(source)) {
                        Some((Stored::Set(members), _)) => {
                            members.iter().map(|member| (member.clone(), 1.0)).collect()
                        }
                        _ => self.zset(&key(source))?.cloned().unwrap_or_default(),
                    };
                    let weight = match (op, weights) {
                        (0 | 1, Some(weights)) => score(&weights[position]),
                        _ => 1.0,
                    };
                    inputs.push((set, weight));
                }
                let weighted = |value: f64, weight: f64| {
                    let product = value * weight;
                    if product.is_nan() {
                        0.0
                    } else {
                        product
                    }
                };
                let combine = |total: &mut f64, value: f64| match aggregate {
                    0 => {
                        *total += value;
                        if total.is_nan() {
                            *total = 0.0;
                        }
                    }
                    1 => *total = if value < *total { value } else { *total },
                    _ => *total = if value > *total { value } else { *total },
                };
                if *op != 2 {
                    inputs.sort_by_key(|(set, _)| set.len());
                }
                let mut result = BTreeMap::new();
                match op {
                    0 => {
                        for (set, weight) in &inputs {
                            for (member, value) in set {
                                let value = weighted(*value, *weight);
                                match result.get_mut(member) {
                                    Some(total) => combine(total, value),
                                    None => {
                                        result.insert(member.clone(), value);
                                    }
                                }
                            }
                        }
                    }
                    1 => {
                        let (first, weight) = &inputs[0];
                        'members: for (member, value) in first {
                            let mut total = weighted(*value, *weight);
                            for (other, other_weight) in &inputs[1..] {
                                let Some(found) = other.get(member) else {
                                    continue 'members;
                                };
                                combine(&mut total, weighted(*found, *other_weight));
                            }
                            result.insert(member.clone(), total);
                        }
                    }
                    _ => {
                        for (member, value) in &inputs[0].0 {
                            if inputs[1..]
                                .iter()
                                .all(|(other, _)| !other.contains_key(member))
                            {
                                result.insert(member.clone(), *value);
                            }
                        }
                    }
                }
                let size = result.len();
                if result.is_empty() {
                    self.keys.remove(&key(destination));
                } else {
                    self.keys
                        .insert(key(destination), (Stored::ZSet(result), None));
                }
                Frame::Integer(size as i64)
            }
            ZOp::LexAdd(members) => {
                let lex_key = LEX_KEY.as_bytes().to_vec();
                let set = match self
                    .keys
                    .entry(lex_key)
                    .or_insert((Stored::ZSet(BTreeMap::new()), None))
                {
                    (Stored::ZSet(set), _) => set,
                    _ => unreachable!("only sorted sets live there"),
                };
                let mut added = 0;
                for m in members {
                    added += i64::from(set.insert(member(m), 0.0).is_none());
                }
                Frame::Integer(added)
            }
            ZOp::LexRange(min, max, reverse, limit) => {
                let entries = self
                    .zset(LEX_KEY.as_bytes())?
                    .map(|set| ordered(set))
                    .unwrap_or_default();
                let size = entries.len();
                let (min, max) = (LEX_BOUNDS[*min], LEX_BOUNDS[*max]);
                let mut selected: Vec<_> = entries
                    .into_iter()
                    .filter(|(member, _)| in_lex_range(member, min, max))
                    .collect();
                if *reverse {
                    selected.reverse();
                }
                entries_frame(&apply_limit(selected, limit, size), false)
            }
            ZOp::LexCount(min, max) => {
                let (min, max) = (LEX_BOUNDS[*min], LEX_BOUNDS[*max]);
                Frame::Integer(self.zset(LEX_KEY.as_bytes())?.map_or(0, |set| {
                    set.keys()
                        .filter(|member| in_lex_range(member, min, max))
                        .count() as i64
                }))
            }
            ZOp::LexRem(min, max) => {
                let (min, max) = (LEX_BOUNDS[*min], LEX_BOUNDS[*max]);
                let Some(set) = self.zset(LEX_KEY.as_bytes())? else {
                    return Ok(Frame::Integer(0));
                };
                let before = set.len();
                set.retain(|member, _| !in_lex_range(member, min, max));
                Frame::Integer((before - set.len()) as i64)
            }
        })
    }
}

fn sorted(frame: Frame) -> Frame {
    match frame {
        Frame::Array(mut items) => {
            items.sort_by(|left, right| left.as_bytes().cmp(&right.as_bytes()));
            Frame::Array(items)
        }
        Frame::Set(mut items) => {
            items.sort_by(|left, right| left.as_bytes().cmp(&right.as_bytes()));
            Frame::Set(items)
        }
        Frame::Map(mut pairs) => {
            pairs.sort_by(|left, right| left.0.as_bytes().cmp(&right.0.as_bytes()));
            Frame::Map(pairs)
        }
        other => other,
    }
}

impl Model {
    /// SPOP with a count: the reply is random, so it is checked for what it
    /// must be (distinct members of the set, as many as asked for or all) and
    /// the model then removes exactly those members.
    fn check_spop(&mut self, k: usize, count: usize, reply: &Frame) -> Result<(), String> {
        self.purge();
        let key = KEYS[k].as_bytes().to_vec();
        let set = match self.keys.get_mut(&key) {
            None => {
                return (reply == &Frame::Set(Vec::new()))
                    .then_some(())
                    .ok_or(format!("{reply:?} from a missing key"))
            }
            Some((Stored::Set(set), _)) => set,
            Some(_) => {
                return (reply == &Frame::error(WRONGTYPE))
                    .then_some(())
                    .ok_or(format!("{reply:?} for another type"))
            }
        };
        let Frame::Set(items) = reply else {
            return Err(format!("{reply:?} is not a set"));
        };
        if items.len() != count.min(set.len()) {
            return Err(format!("{} members popped of {}", items.len(), set.len()));
        }
        for item in items {
            let member = item.as_bytes().ok_or("not a bulk")?.to_vec();
            if !set.remove(&member) {
                return Err(format!("{member:?} popped twice or never there"));
            }
        }
        if set.is_empty() {
            self.keys.remove(&key);
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn keyspace_matches_the_model(operations in proptest::collection::vec(operation(), 1..120), seed in any::<u64>()) {
        let mut keyspace = Keyspace::new(16, seed);
        let mut model = Model { now_ms: 1_000_000, ..Model::default() };
        let mut context = Context::new(model.now_ms, seed);
        for (step, operation) in operations.iter().enumerate() {
            if let Operation::Spop(k, count) = operation {
                let arguments: Vec<Bytes> = words(operation)
                    .expect("a command")
                    .into_iter()
                    .map(Bytes::from)
                    .collect();
                let spec = commands::resolve(&arguments).expect("known command");
                let actual = keyspace.execute(spec, &mut context, &arguments);
                let checked = model.check_spop(*k, *count, &actual);
                prop_assert!(checked.is_ok(), "step {} {:?}: {:?}", step, operation, checked);
                continue;
            }
            let expected = model.apply(operation);
            let Some(words) = words(operation) else {
                context.now_ms = model.now_ms;
                // Active expiry may run at any time without changing what is observed.
                keyspace.active_expire_cycle(context.now_ms);
                continue;
            };
            let arguments: Vec<Bytes> = words.iter().map(|word| Bytes::from(word.clone())).collect();
            let spec = commands::resolve(&arguments).expect("known command");
            let actual = keyspace.execute(spec, &mut context, &arguments);
            // KEYS, HGETALL and the set replies answer in storage order;
            // everything else in a defined order.
            let unordered = matches!(
                operation,
                Operation::Keys
                    | Operation::Hgetall(_)
                    | Operation::Smembers(_)
                    | Operation::SetAlgebra(_, _, _, None)
            );
            let (actual, expected) = if unordered {
                (sorted(actual), sorted(expected))
            } else {
                (actual, expected)
            };
            prop_assert_eq!(actual, expected, "step {} {:?}", step, operation);
        }
    }
}
