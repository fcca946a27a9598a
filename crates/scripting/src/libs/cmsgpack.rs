//! The `cmsgpack` library: MessagePack as lua-cmsgpack 0.4.0, the version
//! bundled with Redis, encodes and decodes it.
//!
//! Encoding picks the smallest integer form for integral numbers, float32
//! when it holds a number exactly and float64 otherwise; strings use the
//! str forms; a table whose keys are exactly 1..n is an array, any other a
//! map; tables nested 16 deep become nil, which is how lua-cmsgpack
//! survives cycles. Decoding accepts every MessagePack type: bin and ext
//! payloads (which lua-cmsgpack rejects) come back as strings.

use mlua::{Error, Lua, MultiValue, Table, Value};

use super::{add, add_many, check_number, check_string, fail, Unplaced};

/// Tables at this depth are encoded as nil (LUACMSGPACK_MAX_NESTING).
const MAX_NESTING: usize = 16;
/// Deepest container nesting `unpack` builds. lua-cmsgpack has no explicit
/// limit but runs out of Lua stack a few thousand levels down. Each open
/// level holds up to two mlua handles, of which only a few thousand can
/// exist at once, so the bound sits well below that.
const MAX_DECODE_DEPTH: usize = 1000;
/// Values one call may return: about what a C function can push onto the
/// Lua stack (LUAI_MAXCSTACK), where lua-cmsgpack gives up.
const MAX_RESULTS: usize = 7900;
/// Largest string `pack` builds. A table that contains itself expands
/// exponentially before the nesting limit stops it; this bounds the work.
const MAX_OUTPUT: usize = 512 << 20;

/// Registers the `cmsgpack` global table.
pub fn register(lua: &Lua) -> mlua::Result<()> {
    let lib = lua.create_table()?;
    add(lua, &lib, "pack", |lua, args| pack(lua, &args))?;
    add_many(lua, &lib, "unpack", |lua, args| {
        let data = check_string(lua, &args, 1, "unpack")?;
        unpack_full(lua, &data, 0, 0)
    })?;
    add_many(lua, &lib, "unpack_one", |lua, args| {
        let offset = opt_integer(lua, &args, 2, "unpack_one")?;
        let data = check_string(lua, &args, 1, "unpack_one")?;
        unpack_full(lua, &data, 1, offset)
    })?;
    add_many(lua, &lib, "unpack_limit", |lua, args| {
        let limit = check_number(lua, &args, 2, "unpack_limit")? as i64;
        let offset = opt_integer(lua, &args, 3, "unpack_limit")?;
        let data = check_string(lua, &args, 1, "unpack_limit")?;
        unpack_full(lua, &data, limit, offset)
    })?;
    lib.set("_NAME", "cmsgpack")?;
    lib.set("_VERSION", "lua-cmsgpack 0.4.0")?;
    lib.set("_COPYRIGHT", "Copyright (C) 2012, Redis Ltd.")?;
    lib.set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    lua.globals().set("cmsgpack", lib)
}

/// `cmsgpack.pack(...)`: every argument encoded in turn, concatenated.
fn pack(lua: &Lua, args: &MultiValue) -> mlua::Result<Value> {
    if args.is_empty() {
        return Err(fail(
            "bad argument #0 to 'pack' (MessagePack pack needs input.)",
        ));
    }
    let mut out = Vec::new();
    for value in args {
        encode(&mut out, value, 0)?;
    }
    Ok(Value::String(lua.create_string(&out)?))
}

fn encode(out: &mut Vec<u8>, value: &Value, level: usize) -> mlua::Result<()> {
    if out.len() > MAX_OUTPUT {
        return Err(fail("MessagePack pack output too large"));
    }
    match value {
        Value::String(s) => {
            let s = s.as_bytes();
            let len = s.len();
            match len {
                0..32 => out.push(0xa0 | len as u8),
                32..=0xff => out.extend_from_slice(&[0xd9, len as u8]),
                0x100..=0xffff => {
                    out.push(0xda);
                    out.extend_from_slice(&(len as u16).to_be_bytes());
                }
                _ => {
                    out.push(0xdb);
                    out.extend_from_slice(&(len as u32).to_be_bytes());
                }
            }
            out.extend_from_slice(&s);
        }
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_int(out, *i),
        Value::Number(n) => {
            // An integral double in int64 range (-0 included) is an integer.
            if n.is_finite() && n.fract() == 0.0 && *n >= -(2f64.powi(63)) && *n < 2f64.powi(63) {
                encode_int(out, *n as i64);
            } else if f64::from(*n as f32) == *n {
                out.push(0xca);
                out.extend_from_slice(&(*n as f32).to_be_bytes());
            } else {
                out.push(0xcb);
                out.extend_from_slice(&n.to_be_bytes());
            }
        }
        Value::Table(t) if level < MAX_NESTING => encode_table(out, t, level)?,
        _ => out.push(0xc0),
    }
    Ok(())
}

