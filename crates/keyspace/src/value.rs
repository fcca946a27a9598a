//! Stored values. Strings keep Redis's three encodings so OBJECT ENCODING answers as
//! Redis does and INCR on an integer string never reparses it. Lists are a deque
//! of elements (short ones stored inline) that also keeps the size Redis's
//! listpack of the same elements would have, so OBJECT ENCODING can answer
//! `listpack` or `quicklist` exactly when Redis would. Hashes and sets keep
//! Redis's encodings too (`listpack`/`hashtable`; `intset`/`listpack`/
//! `hashtable`), converting when Redis would.

use bytes::Bytes;

pub use crate::hash::HashValue;
pub use crate::list::{End, ListElement, ListValue};
pub use crate::set::SetValue;
pub use crate::stream::StreamValue;
pub use crate::zset::ZSetValue;

/// Longest string Redis stores as `embstr` (created whole, never modified).
pub const EMBSTR_MAX_BYTES: usize = 44;

/// Strings up to this long are stored inside the value itself, without a heap
/// allocation of their own (they report `embstr`, as Redis's short strings do).
pub const INLINE_STRING_BYTES: usize = 22;

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    String(StringValue),
    List(ListValue),
    Hash(HashValue),
    Set(SetValue),
    ZSet(ZSetValue),
    /// Boxed: a stream's counters and groups make it the largest value.
    Stream(Box<StreamValue>),
}

impl Value {
    /// The name TYPE answers with.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::String(_) => "string",
            Value::List(_) => "list",
            Value::Hash(_) => "hash",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
            Value::Stream(_) => "stream",
        }
    }

    /// The name OBJECT ENCODING answers with.
    pub fn encoding_name(&self) -> &'static str {
        match self {
            Value::String(string) => string.encoding_name(),
            Value::List(list) => list.encoding_name(),
            Value::Hash(hash) => hash.encoding_name(),
            Value::Set(set) => set.encoding_name(),
            Value::ZSet(zset) => zset.encoding_name(),
            Value::Stream(_) => "stream",
        }
    }

    pub fn string(data: impl AsRef<[u8]>) -> Value {
        Value::String(StringValue::from_bytes(data.as_ref()))
    }

    /// A list of `elements`, head first.
    pub fn list<T: AsRef<[u8]>>(elements: impl IntoIterator<Item = T>) -> Value {
        let elements: Vec<T> = elements.into_iter().collect();
        Value::List(ListValue::from_elements(
            elements.iter().map(|element| element.as_ref()),
        ))
    }

    pub fn is_list(&self) -> bool {
        matches!(self, Value::List(_))
    }

    /// A hash of `(field, value)` pairs, encoded as a load would encode it.
    pub fn hash<F: AsRef<[u8]>, V: AsRef<[u8]>>(pairs: impl IntoIterator<Item = (F, V)>) -> Value {
        let pairs: Vec<(F, V)> = pairs.into_iter().collect();
        Value::Hash(HashValue::from_pairs(
            pairs
                .iter()
                .map(|(field, value)| (field.as_ref(), value.as_ref())),
        ))
    }

    /// A set of `members` (duplicates count once), encoded as a load would
    /// encode it.
    pub fn set<T: AsRef<[u8]>>(members: impl IntoIterator<Item = T>) -> Value {
        let mut unique: Vec<Vec<u8>> = Vec::new();
        for member in members {
            if !unique.iter().any(|seen| seen == member.as_ref()) {
                unique.push(member.as_ref().to_vec());
            }
        }
        Value::Set(SetValue::load(unique).expect("members are unique"))
    }

    /// A sorted set of `(score, member)` pairs (scores not NaN, members unique).
    pub fn zset<T: AsRef<[u8]>>(entries: impl IntoIterator<Item = (f64, T)>) -> Value {
        let entries = entries
            .into_iter()
            .map(|(score, member)| crate::zset::Entry::new(score, member.as_ref()))
            .collect();
        Value::ZSet(ZSetValue::from_entries(entries).unwrap_or_default())
    }

    pub fn is_zset(&self) -> bool {
        matches!(self, Value::ZSet(_))
    }

    /// Whether storing this value under a key may serve clients blocked on it
    /// (lists, sorted sets and streams; see [`crate::BlockOn`]).
    pub fn can_serve_blocked(&self) -> bool {
        matches!(self, Value::List(_) | Value::ZSet(_) | Value::Stream(_))
    }
}

/// A string value in one of Redis's encodings.
#[derive(Debug, Clone, PartialEq)]
pub enum StringValue {
    /// A canonical decimal integer (`int`).
    Int(i64),
    /// A short string held inline (`embstr`); bytes past `length` are zero.
    Inline {
        length: u8,
        data: [u8; INLINE_STRING_BYTES],
    },
    /// Bytes; `raw` once modified in place or when longer than `embstr` allows.
    Bytes { data: Vec<u8>, raw: bool },
}

impl StringValue {
    /// Stores `data` the way SET does: as an integer when it is a canonical decimal
    /// of at most 20 bytes, else as `embstr`/`raw` by length.
    pub fn from_bytes(data: &[u8]) -> StringValue {
        if let Some(integer) = canonical_i64(data) {
            return StringValue::Int(integer);
        }
        StringValue::embedded(data)
    }

