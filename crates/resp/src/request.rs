//! Parsing what clients send: multibulk requests (`*N\r\n$L\r\n...`) and inline
//! commands (`SET k v\r\n`, as typed into telnet). The parser keeps its place across
//! reads, so a large request arriving in many pieces is scanned once, and every limit
//! is checked before memory is committed to it.

use bytes::{Buf, Bytes, BytesMut};
use std::fmt;

/// Redis's PROTO_INLINE_MAX_SIZE: the longest inline request or header line.
pub const INLINE_MAX_BYTES: usize = 64 * 1024;

/// Limits on one request; all configurable through CONFIG SET.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimits {
    /// `proto-max-bulk-len`: the longest single argument.
    pub max_bulk_bytes: usize,
    /// The most arguments one multibulk request may announce.
    pub max_multibulk_length: usize,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits {
            max_bulk_bytes: 512 * 1024 * 1024,
            max_multibulk_length: i32::MAX as usize,
        }
    }
}

/// A malformed request. The connection replies `-ERR Protocol error: <message>` and
/// closes, as Redis does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl fmt::Display for ProtocolError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "Protocol error: {}", self.0)
    }
}

impl std::error::Error for ProtocolError {}

fn protocol_error(message: &str) -> ProtocolError {
    ProtocolError(message.to_string())
}

/// Most argument places a parser keeps room for between requests.
const MAX_KEPT_SPANS: usize = 1024;

/// A request's arguments, and its bytes as sent when a proxy may pass them
/// on unchanged ([`RequestParser::next_request_with_bytes`]).
pub type SpannedRequest = (Vec<Bytes>, Option<Bytes>);

/// Streaming request parser; one per connection.
#[derive(Debug, Default)]
pub struct RequestParser {
    limits: RequestLimits,
    /// Arguments of the multibulk request being read.
    arguments: Vec<Bytes>,
    /// Arguments still expected; zero when between requests.
    remaining: usize,
    /// Bytes held in `arguments`, so the caller can enforce a query buffer limit
    /// over the whole request, not only the unparsed part.
    pending_bytes: usize,
    /// Where the arguments of a whole request lie in it (start, end), found
    /// by [`RequestParser::whole_multibulk`]; kept to reuse its memory.
    spans: Vec<(usize, usize)>,
}

impl RequestParser {
    pub fn new(limits: RequestLimits) -> Self {
        RequestParser {
            limits,
            arguments: Vec::new(),
            remaining: 0,
            pending_bytes: 0,
            spans: Vec::new(),
        }
    }

    pub fn set_limits(&mut self, limits: RequestLimits) {
        self.limits = limits;
    }

    /// Bytes of the request being read that were already taken from the buffer.
    pub fn pending_bytes(&self) -> usize {
        self.pending_bytes
    }

