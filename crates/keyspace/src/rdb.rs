//! DUMP and RESTORE payloads in Redis's own format (an RDB object with its
//! version and CRC-64), so that DUMP/RESTORE and MIGRATE move keys between
//! slotraft and Redis both ways.
//!
//! Written: strings, lists, sets, hashes and sorted sets in RDB's plain forms
//! (`STRING`, `LIST`, `SET`, `HASH`, `ZSET_2`), which every Redis since 4.0
//! loads, and streams as `STREAM_LISTPACKS_2` (see `rdb/stream.rs`), under
//! RDB version 10 (Redis 7.0's, so a 7.0 target accepts them; 7.2 reads them
//! too).
//!
//! Read: those forms and the compact ones Redis writes — integer and
//! LZF-compressed strings, ziplists, listpacks, intsets, quicklists and the
//! three stream forms — up to RDB version 11 (Redis 7.2). A payload whose
//! footer says version 1 is slotraft's own format (`dump.rs`: what
//! resharding moves, and what earlier slotraft versions wrote for streams).
//! Every count is checked against the bytes that are there before anything
//! is allocated for it.

mod stream;

use crate::dump::{crc64, BadPayload};
use crate::hash::{HashValue, Pair};
use crate::set::SetValue;
use crate::value::{ListValue, StringValue, Value, ZSetValue};

/// The RDB version written.
const WRITTEN_VERSION: u16 = 10;
/// The newest RDB version read (Redis 7.2's).
const NEWEST_VERSION: u16 = 11;

mod kind {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const SET_LISTPACK: u8 = 20;
}

/// The DUMP payload of `value`.
pub fn dump(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    match value {
        Value::String(string) => {
            out.push(kind::STRING);
            put_string(&mut out, &string.as_cow());
        }
        Value::List(list) => {
            out.push(kind::LIST);
            put_length(&mut out, list.len() as u64);
            for element in list.iter() {
                put_string(&mut out, element);
            }
        }
        Value::Set(set) => {
            out.push(kind::SET);
            put_length(&mut out, set.len() as u64);
            for member in set.members() {
                put_string(&mut out, &member);
            }
        }
        Value::Hash(hash) => {
            out.push(kind::HASH);
            put_length(&mut out, hash.len() as u64);
            for pair in hash.pairs() {
                put_string(&mut out, pair.field());
                put_string(&mut out, pair.value());
            }
        }
        Value::ZSet(zset) => {
            out.push(kind::ZSET_2);
            put_length(&mut out, zset.len() as u64);
            for entry in zset.iter() {
                put_string(&mut out, entry.member());
                out.extend_from_slice(&entry.score.to_bits().to_le_bytes());
            }
        }
        Value::Stream(value) => stream::write(value, &mut out),
    }
    out.extend_from_slice(&WRITTEN_VERSION.to_le_bytes());
    let checksum = crc64(0, &out);
    out.extend_from_slice(&checksum.to_le_bytes());
    out
}

/// The value of a DUMP payload (Redis's format, or slotraft's own).
pub fn restore(payload: &[u8]) -> Result<Value, BadPayload> {
    if payload.len() < 1 + 2 + 8 {
        return Err(BadPayload);
    }
    let (checked, checksum) = payload.split_at(payload.len() - 8);
    if crc64(0, checked) != u64::from_le_bytes(checksum.try_into().map_err(|_| BadPayload)?) {
        return Err(BadPayload);
    }
    let (body, version) = checked.split_at(checked.len() - 2);
    let version = u16::from_le_bytes(version.try_into().map_err(|_| BadPayload)?);
    if version == crate::dump::FORMAT_VERSION {
        return crate::dump::decode_body(body);
    }
    if version > NEWEST_VERSION {
        return Err(BadPayload);
    }
    let (&type_byte, rest) = body.split_first().ok_or(BadPayload)?;
    let mut reader = Reader { data: rest };
    let value = read_object(type_byte, &mut reader)?;
    if !reader.data.is_empty() {
        return Err(BadPayload);
    }
    Ok(value)
}

