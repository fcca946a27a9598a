//! The DUMP / RESTORE payload format.
//!
//! It follows the layout idea of Redis's payload without being byte-compatible
//! with it:
//!
//! ```text
//! +-----------+------------------+------------------+-------------------+
//! | type byte | serialized value | version (u16 LE) | CRC-64 (u64 LE)   |
//! +-----------+------------------+------------------+-------------------+
//! ```
//!
//! The CRC-64 is Redis's (Jones polynomial, reflected, initial value 0) and
//! covers every byte before it, the version included. Decoding is strict: a wrong
//! checksum, an unknown version or type byte, truncated data or trailing bytes are
//! all the same [`BadPayload`] error, which RESTORE reports as Redis's
//! `ERR DUMP payload version or checksum are wrong`.
//!
//! Adding a type means adding a type byte, an arm in [`encode_body`] and an arm in
//! [`decode_body`]; the framing stays as it is.

use crate::hash::{HashValue, Pair};
use crate::set::{SetEncoding, SetValue};
use crate::value::{ListValue, StringValue, Value, ZSetValue};

/// Version of the payload format written by [`serialize_value`]; payloads with a
/// version newer than this (or zero) are refused.
pub const FORMAT_VERSION: u16 = 1;

/// Type bytes, one per value type.
pub mod type_byte {
    /// A string: a length (LEB128 varint) followed by the bytes.
    pub const STRING: u8 = 0;
    /// A list: the element count (varint), then each element from head to tail
    /// as a length (varint) followed by the bytes.
    pub const LIST: u8 = 1;
    /// A set: the member count (varint), then each member in storage order as
    /// a length (varint) followed by the bytes.
    pub const SET: u8 = 2;
    /// A hash: the pair count (varint), then each field and its value in
    /// storage order, each as a length (varint) followed by the bytes.
    pub const HASH: u8 = 4;
    /// A sorted set (Redis's object type number for zsets): the member count
    /// (varint), then each member in ascending order as a length (varint), the
    /// bytes, and the score as 8 bytes (IEEE 754 binary64, little-endian).
    pub const ZSET: u8 = 3;
    /// A stream (Redis's object type number for streams): see
    /// `StreamValue::encode` in `stream.rs` (counters, nodes with their
    /// live entries, consumer groups with consumers and pending entries).
    pub const STREAM: u8 = 6;
}

/// How a set or hash body is to be stored when decoded: as a load encodes it
/// (DUMP payloads), or exactly in a recorded encoding (snapshots).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    Loaded,
    Set(SetEncoding),
    Hash { table: bool },
}

/// Bytes after the serialized value: the version and the checksum.
const FOOTER_BYTES: usize = 2 + 8;

/// A payload that fails verification or decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadPayload;

impl std::fmt::Display for BadPayload {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(crate::errors::BAD_DUMP_PAYLOAD)
    }
}

impl std::error::Error for BadPayload {}

/// The complete DUMP payload of `value`: type byte, value, version, checksum.
pub fn serialize_value(value: &Value) -> Vec<u8> {
    let mut payload = encode_body(value);
    payload.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    let checksum = crc64(0, &payload);
    payload.extend_from_slice(&checksum.to_le_bytes());
    payload
}

/// Verifies a complete payload (checksum and version) and decodes its value.
pub fn deserialize_value(payload: &[u8]) -> Result<Value, BadPayload> {
    let body = verify_payload(payload)?;
    decode_body(body)
}

/// Checks the footer of `payload` and returns the part before it (type byte and
/// serialized value).
pub fn verify_payload(payload: &[u8]) -> Result<&[u8], BadPayload> {
    let checked_len = payload.len().checked_sub(8).ok_or(BadPayload)?;
    if checked_len < 2 + 1 {
        // Not even a type byte before the version.
        return Err(BadPayload);
    }
    let (checked, checksum) = payload.split_at(checked_len);
    let expected = u64::from_le_bytes(checksum.try_into().map_err(|_| BadPayload)?);
    if crc64(0, checked) != expected {
        return Err(BadPayload);
    }
    let (body, version) = checked.split_at(checked_len - 2);
    let version = u16::from_le_bytes(version.try_into().map_err(|_| BadPayload)?);
    if version == 0 || version > FORMAT_VERSION {
        return Err(BadPayload);
    }
    debug_assert_eq!(body.len() + FOOTER_BYTES, payload.len());
    Ok(body)
}

/// The type byte and serialized value, without the footer.
pub fn encode_body(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    encode_body_into(&mut out, value);
    out
}

