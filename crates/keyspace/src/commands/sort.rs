//! SORT and SORT_RO, as Redis 7.2 runs them.
//!
//! Options are read left to right and refused in that order; the key is looked
//! up only after they all parsed. Elements sort numerically (by the double each
//! one, or the value its BY pattern names, reads as with C's `strtod`; equal
//! scores fall back to comparing the elements' bytes) or, with ALPHA, by bytes.
//! Redis compares with `strcoll` when it does not store; slotraft always
//! compares bytes (Redis's order in the C locale), since the answer must not
//! depend on a process's locale. Where Redis leaves the order of ties open
//! (ALPHA with BY), the sort is stable: ties keep the source order.
//!
//! `BY pattern` and `GET pattern` substitute the element for the first `*` of the
//! pattern and read that string key, or a hash field with `key->field`; `GET #`
//! is the element itself. A BY pattern without `*` (`BY nosort`) skips sorting:
//! a list keeps its order (reversed with DESC), a set its storage order, except
//! with STORE, where a set is sorted by bytes as Redis does so that replicas
//! store the same list. In cluster mode Redis 7.2 refuses BY with a pattern and
//! every GET (later versions accept patterns whose hash tag names the sorted
//! key's slot).

use crate::args;
use crate::command::{flags::*, key_flags::*, CommandSpec, Handler, KeySpec};
use crate::value::Value;
use crate::{errors, Context, Keyspace};
use bytes::Bytes;
use resp::Frame;
use std::cmp::Ordering;

const COMPLEXITY: &str = "O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).";
const BY_GET_NOTES: &str = "For the optional BY/GET keyword. It is marked 'unknown' because the key names derive from the content of the key we sort";
const STORE_NOTES: &str = "For the optional STORE keyword. It is marked 'unknown' because the keyword can appear anywhere in the argument array";

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "sort",
        arity: -2,
        flags: WRITE | DENYOOM,
        key_specs: &[
            KeySpec::single(1, RO | ACCESS),
            KeySpec::unknown(RO | ACCESS, BY_GET_NOTES),
            KeySpec::unknown(OW | UPDATE, STORE_NOTES),
        ],
        categories: &["write", "set", "sortedset", "list", "slow", "dangerous"],
        group: "generic",
        summary:
            "Sorts the elements in a list, a set, or a sorted set, optionally storing the result.",
        since: "1.0.0",
        complexity: COMPLEXITY,
        handler: Handler::Keyspace(sort),
        get_keys: Some(sort_keys),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sort_ro",
        arity: -2,
        flags: READONLY,
        key_specs: &[
            KeySpec::single(1, RO | ACCESS),
            KeySpec::unknown(RO | ACCESS, BY_GET_NOTES),
        ],
        categories: &["read", "set", "sortedset", "list", "slow", "dangerous"],
        group: "generic",
        summary: "Returns the sorted elements of a list, a set, or a sorted set.",
        since: "7.0.0",
        complexity: COMPLEXITY,
        handler: Handler::Keyspace(sort_ro),
        get_keys: Some(sort_ro_keys),
        ..CommandSpec::DEFAULT
    },
];

// ---- Error texts only this family uses ------------------------------------------

const NOT_DOUBLE: &str = "ERR One or more scores can't be converted into double";
const BY_IN_CLUSTER: &str = "ERR BY option of SORT denied in Cluster mode.";
const GET_IN_CLUSTER: &str = "ERR GET option of SORT denied in Cluster mode.";

// ---- Keys -----------------------------------------------------------------------

/// SORT's keys as Redis's `sortGetKeys` finds them: the sorted key, and the
/// argument after the last STORE (options with arguments are skipped, so a
/// pattern or count spelled "store" is not taken for the keyword).
fn sort_keys(arguments: &[Bytes]) -> Vec<(usize, u32)> {
    let mut keys = vec![(1, RO | ACCESS)];
    let mut store = None;
    let mut index = 2;
    while index < arguments.len() {
        let word = &arguments[index];
        if args::is_keyword(word, "limit") {
            index += 2;
        } else if args::is_keyword(word, "get") || args::is_keyword(word, "by") {
            index += 1;
        } else if args::is_keyword(word, "store") && index + 1 < arguments.len() {
            store = Some(index + 1);
        }
        index += 1;
    }
    keys.extend(store.map(|position| (position, OW | UPDATE)));
    keys
}

/// SORT_RO's only key is the sorted one.
fn sort_ro_keys(_: &[Bytes]) -> Vec<(usize, u32)> {
    vec![(1, RO | ACCESS)]
}

// ---- Options --------------------------------------------------------------------

struct Options {
    descending: bool,
    alpha: bool,
    limit_start: i64,
    /// Negative: no limit.
    limit_count: i64,
    by: Option<Bytes>,
    /// BY named a pattern without `*`: keep the source order.
    dont_sort: bool,
    gets: Vec<Bytes>,
    store: Option<Bytes>,
}

