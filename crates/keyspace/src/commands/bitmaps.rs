//! Bitmap commands: strings addressed by bit (SETBIT, GETBIT, BITCOUNT,
//! BITPOS, BITOP) and as packed integer fields (BITFIELD, BITFIELD_RO), with
//! Redis 7.2's semantics and error texts.
//!
//! Bit 0 is the most significant bit of the first byte. A missing key reads
//! as an endless run of zero bits; a write past the end grows the string with
//! zero bytes (and leaves it `raw`, as any in-place edit does). An integer
//! string is addressed through its decimal digits, as Redis does.

use crate::args;
use crate::command::{flags::*, key_flags::*, CommandSpec, Handler, KeySpec};
use crate::commands::strings::{grow_zeroed, read_string};
use crate::value::{StringValue, Value};
use crate::{errors, Context, Keyspace};
use bytes::Bytes;
use resp::Frame;

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "bitcount",
        arity: -2,
        flags: READONLY,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "bitmap", "slow"],
        group: "bitmap",
        summary: "Counts the number of set bits (population counting) in a string.",
        since: "2.6.0",
        complexity: "O(N)",
        handler: Handler::Keyspace(bitcount),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "bitfield",
        arity: -2,
        flags: WRITE | DENYOOM,
        key_specs: &[KeySpec::single(1, RW | ACCESS | UPDATE)],
        categories: &["write", "bitmap", "slow"],
        group: "bitmap",
        summary: "Performs arbitrary bitfield integer operations on strings.",
        since: "3.2.0",
        complexity: "O(1) for each subcommand specified",
        handler: Handler::Keyspace(bitfield),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "bitfield_ro",
        arity: -2,
        flags: READONLY | FAST,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "bitmap", "fast"],
        group: "bitmap",
        summary: "Performs arbitrary read-only bitfield integer operations on strings.",
        since: "6.0.0",
        complexity: "O(1) for each subcommand specified",
        handler: Handler::Keyspace(bitfield_ro),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "bitop",
        arity: -4,
        flags: WRITE | DENYOOM,
        key_specs: &[
            KeySpec::single(2, OW | UPDATE),
            KeySpec::range(3, -1, 1, RO | ACCESS),
        ],
        categories: &["write", "bitmap", "slow"],
        group: "bitmap",
        summary: "Performs bitwise operations on multiple strings, and stores the result.",
        since: "2.6.0",
        complexity: "O(N)",
        handler: Handler::Keyspace(bitop),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "bitpos",
        arity: -3,
        flags: READONLY,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "bitmap", "slow"],
        group: "bitmap",
        summary: "Finds the first set (1) or clear (0) bit in a string.",
        since: "2.8.7",
        complexity: "O(N)",
        handler: Handler::Keyspace(bitpos),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "getbit",
        arity: 3,
        flags: READONLY | FAST,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "bitmap", "fast"],
        group: "bitmap",
        summary: "Returns a bit value by offset.",
        since: "2.2.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(getbit),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "setbit",
        arity: 4,
        flags: WRITE | DENYOOM,
        key_specs: &[KeySpec::single(1, RW | ACCESS | UPDATE)],
        categories: &["write", "bitmap", "slow"],
        group: "bitmap",
        summary: "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.",
        since: "2.2.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(setbit),
        ..CommandSpec::DEFAULT
    },
];

const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";
const BAD_BIT: &str = "ERR bit is not an integer or out of range";
const BAD_BITPOS_BIT: &str = "ERR The bit argument must be 1 or 0.";
const BAD_TYPE: &str = "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
const BAD_OVERFLOW: &str = "ERR Invalid OVERFLOW type specified";
const NOT_SINGLE_SOURCE: &str = "ERR BITOP NOT must be called with a single source key.";
const RO_ONLY_GET: &str = "ERR BITFIELD_RO only supports the GET subcommand";

/// A bit offset (`getBitOffsetFromArgument`): an integer, `#N` meaning
/// N fields of `field_bits` when given, below the longest string in bits.
fn parse_offset(
    keyspace: &Keyspace,
    argument: &[u8],
    field_bits: Option<u32>,
) -> Result<u64, Frame> {
    let (digits, multiplier) = match (argument.first(), field_bits) {
        (Some(b'#'), Some(bits)) => (&argument[1..], i64::from(bits)),
        _ => (argument, 1),
    };
    let offset = crate::value::canonical_i64(digits)
        .and_then(|offset| offset.checked_mul(multiplier))
        .ok_or_else(|| Frame::error(BAD_OFFSET))?;
    let max_bytes = keyspace.config.max_string_bytes as u64;
    match u64::try_from(offset) {
        Ok(offset) if (offset >> 3) < max_bytes => Ok(offset),
        _ => Err(Frame::error(BAD_OFFSET)),
    }
}