    /// Takes the next complete request from `buffer`. `Ok(None)` means more bytes are
    /// needed; consumed bytes are removed from `buffer`. Empty requests (`*0`, blank
    /// inline lines) are skipped. Never returns an empty argument list.
    pub fn next_request(
        &mut self,
        buffer: &mut BytesMut,
    ) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        // A request that arrived whole, as nearly every one does, is taken from
        // the buffer in one cut and its arguments are views of it.
        if let Some((arguments, _)) = self.take_whole(buffer) {
            return Ok(Some(arguments));
        }
        self.next_request_piecewise(buffer)
    }

    /// The incremental parse: what is there of the request is taken, and the
    /// rest waits for more bytes.
    fn next_request_piecewise(
        &mut self,
        buffer: &mut BytesMut,
    ) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        loop {
            if self.remaining == 0 {
                let Some(&first) = buffer.first() else {
                    return Ok(None);
                };
                if first == b'*' {
                    let Some(count) = self.multibulk_header(buffer)? else {
                        return Ok(None);
                    };
                    if count == 0 {
                        continue;
                    }
                    self.remaining = count;
                    self.arguments = Vec::with_capacity(count.min(1024));
                } else {
                    match inline_request(buffer)? {
                        None => return Ok(None),
                        Some(arguments) if arguments.is_empty() => continue,
                        Some(arguments) => return Ok(Some(arguments)),
                    }
                }
            }
            while self.remaining > 0 {
                let Some(argument) = self.bulk_argument(buffer)? else {
                    return Ok(None);
                };
                self.pending_bytes += argument.len();
                self.arguments.push(argument);
                self.remaining -= 1;
            }
            self.pending_bytes = 0;
            return Ok(Some(std::mem::take(&mut self.arguments)));
        }
    }

    /// [`RequestParser::next_request`], also handing back the request's own
    /// bytes when it is a multibulk request that arrived whole and in
    /// canonical form (every header and argument ended by `\r\n`): a proxy
    /// can then pass it on without encoding it again. The arguments are views
    /// of those bytes. Otherwise (inline commands, a request that was not
    /// whole when first looked at past its header line, one that bends the
    /// framing) the bytes are `None` and the arguments are what
    /// `next_request` gives, with its errors.
    pub fn next_request_with_bytes(
        &mut self,
        buffer: &mut BytesMut,
    ) -> Result<Option<SpannedRequest>, ProtocolError> {
        if let Some((arguments, raw)) = self.take_whole(buffer) {
            return Ok(Some((arguments, Some(raw))));
        }
        Ok(self
            .next_request_piecewise(buffer)?
            .map(|arguments| (arguments, None)))
    }

    /// The multibulk request held whole at the start of `buffer`, if it is
    /// within the limits and framed exactly, cut from it: its arguments (views
    /// of its bytes) and its bytes. None (nothing taken) leaves it to the
    /// incremental parser, which reports any error.
    fn take_whole(&mut self, buffer: &mut BytesMut) -> Option<(Vec<Bytes>, Bytes)> {
        if self.remaining != 0 {
            return None;
        }
        let total = self.whole_multibulk(buffer)?;
        let raw = buffer.split_to(total).freeze();
        let arguments = self
            .spans
            .iter()
            .map(|&(start, end)| raw.slice(start..end))
            .collect();
        if self.spans.capacity() > MAX_KEPT_SPANS {
            // One huge request does not keep its places' memory.
            self.spans = Vec::new();
        }
        Some((arguments, raw))
    }

    /// The length in bytes of a multibulk request held whole at the start of
    /// `buffer`, if it is within the limits and framed exactly, with its
    /// arguments' places left in `spans`.
    fn whole_multibulk(&mut self, buffer: &[u8]) -> Option<usize> {
        if buffer.first() != Some(&b'*') {
            return None;
        }
        let (count, mut at) = canonical_line(buffer, 1)?;
        if count <= 0
            || count > i64::from(i32::MAX)
            || count as u64 > self.limits.max_multibulk_length as u64
        {
            return None;
        }
        // Every argument takes at least 6 bytes (`$0\r\n\r\n`): a count the
        // buffer cannot hold is not whole.
        if (count as u64).saturating_mul(6) > (buffer.len() - at) as u64 {
            return None;
        }
        self.spans.clear();
        for _ in 0..count {
            if buffer.get(at) != Some(&b'$') {
                return None;
            }
            let (length, start) = canonical_line(buffer, at + 1)?;
            if length < 0 || length as u64 > self.limits.max_bulk_bytes as u64 {
                return None;
            }
            let end = start.checked_add(length as usize)?;
            if buffer.get(end..)?.get(..2)? != b"\r\n" {
                return None;
            }
            self.spans.push((start, end));
            at = end + 2;
        }
        Some(at)
    }

    /// Parses `*<count>\r\n`; returns the count (negative counts read as zero).
    fn multibulk_header(&self, buffer: &mut BytesMut) -> Result<Option<usize>, ProtocolError> {
        let Some(line_end) = find_line_end(buffer) else {
            if buffer.len() > INLINE_MAX_BYTES {
                return Err(protocol_error("too big mbulk count string"));
            }
            return Ok(None);
        };
        let count = parse_i64(&buffer[1..line_end]);
        let count = match count {
            Some(count) if count <= i32::MAX as i64 => count,
            _ => return Err(protocol_error("invalid multibulk length")),
        };
        if count > self.limits.max_multibulk_length as i64 {
            return Err(protocol_error("invalid multibulk length"));
        }
        buffer.advance(line_end + 2);
        Ok(Some(count.max(0) as usize))
    }

    /// Parses one `$<len>\r\n<data>\r\n`, or asks for more bytes.
    fn bulk_argument(&self, buffer: &mut BytesMut) -> Result<Option<Bytes>, ProtocolError> {
        let Some(line_end) = find_line_end(buffer) else {
            if buffer.len() > INLINE_MAX_BYTES {
                return Err(protocol_error("too big bulk count string"));
            }
            return Ok(None);
        };
        if buffer[0] != b'$' {
            return Err(ProtocolError(format!(
                "expected '$', got '{}'",
                buffer[0] as char
            )));
        }
        let length = match parse_i64(&buffer[1..line_end]) {
            Some(length) if length >= 0 && length as u64 <= self.limits.max_bulk_bytes as u64 => {
                length as usize
            }
            _ => return Err(protocol_error("invalid bulk length")),
        };
        let needed = line_end + 2 + length + 2;
        if buffer.len() < needed {
            // Make room ahead for a large argument instead of growing by doubling,
            // but commit at most a megabyte before its bytes actually arrive.
            buffer.reserve((needed - buffer.len()).min(1 << 20));
            return Ok(None);
        }
        buffer.advance(line_end + 2);
        let argument = buffer.split_to(length).freeze();
        buffer.advance(2);
        Ok(Some(argument))
    }
}