fn encode_int(out: &mut Vec<u8>, n: i64) {
    match n {
        0..=0x7f => out.push(n as u8),
        0x80..=0xff => out.extend_from_slice(&[0xcc, n as u8]),
        0x100..=0xffff => {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
        0x1_0000_0000.. => {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
        -32..=-1 => out.push(n as u8),
        -128..=-33 => out.extend_from_slice(&[0xd0, n as u8]),
        -32768..=-129 => {
            out.push(0xd1);
            out.extend_from_slice(&(n as i16).to_be_bytes());
        }
        -0x8000_0000..=-32769 => {
            out.push(0xd2);
            out.extend_from_slice(&(n as i32).to_be_bytes());
        }
        _ => {
            out.push(0xd3);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
}

/// Writes a container header: the fix form (`fix` | n), then 16 and 32 bits.
fn encode_header(out: &mut Vec<u8>, fix: u8, wide: u8, n: usize) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(wide);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(wide + 1);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// Entries of a table read in the first pass when there are no more than
/// this many; bigger tables are walked twice rather than collected, as each
/// collected value holds one of mlua's few thousand handles (at most
/// `MAX_NESTING` tables are open at once).
const SMALL: usize = 32;

fn encode_table(out: &mut Vec<u8>, table: &Table, level: usize) -> mlua::Result<()> {
    // lua-cmsgpack's array test: every key a number that is an int >= 1 and
    // the largest equal to the count, so the keys are exactly 1..n (an empty
    // table is an empty array).
    let (mut count, mut max, mut keys_are_indexes) = (0, 0, true);
    let mut entries = Vec::new();
    for pair in table.pairs::<Value, Value>() {
        let (key, value) = pair?;
        count += 1;
        match key {
            Value::Integer(i) if (1..=i64::from(i32::MAX)).contains(&i) => max = max.max(i),
            Value::Number(n) if n >= 1.0 && n <= f64::from(i32::MAX) && n.fract() == 0.0 => {
                max = max.max(n as i64);
            }
            _ => keys_are_indexes = false,
        }
        if count <= SMALL {
            entries.push((key, value));
        } else if count == SMALL + 1 {
            entries = Vec::new();
        }
    }
    let listed = count <= SMALL;
    if keys_are_indexes && max == count as i64 {
        encode_header(out, 0x90, 0xdc, count);
        if listed {
            let mut items = vec![Value::Nil; count];
            for (key, value) in entries {
                let index = (number(&key) as usize).wrapping_sub(1);
                if let Some(slot) = items.get_mut(index) {
                    *slot = value;
                }
            }
            for value in &items {
                encode(out, value, level + 1)?;
            }
        } else {
            for i in 1..=max {
                encode(out, &table.raw_get(i)?, level + 1)?;
            }
        }
    } else {
        encode_header(out, 0x80, 0xde, count);
        let mut pair = |key: &Value, value: &Value| {
            encode(out, key, level + 1)?;
            encode(out, value, level + 1)
        };
        if listed {
            for (key, value) in &entries {
                pair(key, value)?;
            }
        } else {
            for entry in table.pairs::<Value, Value>() {
                let (key, value) = entry?;
                pair(&key, &value)?;
            }
        }
    }
    Ok(())
}

fn number(value: &Value) -> f64 {
    match value {
        Value::Integer(i) => *i as f64,
        Value::Number(n) => *n,
        _ => 0.0,
    }
}

/// Shared body of the unpack functions. `limit` and `offset` both zero means
/// "decode everything and return just the values"; otherwise at most
/// `limit` values are decoded from byte `offset` and the offset to resume
/// from (-1 at the end of input) comes first. Results come in a table
/// (see [`add_many`]).
fn unpack_full(lua: &Lua, data: &[u8], limit: i64, offset: i64) -> mlua::Result<(Table, usize)> {
    let len = data.len();
    if offset < 0 || limit < 0 {
        // lua-cmsgpack prints the input length in the limit's place; kept so
        // the message reads the same as in Redis.
        return Err(fail(format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as i32, len as i32
        )));
    }
    let start = usize::try_from(offset)
        .ok()
        .filter(|&o| o <= len)
        .ok_or_else(|| {
            fail(format!(
                "Start offset {} greater than input length {}.",
                offset as i32, len as i32
            ))
        })?;
    let decode_all = limit == 0 && offset == 0;
    let limit = if decode_all {
        i64::from(i32::MAX)
    } else {
        limit
    };
    let mut cur = Cursor { data, pos: start };
    let results = lua.create_table()?;
    // Without decode_all, slot 1 is kept for the next offset.
    let first = if decode_all { 1 } else { 2 };
    let mut count: usize = 0;
    while cur.pos < len && (count as i64) < limit {
        if count >= MAX_RESULTS {
            return Err(fail(
                "stack overflow (too many return values at once; \
                 use unpack_one or unpack_limit instead.)",
            ));
        }
        results.raw_set(first + count, decode(lua, &mut cur)?)?;
        count += 1;
    }
    if !decode_all {
        let next = if cur.pos == len { -1.0 } else { cur.pos as f64 };
        results.raw_set(1, next)?;
    }
    Ok((results, first - 1 + count))
}

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> mlua::Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len());
        let bytes = end
            .and_then(|e| self.data.get(self.pos..e))
            .ok_or_else(|| fail("Missing bytes in input."))?;
        self.pos += n;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self) -> mlua::Result<[u8; N]> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u8(&mut self) -> mlua::Result<u8> {
        Ok(self.array::<1>()?[0])
    }

    fn be16(&mut self) -> mlua::Result<usize> {
        Ok(usize::from(u16::from_be_bytes(self.array()?)))
    }

    fn be32(&mut self) -> mlua::Result<usize> {
        Ok(u32::from_be_bytes(self.array()?) as usize)
    }
}

