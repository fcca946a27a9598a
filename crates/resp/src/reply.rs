//! Parsing replies, for clients of slotraft written in Rust (tests, the router).

use crate::Frame;
use bytes::Bytes;
use std::fmt;

/// Deepest nesting accepted; deeper input is rejected instead of recursing further.
const MAX_DEPTH: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyError(pub String);

impl fmt::Display for ReplyError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "malformed reply: {}", self.0)
    }
}

impl std::error::Error for ReplyError {}

/// Parses one reply from the front of `input`: `Ok(Some((frame, consumed)))`, or
/// `Ok(None)` when `input` holds only part of it.
pub fn parse_reply(input: &[u8]) -> Result<Option<(Frame, usize)>, ReplyError> {
    let mut position = 0;
    match parse_at(input, &mut position, 0)? {
        Some(frame) => Ok(Some((frame, position))),
        None => Ok(None),
    }
}

/// The length of the reply at the front of `input` without building it (a
/// proxy passes replies through as bytes): `Ok(Some(length))`, or `Ok(None)`
/// when `input` holds only part of it. Accepts what [`parse_reply`] accepts.
pub fn reply_length(input: &[u8]) -> Result<Option<usize>, ReplyError> {
    // The replies a proxy mostly passes, measured without the general
    // (recursive) walk: a bulk string, or a status, error or integer line.
    match input.first() {
        Some(b'$') => {
            if let Some(end) = plain_bulk_end(input, 0) {
                return Ok(end);
            }
        }
        Some(b'+' | b'-' | b':') => {
            if let Some(at) = input.iter().position(|&byte| byte == b'\r') {
                if input.get(at + 1) == Some(&b'\n') {
                    return Ok(Some(at + 2));
                }
            }
        }
        _ => {}
    }
    let mut position = 0;
    match skip_at(input, &mut position, 0)? {
        Some(()) => Ok(Some(position)),
        None => Ok(None),
    }
}

/// The end of the line starting at `position` (the index of its `\r`).
fn line_end(input: &[u8], position: usize) -> Option<usize> {
    let mut from = position;
    loop {
        let offset = input.get(from..)?.iter().position(|byte| *byte == b'\r')?;
        let at = from + offset;
        match input.get(at + 1) {
            Some(b'\n') => return Some(at),
            Some(_) => from = at + 1,
            None => return None,
        }
    }
}

fn skip_at(input: &[u8], position: &mut usize, depth: usize) -> Result<Option<()>, ReplyError> {
    if depth > MAX_DEPTH {
        return Err(fail("nested too deeply"));
    }
    let Some(&marker) = input.get(*position) else {
        return Ok(None);
    };
    if marker == b'$' {
        if let Some(end) = plain_bulk_end(input, *position) {
            return Ok(end.map(|end| *position = end));
        }
    }
    let Some(end) = line_end(input, *position + 1) else {
        return Ok(None);
    };
    let line = &input[*position + 1..end];
    let after_line = end + 2;
    match marker {
        b'+' | b'-' | b':' | b'_' | b'#' | b',' | b'(' => {
            *position = after_line;
            Ok(Some(()))
        }
        b'$' | b'=' | b'!' => {
            let length = parse_number(line)?;
            if length < 0 {
                *position = after_line;
                return Ok(Some(()));
            }
            let end = after_line + length as usize + 2;
            if input.len() < end {
                return Ok(None);
            }
            *position = end;
            Ok(Some(()))
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let count = parse_number(line)?;
            let mut at = after_line;
            if count >= 0 {
                let elements = if matches!(marker, b'%' | b'|') {
                    2 * count
                } else {
                    count
                };
                for _ in 0..elements {
                    if skip_at(input, &mut at, depth + 1)?.is_none() {
                        return Ok(None);
                    }
                }
                if marker == b'|' {
                    // An attribute precedes the reply it describes.
                    if skip_at(input, &mut at, depth + 1)?.is_none() {
                        return Ok(None);
                    }
                }
            }
            *position = at;
            Ok(Some(()))
        }
        _ => Err(fail("unknown type marker")),
    }
}

fn fail(message: &str) -> ReplyError {
    ReplyError(message.to_string())
}