/// [`encode_body`], appending to `out` (lets a caller reuse one buffer for many
/// values, as the snapshot writer does).
pub(crate) fn encode_body_into(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::String(string) => {
            out.push(type_byte::STRING);
            let data = string.as_cow();
            put_length(out, data.len() as u64);
            out.extend_from_slice(&data);
        }
        Value::List(list) => {
            out.push(type_byte::LIST);
            put_length(out, list.len() as u64);
            for element in list.iter() {
                put_length(out, element.len() as u64);
                out.extend_from_slice(element);
            }
        }
        Value::Set(set) => {
            out.push(type_byte::SET);
            put_length(out, set.len() as u64);
            for member in set.members() {
                put_length(out, member.len() as u64);
                out.extend_from_slice(&member);
            }
        }
        Value::Hash(hash) => {
            out.push(type_byte::HASH);
            put_length(out, hash.len() as u64);
            for pair in hash.pairs() {
                for data in [pair.field(), pair.value()] {
                    put_length(out, data.len() as u64);
                    out.extend_from_slice(data);
                }
            }
        }
        Value::Stream(stream) => {
            out.push(type_byte::STREAM);
            stream.encode(out);
        }
        Value::ZSet(zset) => {
            out.push(type_byte::ZSET);
            put_length(out, zset.len() as u64);
            for entry in zset.iter() {
                put_length(out, entry.member().len() as u64);
                out.extend_from_slice(entry.member());
                out.extend_from_slice(&entry.score.to_bits().to_le_bytes());
            }
        }
    }
}

/// Decodes a type byte and serialized value; the whole input must be consumed.
pub fn decode_body(body: &[u8]) -> Result<Value, BadPayload> {
    decode_body_with_layout(body, Layout::Loaded)
}

/// [`decode_body`], storing a set or hash in `layout`.
pub(crate) fn decode_body_with_layout(body: &[u8], layout: Layout) -> Result<Value, BadPayload> {
    let (&kind, rest) = body.split_first().ok_or(BadPayload)?;
    let mut reader = Reader { data: rest };
    let value = match kind {
        type_byte::STRING => {
            let length = reader.length()?;
            let data = reader.take(length)?;
            // Stored as SET would store it: the encoding follows from the bytes,
            // as Redis re-encodes strings it loads.
            Value::String(StringValue::from_bytes(data))
        }
        type_byte::LIST => Value::List(decode_list(&mut reader)?),
        type_byte::SET => Value::Set(decode_set(&mut reader, layout)?),
        type_byte::HASH => Value::Hash(decode_hash(&mut reader, layout)?),
        type_byte::ZSET => Value::ZSet(decode_zset(&mut reader)?),
        type_byte::STREAM => Value::Stream(Box::new(
            crate::stream::StreamValue::decode(&mut reader).ok_or(BadPayload)?,
        )),
        _ => return Err(BadPayload),
    };
    if !reader.data.is_empty() {
        return Err(BadPayload);
    }
    Ok(value)
}

/// A list body after its type byte. The count is checked against the bytes that
/// are there (each element takes at least one), never trusted for an allocation.
/// Lists are never stored empty, so an empty one is refused.
fn decode_list(reader: &mut Reader<'_>) -> Result<ListValue, BadPayload> {
    let count = reader.length()?;
    if count == 0 || count > reader.data.len() {
        return Err(BadPayload);
    }
    let mut elements = Vec::with_capacity(count);
    for _ in 0..count {
        let length = reader.length()?;
        elements.push(reader.take(length)?);
    }
    // Encoded as Redis encodes a list it loads: a listpack when it fits one.
    Ok(ListValue::from_elements(elements))
}

/// A set body after its type byte: never empty, no repeated member (the
/// count is checked against the bytes there, as for lists).
fn decode_set(reader: &mut Reader<'_>, layout: Layout) -> Result<SetValue, BadPayload> {
    let count = reader.length()?;
    if count == 0 || count > reader.data.len() {
        return Err(BadPayload);
    }
    let mut members = Vec::with_capacity(count);
    for _ in 0..count {
        let length = reader.length()?;
        members.push(reader.take(length)?.to_vec());
    }
    match layout {
        Layout::Loaded => SetValue::load(members),
        Layout::Set(encoding) => SetValue::with_layout(members, encoding),
        Layout::Hash { .. } => None,
    }
    .ok_or(BadPayload)
}