fn read_object(type_byte: u8, reader: &mut Reader<'_>) -> Result<Value, BadPayload> {
    Ok(match type_byte {
        kind::STRING => Value::String(StringValue::from_bytes(&reader.string()?)),
        kind::LIST => {
            let count = reader.count(1)?;
            let mut elements = Vec::with_capacity(count);
            for _ in 0..count {
                elements.push(reader.string()?);
            }
            list(elements)?
        }
        kind::SET => {
            let count = reader.count(1)?;
            let mut members = Vec::with_capacity(count);
            for _ in 0..count {
                members.push(reader.string()?);
            }
            set(members)?
        }
        kind::HASH => {
            let count = reader.count(2)?;
            let mut fields = Vec::with_capacity(count * 2);
            for _ in 0..count * 2 {
                fields.push(reader.string()?);
            }
            hash(fields)?
        }
        kind::ZSET | kind::ZSET_2 => {
            let count = reader.count(2)?;
            let mut entries = Vec::with_capacity(count);
            for _ in 0..count {
                let member = reader.string()?;
                let score = if type_byte == kind::ZSET_2 {
                    let bits = reader.take(8)?;
                    f64::from_bits(u64::from_le_bytes(bits.try_into().map_err(|_| BadPayload)?))
                } else {
                    reader.text_double()?
                };
                entries.push(crate::zset::Entry::new(score, &member));
            }
            ZSetValue::from_entries(entries)
                .map(Value::ZSet)
                .ok_or(BadPayload)?
        }
        kind::LIST_ZIPLIST => list(ziplist(&reader.string()?)?)?,
        kind::LIST_QUICKLIST | kind::LIST_QUICKLIST_2 => {
            let nodes = reader.count(1)?;
            let mut elements = Vec::new();
            for _ in 0..nodes {
                let container = if type_byte == kind::LIST_QUICKLIST_2 {
                    reader.length()?
                } else {
                    2
                };
                let node = reader.string()?;
                match (type_byte, container) {
                    // A plain node: one large element.
                    (kind::LIST_QUICKLIST_2, 1) => elements.push(node),
                    (kind::LIST_QUICKLIST_2, 2) => elements.extend(listpack(&node)?),
                    (kind::LIST_QUICKLIST, _) => elements.extend(ziplist(&node)?),
                    _ => return Err(BadPayload),
                }
            }
            list(elements)?
        }
        stream::STREAM_LISTPACKS | stream::STREAM_LISTPACKS_2 | stream::STREAM_LISTPACKS_3 => {
            Value::Stream(Box::new(stream::read(type_byte, reader)?))
        }
        kind::SET_INTSET => set(intset(&reader.string()?)?)?,
        kind::SET_LISTPACK => set(listpack(&reader.string()?)?)?,
        kind::HASH_ZIPLIST => hash(ziplist(&reader.string()?)?)?,
        kind::HASH_LISTPACK => hash(listpack(&reader.string()?)?)?,
        kind::ZSET_ZIPLIST | kind::ZSET_LISTPACK => {
            let packed = reader.string()?;
            let flat = if type_byte == kind::ZSET_ZIPLIST {
                ziplist(&packed)?
            } else {
                listpack(&packed)?
            };
            if flat.is_empty() || !flat.len().is_multiple_of(2) {
                return Err(BadPayload);
            }
            let mut entries = Vec::with_capacity(flat.len() / 2);
            for pair in flat.chunks(2) {
                let score = std::str::from_utf8(&pair[1])
                    .ok()
                    .and_then(|text| text.parse::<f64>().ok())
                    .filter(|score| !score.is_nan())
                    .ok_or(BadPayload)?;
                entries.push(crate::zset::Entry::new(score, &pair[0]));
            }
            ZSetValue::from_entries(entries)
                .map(Value::ZSet)
                .ok_or(BadPayload)?
        }
        _ => return Err(BadPayload),
    })
}

fn list(elements: Vec<Vec<u8>>) -> Result<Value, BadPayload> {
    if elements.is_empty() {
        return Err(BadPayload);
    }
    Ok(Value::List(ListValue::from_elements(
        elements.iter().map(Vec::as_slice),
    )))
}

fn set(members: Vec<Vec<u8>>) -> Result<Value, BadPayload> {
    SetValue::load(members).map(Value::Set).ok_or(BadPayload)
}

