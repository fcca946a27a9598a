//! Conversions between replies and Lua values, both ways, by Redis's rules.
//!
//! A command called from a script answers in the script's protocol
//! (`redis.setresp`, RESP2 by default): RESP2 turns a nil into `false`, a status
//! into `{ok=...}` and an error into `{err=...}`; RESP3 adds `nil`, booleans,
//! `{map=...}`, `{set=...}`, `{double=...}`, `{big_number=...}` and
//! `{verbatim_string=...}`. A script's return value becomes the reply by the
//! reverse rules; a Lua boolean is a RESP3 boolean only when the script chose
//! RESP3, as in Redis.

use bytes::Bytes;
use mlua::{Lua, Table, Value};
use resp::{format_double, Frame};

/// Deepest nesting converted either way; deeper parts become an error.
pub const MAX_DEPTH: usize = 200;

/// The reply `frame` as a Lua value for a script using RESP3 (`resp3`) or RESP2.
pub fn frame_to_lua(lua: &Lua, frame: &Frame, resp3: bool) -> mlua::Result<Value> {
    frame_to_lua_at(lua, frame, resp3, 0)
}

fn frame_to_lua_at(lua: &Lua, frame: &Frame, resp3: bool, depth: usize) -> mlua::Result<Value> {
    if depth > MAX_DEPTH {
        return Err(mlua::Error::runtime("reached lua stack limit"));
    }
    let string =
        |bytes: &[u8]| -> mlua::Result<Value> { Ok(Value::String(lua.create_string(bytes)?)) };
    let single = |field: &str, value: Value| -> mlua::Result<Value> {
        let table = lua.create_table_with_capacity(0, 1)?;
        table.raw_set(field, value)?;
        Ok(Value::Table(table))
    };
    match frame {
        Frame::Simple(text) => single("ok", string(text)?),
        Frame::Error(text) => single("err", string(text)?),
        Frame::Integer(value) => Ok(Value::Number(*value as f64)),
        Frame::Bulk(data) => string(data),
        Frame::Null | Frame::NullArray => Ok(if resp3 {
            Value::Nil
        } else {
            Value::Boolean(false)
        }),
        Frame::Array(items) | Frame::Push(items) => array(lua, items, resp3, depth),
        Frame::Bulks(elements) => {
            let table = lua.create_table_with_capacity(elements.len(), 0)?;
            for (index, element) in elements.iter().enumerate() {
                table.raw_set(index + 1, lua.create_string(element)?)?;
            }
            Ok(Value::Table(table))
        }
        Frame::Set(items) if resp3 => {
            let set = lua.create_table_with_capacity(0, items.len())?;
            for item in items {
                set.raw_set(frame_to_lua_at(lua, item, resp3, depth + 1)?, true)?;
            }
            single("set", Value::Table(set))
        }
        Frame::Set(items) => array(lua, items, resp3, depth),
        Frame::Map(pairs) if resp3 => {
            let map = lua.create_table_with_capacity(0, pairs.len())?;
            for (key, value) in pairs {
                map.raw_set(
                    frame_to_lua_at(lua, key, resp3, depth + 1)?,
                    frame_to_lua_at(lua, value, resp3, depth + 1)?,
                )?;
            }
            single("map", Value::Table(map))
        }
        Frame::Map(pairs) => {
            let table = lua.create_table_with_capacity(pairs.len() * 2, 0)?;
            for (index, (key, value)) in pairs.iter().enumerate() {
                table.raw_set(index * 2 + 1, frame_to_lua_at(lua, key, resp3, depth + 1)?)?;
                table.raw_set(
                    index * 2 + 2,
                    frame_to_lua_at(lua, value, resp3, depth + 1)?,
                )?;
            }
            Ok(Value::Table(table))
        }
        Frame::Double(value) if resp3 => single("double", Value::Number(*value)),
        Frame::Double(value) => string(format_double(*value).as_bytes()),
        Frame::DoubleText(text) if resp3 => single(
            "double",
            Value::Number(
                std::str::from_utf8(text)
                    .ok()
                    .and_then(|text| text.parse().ok())
                    .unwrap_or(0.0),
            ),
        ),
        Frame::DoubleText(text) => string(text),
        Frame::Boolean(value) if resp3 => Ok(Value::Boolean(*value)),
        Frame::Boolean(value) => Ok(Value::Number(if *value { 1.0 } else { 0.0 })),
        Frame::BigNumber(digits) if resp3 => single("big_number", string(digits)?),
        Frame::BigNumber(digits) => string(digits),
        Frame::Verbatim(data) if resp3 => {
            let (format, text) = split_verbatim(data);
            let table = lua.create_table_with_capacity(0, 2)?;
            table.raw_set("format", lua.create_string(format)?)?;
            table.raw_set("string", lua.create_string(text)?)?;
            single("verbatim_string", Value::Table(table))
        }
        Frame::Verbatim(data) => string(split_verbatim(data).1),
    }
}

fn array(lua: &Lua, items: &[Frame], resp3: bool, depth: usize) -> mlua::Result<Value> {
    let table = lua.create_table_with_capacity(items.len(), 0)?;
    for (index, item) in items.iter().enumerate() {
        table.raw_set(index + 1, frame_to_lua_at(lua, item, resp3, depth + 1)?)?;
    }
    Ok(Value::Table(table))
}