/// The non-negative decimal at `from`, in canonical form (no sign, no
/// leading zero, at most 18 digits) and ended by `\r\n`, and where the next
/// line starts. Anything else (negative counts and lengths included) is left
/// to the incremental parser.
fn canonical_line(buffer: &[u8], from: usize) -> Option<(i64, usize)> {
    let rest = buffer.get(from..)?;
    let mut value: i64 = 0;
    let mut digits = 0;
    while let Some(&byte) = rest.get(digits) {
        if !byte.is_ascii_digit() {
            break;
        }
        value = value * 10 + i64::from(byte - b'0');
        digits += 1;
        if digits > 18 {
            return None;
        }
    }
    let canonical = match digits {
        0 => false,
        1 => true,
        _ => rest[0] != b'0',
    };
    (canonical && rest.get(digits..digits + 2)? == b"\r\n").then_some((value, from + digits + 2))
}

/// Index of the `\r` ending the first line, if the line and the byte after it are
/// present. Like Redis, the byte after `\r` is assumed to be `\n`.
fn find_line_end(buffer: &[u8]) -> Option<usize> {
    let carriage_return = buffer.iter().position(|&byte| byte == b'\r')?;
    (carriage_return + 1 < buffer.len()).then_some(carriage_return)
}

/// A signed 64-bit decimal in canonical form only, as Redis's `string2ll` reads
/// request lengths (no spaces, no `+`, no leading zero, no `-0`).
fn parse_i64(digits: &[u8]) -> Option<i64> {
    let (negative, digits) = match digits {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, digits),
    };
    // Redis's `string2ll`: only the canonical form, so no leading zero
    // (`007`) and no `-0`.
    match digits {
        [] => return None,
        [b'0', _, ..] => return None,
        [b'0'] if negative => return None,
        _ => {}
    }
    // Accumulated towards the sign, so i64::MIN parses too.
    let mut value: i64 = 0;
    for &byte in digits {
        let digit = match byte {
            b'0'..=b'9' => i64::from(byte - b'0'),
            _ => return None,
        };
        value = value.checked_mul(10)?;
        value = if negative {
            value.checked_sub(digit)?
        } else {
            value.checked_add(digit)?
        };
    }
    Some(value)
}

fn inline_request(buffer: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    let Some(newline) = buffer.iter().position(|&byte| byte == b'\n') else {
        if buffer.len() > INLINE_MAX_BYTES {
            return Err(protocol_error("too big inline request"));
        }
        return Ok(None);
    };
    if newline > INLINE_MAX_BYTES {
        return Err(protocol_error("too big inline request"));
    }
    let line = buffer.split_to(newline + 1);
    let mut text = &line[..newline];
    if let Some(stripped) = text.strip_suffix(b"\r") {
        text = stripped;
    }
    split_inline_args(text)
        .map(|arguments| Some(arguments.into_iter().map(Bytes::from).collect()))
        .ok_or_else(|| protocol_error("unbalanced quotes in request"))
}

