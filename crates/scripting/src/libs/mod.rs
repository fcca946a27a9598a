//! The libraries Redis gives scripts beyond Lua's own: `bit`, `cjson`,
//! `cmsgpack` and `struct`, written in Rust against the same interfaces.
//!
//! Every library function is installed the way Redis's C libraries are:
//! as a C function, so a call to it never replaces the script's stack
//! frame, even in tail position (`return cjson.decode(...)`), and its
//! errors are Lua strings that name the calling line, as `luaL_error`
//! makes them.

pub mod bit;
pub mod cjson;
pub mod cmsgpack;
pub mod structlib;

use std::ffi::c_int;

use mlua::{ffi, Error, Function, Lua, MultiValue, Table, Value};

/// Registers every library as a global table of `lua`.
pub fn register_all(lua: &Lua) -> mlua::Result<()> {
    bit::register(lua)?;
    cjson::register(lua)?;
    cmsgpack::register(lua)?;
    structlib::register(lua)?;
    Ok(())
}

/// Installs `f` as `table[name]`: a function with one result.
pub(crate) fn add<F>(lua: &Lua, table: &Table, name: &str, f: F) -> mlua::Result<()>
where
    F: Fn(&Lua, MultiValue) -> mlua::Result<Value> + Send + 'static,
{
    install(lua, table, name, move |lua, args| {
        Ok((Value::Boolean(true), f(lua, args)?))
    })
}

/// Installs `f` as `table[name]`: a function whose results are `1..=n` of
/// the table `f` returns.
///
/// The results travel in a table because every value a Rust function hands
/// back to Lua holds one of mlua's references while it is on its way, and
/// only a few thousand of those can exist at once (mlua panics past that),
/// while these functions may return up to about 8000 values, as many as a C
/// function may push. The C function in front of `f` (see [`trampoline`])
/// moves them from the table to the Lua stack one by one, with no reference
/// and no Lua frame, so calls with many results keep the caller's position
/// like every other call.
pub(crate) fn add_many<F>(lua: &Lua, table: &Table, name: &str, f: F) -> mlua::Result<()>
where
    F: Fn(&Lua, MultiValue) -> mlua::Result<(Table, usize)> + Send + 'static,
{
    install(lua, table, name, move |lua, args| {
        let (results, n) = f(lua, args)?;
        Ok((Value::Table(results), Value::Number(n as f64)))
    })
}

/// Installs `f` behind [`trampoline`]. `f` answers in the trampoline's
/// protocol; here runtime errors become `false, message`, [`Unplaced`] ones
/// `nil, message`, and others (out of memory) propagate as they are.
fn install<F>(lua: &Lua, table: &Table, name: &str, f: F) -> mlua::Result<()>
where
    F: Fn(&Lua, MultiValue) -> mlua::Result<(Value, Value)> + Send + 'static,
{
    let inner = lua.create_function(move |lua, args: MultiValue| match f(lua, args) {
        Err(Error::RuntimeError(msg)) => Ok((
            Value::Boolean(false),
            Value::String(lua.create_string(msg)?),
        )),
        Err(Error::ExternalError(e)) => match e.downcast_ref::<Unplaced>() {
            Some(Unplaced(msg)) => Ok((Value::Nil, Value::String(lua.create_string(msg)?))),
            None => Err(Error::ExternalError(e)),
        },
        other => other,
    })?;
    // SAFETY: `exec_raw` runs the closure in a protected call with `inner`
    // as its only stack value; `lua_pushcclosure` pops it as the closure's
    // upvalue and leaves the closure, the one result. `trampoline` is sound
    // to call from Lua with any arguments (see there).
    let outer: Function = unsafe {
        lua.exec_raw(inner, |state| {
            ffi::lua_pushcclosure(state, trampoline, 1);
        })?
    };
    table.set(name, outer)
}

/// The C function each library function is installed as, its Rust side as
/// upvalue 1. A Rust function called by Lua cannot raise a Lua string as
/// its error (mlua raises its own userdata) nor return values without
/// holding a reference to each, and a Lua function in between would lose
/// the caller's frame when called in tail position, so this small C
/// function does what Redis's C libraries do themselves. The Rust side
/// answers with exactly two values:
///
/// - `true, result`: one result;
/// - `table, n`: results `1..=n` of the table;
/// - `false, message`: an error at the caller's position, as `luaL_error`
///   raises it (`luaL_where(L, 1)`: `user_script:1: ` when a script called
///   the function, nothing when a C function such as `pcall` did);
/// - `nil, message`: an error without a position, as Lua's core raises
///   those from inside a C function.
///
/// Errors of the Rust side itself (out of memory, a panic) propagate
/// through this frame as they are.
unsafe extern "C-unwind" fn trampoline(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: Lua calls this with a valid state and at least LUA_MINSTACK
    // free slots: one is taken by the pushed function and two by the
    // results, in place of the function and the arguments. Errors longjmp
    // out of this frame, which owns nothing that needs dropping.
    unsafe {
        let nargs = ffi::lua_gettop(state);
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        ffi::lua_insert(state, 1);
        ffi::lua_call(state, nargs, 2);
        match ffi::lua_type(state, 1) {
            ffi::LUA_TBOOLEAN if ffi::lua_toboolean(state, 1) != 0 => 1,
            ffi::LUA_TTABLE => {
                // At most MAX_RESULTS (7900) by the libraries' own limits,
                // which fits in a C function's stack (LUAI_MAXCSTACK).
                let n = c_int::try_from(ffi::lua_tointeger(state, 2)).unwrap_or(0);
                ffi::luaL_checkstack(state, n, c"too many results".as_ptr());
                for i in 1..=n {
                    ffi::lua_rawgeti(state, 1, i.into());
                }
                n
            }
            ffi::LUA_TBOOLEAN => {
                ffi::luaL_where(state, 1);
                ffi::lua_insert(state, -2);
                ffi::lua_concat(state, 2);
                ffi::lua_error(state)
            }
            _ => ffi::lua_error(state),
        }
    }
}

