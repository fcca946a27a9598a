//! Redis's error texts, in one place. Each constant is the whole error line without
//! the leading `-`, so it can be sent as is.

pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const SYNTAX: &str = "ERR syntax error";
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
pub const NOT_FLOAT: &str = "ERR value is not a valid float";
pub const OVERFLOW: &str = "ERR increment or decrement would overflow";
pub const NO_SUCH_KEY: &str = "ERR no such key";
pub const DB_INDEX_OUT_OF_RANGE: &str = "ERR DB index is out of range";
pub const SAME_OBJECT: &str = "ERR source and destination objects are the same";
pub const STRING_TOO_LONG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
pub const OFFSET_OUT_OF_RANGE: &str = "ERR offset is out of range";
pub const BUSYKEY: &str = "BUSYKEY Target key name already exists.";
pub const BAD_DUMP_PAYLOAD: &str = "ERR DUMP payload version or checksum are wrong";
pub const BAD_DATA_FORMAT: &str = "ERR Bad data format";
pub const INVALID_TTL: &str = "ERR Invalid TTL value, must be >= 0";
pub const NAN_OR_INFINITY: &str = "ERR increment would produce NaN or Infinity";
pub const CURSOR_INVALID: &str = "ERR invalid cursor";

/// `ERR wrong number of arguments for '<name>' command`.
pub fn wrong_arity(full_name: &str) -> String {
    format!("ERR wrong number of arguments for '{full_name}' command")
}

/// `ERR invalid expire time in '<name>' command`.
pub fn invalid_expire(command: &str) -> String {
    format!("ERR invalid expire time in '{command}' command")
}