fn parse_options(
    arguments: &[Bytes],
    readonly: bool,
    cluster_mode: bool,
) -> Result<Options, Frame> {
    let mut options = Options {
        descending: false,
        alpha: false,
        limit_start: 0,
        limit_count: -1,
        by: None,
        dont_sort: false,
        gets: Vec::new(),
        store: None,
    };
    let mut index = 2;
    while index < arguments.len() {
        let word = &arguments[index];
        let left = arguments.len() - index - 1;
        if args::is_keyword(word, "asc") {
            options.descending = false;
        } else if args::is_keyword(word, "desc") {
            options.descending = true;
        } else if args::is_keyword(word, "alpha") {
            options.alpha = true;
        } else if args::is_keyword(word, "limit") && left >= 2 {
            options.limit_start = args::parse_i64(&arguments[index + 1])?;
            options.limit_count = args::parse_i64(&arguments[index + 2])?;
            index += 2;
        } else if !readonly && args::is_keyword(word, "store") && left >= 1 {
            options.store = Some(arguments[index + 1].clone());
            index += 1;
        } else if args::is_keyword(word, "by") && left >= 1 {
            let pattern = &arguments[index + 1];
            // Redis looks at the pattern as a C string: up to its first NUL.
            // Once a BY without `*` was seen, a later BY does not sort again.
            if c_string(pattern).contains(&b'*') {
                if cluster_mode {
                    return Err(Frame::error(BY_IN_CLUSTER));
                }
            } else {
                options.dont_sort = true;
            }
            options.by = Some(pattern.clone());
            index += 1;
        } else if args::is_keyword(word, "get") && left >= 1 {
            if cluster_mode {
                return Err(Frame::error(GET_IN_CLUSTER));
            }
            options.gets.push(arguments[index + 1].clone());
            index += 1;
        } else {
            return Err(Frame::error(errors::SYNTAX));
        }
        index += 1;
    }
    Ok(options)
}

/// The bytes before the first NUL.
fn c_string(bytes: &[u8]) -> &[u8] {
    let end = bytes
        .iter()
        .position(|&byte| byte == 0)
        .unwrap_or(bytes.len());
    &bytes[..end]
}

// ---- Patterns -------------------------------------------------------------------

/// What a BY or GET pattern names for one element.
enum Target<'a> {
    /// `#`: the element itself.
    Element,
    /// A string key, or a field of a hash key.
    Key {
        key: Vec<u8>,
        field: Option<&'a [u8]>,
    },
    /// A pattern without `*` names nothing.
    Nothing,
}

/// Redis's `lookupKeyByPattern` substitution: the element replaces the first `*`;
/// a `->` after it (followed by at least one byte) splits off a hash field.
fn target<'a>(pattern: &'a [u8], element: &[u8]) -> Target<'a> {
    let text = c_string(pattern);
    if text == b"#" {
        return Target::Element;
    }
    let Some(star) = text.iter().position(|&byte| byte == b'*') else {
        return Target::Nothing;
    };
    let arrow = text[star + 1..]
        .windows(2)
        .position(|pair| pair == b"->")
        .map(|offset| star + 1 + offset)
        .filter(|&arrow| arrow + 2 < text.len());
    let (key_end, field) = match arrow {
        Some(arrow) => (arrow, Some(&pattern[arrow + 2..])),
        None => (pattern.len(), None),
    };
    let mut key = Vec::with_capacity(key_end + element.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(element);
    key.extend_from_slice(&pattern[star + 1..key_end]);
    Target::Key { key, field }
}

/// The value `pattern` names for `element` (read lookups, as Redis's), if any:
/// a string key's value, or a hash field's.
fn lookup_pattern(
    keyspace: &mut Keyspace,
    context: &mut Context,
    pattern: &[u8],
    element: &Bytes,
) -> Option<Bytes> {
    match target(pattern, element) {
        Target::Element => Some(element.clone()),
        Target::Nothing => None,
        Target::Key { key, field } => {
            let entry = keyspace.read(context, &key)?;
            match (&entry.value, field) {
                (Value::String(string), None) => Some(string.to_bytes()),
                (Value::Hash(hash), Some(field)) => hash.get(field).map(Bytes::copy_from_slice),
                _ => None,
            }
        }
    }
}

// ---- Scores ---------------------------------------------------------------------

/// The score Redis's numeric sort reads from `text`: `strtod` must consume all
/// of it up to its first NUL (so the empty string is 0), without overflow or
/// underflow, and not produce NaN.
fn score(text: &[u8]) -> Option<f64> {
    let text = c_string(text);
    if text.is_empty() {
        return Some(0.0);
    }
    let (value, consumed) = strtod(text)?;
    (consumed == text.len()).then_some(value)
}

