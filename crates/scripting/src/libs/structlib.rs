//! The `struct` library: binary packing as Roberto Ierusalimschy's struct.c
//! (v1.4, with Redis's overflow fixes) offers it to Redis scripts.
//!
//! Formats follow a 64-bit little-endian host: `l`/`L`/`T` are 8 bytes, `i`/`I`
//! default to 4 and take sizes up to 32, `!` aligns to at most 8 by default.
//! Two extensions are accepted that struct.c rejects: `=` (native byte
//! order) and `j`/`J` (8-byte integers, like `l`/`L`).

use mlua::{Lua, MultiValue, Table, Value};

use super::{add, add_many, arg_error, check_number, check_string, fail};

/// Largest `i`/`I` size struct.c accepts.
const MAX_INT_SIZE: i64 = 32;
/// Default `!` alignment: that of a double on the platforms Redis runs on.
const MAX_ALIGN: i64 = 8;
/// `unpack` results beyond what a C function may push onto the Lua stack
/// (LUAI_MAXCSTACK) fail in Redis with "too many results"; the same cut-off
/// here keeps a long format from building an unbounded result list.
const MAX_RESULTS: usize = 7900;

/// Registers the `struct` global table.
pub fn register(lua: &Lua) -> mlua::Result<()> {
    let lib = lua.create_table()?;
    add(lua, &lib, "pack", pack)?;
    add_many(lua, &lib, "unpack", |lua, args| unpack(lua, &args))?;
    add(lua, &lib, "size", |lua, args| size(lua, &args))?;
    lua.globals().set("struct", lib)
}

struct Header {
    little: bool,
    align: usize,
}

impl Header {
    fn new() -> Self {
        Header {
            little: cfg!(target_endian = "little"),
            align: 1,
        }
    }
}

/// A cursor over a format string. struct.c reads it as a C string, so it
/// ends at the first NUL byte.
struct Format<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Format<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        Format {
            bytes: &bytes[..end],
            pos: 0,
        }
    }

    fn next_option(&mut self) -> Option<u8> {
        let opt = *self.bytes.get(self.pos)?;
        self.pos += 1;
        Some(opt)
    }

    /// The decimal count after an option, or `default` when there is none.
    fn number(&mut self, default: i64) -> mlua::Result<i64> {
        let mut n: i64 = 0;
        let mut any = false;
        while let Some(&d) = self.bytes.get(self.pos).filter(|b| b.is_ascii_digit()) {
            n = n * 10 + i64::from(d - b'0');
            if n > i64::from(i32::MAX) {
                return Err(fail("integral size overflow"));
            }
            self.pos += 1;
            any = true;
        }
        Ok(if any { n } else { default })
    }

    /// Bytes taken by option `opt`, consuming its count if it has one.
    fn option_size(&mut self, opt: u8) -> mlua::Result<usize> {
        Ok(match opt {
            b'b' | b'B' | b'x' => 1,
            b'h' | b'H' => 2,
            b'f' => 4,
            b'l' | b'L' | b'j' | b'J' | b'T' | b'd' => 8,
            b'c' => self.number(1)? as usize,
            b'i' | b'I' => {
                let n = self.number(4)?;
                if n > MAX_INT_SIZE {
                    return Err(fail(format!(
                        "integral size {n} is larger than limit of {MAX_INT_SIZE}"
                    )));
                }
                n as usize
            }
            _ => 0,
        })
    }

    /// Applies an option that is not a value: byte order, alignment, space.
    fn control(&mut self, opt: u8, h: &mut Header, func: &str) -> mlua::Result<()> {
        match opt {
            b' ' => {}
            b'>' => h.little = false,
            b'<' => h.little = true,
            b'=' => h.little = cfg!(target_endian = "little"),
            b'!' => {
                let a = self.number(MAX_ALIGN)?;
                if a <= 0 || a & (a - 1) != 0 {
                    return Err(fail(format!("alignment {a} is not a power of 2")));
                }
                h.align = a as usize;
            }
            _ => {
                let msg = format!("invalid format option '{}'", char::from(opt));
                return Err(arg_error(1, func, &msg));
            }
        }
        Ok(())
    }
}

/// Padding needed before an item of `size` bytes at offset `len`. The mask
/// arithmetic assumes powers of two, as struct.c's does; odd `iN` sizes get
/// the same (odd) padding they get there.
fn padding(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    size.wrapping_sub(len & (size - 1)) & (size - 1)
}

fn is_integer_option(opt: u8) -> bool {
    matches!(
        opt,
        b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'j' | b'J' | b'T' | b'i' | b'I'
    )
}

