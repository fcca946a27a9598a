//! The `cjson` library: JSON as lua-cjson 2.1.0, the version bundled with
//! Redis, encodes and decodes it, configuration functions included.
//!
//! A table whose keys are all positive integers is an array (holes become
//! `null`, unless the array is too sparse); any other table, and the empty
//! table, is an object. Numbers print as `%.14g`. Decoding accepts what
//! lua-cjson accepts with Redis's build options, which includes the
//! non-JSON numbers `strtod` reads (hex, `Infinity`, `NaN`, leading `+` or
//! zeros) until `decode_invalid_numbers(false)`. JSON `null` decodes to
//! `cjson.null`, a NULL light userdata.
//!
//! Both directions keep containers on an explicit stack, so nesting is
//! bounded by the configured depth and never by the native stack.

use std::sync::{Arc, Mutex};

use mlua::{Error, Function, Lua, MultiValue, Table, Value};

use super::{add, add_many, arg_error, check_string, fail, type_name};

/// lua-cjson also stops where `lua_checkstack` fails, a few thousand levels
/// down, whatever depth is configured; this cap stands in for that.
const DEPTH_CAP: i64 = 8000;
/// Largest string `encode` builds; bounds the work a sparse-array setting
/// or a huge table can demand.
const MAX_OUTPUT: usize = 512 << 20;
const INT_MAX: i64 = i32::MAX as i64;

/// The settings lua-cjson keeps per module table, with its defaults.
#[derive(Clone, Copy)]
struct Config {
    sparse_convert: u8,
    sparse_ratio: i64,
    sparse_safe: i64,
    encode_max_depth: i64,
    decode_max_depth: i64,
    /// 0 rejects NaN/Inf, 1 writes `nan`/`inf`, 2 writes `null`.
    encode_invalid_numbers: u8,
    decode_invalid_numbers: u8,
    /// Only reported back: Rust has no shared buffer to keep.
    encode_keep_buffer: u8,
    precision: i64,
}

const DEFAULTS: Config = Config {
    sparse_convert: 0,
    sparse_ratio: 2,
    sparse_safe: 10,
    encode_max_depth: 1000,
    decode_max_depth: 1000,
    encode_invalid_numbers: 0,
    decode_invalid_numbers: 1,
    encode_keep_buffer: 1,
    precision: 14,
};