/// C's `strtod` on `text`: the value and the bytes consumed, or None when it
/// converts nothing or sets ERANGE; NaN is refused as well.
fn strtod(text: &[u8]) -> Option<(f64, usize)> {
    let mut at = 0;
    while at < text.len() && matches!(text[at], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        at += 1;
    }
    let negative = text.get(at) == Some(&b'-');
    if matches!(text.get(at), Some(b'-' | b'+')) {
        at += 1;
    }
    let rest = &text[at..];
    let starts =
        |word: &[u8]| rest.len() >= word.len() && rest[..word.len()].eq_ignore_ascii_case(word);
    if starts(b"nan") {
        return None;
    }
    if starts(b"inf") {
        let length = if starts(b"infinity") { 8 } else { 3 };
        let value = if negative {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        };
        return Some((value, at + length));
    }
    let (magnitude, length) = if (starts(b"0x") || starts(b"0X"))
        && rest
            .get(2)
            .is_some_and(|&byte| byte.is_ascii_hexdigit() || byte == b'.')
    {
        match hex_float(&rest[2..]) {
            Some((value, length)) => (value, length + 2),
            // "0x" with no digits converts the "0" alone.
            None => (0.0, 1),
        }
    } else {
        decimal_float(rest)?
    };
    if magnitude.is_infinite() {
        return None;
    }
    let value = if negative { -magnitude } else { magnitude };
    Some((value, at + length))
}