fn pack(lua: &Lua, mut args: MultiValue) -> mlua::Result<Value> {
    // struct.c pushes a nil after the arguments, so the first missing one
    // reads as nil rather than as no value.
    args.push_back(Value::Nil);
    let args = &args;
    let fmt_arg = check_string(lua, args, 1, "pack")?;
    let mut fmt = Format::new(&fmt_arg);
    let mut h = Header::new();
    let mut arg = 2;
    let mut out = Vec::new();
    while let Some(opt) = fmt.next_option() {
        let mut size = fmt.option_size(opt)?;
        let pad = padding(out.len(), &h, opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            _ if is_integer_option(opt) => {
                let n = check_number(lua, args, arg, "pack")?;
                arg += 1;
                // Bytes past the eighth are always zero.
                let mut v = to_u64(n);
                let mut bytes = vec![0u8; size];
                for b in bytes.iter_mut() {
                    *b = v as u8;
                    v = v.checked_shr(8).unwrap_or(0);
                }
                if !h.little {
                    bytes.reverse();
                }
                out.extend_from_slice(&bytes);
            }
            b'x' => out.push(0),
            b'f' => {
                let f = check_number(lua, args, arg, "pack")? as f32;
                arg += 1;
                out.extend_from_slice(&if h.little {
                    f.to_le_bytes()
                } else {
                    f.to_be_bytes()
                });
            }
            b'd' => {
                let d = check_number(lua, args, arg, "pack")?;
                arg += 1;
                out.extend_from_slice(&if h.little {
                    d.to_le_bytes()
                } else {
                    d.to_be_bytes()
                });
            }
            b'c' | b's' => {
                let s = check_string(lua, args, arg, "pack")?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                // struct.c names the argument after the string here.
                let part = s
                    .get(..size)
                    .ok_or_else(|| arg_error(arg, "pack", "string too short"))?;
                out.extend_from_slice(part);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => fmt.control(opt, &mut h, "pack")?,
        }
    }
    Ok(Value::String(lua.create_string(&out)?))
}

/// `struct.unpack(fmt, data [, pos])`: the values, then the position after
/// them, in a table (see [`add_many`]; a format can ask for thousands).
fn unpack(lua: &Lua, args: &MultiValue) -> mlua::Result<(Table, usize)> {
    let fmt_arg = check_string(lua, args, 1, "unpack")?;
    let data = check_string(lua, args, 2, "unpack")?;
    let start = match args.get(2) {
        None | Some(Value::Nil) => 1,
        Some(_) => check_number(lua, args, 3, "unpack")? as i64,
    };
    if start == 0 {
        return Err(arg_error(3, "unpack", "offset must be 1 or greater"));
    }
    // struct.c keeps the position in a size_t: a negative start wraps to a
    // huge offset, which then fails the length check below.
    let mut pos = (start as usize).wrapping_sub(1);
    let mut fmt = Format::new(&fmt_arg);
    let mut h = Header::new();
    let results = lua.create_table()?;
    let mut n = 0;
    let too_short = || arg_error(2, "unpack", "data string too short");
    while let Some(opt) = fmt.next_option() {
        let mut size = fmt.option_size(opt)?;
        pos = pos.wrapping_add(padding(pos, &h, opt, size));
        let item = |pos: usize, size: usize| data.get(pos..pos.checked_add(size)?);
        let mut bytes = item(pos, size).ok_or_else(too_short)?;
        if n >= MAX_RESULTS {
            return Err(fail("stack overflow (too many results)"));
        }
        let value = match opt {
            _ if is_integer_option(opt) => {
                Value::Number(integer(bytes, h.little, opt.is_ascii_lowercase()))
            }
            b'f' => {
                let raw: [u8; 4] = bytes.try_into().map_err(|_| too_short())?;
                let f = if h.little {
                    f32::from_le_bytes(raw)
                } else {
                    f32::from_be_bytes(raw)
                };
                Value::Number(f64::from(f))
            }
            b'd' => {
                let raw: [u8; 8] = bytes.try_into().map_err(|_| too_short())?;
                Value::Number(if h.little {
                    f64::from_le_bytes(raw)
                } else {
                    f64::from_be_bytes(raw)
                })
            }
            b'c' => {
                if size == 0 {
                    // `c0` takes its length from the value just unpacked,
                    // which it replaces.
                    let previous: Value = if n > 0 {
                        results.raw_get(n)?
                    } else {
                        Value::Nil
                    };
                    let len = match previous {
                        v @ (Value::Number(_) | Value::Integer(_) | Value::String(_)) => {
                            lua.coerce_number(v)?
                        }
                        _ => None,
                    }
                    .ok_or_else(|| fail("format 'c0' needs a previous size"))?;
                    results.raw_set(n, Value::Nil)?;
                    n -= 1;
                    size = if len >= 0.0 { len as usize } else { usize::MAX };
                    bytes = item(pos, size).ok_or_else(too_short)?;
                }
                Value::String(lua.create_string(bytes)?)
            }
            b's' => {
                let rest = data.get(pos..).unwrap_or_default();
                let end = rest
                    .iter()
                    .position(|&b| b == 0)
                    .ok_or_else(|| fail("unfinished string in data"))?;
                size = end + 1;
                Value::String(lua.create_string(&rest[..end])?)
            }
            _ => {
                if opt != b'x' {
                    fmt.control(opt, &mut h, "unpack")?;
                }
                Value::Nil
            }
        };
        if !value.is_nil() {
            n += 1;
            results.raw_set(n, value)?;
        }
        pos = pos.wrapping_add(size);
    }
    n += 1;
    results.raw_set(n, pos.wrapping_add(1) as i64 as f64)?;
    Ok((results, n))
}

/// struct.c's number to `unsigned long` conversion, negative numbers going
/// through `long`, as gcc compiles it for x86-64: out-of-range values
/// (undefined in C) come out as that code computes them, so 2^64 packs as 0.
fn to_u64(n: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    let convert = |x: f64| {
        if (-TWO_63..TWO_63).contains(&x) {
            x as i64 as u64
        } else {
            1 << 63
        }
    };
    // Written so NaN takes the direct branch, as it does in that code.
    if n >= TWO_63 {
        convert(n - TWO_63) ^ (1 << 63)
    } else {
        convert(n)
    }
}

/// Reads an integer the way struct.c does: into a 64-bit accumulator (bytes
/// beyond the eighth shift out), sign-extending from the item's top bit.
fn integer(bytes: &[u8], little: bool, signed: bool) -> f64 {
    let fold = |acc: u64, &b: &u8| (acc << 8) | u64::from(b);
    let v = if little {
        bytes.iter().rev().fold(0, fold)
    } else {
        bytes.iter().fold(0, fold)
    };
    if !signed {
        return v as f64;
    }
    // The C shift count is taken modulo 64, as x86 does for oversized items.
    let shift = (bytes.len() as u32 * 8).wrapping_sub(1) & 63;
    let mask = u64::MAX << shift;
    let v = if v & mask != 0 { v | mask } else { v };
    v as i64 as f64
}

fn size(lua: &Lua, args: &MultiValue) -> mlua::Result<Value> {
    let fmt_arg = check_string(lua, args, 1, "size")?;
    let mut fmt = Format::new(&fmt_arg);
    let mut h = Header::new();
    let mut pos: usize = 0;
    while let Some(opt) = fmt.next_option() {
        let size = fmt.option_size(opt)?;
        pos = pos.wrapping_add(padding(pos, &h, opt, size));
        if opt == b's' {
            return Err(arg_error(1, "size", "option 's' has no fixed size"));
        }
        if opt == b'c' && size == 0 {
            return Err(arg_error(1, "size", "option 'c0' has no fixed size"));
        }
        // struct.c only treats punctuation as control options here, so an
        // unknown letter counts as zero bytes instead of failing.
        if !opt.is_ascii_alphanumeric() {
            fmt.control(opt, &mut h, "size")?;
        }
        pos = pos.wrapping_add(size);
    }
    Ok(Value::Number(pos as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        let lua = Lua::new();
        register(&lua).unwrap();
        lua
    }

    fn check(lua: &Lua, cases: &[&str]) {
        crate::libs::assert_cases(lua, "", cases);
    }

    #[test]
    fn integers_by_size_and_byte_order() {
        check(
            &lua(),
            &[
                r#"struct.pack(">I2", 258) == "\1\2""#,
                r#"struct.pack("<I2", 258) == "\2\1""#,
                r#"struct.pack("b", -1) == "\255""#,
                r#"struct.pack(">h", -2) == "\255\254""#,
                r#"struct.pack(">i3", 0x010203) == "\1\2\3""#,
                r#"#struct.pack("l", 1) == 8 and #struct.pack("i", 1) == 4"#,
                r#"struct.pack("<i10", -1) == ("\255"):rep(8) .. "\0\0""#,
                r#"select('#', struct.unpack("<i4", struct.pack("<i4", -5))) == 2"#,
                r#"select(1, struct.unpack("<i4", struct.pack("<i4", -5))) == -5"#,
                r#"select(2, struct.unpack("<i4", struct.pack("<i4", -5))) == 5"#,
                r#"struct.unpack(">I4", "\255\255\255\255") == 4294967295"#,
                r#"struct.unpack(">i2", "\128\0") == -32768"#,
                r#"struct.unpack("<L", struct.pack("<L", 2^53)) == 2^53"#,
                r#"struct.unpack("B", "\200") == 200 and struct.unpack("b", "\200") == -56"#,
                r#"struct.unpack("=j", struct.pack("J", 7)) == 7"#,
            ],
        );
    }

    #[test]
    fn floats_strings_and_padding() {
        check(
            &lua(),
            &[
                r#"struct.unpack(">d", struct.pack(">d", 1.5)) == 1.5"#,
                r#"struct.pack(">f", 1) == "\63\128\0\0""#,
                r#"struct.unpack("<f", struct.pack("<f", 0.1)) ~= 0.1"#,
                r#"struct.pack("s", "ab") == "ab\0""#,
                r#"struct.pack("c3", "abcdef") == "abc""#,
                r#"struct.pack("c0", "abc") == "abc""#,
                r#"struct.pack("bxb", 1, 2) == "\1\0\2""#,
                r#"struct.pack("!4 b i", 1, 2) == "\1\0\0\0\2\0\0\0""#,
                r#"struct.pack("!2 b d", 1, 0):len() == 10"#,
                r#"struct.pack(">!b h", 1, 2) == "\1\0\0\2""#,
                r#"select(2, struct.unpack("s", "hi\0rest")) == 4"#,
                r#"struct.unpack("s", "hi\0rest") == "hi""#,
                r#"struct.unpack("c2", "abcd", 3) == "cd""#,
                r#"select(2, struct.unpack("bc0", "\3abcz")) == 5"#,
                r#"struct.unpack("bc0", "\3abcz") == "abc""#,
                r#"struct.size(">i4 h b") == 7"#,
                r#"struct.size("!8 b d") == 16"#,
                r#"struct.size("c5 x T") == 14"#,
                r#"struct.size("bz") == 1"#,
            ],
        );
    }

    #[test]
    fn errors_follow_struct_c() {
        check(
            &lua(),
            &[
                r#"select(2, pcall(struct.pack, "y", 1)) == "bad argument #1 to 'pack' (invalid format option 'y')""#,
                r#"select(2, pcall(struct.pack, "i33", 1)) == "integral size 33 is larger than limit of 32""#,
                r#"select(2, pcall(struct.pack, "!3", 1)) == "alignment 3 is not a power of 2""#,
                r#"select(2, pcall(struct.pack, "c99999999999", "")) == "integral size overflow""#,
                r#"select(2, pcall(struct.pack, "c5", "ab")) == "bad argument #3 to 'pack' (string too short)""#,
                r#"select(2, pcall(struct.pack, "i")) == "bad argument #2 to 'pack' (number expected, got nil)""#,
                r#"select(2, pcall(struct.pack, "ii", 1)) == "bad argument #3 to 'pack' (number expected, got nil)""#,
                r#"select(2, pcall(struct.unpack, "i4", "abc")) == "bad argument #2 to 'unpack' (data string too short)""#,
                r#"select(2, pcall(struct.unpack, "b", "a", 0)) == "bad argument #3 to 'unpack' (offset must be 1 or greater)""#,
                r#"select(2, pcall(struct.unpack, "b", "a", -1)) == "bad argument #2 to 'unpack' (data string too short)""#,
                r#"select(2, pcall(struct.unpack, "c0", "abc")) == "format 'c0' needs a previous size""#,
                r#"select(2, pcall(struct.unpack, "bc0", "\9abc")) == "bad argument #2 to 'unpack' (data string too short)""#,
                r#"select(2, pcall(struct.unpack, "s", "abc")) == "unfinished string in data""#,
                r#"select(2, pcall(struct.size, "s")) == "bad argument #1 to 'size' (option 's' has no fixed size)""#,
                r#"select(2, pcall(struct.size, "c0")) == "bad argument #1 to 'size' (option 'c0' has no fixed size)""#,
                r#"select(2, pcall(struct.unpack, nil, "")) == "bad argument #1 to 'unpack' (string expected, got nil)""#,
                r#"select(2, pcall(struct.unpack, ("b"):rep(9000), ("\0"):rep(9000))) == "stack overflow (too many results)""#,
            ],
        );
    }

    #[test]
    fn many_results_fit_on_the_lua_stack() {
        let lua = lua();
        let n: usize = lua
            .load(r#"return select('#', struct.unpack(("b"):rep(7900), ("\1"):rep(7900)))"#)
            .eval()
            .unwrap();
        assert_eq!(n, 7901);
        let ok: bool = lua
            .load(
                r#"local t = {struct.unpack(("c1"):rep(7000), ("x"):rep(7000))}
                     return #t == 7001 and t[7000] == "x" and t[7001] == 7001"#,
            )
            .eval()
            .unwrap();
        assert!(ok);
    }

    /// Errors name the calling line, as `luaL_error` does.
    #[test]
    fn errors_carry_the_callers_position() {
        let lua = lua();
        let chunk =
            "local ok, e = pcall(function() local v = struct.unpack('s', 'x') end) return e";
        let e: String = lua.load(chunk).set_name("=user_script").eval().unwrap();
        assert_eq!(e, "user_script:1: unfinished string in data");
    }
}