fn read_line<'a>(input: &'a [u8], position: &mut usize) -> Option<&'a [u8]> {
    let rest = input.get(*position..)?;
    let end = rest.windows(2).position(|pair| pair == b"\r\n")?;
    *position += end + 2;
    Some(&rest[..end])
}

/// The end of the bulk string at `start` when its length line is plain
/// digits, the form every server sends: `Some(Some(end))`, or `Some(None)`
/// while incomplete; `None` leaves any other form to the general path.
fn plain_bulk_end(input: &[u8], start: usize) -> Option<Option<usize>> {
    let mut at = start + 1;
    let mut length = 0usize;
    loop {
        let Some(&byte) = input.get(at) else {
            return Some(None);
        };
        match byte {
            b'0'..=b'9' if at - start <= 18 => {
                length = length * 10 + usize::from(byte - b'0');
                at += 1;
            }
            b'\r' if at > start + 1 => break,
            _ => return None,
        }
    }
    match input.get(at + 1) {
        None => return Some(None),
        Some(b'\n') => {}
        Some(_) => return None,
    }
    let end = at + 2 + length + 2;
    Some((input.len() >= end).then_some(end))
}

fn parse_number(line: &[u8]) -> Result<i64, ReplyError> {
    if !line.is_empty() && line.len() <= 18 && line.iter().all(u8::is_ascii_digit) {
        return Ok(line
            .iter()
            .fold(0i64, |value, digit| value * 10 + i64::from(digit - b'0')));
    }
    std::str::from_utf8(line)
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| fail("bad integer"))
}

