//! History checkers, one per property.
//!
//! - [`linearizable`]: every key's history is linearizable against a model of
//!   the Redis value (Wing & Gong's search with Lowe's memoization of
//!   configurations already explored). Operations whose outcome is unknown may
//!   take effect at any point after their invocation, or never; operations
//!   refused before they were proposed never take effect. Because every read
//!   goes through the same search, this alone rules out lost acknowledged
//!   writes, phantom elements and stale reads.
//! - [`final_state`]: the state every key ended in, read after the faults
//!   healed, holds every acknowledged write and nothing never attempted:
//!   counter bounds (acknowledged INCRs <= value <= acknowledged + unknown),
//!   no lost or phantom set members, list elements exactly once.
//! - [`rate_limit`]: the sliding-window rate limiter (a Lua script) never
//!   admits more than its limit in any window.
//! - [`conservation`]: MULTI/EXEC transfers between two keys of one slot
//!   conserve their total in every transaction's view.
//! - Convergence of the replicas' state digests is checked by the run itself.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use crate::history::{Call, Observed, Operation, Outcome};

/// A property a history broke, with what shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub checker: &'static str,
    pub key: String,
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "[{}] key {}: {}",
            self.checker, self.key, self.detail
        )
    }
}

/// A key's value in the model.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Value {
    Absent,
    Text(String),
    Set(BTreeSet<String>),
    List(Vec<String>),
    /// The two balances of a transfer pair.
    Accounts(i64, i64),
}

/// Applies `call` to `value`; `None` when the operation's observed reply
/// contradicts the model (for unknown outcomes nothing is observed).
fn step(value: &Value, call: &Call, observed: Option<&Observed>) -> Option<Value> {
    match call {
        Call::Set(text) => match observed {
            None | Some(Observed::Ok) => Some(Value::Text(text.clone())),
            Some(_) => None,
        },
        Call::Get => {
            let matches = match (value, observed) {
                (Value::Absent, Some(Observed::Nil)) => true,
                (Value::Text(text), Some(Observed::Bulk(seen))) => text == seen,
                _ => false,
            };
            matches.then(|| value.clone())
        }
        Call::Incr => {
            let current = match value {
                Value::Absent => 0,
                Value::Text(text) => text.parse::<i64>().ok()?,
                _ => return None,
            };
            let next = current + 1;
            match observed {
                None => Some(Value::Text(next.to_string())),
                Some(Observed::Integer(seen)) if *seen == next => {
                    Some(Value::Text(next.to_string()))
                }
                Some(_) => None,
            }
        }
        Call::SAdd(member) => {
            let mut members = match value {
                Value::Absent => BTreeSet::new(),
                Value::Set(members) => members.clone(),
                _ => return None,
            };
            let added = members.insert(member.clone());
            match observed {
                None => Some(Value::Set(members)),
                Some(Observed::Integer(seen)) if *seen == i64::from(added) => {
                    Some(Value::Set(members))
                }
                Some(_) => None,
            }
        }
        Call::SMembers => {
            let current: Vec<String> = match value {
                Value::Absent => Vec::new(),
                Value::Set(members) => members.iter().cloned().collect(),
                _ => return None,
            };
            (observed == Some(&Observed::Elements(current))).then(|| value.clone())
        }
        Call::RPush(element) => {
            let mut elements = match value {
                Value::Absent => Vec::new(),
                Value::List(elements) => elements.clone(),
                _ => return None,
            };
            elements.push(element.clone());
            match observed {
                None => Some(Value::List(elements)),
                Some(Observed::Integer(seen)) if *seen == elements.len() as i64 => {
                    Some(Value::List(elements))
                }
                Some(_) => None,
            }
        }
        Call::Limit(_) => None,
        Call::Transfer(amount) => {
            let (from, to) = match value {
                Value::Absent => (0, 0),
                Value::Accounts(from, to) => (*from, *to),
                _ => return None,
            };
            let next = (from - amount, to + amount);
            let seen = Observed::Elements(vec![next.0.to_string(), next.1.to_string()]);
            match observed {
                None => Some(Value::Accounts(next.0, next.1)),
                Some(observed) if *observed == seen => Some(Value::Accounts(next.0, next.1)),
                Some(_) => None,
            }
        }
        Call::Audit => {
            let (from, to) = match value {
                Value::Absent => (0, 0),
                Value::Accounts(from, to) => (*from, *to),
                _ => return None,
            };
            let current = Observed::Elements(vec![from.to_string(), to.to_string()]);
            (observed == Some(&current)).then(|| value.clone())
        }
        Call::LRange => {
            let current: Vec<String> = match value {
                Value::Absent => Vec::new(),
                Value::List(elements) => elements.clone(),
                _ => return None,
            };
            (observed == Some(&Observed::Elements(current))).then(|| value.clone())
        }
        // Linearized where it took its element (or, timing out, where the
        // list was empty); an unknown pop takes the front if there is one.
        Call::BLPop => {
            let mut elements = match value {
                Value::Absent => Vec::new(),
                Value::List(elements) => elements.clone(),
                _ => return None,
            };
            match observed {
                Some(Observed::Nil) => elements.is_empty().then(|| value.clone()),
                Some(Observed::Elements(reply)) => match reply.as_slice() {
                    [_, element] if elements.first() == Some(element) => {
                        elements.remove(0);
                        Some(list_value(elements))
                    }
                    _ => None,
                },
                None if elements.is_empty() => Some(value.clone()),
                None => {
                    elements.remove(0);
                    Some(list_value(elements))
                }
                Some(_) => None,
            }
        }
    }
}