/// A hash from fields and values in turn.
fn hash(flat: Vec<Vec<u8>>) -> Result<Value, BadPayload> {
    if flat.is_empty() || !flat.len().is_multiple_of(2) {
        return Err(BadPayload);
    }
    let pairs = flat
        .chunks(2)
        .map(|pair| Pair::new(&pair[0], &pair[1]))
        .collect();
    HashValue::load(pairs).map(Value::Hash).ok_or(BadPayload)
}

/// RDB's length: 6 bits, 14 bits, or a 32- or 64-bit big-endian number.
fn put_length(out: &mut Vec<u8>, length: u64) {
    if length < 1 << 6 {
        out.push(length as u8);
    } else if length < 1 << 14 {
        out.push(0x40 | (length >> 8) as u8);
        out.push(length as u8);
    } else if length <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(length as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&length.to_be_bytes());
    }
}

fn put_string(out: &mut Vec<u8>, data: &[u8]) {
    put_length(out, data.len() as u64);
    out.extend_from_slice(data);
}

struct Reader<'a> {
    data: &'a [u8],
}

/// A length, or a string's special encoding.
enum Length {
    Plain(u64),
    Encoded(u8),
}

impl Reader<'_> {
    fn take(&mut self, count: usize) -> Result<&[u8], BadPayload> {
        if count > self.data.len() {
            return Err(BadPayload);
        }
        let (taken, rest) = self.data.split_at(count);
        self.data = rest;
        Ok(taken)
    }

    fn byte(&mut self) -> Result<u8, BadPayload> {
        Ok(self.take(1)?[0])
    }

    fn raw_length(&mut self) -> Result<Length, BadPayload> {
        let first = self.byte()?;
        Ok(match first >> 6 {
            0 => Length::Plain((first & 0x3F) as u64),
            1 => Length::Plain((((first & 0x3F) as u64) << 8) | self.byte()? as u64),
            2 => match first {
                0x80 => Length::Plain(u32::from_be_bytes(
                    self.take(4)?.try_into().map_err(|_| BadPayload)?,
                ) as u64),
                0x81 => Length::Plain(u64::from_be_bytes(
                    self.take(8)?.try_into().map_err(|_| BadPayload)?,
                )),
                _ => return Err(BadPayload),
            },
            _ => Length::Encoded(first & 0x3F),
        })
    }

    fn length(&mut self) -> Result<u64, BadPayload> {
        match self.raw_length()? {
            Length::Plain(length) => Ok(length),
            Length::Encoded(_) => Err(BadPayload),
        }
    }

    /// A count of items each taking at least `bytes_each` bytes, checked
    /// against what is left.
    fn count(&mut self, bytes_each: usize) -> Result<usize, BadPayload> {
        let count = self.length()?;
        if count == 0 || count > (self.data.len() / bytes_each) as u64 {
            return Err(BadPayload);
        }
        Ok(count as usize)
    }

    fn string(&mut self) -> Result<Vec<u8>, BadPayload> {
        match self.raw_length()? {
            Length::Plain(length) => Ok(self
                .take(usize::try_from(length).map_err(|_| BadPayload)?)?
                .to_vec()),
            Length::Encoded(0) => Ok((self.byte()? as i8).to_string().into_bytes()),
            Length::Encoded(1) => Ok(i16::from_le_bytes(
                self.take(2)?.try_into().map_err(|_| BadPayload)?,
            )
            .to_string()
            .into_bytes()),
            Length::Encoded(2) => Ok(i32::from_le_bytes(
                self.take(4)?.try_into().map_err(|_| BadPayload)?,
            )
            .to_string()
            .into_bytes()),
            Length::Encoded(3) => {
                let compressed = self.length()? as usize;
                let length = self.length()? as usize;
                let input = self.take(compressed)?;
                lzf_decompress(input, length)
            }
            Length::Encoded(_) => Err(BadPayload),
        }
    }

    /// The old sorted-set score: a length byte and its text (253: NaN,
    /// refused; 254: +inf; 255: -inf).
    fn text_double(&mut self) -> Result<f64, BadPayload> {
        match self.byte()? {
            253 => Err(BadPayload),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            length => std::str::from_utf8(self.take(length as usize)?)
                .ok()
                .and_then(|text| text.parse().ok())
                .ok_or(BadPayload),
        }
    }
}