/// What one MessagePack item header announces.
enum Item {
    Scalar(Value),
    Table { len: usize, is_map: bool },
}

fn read_item(lua: &Lua, cur: &mut Cursor) -> mlua::Result<Item> {
    let num = |n: f64| Ok(Item::Scalar(Value::Number(n)));
    let array = |len| Item::Table { len, is_map: false };
    let map = |len| Item::Table { len, is_map: true };
    let tag = cur.u8()?;
    let bytes_len = match tag {
        0x00..=0x7f => return num(f64::from(tag)),
        0x80..=0x8f => return Ok(map(usize::from(tag & 0x0f))),
        0x90..=0x9f => return Ok(array(usize::from(tag & 0x0f))),
        0xa0..=0xbf => usize::from(tag & 0x1f),
        0xc0 => return Ok(Item::Scalar(Value::Nil)),
        0xc2 => return Ok(Item::Scalar(Value::Boolean(false))),
        0xc3 => return Ok(Item::Scalar(Value::Boolean(true))),
        0xc4 | 0xd9 => usize::from(cur.u8()?),
        0xc5 | 0xda => cur.be16()?,
        0xc6 | 0xdb => cur.be32()?,
        // ext: length, then a type byte this library has no use for.
        0xc7..=0xc9 => {
            let n = match tag {
                0xc7 => usize::from(cur.u8()?),
                0xc8 => cur.be16()?,
                _ => cur.be32()?,
            };
            cur.u8()?;
            n
        }
        0xd4..=0xd8 => {
            cur.u8()?;
            1 << (tag - 0xd4)
        }
        0xca => return num(f64::from(f32::from_be_bytes(cur.array()?))),
        0xcb => return num(f64::from_be_bytes(cur.array()?)),
        0xcc => return num(f64::from(cur.u8()?)),
        0xcd => return num(cur.be16()? as f64),
        0xce => return num(cur.be32()? as f64),
        // Redis pushes uint64 through a signed lua_Integer, so values past
        // 2^63 come back negative; kept for identical results.
        0xcf => return num(u64::from_be_bytes(cur.array()?) as i64 as f64),
        0xd0 => return num(f64::from(i8::from_be_bytes(cur.array()?))),
        0xd1 => return num(f64::from(i16::from_be_bytes(cur.array()?))),
        0xd2 => return num(f64::from(i32::from_be_bytes(cur.array()?))),
        0xd3 => return num(i64::from_be_bytes(cur.array()?) as f64),
        0xdc => return Ok(array(cur.be16()?)),
        0xdd => return Ok(array(cur.be32()?)),
        0xde => return Ok(map(cur.be16()?)),
        0xdf => return Ok(map(cur.be32()?)),
        0xe0..=0xff => return num(f64::from(tag as i8)),
        0xc1 => return Err(fail("Bad data format in input.")),
    };
    let bytes = cur.take(bytes_len)?;
    Ok(Item::Scalar(Value::String(lua.create_string(bytes)?)))
}