/// A list value; an emptied list is deleted, as in Redis.
fn list_value(elements: Vec<String>) -> Value {
    if elements.is_empty() {
        Value::Absent
    } else {
        Value::List(elements)
    }
}

/// Configurations the search may explore per key before it gives up: a
/// history with many operations of unknown outcome on one key can need a
/// few million (cluster seed 1691: 2.2 million for 101 operations on one
/// queue key, 10 of them of unknown outcome). Each
/// costs the search about 20 bytes (a fingerprint in a hash set).
const SEARCH_BUDGET: usize = 10_000_000;

/// One operation as the search sees it.
struct Candidate<'a> {
    operation: &'a Operation,
    /// `None` for an unknown outcome: it need not be linearized at all.
    observed: Option<&'a Observed>,
    /// When it must have taken effect by (`u64::MAX` when unknown).
    deadline: u64,
}

/// Checks every key's history for linearizability.
pub fn linearizable(history: &[Operation]) -> Vec<Violation> {
    let mut by_key: BTreeMap<&str, Vec<&Operation>> = BTreeMap::new();
    // The rate limiter's runs depend on their time: checked by `rate_limit`.
    for operation in history
        .iter()
        .filter(|operation| !matches!(operation.call, Call::Limit(_)))
    {
        by_key.entry(&operation.key).or_default().push(operation);
    }
    by_key
        .into_iter()
        .filter_map(|(key, operations)| linearizable_key(key, &operations).err())
        .collect()
}