/// LZF (liblzf's format, as Redis compresses long strings): literal runs and
/// back references; the output must come out exactly `length` bytes long.
fn lzf_decompress(input: &[u8], length: usize) -> Result<Vec<u8>, BadPayload> {
    // A back reference produces at most 264 bytes from 2 or 3 input bytes.
    if length > input.len().saturating_mul(132) + 32 {
        return Err(BadPayload);
    }
    let mut out: Vec<u8> = Vec::with_capacity(length);
    let mut at = 0;
    while at < input.len() {
        let control = input[at] as usize;
        at += 1;
        if control < 32 {
            let run = control + 1;
            let literal = input.get(at..at + run).ok_or(BadPayload)?;
            out.extend_from_slice(literal);
            at += run;
        } else {
            let mut run = control >> 5;
            if run == 7 {
                run += *input.get(at).ok_or(BadPayload)? as usize;
                at += 1;
            }
            let low = *input.get(at).ok_or(BadPayload)? as usize;
            at += 1;
            let back = ((control & 0x1F) << 8) + low + 1;
            let start = out.len().checked_sub(back).ok_or(BadPayload)?;
            for offset in 0..run + 2 {
                let byte = out[start + offset];
                out.push(byte);
            }
        }
        if out.len() > length {
            return Err(BadPayload);
        }
    }
    if out.len() != length {
        return Err(BadPayload);
    }
    Ok(out)
}

fn le_int(bytes: &[u8]) -> i64 {
    let mut value: i64 = 0;
    for (index, byte) in bytes.iter().enumerate() {
        value |= (*byte as i64) << (8 * index);
    }
    // Sign-extend from the width read.
    let shift = 64 - 8 * bytes.len() as u32;
    (value << shift) >> shift
}

/// A ziplist's entries, integers as their decimal text.
fn ziplist(bytes: &[u8]) -> Result<Vec<Vec<u8>>, BadPayload> {
    let mut at = 10; // zlbytes, zltail, zllen
    let mut entries = Vec::new();
    loop {
        let &first = bytes.get(at).ok_or(BadPayload)?;
        if first == 0xFF {
            break;
        }
        // The previous entry's length: one byte, or 0xFE and four.
        at += if first == 0xFE { 5 } else { 1 };
        let &encoding = bytes.get(at).ok_or(BadPayload)?;
        at += 1;
        let take = |at: &mut usize, count: usize| -> Result<&[u8], BadPayload> {
            let slice = bytes.get(*at..*at + count).ok_or(BadPayload)?;
            *at += count;
            Ok(slice)
        };
        let entry = match encoding >> 6 {
            0 => take(&mut at, (encoding & 0x3F) as usize)?.to_vec(),
            1 => {
                let low = *take(&mut at, 1)?.first().ok_or(BadPayload)? as usize;
                take(&mut at, (((encoding & 0x3F) as usize) << 8) | low)?.to_vec()
            }
            2 => {
                let length =
                    u32::from_be_bytes(take(&mut at, 4)?.try_into().map_err(|_| BadPayload)?);
                take(&mut at, length as usize)?.to_vec()
            }
            _ => {
                let value = match encoding {
                    0xC0 => le_int(take(&mut at, 2)?),
                    0xD0 => le_int(take(&mut at, 4)?),
                    0xE0 => le_int(take(&mut at, 8)?),
                    0xF0 => le_int(take(&mut at, 3)?),
                    0xFE => le_int(take(&mut at, 1)?),
                    0xF1..=0xFD => (encoding & 0x0F) as i64 - 1,
                    _ => return Err(BadPayload),
                };
                value.to_string().into_bytes()
            }
        };
        entries.push(entry);
    }
    if at + 1 != bytes.len() {
        return Err(BadPayload);
    }
    Ok(entries)
}

/// A listpack's entries, integers as their decimal text.
fn listpack(bytes: &[u8]) -> Result<Vec<Vec<u8>>, BadPayload> {
    ListpackElements::new(bytes)?
        .map(|element| element.map(|element| element.to_vec()))
        .collect()
}

/// One listpack element, borrowed: an integer, or a string's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Element<'a> {
    Integer(i64),
    Text(&'a [u8]),
}