/// Splits an inline command line into arguments with Redis's quoting rules: double
/// quotes with `\n \r \t \b \a \xHH` escapes, single quotes with `\'`, and a closing
/// quote must be followed by a space or the end. `None` on unbalanced quotes.
pub fn split_inline_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    // Redis splits a C string: a NUL byte ends the line.
    let line = match line.iter().position(|&byte| byte == 0) {
        Some(end) => &line[..end],
        None => line,
    };
    let mut arguments = Vec::new();
    let mut position = 0;
    let is_space = |byte: u8| matches!(byte, b' ' | b'\n' | b'\r' | b'\t' | 0x0b | 0x0c);
    loop {
        while position < line.len() && is_space(line[position]) {
            position += 1;
        }
        if position >= line.len() {
            return Some(arguments);
        }
        let mut current = Vec::new();
        let mut in_double = false;
        let mut in_single = false;
        loop {
            if in_double {
                let byte = *line.get(position)?;
                if byte == b'\\' && position + 3 < line.len() && line[position + 1] == b'x' {
                    if let (Some(high), Some(low)) =
                        (hex_value(line[position + 2]), hex_value(line[position + 3]))
                    {
                        current.push(high * 16 + low);
                        position += 4;
                        continue;
                    }
                }
                if byte == b'\\' && position + 1 < line.len() {
                    current.push(match line[position + 1] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                    position += 2;
                    continue;
                }
                if byte == b'"' {
                    if position + 1 < line.len() && !is_space(line[position + 1]) {
                        return None;
                    }
                    position += 1;
                    break;
                }
                current.push(byte);
                position += 1;
            } else if in_single {
                let byte = *line.get(position)?;
                if byte == b'\\' && line.get(position + 1) == Some(&b'\'') {
                    current.push(b'\'');
                    position += 2;
                    continue;
                }
                if byte == b'\'' {
                    if position + 1 < line.len() && !is_space(line[position + 1]) {
                        return None;
                    }
                    position += 1;
                    break;
                }
                current.push(byte);
                position += 1;
            } else {
                let Some(&byte) = line.get(position) else {
                    break;
                };
                match byte {
                    b' ' | b'\n' | b'\r' | b'\t' => break,
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    other => current.push(other),
                }
                position += 1;
            }
        }
        arguments.push(current);
    }
}