/// The string at `key` for a bit write (`lookupStringForBitCommand`): created
/// or grown with zero bytes to hold bit `highest`, made `raw`. Returns its
/// bytes and whether creating or growing it changed the key already.
fn writable_bits<'a>(
    keyspace: &'a mut Keyspace,
    context: &mut Context,
    key: &[u8],
    highest: u64,
) -> Result<(&'a mut Vec<u8>, bool), Frame> {
    let length = usize::try_from(highest / 8 + 1).map_err(|_| Frame::error(BAD_OFFSET))?;
    let created = match keyspace.lookup_write(context, key) {
        Some(entry) if !matches!(entry.value, Value::String(_)) => {
            return Err(Frame::error(errors::WRONGTYPE))
        }
        Some(_) => false,
        None => {
            keyspace.set(
                context,
                key,
                Value::String(StringValue::raw(Vec::new())),
                None,
            );
            true
        }
    };
    let Some(Value::String(string)) = keyspace
        .lookup_write(context, key)
        .map(|entry| &mut entry.value)
    else {
        return Err(Frame::error(errors::WRONGTYPE));
    };
    let data = string.make_raw();
    let grown = length > data.len();
    grow_zeroed(data, length)?;
    Ok((data, created || grown))
}

fn bit_at(data: &[u8], offset: u64) -> u8 {
    let Ok(byte) = usize::try_from(offset >> 3) else {
        return 0;
    };
    data.get(byte)
        .map_or(0, |value| (value >> (7 - (offset & 7))) & 1)
}

fn setbit(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let offset = match parse_offset(keyspace, &arguments[2], None) {
        Ok(offset) => offset,
        Err(error) => return error,
    };
    let on = match crate::value::canonical_i64(&arguments[3]) {
        Some(value @ (0 | 1)) => value as u8,
        _ => return Frame::error(BAD_BIT),
    };
    let (data, grown) = match writable_bits(keyspace, context, &arguments[1], offset) {
        Ok(found) => found,
        Err(error) => return error,
    };
    let byte = (offset >> 3) as usize;
    let shift = 7 - (offset & 7) as u8;
    let old = (data[byte] >> shift) & 1;
    data[byte] = (data[byte] & !(1 << shift)) | (on << shift);
    if grown || old != on {
        keyspace.stats.dirty += 1;
    }
    Frame::Integer(i64::from(old))
}

fn getbit(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let offset = match parse_offset(keyspace, &arguments[2], None) {
        Ok(offset) => offset,
        Err(error) => return error,
    };
    match read_string(keyspace, context, &arguments[1]) {
        Ok(Some(string)) => Frame::Integer(i64::from(bit_at(&string.as_cow(), offset))),
        Ok(None) => Frame::Integer(0),
        Err(error) => error,
    }
}

/// A BITCOUNT or BITPOS range over a string of `length` bytes, in bits:
/// `start` and `end` in bytes or bits (negative from the end), clamped as
/// Redis clamps them. `None` when the range is empty.
fn bit_range(start: i64, end: i64, length: usize, in_bits: bool) -> Option<(u64, u64)> {
    let total = (length as i64).saturating_mul(if in_bits { 8 } else { 1 });
    let resolve = |index: i64| {
        if index < 0 {
            total.saturating_add(index).max(0)
        } else {
            index
        }
    };
    let start = resolve(start);
    let end = resolve(end).min(total - 1);
    if start > end {
        return None;
    }
    let (start, end) = (start as u64, end as u64);
    Some(if in_bits {
        (start, end)
    } else {
        (start * 8, end * 8 + 7)
    })
}

/// `BYTE` or `BIT`; anything else is a syntax error.
fn parse_unit(argument: &[u8]) -> Result<bool, Frame> {
    if args::is_keyword(argument, "BIT") {
        Ok(true)
    } else if args::is_keyword(argument, "BYTE") {
        Ok(false)
    } else {
        Err(Frame::error(errors::SYNTAX))
    }
}