impl Element<'_> {
    /// The element as Redis returns it: integers as their decimal text.
    fn to_vec(self) -> Vec<u8> {
        match self {
            Element::Integer(value) => value.to_string().into_bytes(),
            Element::Text(text) => text.to_vec(),
        }
    }
}

/// The elements of a listpack, read one at a time without copying. The
/// header's total size must be the payload's, each element's back length
/// must be its size, the count (unless it says "unknown", 65535) must be the
/// number of elements, and the end byte must be the last; an error ends the
/// walk.
struct ListpackElements<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Elements read so far.
    read: usize,
    /// The header's element count, `None` when it is too large to hold.
    count: Option<usize>,
    done: bool,
}

/// A listpack's header: total bytes (u32) and element count (u16).
const LISTPACK_HEADER: usize = 6;

impl<'a> ListpackElements<'a> {
    fn new(bytes: &'a [u8]) -> Result<ListpackElements<'a>, BadPayload> {
        let header = bytes.get(..LISTPACK_HEADER).ok_or(BadPayload)?;
        let total = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        if total != bytes.len() || bytes.len() < LISTPACK_HEADER + 1 {
            return Err(BadPayload);
        }
        let count = u16::from_le_bytes([header[4], header[5]]);
        Ok(ListpackElements {
            bytes,
            at: LISTPACK_HEADER,
            read: 0,
            count: (count != u16::MAX).then_some(count as usize),
            done: false,
        })
    }

    fn take(&mut self, count: usize) -> Result<&'a [u8], BadPayload> {
        let slice = self
            .bytes
            .get(self.at..self.at.checked_add(count).ok_or(BadPayload)?)
            .ok_or(BadPayload)?;
        self.at += count;
        Ok(slice)
    }

    fn element(&mut self) -> Result<Option<Element<'a>>, BadPayload> {
        let &encoding = self.bytes.get(self.at).ok_or(BadPayload)?;
        if encoding == 0xFF {
            if self.at + 1 != self.bytes.len() || self.count.is_some_and(|n| n != self.read) {
                return Err(BadPayload);
            }
            return Ok(None);
        }
        let start = self.at;
        self.at += 1;
        let element = if encoding & 0x80 == 0 {
            Element::Integer(encoding as i64)
        } else if encoding & 0xC0 == 0x80 {
            Element::Text(self.take((encoding & 0x3F) as usize)?)
        } else if encoding & 0xE0 == 0xC0 {
            let low = self.take(1)?[0] as i64;
            let value = (((encoding & 0x1F) as i64) << 8) | low;
            // 13-bit two's complement.
            Element::Integer(if value >= 1 << 12 {
                value - (1 << 13)
            } else {
                value
            })
        } else if encoding & 0xF0 == 0xE0 {
            let low = self.take(1)?[0] as usize;
            Element::Text(self.take((((encoding & 0x0F) as usize) << 8) | low)?)
        } else {
            match encoding {
                0xF0 => {
                    let length =
                        u32::from_le_bytes(self.take(4)?.try_into().map_err(|_| BadPayload)?);
                    Element::Text(self.take(length as usize)?)
                }
                0xF1 => Element::Integer(le_int(self.take(2)?)),
                0xF2 => Element::Integer(le_int(self.take(3)?)),
                0xF3 => Element::Integer(le_int(self.take(4)?)),
                0xF4 => Element::Integer(le_int(self.take(8)?)),
                _ => return Err(BadPayload),
            }
        };
        // The back length: the entry's size in 1 to 5 bytes.
        let size = self.at - start;
        if back_length(self.take(crate::list::back_length_bytes(size))?) != Some(size) {
            return Err(BadPayload);
        }
        self.read += 1;
        Ok(Some(element))
    }
}

/// A listpack back length: 7 bits per byte, the last byte the lowest, every
/// byte but the first flagged with the high bit.
fn back_length(bytes: &[u8]) -> Option<usize> {
    let mut value = 0usize;
    for (index, &byte) in bytes.iter().enumerate() {
        if (byte & 0x80 != 0) != (index > 0) {
            return None;
        }
        value = (value << 7) | (byte & 0x7F) as usize;
    }
    Some(value)
}

impl<'a> Iterator for ListpackElements<'a> {
    type Item = Result<Element<'a>, BadPayload>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.element() {
            Ok(Some(element)) => Some(Ok(element)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(error) => {
                self.done = true;
                Some(Err(error))
            }
        }
    }
}