/// A container being filled while decoding.
struct Frame {
    table: Table,
    left: usize,
    next_index: i64,
    /// For maps: the key read, waiting for its value.
    key: Option<Value>,
    is_map: bool,
}

/// Decodes one top-level value. Containers are tracked on an explicit
/// stack rather than by recursion, so hostile nesting cannot exhaust the
/// native stack; element counts only size tables as far as the remaining
/// input could possibly fill them.
fn decode(lua: &Lua, cur: &mut Cursor) -> mlua::Result<Value> {
    let mut stack: Vec<Frame> = Vec::new();
    loop {
        let mut value = match read_item(lua, cur)? {
            Item::Scalar(v) => v,
            Item::Table { len: 0, .. } => Value::Table(lua.create_table()?),
            Item::Table { len, is_map } => {
                if stack.len() >= MAX_DECODE_DEPTH {
                    return Err(fail("Too many nested data structures in input."));
                }
                let cap = len.min(cur.data.len() - cur.pos).min(1024);
                let table = if is_map {
                    lua.create_table_with_capacity(0, cap)?
                } else {
                    lua.create_table_with_capacity(cap, 0)?
                };
                stack.push(Frame {
                    table,
                    left: len,
                    next_index: 1,
                    key: None,
                    is_map,
                });
                continue;
            }
        };
        // Attach the finished value to its container, closing every
        // container it completes.
        loop {
            let Some(frame) = stack.last_mut() else {
                return Ok(value);
            };
            if frame.is_map {
                let Some(key) = frame.key.take() else {
                    frame.key = Some(value);
                    break;
                };
                match key {
                    Value::Nil => return Err(Error::external(Unplaced("table index is nil"))),
                    Value::Number(n) if n.is_nan() => {
                        return Err(Error::external(Unplaced("table index is NaN")))
                    }
                    key => frame.table.raw_set(key, value)?,
                }
            } else {
                frame.table.raw_set(frame.next_index, value)?;
                frame.next_index += 1;
            }
            frame.left -= 1;
            if frame.left > 0 {
                break;
            }
            let done = stack.pop().map(|f| f.table);
            value = done.map_or(Value::Nil, Value::Table);
        }
    }
}