/// An error Lua's core would raise from inside a C library (a key it cannot
/// store); Redis reports those without a script position.
#[derive(Debug)]
pub(crate) struct Unplaced(pub &'static str);

impl std::fmt::Display for Unplaced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Unplaced {}

/// A library error: raised at the caller's position.
pub(crate) fn fail(msg: impl Into<String>) -> Error {
    Error::RuntimeError(msg.into())
}

/// A string argument (`luaL_checklstring`); numbers are accepted in their
/// Lua string form.
pub(crate) fn check_string(
    lua: &Lua,
    args: &MultiValue,
    index: usize,
    func: &str,
) -> mlua::Result<Vec<u8>> {
    let value = args.get(index - 1);
    let text = match value {
        Some(Value::String(text)) => Some(text.as_bytes().to_vec()),
        Some(number @ (Value::Integer(_) | Value::Number(_))) => lua
            .coerce_string(number.clone())?
            .map(|text| text.as_bytes().to_vec()),
        _ => None,
    };
    text.ok_or_else(|| {
        let got = type_name(value);
        arg_error(index, func, &format!("string expected, got {got}"))
    })
}

/// A number argument (`luaL_checknumber`); numeric strings are accepted.
pub(crate) fn check_number(
    lua: &Lua,
    args: &MultiValue,
    index: usize,
    func: &str,
) -> mlua::Result<f64> {
    let value = args.get(index - 1);
    let number = match value {
        Some(Value::Integer(number)) => Some(*number as f64),
        Some(Value::Number(number)) => Some(*number),
        Some(text @ Value::String(_)) => lua.coerce_number(text.clone())?,
        _ => None,
    };
    number.ok_or_else(|| {
        let got = type_name(value);
        arg_error(index, func, &format!("number expected, got {got}"))
    })
}

/// `luaL_argerror`'s message.
pub(crate) fn arg_error(index: usize, func: &str, msg: &str) -> Error {
    fail(format!("bad argument #{index} to '{func}' ({msg})"))
}

/// Lua 5.1's name for a value's type, as `luaL_typename` prints it.
pub(crate) fn type_name(value: Option<&Value>) -> &'static str {
    match value {
        None => "no value",
        Some(Value::Nil) => "nil",
        Some(Value::Boolean(_)) => "boolean",
        Some(Value::Integer(_) | Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Table(_)) => "table",
        Some(Value::Function(_)) => "function",
        Some(Value::Thread(_)) => "thread",
        Some(_) => "userdata",
    }
}

/// Asserts that each Lua expression in `cases`, evaluated after `prelude`,
/// is true (the libraries' unit tests).
#[cfg(test)]
pub(crate) fn assert_cases(lua: &Lua, prelude: &str, cases: &[&str]) {
    for case in cases {
        let ok: bool = lua
            .load(format!("{prelude} return {case}"))
            .eval()
            .unwrap_or_else(|error| panic!("{case}: {error}"));
        assert!(ok, "{case}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        let lua = Lua::new();
        register_all(&lua).unwrap();
        lua
    }

    fn error_of(lua: &Lua, chunk: &str) -> String {
        match lua.load(chunk).set_name("=user_script").exec() {
            // mlua appends a traceback for errors that reach Rust.
            Err(Error::RuntimeError(message)) => message.lines().next().unwrap_or("").to_string(),
            other => panic!("{chunk}: {other:?}"),
        }
    }

    /// A tail call keeps the caller's frame, as it does for C functions.
    #[test]
    fn errors_name_the_caller_in_tail_position() {
        let lua = lua();
        for (chunk, expected) in [
            (
                "return cjson.decode('{bad')",
                "user_script:1: Expected object key string but found invalid token at character 2",
            ),
            (
                "\nreturn struct.unpack('s', 'x')",
                "user_script:2: unfinished string in data",
            ),
            (
                "return bit.tohex()",
                "user_script:1: bad argument #1 to 'tohex' (number expected, got no value)",
            ),
            (
                "return cmsgpack.unpack('\\129\\192\\1')",
                "table index is nil",
            ),
        ] {
            assert_eq!(error_of(&lua, chunk), expected, "{chunk}");
        }
    }

    /// The error value is a string, as `luaL_error` raises it.
    #[test]
    fn errors_are_strings() {
        let lua = lua();
        let kind: String = lua
            .load("return type(select(2, pcall(function() return cjson.decode('x') end)))")
            .eval()
            .unwrap();
        assert_eq!(kind, "string");
        // Called from Rust, there is no Lua caller to name.
        let decode: Function = lua.load("return cjson.decode").eval().unwrap();
        match decode.call::<Value>("x") {
            Err(Error::RuntimeError(message)) => assert!(
                message.starts_with("Expected value but found invalid token at character 1\n"),
                "{message}"
            ),
            other => panic!("{other:?}"),
        }
    }

    /// Results move from the table to the Lua stack without a Lua frame.
    #[test]
    fn many_results_in_tail_position() {
        let lua = lua();
        let n: usize = lua
            .load(
                "local function f() return struct.unpack(('c1'):rep(7899), ('x'):rep(7899)) end
                 return select('#', f())",
            )
            .eval()
            .unwrap();
        assert_eq!(n, 7900);
        let ok: bool = lua
            .load("local a, b, c = cjson.encode_sparse_array() return a == false and b == 2 and c == 10")
            .eval()
            .unwrap();
        assert!(ok);
    }
}