/// A decimal float at the start of `text` (digits, optional fraction, optional
/// exponent); None when there is no digit. ERANGE (overflow, or an underflow to
/// zero or a subnormal) is None too.
fn decimal_float(text: &[u8]) -> Option<(f64, usize)> {
    let mut at = 0;
    let mut digits = 0;
    let mut nonzero = false;
    while at < text.len() && text[at].is_ascii_digit() {
        nonzero |= text[at] != b'0';
        at += 1;
        digits += 1;
    }
    if text.get(at) == Some(&b'.') {
        at += 1;
        while at < text.len() && text[at].is_ascii_digit() {
            nonzero |= text[at] != b'0';
            at += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    if matches!(text.get(at), Some(b'e' | b'E')) {
        let mut exponent_at = at + 1;
        if matches!(text.get(exponent_at), Some(b'-' | b'+')) {
            exponent_at += 1;
        }
        if text.get(exponent_at).is_some_and(u8::is_ascii_digit) {
            at = exponent_at;
            while at < text.len() && text[at].is_ascii_digit() {
                at += 1;
            }
        }
    }
    let literal = std::str::from_utf8(&text[..at]).ok()?;
    let value: f64 = literal.parse().ok()?;
    if value.is_infinite() || (nonzero && value.abs() < f64::MIN_POSITIVE) {
        return None;
    }
    Some((value, at))
}

/// A hexadecimal float after its `0x`: hex digits with an optional point and an
/// optional binary exponent (`p`). None without a digit.
fn hex_float(text: &[u8]) -> Option<(f64, usize)> {
    let mut at = 0;
    let mut mantissa: u128 = 0;
    let mut exponent: i64 = 0;
    let mut digits = 0;
    let mut sticky = false;
    let mut fraction = false;
    loop {
        match text.get(at) {
            Some(b'.') if !fraction => fraction = true,
            Some(&byte) if byte.is_ascii_hexdigit() => {
                let digit = (byte as char).to_digit(16).expect("hex digit") as u128;
                digits += 1;
                if mantissa >> 120 == 0 {
                    mantissa = mantissa << 4 | digit;
                    if fraction {
                        exponent -= 4;
                    }
                } else {
                    sticky |= digit != 0;
                    if !fraction {
                        exponent += 4;
                    }
                }
            }
            _ => break,
        }
        at += 1;
    }
    if digits == 0 {
        return None;
    }
    if matches!(text.get(at), Some(b'p' | b'P')) {
        let mut exponent_at = at + 1;
        let negative = text.get(exponent_at) == Some(&b'-');
        if matches!(text.get(exponent_at), Some(b'-' | b'+')) {
            exponent_at += 1;
        }
        if text.get(exponent_at).is_some_and(u8::is_ascii_digit) {
            let mut written: i64 = 0;
            at = exponent_at;
            while at < text.len() && text[at].is_ascii_digit() {
                written = (written * 10 + (text[at] - b'0') as i64).min(1 << 20);
                at += 1;
            }
            exponent += if negative { -written } else { written };
        }
    }
    if sticky {
        mantissa |= 1;
    }
    let value = mantissa as f64 * 2f64.powi(exponent.clamp(-2000, 2000) as i32);
    if value.is_infinite() || (mantissa != 0 && value.abs() < f64::MIN_POSITIVE) {
        return None;
    }
    Some((value, at))
}

// ---- SORT -----------------------------------------------------------------------

fn sort(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    sort_generic(keyspace, context, arguments, false)
}

fn sort_ro(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    sort_generic(keyspace, context, arguments, true)
}

/// One element to sort with what it sorts by.
struct Item {
    element: Bytes,
    score: f64,
    /// ALPHA with BY: the value BY named (None when there was none).
    compare_by: Option<Bytes>,
}

fn sort_generic(
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
    readonly: bool,
) -> Frame {
    let mut options = match parse_options(arguments, readonly, context.cluster_mode) {
        Ok(options) => options,
        Err(error) => return error,
    };

    // The source's elements and the window LIMIT selects.
    let (elements, start, end) = {
        let value = keyspace
            .read(context, &arguments[1])
            .map(|entry| &entry.value);
        let length = match value {
            None => 0,
            Some(Value::List(list)) => list.len(),
            Some(Value::Set(set)) => set.len(),
            // Sorted sets: in rank order for BY nosort (reversed with DESC,
            // LIMIT applied as for lists), else every member, to be sorted.
            Some(Value::ZSet(zset)) => zset.len(),
            Some(_) => return Frame::error(errors::WRONGTYPE),
        } as i64;
        let is_set = matches!(value, Some(Value::Set(_)));
        if options.dont_sort && is_set && options.store.is_some() {
            // A set has no order of its own: sort it by bytes so the stored
            // list is the same everywhere.
            options.dont_sort = false;
            options.alpha = true;
            options.by = None;
        }
        let mut start = options.limit_start.clamp(0, length);
        let count = options.limit_count.clamp(-1, length);
        let mut end = if count < 0 { length } else { start + count - 1 };
        if start >= length {
            start = length - 1;
            end = length - 2;
        }
        if end >= length {
            end = length - 1;
        }
        let elements: Vec<Bytes> = match value {
            Some(Value::List(list)) if options.dont_sort => {
                // Only the window, in list order (from the tail with DESC).
                if end >= start {
                    let taken = (end - start + 1) as usize;
                    let window: Vec<Bytes> = if options.descending {
                        list.iter()
                            .rev()
                            .skip(start as usize)
                            .take(taken)
                            .map(Bytes::copy_from_slice)
                            .collect()
                    } else {
                        list.iter()
                            .skip(start as usize)
                            .take(taken)
                            .map(Bytes::copy_from_slice)
                            .collect()
                    };
                    end -= start;
                    start = 0;
                    window
                } else {
                    Vec::new()
                }
            }
            Some(Value::ZSet(zset)) if options.dont_sort => {
                if end >= start {
                    let taken = (end - start + 1) as usize;
                    // DESC walks down from the start-th highest rank.
                    let from = if options.descending {
                        zset.len() - 1 - start as usize
                    } else {
                        start as usize
                    };
                    let window: Vec<Bytes> = zset
                        .iter_from(from, options.descending)
                        .take(taken)
                        .map(|entry| Bytes::copy_from_slice(entry.member()))
                        .collect();
                    end -= start;
                    start = 0;
                    window
                } else {
                    Vec::new()
                }
            }
            Some(Value::ZSet(zset)) => zset
                .iter()
                .map(|entry| Bytes::copy_from_slice(entry.member()))
                .collect(),
            Some(Value::List(list)) => list.iter().map(Bytes::copy_from_slice).collect(),
            Some(Value::Set(set)) => set
                .members()
                .map(|member| Bytes::copy_from_slice(&member))
                .collect(),
            _ => Vec::new(),
        };
        (elements, start, end)
    };

    let mut items: Vec<Item> = elements
        .into_iter()
        .map(|element| Item {
            element,
            score: 0.0,
            compare_by: None,
        })
        .collect();
    let mut not_a_number = false;
    if !options.dont_sort {
        for item in &mut items {
            let by_value = match &options.by {
                Some(pattern) => match lookup_pattern(keyspace, context, pattern, &item.element) {
                    Some(value) => value,
                    None => continue,
                },
                None => item.element.clone(),
            };
            if options.alpha {
                if options.by.is_some() {
                    item.compare_by = Some(by_value);
                }
            } else {
                match score(&by_value) {
                    Some(score) => item.score = score,
                    None => not_a_number = true,
                }
            }
        }
        // With an unreadable score the command fails; skip the sort.
        if !not_a_number {
            let by_pattern = options.by.is_some();
            items.sort_by(|first, second| {
                let order = compare(first, second, options.alpha, by_pattern);
                if options.descending {
                    order.reverse()
                } else {
                    order
                }
            });
        }
    }
    if not_a_number {
        return Frame::error(NOT_DOUBLE);
    }

    let window: &[Item] = if end >= start {
        &items[start as usize..=end as usize]
    } else {
        &[]
    };
    let mut output: Vec<Option<Bytes>> =
        Vec::with_capacity(window.len() * options.gets.len().max(1));
    for item in window {
        if options.gets.is_empty() {
            output.push(Some(item.element.clone()));
        }
        for pattern in &options.gets {
            output.push(lookup_pattern(keyspace, context, pattern, &item.element));
        }
    }

    let Some(destination) = options.store else {
        return Frame::Array(
            output
                .into_iter()
                .map(|value| value.map_or(Frame::Null, Frame::Bulk))
                .collect(),
        );
    };
    let stored = output.len();
    if stored > 0 {
        let list = Value::list(output.iter().map(|value| value.as_deref().unwrap_or(b"")));
        keyspace.set(context, &destination, list, None);
        // Redis counts one change per stored element.
        keyspace.stats.dirty += stored as u64 - 1;
        keyspace.signal_ready(context.db, &destination);
    } else {
        keyspace.delete(context, &destination);
    }
    Frame::Integer(stored as i64)
}

/// Redis's `sortCompare`, before DESC reverses it.
fn compare(first: &Item, second: &Item, alpha: bool, by_pattern: bool) -> Ordering {
    if !alpha {
        // Scores are never NaN here; equal scores order by the elements.
        return match first.score.partial_cmp(&second.score) {
            Some(Ordering::Equal) | None => first.element.cmp(&second.element),
            Some(order) => order,
        };
    }
    if by_pattern {
        return match (&first.compare_by, &second.compare_by) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(first), Some(second)) => first.cmp(second),
        };
    }
    first.element.cmp(&second.element)
}

