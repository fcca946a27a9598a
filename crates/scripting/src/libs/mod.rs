//! The libraries Redis gives scripts beyond Lua's own: `bit`, `cjson`,
//! `cmsgpack` and `struct`, written in Rust against the same interfaces.

pub mod bit;
pub mod cjson;
pub mod cmsgpack;
pub mod structlib;

use mlua::Lua;

/// Registers every library as a global table of `lua`.
pub fn register_all(lua: &Lua) -> mlua::Result<()> {
    bit::register(lua)?;
    cjson::register(lua)?;
    cmsgpack::register(lua)?;
    structlib::register(lua)?;
    Ok(())
}