/// A hash body after its type byte: never empty, no repeated field.
fn decode_hash(reader: &mut Reader<'_>, layout: Layout) -> Result<HashValue, BadPayload> {
    let count = reader.length()?;
    if count == 0 || count > reader.data.len() / 2 {
        return Err(BadPayload);
    }
    let mut pairs = Vec::with_capacity(count);
    for _ in 0..count {
        let length = reader.length()?;
        let field = reader.take(length)?;
        let length = reader.length()?;
        let value = reader.take(length)?;
        pairs.push(Pair::new(field, value));
    }
    match layout {
        Layout::Loaded => HashValue::load(pairs),
        Layout::Hash { table } => HashValue::with_layout(pairs, table),
        Layout::Set(_) => None,
    }
    .ok_or(BadPayload)
}

/// A sorted set body after its type byte. The count is checked against the
/// bytes that are there (each member takes at least nine); empty sets, NaN
/// scores and repeated members are refused.
fn decode_zset(reader: &mut Reader<'_>) -> Result<ZSetValue, BadPayload> {
    let count = reader.length()?;
    if count == 0 || count > reader.data.len() / 9 {
        return Err(BadPayload);
    }
    let mut entries = Vec::with_capacity(count);
    for _ in 0..count {
        let length = reader.length()?;
        let member = reader.take(length)?;
        let bits = reader.take(8)?;
        let mut score = [0u8; 8];
        score.copy_from_slice(bits);
        entries.push(crate::zset::Entry::new(
            f64::from_bits(u64::from_le_bytes(score)),
            member,
        ));
    }
    // Encoded as Redis encodes a sorted set it loads: a listpack when it fits.
    ZSetValue::from_entries(entries).ok_or(BadPayload)
}

/// Appends `length` as an unsigned LEB128 varint.
pub(crate) fn put_length(out: &mut Vec<u8>, mut length: u64) {
    loop {
        let low = (length & 0x7F) as u8;
        length >>= 7;
        if length == 0 {
            out.push(low);
            return;
        }
        out.push(low | 0x80);
    }
}

pub(crate) struct Reader<'a> {
    pub(crate) data: &'a [u8],
}

/// Reads an unsigned LEB128 varint that fits a `u64`, in its shortest form, one
/// byte at a time from `next_byte` (None: no more bytes). None when the bytes run
/// out, the value overflows or the encoding is overlong.
pub(crate) fn decode_varint(mut next_byte: impl FnMut() -> Option<u8>) -> Option<u64> {
    let mut value: u64 = 0;
    for index in 0..10u32 {
        let byte = next_byte()?;
        let bits = (byte & 0x7F) as u64;
        let shift = index * 7;
        if shift == 63 && bits > 1 {
            return None;
        }
        value |= bits << shift;
        if byte & 0x80 == 0 {
            if byte == 0 && index > 0 {
                // Overlong encoding: one payload, one spelling.
                return None;
            }
            return Some(value);
        }
    }
    None
}

impl<'a> Reader<'a> {
    /// A LEB128 varint, in its shortest form.
    pub(crate) fn u64(&mut self) -> Result<u64, BadPayload> {
        decode_varint(|| {
            let (&byte, rest) = self.data.split_first()?;
            self.data = rest;
            Some(byte)
        })
        .ok_or(BadPayload)
    }

    /// Bytes left to read.
    pub(crate) fn remaining(&self) -> usize {
        self.data.len()
    }

    /// A LEB128 varint that fits a `usize`, in its shortest form.
    pub(crate) fn length(&mut self) -> Result<usize, BadPayload> {
        let value = decode_varint(|| {
            let (&byte, rest) = self.data.split_first()?;
            self.data = rest;
            Some(byte)
        })
        .ok_or(BadPayload)?;
        usize::try_from(value).map_err(|_| BadPayload)
    }

    pub(crate) fn take(&mut self, count: usize) -> Result<&'a [u8], BadPayload> {
        if count > self.data.len() {
            return Err(BadPayload);
        }
        let (taken, rest) = self.data.split_at(count);
        self.data = rest;
        Ok(taken)
    }
}

/// The reflected form of the Jones polynomial 0xad93d23594c935a9, as Redis's
/// `crc64.c` uses it.
const JONES_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;

/// One table entry per byte value, computed at compile time.
const CRC64_TABLE: [u64; 256] = {
    let mut table = [0u64; 256];
    let mut index = 0;
    while index < 256 {
        let mut crc = index as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ JONES_REFLECTED
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[index] = crc;
        index += 1;
    }
    table
};