fn parse_at(input: &[u8], position: &mut usize, depth: usize) -> Result<Option<Frame>, ReplyError> {
    if depth > MAX_DEPTH {
        return Err(fail("nested too deeply"));
    }
    let Some(&marker) = input.get(*position) else {
        return Ok(None);
    };
    let start = *position;
    *position += 1;
    let Some(line) = read_line(input, position) else {
        *position = start;
        return Ok(None);
    };
    let text = || Bytes::copy_from_slice(line);
    let frame = match marker {
        b'+' => Frame::Simple(text()),
        b'-' => Frame::Error(text()),
        b':' => Frame::Integer(parse_number(line)?),
        b'_' => Frame::Null,
        b'#' => Frame::Boolean(line == b"t"),
        b',' => {
            let value = std::str::from_utf8(line).map_err(|_| fail("bad double"))?;
            Frame::Double(match value {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                other => other.parse().map_err(|_| fail("bad double"))?,
            })
        }
        b'(' => Frame::BigNumber(text()),
        b'$' | b'=' | b'!' => {
            let length = parse_number(line)?;
            if length < 0 {
                Frame::Null
            } else {
                let length = length as usize;
                let end = *position + length;
                if input.len() < end + 2 {
                    *position = start;
                    return Ok(None);
                }
                let data = Bytes::copy_from_slice(&input[*position..end]);
                *position = end + 2;
                match marker {
                    b'$' => Frame::Bulk(data),
                    b'=' => Frame::Verbatim(data),
                    _ => Frame::Error(data),
                }
            }
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let count = parse_number(line)?;
            if count < 0 {
                Frame::NullArray
            } else {
                let elements = if matches!(marker, b'%' | b'|') {
                    2 * count
                } else {
                    count
                };
                let mut items = Vec::with_capacity((elements as usize).min(1024));
                for _ in 0..elements {
                    match parse_at(input, position, depth + 1)? {
                        Some(item) => items.push(item),
                        None => {
                            *position = start;
                            return Ok(None);
                        }
                    }
                }
                match marker {
                    b'*' => Frame::Array(items),
                    b'~' => Frame::Set(items),
                    b'>' => Frame::Push(items),
                    b'|' => {
                        // An attribute precedes the reply it describes; return that reply.
                        return parse_at(input, position, depth + 1);
                    }
                    _ => {
                        let mut pairs = Vec::with_capacity(items.len() / 2);
                        let mut iterator = items.into_iter();
                        while let (Some(key), Some(value)) = (iterator.next(), iterator.next()) {
                            pairs.push((key, value));
                        }
                        Frame::Map(pairs)
                    }
                }
            }
        }
        _ => return Err(fail("unknown type marker")),
    };
    Ok(Some(frame))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{encode, Protocol};
    use bytes::BytesMut;

    #[test]
    fn round_trips_resp3() {
        let frame = Frame::Array(vec![
            Frame::Map(vec![(Frame::bulk("k"), Frame::Double(2.5))]),
            Frame::Set(vec![Frame::Integer(1)]),
            Frame::Null,
            Frame::Boolean(true),
            Frame::Error(Bytes::from_static(b"ERR x")),
        ]);
        let mut wire = BytesMut::new();
        encode(&frame, Protocol::Resp3, &mut wire);
        let (parsed, used) = parse_reply(&wire).unwrap().unwrap();
        assert_eq!(used, wire.len());
        assert_eq!(parsed, frame);
        for cut in 0..wire.len() {
            assert_eq!(parse_reply(&wire[..cut]).unwrap(), None);
            assert_eq!(reply_length(&wire[..cut]).unwrap(), None);
        }
        assert_eq!(reply_length(&wire).unwrap(), Some(wire.len()));
    }

    #[test]
    fn lengths_match_the_parser() {
        let cases: [&[u8]; 8] = [
            b"+OK\r\n",
            b"$-1\r\n",
            b"*-1\r\n",
            b"$5\r\na\r\nbc\r\n",
            b"*2\r\n$1\r\nx\r\n:7\r\n",
            b"|1\r\n+k\r\n+v\r\n:1\r\n",
            b"%1\r\n+a\r\n*0\r\n",
            b">2\r\n+message\r\n$0\r\n\r\n",
        ];
        for case in cases {
            let mut wire = case.to_vec();
            wire.extend_from_slice(b":9\r\n");
            let parsed = parse_reply(&wire).unwrap().map(|(_, used)| used);
            assert_eq!(reply_length(&wire).unwrap(), parsed, "{case:?}");
            assert_eq!(parsed, Some(case.len()));
        }
        assert!(reply_length(b"?x\r\n").is_err());
    }

    /// Encoded replies (bulk strings holding CR and LF too), cut short or
    /// with one byte changed, so inputs are whole replies, parts of one, or
    /// near misses.
    fn resp_like() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            proptest::collection::vec(prop_oneof![Just(b'\r'), Just(b'\n'), any::<u8>()], 0..12)
                .prop_map(|bytes| Frame::Bulk(Bytes::from(bytes))),
            any::<i64>().prop_map(Frame::Integer),
            Just(Frame::Null),
            Just(Frame::Simple(Bytes::from_static(b"OK"))),
        ];
        let frame = leaf.prop_recursive(3, 16, 4, |inner| {
            proptest::collection::vec(inner, 0..4).prop_map(Frame::Array)
        });
        let bytes = prop_oneof![Just(b'$'), Just(b'-'), Just(b'\r'), Just(b'9'), any::<u8>()];
        (
            frame,
            any::<bool>(),
            any::<prop::sample::Index>(),
            bytes,
            0..3usize,
        )
            .prop_map(|(frame, resp3, at, byte, change)| {
                let mut wire = BytesMut::new();
                let protocol = if resp3 {
                    Protocol::Resp3
                } else {
                    Protocol::Resp2
                };
                encode(&frame, protocol, &mut wire);
                let mut wire = wire.to_vec();
                let at = at.index(wire.len().max(1));
                match change {
                    0 => {}
                    1 => wire.truncate(at),
                    _ => {
                        if let Some(slot) = wire.get_mut(at) {
                            *slot = byte;
                        }
                    }
                }
                wire
            })
    }

    proptest::proptest! {
        #[test]
        fn a_reply_is_as_long_as_the_parser_reads(wire in resp_like()) {
            let length = reply_length(&wire);
            let parsed = parse_reply(&wire).map(|parsed| parsed.map(|(_, used)| used));
            // What the parser accepts is measured exactly; where it refuses
            // (`:` followed by no number, say), skipping may be lenient.
            if let Ok(parsed) = parsed {
                proptest::prop_assert_eq!(length, Ok(parsed));
            }
        }
    }
}