#[cfg(test)]
mod tests {
    //! Expected replies were taken from Redis 7 running the same commands.

    use super::*;
    use crate::testing::{Harness, START_MS};
    use resp::Protocol;

    fn bulk(text: &str) -> Frame {
        Frame::Bulk(Bytes::copy_from_slice(text.as_bytes()))
    }

    fn int(value: i64) -> Frame {
        Frame::Integer(value)
    }

    fn error(text: &str) -> Frame {
        Frame::Error(Bytes::copy_from_slice(text.as_bytes()))
    }

    fn array(items: &[&str]) -> Frame {
        Frame::Array(items.iter().map(|item| bulk(item)).collect())
    }

    /// An array of bulk strings and nils.
    fn values(items: &[Option<&str>]) -> Frame {
        Frame::Array(
            items
                .iter()
                .map(|item| item.map_or(Frame::Null, bulk))
                .collect(),
        )
    }

    fn wire(frame: &Frame, protocol: Protocol) -> String {
        let mut out = bytes::BytesMut::new();
        resp::encode(frame, protocol, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    const NOT_DOUBLE: &str = "ERR One or more scores can't be converted into double";

    fn with_list() -> Harness {
        let mut h = Harness::new();
        h.run(&["RPUSH", "l", "3", "1", "2", "10", "-5", "1.5"]);
        h
    }

    #[test]
    fn sorted_sets_sort_by_member_or_keep_rank_order_with_nosort() {
        let mut h = Harness::new();
        h.run(&["ZADD", "z", "1", "30", "2", "4", "3", "100", "4", "2"]);
        assert_eq!(
            h.run(&["SORT", "z"]),
            values(&[Some("2"), Some("4"), Some("30"), Some("100")])
        );
        assert_eq!(
            h.run(&["SORT", "z", "BY", "nosort"]),
            values(&[Some("30"), Some("4"), Some("100"), Some("2")])
        );
        assert_eq!(
            h.run(&["SORT", "z", "BY", "nosort", "DESC", "LIMIT", "1", "2"]),
            values(&[Some("100"), Some("4")])
        );
        assert_eq!(
            h.run(&["SORT", "z", "BY", "nosort", "LIMIT", "3", "5"]),
            values(&[Some("2")])
        );
    }

    #[test]
    fn table_rows_and_keys_match_redis() {
        let spec = |name: &str| crate::commands::lookup(name.as_bytes()).unwrap();
        let sort = spec("sort");
        assert_eq!((sort.arity, sort.is_write()), (-2, true));
        assert!(sort.has(DENYOOM));
        assert!(sort.has_movable_keys());
        assert_eq!(sort.legacy_key_range(), (1, 1, 1));
        assert_eq!(sort.key_specs.len(), 3);
        let sort_ro = spec("sort_ro");
        assert_eq!((sort_ro.arity, sort_ro.is_write()), (-2, false));
        assert!(sort_ro.has_movable_keys());
        assert_eq!(sort_ro.legacy_key_range(), (1, 1, 1));
        assert_eq!(sort_ro.since, "7.0.0");

        let mut h = Harness::new();
        assert_eq!(
            h.run(&[
                "COMMAND", "GETKEYS", "SORT", "k", "LIMIT", "0", "1", "STORE", "d", "BY", "w_*",
                "STORE", "e", "GET", "x"
            ]),
            array(&["k", "e"])
        );
        // A pattern spelled "store" is skipped as BY's argument.
        assert_eq!(
            h.run(&["COMMAND", "GETKEYS", "SORT", "k", "BY", "store", "x"]),
            array(&["k"])
        );
        assert_eq!(
            h.run(&["COMMAND", "GETKEYS", "SORT_RO", "k", "STORE", "d"]),
            array(&["k"])
        );
        let flags = |names: &[&str]| {
            Frame::Set(
                names
                    .iter()
                    .map(|name| Frame::Simple(Bytes::copy_from_slice(name.as_bytes())))
                    .collect(),
            )
        };
        assert_eq!(
            h.run(&["COMMAND", "GETKEYSANDFLAGS", "SORT", "k", "STORE", "d"]),
            Frame::Array(vec![
                Frame::Array(vec![bulk("k"), flags(&["RO", "access"])]),
                Frame::Array(vec![bulk("d"), flags(&["OW", "update"])]),
            ])
        );
        let Frame::Array(info) = h.run(&["COMMAND", "INFO", "sort"]) else {
            panic!("COMMAND INFO answers an array");
        };
        let Frame::Array(entry) = &info[0] else {
            panic!("one entry");
        };
        let Frame::Array(key_specs) = &entry[8] else {
            panic!("key specs");
        };
        let Frame::Map(store_spec) = &key_specs[2] else {
            panic!("a map per spec");
        };
        assert_eq!(store_spec[0], (bulk("notes"), bulk(STORE_NOTES)));
        assert_eq!(
            store_spec[2].1,
            Frame::Map(vec![
                (bulk("type"), bulk("unknown")),
                (bulk("spec"), Frame::Map(vec![])),
            ])
        );
    }

    #[test]
    fn numeric_and_alpha_orders_with_limits() {
        let mut h = with_list();
        let cases: &[(&[&str], &[&str])] = &[
            (&["SORT", "l"], &["-5", "1", "1.5", "2", "3", "10"]),
            (&["SORT", "l", "DESC"], &["10", "3", "2", "1.5", "1", "-5"]),
            (&["SORT", "l", "ALPHA"], &["-5", "1", "1.5", "10", "2", "3"]),
            (
                &["SORT", "l", "ALPHA", "DESC"],
                &["3", "2", "10", "1.5", "1", "-5"],
            ),
            (
                &["SORT", "l", "DESC", "ASC"],
                &["-5", "1", "1.5", "2", "3", "10"],
            ),
            (&["SORT", "l", "LIMIT", "1", "2"], &["1", "1.5"]),
            (&["SORT", "l", "LIMIT", "-5", "3"], &["-5", "1", "1.5"]),
            (&["SORT", "l", "LIMIT", "4", "100"], &["3", "10"]),
            (&["SORT", "l", "LIMIT", "10", "2"], &[]),
            (&["SORT", "l", "LIMIT", "0", "0"], &[]),
            (
                &["SORT", "l", "LIMIT", "0", "-1"],
                &["-5", "1", "1.5", "2", "3", "10"],
            ),
            (
                &["SORT", "l", "BY", "nosort"],
                &["3", "1", "2", "10", "-5", "1.5"],
            ),
            (
                &["SORT", "l", "BY", "nosort", "DESC"],
                &["1.5", "-5", "10", "2", "1", "3"],
            ),
            (
                &["SORT", "l", "BY", "nosort", "LIMIT", "1", "2"],
                &["1", "2"],
            ),
            (
                &["SORT", "l", "BY", "nosort", "DESC", "LIMIT", "1", "2"],
                &["-5", "10"],
            ),
            (&["SORT", "l", "BY", "nosort", "LIMIT", "9", "2"], &[]),
            (&["SORT_RO", "l", "DESC", "LIMIT", "0", "2"], &["10", "3"]),
            (
                &["SORT", "l", "BY", "nosort", "BY", "w_*"],
                &["3", "1", "2", "10", "-5", "1.5"],
            ),
            (&["SORT", "missing"], &[]),
        ];
        for (words, expected) in cases {
            assert_eq!(h.run(words), array(expected), "{words:?}");
        }
        // Scores read as strtod reads them; equal scores order by bytes.
        h.run(&[
            "RPUSH", "sp", " 1", "", "0x10", "1e3", "inf", "-inf", "2.5", "0x1p-2",
        ]);
        assert_eq!(
            h.run(&["SORT", "sp"]),
            array(&["-inf", "", "0x1p-2", " 1", "2.5", "0x10", "1e3", "inf"])
        );
        h.run(&["RPUSH", "z", "", "-0", "0", "0.0"]);
        assert_eq!(h.run(&["SORT", "z"]), array(&["", "-0", "0", "0.0"]));
        assert_eq!(
            h.run(&["SORT", "z", "DESC"]),
            array(&["0.0", "0", "-0", ""])
        );
        for bad in ["1 ", "1e-310", "1e400", "0x", "1e", "nan", "-", " ", "1x"] {
            h.run(&["DEL", "one"]);
            h.run(&["RPUSH", "one", bad]);
            assert_eq!(h.run(&["SORT", "one"]), error(NOT_DOUBLE), "{bad:?}");
            assert_eq!(h.run(&["SORT", "one", "ALPHA"]), array(&[bad]));
        }
        for good in [
            "+3",
            ".5",
            "5.",
            "infinity",
            "-Infinity",
            "1e308",
            "0X1.8P1",
        ] {
            h.run(&["DEL", "one"]);
            h.run(&["RPUSH", "one", good]);
            assert_eq!(h.run(&["SORT", "one"]), array(&[good]), "{good:?}");
        }
        assert_eq!(score(b"0x1.8p1"), Some(3.0));
        assert_eq!(score(b"12\0junk"), Some(12.0));
        assert_eq!(score(b" -2e2"), Some(-200.0));
    }

    #[test]
    fn by_and_get_patterns() {
        let mut h = with_list();
        h.run(&[
            "MSET", "w_3", "30", "w_1", "10", "w_2", "20", "w_10", "-1", "w_-5", "5",
        ]);
        for (key, field) in [("h_1", "b"), ("h_2", "a"), ("h_3", "c")] {
            h.run(&["HSET", key, "f", field]);
        }
        assert_eq!(
            h.run(&["SORT", "l", "BY", "w_*"]),
            array(&["10", "1.5", "-5", "1", "2", "3"])
        );
        assert_eq!(
            h.run(&["SORT", "l", "BY", "w_*", "DESC", "LIMIT", "0", "3"]),
            array(&["3", "2", "1"])
        );
        assert_eq!(
            h.run(&["SORT", "l", "BY", "w_*", "GET", "#", "GET", "w_*"]),
            values(&[
                Some("10"),
                Some("-1"),
                Some("1.5"),
                None,
                Some("-5"),
                Some("5"),
                Some("1"),
                Some("10"),
                Some("2"),
                Some("20"),
                Some("3"),
                Some("30"),
            ])
        );
        assert_eq!(
            h.run(&["SORT", "l", "BY", "w_*", "ALPHA"]),
            array(&["1.5", "10", "1", "2", "3", "-5"])
        );
        // Elements without a BY value come first with ALPHA, in source order.
        assert_eq!(
            h.run(&["SORT", "l", "BY", "h_*->f", "ALPHA", "GET", "h_*->f", "GET", "#"]),
            values(&[
                None,
                Some("10"),
                None,
                Some("-5"),
                None,
                Some("1.5"),
                Some("a"),
                Some("2"),
                Some("b"),
                Some("1"),
                Some("c"),
                Some("3"),
            ])
        );
        assert_eq!(
            h.run(&["SORT", "l", "BY", "h_*->f", "GET", "h_*->f"]),
            error(NOT_DOUBLE)
        );
        assert_eq!(
            h.run(&["SORT", "l", "GET", "nosuch", "GET", "h_*->", "LIMIT", "0", "1"]),
            values(&[None, None])
        );
        // A field on a string key, or an empty field name, names nothing.
        assert_eq!(
            h.run(&["SORT", "l", "BY", "w_*->f"]),
            array(&["-5", "1", "1.5", "10", "2", "3"])
        );
        assert_eq!(
            h.run(&["SORT", "l", "BY", "h_*->"]),
            array(&["-5", "1", "1.5", "10", "2", "3"])
        );
        h.run(&["RPUSH", "bad", "1", "x", "2"]);
        assert_eq!(h.run(&["SORT", "bad"]), error(NOT_DOUBLE));
        assert_eq!(h.run(&["SORT", "bad", "ALPHA"]), array(&["1", "2", "x"]));
        assert_eq!(
            h.run(&["SORT", "bad", "BY", "nosort"]),
            array(&["1", "x", "2"])
        );
        assert_eq!(
            h.run(&["SORT", "bad", "BY", "w_*"]),
            array(&["x", "1", "2"])
        );
        h.run(&["RPUSH", "same", "1", "01", "1.0", "a"]);
        assert_eq!(
            h.run(&["SORT", "same", "BY", "nokey"]),
            array(&["1", "01", "1.0", "a"])
        );
        // Only the first `*` is replaced.
        h.set("k_1_*", "one");
        assert_eq!(
            h.run(&["SORT", "l", "GET", "k_*_*", "LIMIT", "1", "1"]),
            values(&[Some("one")])
        );
    }

    #[test]
    fn sets_and_store() {
        let mut h = with_list();
        h.run(&[
            "MSET", "w_3", "30", "w_1", "10", "w_2", "20", "w_10", "-1", "w_-5", "5",
        ]);
        assert_eq!(h.run(&["SORT", "l", "STORE", "dst"]), int(6));
        assert_eq!(
            h.run(&["LRANGE", "dst", "0", "-1"]),
            array(&["-5", "1", "1.5", "2", "3", "10"])
        );
        assert_eq!(h.encoding("dst"), Some("listpack"));
        assert_eq!(
            h.run(&["SORT", "l", "LIMIT", "0", "0", "STORE", "dst"]),
            int(0)
        );
        assert_eq!(h.run(&["EXISTS", "dst"]), int(0));
        // Missing GET values are stored as empty strings.
        assert_eq!(h.run(&["SORT", "l", "GET", "w_*", "STORE", "dst"]), int(6));
        assert_eq!(
            h.run(&["LRANGE", "dst", "0", "-1"]),
            array(&["5", "10", "", "20", "30", "-1"])
        );
        // STORE replaces any type and drops the TTL.
        h.set_with_expiry("target", "string", START_MS + 100_000);
        assert_eq!(h.run(&["SORT", "l", "STORE", "target"]), int(6));
        assert_eq!(h.run(&["TTL", "target"]), int(-1));
        assert_eq!(h.run(&["TYPE", "target"]), Frame::simple("list"));
        assert_eq!(h.run(&["SORT", "missing", "STORE", "target"]), int(0));
        assert_eq!(h.run(&["EXISTS", "target"]), int(0));
        // Sorting a list into itself.
        assert_eq!(h.run(&["SORT", "l", "DESC", "STORE", "l"]), int(6));
        assert_eq!(
            h.run(&["LRANGE", "l", "0", "-1"]),
            array(&["10", "3", "2", "1.5", "1", "-5"])
        );

        h.run(&["SADD", "s", "c", "a", "b", "10", "2"]);
        assert_eq!(
            h.run(&["SORT", "s", "ALPHA"]),
            array(&["10", "2", "a", "b", "c"])
        );
        assert_eq!(h.run(&["SORT", "s"]), error(NOT_DOUBLE));
        // BY nosort answers a set in its storage order, but stores it sorted.
        let Frame::Set(members) = h.run(&["SMEMBERS", "s"]) else {
            panic!("SMEMBERS answers a set");
        };
        assert_eq!(h.run(&["SORT", "s", "BY", "nosort"]), Frame::Array(members));
        assert_eq!(
            h.run(&["SORT", "s", "BY", "nosort", "STORE", "dst2"]),
            int(5)
        );
        assert_eq!(
            h.run(&["LRANGE", "dst2", "0", "-1"]),
            array(&["10", "2", "a", "b", "c"])
        );
        h.run(&["SADD", "n", "30", "-2", "7"]);
        assert_eq!(h.run(&["SORT", "n", "DESC"]), array(&["30", "7", "-2"]));
        assert_eq!(
            h.run(&["SORT", "n", "LIMIT", "1", "5", "GET", "#"]),
            array(&["7", "30"])
        );
    }

    #[test]
    fn errors_in_redis_order() {
        let mut h = with_list();
        h.set("str", "v");
        const SYNTAX: &str = "ERR syntax error";
        const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
        let cases: &[(&[&str], &str)] = &[
            (&["SORT", "str"], WRONGTYPE),
            (&["SORT", "l", "LIMIT", "1"], SYNTAX),
            (
                &["SORT", "l", "LIMIT", "a", "1"],
                "ERR value is not an integer or out of range",
            ),
            (
                &["SORT", "l", "LIMIT", "1", "b"],
                "ERR value is not an integer or out of range",
            ),
            (&["SORT", "l", "FOO"], SYNTAX),
            (&["SORT", "l", "STORE"], SYNTAX),
            (&["SORT", "l", "BY"], SYNTAX),
            (&["SORT", "l", "GET"], SYNTAX),
            (&["SORT_RO", "l", "STORE", "x"], SYNTAX),
            // Options are checked before the key.
            (&["SORT", "str", "FOO"], SYNTAX),
            (
                &["SORT"],
                "ERR wrong number of arguments for 'sort' command",
            ),
            (
                &["SORT_RO"],
                "ERR wrong number of arguments for 'sort_ro' command",
            ),
        ];
        for (words, expected) in cases {
            assert_eq!(h.run(words), error(expected), "{words:?}");
        }
        // Redis 7.2 in cluster mode: BY with a pattern and any GET are refused.
        h.context.cluster_mode = true;
        assert_eq!(
            h.run(&["SORT", "l", "BY", "{l}w_*"]),
            error("ERR BY option of SORT denied in Cluster mode.")
        );
        assert_eq!(
            h.run(&["SORT_RO", "l", "GET", "#"]),
            error("ERR GET option of SORT denied in Cluster mode.")
        );
        assert_eq!(h.run(&["SORT", "l", "FOO", "GET", "#"]), error(SYNTAX));
        assert_eq!(
            h.run(&["SORT", "l", "BY", "nosort", "LIMIT", "0", "2"]),
            array(&["3", "1"])
        );
    }

    #[test]
    fn reply_shapes_and_replicated_reads() {
        let mut h = with_list();
        let reply = h.run(&["SORT", "l", "GET", "nosuch", "LIMIT", "0", "1"]);
        assert_eq!(wire(&reply, Protocol::Resp2), "*1\r\n$-1\r\n");
        assert_eq!(wire(&reply, Protocol::Resp3), "*1\r\n_\r\n");
        let stored = h.run(&["SORT", "l", "STORE", "d"]);
        assert_eq!(wire(&stored, Protocol::Resp3), ":6\r\n");
        // SORT_RO on a replica reads expired keys as absent and leaves them.
        h.set_value("gone", Value::list(["2", "1"]), Some(START_MS + 5));
        h.set_with_expiry("w_3", "1", START_MS + 5);
        h.advance(10);
        h.context.lazy_expire = false;
        assert_eq!(h.run(&["SORT_RO", "gone"]), array(&[]));
        assert_eq!(
            h.run(&["SORT_RO", "l", "BY", "w_*", "LIMIT", "0", "1"]),
            array(&["-5"])
        );
        assert_eq!(h.keyspace.db_ref(0).len(), 4);
    }
}
