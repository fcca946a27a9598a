//! Writing frames. RESP3-only shapes degrade to their RESP2 forms exactly as Redis
//! 7.2 does (maps flatten, sets become arrays, doubles and big numbers become bulk
//! strings, booleans become 1/0, both nulls keep their RESP2 spelling).

use crate::Frame;
use bytes::{BufMut, BytesMut};

/// The protocol a connection speaks, chosen with `HELLO`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    #[default]
    Resp2,
    Resp3,
}

/// Appends `frame` to `out` in the given protocol.
pub fn encode(frame: &Frame, protocol: Protocol, out: &mut BytesMut) {
    let resp3 = protocol == Protocol::Resp3;
    match frame {
        Frame::Simple(text) => line(out, b'+', text),
        Frame::Error(text) => line(out, b'-', text),
        Frame::Integer(value) => integer_line(out, b':', *value),
        Frame::Bulk(data) => bulk(out, b'$', data),
        Frame::Null => out.put_slice(if resp3 { b"_\r\n" } else { b"$-1\r\n" }),
        Frame::NullArray => out.put_slice(if resp3 { b"_\r\n" } else { b"*-1\r\n" }),
        Frame::Array(items) => {
            integer_line(out, b'*', items.len() as i64);
            for item in items {
                encode(item, protocol, out);
            }
        }
        Frame::Map(pairs) => {
            if resp3 {
                integer_line(out, b'%', pairs.len() as i64);
            } else {
                integer_line(out, b'*', 2 * pairs.len() as i64);
            }
            for (key, value) in pairs {
                encode(key, protocol, out);
                encode(value, protocol, out);
            }
        }
        Frame::Set(items) => {
            integer_line(out, if resp3 { b'~' } else { b'*' }, items.len() as i64);
            for item in items {
                encode(item, protocol, out);
            }
        }
        Frame::Bulks(array) => {
            integer_line(out, b'*', array.len() as i64);
            out.put_slice(array.wire());
        }
        Frame::Push(items) => {
            integer_line(out, if resp3 { b'>' } else { b'*' }, items.len() as i64);
            for item in items {
                encode(item, protocol, out);
            }
        }
        Frame::Double(value) => {
            let text = format_double(*value);
            if resp3 {
                line(out, b',', text.as_bytes());
            } else {
                bulk(out, b'$', text.as_bytes());
            }
        }
        Frame::DoubleText(text) => {
            if resp3 {
                line(out, b',', text);
            } else {
                bulk(out, b'$', text);
            }
        }
        Frame::Boolean(value) => {
            if resp3 {
                out.put_slice(if *value { b"#t\r\n" } else { b"#f\r\n" });
            } else {
                out.put_slice(if *value { b":1\r\n" } else { b":0\r\n" });
            }
        }
        Frame::BigNumber(digits) => {
            if resp3 {
                line(out, b'(', digits);
            } else {
                bulk(out, b'$', digits);
            }
        }
        Frame::Verbatim(data) => {
            if resp3 {
                bulk(out, b'=', data);
            } else {
                // RESP2 gets the text without the `txt:` prefix.
                bulk(out, b'$', data.get(4..).unwrap_or_default());
            }
        }
    }
}

fn line(out: &mut BytesMut, marker: u8, text: &[u8]) {
    out.reserve(text.len() + 3);
    out.put_u8(marker);
    out.put_slice(text);
    out.put_slice(b"\r\n");
}

fn integer_line(out: &mut BytesMut, marker: u8, value: i64) {
    let mut digits = itoa_buffer();
    let text = format_i64(value, &mut digits);
    out.reserve(text.len() + 3);
    out.put_u8(marker);
    out.put_slice(text);
    out.put_slice(b"\r\n");
}

fn bulk(out: &mut BytesMut, marker: u8, data: &[u8]) {
    let mut digits = itoa_buffer();
    let length = format_i64(data.len() as i64, &mut digits);
    out.reserve(data.len() + length.len() + 5);
    out.put_u8(marker);
    out.put_slice(length);
    out.put_slice(b"\r\n");
    out.put_slice(data);
    out.put_slice(b"\r\n");
}

fn itoa_buffer() -> [u8; 20] {
    [0; 20]
}

/// Formats `value` into the tail of `buffer` and returns its decimal digits
/// (no allocation).
pub fn format_i64(value: i64, buffer: &mut [u8; 20]) -> &[u8] {
    let negative = value < 0;
    let mut magnitude = value.unsigned_abs();
    let mut position = buffer.len();
    loop {
        position -= 1;
        buffer[position] = b'0' + (magnitude % 10) as u8;
        magnitude /= 10;
        if magnitude == 0 {
            break;
        }
    }
    if negative {
        position -= 1;
        buffer[position] = b'-';
    }
    &buffer[position..]
}