fn linearizable_key(key: &str, operations: &[&Operation]) -> Result<(), Violation> {
    let mut candidates: Vec<Candidate<'_>> = operations
        .iter()
        .filter_map(|operation| match &operation.outcome {
            Outcome::Done(observed) => Some(Candidate {
                operation,
                observed: Some(observed),
                deadline: operation.completed,
            }),
            // A read whose outcome is unknown constrains nothing.
            Outcome::Unknown if !operation.call.is_read() => Some(Candidate {
                operation,
                observed: None,
                deadline: u64::MAX,
            }),
            Outcome::Unknown | Outcome::Failed => None,
        })
        .collect();
    candidates.sort_by_key(|candidate| (candidate.operation.invoked, candidate.deadline));
    let count = candidates.len();
    let required = candidates
        .iter()
        .filter(|candidate| candidate.observed.is_some())
        .count();
    let words = count.div_ceil(64);
    let mut done = vec![0u64; words];
    let is_done = |done: &[u64], index: usize| done[index / 64] & (1 << (index % 64)) != 0;
    let mut value = Value::Absent;
    let mut required_done = 0usize;
    // Configurations explored, by fingerprint (see [`fingerprint`]).
    let mut seen: HashSet<u128> = HashSet::new();
    // The search's path: the operation linearized at each depth, the value
    // before it, and where the scan for the next choice at that depth resumes.
    let mut path: Vec<(usize, Value)> = Vec::new();
    let mut resume = 0usize;
    // The deepest point reached, for the report.
    let mut deepest = (0usize, Value::Absent, vec![0u64; words]);
    loop {
        if required_done == required {
            return Ok(());
        }
        if seen.len() > SEARCH_BUDGET {
            return Err(Violation {
                checker: "linearizable",
                key: key.to_string(),
                detail: format!(
                    "search budget exhausted after {} configurations ({count} operations)",
                    seen.len()
                ),
            });
        }
        // The operations that may come next: not yet linearized and invoked
        // before the earliest deadline among those not yet linearized.
        let first_open = (0..count)
            .find(|index| !is_done(&done, *index))
            .unwrap_or(count);
        let mut horizon = u64::MAX;
        let mut end = first_open;
        while end < count && candidates[end].operation.invoked <= horizon {
            if !is_done(&done, end) {
                horizon = horizon.min(candidates[end].deadline);
            }
            end += 1;
        }
        // Operations with a known outcome are tried first, in invocation
        // order, then those with an unknown one: an unknown write is only
        // placed once a known operation cannot go next without it, which is
        // where a linearization usually needs it (a read that saw its
        // effect), so the search rarely wanders through placements of
        // unknown writes that nothing observed. `resume` is a position in
        // this order (see [`scan_rank`]).
        let known = (first_open..end).filter(|&index| candidates[index].observed.is_some());
        let unknown = (first_open..end).filter(|&index| candidates[index].observed.is_none());
        let mut chosen = None;
        for index in known
            .chain(unknown)
            .filter(|&index| scan_rank(&candidates, index) >= resume)
        {
            let candidate = &candidates[index];
            if is_done(&done, index) || candidate.operation.invoked > horizon {
                continue;
            }
            if let Some(next) = step(&value, &candidate.operation.call, candidate.observed) {
                let mut next_done = done.clone();
                next_done[index / 64] |= 1 << (index % 64);
                if seen.insert(fingerprint(&next_done, &next)) {
                    chosen = Some((index, next));
                    break;
                }
            }
        }
        match chosen {
            Some((index, next)) => {
                path.push((index, std::mem::replace(&mut value, next)));
                done[index / 64] |= 1 << (index % 64);
                if candidates[index].observed.is_some() {
                    required_done += 1;
                }
                resume = 0;
                if path.len() > deepest.0 {
                    deepest = (path.len(), value.clone(), done.clone());
                }
            }
            None => {
                let Some((index, previous)) = path.pop() else {
                    return Err(report(key, &candidates, &deepest));
                };
                done[index / 64] &= !(1 << (index % 64));
                if candidates[index].observed.is_some() {
                    required_done -= 1;
                }
                value = previous;
                resume = scan_rank(&candidates, index) + 1;
            }
        }
    }
}