/// A verbatim string's format (`txt`) and text.
fn split_verbatim(data: &[u8]) -> (&[u8], &[u8]) {
    if data.len() >= 4 && data[3] == b':' {
        (&data[..3], &data[4..])
    } else {
        (b"txt", data)
    }
}

/// The reply for a script's return value. `resp3` is the script's protocol
/// (it decides what Lua booleans become).
pub fn lua_to_frame(value: &Value, resp3: bool) -> Frame {
    let mut too_deep = false;
    let frame = lua_to_frame_at(value, resp3, 0, &mut too_deep);
    if too_deep {
        // A recursive or absurdly nested table: the whole reply is an error.
        return Frame::error("ERR reached lua stack limit");
    }
    frame
}

fn lua_to_frame_at(value: &Value, resp3: bool, depth: usize, too_deep: &mut bool) -> Frame {
    if depth > MAX_DEPTH || *too_deep {
        *too_deep = true;
        return Frame::Null;
    }
    match value {
        Value::Nil => Frame::Null,
        Value::Boolean(flag) if resp3 => Frame::Boolean(*flag),
        Value::Boolean(true) => Frame::Integer(1),
        Value::Boolean(false) => Frame::Null,
        Value::Integer(number) => Frame::Integer(*number),
        Value::Number(number) => Frame::Integer(truncate(*number)),
        Value::String(text) => Frame::Bulk(Bytes::copy_from_slice(&text.as_bytes())),
        Value::Table(table) => table_to_frame(table, resp3, depth, too_deep),
        _ => Frame::Null,
    }
}

/// Lua number to integer as Redis's `(long long)` cast does on x86-64:
/// towards zero, and a NaN or a value out of range (2^63 and beyond, the
/// infinities) gives the "integer indefinite" -2^63 (`return 2^63` answers
/// `:-9223372036854775808` from Redis).
pub fn truncate(number: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    if number.is_nan() || !(-LIMIT..LIMIT).contains(&number) {
        i64::MIN
    } else {
        number as i64
    }
}

fn table_to_frame(table: &Table, resp3: bool, depth: usize, too_deep: &mut bool) -> Frame {
    // Redis looks at the special fields in this order.
    if let Ok(Value::String(text)) = table.raw_get::<Value>("err") {
        return Frame::Error(error_bytes(&text.as_bytes()));
    }
    if let Ok(Value::String(text)) = table.raw_get::<Value>("ok") {
        return Frame::Simple(status_bytes(&text.as_bytes()));
    }
    if let Ok(value) = table.raw_get::<Value>("double") {
        match value {
            Value::Number(number) => return Frame::Double(number),
            Value::Integer(number) => return Frame::Double(number as f64),
            _ => {}
        }
    }
    if let Ok(Value::String(digits)) = table.raw_get::<Value>("big_number") {
        return Frame::BigNumber(Bytes::copy_from_slice(&digits.as_bytes()));
    }
    if let Ok(Value::Table(map)) = table.raw_get::<Value>("map") {
        let mut pairs = Vec::new();
        for (key, value) in map.pairs::<Value, Value>().flatten() {
            pairs.push((
                lua_to_frame_at(&key, resp3, depth + 1, too_deep),
                lua_to_frame_at(&value, resp3, depth + 1, too_deep),
            ));
        }
        return Frame::Map(pairs);
    }
    if let Ok(Value::Table(set)) = table.raw_get::<Value>("set") {
        let members = set
            .pairs::<Value, Value>()
            .flatten()
            .map(|(member, _)| lua_to_frame_at(&member, resp3, depth + 1, too_deep))
            .collect();
        return Frame::Set(members);
    }
    if let Ok(Value::Table(verbatim)) = table.raw_get::<Value>("verbatim_string") {
        if let (Ok(Value::String(format)), Ok(Value::String(text))) = (
            verbatim.raw_get::<Value>("format"),
            verbatim.raw_get::<Value>("string"),
        ) {
            let format = format.as_bytes();
            if format.len() == 3 {
                let mut data = Vec::with_capacity(4 + text.as_bytes().len());
                data.extend_from_slice(&format);
                data.push(b':');
                data.extend_from_slice(&text.as_bytes());
                return Frame::Verbatim(Bytes::from(data));
            }
        }
    }
    // An array: elements 1, 2, ... up to the first nil.
    let mut items = Vec::new();
    for index in 1.. {
        match table.raw_get::<Value>(index) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(item) => items.push(lua_to_frame_at(&item, resp3, depth + 1, too_deep)),
        }
    }
    Frame::Array(items)
}

/// An error text fit for a reply line: newlines become spaces.
pub fn error_bytes(text: &[u8]) -> Bytes {
    Bytes::from(
        text.iter()
            .map(|&byte| {
                if byte == b'\r' || byte == b'\n' {
                    b' '
                } else {
                    byte
                }
            })
            .collect::<Vec<u8>>(),
    )
}

/// A status text fit for a reply line, as Redis sanitizes it.
fn status_bytes(text: &[u8]) -> Bytes {
    error_bytes(text)
}