/// Set bits in bits `first..=last` of `data` (which holds them all).
fn count_ones(data: &[u8], first: u64, last: u64) -> u64 {
    let (first_byte, last_byte) = ((first >> 3) as usize, (last >> 3) as usize);
    let mut count: u64 = data[first_byte..=last_byte]
        .iter()
        .map(|byte| u64::from(byte.count_ones()))
        .sum();
    // Take off the bits of the edge bytes outside the range.
    let before = (first & 7) as u32;
    if before > 0 {
        let head = data[first_byte] & (0xffu8 << (8 - before));
        count -= u64::from(head.count_ones());
    }
    let tail_bits = 7 - (last & 7);
    let tail = data[last_byte] & ((1u16 << tail_bits) - 1) as u8;
    count -= u64::from(tail.count_ones());
    count
}

fn bitcount(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let range = match arguments.len() {
        2 => None,
        4 | 5 => {
            let (start, end) = match (
                args::parse_i64(&arguments[2]),
                args::parse_i64(&arguments[3]),
            ) {
                (Ok(start), Ok(end)) => (start, end),
                (Err(error), _) | (_, Err(error)) => return error,
            };
            let in_bits = match arguments.get(4).map(|unit| parse_unit(unit)) {
                Some(Err(error)) => return error,
                Some(Ok(in_bits)) => in_bits,
                None => false,
            };
            Some((start, end, in_bits))
        }
        _ => return Frame::error(errors::SYNTAX),
    };
    let string = match read_string(keyspace, context, &arguments[1]) {
        Ok(Some(string)) => string,
        Ok(None) => return Frame::Integer(0),
        Err(error) => return error,
    };
    let data = string.as_cow();
    let (start, end, in_bits) = range.unwrap_or((0, -1, false));
    if start < 0 && end < 0 && start > end {
        return Frame::Integer(0);
    }
    match bit_range(start, end, data.len(), in_bits) {
        Some((first, last)) => Frame::Integer(count_ones(&data, first, last) as i64),
        None => Frame::Integer(0),
    }
}

/// The first bit equal to `bit` in bits `first..=last` of `data`.
fn find_bit(data: &[u8], bit: u8, first: u64, last: u64) -> Option<u64> {
    let mut offset = first;
    while offset <= last {
        let byte = data[(offset >> 3) as usize];
        // Whole bytes with nothing to find are skipped.
        if offset & 7 == 0 && offset + 7 <= last && byte == if bit == 1 { 0 } else { 0xff } {
            offset += 8;
            continue;
        }
        if (byte >> (7 - (offset & 7))) & 1 == bit {
            return Some(offset);
        }
        offset += 1;
    }
    None
}

