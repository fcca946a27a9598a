//! The `redis` table's helpers that need no keyspace: replies, hashing,
//! logging, protocol choice and Redis's constants. `call`, `pcall` and
//! `register_function` are added by the sandbox prelude.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use mlua::{Lua, MultiValue, Table, Value};

/// A number as Redis passes it to a command from a script (`%.17g`).
pub fn number_argument(number: f64) -> String {
    if number.is_nan() {
        return "nan".to_string();
    }
    if number.is_infinite() {
        return if number > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if number == 0.0 {
        return if number.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // 17 significant digits in scientific form, then %g's choice of layout.
    let scientific = format!("{number:.16e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let text = if (-4..17).contains(&exponent) {
        let point = exponent + 1;
        let mut text = if point <= 0 {
            format!("0.{}{}", "0".repeat((-point) as usize), digits)
        } else {
            format!(
                "{}.{}",
                &digits[..point as usize],
                &digits[point as usize..]
            )
        };
        if text.contains('.') {
            text = text.trim_end_matches('0').trim_end_matches('.').to_string();
        }
        text
    } else {
        let mut fraction = digits[1..].trim_end_matches('0').to_string();
        if !fraction.is_empty() {
            fraction.insert(0, '.');
        }
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}{}e{}{:02}", &digits[..1], fraction, sign, exponent.abs())
    };
    if negative {
        format!("-{text}")
    } else {
        text
    }
}

use crate::sandbox::RunControl;

/// The Redis version scripts are told they run on.
pub const REDIS_VERSION: &str = "7.2.4";
pub const REDIS_VERSION_NUM: i64 = 0x0007_0204;

/// The error the `redis` table's functions raise, as Redis's do: an error
/// table (`ERR <message>`), so the reply names the script's position but the
/// message carries no Lua position of its own, and `pcall` gives its text.
fn api_error(message: &str) -> mlua::Error {
    mlua::Error::external(crate::run::ScriptError(error_text(message.as_bytes())))
}

/// `{field=text}`; a bad argument gives (not raises) Redis's error table.
fn reply_table(lua: &Lua, field: &str, arguments: MultiValue) -> mlua::Result<Table> {
    let table = lua.create_table_with_capacity(0, 1)?;
    match arguments.front() {
        Some(Value::String(text)) if arguments.len() == 1 => table.raw_set(field, text.clone())?,
        _ => table.raw_set("err", "ERR wrong number or type of arguments")?,
    }
    Ok(table)
}

/// Builds the (still writable) `redis` table.
pub fn build(lua: &Lua, control: &Arc<RunControl>) -> mlua::Result<Table> {
    let redis = lua.create_table()?;
    redis.raw_set(
        "error_reply",
        lua.create_function(|lua, arguments: MultiValue| {
            let table = reply_table(lua, "err", arguments)?;
            let text: mlua::LuaString = table.raw_get("err")?;
            let mut dashed = text.as_bytes().to_vec();
            if !dashed.starts_with(b"-") {
                dashed.insert(0, b'-');
            }
            table.raw_set("err", lua.create_string(error_text(&dashed))?)?;
            Ok(table)
        })?,
    )?;
    redis.raw_set(
        "status_reply",
        lua.create_function(|lua, arguments: MultiValue| reply_table(lua, "ok", arguments))?,
    )?;
    redis.raw_set(
        "sha1hex",
        lua.create_function(|lua, arguments: MultiValue| {
            if arguments.len() != 1 {
                return Err(api_error("wrong number of arguments"));
            }
            let bytes = match lua.coerce_string(arguments[0].clone())? {
                Some(text) => text.as_bytes().to_vec(),
                None => Vec::new(),
            };
            Ok(crate::sha1::sha1_hex(&bytes))
        })?,
    )?;
    redis.raw_set(
        "log",
        lua.create_function(|_, arguments: MultiValue| {
            if arguments.len() < 2 {
                return Err(api_error("redis.log() requires two arguments or more."));
            }
            let level = match &arguments[0] {
                Value::Integer(level) => *level as f64,
                Value::Number(level) => *level,
                _ => return Err(api_error("First argument must be a number (log level).")),
            };
            if !(0.0..=3.0).contains(&level) {
                return Err(api_error("Invalid debug level."));
            }
            // The server log is not part of replicated state; scripts' log
            // lines are accepted and dropped.
            Ok(())
        })?,
    )?;
    let setresp = {
        let control = control.clone();
        lua.create_function(move |_, arguments: MultiValue| {
            let version = match arguments.front() {
                Some(Value::Integer(version)) if arguments.len() == 1 => *version as f64,
                Some(Value::Number(version)) if arguments.len() == 1 => *version,
                _ => return Err(api_error("redis.setresp() requires one argument.")),
            };
            if version != 2.0 && version != 3.0 {
                return Err(api_error("RESP version must be 2 or 3."));
            }
            control.resp.store(version as u8, Ordering::SeqCst);
            Ok(())
        })?
    };
    redis.raw_set("setresp", setresp)?;
    redis.raw_set(
        "set_repl",
        lua.create_function(|_, arguments: MultiValue| {
            let flags = match arguments.front() {
                Some(Value::Integer(flags)) if arguments.len() == 1 => *flags as f64,
                Some(Value::Number(flags)) if arguments.len() == 1 => *flags,
                _ => return Err(api_error("redis.set_repl() requires two arguments.")),
            };
            if !(0.0..=3.0).contains(&flags) {
                return Err(api_error(
                    "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
                ));
            }
            // Every replica applies the whole script: there is nothing to
            // choose, so the request is accepted as a no-op.
            Ok(())
        })?,
    )?;
    redis.raw_set(
        "replicate_commands",
        lua.create_function(|_, _: MultiValue| Ok(true))?,
    )?;
    redis.raw_set(
        "breakpoint",
        lua.create_function(|_, _: MultiValue| Ok(false))?,
    )?;
    redis.raw_set("debug", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    redis.raw_set(
        "acl_check_cmd",
        lua.create_function(|_, arguments: MultiValue| {
            let Some(Value::String(name)) = arguments.front() else {
                return Err(api_error(
                    "Please specify at least one argument for this redis lib call",
                ));
            };
            match keyspace::commands::lookup(&name.as_bytes()) {
                // Every client may run every command (no ACL users yet).
                Some(_) => Ok(true),
                None => Err(api_error("Invalid command passed to redis.acl_check_cmd()")),
            }
        })?,
    )?;
    for (name, value) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", 3),
    ] {
        redis.raw_set(name, value)?;
    }
    redis.raw_set("REDIS_VERSION", REDIS_VERSION)?;
    redis.raw_set("REDIS_VERSION_NUM", REDIS_VERSION_NUM)?;
    Ok(redis)
}

/// The `err` text Redis builds from an error reply line: a leading `-` marks
/// a line that carries its own code (the first word), otherwise the code is
/// `ERR`; trailing newlines go.
pub fn error_text(line: &[u8]) -> Vec<u8> {
    let (code, message): (&[u8], &[u8]) = match line.strip_prefix(b"-") {
        Some(rest) => match rest.iter().position(|&byte| byte == b' ') {
            Some(space) => (&rest[..space], &rest[space + 1..]),
            None => (b"ERR", rest),
        },
        None => (b"ERR", line),
    };
    let mut end = message.len();
    while end > 0 && matches!(message[end - 1], b'\r' | b'\n') {
        end -= 1;
    }
    let mut text = code.to_vec();
    text.push(b' ');
    text.extend_from_slice(&message[..end]);
    text
}
