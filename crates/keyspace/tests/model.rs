//! Property test: random command sequences against the keyspace, compared reply by
//! reply with a deliberately simple reference model (a BTreeMap of key -> value and
//! optional expiry time), including time moving forward between commands.

use bytes::Bytes;
use keyspace::{commands, Context, Keyspace};
use proptest::prelude::*;
use resp::Frame;
use std::collections::BTreeMap;

const KEYS: &[&str] = &["a", "b", "c", "{t}d"];
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
    ]
}

/// The reference: live keys only, values as bytes, expiry as absolute ms.
#[derive(Default)]
struct Model {
    now_ms: u64,
    keys: BTreeMap<Vec<u8>, (Vec<u8>, Option<u64>)>,
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
                self.keys.insert(key(k), (value(v), None));
                Frame::OK
            }
            Operation::SetPx(k, v, ms) => {
                self.keys.insert(key(k), (value(v), Some(self.now_ms + ms)));
                Frame::OK
            }
            Operation::Get(k) => match self.keys.get(&key(k)) {
                Some((data, _)) => Frame::bulk(data.clone()),
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
                let (current, at) = self
                    .keys
                    .get(&key(k))
                    .cloned()
                    .unwrap_or((b"0".to_vec(), None));
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
                self.keys.insert(key(k), (sum.to_string().into_bytes(), at));
                Frame::Integer(sum)
            }
            Operation::Append(k, v) => {
                let entry = self.keys.entry(key(k)).or_insert((Vec::new(), None));
                entry.0.extend(value(v));
                Frame::Integer(entry.0.len() as i64)
            }
            Operation::Strlen(k) => Frame::Integer(
                self.keys
                    .get(&key(k))
                    .map_or(0, |(data, _)| data.len() as i64),
            ),
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
        }
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
    })
}

fn sorted(frame: Frame) -> Frame {
    match frame {
        Frame::Array(mut items) => {
            items.sort_by(|left, right| left.as_bytes().cmp(&right.as_bytes()));
            Frame::Array(items)
        }
        other => other,
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
            prop_assert_eq!(sorted(actual), sorted(expected), "step {} {:?}", step, operation);
        }
    }
}
