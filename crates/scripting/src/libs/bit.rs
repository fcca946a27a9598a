//! The `bit` library: the LuaBitOp 1.0.2 interface Redis gives scripts.
//!
//! Every operand goes through LuaBitOp's conversion: the Lua number is
//! reduced modulo 2^32 (rounding non-integers to nearest, ties to even) and
//! every result comes back as a signed 32-bit value, so `bit.bnot(0)` is
//! `-1` on every platform.

use mlua::{Error, Lua, MultiValue, Value};

use super::{add, type_name};

type Unary = fn(u32) -> u32;
type Binary = fn(u32, u32) -> u32;

/// Registers the `bit` global table.
pub fn register(lua: &Lua) -> mlua::Result<()> {
    let bit = lua.create_table()?;
    let unary: [(&'static str, Unary); 3] = [
        ("tobit", |b| b),
        ("bnot", |b| !b),
        ("bswap", u32::swap_bytes),
    ];
    for (name, op) in unary {
        add(lua, &bit, name, move |lua, args| {
            Ok(signed(op(operand(lua, &args, 1, name)?)))
        })?;
    }
    let fold: [(&'static str, Binary); 3] = [
        ("band", |a, b| a & b),
        ("bor", |a, b| a | b),
        ("bxor", |a, b| a ^ b),
    ];
    for (name, op) in fold {
        add(lua, &bit, name, move |lua, args| {
            let mut acc = operand(lua, &args, 1, name)?;
            // LuaBitOp folds from the last argument down, so a bad operand
            // is reported by its highest position first.
            for i in (2..=args.len()).rev() {
                acc = op(acc, operand(lua, &args, i, name)?);
            }
            Ok(signed(acc))
        })?;
    }
    let shifts: [(&'static str, Binary); 5] = [
        ("lshift", |b, n| b << n),
        ("rshift", |b, n| b >> n),
        ("arshift", |b, n| ((b as i32) >> n) as u32),
        ("rol", u32::rotate_left),
        ("ror", u32::rotate_right),
    ];
    for (name, op) in shifts {
        add(lua, &bit, name, move |lua, args| {
            let b = operand(lua, &args, 1, name)?;
            let n = operand(lua, &args, 2, name)? & 31;
            Ok(signed(op(b, n)))
        })?;
    }
    add(lua, &bit, "tohex", tohex)?;
    lua.globals().set("bit", bit)
}

/// `bit.tohex(x [, n])`: the low `|n|` nibbles of `x` (at most 8), upper
/// case when `n` is negative.
fn tohex(lua: &Lua, args: MultiValue) -> mlua::Result<Value> {
    let mut b = operand(lua, &args, 1, "tohex")?;
    // Only a missing argument means the default; an explicit nil is an error
    // in LuaBitOp too.
    let n = if args.len() < 2 {
        8
    } else {
        i64::from(operand(lua, &args, 2, "tohex")? as i32)
    };
    let digits: &[u8; 16] = if n < 0 {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let width = n.unsigned_abs().min(8) as usize;
    let mut out = [0u8; 8];
    for slot in out[..width].iter_mut().rev() {
        *slot = digits[(b & 15) as usize];
        b >>= 4;
    }
    Ok(Value::String(lua.create_string(&out[..width])?))
}

/// LuaBitOp's number-to-bits conversion. Adding 2^52 + 2^51 moves the
/// integer part into the low mantissa bits with the FPU's rounding, which
/// is what makes fractional and out-of-range inputs agree with Redis.
fn to_bits(n: f64) -> u32 {
    (n + 6_755_399_441_055_744.0).to_bits() as u32
}

fn signed(b: u32) -> Value {
    Value::Number(f64::from(b as i32))
}

/// Argument `index` (1-based) as LuaBitOp bits; numeric strings count as
/// numbers, as `lua_tonumber` allows.
fn operand(lua: &Lua, args: &MultiValue, index: usize, func: &str) -> mlua::Result<u32> {
    let value = args.get(index - 1);
    let number = match value {
        Some(Value::Integer(i)) => Some(*i as f64),
        Some(Value::Number(n)) => Some(*n),
        Some(v @ Value::String(_)) => lua.coerce_number(v.clone())?,
        _ => None,
    };
    match number {
        Some(n) => Ok(to_bits(n)),
        None => Err(Error::RuntimeError(format!(
            "bad argument #{index} to '{func}' (number expected, got {})",
            type_name(value)
        ))),
    }
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
    fn conversion_wraps_modulo_2_pow_32() {
        check(
            &lua(),
            &[
                "bit.tobit(0xffffffff) == -1",
                "bit.tobit(0xffffffff + 1) == 0",
                "bit.tobit(2^40 + 1234) == 1234",
                "bit.tobit(-1) == -1",
                "bit.tobit(2^31) == -2147483648",
                "bit.tobit(1.5) == 2 and bit.tobit(2.5) == 2 and bit.tobit(-1.5) == -2",
                "bit.tobit('10') == 10 and bit.tobit(' 0x10 ') == 16",
            ],
        );
    }

    #[test]
    fn logic_and_shifts() {
        check(
            &lua(),
            &[
                "bit.band(0xffffffff, 5) == 5",
                "bit.band(7, 14, 12) == 4",
                "bit.bor(1, 2, 4, 8) == 15",
                "bit.bxor(1, 3) == 2",
                "bit.bnot(0) == -1 and bit.bnot(-1) == 0",
                "bit.lshift(1, 31) == -2147483648",
                "bit.lshift(1, 32) == 1 and bit.lshift(1, 33) == 2",
                "bit.rshift(-1, 28) == 15",
                "bit.arshift(-256, 4) == -16",
                "bit.arshift(256, 4) == 16",
                "bit.rol(0x12345678, 12) == 0x45678123",
                "bit.ror(0x12345678, 12) == 0x67812345",
                "bit.bswap(0x12345678) == 0x78563412",
                "bit.bswap(0xff) == -16777216",
            ],
        );
    }

    #[test]
    fn tohex_widths_and_case() {
        check(
            &lua(),
            &[
                "bit.tohex(65535) == '0000ffff'",
                "bit.tohex(-1) == 'ffffffff'",
                "bit.tohex(0x12345678, 4) == '5678'",
                "bit.tohex(255, -2) == 'FF'",
                "bit.tohex(-1, -8) == 'FFFFFFFF'",
                "bit.tohex(1, 20) == '00000001'",
                "bit.tohex(1, 0) == ''",
                "bit.tohex(0xab, -2147483648) == '000000AB'",
            ],
        );
    }

    #[test]
    fn bad_operands_raise_string_errors() {
        check(
            &lua(),
            &[
                "select(2, pcall(bit.band)) == \"bad argument #1 to 'band' (number expected, got no value)\"",
                "select(2, pcall(bit.bor, 1, {}, 2)) == \"bad argument #2 to 'bor' (number expected, got table)\"",
                "select(2, pcall(bit.lshift, 1)) == \"bad argument #2 to 'lshift' (number expected, got no value)\"",
                "select(2, pcall(bit.tohex, 1, nil)) == \"bad argument #2 to 'tohex' (number expected, got nil)\"",
                "select(2, pcall(bit.tobit, 'x')) == \"bad argument #1 to 'tobit' (number expected, got string)\"",
                "type(select(2, pcall(bit.bnot))) == 'string'",
            ],
        );
    }

    /// Errors name the calling line, as `luaL_error` does, unless the caller
    /// is a C function such as `pcall`.
    #[test]
    fn errors_carry_the_callers_position() {
        let lua = lua();
        let chunk = "local ok, e = pcall(function()\n local x = bit.band({})\n end)
                     return e, select(2, pcall(bit.band, {}))";
        let (placed, bare): (String, String) =
            lua.load(chunk).set_name("=user_script").eval().unwrap();
        assert_eq!(
            placed,
            "user_script:2: bad argument #1 to 'band' (number expected, got table)"
        );
        assert_eq!(
            bare,
            "bad argument #1 to 'band' (number expected, got table)"
        );
    }
}