type Shared = Arc<Mutex<Config>>;

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Config> {
    shared
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Registers the `cjson` global table.
pub fn register(lua: &Lua) -> mlua::Result<()> {
    lua.globals().set("cjson", module(lua)?)
}

/// A module table with its own configuration (what `cjson.new()` returns).
fn module(lua: &Lua) -> mlua::Result<Table> {
    let lib = lua.create_table()?;
    let shared: Shared = Arc::new(Mutex::new(DEFAULTS));
    // The base library's `next`, taken now in case a sandbox hides it later.
    let next: Function = lua.globals().raw_get("next")?;
    let cfg = shared.clone();
    add(lua, &lib, "encode", move |lua, args| {
        if args.len() != 1 {
            return Err(arg_error(1, "encode", "expected 1 argument"));
        }
        let config = *lock(&cfg);
        let value = args.into_iter().next().unwrap_or(Value::Nil);
        Ok(Value::String(
            lua.create_string(encode(lua, &config, &next, value)?)?,
        ))
    })?;
    let cfg = shared.clone();
    add(lua, &lib, "decode", move |lua, args| {
        if args.len() != 1 {
            return Err(arg_error(1, "decode", "expected 1 argument"));
        }
        let config = *lock(&cfg);
        decode(lua, &config, &check_string(lua, &args, 1, "decode")?)
    })?;
    let cfg = shared.clone();
    add_many(lua, &lib, "encode_sparse_array", move |lua, args| {
        let f = "encode_sparse_array";
        arg_count(&args, 3, f)?;
        let mut c = lock(&cfg);
        let convert = enum_option(lua, &args, 1, f, &mut c.sparse_convert, &["off", "on"])?;
        let ratio = integer_option(lua, &args, 2, f, &mut c.sparse_ratio, 0, INT_MAX)?;
        let safe = integer_option(lua, &args, 3, f, &mut c.sparse_safe, 0, INT_MAX)?;
        Ok((lua.create_sequence_from([convert, ratio, safe])?, 3))
    })?;
    type Int = fn(&mut Config) -> &mut i64;
    let integers: [(&'static str, Int, i64, i64); 3] = [
        ("encode_max_depth", |c| &mut c.encode_max_depth, 1, INT_MAX),
        ("decode_max_depth", |c| &mut c.decode_max_depth, 1, INT_MAX),
        ("encode_number_precision", |c| &mut c.precision, 1, 14),
    ];
    for (name, field, min, max) in integers {
        let cfg = shared.clone();
        add(lua, &lib, name, move |lua, args| {
            arg_count(&args, 1, name)?;
            integer_option(lua, &args, 1, name, field(&mut lock(&cfg)), min, max)
        })?;
    }
    type Enum = fn(&mut Config) -> &mut u8;
    let enums: [(&'static str, Enum, &'static [&'static str]); 3] = [
        (
            "encode_keep_buffer",
            |c| &mut c.encode_keep_buffer,
            &["off", "on"],
        ),
        (
            "encode_invalid_numbers",
            |c| &mut c.encode_invalid_numbers,
            &["off", "on", "null"],
        ),
        (
            "decode_invalid_numbers",
            |c| &mut c.decode_invalid_numbers,
            &["off", "on"],
        ),
    ];
    for (name, field, options) in enums {
        let cfg = shared.clone();
        add(lua, &lib, name, move |lua, args| {
            arg_count(&args, 1, name)?;
            enum_option(lua, &args, 1, name, field(&mut lock(&cfg)), options)
        })?;
    }
    add(lua, &lib, "new", |lua, _| module(lua).map(Value::Table))?;
    lib.set("null", Value::NULL)?;
    lib.set("_NAME", "cjson")?;
    lib.set("_VERSION", "2.1.0")?;
    Ok(lib)
}

/// The open tables of a walk, innermost last. mlua can keep only a few
/// thousand handles alive at once while nesting here is bounded only by
/// configuration, so the tables (and keys) of levels deeper than [`HELD`]
/// wait in a Lua table instead of in Rust.
struct Nest<F> {
    frames: Vec<F>,
    table: Option<Table>,
    /// Objects: the key being encoded, or the key awaiting its value.
    key: Value,
    outer: Vec<(Table, Value)>,
    spill: Option<Table>,
}

/// Levels whose tables a [`Nest`] keeps in Rust.
const HELD: usize = 64;

impl<F> Nest<F> {
    fn new() -> Self {
        Nest {
            frames: Vec::new(),
            table: None,
            key: Value::Nil,
            outer: Vec::new(),
            spill: None,
        }
    }

    fn depth(&self) -> usize {
        self.frames.len()
    }

    fn push(&mut self, lua: &Lua, table: Table, frame: F) -> mlua::Result<()> {
        if let Some(outer) = self.table.replace(table) {
            let key = std::mem::replace(&mut self.key, Value::Nil);
            let level = self.frames.len();
            if level <= HELD {
                self.outer.push((outer, key));
            } else {
                let spill = match &self.spill {
                    Some(spill) => spill,
                    None => self.spill.insert(lua.create_table()?),
                };
                let at = 2 * level as i64;
                spill.raw_set(at - 1, outer)?;
                spill.raw_set(at, key)?;
            }
        }
        self.frames.push(frame);
        Ok(())
    }

    /// Closes the innermost table and returns it.
    fn pop(&mut self) -> mlua::Result<Value> {
        self.frames.pop();
        let done = self.table.take().map_or(Value::Nil, Value::Table);
        let level = self.frames.len();
        let (table, key) = match &self.spill {
            _ if level == 0 => (None, Value::Nil),
            Some(spill) if level > HELD => {
                let at = 2 * level as i64;
                let restored = (Some(spill.raw_get(at - 1)?), spill.raw_get(at)?);
                spill.raw_set(at - 1, Value::Nil)?;
                spill.raw_set(at, Value::Nil)?;
                restored
            }
            _ => self
                .outer
                .pop()
                .map_or((None, Value::Nil), |(t, k)| (Some(t), k)),
        };
        self.table = table;
        self.key = key;
        Ok(done)
    }
}

/// Where `encode` is inside an open table.
enum OutFrame {
    /// Elements `next..=len`, read as they are written.
    Array { next: i64, len: i64 },
    /// Entries read in advance (small tables): array elements in order with
    /// no key, or object entries. `held` handles count against the budget.
    Listed {
        entries: std::vec::IntoIter<(Option<Value>, Value)>,
        array: bool,
        first: bool,
        held: usize,
    },
    /// An object walked with `next`.
    Object { first: bool },
}

/// Entries a table may have to be read in advance, and the handles all
/// open tables together may hold that way.
const SMALL: usize = 32;
const LISTED_BUDGET: usize = 1024;

fn encode(lua: &Lua, cfg: &Config, next_fn: &Function, value: Value) -> mlua::Result<Vec<u8>> {
    let max_depth = cfg.encode_max_depth.min(DEPTH_CAP);
    let mut out = Vec::new();
    let mut nest: Nest<OutFrame> = Nest::new();
    let mut budget = LISTED_BUDGET;
    let mut pending = Some(value);
    loop {
        match pending.take() {
            Some(Value::Table(table)) => {
                let depth = nest.depth() as i64 + 1;
                if depth > max_depth {
                    return Err(fail(format!(
                        "Cannot serialise, excessive nesting ({depth})"
                    )));
                }
                let frame = open_table(cfg, &table, &mut budget)?;
                out.push(match frame {
                    OutFrame::Array { .. } | OutFrame::Listed { array: true, .. } => b'[',
                    _ => b'{',
                });
                nest.push(lua, table, frame)?;
            }
            Some(value) => append_scalar(&mut out, cfg, &value)?,
            None => {}
        }
        if out.len() > MAX_OUTPUT {
            return Err(fail("Cannot serialise, output too large"));
        }
        let (Some(frame), Some(table)) = (nest.frames.last_mut(), &nest.table) else {
            return Ok(out);
        };
        let (key, value, first) = match frame {
            OutFrame::Array { next, len } => {
                if *next > *len {
                    out.push(b']');
                    nest.pop()?;
                    continue;
                }
                let value = table.raw_get(*next)?;
                *next += 1;
                (None, value, *next == 2)
            }
            OutFrame::Listed {
                entries,
                array,
                first,
                held,
            } => match entries.next() {
                Some((key, value)) => (key, value, std::mem::replace(first, false)),
                None => {
                    out.push(if *array { b']' } else { b'}' });
                    budget += *held;
                    nest.pop()?;
                    continue;
                }
            },
            OutFrame::Object { first } => {
                let (key, value): (Value, Value) = next_fn.call((table, &nest.key))?;
                if key.is_nil() {
                    out.push(b'}');
                    nest.pop()?;
                    continue;
                }
                nest.key = key.clone();
                (Some(key), value, std::mem::replace(first, false))
            }
        };
        if !first {
            out.push(b',');
        }
        if let Some(key) = key {
            append_key(&mut out, cfg, &key)?;
        }
        pending = Some(value);
    }
}

/// Starts writing `table`: decides array or object as lua-cjson does, and
/// reads a small table's entries in the same pass.
fn open_table(cfg: &Config, table: &Table, budget: &mut usize) -> mlua::Result<OutFrame> {
    let (mut max, mut items, mut is_array) = (0i64, 0i64, true);
    let mut entries = Vec::new();
    let mut listing = *budget >= 2 * SMALL;
    for pair in table.pairs::<Value, Value>() {
        let (key, value) = pair?;
        // Keys beyond `int` range make an object: lua-cjson's `int`
        // bookkeeping breaks down there.
        match &key {
            Value::Integer(_) | Value::Number(_) if is_array => {
                let k = number(&key);
                if k >= 1.0 && k.fract() == 0.0 && k <= INT_MAX as f64 {
                    max = max.max(k as i64);
                    items += 1;
                } else {
                    is_array = false;
                }
            }
            _ => is_array = false,
        }
        if listing && entries.len() < SMALL {
            entries.push((key, value));
        } else {
            listing = false;
            entries = Vec::new();
            if !is_array {
                break;
            }
        }
    }
    let ratio = cfg.sparse_ratio;
    if is_array && ratio > 0 && max > items.saturating_mul(ratio) && max > cfg.sparse_safe {
        if cfg.sparse_convert == 0 {
            return Err(fail("Cannot serialise table: excessively sparse array"));
        }
        is_array = false;
    }
    let array = is_array && max > 0;
    if !listing || (array && max > 2 * SMALL as i64) {
        return Ok(if array {
            OutFrame::Array { next: 1, len: max }
        } else {
            OutFrame::Object { first: true }
        });
    }
    let held = 2 * entries.len();
    *budget -= held;
    let entries: Vec<_> = if array {
        let mut slots = vec![Value::Nil; max as usize];
        for (key, value) in entries {
            if let Some(slot) = slots.get_mut((number(&key) as usize).wrapping_sub(1)) {
                *slot = value;
            }
        }
        slots.into_iter().map(|v| (None, v)).collect()
    } else {
        entries.into_iter().map(|(k, v)| (Some(k), v)).collect()
    };
    Ok(OutFrame::Listed {
        entries: entries.into_iter(),
        array,
        first: true,
        held,
    })
}

/// An object key: numbers are written as strings.
fn append_key(out: &mut Vec<u8>, cfg: &Config, key: &Value) -> mlua::Result<()> {
    match key {
        Value::Integer(_) | Value::Number(_) => {
            out.push(b'"');
            append_number(out, cfg, number(key))?;
            out.extend_from_slice(b"\":");
        }
        Value::String(s) => {
            append_string(out, &s.as_bytes());
            out.push(b':');
        }
        other => {
            let t = type_name(Some(other));
            return Err(fail(format!(
                "Cannot serialise {t}: table key must be a number or string"
            )));
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

fn append_scalar(out: &mut Vec<u8>, cfg: &Config, value: &Value) -> mlua::Result<()> {
    match value {
        Value::String(s) => append_string(out, &s.as_bytes()),
        Value::Integer(_) | Value::Number(_) => append_number(out, cfg, number(value))?,
        Value::Boolean(true) => out.extend_from_slice(b"true"),
        Value::Boolean(false) => out.extend_from_slice(b"false"),
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        other => {
            let t = type_name(Some(other));
            return Err(fail(format!("Cannot serialise {t}: type not supported")));
        }
    }
    Ok(())
}

fn append_number(out: &mut Vec<u8>, cfg: &Config, n: f64) -> mlua::Result<()> {
    match cfg.encode_invalid_numbers {
        0 if !n.is_finite() => {
            return Err(fail("Cannot serialise number: must not be NaN or Inf"));
        }
        1 if n.is_nan() => {
            out.extend_from_slice(b"nan");
            return Ok(());
        }
        2 if !n.is_finite() => {
            out.extend_from_slice(b"null");
            return Ok(());
        }
        _ => {}
    }
    out.extend_from_slice(format_g(n, cfg.precision.clamp(1, 17) as usize).as_bytes());
    Ok(())
}

/// C's `%.<precision>g`: the shorter of fixed and exponent notation, with
/// trailing zeros dropped.
fn format_g(n: f64, precision: usize) -> String {
    if n.is_infinite() {
        return if n > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if n == 0.0 {
        return if n.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // Integers of up to `precision` digits print in full either way.
    if n.fract() == 0.0 && n.abs() < 10f64.powi(precision as i32) {
        return (n as i64).to_string();
    }
    let sci = format!("{:.*e}", precision - 1, n);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i64 = exp.parse().unwrap_or(0);
    let trim = |s: &str| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if exp < -4 || exp >= precision as i64 {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exp.abs())
    } else {
        trim(&format!("{:.*}", (precision as i64 - 1 - exp) as usize, n))
    }
}

/// A JSON string literal in lua-cjson's style: `/` and DEL are escaped too,
/// other bytes (invalid UTF-8 included) pass through.
fn append_string(out: &mut Vec<u8>, s: &[u8]) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\x08' => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\x0c' => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str(Vec<u8>),
    Num(f64),
    Bool(bool),
    Null,
    Colon,
    Comma,
    End,
    Error(&'static str),
}

struct Token {
    kind: Tok,
    /// 0-based offset reported (plus one) in error messages.
    index: usize,
}

/// "Expected <what> but found <token> at character <n>".
fn parse_error(what: &str, token: &Token) -> Error {
    let found = match token.kind {
        Tok::ObjBegin => "T_OBJ_BEGIN",
        Tok::ObjEnd => "T_OBJ_END",
        Tok::ArrBegin => "T_ARR_BEGIN",
        Tok::ArrEnd => "T_ARR_END",
        Tok::Str(_) => "T_STRING",
        Tok::Num(_) => "T_NUMBER",
        Tok::Bool(_) => "T_BOOLEAN",
        Tok::Null => "T_NULL",
        Tok::Colon => "T_COLON",
        Tok::Comma => "T_COMMA",
        Tok::End => "T_END",
        Tok::Error(msg) => msg,
    };
    fail(format!(
        "Expected {what} but found {found} at character {}",
        token.index + 1
    ))
}

struct Lexer<'a> {
    data: &'a [u8],
    pos: usize,
    invalid_numbers: bool,
}

impl Lexer<'_> {
    /// The byte at `i`; lua-cjson reads a C string, so the end reads as NUL.
    fn at(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    fn rest(&self, i: usize) -> &[u8] {
        self.data.get(i..).unwrap_or_default()
    }

    fn next_token(&mut self) -> Token {
        while matches!(self.at(self.pos), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let index = self.pos;
        let single = |kind| (kind, 1);
        let (kind, width) = match self.at(index) {
            b'{' => single(Tok::ObjBegin),
            b'}' => single(Tok::ObjEnd),
            b'[' => single(Tok::ArrBegin),
            b']' => single(Tok::ArrEnd),
            b':' => single(Tok::Colon),
            b',' => single(Tok::Comma),
            0 => (Tok::End, 0),
            b'"' => return self.string(),
            b'-' | b'0'..=b'9' if !self.invalid_numbers && self.invalid_number() => {
                (Tok::Error("invalid number"), 0)
            }
            b'-' | b'0'..=b'9' => return self.number(),
            _ if self.rest(index).starts_with(b"true") => (Tok::Bool(true), 4),
            _ if self.rest(index).starts_with(b"false") => (Tok::Bool(false), 5),
            _ if self.rest(index).starts_with(b"null") => (Tok::Null, 4),
            b'i' | b'I' | b'n' | b'N' | b'+' if self.invalid_numbers && self.invalid_number() => {
                return self.number();
            }
            _ => (Tok::Error("invalid token"), 0),
        };
        self.pos += width;
        Token { kind, index }
    }

    /// What lua-cjson calls an invalid number: one strict JSON forbids but
    /// `strtod` may read (leading `+`, hex, leading zeros, inf, nan).
    fn invalid_number(&self) -> bool {
        let mut p = self.pos;
        match self.at(p) {
            b'+' => return true,
            b'-' => p += 1,
            _ => {}
        }
        match self.at(p) {
            b'0' => {
                let next = self.at(p + 1);
                next | 0x20 == b'x' || next.is_ascii_digit()
            }
            c if c <= b'9' => false,
            _ => {
                let rest = self.rest(p);
                let prefix = |w: &[u8]| rest.get(..3).is_some_and(|r| r.eq_ignore_ascii_case(w));
                prefix(b"inf") || prefix(b"nan")
            }
        }
    }

    fn number(&mut self) -> Token {
        let index = self.pos;
        match strtod(self.rest(index)) {
            Some((n, len)) => {
                self.pos += len;
                Token {
                    kind: Tok::Num(n),
                    index,
                }
            }
            None => Token {
                kind: Tok::Error("invalid number"),
                index,
            },
        }
    }

    fn string(&mut self) -> Token {
        let error = |kind, index| Token {
            kind: Tok::Error(kind),
            index,
        };
        let start = self.pos;
        self.pos += 1;
        let mut buf = Vec::new();
        loop {
            match self.at(self.pos) {
                b'"' => break,
                0 => return error("unexpected end of string", self.pos),
                b'\\' => {
                    let decoded = match self.at(self.pos + 1) {
                        b'u' => match self.unicode_escape(&mut buf) {
                            Some(len) => {
                                self.pos += len;
                                continue;
                            }
                            None => return error("invalid unicode escape code", self.pos),
                        },
                        c @ (b'"' | b'\\' | b'/') => c,
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        _ => return error("invalid escape code", self.pos),
                    };
                    buf.push(decoded);
                    self.pos += 2;
                }
                c => {
                    buf.push(c);
                    self.pos += 1;
                }
            }
        }
        self.pos += 1;
        Token {
            kind: Tok::Str(buf),
            index: start,
        }
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        (at..at + 4).try_fold(0, |acc, i| {
            Some(acc << 4 | char::from(self.at(i)).to_digit(16)?)
        })
    }

    /// Decodes `\uXXXX` (a surrogate pair takes two) at `self.pos` into
    /// UTF-8, returning how many input bytes it spans.
    fn unicode_escape(&self, buf: &mut Vec<u8>) -> Option<usize> {
        let high = self.hex4(self.pos + 2)?;
        if high & 0xF800 != 0xD800 {
            push_utf8(buf, high);
            return Some(6);
        }
        // A lone low surrogate, or a high one without its partner, is invalid.
        if high & 0x400 != 0 || self.at(self.pos + 6) != b'\\' || self.at(self.pos + 7) != b'u' {
            return None;
        }
        let low = self
            .hex4(self.pos + 8)
            .filter(|low| low & 0xFC00 == 0xDC00)?;
        push_utf8(buf, (((high & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000);
        Some(12)
    }
}

fn push_utf8(buf: &mut Vec<u8>, cp: u32) {
    match cp {
        0..=0x7F => buf.push(cp as u8),
        0x80..=0x7FF => buf.extend_from_slice(&[0xC0 | (cp >> 6) as u8, 0x80 | (cp & 0x3F) as u8]),
        0x800..=0xFFFF => buf.extend_from_slice(&[
            0xE0 | (cp >> 12) as u8,
            0x80 | ((cp >> 6) & 0x3F) as u8,
            0x80 | (cp & 0x3F) as u8,
        ]),
        _ => buf.extend_from_slice(&[
            0xF0 | (cp >> 18) as u8,
            0x80 | ((cp >> 12) & 0x3F) as u8,
            0x80 | ((cp >> 6) & 0x3F) as u8,
            0x80 | (cp & 0x3F) as u8,
        ]),
    }
}

/// C's `strtod` on the start of `s`: the value and how many bytes it read,
/// or `None` when no number starts there. Decimal forms go through Rust's
/// correctly rounded parser; hex mantissas keep 60 bits plus a sticky bit.
fn strtod(s: &[u8]) -> Option<(f64, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let sign_len = usize::from(matches!(at(0), b'+' | b'-'));
    let sign = if at(0) == b'-' { -1.0 } else { 1.0 };
    let rest = &s[sign_len..];
    let word = |w: &[u8]| {
        rest.get(..w.len())
            .is_some_and(|r| r.eq_ignore_ascii_case(w))
    };
    if word(b"infinity") {
        return Some((sign * f64::INFINITY, sign_len + 8));
    }
    if word(b"inf") {
        return Some((sign * f64::INFINITY, sign_len + 3));
    }
    if word(b"nan") {
        let mut end = sign_len + 3;
        if at(end) == b'(' {
            let close = (end + 1..).find(|&i| !(at(i).is_ascii_alphanumeric() || at(i) == b'_'));
            if let Some(close) = close.filter(|&i| at(i) == b')') {
                end = close + 1;
            }
        }
        return Some((f64::NAN, end));
    }
    if at(sign_len) == b'0' && at(sign_len + 1) | 0x20 == b'x' {
        if let Some((n, len)) = hex_float(&s[sign_len + 2..]) {
            return Some((sign * n, sign_len + 2 + len));
        }
    }
    let digits_from = |mut i: usize| {
        while at(i).is_ascii_digit() {
            i += 1;
        }
        i
    };
    let int_end = digits_from(sign_len);
    let mut end = int_end;
    let mut digits = int_end - sign_len;
    if at(end) == b'.' {
        let frac_end = digits_from(end + 1);
        digits += frac_end - end - 1;
        end = frac_end;
    }
    if digits == 0 {
        return None;
    }
    if at(end) | 0x20 == b'e' {
        let exp_start = end + 1 + usize::from(matches!(at(end + 1), b'+' | b'-'));
        if at(exp_start).is_ascii_digit() {
            end = digits_from(exp_start);
        }
    }
    let text = std::str::from_utf8(&s[..end]).ok()?;
    Some((text.parse().ok()?, end))
}

/// The hex digits (with optional point and binary exponent) after `0x`.
fn hex_float(s: &[u8]) -> Option<(f64, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let digit = |i: usize| char::from(at(i)).to_digit(16).map(u64::from);
    let (mut mantissa, mut exp, mut sticky, mut any) = (0u64, 0i64, false, false);
    let mut i = 0;
    let mut after_point = false;
    loop {
        if let Some(d) = digit(i) {
            any = true;
            if mantissa < 1 << 60 {
                mantissa = mantissa << 4 | d;
                exp -= if after_point { 4 } else { 0 };
            } else {
                sticky |= d != 0;
                exp += if after_point { 0 } else { 4 };
            }
        } else if at(i) == b'.' && !after_point {
            after_point = true;
        } else {
            break;
        }
        i += 1;
    }
    if !any {
        return None;
    }
    if at(i) | 0x20 == b'p' {
        let start = i + 1 + usize::from(matches!(at(i + 1), b'+' | b'-'));
        if at(start).is_ascii_digit() {
            let mut e: i64 = 0;
            let mut j = start;
            while at(j).is_ascii_digit() {
                e = (e * 10 + i64::from(at(j) - b'0')).min(100_000);
                j += 1;
            }
            exp += if at(i + 1) == b'-' { -e } else { e };
            i = j;
        }
    }
    let exp = exp.clamp(-4000, 4000) as i32;
    // Scale in two steps so an intermediate power of two cannot underflow
    // or overflow on its own.
    let value =
        (mantissa | u64::from(sticky)) as f64 * 2f64.powi(exp / 2) * 2f64.powi(exp - exp / 2);
    Some((value, i))
}

/// What `decode` is filling: an array (and the next index) or an object.
enum InFrame {
    Array { next: i64 },
    Object,
}

fn decode(lua: &Lua, cfg: &Config, data: &[u8]) -> mlua::Result<Value> {
    if data.len() >= 2 && (data[0] == 0 || data[1] == 0) {
        return Err(fail("JSON parser does not support UTF-16 or UTF-32"));
    }
    let max_depth = cfg.decode_max_depth.min(DEPTH_CAP) as usize;
    let mut lex = Lexer {
        data,
        pos: 0,
        invalid_numbers: cfg.decode_invalid_numbers != 0,
    };
    let mut nest: Nest<InFrame> = Nest::new();
    // Reads an object key and its colon, leaving the lexer at the value.
    let object_key = |lex: &mut Lexer, token: Token| -> mlua::Result<Value> {
        match token.kind {
            Tok::Str(key) => match lex.next_token() {
                Token {
                    kind: Tok::Colon, ..
                } => Ok(Value::String(lua.create_string(key)?)),
                other => Err(parse_error("colon", &other)),
            },
            _ => Err(parse_error("object key string", &token)),
        }
    };
    let mut token = lex.next_token();
    loop {
        let mut value = match token.kind {
            Tok::Str(s) => Value::String(lua.create_string(s)?),
            Tok::Num(n) => Value::Number(n),
            Tok::Bool(b) => Value::Boolean(b),
            Tok::Null => Value::NULL,
            Tok::ObjBegin | Tok::ArrBegin => {
                let depth = nest.depth() + 1;
                if depth > max_depth {
                    let at = lex.pos;
                    let msg = format!(
                        "Found too many nested data structures ({depth}) at character {at}"
                    );
                    return Err(fail(msg));
                }
                let table = lua.create_table()?;
                let first = lex.next_token();
                match (token.kind, first.kind) {
                    (Tok::ObjBegin, Tok::ObjEnd) | (Tok::ArrBegin, Tok::ArrEnd) => {
                        Value::Table(table)
                    }
                    (Tok::ObjBegin, kind) => {
                        let key = object_key(
                            &mut lex,
                            Token {
                                kind,
                                index: first.index,
                            },
                        )?;
                        nest.push(lua, table, InFrame::Object)?;
                        nest.key = key;
                        token = lex.next_token();
                        continue;
                    }
                    (_, kind) => {
                        nest.push(lua, table, InFrame::Array { next: 1 })?;
                        token = Token {
                            kind,
                            index: first.index,
                        };
                        continue;
                    }
                }
            }
            _ => return Err(parse_error("value", &token)),
        };
        // Store the value in its table, closing each table it completes,
        // until another value is due.
        loop {
            let (Some(frame), Some(table)) = (nest.frames.last_mut(), &nest.table) else {
                let end = lex.next_token();
                if !matches!(end.kind, Tok::End) {
                    return Err(parse_error("the end", &end));
                }
                return Ok(value);
            };
            let in_array = match frame {
                InFrame::Array { next } => {
                    table.raw_set(*next, value)?;
                    *next += 1;
                    true
                }
                InFrame::Object => {
                    table.raw_set(std::mem::replace(&mut nest.key, Value::Nil), value)?;
                    false
                }
            };
            let after = lex.next_token();
            match (in_array, after.kind) {
                (true, Tok::ArrEnd) | (false, Tok::ObjEnd) => value = nest.pop()?,
                (true, Tok::Comma) => {
                    token = lex.next_token();
                    break;
                }
                (false, Tok::Comma) => {
                    let key_token = lex.next_token();
                    nest.key = object_key(&mut lex, key_token)?;
                    token = lex.next_token();
                    break;
                }
                (true, kind) => {
                    return Err(parse_error(
                        "comma or array end",
                        &Token {
                            kind,
                            index: after.index,
                        },
                    ));
                }
                (false, kind) => {
                    return Err(parse_error(
                        "comma or object end",
                        &Token {
                            kind,
                            index: after.index,
                        },
                    ));
                }
            }
        }
    }
}

/// Rejects calls with more than `max` arguments, as lua-cjson's option
/// functions do.
fn arg_count(args: &MultiValue, max: usize, func: &str) -> mlua::Result<()> {
    if args.len() > max {
        return Err(arg_error(max + 1, func, "found too many arguments"));
    }
    Ok(())
}

/// Sets an integer option when the argument is given; returns its value.
fn integer_option(
    lua: &Lua,
    args: &MultiValue,
    index: usize,
    func: &str,
    setting: &mut i64,
    min: i64,
    max: i64,
) -> mlua::Result<Value> {
    if let Some(value) = args.get(index - 1).filter(|v| !v.is_nil()) {
        let n = match value {
            Value::Integer(i) => Some(*i as f64),
            Value::Number(n) => Some(*n),
            Value::String(_) => lua.coerce_number(value.clone())?,
            _ => None,
        }
        .ok_or_else(|| {
            let got = type_name(Some(value));
            arg_error(index, func, &format!("number expected, got {got}"))
        })?;
        // The C code stores the option in an int.
        let n = n as i64 as i32 as i64;
        if !(min..=max).contains(&n) {
            // lua-cjson always blames argument 1 here.
            return Err(arg_error(
                1,
                func,
                &format!("expected integer between {min} and {max}"),
            ));
        }
        *setting = n;
    }
    Ok(Value::Number(*setting as f64))
}

/// Sets an enumerated option (a boolean or one of `options` by name) when
/// the argument is given; returns it as a boolean for off/on, else by name.
fn enum_option(
    lua: &Lua,
    args: &MultiValue,
    index: usize,
    func: &str,
    setting: &mut u8,
    options: &[&str],
) -> mlua::Result<Value> {
    match args.get(index - 1) {
        None | Some(Value::Nil) => {}
        Some(Value::Boolean(b)) => *setting = u8::from(*b),
        Some(_) => {
            let name = check_string(lua, args, index, func)?;
            let found = options.iter().position(|o| o.as_bytes() == name.as_slice());
            let Some(found) = found else {
                let name = String::from_utf8_lossy(&name);
                return Err(arg_error(index, func, &format!("invalid option '{name}'")));
            };
            *setting = found as u8;
        }
    }
    Ok(match options.get(usize::from(*setting)) {
        Some(name) if *setting > 1 => Value::String(lua.create_string(name)?),
        _ => Value::Boolean(*setting == 1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deep equality for round-trip checks, and the message of a failed call.
    const PRELUDE: &str = "local function eq(a, b)
        if type(a) ~= type(b) then return false end
        if type(a) ~= 'table' then return a == b end
        for k, v in pairs(a) do if not eq(v, b[k]) then return false end end
        for k in pairs(b) do if a[k] == nil then return false end end
        return true
      end
      local function err(...) return select(2, pcall(...)) end
      local function nest(n)
        local t = {}
        local cur = t
        for _ = 2, n do cur[1] = {}; cur = cur[1] end
        return t
      end\n";

    fn check(cases: &[&str]) {
        let lua = Lua::new();
        register(&lua).unwrap();
        crate::libs::assert_cases(&lua, PRELUDE, cases);
    }

    #[test]
    fn encodes_tables_as_arrays_or_objects() {
        check(&[
            r#"cjson.encode({1, 2, 3}) == "[1,2,3]""#,
            r#"cjson.encode({a = 1}) == '{"a":1}'"#,
            r#"cjson.encode({}) == "{}""#,
            r#"cjson.encode({{}, {a = {true, false}}}) == '[{},{"a":[true,false]}]'"#,
            r#"cjson.encode({[1] = 1, [2] = 2, [4] = 4}) == "[1,2,null,4]""#,
            r#"cjson.encode({[10] = 1}) == "[null,null,null,null,null,null,null,null,null,1]""#,
            r#"cjson.encode({[1.5] = 1}) == '{"1.5":1}'"#,
            r#"cjson.encode({[-1] = "x"}) == '{"-1":"x"}'"#,
            r#"eq(cjson.decode(cjson.encode({1, a = 2})), {["1"] = 1, a = 2})"#,
            r#"cjson.encode({1, cjson.null}) == "[1,null]" and cjson.encode(cjson.null) == "null""#,
            r#"cjson.encode(nil) == "null" and cjson.encode(true) == "true""#,
        ]);
    }

    #[test]
    fn encodes_numbers_as_percent_14g() {
        check(&[
            r#"cjson.encode(1) == "1" and cjson.encode(1.5) == "1.5" and cjson.encode(-0.5) == "-0.5""#,
            r#"cjson.encode(0.1) == "0.1" and cjson.encode(1/3) == "0.33333333333333""#,
            r#"cjson.encode(1e20) == "1e+20" and cjson.encode(1e-5) == "1e-05""#,
            r#"cjson.encode(0.0001) == "0.0001" and cjson.encode(123456) == "123456""#,
            r#"cjson.encode(123456789012345678) == "1.2345678901235e+17""#,
            r#"cjson.encode(2^53) == "9.007199254741e+15" and cjson.encode(99999999999999) == "99999999999999""#,
            r#"cjson.encode(999999999999999) == "1e+15" and cjson.encode(-1e300) == "-1e+300""#,
            r#"cjson.encode(0) == "0" and cjson.encode(-2^31) == "-2147483648""#,
        ]);
    }

    #[test]
    fn escapes_strings_like_lua_cjson() {
        check(&[
            r#"cjson.encode("a/b") == [["a\/b"]]"#,
            r#"cjson.encode('q"\\') == [["q\"\\"]]"#,
            r#"cjson.encode("\n\r\t\b\f") == [["\n\r\t\b\f"]]"#,
            r#"cjson.encode("\0\1\31\127") == [["\u0000\u0001\u001f\u007f"]]"#,
            r#"cjson.encode("\195\169\255") == '"\195\169\255"'"#,
        ]);
    }

    #[test]
    fn encode_errors_and_limits() {
        check(&[
            r#"err(cjson.encode, print) == "Cannot serialise function: type not supported""#,
            r#"err(cjson.encode, {[true] = 1}) == "Cannot serialise boolean: table key must be a number or string""#,
            r#"err(cjson.encode, 0/0) == "Cannot serialise number: must not be NaN or Inf""#,
            r#"err(cjson.encode, {1/0}) == "Cannot serialise number: must not be NaN or Inf""#,
            r#"err(cjson.encode, {[20] = 1}) == "Cannot serialise table: excessively sparse array""#,
            r#"err(cjson.encode, coroutine.create(function() end)) == "Cannot serialise thread: type not supported""#,
            r#"err(cjson.encode) == "bad argument #1 to 'encode' (expected 1 argument)""#,
            r#"err(cjson.encode, 1, 2) == "bad argument #1 to 'encode' (expected 1 argument)""#,
            r#"#cjson.encode(nest(1000)) == 2000"#,
            r#"err(cjson.encode, nest(1001)) == "Cannot serialise, excessive nesting (1001)""#,
            r#"(function() local t = {}; t[1] = t
                 return err(cjson.encode, t) == "Cannot serialise, excessive nesting (1001)" end)()"#,
            r#"(function() local t = {}; t.self = t
                 return err(cjson.encode, t) == "Cannot serialise, excessive nesting (1001)" end)()"#,
        ]);
    }

    #[test]
    fn encode_options() {
        check(&[
            r#"eq({cjson.encode_sparse_array()}, {false, 2, 10})"#,
            r#"eq({cjson.encode_sparse_array(true)}, {true, 2, 10}) and cjson.encode({[20] = 1}) == '{"20":1}'"#,
            r#"eq({cjson.encode_sparse_array(false, 0)}, {false, 0, 10}) and #cjson.encode({[30] = 1}) == 148"#,
            r#"cjson.encode_max_depth(3) == 3 and cjson.encode({{{1}}}) == "[[[1]]]""#,
            r#"err(cjson.encode, {{{{1}}}}) == "Cannot serialise, excessive nesting (4)""#,
            r#"err(cjson.encode_max_depth, 0) == "bad argument #1 to 'encode_max_depth' (expected integer between 1 and 2147483647)""#,
            r#"err(cjson.encode_max_depth, 1, 2) == "bad argument #2 to 'encode_max_depth' (found too many arguments)""#,
            r#"cjson.encode_number_precision(3) == 3 and cjson.encode(1/3) == "0.333" and cjson.encode(1234) == "1.23e+03""#,
            r#"err(cjson.encode_number_precision, 15) == "bad argument #1 to 'encode_number_precision' (expected integer between 1 and 14)""#,
            r#"cjson.encode_number_precision(14) == 14"#,
            r#"cjson.encode_invalid_numbers(true) == true and cjson.encode({1/0, -1/0, 0/0}) == "[inf,-inf,nan]""#,
            r#"cjson.encode_invalid_numbers("null") == "null" and cjson.encode(0/0) == "null""#,
            r#"cjson.encode_invalid_numbers("off") == false"#,
            r#"cjson.encode_keep_buffer() == true and cjson.encode_keep_buffer(false) == false"#,
            r#"err(cjson.encode_keep_buffer, "maybe") == "bad argument #1 to 'encode_keep_buffer' (invalid option 'maybe')""#,
            r#"err(cjson.decode_max_depth, "x") == "bad argument #1 to 'decode_max_depth' (number expected, got string)""#,
        ]);
    }

    #[test]
    fn decodes_json() {
        check(&[
            r#"eq(cjson.decode("[1,2,3]"), {1, 2, 3}) and eq(cjson.decode(" {} "), {})"#,
            r#"eq(cjson.decode('{"a":1,"b":[true,false,null],"c":{"d":"e"}}'),
                  {a = 1, b = {true, false, cjson.null}, c = {d = "e"}})"#,
            r#"cjson.decode('null') == cjson.null and cjson.decode('[null]')[1] == cjson.null"#,
            r#"cjson.decode(" 1.5e2 ") == 150 and cjson.decode("-0.25") == -0.25 and cjson.decode("12") == 12"#,
            r#"cjson.decode('"a\\/b\\"\\\\\\n\\t\\b\\f\\r"') == 'a/b"\\\n\t\b\f\r'"#,
            r#"cjson.decode('"\\u00e9\\u0041\\u20ac"') == "\195\169A\226\130\172""#,
            r#"cjson.decode('"\\ud83d\\ude00"') == "\240\159\152\128""#,
            r#"cjson.decode('"\\u0000x"') == "\0x" and cjson.decode('"\255raw"') == "\255raw""#,
            r#"cjson.decode('{"a":1,"a":2}').a == 2"#,
            r#"cjson.decode(123) == 123"#,
            r#"cjson.decode("12\0garbage") == 12"#,
            r#"#cjson.decode(("["):rep(1000) .. ("]"):rep(1000)) == 1"#,
        ]);
    }

    #[test]
    fn decodes_the_numbers_strtod_reads() {
        check(&[
            r#"cjson.decode("0x10") == 16 and cjson.decode("-0x1p4") == -16 and cjson.decode("0x1.8p1") == 3"#,
            r#"cjson.decode("Infinity") == 1/0 and cjson.decode("-inf") == -1/0"#,
            r#"(function() local n = cjson.decode("NaN") return n ~= n end)()"#,
            r#"cjson.decode("+1") == 1 and cjson.decode("007") == 7 and cjson.decode("1.") == 1"#,
            r#"cjson.decode("1e400") == 1/0 and cjson.decode("-.5") == -0.5"#,
            r#"err(cjson.decode, "1e") == "Expected the end but found invalid token at character 2""#,
            r#"err(cjson.decode, "-") == "Expected value but found invalid number at character 1""#,
            r#"err(cjson.decode, "+") == "Expected value but found invalid number at character 1""#,
            r#"cjson.decode_invalid_numbers(false) == false"#,
            r#"err(cjson.decode, "0x10") == "Expected value but found invalid number at character 1""#,
            r#"err(cjson.decode, "[01]") == "Expected value but found invalid number at character 2""#,
            r#"err(cjson.decode, "NaN") == "Expected value but found invalid token at character 1""#,
            r#"cjson.decode("-1.5") == -1.5"#,
        ]);
    }

    #[test]
    fn decode_errors_name_the_token_and_position() {
        check(&[
            r#"err(cjson.decode, "x") == "Expected value but found invalid token at character 1""#,
            r#"err(cjson.decode, "") == "Expected value but found T_END at character 1""#,
            r#"err(cjson.decode, "[") == "Expected value but found T_END at character 2""#,
            r#"err(cjson.decode, "{1:2}") == "Expected object key string but found T_NUMBER at character 2""#,
            r#"err(cjson.decode, '{"a" 1}') == "Expected colon but found T_NUMBER at character 6""#,
            r#"err(cjson.decode, '{"a":1,}') == "Expected object key string but found T_OBJ_END at character 8""#,
            r#"err(cjson.decode, '{"a":1 "b"}') == "Expected comma or object end but found T_STRING at character 8""#,
            r#"err(cjson.decode, "[1 2]") == "Expected comma or array end but found T_NUMBER at character 4""#,
            r#"err(cjson.decode, "[1,]") == "Expected value but found T_ARR_END at character 4""#,
            r#"err(cjson.decode, "1 2") == "Expected the end but found T_NUMBER at character 3""#,
            r#"err(cjson.decode, "[1]]") == "Expected the end but found T_ARR_END at character 4""#,
            r#"err(cjson.decode, '"abc') == "Expected value but found unexpected end of string at character 5""#,
            r#"err(cjson.decode, '"\\q"') == "Expected value but found invalid escape code at character 2""#,
            r#"err(cjson.decode, '"\\ud800"') == "Expected value but found invalid unicode escape code at character 2""#,
            r#"err(cjson.decode, '"\\udc00\\ud800"') == "Expected value but found invalid unicode escape code at character 2""#,
            r#"err(cjson.decode, '"\\u12"') == "Expected value but found invalid unicode escape code at character 2""#,
            r#"err(cjson.decode, "tru") == "Expected value but found invalid token at character 1""#,
            r#"err(cjson.decode, "\0a") == "JSON parser does not support UTF-16 or UTF-32""#,
            r#"err(cjson.decode) == "bad argument #1 to 'decode' (expected 1 argument)""#,
            r#"err(cjson.decode, {}) == "bad argument #1 to 'decode' (string expected, got table)""#,
        ]);
    }

    #[test]
    fn decode_depth_is_bounded() {
        check(&[
            r#"err(cjson.decode, ("["):rep(1001)) == "Found too many nested data structures (1001) at character 1001""#,
            r#"err(cjson.decode, ("["):rep(200000)) == "Found too many nested data structures (1001) at character 1001""#,
            r#"err(cjson.decode, ('{"a":'):rep(1001)) == "Found too many nested data structures (1001) at character 5001""#,
            r#"cjson.decode_max_depth(2) == 2 and eq(cjson.decode("[[1]]"), {{1}})"#,
            r#"err(cjson.decode, "[[[1]]]") == "Found too many nested data structures (3) at character 3""#,
            r#"cjson.decode_max_depth(100000) == 100000"#,
            r#"err(cjson.decode, ("["):rep(200000)) == "Found too many nested data structures (8001) at character 8001""#,
            r#"#cjson.decode(('{"a":'):rep(7999) .. "[]" .. ("}"):rep(7999)) == 0"#,
        ]);
    }

    /// Wide and deep values must not exhaust mlua's few thousand handles.
    #[test]
    fn large_values_round_trip() {
        check(&[
            r#"(function()
                 local t = {}
                 for i = 1, 20000 do t["k" .. i] = {"v" .. i} end
                 local back = cjson.decode(cjson.encode(t))
                 return eq(back, t)
               end)()"#,
            r#"(function()
                 local t = {}
                 for i = 1, 20000 do t[i] = "s" .. i end
                 return eq(cjson.decode(cjson.encode(t)), t)
               end)()"#,
            r#"(function()
                 cjson.encode_max_depth(7000)
                 local t = nest(7000)
                 t[1][2] = {x = {1, 2}}
                 local s = cjson.encode(t)
                 cjson.decode_max_depth(7000)
                 return cjson.encode(cjson.decode(s)) == s
               end)()"#,
        ]);
    }

    #[test]
    fn round_trips_and_independent_instances() {
        check(&[
            r#"(function()
                 local v = {a = {1, 2.5, "three", {four = false}}, b = "x\"y", c = {}}
                 return eq(cjson.decode(cjson.encode(v)), v)
               end)()"#,
            r#"cjson.decode(cjson.encode("\1\127/\\\"")) == "\1\127/\\\"""#,
            r#"(function()
                 local other = cjson.new()
                 other.encode_max_depth(1)
                 return cjson.encode({{1}}) == "[[1]]" and err(other.encode, {{1}}) ~= nil
                   and other.null == cjson.null and other._VERSION == "2.1.0"
               end)()"#,
            r#"type(err(cjson.decode, "x")) == "string""#,
        ]);
    }

    /// Errors name the calling line, as `luaL_error` does.
    #[test]
    fn errors_carry_the_callers_position() {
        let lua = Lua::new();
        register(&lua).unwrap();
        let chunk = "local ok, e = pcall(function() local v = cjson.decode('[1,') end) return e";
        let e: String = lua.load(chunk).set_name("=user_script").eval().unwrap();
        assert_eq!(
            e,
            "user_script:1: Expected value but found T_END at character 4"
        );
    }
}