    /// Stores `data` as a string object without trying the integer encoding:
    /// inline when short, else `embstr`/`raw` by length.
    pub fn embedded(data: &[u8]) -> StringValue {
        if data.len() <= INLINE_STRING_BYTES {
            let mut inline = [0u8; INLINE_STRING_BYTES];
            inline[..data.len()].copy_from_slice(data);
            return StringValue::Inline {
                length: data.len() as u8,
                data: inline,
            };
        }
        StringValue::Bytes {
            data: data.to_vec(),
            raw: data.len() > EMBSTR_MAX_BYTES,
        }
    }

    /// Bytes that will be modified in place (APPEND, SETRANGE): always `raw`.
    pub fn raw(data: Vec<u8>) -> StringValue {
        StringValue::Bytes { data, raw: true }
    }

    pub fn encoding_name(&self) -> &'static str {
        match self {
            StringValue::Int(_) => "int",
            StringValue::Inline { .. } | StringValue::Bytes { raw: false, .. } => "embstr",
            StringValue::Bytes { raw: true, .. } => "raw",
        }
    }

    /// Length in bytes of the string form.
    pub fn len(&self) -> usize {
        match self {
            StringValue::Int(integer) => decimal_length(*integer),
            StringValue::Inline { length, .. } => *length as usize,
            StringValue::Bytes { data, .. } => data.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The string form as reply bytes.
    pub fn to_bytes(&self) -> Bytes {
        match self {
            StringValue::Int(integer) => Bytes::from(integer.to_string()),
            StringValue::Inline { length, data } => {
                Bytes::copy_from_slice(&data[..*length as usize])
            }
            StringValue::Bytes { data, .. } => Bytes::copy_from_slice(data),
        }
    }

    /// The string form, borrowed when possible.
    pub fn as_cow(&self) -> std::borrow::Cow<'_, [u8]> {
        match self {
            StringValue::Int(integer) => std::borrow::Cow::Owned(integer.to_string().into_bytes()),
            StringValue::Inline { length, data } => {
                std::borrow::Cow::Borrowed(&data[..*length as usize])
            }
            StringValue::Bytes { data, .. } => std::borrow::Cow::Borrowed(data),
        }
    }

    /// The integer this string holds, if it parses as Redis's `string2ll` would.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            StringValue::Int(integer) => Some(*integer),
            StringValue::Inline { length, data } => canonical_i64(&data[..*length as usize]),
            StringValue::Bytes { data, .. } => canonical_i64(data),
        }
    }

    /// Turns the value into mutable raw bytes (for APPEND and SETRANGE).
    pub fn make_raw(&mut self) -> &mut Vec<u8> {
        match self {
            StringValue::Int(integer) => *self = StringValue::raw(integer.to_string().into_bytes()),
            StringValue::Inline { length, data } => {
                *self = StringValue::raw(data[..*length as usize].to_vec())
            }
            StringValue::Bytes { .. } => {}
        }
        match self {
            StringValue::Bytes { data, raw } => {
                *raw = true;
                data
            }
            StringValue::Int(_) | StringValue::Inline { .. } => unreachable!("converted above"),
        }
    }
}

fn decimal_length(integer: i64) -> usize {
    let mut length = if integer < 0 { 2 } else { 1 };
    let mut magnitude = integer.unsigned_abs();
    while magnitude >= 10 {
        magnitude /= 10;
        length += 1;
    }
    length
}

/// Parses a decimal integer exactly as Redis's `string2ll`: optional `-`, no leading
/// zeros (except `0` itself), no `+`, no spaces, within `i64`.
pub fn canonical_i64(data: &[u8]) -> Option<i64> {
    if data.is_empty() || data.len() > 20 {
        return None;
    }
    let (negative, digits) = match data.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, data),
    };
    match digits {
        [b'0'] if !negative => return Some(0),
        [b'1'..=b'9', ..] => {}
        _ => return None,
    }
    let mut magnitude: u64 = 0;
    for &byte in digits {
        if !byte.is_ascii_digit() {
            return None;
        }
        magnitude = magnitude
            .checked_mul(10)?
            .checked_add((byte - b'0') as u64)?;
    }
    if negative {
        if magnitude > i64::MAX as u64 + 1 {
            None
        } else {
            Some((magnitude as i64).wrapping_neg())
        }
    } else {
        i64::try_from(magnitude).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_parsing_matches_string2ll() {
        assert_eq!(canonical_i64(b"0"), Some(0));
        assert_eq!(canonical_i64(b"-1"), Some(-1));
        assert_eq!(canonical_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(canonical_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b"-0"[..],
            b"01",
            b"+1",
            b" 1",
            b"1 ",
            b"",
            b"-",
            b"9223372036854775808",
            b"1.0",
        ] {
            assert_eq!(
                canonical_i64(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn encodings() {
        assert_eq!(StringValue::from_bytes(b"123").encoding_name(), "int");
        assert_eq!(StringValue::from_bytes(b"0123").encoding_name(), "embstr");
        assert_eq!(
            StringValue::from_bytes(&[b'x'; 40]).encoding_name(),
            "embstr"
        );
        assert_eq!(
            StringValue::from_bytes(b"short").as_cow().as_ref(),
            b"short"
        );
        assert_eq!(StringValue::from_bytes(&[b'x'; 45]).encoding_name(), "raw");
        let mut value = StringValue::from_bytes(b"12");
        value.make_raw().push(b'3');
        assert_eq!(value.encoding_name(), "raw");
        assert_eq!(value.as_i64(), Some(123));
        assert_eq!(StringValue::Int(-120).len(), 4);
    }
}