/// Redis's CRC-64 (Jones, reflected in and out, no final xor), continuing from
/// `crc` (0 to start). `crc64(0, b"123456789") == 0xe9c6d914c4b8d9ca`.
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    for &byte in data {
        crc = CRC64_TABLE[((crc ^ byte as u64) & 0xFF) as usize] ^ (crc >> 8);
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_matches_redis_test_vector() {
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        assert_eq!(crc64(0, b""), 0);
        let split = crc64(crc64(0, b"1234"), b"56789");
        assert_eq!(split, 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn strings_round_trip_with_their_encodings() {
        let long = vec![b'x'; 300];
        for value in [
            Value::string("hello"),
            Value::string(""),
            Value::string("12345"),
            Value::string("-9223372036854775808"),
            Value::string("0123"),
            Value::string(&long),
            Value::string([0u8, 255, 13, 10]),
        ] {
            let payload = serialize_value(&value);
            assert_eq!(deserialize_value(&payload), Ok(value.clone()));
        }
        // A raw string comes back encoded as SET would store it.
        let raw = Value::String(StringValue::raw(b"42".to_vec()));
        assert_eq!(
            deserialize_value(&serialize_value(&raw)),
            Ok(Value::String(StringValue::Int(42)))
        );
    }

    #[test]
    fn lists_round_trip_in_order() {
        let long = vec![b'L'; 5000];
        for value in [
            Value::list(["a"]),
            Value::list(["a", "", "12", "-5", "x"]),
            Value::list([&long[..], b"tail"]),
            Value::list(std::iter::repeat_n("e", 3000)),
        ] {
            let payload = serialize_value(&value);
            assert_eq!(deserialize_value(&payload), Ok(value.clone()));
        }
        let body = encode_body(&Value::list(["ab", "c"]));
        assert_eq!(body, [type_byte::LIST, 2, 2, b'a', b'b', 1, b'c']);
        // A large list loads as a quicklist, a small one as a listpack.
        let Ok(Value::List(big)) =
            deserialize_value(&serialize_value(&Value::list([&long[..], &long[..]])))
        else {
            panic!("a list");
        };
        assert!(big.is_quicklist());
    }

    #[test]
    fn zsets_round_trip_with_their_scores() {
        let long = [b'Z'; 100];
        let many: Vec<(f64, String)> = (0..300)
            .map(|i| (i as f64 / 3.0, format!("m{i}")))
            .collect();
        for value in [
            Value::zset([(1.5, "a")]),
            Value::zset([
                (-0.0, "z"),
                (f64::INFINITY, ""),
                (f64::NEG_INFINITY, "n"),
                (2.0, "a"),
            ]),
            Value::zset([(1.0, &long[..]), (0.5, b"short")]),
            Value::zset(many.iter().map(|(score, member)| (*score, member.as_str()))),
        ] {
            let payload = serialize_value(&value);
            let decoded = deserialize_value(&payload).unwrap();
            assert_eq!(decoded, value);
            assert_eq!(decoded.encoding_name(), value.encoding_name());
        }
        let body = encode_body(&Value::zset([(1.0, "b"), (0.5, "a")]));
        let mut expected = vec![type_byte::ZSET, 2, 1, b'a'];
        expected.extend_from_slice(&0.5f64.to_bits().to_le_bytes());
        expected.extend_from_slice(&[1, b'b']);
        expected.extend_from_slice(&1.0f64.to_bits().to_le_bytes());
        assert_eq!(body, expected);
        // -0 keeps its sign.
        let Ok(Value::ZSet(zset)) = decode_body(&encode_body(&Value::zset([(-0.0, "z")]))) else {
            panic!("a sorted set");
        };
        assert!(zset.score(b"z").unwrap().is_sign_negative());
    }

    #[test]
    fn malformed_zsets_are_rejected() {
        let one = |member: &[u8], score: f64| {
            let mut out = vec![type_byte::ZSET, 1, member.len() as u8];
            out.extend_from_slice(member);
            out.extend_from_slice(&score.to_bits().to_le_bytes());
            out
        };
        assert!(decode_body(&one(b"a", 1.0)).is_ok());
        assert_eq!(decode_body(&one(b"a", f64::NAN)), Err(BadPayload));
        let mut twice = one(b"a", 1.0);
        twice[1] = 2;
        twice.extend_from_slice(&one(b"a", 2.0)[2..]);
        assert_eq!(decode_body(&twice), Err(BadPayload));
        let mut truncated = one(b"a", 1.0);
        truncated.pop();
        assert_eq!(decode_body(&truncated), Err(BadPayload));
        let mut trailing = one(b"a", 1.0);
        trailing.push(0);
        assert_eq!(decode_body(&trailing), Err(BadPayload));
        assert_eq!(decode_body(&[type_byte::ZSET, 0]), Err(BadPayload));
        assert_eq!(
            decode_body(&[type_byte::ZSET, 0xFF, 0xFF, 0xFF, 0x0F, 1, b'a']),
            Err(BadPayload)
        );
    }

    #[test]
    fn malformed_lists_are_rejected() {
        for body in [
            &[type_byte::LIST, 0][..],
            &[type_byte::LIST, 2, 1, b'a'],
            &[type_byte::LIST, 1, 2, b'a'],
            &[type_byte::LIST, 1, 1, b'a', b'b'],
            &[type_byte::LIST, 0xFF, 0xFF, 0xFF, 0x0F, 1, b'a'],
            &[type_byte::LIST],
        ] {
            assert_eq!(
                deserialize_value(&sealed(body, FORMAT_VERSION)),
                Err(BadPayload),
                "{body:?}"
            );
        }
    }

    #[test]
    fn layout_is_type_value_version_checksum() {
        let payload = serialize_value(&Value::string("abc"));
        assert_eq!(&payload[..5], &[type_byte::STRING, 3, b'a', b'b', b'c']);
        assert_eq!(&payload[5..7], &FORMAT_VERSION.to_le_bytes());
        assert_eq!(payload[7..], crc64(0, &payload[..7]).to_le_bytes());
        assert_eq!(payload.len(), 5 + FOOTER_BYTES);
    }

    #[test]
    fn long_lengths_use_several_varint_bytes() {
        let value = Value::string(vec![b'a'; 20_000]);
        let payload = serialize_value(&value);
        assert_eq!(&payload[1..4], &[0xA0, 0x9C, 0x01]);
        assert_eq!(deserialize_value(&payload), Ok(value));
    }

    #[test]
    fn flipping_any_single_byte_is_rejected() {
        let payload = serialize_value(&Value::string("some value worth keeping"));
        for index in 0..payload.len() {
            for flip in [0x01u8, 0x80, 0xFF] {
                let mut damaged = payload.clone();
                damaged[index] ^= flip;
                assert_eq!(
                    deserialize_value(&damaged),
                    Err(BadPayload),
                    "byte {index} ^ {flip:#x}"
                );
            }
        }
    }

    #[test]
    fn truncated_and_extended_payloads_are_rejected() {
        let payload = serialize_value(&Value::string("abc"));
        for length in 0..payload.len() {
            assert_eq!(deserialize_value(&payload[..length]), Err(BadPayload));
        }
        let mut longer = payload.clone();
        longer.push(0);
        assert_eq!(deserialize_value(&longer), Err(BadPayload));
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut rng = crate::rng::Rng::new(9);
        for _ in 0..2_000 {
            let length = rng.below(40) as usize;
            let bytes: Vec<u8> = (0..length).map(|_| rng.next_u64() as u8).collect();
            assert_eq!(deserialize_value(&bytes), Err(BadPayload));
            let _ = decode_body(&bytes);
        }
    }

    /// A payload with a valid checksum and version but a bad body.
    fn sealed(body: &[u8], version: u16) -> Vec<u8> {
        let mut payload = body.to_vec();
        payload.extend_from_slice(&version.to_le_bytes());
        let checksum = crc64(0, &payload);
        payload.extend_from_slice(&checksum.to_le_bytes());
        payload
    }

    #[test]
    fn well_sealed_garbage_is_rejected() {
        // Unknown type byte.
        assert_eq!(
            deserialize_value(&sealed(&[200, 1, b'a'], FORMAT_VERSION)),
            Err(BadPayload)
        );
        // Length longer than the data.
        assert_eq!(
            deserialize_value(&sealed(&[0, 5, b'a'], FORMAT_VERSION)),
            Err(BadPayload)
        );
        // Trailing bytes after the value.
        assert_eq!(
            deserialize_value(&sealed(&[0, 1, b'a', b'b'], FORMAT_VERSION)),
            Err(BadPayload)
        );
        // Overlong and oversized varints.
        assert_eq!(
            deserialize_value(&sealed(&[0, 0x81, 0x00, b'a'], FORMAT_VERSION)),
            Err(BadPayload)
        );
        assert_eq!(
            deserialize_value(&sealed(
                &[0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F],
                FORMAT_VERSION
            )),
            Err(BadPayload)
        );
        // Unsupported versions.
        assert_eq!(
            deserialize_value(&sealed(&[0, 1, b'a'], 0)),
            Err(BadPayload)
        );
        assert_eq!(
            deserialize_value(&sealed(&[0, 1, b'a'], FORMAT_VERSION + 1)),
            Err(BadPayload)
        );
        // The same body with the right version is fine.
        assert_eq!(
            deserialize_value(&sealed(&[0, 1, b'a'], FORMAT_VERSION)),
            Ok(Value::string("a"))
        );
    }
}