/// Formats a double the way Redis 7.2 replies with one: `inf`, `-inf`, `nan`, `0`,
/// `-0`; integral values within +-2^62 as integers; otherwise the shortest digits
/// that round-trip, in plain notation for moderate exponents and `d.ddde+X`
/// otherwise (the grisu layout Redis uses).
pub fn format_double(value: f64) -> String {
    if value.is_nan() {
        return "nan".to_string();
    }
    if value.is_infinite() {
        return if value < 0.0 { "-inf" } else { "inf" }.to_string();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    const HALF_RANGE: f64 = (i64::MAX / 2) as f64;
    if (-HALF_RANGE..=HALF_RANGE).contains(&value) && value.fract() == 0.0 {
        return (value as i64).to_string();
    }
    // Shortest round-trip digits and exponent: value = 0.d1d2... * 10^(exp+1).
    let scientific = format!("{:e}", value.abs());
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let digit_count = digits.len() as i32;
    // value = digits * 10^k
    let k = exponent - (digit_count - 1);
    let magnitude_exponent = (k + digit_count - 1).abs();
    let mut text = String::with_capacity(32);
    if value < 0.0 {
        text.push('-');
    }
    if k >= 0 && magnitude_exponent < digit_count + 7 {
        text.push_str(&digits);
        for _ in 0..k {
            text.push('0');
        }
        return text;
    }
    if k < 0 && (k > -7 || magnitude_exponent < 4) {
        let offset = digit_count + k;
        if offset <= 0 {
            text.push_str("0.");
            for _ in 0..(-offset) {
                text.push('0');
            }
            text.push_str(&digits);
        } else {
            let (whole, fraction) = digits.split_at(offset as usize);
            text.push_str(whole);
            text.push('.');
            text.push_str(fraction);
        }
        return text;
    }
    text.push_str(&digits[..1]);
    if digit_count > 1 {
        text.push('.');
        text.push_str(&digits[1..]);
    }
    text.push('e');
    text.push(if exponent < 0 { '-' } else { '+' });
    text.push_str(&exponent.abs().to_string());
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn both(frame: &Frame) -> (String, String) {
        let mut two = BytesMut::new();
        let mut three = BytesMut::new();
        encode(frame, Protocol::Resp2, &mut two);
        encode(frame, Protocol::Resp3, &mut three);
        (
            String::from_utf8(two.to_vec()).unwrap(),
            String::from_utf8(three.to_vec()).unwrap(),
        )
    }

    #[test]
    fn resp2_and_resp3_shapes() {
        assert_eq!(both(&Frame::Null), ("$-1\r\n".into(), "_\r\n".into()));
        assert_eq!(both(&Frame::NullArray), ("*-1\r\n".into(), "_\r\n".into()));
        assert_eq!(
            both(&Frame::Integer(-42)),
            (":-42\r\n".into(), ":-42\r\n".into())
        );
        assert_eq!(
            both(&Frame::Boolean(true)),
            (":1\r\n".into(), "#t\r\n".into())
        );
        let map = Frame::Map(vec![(Frame::bulk("a"), Frame::Integer(1))]);
        assert_eq!(
            both(&map),
            (
                "*2\r\n$1\r\na\r\n:1\r\n".into(),
                "%1\r\n$1\r\na\r\n:1\r\n".into()
            )
        );
        assert_eq!(
            both(&Frame::Double(1.5)),
            ("$3\r\n1.5\r\n".into(), ",1.5\r\n".into())
        );
        let verbatim = Frame::Verbatim(Bytes::from_static(b"txt:hi"));
        assert_eq!(
            both(&verbatim),
            ("$2\r\nhi\r\n".into(), "=6\r\ntxt:hi\r\n".into())
        );
        assert_eq!(
            both(&Frame::Integer(i64::MIN)).0,
            ":-9223372036854775808\r\n".to_string()
        );
    }

    #[test]
    fn doubles_format_like_redis() {
        assert_eq!(format_double(1.1), "1.1");
        assert_eq!(format_double(3.0), "3");
        assert_eq!(format_double(-0.0), "-0");
        assert_eq!(format_double(f64::INFINITY), "inf");
        assert_eq!(format_double(f64::NEG_INFINITY), "-inf");
        assert_eq!(format_double(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(format_double(1e21), "1e+21");
        assert_eq!(format_double(1.5e-7), "1.5e-7");
        assert_eq!(format_double(0.000123), "0.000123");
        assert_eq!(format_double(-2.5), "-2.5");
        assert_eq!(format_double(1e300), "1e+300");
    }

    #[test]
    fn bulk_arrays_are_arrays_of_bulks_on_the_wire_and_in_equality() {
        let elements: [&[u8]; 4] = [b"a", b"", b"with\r\ninside", &[0u8; 300]];
        let mut bulks = crate::BulkArray::with_capacity(0);
        for element in elements {
            bulks.push(element);
        }
        let array = Frame::Array(elements.iter().map(|e| Frame::bulk_from_slice(e)).collect());
        assert_eq!(both(&Frame::Bulks(bulks.clone())), both(&array));
        assert_eq!(bulks.iter().collect::<Vec<_>>(), elements.to_vec());
        assert_eq!(
            bulks.to_frames(),
            match &array {
                Frame::Array(items) => items.clone(),
                _ => unreachable!(),
            }
        );
        assert_eq!(Frame::Bulks(bulks.clone()), array);
        assert_eq!(array, Frame::Bulks(bulks.clone()));
        let mut shorter = crate::BulkArray::default();
        shorter.push(b"a");
        assert_ne!(Frame::Bulks(shorter), array);
        assert_eq!(
            both(&Frame::Bulks(Default::default())),
            ("*0\r\n".into(), "*0\r\n".into())
        );
    }
}