fn intset(bytes: &[u8]) -> Result<Vec<Vec<u8>>, BadPayload> {
    let header = bytes.get(..8).ok_or(BadPayload)?;
    let width = u32::from_le_bytes(header[..4].try_into().map_err(|_| BadPayload)?) as usize;
    let count = u32::from_le_bytes(header[4..].try_into().map_err(|_| BadPayload)?) as usize;
    if !matches!(width, 2 | 4 | 8) || bytes.len() != 8 + width * count {
        return Err(BadPayload);
    }
    Ok(bytes[8..]
        .chunks(width)
        .map(|chunk| le_int(chunk).to_string().into_bytes())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(&text[at..at + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn plain_forms_round_trip() {
        let values = [
            Value::String(StringValue::from_bytes(b"hello")),
            Value::List(ListValue::from_elements([&b"a"[..], b"bb", b"12"])),
            set(vec![b"x".to_vec(), b"7".to_vec()]).unwrap(),
            hash(vec![b"f".to_vec(), b"v".to_vec()]).unwrap(),
            Value::ZSet(
                ZSetValue::from_entries(vec![
                    crate::zset::Entry::new(1.5, b"m"),
                    crate::zset::Entry::new(f64::NEG_INFINITY, b"n"),
                ])
                .unwrap(),
            ),
        ];
        for value in values {
            let payload = dump(&value);
            assert_eq!(&payload[payload.len() - 10..payload.len() - 8], &[10, 0]);
            let back = restore(&payload).unwrap();
            assert_eq!(dump(&back), payload);
        }
    }

    #[test]
    fn damaged_payloads_are_refused() {
        let mut payload = dump(&Value::String(StringValue::from_bytes(b"hello")));
        payload[2] ^= 1;
        assert_eq!(restore(&payload), Err(BadPayload));
        assert_eq!(restore(b"short"), Err(BadPayload));
    }

    /// Payloads redis-server 7.0 wrote (DUMP), and what RESTORE makes of
    /// them (compared through this module's own plain form).
    #[test]
    fn redis_payloads_are_read() {
        let string = |text: &[u8]| Value::String(StringValue::from_bytes(text));
        let list =
            |elements: &[&[u8]]| Value::List(ListValue::from_elements(elements.iter().copied()));
        let members = |members: &[&[u8]]| members.iter().map(|m| m.to_vec()).collect::<Vec<_>>();
        let cases: Vec<(&str, Value)> = vec![
            // SET s hello
            ("000568656c6c6f0a006372df766534200a", string(b"hello")),
            // SET i 12345 (an integer string)
            ("00c139300a009d94ea2793fc08b9", string(b"12345")),
            // SET neg -7
            ("00c0f90a005e26d130d7a242ab", string(b"-7")),
            // SET lz (ab x 40, LZF-compressed)
            (
                "00c30a405002616261e042010161620a00949d5f0eb1dea445",
                string(&b"ab".repeat(40)),
            ),
            // RPUSH l a bb 12 -3 99999999999 (a quicklist of one listpack)
            (
                "1201021d1d0000000500816102826262030c01dffd02f4ffe776481700000009ff0a00c47845c9718c3894",
                list(&[b"a", b"bb", b"12", b"-3", b"99999999999"]),
            ),
            // SADD si 1 2 -300 70000 (an intset)
            (
                "0b180400000004000000d4feffff0100000002000000701101000a00ce0bedd980149edc",
                set(members(&[b"-300", b"1", b"2", b"70000"])).unwrap(),
            ),
            // SADD ss x y z (a hash table)
            ("02030178017a01790a00da91d4bd17aaee8b", set(members(&[b"x", b"z", b"y"])).unwrap()),
            // HSET h f v n 42 (a listpack)
            (
                "1012120000000400816602817602816e022a01ff0a00ff30e87f7262d991",
                hash(members(&[b"f", b"v", b"n", b"42"])).unwrap(),
            ),
            // ZADD z 1.5 m -2 n 3 o (a listpack)
            (
                "111a1a0000000600816e02dffe02816d0283312e3504816f020301ff0a00198fe000758292d3",
                Value::ZSet(
                    ZSetValue::from_entries(vec![
                        crate::zset::Entry::new(-2.0, b"n"),
                        crate::zset::Entry::new(1.5, b"m"),
                        crate::zset::Entry::new(3.0, b"o"),
                    ])
                    .unwrap(),
                ),
            ),
        ];
        for (payload, expected) in cases {
            let value = restore(&hex(payload)).unwrap_or_else(|_| panic!("{payload}"));
            let (got, expected) = (dump(&value), dump(&expected));
            if matches!(value, Value::Set(_) | Value::Hash(_)) {
                // Hash-table order: compare the restored members as sets.
                let (mut got, mut expected) = (restore(&got).unwrap(), restore(&expected).unwrap());
                assert_eq!(sorted(&mut got), sorted(&mut expected), "{payload}");
            } else {
                assert_eq!(got, expected, "{payload}");
            }
        }
    }

    fn sorted(value: &mut Value) -> Vec<Vec<u8>> {
        let mut items: Vec<Vec<u8>> = match value {
            Value::Set(set) => set.members().map(|m| m.to_vec()).collect(),
            Value::Hash(hash) => hash
                .pairs()
                .iter()
                .map(|pair| [pair.field(), b"=", pair.value()].concat())
                .collect(),
            _ => unreachable!(),
        };
        items.sort();
        items
    }

    #[test]
    fn lzf_back_references_repeat_bytes() {
        // "aaaaaaaaaa": a literal "a", then a reference one back for 9.
        assert_eq!(
            lzf_decompress(&[0x00, b'a', 0xE0, 0x00, 0x00], 10),
            Ok(b"aaaaaaaaaa".to_vec())
        );
        assert_eq!(
            lzf_decompress(&[0x00, b'a', 0xE0, 0x00, 0x00], 9),
            Err(BadPayload)
        );
    }

    /// A listpack of the string "a" and the integer 5, with `count` and
    /// the string's back length as given.
    fn small(count: u16, back: u8) -> Vec<u8> {
        let mut bytes = vec![12, 0, 0, 0];
        bytes.extend_from_slice(&count.to_le_bytes());
        bytes.extend_from_slice(&[0x81, b'a', back, 0x05, 0x01, 0xFF]);
        bytes
    }

    #[test]
    fn a_well_formed_listpack_is_read() {
        assert_eq!(
            listpack(&small(2, 2)),
            Ok(vec![b"a".to_vec(), b"5".to_vec()])
        );
        // 65535 says the count is not kept in the header.
        assert_eq!(listpack(&small(u16::MAX, 2)).map(|e| e.len()), Ok(2));
        // A 200-byte string: 202 bytes with its encoding, a two-byte back
        // length (1, then 74 flagged).
        let mut long = vec![0, 0, 0, 0, 1, 0, 0xE0, 200];
        long.extend_from_slice(&[b'x'; 200]);
        long.extend_from_slice(&[1, 74 | 0x80, 0xFF]);
        let total = long.len() as u32;
        long[..4].copy_from_slice(&total.to_le_bytes());
        assert_eq!(listpack(&long), Ok(vec![vec![b'x'; 200]]));
        // The back length's first byte (at 6 + 2 + 200) made wrong.
        long[208] = 2;
        assert_eq!(listpack(&long), Err(BadPayload));
    }

    #[test]
    fn a_listpack_whose_header_or_back_lengths_disagree_is_refused() {
        // The count says three elements, or one.
        assert_eq!(listpack(&small(3, 2)), Err(BadPayload));
        assert_eq!(listpack(&small(1, 2)), Err(BadPayload));
        // A back length that is not the entry's size, or flagged as if
        // another byte came before it.
        assert_eq!(listpack(&small(2, 3)), Err(BadPayload));
        assert_eq!(listpack(&small(2, 0x82)), Err(BadPayload));
        // The total size is not the payload's.
        let mut wrong_total = small(2, 2);
        wrong_total[0] = 13;
        assert_eq!(listpack(&wrong_total), Err(BadPayload));
        let mut trailing = small(2, 2);
        trailing.push(0);
        trailing[0] = 13;
        assert_eq!(listpack(&trailing), Err(BadPayload));
        // Too short to hold a header and the end byte.
        assert_eq!(listpack(&[6, 0, 0, 0, 0, 0]), Err(BadPayload));
    }
}