fn opt_integer(lua: &Lua, args: &MultiValue, index: usize, func: &str) -> mlua::Result<i64> {
    match args.get(index - 1) {
        None | Some(Value::Nil) => Ok(0),
        Some(_) => Ok(check_number(lua, args, index, func)? as i64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deep equality for round-trip checks.
    const PRELUDE: &str = "local function eq(a, b)
        if type(a) ~= type(b) then return false end
        if type(a) ~= 'table' then return a == b end
        for k, v in pairs(a) do if not eq(v, b[k]) then return false end end
        for k in pairs(b) do if a[k] == nil then return false end end
        return true
      end
      local function err(...) return select(2, pcall(...)) end
      local mp = cmsgpack\n";

    fn check(cases: &[&str]) {
        let lua = Lua::new();
        register(&lua).unwrap();
        crate::libs::assert_cases(&lua, PRELUDE, cases);
    }

    #[test]
    fn packs_numbers_in_the_smallest_form() {
        check(&[
            r#"mp.pack(1) == "\1" and mp.pack(0) == "\0" and mp.pack(-0.0) == "\0""#,
            r#"mp.pack(127) == "\127" and mp.pack(128) == "\204\128""#,
            r#"mp.pack(256) == "\205\1\0" and mp.pack(65536) == "\206\0\1\0\0""#,
            r#"mp.pack(2^32) == "\207\0\0\0\1\0\0\0\0""#,
            r#"mp.pack(-1) == "\255" and mp.pack(-32) == "\224" and mp.pack(-33) == "\208\223""#,
            r#"mp.pack(-129) == "\209\255\127" and mp.pack(-32769) == "\210\255\255\127\255""#,
            r#"mp.pack(-2^31 - 1) == "\211\255\255\255\255\127\255\255\255""#,
            r#"mp.pack(1.5) == "\202\63\192\0\0""#,
            r#"#mp.pack(0.1) == 9 and mp.pack(0.1):byte() == 0xcb"#,
            r#"mp.pack(2^63):byte() == 0xca and mp.pack(0/0):byte() == 0xcb"#,
            r#"mp.pack(1/0) == "\202\127\128\0\0""#,
            r#"mp.unpack(mp.pack(0.1)) == 0.1 and mp.unpack(mp.pack(-2^53)) == -2^53"#,
        ]);
    }

    #[test]
    fn packs_strings_booleans_nil_and_tables() {
        check(&[
            r#"mp.pack("abc") == "\163abc" and mp.pack("") == "\160""#,
            r#"mp.pack(("x"):rep(32)) == "\217\32" .. ("x"):rep(32)"#,
            r#"mp.pack(("x"):rep(256)) == "\218\1\0" .. ("x"):rep(256)"#,
            r#"mp.pack(("x"):rep(65536)):sub(1, 5) == "\219\0\1\0\0""#,
            r#"mp.pack(true, false, nil) == "\195\194\192""#,
            r#"mp.pack(print) == "\192""#,
            r#"mp.pack({}) == "\144" and mp.pack({1, 2, 3}) == "\147\1\2\3""#,
            r#"mp.pack({a = 1}) == "\129\161a\1""#,
            r#"mp.pack({1, nil, 3}) == "\130\1\1\3\3""#,
            r#"mp.pack({[1.5] = 1}) == "\129\202\63\192\0\0\1""#,
            r#"mp.pack(setmetatable({}, {__index = {1}})) == "\144""#,
            r#"mp.pack(1, "a") == "\1\161a""#,
        ]);
    }

    #[test]
    fn round_trips_nested_values() {
        check(&[
            r#"eq(mp.unpack(mp.pack({1, "two", {three = 3, four = {4, 4.5}}, true})),
                  {1, "two", {three = 3, four = {4, 4.5}}, true})"#,
            r#"eq({mp.unpack(mp.pack(1, "a", {b = {}}))}, {1, "a", {b = {}}})"#,
            r#"eq(mp.unpack(mp.pack({[1] = 1, [3] = 3, x = false})), {[1] = 1, [3] = 3, x = false})"#,
            r#"eq(mp.unpack(mp.pack(("y"):rep(70000))), ("y"):rep(70000))"#,
            r#"select('#', mp.unpack("")) == 0"#,
        ]);
    }

    /// Wide values and long result lists must not exhaust mlua's few
    /// thousand handles.
    #[test]
    fn large_values_round_trip() {
        check(&[
            r#"(function()
                 local t = {}
                 for i = 1, 20000 do t["k" .. i] = {"v" .. i} end
                 return eq(mp.unpack(mp.pack(t)), t)
               end)()"#,
            r#"(function()
                 local t = {}
                 for i = 1, 7000 do t[i] = "s" .. i end
                 local back = {mp.unpack(mp.pack(unpack(t)))}
                 return eq(back, t)
               end)()"#,
        ]);
    }

    #[test]
    fn nesting_beyond_16_levels_becomes_nil() {
        check(&[
            r#"(function()
                 local t = {}
                 local cur = t
                 for _ = 1, 20 do cur[1] = {}; cur = cur[1] end
                 local x, steps = mp.unpack(mp.pack(t)), 0
                 while type(x[1]) == 'table' do x = x[1]; steps = steps + 1 end
                 return steps == 15 and x[1] == nil
               end)()"#,
            r#"(function()
                 local t = {}
                 t[1] = t
                 return type(mp.unpack(mp.pack(t))) == 'table'
               end)()"#,
        ]);
    }

    #[test]
    fn decodes_every_type() {
        check(&[
            r#"mp.unpack("\208\255") == -1 and mp.unpack("\209\128\0") == -32768"#,
            r#"mp.unpack("\210\128\0\0\0") == -2^31 and mp.unpack("\206\255\255\255\255") == 2^32 - 1"#,
            r#"mp.unpack("\211\255\255\255\255\255\255\255\254") == -2"#,
            r#"mp.unpack("\207\255\255\255\255\255\255\255\255") == -1"#,
            r#"mp.unpack("\207\0\0\0\1\0\0\0\0") == 2^32"#,
            r#"mp.unpack("\202\63\192\0\0") == 1.5"#,
            r#"mp.unpack("\203\63\248\0\0\0\0\0\0") == 1.5"#,
            r#"mp.unpack("\196\3abc") == "abc" and mp.unpack("\197\0\1z") == "z""#,
            r#"mp.unpack("\198\0\0\0\2hi") == "hi""#,
            r#"mp.unpack("\212\1x") == "x" and mp.unpack("\213\1xy") == "xy""#,
            r#"mp.unpack("\216\1" .. ("q"):rep(16)) == ("q"):rep(16)"#,
            r#"mp.unpack("\199\2\5ab") == "ab" and mp.unpack("\200\0\1\5c") == "c""#,
            r#"mp.unpack("\201\0\0\0\1\5d") == "d""#,
            r#"eq(mp.unpack("\220\0\2\1\2"), {1, 2}) and eq(mp.unpack("\222\0\1\161k\192"), {})"#,
            r#"eq(mp.unpack("\223\0\0\0\1\1\2"), {[1] = 2}) and eq(mp.unpack("\221\0\0\0\0"), {})"#,
            r#"eq({mp.unpack("\192\194\195")}, {nil, false, true}) and select('#', mp.unpack("\192\194\195")) == 3"#,
        ]);
    }

    #[test]
    fn unpack_one_and_limit_report_offsets() {
        check(&[
            r#"(function()
                 local s = mp.pack(1, "a", {2})
                 local o1, v1 = mp.unpack_one(s)
                 local o2, v2 = mp.unpack_one(s, o1)
                 local o3, v3 = mp.unpack_one(s, o2)
                 return o1 == 1 and v1 == 1 and o2 == 3 and v2 == "a" and o3 == -1 and eq(v3, {2})
               end)()"#,
            r#"eq({mp.unpack_limit(mp.pack(1, 2, 3), 2)}, {2, 1, 2})"#,
            r#"eq({mp.unpack_limit(mp.pack(1, 2, 3), 2, 2)}, {-1, 3})"#,
            r#"eq({mp.unpack_limit(mp.pack(1, 2, 3), 0)}, {1, 2, 3})"#,
            r#"eq({mp.unpack_one("")}, {-1})"#,
            r#"eq({mp.unpack_limit(("\1"):rep(10000), 3)}, {3, 1, 1, 1})"#,
        ]);
    }

    #[test]
    fn malformed_input_raises_lua_errors() {
        check(&[
            r#"err(mp.unpack, "\146\1") == "Missing bytes in input.""#,
            r#"err(mp.unpack, "\205\1") == "Missing bytes in input.""#,
            r#"err(mp.unpack, "\221\255\255\255\255") == "Missing bytes in input.""#,
            r#"err(mp.unpack, "\223\255\255\255\255\1") == "Missing bytes in input.""#,
            r#"err(mp.unpack, "\219\255\255\255\255abc") == "Missing bytes in input.""#,
            r#"err(mp.unpack, "\193") == "Bad data format in input.""#,
            r#"err(mp.unpack, "\129\192\1") == "table index is nil""#,
            r#"err(mp.unpack, "\129\203\127\248\0\0\0\0\0\0\1") == "table index is NaN""#,
            r#"err(mp.unpack, ("\145"):rep(100000) .. "\1") == "Too many nested data structures in input.""#,
            r#"type(mp.unpack(("\145"):rep(999) .. "\1")) == "table""#,
            r#"err(mp.unpack, ("\1"):rep(10000)):find("too many return values", 1, true) ~= nil"#,
            r#"err(mp.pack) == "bad argument #0 to 'pack' (MessagePack pack needs input.)""#,
            r#"err(mp.unpack) == "bad argument #1 to 'unpack' (string expected, got no value)""#,
            r#"err(mp.unpack_limit, "") == "bad argument #2 to 'unpack_limit' (number expected, got no value)""#,
            r#"err(mp.unpack_one, "ab", -1) == "Invalid request to unpack with offset of -1 and limit of 2.""#,
            r#"err(mp.unpack_one, "ab", 5) == "Start offset 5 greater than input length 2.""#,
            r#"type(err(mp.unpack, "\193")) == "string""#,
        ]);
    }

    /// Errors name the calling line as `luaL_error` does, except the bad
    /// key errors, which Lua's core raises without a position.
    #[test]
    fn errors_carry_the_callers_position() {
        let lua = Lua::new();
        register(&lua).unwrap();
        let chunk = "local function try(s) return select(2, pcall(function() local v = cmsgpack.unpack(s) end)) end
                     return try('\\146'), try('\\129\\192\\1')";
        let (eof, nil_key): (String, String) =
            lua.load(chunk).set_name("=user_script").eval().unwrap();
        assert_eq!(eof, "user_script:1: Missing bytes in input.");
        assert_eq!(nil_key, "table index is nil");
    }
}