fn hex_value(byte: u8) -> Option<u8> {
    (byte as char).to_digit(16).map(|value| value as u8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse_all(input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut parser = RequestParser::default();
        let mut buffer = BytesMut::from(input);
        let mut requests = Vec::new();
        while let Some(request) = parser.next_request(&mut buffer)? {
            requests.push(request.iter().map(|argument| argument.to_vec()).collect());
        }
        Ok(requests)
    }

    fn strings(request: &[&str]) -> Vec<Vec<u8>> {
        request
            .iter()
            .map(|argument| argument.as_bytes().to_vec())
            .collect()
    }

    #[test]
    fn length_digits_parse_as_redis_does() {
        for (text, expected) in [
            ("0", Some(0)),
            ("007", None),
            ("-0", None),
            ("10", Some(10)),
            ("-1", Some(-1)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("-9223372036854775809", None),
            ("+5", None),
            ("", None),
            ("-", None),
            ("1 ", None),
            ("1a", None),
            ("--1", None),
        ] {
            assert_eq!(parse_i64(text.as_bytes()), expected, "{text:?}");
        }
    }

    proptest! {
        #[test]
        fn length_digits_are_exactly_the_canonical_decimals(bytes in proptest::collection::vec(
            prop_oneof![Just(b'-'), Just(b'+'), Just(b'x'), b'0'..=b'9'], 0..22)
        ) {
            // The integers whose decimal form is exactly these bytes.
            let canonical = std::str::from_utf8(&bytes)
                .ok()
                .and_then(|text| text.parse::<i64>().ok())
                .filter(|value| value.to_string().as_bytes() == bytes);
            prop_assert_eq!(parse_i64(&bytes), canonical);
        }
    }

    #[test]
    fn pipelined_multibulk_and_inline() {
        let requests =
            parse_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n*0\r\n\r\nset a \"b c\"\r\n")
                .unwrap();
        assert_eq!(
            requests,
            vec![
                strings(&["GET", "k"]),
                strings(&["PING"]),
                strings(&["set", "a", "b c"])
            ]
        );
    }

    #[test]
    fn incomplete_input_waits_byte_by_byte() {
        let input = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nva\r\nl\r\n";
        let mut parser = RequestParser::default();
        let mut buffer = BytesMut::new();
        let mut found = None;
        for (index, byte) in input.iter().enumerate() {
            buffer.extend_from_slice(&[*byte]);
            if let Some(request) = parser.next_request(&mut buffer).unwrap() {
                assert_eq!(index, input.len() - 1);
                found = Some(request);
            }
        }
        let request = found.unwrap();
        assert_eq!(&request[2][..], b"va\r\nl");
    }

    #[test]
    fn protocol_errors_use_redis_texts() {
        let message = |input: &[u8]| parse_all(input).unwrap_err().to_string();
        assert_eq!(
            message(b"*x\r\n"),
            "Protocol error: invalid multibulk length"
        );
        assert_eq!(
            message(b"*3000000000\r\n"),
            "Protocol error: invalid multibulk length"
        );
        // Lengths in any but their canonical form, as redis-server answers them.
        assert_eq!(
            message(b"*01\r\n$4\r\nPING\r\n"),
            "Protocol error: invalid multibulk length"
        );
        assert_eq!(
            message(b"*-0\r\n"),
            "Protocol error: invalid multibulk length"
        );
        assert_eq!(
            message(b"*1\r\n$04\r\nPING\r\n"),
            "Protocol error: invalid bulk length"
        );
        assert_eq!(
            message(b"*1\r\n+foo\r\n"),
            "Protocol error: expected '$', got '+'"
        );
        assert_eq!(
            message(b"*1\r\n$-5\r\n"),
            "Protocol error: invalid bulk length"
        );
        assert_eq!(
            message(b"*1\r\n$600000000\r\n"),
            "Protocol error: invalid bulk length"
        );
        assert_eq!(
            message(b"set \"a\r\n"),
            "Protocol error: unbalanced quotes in request"
        );
        assert_eq!(
            message(b"set \"a\"b\r\n"),
            "Protocol error: unbalanced quotes in request"
        );
        let long_inline = vec![b'a'; INLINE_MAX_BYTES + 1];
        assert_eq!(
            message(&long_inline),
            "Protocol error: too big inline request"
        );
        let mut long_count = b"*".to_vec();
        long_count.extend(vec![b'1'; INLINE_MAX_BYTES + 1]);
        assert_eq!(
            message(&long_count),
            "Protocol error: too big mbulk count string"
        );
    }

    #[test]
    fn configured_bulk_limit_applies() {
        let mut parser = RequestParser::new(RequestLimits {
            max_bulk_bytes: 4,
            ..RequestLimits::default()
        });
        let mut buffer = BytesMut::from(&b"*1\r\n$5\r\nhello\r\n"[..]);
        assert_eq!(
            parser.next_request(&mut buffer).unwrap_err().0,
            "invalid bulk length"
        );
    }

    #[test]
    fn inline_quoting() {
        let split = |line: &str| split_inline_args(line.as_bytes());
        assert_eq!(
            split("  a  'b c' \"\\x41\\n\""),
            Some(strings(&["a", "b c", "A\n"]))
        );
        assert_eq!(split("'it\\'s'"), Some(strings(&["it's"])));
        assert_eq!(split("a\"b c\"d"), None);
        assert_eq!(split(""), Some(vec![]));
        assert_eq!(split("a\0b c"), Some(strings(&["a"])));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(input in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = parse_all(&input);
        }

        #[test]
        fn arbitrary_requests_round_trip(
            request in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..8),
            split_at in 0usize..400,
        ) {
            let mut wire = format!("*{}\r\n", request.len()).into_bytes();
            for argument in &request {
                wire.extend(format!("${}\r\n", argument.len()).into_bytes());
                wire.extend(argument);
                wire.extend(b"\r\n");
            }
            let split_at = split_at.min(wire.len());
            let mut parser = RequestParser::default();
            let mut buffer = BytesMut::from(&wire[..split_at]);
            let first = parser.next_request(&mut buffer).unwrap();
            let parsed = match first {
                Some(parsed) => parsed,
                None => {
                    buffer.extend_from_slice(&wire[split_at..]);
                    parser.next_request(&mut buffer).unwrap().unwrap()
                }
            };
            let parsed: Vec<Vec<u8>> = parsed.iter().map(|argument| argument.to_vec()).collect();
            prop_assert_eq!(parsed, request);
        }

        /// A buffer holding whole requests (cut at once, arguments as views)
        /// parses to what the same bytes give arriving one at a time (header by
        /// header, argument by argument), errors included, and leaves the same
        /// bytes behind.
        #[test]
        fn whole_requests_parse_as_requests_read_piece_by_piece(
            pieces in proptest::collection::vec(prop_oneof![
                Just(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n".to_vec()),
                Just(b"*2\r\n$3\r\nGET\r\n$5\r\nlarge\r\n".to_vec()),
                Just(b"*1\r\n$4\r\nPING\r\n".to_vec()),
                Just(b"*0\r\n".to_vec()),
                Just(b"*-1\r\n".to_vec()),
                Just(b"*3\r\n$1\r\nx\r\n".to_vec()),
                Just(b"*1\r\n$2\r\nabXY".to_vec()),
                Just(b"*1\r\n$2\n\nab\r\n".to_vec()),
                Just(b"*1\r\n$02\r\nab\r\n".to_vec()),
                Just(b"*1\r\n:2\r\nab\r\n".to_vec()),
                Just(b"*4\r\n$1\r\na\r\n".to_vec()),
                Just(b"ping\r\n".to_vec()),
                proptest::collection::vec(any::<u8>(), 0..12),
            ], 1..6),
        ) {
            let wire: Vec<u8> = pieces.concat();
            let limits = RequestLimits { max_bulk_bytes: 4, max_multibulk_length: 3 };
            let mut at_once = RequestParser::new(limits);
            let mut whole_buffer = BytesMut::from(&wire[..]);
            let mut whole = Vec::new();
            let whole_end = loop {
                match at_once.next_request(&mut whole_buffer) {
                    Ok(Some(request)) => whole.push(request),
                    Ok(None) => break None,
                    Err(error) => break Some(error),
                }
            };
            let mut piecewise = RequestParser::new(limits);
            let mut piece_buffer = BytesMut::new();
            let mut pieces = Vec::new();
            let mut piece_end = None;
            'feed: for &byte in &wire {
                piece_buffer.extend_from_slice(&[byte]);
                loop {
                    match piecewise.next_request(&mut piece_buffer) {
                        Ok(Some(request)) => pieces.push(request),
                        Ok(None) => break,
                        Err(error) => {
                            piece_end = Some(error);
                            break 'feed;
                        }
                    }
                }
            }
            prop_assert_eq!(&whole, &pieces);
            prop_assert_eq!(&whole_end, &piece_end);
            if whole_end.is_none() {
                prop_assert_eq!(&whole_buffer[..], &piece_buffer[..]);
            }
        }

        /// Whatever arrives, in whatever pieces, the spanned parse gives the
        /// plain parse's requests and errors, and the bytes it hands back are
        /// exactly the ones the request took from the buffer.
        #[test]
        fn spanned_parse_agrees_with_the_plain_one(
            pieces in proptest::collection::vec(prop_oneof![
                Just(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".to_vec()),
                Just(b"*1\r\n$4\r\nPING\r\n".to_vec()),
                Just(b"*0\r\n".to_vec()),
                Just(b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nva\r\nl\r\n".to_vec()),
                Just(b"*1\r\n$4\r\nPINGxx".to_vec()),
                Just(b"*1\n$4\r\nPING\r\n".to_vec()),
                Just(b"*01\r\n$4\r\nPING\r\n".to_vec()),
                Just(b"*2\r\n$1\r\na\r\n$-1\r\n".to_vec()),
                Just(b"*1\r\n$5\r\nhello\r\n".to_vec()),
                Just(b"get k\r\n".to_vec()),
                proptest::collection::vec(any::<u8>(), 0..12),
            ], 1..6),
            cuts in proptest::collection::vec(0usize..64, 0..4),
        ) {
            let wire: Vec<u8> = pieces.concat();
            let limits = RequestLimits { max_bulk_bytes: 4, ..RequestLimits::default() };
            let mut plain = RequestParser::new(limits);
            let mut spanned = RequestParser::new(limits);
            let (mut plain_buffer, mut spanned_buffer) = (BytesMut::new(), BytesMut::new());
            let mut at = 0;
            let mut ends: Vec<usize> = cuts.iter().map(|cut| (*cut).min(wire.len())).collect();
            ends.sort_unstable();
            ends.push(wire.len());
            for end in ends {
                let end = end.max(at);
                plain_buffer.extend_from_slice(&wire[at..end]);
                spanned_buffer.extend_from_slice(&wire[at..end]);
                at = end;
                loop {
                    let before = spanned_buffer.clone();
                    let expected = plain.next_request(&mut plain_buffer);
                    let got = spanned.next_request_with_bytes(&mut spanned_buffer);
                    match (expected, got) {
                        (Err(expected), Err(got)) => {
                            prop_assert_eq!(expected, got);
                            return Ok(());
                        }
                        (Ok(None), Ok(None)) => break,
                        (Ok(Some(expected)), Ok(Some((got, bytes)))) => {
                            prop_assert_eq!(&expected, &got);
                            if let Some(bytes) = bytes {
                                let taken = before.len() - spanned_buffer.len();
                                prop_assert_eq!(&bytes[..], &before[..taken]);
                                // Handed-back bytes are the canonical encoding.
                                let mut canonical = format!("*{}\r\n", got.len()).into_bytes();
                                for argument in &got {
                                    canonical.extend(format!("${}\r\n", argument.len()).into_bytes());
                                    canonical.extend_from_slice(argument);
                                    canonical.extend_from_slice(b"\r\n");
                                }
                                prop_assert_eq!(&bytes[..], &canonical[..]);
                            }
                        }
                        (expected, got) => {
                            prop_assert!(false, "plain {:?}, spanned {:?}", expected, got);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn whole_canonical_requests_come_with_their_bytes() {
        let mut parser = RequestParser::default();
        let wire = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\nPING\r\n*1\r\n$3\r\nab";
        let mut buffer = BytesMut::from(&wire[..]);
        let (arguments, bytes) = parser
            .next_request_with_bytes(&mut buffer)
            .unwrap()
            .unwrap();
        assert_eq!(arguments, vec![Bytes::from("GET"), Bytes::from("k")]);
        assert_eq!(
            bytes.as_deref(),
            Some(&b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"[..])
        );
        let (_, bytes) = parser
            .next_request_with_bytes(&mut buffer)
            .unwrap()
            .unwrap();
        assert_eq!(bytes.as_deref(), Some(&b"*1\r\n$4\r\nPING\r\n"[..]));
        // Inline: arguments only.
        let (arguments, bytes) = parser
            .next_request_with_bytes(&mut buffer)
            .unwrap()
            .unwrap();
        assert_eq!((arguments, bytes), (vec![Bytes::from("PING")], None));
        // Arrived in pieces: the incremental parser takes over, without bytes.
        assert_eq!(parser.next_request_with_bytes(&mut buffer).unwrap(), None);
        buffer.extend_from_slice(b"c\r\n");
        let (arguments, bytes) = parser
            .next_request_with_bytes(&mut buffer)
            .unwrap()
            .unwrap();
        assert_eq!((arguments, bytes), (vec![Bytes::from("abc")], None));
    }
}