/// A configuration's identity for the search's memory: 128 bits of two
/// fixed-key hashes of the operations done and the model's value. Storing
/// the configurations themselves costs hundreds of bytes each (the value is
/// a whole list); a collision, about one in 2^100 for the budget's count,
/// could only hide a linearization (a false report), never invent one.
fn fingerprint(done: &[u64], value: &Value) -> u128 {
    use std::hash::{Hash, Hasher};
    let mut first = std::collections::hash_map::DefaultHasher::new();
    (done, value).hash(&mut first);
    let mut second = std::collections::hash_map::DefaultHasher::new();
    (0x5bd1_e995_u32, done, value).hash(&mut second);
    u128::from(first.finish()) << 64 | u128::from(second.finish())
}

/// Where `index` comes in the order the search tries operations at one
/// depth: those with a known outcome (by index), then the unknown ones.
fn scan_rank(candidates: &[Candidate<'_>], index: usize) -> usize {
    if candidates[index].observed.is_some() {
        index
    } else {
        candidates.len() + index
    }
}

/// Describes where the search got stuck deepest.
fn report(
    key: &str,
    candidates: &[Candidate<'_>],
    deepest: &(usize, Value, Vec<u64>),
) -> Violation {
    let (depth, value, done) = deepest;
    let open: Vec<String> = candidates
        .iter()
        .enumerate()
        .filter(|(index, _)| done[index / 64] & (1 << (index % 64)) == 0)
        .take(6)
        .map(|(_, candidate)| describe(candidate.operation))
        .collect();
    Violation {
        checker: "linearizable",
        key: key.to_string(),
        detail: format!(
            "no linearization: at most {depth} of {} operations order consistently; the model then holds {value:?} and none of the next operations fits: {}",
            candidates.len(),
            open.join("; ")
        ),
    }
}

fn describe(operation: &Operation) -> String {
    format!(
        "client {} {:?} [{:.3}s..{}] node{} -> {:?}",
        operation.client,
        operation.call,
        operation.invoked as f64 / 1e9,
        if operation.completed == u64::MAX {
            "?".to_string()
        } else {
            format!("{:.3}s", operation.completed as f64 / 1e9)
        },
        operation.node,
        operation.outcome
    )
}

/// Transfers conserve the total: every transaction's view of the two
/// balances (a transfer's reply, an audit) sums to zero, the total they
/// started with.
pub fn conservation(history: &[Operation]) -> Vec<Violation> {
    history
        .iter()
        .filter(|operation| matches!(operation.call, Call::Transfer(_) | Call::Audit))
        .filter_map(|operation| {
            let Outcome::Done(Observed::Elements(balances)) = &operation.outcome else {
                return None;
            };
            let total: Option<i64> = balances.iter().map(|text| text.parse::<i64>().ok()).sum();
            (total != Some(0)).then(|| Violation {
                checker: "transfers-conserve",
                key: operation.key.clone(),
                detail: format!("{} saw balances {balances:?}", describe(operation)),
            })
        })
        .collect()
}

/// The rate limiter never admits more than `limit` requests in any window of
/// `window_ms`: among the acknowledged admissions, ordered by the time they
/// ran at, any `limit + 1` consecutive ones span at least the window.
/// (Admissions whose outcome is unknown are not counted; they can only make
/// a real excess larger.)
pub fn rate_limit(history: &[Operation], window_ms: u64, limit: u64) -> Vec<Violation> {
    let mut admitted: Vec<(u64, &Operation)> = history
        .iter()
        .filter(|operation| matches!(operation.call, Call::Limit(_)))
        .filter_map(|operation| match &operation.outcome {
            Outcome::Done(Observed::Elements(reply))
                if reply.first().map(String::as_str) == Some("1") =>
            {
                reply
                    .get(1)?
                    .parse::<u64>()
                    .ok()
                    .map(|time| (time, operation))
            }
            _ => None,
        })
        .collect();
    admitted.sort_by_key(|(time, _)| *time);
    let limit = limit as usize;
    admitted
        .windows(limit + 1)
        .filter(|run| run[limit].0 - run[0].0 < window_ms)
        .take(1)
        .map(|run| Violation {
            checker: "rate-limit",
            key: run[0].1.key.clone(),
            detail: format!(
                "{} admissions within {} ms (window {window_ms} ms, limit {limit}): {:?}",
                limit + 1,
                run[limit].0 - run[0].0,
                run.iter().map(|(time, _)| *time).collect::<Vec<_>>()
            ),
        })
        .collect()
}

/// Checks the final state of every key against what was attempted and
/// acknowledged. `finals` holds each key's last read, made after healing.
pub fn final_state(history: &[Operation], finals: &BTreeMap<String, Observed>) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut flag = |key: &str, checker: &'static str, detail: String| {
        violations.push(Violation {
            checker,
            key: key.to_string(),
            detail,
        })
    };
    for (key, observed) in finals {
        let writes: Vec<&Operation> = history
            .iter()
            .filter(|operation| &operation.key == key && !operation.call.is_read())
            .collect();
        if writes
            .iter()
            .any(|operation| matches!(operation.call, Call::Transfer(_) | Call::Limit(_)))
        {
            // Balances: checked by linearizability and conservation.
            continue;
        }
        let acknowledged = |operation: &&&Operation| matches!(operation.outcome, Outcome::Done(_));
        let possible = |operation: &&&Operation| !matches!(operation.outcome, Outcome::Failed);
        if writes.iter().any(|operation| operation.call == Call::BLPop) {
            violations_of_queue(key, &writes, observed, &mut flag);
            continue;
        }
        if writes.iter().all(|operation| operation.call == Call::Incr) && !writes.is_empty() {
            let low = writes.iter().filter(acknowledged).count() as i64;
            let high = writes.iter().filter(possible).count() as i64;
            let value = match observed {
                Observed::Nil => 0,
                Observed::Bulk(text) => text.parse().unwrap_or(-1),
                _ => -1,
            };
            if value < low || value > high {
                flag(
                    key,
                    "counter-bounds",
                    format!("final value {value} outside [{low}, {high}] (acknowledged, possible)"),
                );
            }
            continue;
        }
        let Observed::Elements(elements) = observed else {
            continue;
        };
        let element = |operation: &Operation| match &operation.call {
            Call::SAdd(member) | Call::RPush(member) => Some(member.clone()),
            _ => None,
        };
        let must: BTreeSet<String> = writes
            .iter()
            .filter(acknowledged)
            .filter_map(|o| element(o))
            .collect();
        let may: BTreeSet<String> = writes
            .iter()
            .filter(possible)
            .filter_map(|o| element(o))
            .collect();
        let present: BTreeSet<String> = elements.iter().cloned().collect();
        for lost in must.difference(&present) {
            flag(
                key,
                "no-lost-elements",
                format!("acknowledged element {lost} is missing"),
            );
        }
        for phantom in present.difference(&may) {
            flag(
                key,
                "no-phantom-elements",
                format!("element {phantom} was never successfully added"),
            );
        }
        if present.len() != elements.len() {
            flag(key, "elements-once", format!("duplicates in {elements:?}"));
        }
    }
    violations
}