fn bitpos(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let bit = match args::parse_i64(&arguments[2]) {
        Ok(bit @ (0 | 1)) => bit as u8,
        Ok(_) => return Frame::error(BAD_BITPOS_BIT),
        Err(error) => return error,
    };
    if arguments.len() > 6 {
        return Frame::error(errors::SYNTAX);
    }
    let start = match arguments.get(3).map(|start| args::parse_i64(start)) {
        Some(Err(error)) => return error,
        Some(Ok(start)) => start,
        None => 0,
    };
    let in_bits = match arguments.get(5).map(|unit| parse_unit(unit)) {
        Some(Err(error)) => return error,
        Some(Ok(in_bits)) => in_bits,
        None => false,
    };
    let end = match arguments.get(4).map(|end| args::parse_i64(end)) {
        Some(Err(error)) => return error,
        Some(Ok(end)) => Some(end),
        None => None,
    };
    let string = match read_string(keyspace, context, &arguments[1]) {
        Ok(Some(string)) => string,
        // An endless run of zeros.
        Ok(None) => return Frame::Integer(if bit == 1 { -1 } else { 0 }),
        Err(error) => return error,
    };
    let data = string.as_cow();
    let Some((first, last)) = bit_range(start, end.unwrap_or(-1), data.len(), in_bits) else {
        return Frame::Integer(-1);
    };
    match find_bit(&data, bit, first, last) {
        Some(position) => Frame::Integer(position as i64),
        // Past the end of the string, bits are clear: unless the caller gave
        // the range's end, the first clear bit is the one after the string.
        None if bit == 0 && end.is_none() => Frame::Integer((last + 1) as i64),
        None => Frame::Integer(-1),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BitOperation {
    And,
    Or,
    Xor,
    Not,
}

fn bitop(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let operation = match arguments[1].to_ascii_uppercase().as_slice() {
        b"AND" => BitOperation::And,
        b"OR" => BitOperation::Or,
        b"XOR" => BitOperation::Xor,
        b"NOT" => BitOperation::Not,
        _ => return Frame::error(errors::SYNTAX),
    };
    let destination = &arguments[2];
    let sources = &arguments[3..];
    if operation == BitOperation::Not && sources.len() != 1 {
        return Frame::error(NOT_SINGLE_SOURCE);
    }
    let mut inputs: Vec<Vec<u8>> = Vec::with_capacity(sources.len());
    for key in sources {
        match read_string(keyspace, context, key) {
            Ok(Some(string)) => inputs.push(string.as_cow().into_owned()),
            Ok(None) => inputs.push(Vec::new()),
            Err(error) => return error,
        }
    }
    let length = inputs.iter().map(Vec::len).max().unwrap_or(0);
    if length == 0 {
        keyspace.delete(context, destination);
        return Frame::Integer(0);
    }
    let byte = |input: &Vec<u8>, index: usize| input.get(index).copied().unwrap_or(0);
    let result: Vec<u8> = (0..length)
        .map(|index| {
            let mut bytes = inputs.iter().map(|input| byte(input, index));
            let first = bytes.next().unwrap_or(0);
            match operation {
                BitOperation::And => bytes.fold(first, |all, next| all & next),
                BitOperation::Or => bytes.fold(first, |all, next| all | next),
                BitOperation::Xor => bytes.fold(first, |all, next| all ^ next),
                BitOperation::Not => !first,
            }
        })
        .collect();
    keyspace.set(
        context,
        destination,
        Value::String(StringValue::raw(result)),
        None,
    );
    Frame::Integer(length as i64)
}

// ---- BITFIELD ---------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldOp {
    Get,
    Set(i64),
    IncrBy(i64),
}

#[derive(Debug, Clone, Copy)]
struct Field {
    op: FieldOp,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

/// `i1`..`i64` or `u1`..`u63`.
fn parse_field_type(argument: &[u8]) -> Result<(bool, u32), Frame> {
    let signed = match argument.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(Frame::error(BAD_TYPE)),
    };
    match crate::value::canonical_i64(&argument[1..]) {
        Some(bits) if bits >= 1 && bits <= if signed { 64 } else { 63 } => {
            Ok((signed, bits as u32))
        }
        _ => Err(Frame::error(BAD_TYPE)),
    }
}

fn parse_fields(keyspace: &Keyspace, arguments: &[Bytes]) -> Result<Vec<Field>, Frame> {
    let mut fields = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut index = 2;
    while index < arguments.len() {
        let remaining = arguments.len() - index - 1;
        let name = &arguments[index];
        let op_arguments = if args::is_keyword(name, "GET") && remaining >= 2 {
            2
        } else if (args::is_keyword(name, "SET") || args::is_keyword(name, "INCRBY"))
            && remaining >= 3
        {
            3
        } else if args::is_keyword(name, "OVERFLOW") && remaining >= 1 {
            let kind = &arguments[index + 1];
            overflow = if args::is_keyword(kind, "WRAP") {
                Overflow::Wrap
            } else if args::is_keyword(kind, "SAT") {
                Overflow::Sat
            } else if args::is_keyword(kind, "FAIL") {
                Overflow::Fail
            } else {
                return Err(Frame::error(BAD_OVERFLOW));
            };
            index += 2;
            continue;
        } else {
            return Err(Frame::error(errors::SYNTAX));
        };
        let (signed, bits) = parse_field_type(&arguments[index + 1])?;
        let offset = parse_offset(keyspace, &arguments[index + 2], Some(bits))?;
        let op = if op_arguments == 2 {
            FieldOp::Get
        } else {
            let value = args::parse_i64(&arguments[index + 3])?;
            if args::is_keyword(name, "SET") {
                FieldOp::Set(value)
            } else {
                FieldOp::IncrBy(value)
            }
        };
        fields.push(Field {
            op,
            signed,
            bits,
            offset,
            overflow,
        });
        index += 1 + op_arguments;
    }
    Ok(fields)
}

/// The `bits`-wide field at bit `offset` as an unsigned number (bits past
/// the end of `data` read as zeros).
fn read_field(data: &[u8], offset: u64, bits: u32) -> u64 {
    let mut value = 0u64;
    for bit in 0..u64::from(bits) {
        value = (value << 1) | u64::from(bit_at(data, offset + bit));
    }
    value
}

/// Writes the low `bits` bits of `value` at bit `offset` (within `data`).
fn write_field(data: &mut [u8], offset: u64, bits: u32, value: u64) {
    for bit in 0..u64::from(bits) {
        let on = ((value >> (u64::from(bits) - 1 - bit)) & 1) as u8;
        let position = offset + bit;
        let byte = (position >> 3) as usize;
        let shift = 7 - (position & 7) as u8;
        data[byte] = (data[byte] & !(1 << shift)) | (on << shift);
    }
}

/// The field's value read as the type says (sign-extended when signed).
fn as_typed(raw: u64, signed: bool, bits: u32) -> i128 {
    if signed && bits < 64 && raw >> (bits - 1) & 1 == 1 {
        i128::from(raw) - (1i128 << bits)
    } else if signed {
        i128::from(raw as i64)
    } else {
        i128::from(raw)
    }
}

/// Fits `value` (the exact result) into the field: `None` on overflow under
/// FAIL, else the value to store and to report. Unsigned SET takes a negative
/// value as its 64-bit two's complement, which overflows upward (as Redis's
/// `checkUnsignedBitfieldOverflow` sees it).
fn fit(value: i128, signed: bool, bits: u32, overflow: Overflow) -> Option<i128> {
    let (min, max) = if signed {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    };
    if (min..=max).contains(&value) {
        return Some(value);
    }
    match overflow {
        Overflow::Fail => None,
        Overflow::Sat => Some(if value > max { max } else { min }),
        Overflow::Wrap => {
            let low = (value as u128 as u64) & mask(bits);
            Some(as_typed(low, signed, bits))
        }
    }
}

fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

fn bitfield(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    bitfield_generic(keyspace, context, arguments, false)
}

fn bitfield_ro(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    bitfield_generic(keyspace, context, arguments, true)
}

fn bitfield_generic(
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
    read_only: bool,
) -> Frame {
    let fields = match parse_fields(keyspace, arguments) {
        Ok(fields) => fields,
        Err(error) => return error,
    };
    let highest_write = fields
        .iter()
        .filter(|field| field.op != FieldOp::Get)
        .map(|field| field.offset + u64::from(field.bits) - 1)
        .max();
    let Some(highest) = highest_write else {
        // Only reads: a missing key reads as zeros.
        let data = match read_string(keyspace, context, &arguments[1]) {
            Ok(Some(string)) => string.as_cow().into_owned(),
            Ok(None) => Vec::new(),
            Err(error) => return error,
        };
        return Frame::Array(
            fields
                .iter()
                .map(|field| {
                    let raw = read_field(&data, field.offset, field.bits);
                    Frame::Integer(as_typed(raw, field.signed, field.bits) as i64)
                })
                .collect(),
        );
    };
    if read_only {
        return Frame::error(RO_ONLY_GET);
    }
    let (data, grown) = match writable_bits(keyspace, context, &arguments[1], highest) {
        Ok(found) => found,
        Err(error) => return error,
    };
    let mut changed = grown;
    let mut replies = Vec::with_capacity(fields.len());
    for field in &fields {
        let raw = read_field(data, field.offset, field.bits);
        let old = as_typed(raw, field.signed, field.bits);
        let (exact, report_old) = match field.op {
            FieldOp::Get => {
                replies.push(Frame::Integer(old as i64));
                continue;
            }
            FieldOp::Set(value) if field.signed => (i128::from(value), true),
            FieldOp::Set(value) => (i128::from(value as u64), true),
            FieldOp::IncrBy(increment) => (old + i128::from(increment), false),
        };
        match fit(exact, field.signed, field.bits, field.overflow) {
            None => replies.push(Frame::Null),
            Some(new) => {
                let stored = (new as u128 as u64) & mask(field.bits);
                write_field(data, field.offset, field.bits, stored);
                if stored != raw {
                    changed = true;
                }
                replies.push(Frame::Integer(if report_old { old } else { new } as i64));
            }
        }
    }
    if changed {
        keyspace.stats.dirty += 1;
    }
    Frame::Array(replies)
}

#[cfg(test)]
mod tests {
    use crate::testing::Harness;
    use resp::Frame;

    fn int(value: i64) -> Frame {
        Frame::Integer(value)
    }

    fn err(text: &str) -> Frame {
        Frame::error_owned(text.to_string())
    }

    fn ints(values: &[Option<i64>]) -> Frame {
        Frame::Array(
            values
                .iter()
                .map(|value| value.map_or(Frame::Null, Frame::Integer))
                .collect(),
        )
    }

    fn text(frame: Frame) -> String {
        format!("{frame:?}")
    }

    #[test]
    fn setbit_and_getbit_address_bits_from_the_first_bytes_top() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["SETBIT", "k", "7", "1"]), int(0));
        assert_eq!(h.run(&["GET", "k"]), Frame::bulk(&b"\x01"[..]));
        assert_eq!(h.run(&["SETBIT", "k", "7", "1"]), int(1));
        assert_eq!(h.run(&["SETBIT", "k", "0", "1"]), int(0));
        assert_eq!(h.run(&["GET", "k"]), Frame::bulk(&b"\x81"[..]));
        assert_eq!(h.run(&["SETBIT", "k", "20", "1"]), int(0));
        assert_eq!(h.run(&["STRLEN", "k"]), int(3));
        assert_eq!(h.run(&["GETBIT", "k", "20"]), int(1));
        assert_eq!(h.run(&["GETBIT", "k", "21"]), int(0));
        assert_eq!(h.run(&["GETBIT", "k", "1000"]), int(0));
        assert_eq!(h.run(&["GETBIT", "missing", "3"]), int(0));
        // An integer string is addressed through its digits ('1' is 0x31).
        h.run(&["SET", "n", "1"]);
        assert_eq!(h.run(&["GETBIT", "n", "2"]), int(1));
        assert_eq!(h.run(&["SETBIT", "n", "7", "0"]), int(1));
        assert_eq!(h.run(&["GET", "n"]), Frame::bulk(&b"0"[..]));
        assert_eq!(
            h.run(&["OBJECT", "ENCODING", "n"]),
            Frame::bulk(&b"raw"[..])
        );
    }

    #[test]
    fn bit_commands_refuse_bad_arguments_as_redis_does() {
        let mut h = Harness::new();
        let offset = "ERR bit offset is not an integer or out of range";
        assert_eq!(h.run(&["SETBIT", "k", "-1", "1"]), err(offset));
        assert_eq!(h.run(&["SETBIT", "k", "4294967296", "1"]), err(offset));
        assert_eq!(h.run(&["SETBIT", "k", "x", "1"]), err(offset));
        assert_eq!(h.run(&["GETBIT", "k", "01"]), err(offset));
        let bit = "ERR bit is not an integer or out of range";
        assert_eq!(h.run(&["SETBIT", "k", "1", "2"]), err(bit));
        assert_eq!(h.run(&["SETBIT", "k", "1", "x"]), err(bit));
        assert_eq!(h.run(&["EXISTS", "k"]), int(0));
        h.run(&["LPUSH", "l", "a"]);
        let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
        assert_eq!(h.run(&["SETBIT", "l", "1", "1"]), err(wrongtype));
        assert_eq!(h.run(&["GETBIT", "l", "1"]), err(wrongtype));
        assert_eq!(h.run(&["BITCOUNT", "l"]), err(wrongtype));
        assert_eq!(h.run(&["BITPOS", "l", "1"]), err(wrongtype));
        assert_eq!(
            h.run(&["BITPOS", "k", "2"]),
            err("ERR The bit argument must be 1 or 0.")
        );
        // 7.2: arguments are checked before the key, even a missing one.
        assert_eq!(
            h.run(&["BITCOUNT", "missing", "0"]),
            err("ERR syntax error")
        );
        assert_eq!(
            h.run(&["BITCOUNT", "missing", "0", "1", "bits"]),
            err("ERR syntax error")
        );
        assert_eq!(
            h.run(&["BITCOUNT", "missing", "x", "1"]),
            err("ERR value is not an integer or out of range")
        );
        assert_eq!(
            h.run(&["BITPOS", "missing", "1", "0", "1", "bits"]),
            err("ERR syntax error")
        );
        assert_eq!(
            h.run(&["BITOP", "NOT", "d", "a", "b"]),
            err("ERR BITOP NOT must be called with a single source key.")
        );
        assert_eq!(h.run(&["BITOP", "NAND", "d", "a"]), err("ERR syntax error"));
        assert_eq!(h.run(&["BITOP", "AND", "d", "l"]), err(wrongtype));
    }

    #[test]
    fn bitcount_counts_byte_and_bit_ranges() {
        let mut h = Harness::new();
        h.run(&["SET", "k", "foobar"]);
        assert_eq!(h.run(&["BITCOUNT", "k"]), int(26));
        assert_eq!(h.run(&["BITCOUNT", "k", "0", "0"]), int(4));
        assert_eq!(h.run(&["BITCOUNT", "k", "1", "1"]), int(6));
        assert_eq!(h.run(&["BITCOUNT", "k", "1", "1", "BYTE"]), int(6));
        assert_eq!(h.run(&["BITCOUNT", "k", "5", "30", "BIT"]), int(17));
        assert_eq!(h.run(&["BITCOUNT", "k", "-2", "-1"]), int(7));
        assert_eq!(h.run(&["BITCOUNT", "k", "-1", "-2"]), int(0));
        assert_eq!(h.run(&["BITCOUNT", "k", "3", "1"]), int(0));
        assert_eq!(h.run(&["BITCOUNT", "k", "0", "1000"]), int(26));
        assert_eq!(h.run(&["BITCOUNT", "k", "-100", "-1", "bit"]), int(26));
        assert_eq!(h.run(&["BITCOUNT", "missing"]), int(0));
        assert_eq!(h.run(&["BITCOUNT", "missing", "0", "-1"]), int(0));
    }

    #[test]
    fn bitpos_finds_set_and_clear_bits() {
        let mut h = Harness::new();
        // "\xff\xf0\x00" as Redis's documentation has it.
        h.run_arguments(&[
            "SET".into(),
            "doc".into(),
            bytes::Bytes::from_static(b"\xff\xf0\x00"),
        ]);
        assert_eq!(h.run(&["BITPOS", "doc", "0"]), int(12));
        h.run_arguments(&[
            "SET".into(),
            "doc".into(),
            bytes::Bytes::from_static(b"\x00\xff\xf0"),
        ]);
        assert_eq!(h.run(&["BITPOS", "doc", "1", "0"]), int(8));
        assert_eq!(h.run(&["BITPOS", "doc", "1", "2"]), int(16));
        assert_eq!(h.run(&["BITPOS", "doc", "1", "2", "-1", "BYTE"]), int(16));
        assert_eq!(h.run(&["BITPOS", "doc", "1", "7", "15", "BIT"]), int(8));
        h.run_arguments(&[
            "SET".into(),
            "ones".into(),
            bytes::Bytes::from_static(b"\xff\xff"),
        ]);
        // Past the end the bits are clear, unless the end was given.
        assert_eq!(h.run(&["BITPOS", "ones", "0"]), int(16));
        assert_eq!(h.run(&["BITPOS", "ones", "0", "1"]), int(16));
        assert_eq!(h.run(&["BITPOS", "ones", "0", "0", "-1"]), int(-1));
        assert_eq!(h.run(&["BITPOS", "ones", "1", "3", "2"]), int(-1));
        assert_eq!(h.run(&["BITPOS", "missing", "0"]), int(0));
        assert_eq!(h.run(&["BITPOS", "missing", "1"]), int(-1));
        h.run(&["SET", "empty", ""]);
        assert_eq!(h.run(&["BITPOS", "empty", "0"]), int(-1));
    }

    #[test]
    fn bitop_combines_strings_of_different_lengths() {
        let mut h = Harness::new();
        h.run(&["SET", "a", "foobar"]);
        h.run(&["SET", "b", "abcdef"]);
        assert_eq!(h.run(&["BITOP", "AND", "d", "a", "b"]), int(6));
        assert_eq!(h.run(&["GET", "d"]), Frame::bulk(&b"`bc`ab"[..]));
        h.run(&["SET", "short", "a"]);
        assert_eq!(h.run(&["BITOP", "OR", "d", "short", "a"]), int(6));
        assert_eq!(h.run(&["GET", "d"]), Frame::bulk(&b"goobar"[..]));
        assert_eq!(h.run(&["BITOP", "AND", "d", "short", "a"]), int(6));
        assert_eq!(h.run(&["GET", "d"]), Frame::bulk(&b"`\0\0\0\0\0"[..]));
        assert_eq!(h.run(&["BITOP", "XOR", "d", "a", "a"]), int(6));
        assert_eq!(h.run(&["BITCOUNT", "d"]), int(0));
        assert_eq!(h.run(&["BITOP", "NOT", "d", "short"]), int(1));
        assert_eq!(h.run(&["GET", "d"]), Frame::bulk(&[!b'a'][..]));
        // Nothing to combine: the destination goes.
        assert_eq!(h.run(&["BITOP", "OR", "d", "missing"]), int(0));
        assert_eq!(h.run(&["EXISTS", "d"]), int(0));
    }

    #[test]
    fn bitfield_reads_writes_and_overflows_as_redis_does() {
        let mut h = Harness::new();
        assert_eq!(
            h.run(&["BITFIELD", "k", "SET", "i8", "0", "100", "GET", "i8", "0"]),
            ints(&[Some(0), Some(100)])
        );
        assert_eq!(
            h.run(&["BITFIELD", "k", "INCRBY", "i8", "0", "100", "GET", "u4", "0"]),
            ints(&[Some(-56), Some(12)])
        );
        assert_eq!(
            h.run(&[
                "BITFIELD", "k", "OVERFLOW", "SAT", "INCRBY", "i8", "0", "-1000", "OVERFLOW",
                "FAIL", "INCRBY", "i8", "0", "-1", "GET", "i8", "0"
            ]),
            ints(&[Some(-128), None, Some(-128)])
        );
        // Unsigned fields: a negative SET is a huge value (saturates high).
        assert_eq!(
            h.run(&[
                "BITFIELD", "u", "SET", "u8", "#1", "-1", "OVERFLOW", "SAT", "SET", "u8", "#1",
                "-1", "GET", "u8", "8", "INCRBY", "u2", "100", "3"
            ]),
            ints(&[Some(0), Some(255), Some(255), Some(3)])
        );
        assert_eq!(h.run(&["STRLEN", "u"]), int(13));
        assert_eq!(
            h.run(&["BITFIELD", "w", "INCRBY", "u2", "0", "5", "INCRBY", "i64", "8", "-1"]),
            ints(&[Some(1), Some(-1)])
        );
        assert_eq!(
            h.run(&[
                "BITFIELD",
                "w",
                "INCRBY",
                "i64",
                "8",
                "-9223372036854775807"
            ]),
            ints(&[Some(i64::MIN)])
        );
        assert_eq!(
            h.run(&["BITFIELD", "w", "OVERFLOW", "SAT", "INCRBY", "i64", "8", "-1"]),
            ints(&[Some(i64::MIN)])
        );
        assert_eq!(
            h.run(&["BITFIELD", "w", "INCRBY", "i64", "8", "-1"]),
            ints(&[Some(i64::MAX)])
        );
        assert_eq!(
            h.run(&["BITFIELD_RO", "missing", "GET", "u8", "0"]),
            ints(&[Some(0)])
        );
        assert_eq!(h.run(&["BITFIELD", "missing"]), Frame::Array(Vec::new()));
        assert_eq!(h.run(&["EXISTS", "missing"]), int(0));
        let bad_type = "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
        assert_eq!(h.run(&["BITFIELD", "k", "GET", "u64", "0"]), err(bad_type));
        assert_eq!(h.run(&["BITFIELD", "k", "GET", "I8", "0"]), err(bad_type));
        assert_eq!(h.run(&["BITFIELD", "k", "GET", "i0", "0"]), err(bad_type));
        assert_eq!(
            h.run(&["BITFIELD", "k", "OVERFLOW", "NONE"]),
            err("ERR Invalid OVERFLOW type specified")
        );
        assert_eq!(
            h.run(&["BITFIELD", "k", "GET", "i8"]),
            err("ERR syntax error")
        );
        assert_eq!(
            h.run(&["BITFIELD", "k", "SET", "i8", "0", "x"]),
            err("ERR value is not an integer or out of range")
        );
        assert_eq!(
            h.run(&["BITFIELD_RO", "k", "SET", "i8", "0", "1"]),
            err("ERR BITFIELD_RO only supports the GET subcommand")
        );
        assert_eq!(
            text(h.run(&["BITFIELD", "k", "GET", "i8", "#-1"])),
            text(err("ERR bit offset is not an integer or out of range"))
        );
    }
}
