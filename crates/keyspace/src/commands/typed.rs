//! Looking up and storing the aggregate types (lists, hashes, sets, sorted
//! sets) with Redis's rules, once for all of them: a key holding another type
//! answers WRONGTYPE, reads count hits and misses (`lookupKeyRead`), writes do
//! not (`lookupKeyWrite`).

use crate::errors;
use crate::value::{HashValue, ListValue, SetValue, Value, ZSetValue};
use crate::{Context, Keyspace};
use resp::Frame;

/// A value type stored under a key.
pub(crate) trait Aggregate: Sized {
    fn of(value: &mut Value) -> Option<&mut Self>;
    fn into_value(self) -> Value;
}

macro_rules! aggregate {
    ($type:ty, $variant:ident) => {
        impl Aggregate for $type {
            fn of(value: &mut Value) -> Option<&mut Self> {
                match value {
                    Value::$variant(inner) => Some(inner),
                    _ => None,
                }
            }

            fn into_value(self) -> Value {
                Value::$variant(self)
            }
        }
    };
}

aggregate!(ListValue, List);
aggregate!(HashValue, Hash);
aggregate!(SetValue, Set);
aggregate!(ZSetValue, ZSet);

/// The value as type `T`, or WRONGTYPE.
pub(crate) fn as_type<T: Aggregate>(value: &mut Value) -> Result<&mut T, Frame> {
    T::of(value).ok_or_else(|| Frame::error(errors::WRONGTYPE))
}

/// The `T` at `key` for a read command: `Ok(None)` when absent.
pub(crate) fn read<'a, T: Aggregate>(
    keyspace: &'a mut Keyspace,
    context: &mut Context,
    key: &[u8],
) -> Result<Option<&'a mut T>, Frame> {
    match keyspace.read(context, key) {
        None => Ok(None),
        Some(entry) => as_type(&mut entry.value).map(Some),
    }
}

/// The `T` at `key` for a write command: `Ok(None)` when absent.
pub(crate) fn write<'a, T: Aggregate>(
    keyspace: &'a mut Keyspace,
    context: &mut Context,
    key: &[u8],
) -> Result<Option<&'a mut T>, Frame> {
    match keyspace.lookup_write(context, key) {
        None => Ok(None),
        Some(entry) => as_type(&mut entry.value).map(Some),
    }
}

/// Stores a new `T` at `key` (absent: the caller looked it up for writing).
pub(crate) fn create<T: Aggregate>(
    keyspace: &mut Keyspace,
    context: &Context,
    key: &[u8],
    value: T,
) {
    let access = keyspace.initial_access(context);
    keyspace
        .db(context.db)
        .set(key, value.into_value(), None, access);
}