/// A queue's end state: every acknowledged push was popped by an
/// acknowledged pop or is still queued, except at most one per pop whose
/// outcome is unknown; nothing was delivered twice (popped twice, or popped
/// and still queued); nothing popped or queued was never pushed.
fn violations_of_queue(
    key: &str,
    writes: &[&Operation],
    observed: &Observed,
    flag: &mut impl FnMut(&str, &'static str, String),
) {
    let Observed::Elements(queued) = observed else {
        flag(
            key,
            "queue",
            format!("final state {observed:?} is not a list"),
        );
        return;
    };
    let pushed = |wanted: fn(&Outcome) -> bool| -> BTreeSet<String> {
        writes
            .iter()
            .filter(|operation| wanted(&operation.outcome))
            .filter_map(|operation| match &operation.call {
                Call::RPush(element) => Some(element.clone()),
                _ => None,
            })
            .collect()
    };
    let must = pushed(|outcome| matches!(outcome, Outcome::Done(_)));
    let may = pushed(|outcome| !matches!(outcome, Outcome::Failed));
    let mut delivered: Vec<String> = writes
        .iter()
        .filter(|operation| operation.call == Call::BLPop)
        .filter_map(|operation| match &operation.outcome {
            Outcome::Done(Observed::Elements(reply)) => reply.get(1).cloned(),
            _ => None,
        })
        .collect();
    let unknown_pops = writes
        .iter()
        .filter(|operation| operation.call == Call::BLPop && operation.outcome == Outcome::Unknown)
        .count();
    delivered.extend(queued.iter().cloned());
    let seen: BTreeSet<String> = delivered.iter().cloned().collect();
    if seen.len() != delivered.len() {
        flag(
            key,
            "queue-once",
            "an element was delivered twice (popped twice, or popped and still queued)".into(),
        );
    }
    let missing: Vec<&String> = must.difference(&seen).collect();
    if missing.len() > unknown_pops {
        flag(
            key,
            "no-lost-elements",
            format!(
                "acknowledged pushes {missing:?} were neither popped nor queued ({unknown_pops} pops of unknown outcome)"
            ),
        );
    }
    for phantom in seen.difference(&may) {
        flag(
            key,
            "no-phantom-elements",
            format!("element {phantom} was never successfully pushed"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn operation(client: u64, call: Call, span: (u64, u64), outcome: Outcome) -> Operation {
        Operation {
            client,
            key: "k".into(),
            call,
            invoked: span.0,
            completed: span.1,
            outcome,
            node: 1,
        }
    }

    fn done(observed: Observed) -> Outcome {
        Outcome::Done(observed)
    }

    fn popped(element: &str) -> Outcome {
        done(Observed::Elements(vec!["k".into(), element.into()]))
    }

    /// A queue: pops take elements in push order, a pop that timed out saw it
    /// empty; an element popped twice, or out of order, is not linearizable.
    #[test]
    fn blocking_pops_follow_the_queue_model() {
        let push = |element: &str, span, length| {
            operation(
                1,
                Call::RPush(element.into()),
                span,
                done(Observed::Integer(length)),
            )
        };
        let good = vec![
            operation(2, Call::BLPop, (0, 30), popped("a")),
            push("a", (10, 11), 1),
            push("b", (12, 13), 1),
            operation(3, Call::BLPop, (14, 15), popped("b")),
            operation(3, Call::BLPop, (16, 17), done(Observed::Nil)),
        ];
        assert_eq!(linearizable(&good), Vec::new());
        let twice = vec![
            push("a", (0, 1), 1),
            operation(2, Call::BLPop, (2, 3), popped("a")),
            operation(3, Call::BLPop, (4, 5), popped("a")),
        ];
        assert_eq!(linearizable(&twice).len(), 1);
        let out_of_order = vec![
            push("a", (0, 1), 1),
            push("b", (2, 3), 2),
            operation(2, Call::BLPop, (4, 5), popped("b")),
        ];
        assert_eq!(linearizable(&out_of_order).len(), 1);
        // An unknown pop may have taken the element, or not.
        let unknown = vec![
            push("a", (0, 1), 1),
            operation(2, Call::BLPop, (2, u64::MAX), Outcome::Unknown),
            operation(3, Call::LRange, (10, 11), done(Observed::Elements(vec![]))),
        ];
        assert_eq!(linearizable(&unknown), Vec::new());
    }

    #[test]
    fn a_queue_ends_with_every_push_popped_or_queued_once() {
        let history = vec![
            operation(
                1,
                Call::RPush("a".into()),
                (0, 1),
                done(Observed::Integer(1)),
            ),
            operation(
                1,
                Call::RPush("b".into()),
                (2, 3),
                done(Observed::Integer(2)),
            ),
            operation(
                1,
                Call::RPush("c".into()),
                (4, 5),
                done(Observed::Integer(3)),
            ),
            operation(2, Call::BLPop, (6, 7), popped("a")),
        ];
        let finals = |elements: &[&str]| {
            BTreeMap::from([(
                "k".to_string(),
                Observed::Elements(elements.iter().map(|e| e.to_string()).collect()),
            )])
        };
        assert_eq!(final_state(&history, &finals(&["b", "c"])), Vec::new());
        let checkers = |elements: &[&str]| -> Vec<&'static str> {
            final_state(&history, &finals(elements))
                .iter()
                .map(|violation| violation.checker)
                .collect()
        };
        assert_eq!(checkers(&["c"]), vec!["no-lost-elements"]);
        assert_eq!(checkers(&["a", "b", "c"]), vec!["queue-once"]);
        assert_eq!(checkers(&["b", "c", "z"]), vec!["no-phantom-elements"]);
    }

    #[test]
    fn concurrent_writes_may_be_read_in_either_order() {
        let history = vec![
            operation(1, Call::Set("a".into()), (0, 10), done(Observed::Ok)),
            operation(2, Call::Set("b".into()), (1, 11), done(Observed::Ok)),
            operation(3, Call::Get, (12, 13), done(Observed::Bulk("a".into()))),
        ];
        assert_eq!(linearizable(&history), Vec::new());
    }

    #[test]
    fn a_stale_read_after_an_acknowledged_write_is_caught() {
        let history = vec![
            operation(1, Call::Set("a".into()), (0, 10), done(Observed::Ok)),
            operation(1, Call::Set("b".into()), (11, 20), done(Observed::Ok)),
            operation(2, Call::Get, (21, 22), done(Observed::Bulk("a".into()))),
        ];
        let violations = linearizable(&history);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert_eq!(violations[0].checker, "linearizable");
    }

    #[test]
    fn an_unknown_write_may_appear_late_or_never() {
        let late = vec![
            operation(1, Call::Set("a".into()), (0, 10), done(Observed::Ok)),
            operation(1, Call::Set("b".into()), (11, u64::MAX), Outcome::Unknown),
            operation(2, Call::Get, (30, 31), done(Observed::Bulk("a".into()))),
            operation(2, Call::Get, (40, 41), done(Observed::Bulk("b".into()))),
        ];
        assert_eq!(linearizable(&late), Vec::new());
        let never = vec![
            operation(1, Call::Set("a".into()), (0, 10), done(Observed::Ok)),
            operation(1, Call::Set("b".into()), (11, u64::MAX), Outcome::Unknown),
            operation(2, Call::Get, (40, 41), done(Observed::Bulk("a".into()))),
        ];
        assert_eq!(linearizable(&never), Vec::new());
        // Once seen, it cannot disappear again.
        let flicker = vec![
            operation(1, Call::Set("a".into()), (0, 10), done(Observed::Ok)),
            operation(1, Call::Set("b".into()), (11, u64::MAX), Outcome::Unknown),
            operation(2, Call::Get, (30, 31), done(Observed::Bulk("b".into()))),
            operation(2, Call::Get, (40, 41), done(Observed::Bulk("a".into()))),
        ];
        assert_eq!(linearizable(&flicker).len(), 1);
    }

    #[test]
    fn a_refused_write_must_never_be_seen() {
        let history = vec![
            operation(1, Call::Set("a".into()), (0, 10), Outcome::Failed),
            operation(2, Call::Get, (20, 21), done(Observed::Bulk("a".into()))),
        ];
        assert_eq!(linearizable(&history).len(), 1);
    }

    #[test]
    fn counters_sets_and_lists_follow_their_models() {
        let counter = vec![
            operation(1, Call::Incr, (0, 10), done(Observed::Integer(1))),
            operation(2, Call::Incr, (5, 15), done(Observed::Integer(2))),
            operation(3, Call::Get, (20, 21), done(Observed::Bulk("2".into()))),
        ];
        assert_eq!(linearizable(&counter), Vec::new());
        let doubled = vec![
            operation(1, Call::Incr, (0, 10), done(Observed::Integer(1))),
            operation(2, Call::Incr, (11, 15), done(Observed::Integer(1))),
        ];
        assert_eq!(linearizable(&doubled).len(), 1);
        let set = vec![
            operation(
                1,
                Call::SAdd("x".into()),
                (0, 10),
                done(Observed::Integer(1)),
            ),
            operation(
                2,
                Call::SAdd("y".into()),
                (11, 15),
                done(Observed::Integer(1)),
            ),
            operation(
                3,
                Call::SMembers,
                (20, 21),
                done(Observed::Elements(vec!["x".into()])),
            ),
        ];
        assert_eq!(linearizable(&set).len(), 1, "a lost member is caught");
        let list = vec![
            operation(
                1,
                Call::RPush("x".into()),
                (0, 10),
                done(Observed::Integer(1)),
            ),
            operation(
                2,
                Call::RPush("y".into()),
                (2, 12),
                done(Observed::Integer(2)),
            ),
            operation(
                3,
                Call::LRange,
                (20, 21),
                done(Observed::Elements(vec!["x".into(), "y".into()])),
            ),
        ];
        assert_eq!(linearizable(&list), Vec::new());
    }

    #[test]
    fn transfers_follow_their_model_and_conserve() {
        let balances =
            |a: i64, b: i64| done(Observed::Elements(vec![a.to_string(), b.to_string()]));
        let history = vec![
            operation(1, Call::Transfer(5), (0, 10), balances(-5, 5)),
            operation(2, Call::Transfer(3), (20, u64::MAX), Outcome::Unknown),
            operation(3, Call::Audit, (30, 31), balances(-8, 8)),
        ];
        assert_eq!(linearizable(&history), Vec::new());
        assert_eq!(conservation(&history), Vec::new());
        let torn = vec![
            operation(1, Call::Transfer(5), (0, 10), balances(-5, 5)),
            operation(3, Call::Audit, (30, 31), balances(-5, 0)),
        ];
        assert_eq!(linearizable(&torn).len(), 1);
        assert_eq!(conservation(&torn).len(), 1);
    }

    #[test]
    fn an_excess_of_admissions_in_a_window_is_caught() {
        let admit = |time: u64| done(Observed::Elements(vec!["1".into(), time.to_string()]));
        let history: Vec<Operation> = [0u64, 100, 200, 1_000, 1_150]
            .iter()
            .map(|time| operation(1, Call::Limit("m".into()), (0, 1), admit(*time)))
            .collect();
        assert_eq!(rate_limit(&history, 1_000, 3), Vec::new());
        assert_eq!(rate_limit(&history, 1_001, 3).len(), 1);
        assert_eq!(rate_limit(&history, 1_000, 2).len(), 1);
    }

    #[test]
    fn final_state_flags_lost_and_phantom_elements_and_counter_bounds() {
        let history = vec![
            operation(
                1,
                Call::SAdd("x".into()),
                (0, 10),
                done(Observed::Integer(1)),
            ),
            operation(1, Call::SAdd("y".into()), (0, 10), Outcome::Failed),
            Operation {
                key: "c".into(),
                ..operation(1, Call::Incr, (0, 10), done(Observed::Integer(1)))
            },
        ];
        let finals = BTreeMap::from([
            ("k".to_string(), Observed::Elements(vec!["y".into()])),
            ("c".to_string(), Observed::Bulk("3".into())),
        ]);
        let checkers: Vec<&str> = final_state(&history, &finals)
            .iter()
            .map(|violation| violation.checker)
            .collect();
        assert_eq!(
            checkers,
            vec!["counter-bounds", "no-lost-elements", "no-phantom-elements"]
        );
    }
}
