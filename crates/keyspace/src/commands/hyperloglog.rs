//! HyperLogLog commands: PFADD, PFCOUNT, PFMERGE and PFDEBUG, over string values
//! in Redis's byte format (`hll.rs`), so a value moves between slotraft and Redis
//! with GET and SET.
//!
//! Lookups, type checks and errors come in Redis's order. As in Redis, any
//! command that may modify a value first turns it into a `raw` string (Redis's
//! `dbUnshareStringValue`), so OBJECT ENCODING answers alike.
//!
//! PFCOUNT of one key is flagged `readonly` yet stores the cardinality it
//! computes in the value's header, as Redis does. A replicated read
//! (`Context::lazy_expire` false) runs on one replica outside the log and must not
//! change replicated state, so it computes the count without storing it; only a
//! standalone read or one applied from the log writes the cache back.

use crate::command::{flags::*, key_flags::*, CommandSpec, Handler, KeySpec};
use crate::hll::{self, Corrupt, REGISTERS};
use crate::value::{StringValue, Value};
use crate::{errors, Context, Keyspace};
use bytes::Bytes;
use resp::Frame;

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "pfadd",
        arity: -2,
        flags: WRITE | DENYOOM | FAST,
        key_specs: &[KeySpec::single(1, RW | INSERT)],
        categories: &["write", "hyperloglog", "fast"],
        group: "hyperloglog",
        summary: "Adds elements to a HyperLogLog key. Creates the key if it doesn't exist.",
        since: "2.8.9",
        complexity: "O(1) to add every element.",
        handler: Handler::Keyspace(pfadd),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "pfselftest",
        arity: 1,
        flags: ADMIN,
        categories: &["hyperloglog", "admin", "slow", "dangerous"],
        group: "hyperloglog",
        summary: "An internal command for testing HyperLogLog values.",
        since: "2.8.9",
        complexity: "N/A",
        handler: Handler::Keyspace(pfselftest),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "pfcount",
        arity: -2,
        flags: READONLY | MAY_REPLICATE,
        key_specs: &[KeySpec::range(1, -1, 1, RW | ACCESS).with_notes(
            "RW because it may change the internal representation of the key, and propagate to replicas",
        )],
        categories: &["read", "hyperloglog", "slow"],
        group: "hyperloglog",
        summary: "Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s).",
        since: "2.8.9",
        complexity: "O(1) with a very small average constant time when called with a single key. O(N) with N being the number of keys, and much bigger constant times, when called with multiple keys.",
        handler: Handler::Keyspace(pfcount),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "pfdebug",
        arity: 3,
        flags: WRITE | DENYOOM | ADMIN,
        key_specs: &[KeySpec::single(2, RW | ACCESS)],
        categories: &["write", "hyperloglog", "admin", "slow", "dangerous"],
        group: "hyperloglog",
        summary: "Internal commands for debugging HyperLogLog values.",
        since: "2.8.9",
        complexity: "N/A",
        handler: Handler::Keyspace(pfdebug),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "pfmerge",
        arity: -2,
        flags: WRITE | DENYOOM,
        key_specs: &[
            KeySpec::single(1, RW | ACCESS | INSERT),
            KeySpec::range(2, -1, 1, RO | ACCESS),
        ],
        categories: &["write", "hyperloglog", "slow"],
        group: "hyperloglog",
        summary: "Merges one or more HyperLogLog values into a single key.",
        since: "2.8.9",
        complexity: "O(N) to merge N HyperLogLogs, but with high constant times.",
        handler: Handler::Keyspace(pfmerge),
        ..CommandSpec::DEFAULT
    },
];

// ---- Error texts only this family uses ------------------------------------------

const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
const CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";
const PFDEBUG_NO_KEY: &str = "ERR The specified key does not exist";
const NOT_SPARSE: &str = "ERR HLL encoding is not sparse";

fn corrupt(_: Corrupt) -> Frame {
    Frame::error(CORRUPT)
}

// ---- Shared helpers ---------------------------------------------------------------

/// The HLL string inside `value`: WRONGTYPE for other types, the HLL WRONGTYPE
/// for a string that is not one (an integer-encoded string never is, as in
/// Redis, whose check requires a string object with bytes).
fn hll_string(value: &mut Value) -> Result<&mut StringValue, Frame> {
    let Value::String(string) = value else {
        return Err(Frame::error(errors::WRONGTYPE));
    };
    let valid = match string {
        StringValue::Int(_) => false,
        _ => hll::is_hll(&string.as_cow()),
    };
    if valid {
        Ok(string)
    } else {
        Err(Frame::error(NOT_HLL))
    }
}

/// Stores a new HLL at `key` (absent: the caller looked it up for writing).
fn create(keyspace: &mut Keyspace, context: &Context, key: &[u8], hll: Vec<u8>) {
    let access = keyspace.initial_access(context);
    keyspace
        .db(context.db)
        .set(key, Value::String(StringValue::raw(hll)), None, access);
}

// ---- PFADD ------------------------------------------------------------------------

fn pfadd(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let key = &arguments[1];
    let elements = &arguments[2..];
    let mut updated = 0u64;
    let result = match keyspace.lookup_write(context, key) {
        Some(entry) => match hll_string(&mut entry.value) {
            Err(error) => return error,
            Ok(string) => add_all(string.make_raw(), elements, &mut updated),
        },
        None => {
            let mut hll = hll::new_sparse();
            // A new value counts as an update even without elements (and so
            // its cache is invalidated, as in Redis).
            updated += 1;
            let result = add_all(&mut hll, elements, &mut updated);
            hll::invalidate_cache(&mut hll);
            create(keyspace, context, key, hll);
            result
        }
    };
    // Registers changed before a corrupt opcode was met stay changed, as in Redis.
    keyspace.stats.dirty += updated;
    if let Err(error) = result {
        return corrupt(error);
    }
    Frame::Integer((updated > 0) as i64)
}

/// Adds every element, counting the registers that changed; invalidates the
/// cached cardinality when one did.
fn add_all(hll: &mut Vec<u8>, elements: &[Bytes], updated: &mut u64) -> Result<(), Corrupt> {
    let mut changed = false;
    for element in elements {
        if hll::add(hll, element)? {
            *updated += 1;
            changed = true;
        }
    }
    if changed {
        hll::invalidate_cache(hll);
    }
    Ok(())
}

// ---- PFCOUNT ----------------------------------------------------------------------

fn pfselftest(_: &mut Keyspace, context: &mut Context, _: &[Bytes]) -> Frame {
    match hll::self_test(&mut context.rng) {
        Ok(()) => Frame::OK,
        Err(error) => Frame::error_owned(error),
    }
}

fn pfcount(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    if arguments.len() > 2 {
        return pfcount_union(keyspace, context, &arguments[1..]);
    }
    let may_write = context.lazy_expire;
    let Some(entry) = keyspace.read(context, &arguments[1]) else {
        return Frame::Integer(0);
    };
    let string = match hll_string(&mut entry.value) {
        Ok(string) => string,
        Err(error) => return error,
    };
    if !may_write {
        let hll = string.as_cow();
        let count = match hll::cached_cardinality(&hll) {
            Some(cached) => Ok(cached),
            None => hll::count(&hll),
        };
        return count.map_or_else(corrupt, |count| Frame::Integer(count as i64));
    }
    let hll = string.make_raw();
    if let Some(cached) = hll::cached_cardinality(hll) {
        return Frame::Integer(cached as i64);
    }
    match hll::count(hll) {
        Err(error) => corrupt(error),
        Ok(count) => {
            hll::set_cached_cardinality(hll, count);
            keyspace.stats.dirty += 1;
            Frame::Integer(count as i64)
        }
    }
}

/// PFCOUNT of several keys: the cardinality of their union, changing none.
fn pfcount_union(keyspace: &mut Keyspace, context: &mut Context, keys: &[Bytes]) -> Frame {
    let mut max = Box::new([0u8; REGISTERS]);
    for key in keys {
        if let Err(error) = merge_key(keyspace, context, key, &mut max) {
            return error;
        }
    }
    Frame::Integer(hll::count_registers(&max) as i64)
}

/// Folds the HLL at `key` (read lookup; absent is empty) into `max`; answers
/// whether it was dense.
fn merge_key(
    keyspace: &mut Keyspace,
    context: &mut Context,
    key: &[u8],
    max: &mut [u8; REGISTERS],
) -> Result<bool, Frame> {
    let Some(entry) = keyspace.read(context, key) else {
        return Ok(false);
    };
    let string = hll_string(&mut entry.value)?;
    let hll = string.as_cow();
    hll::merge_into(max, &hll).map_err(corrupt)?;
    Ok(hll::is_dense(&hll))
}

// ---- PFMERGE ----------------------------------------------------------------------

fn pfmerge(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let destination = &arguments[1];
    // The destination is a source too.
    let mut max = Box::new([0u8; REGISTERS]);
    let mut any_dense = false;
    for key in &arguments[1..] {
        match merge_key(keyspace, context, key, &mut max) {
            Ok(dense) => any_dense |= dense,
            Err(error) => return error,
        }
    }
    let mut created = None;
    let hll = match keyspace.lookup_write(context, destination) {
        Some(entry) => match hll_string(&mut entry.value) {
            Ok(string) => string.make_raw(),
            Err(error) => return error,
        },
        None => created.insert(hll::new_sparse()),
    };
    // Redis 7.2 keeps the result sparse unless a source was dense (a sparse
    // result still turns dense when it outgrows the sparse limit).
    let result = write_registers(hll, &max, any_dense);
    if let Some(hll) = created {
        create(keyspace, context, destination, hll);
    }
    if let Err(error) = result {
        return corrupt(error);
    }
    keyspace.stats.dirty += 1;
    Frame::OK
}

fn write_registers(hll: &mut Vec<u8>, max: &[u8; REGISTERS], dense: bool) -> Result<(), Corrupt> {
    if dense {
        hll::to_dense(hll)?;
    }
    for (index, &value) in max.iter().enumerate() {
        if value != 0 {
            // The destination was merged into `max`, so this never lowers a
            // register, and the destination is known not to be corrupt.
            hll::raise(hll, index, value)?;
        }
    }
    hll::invalidate_cache(hll);
    Ok(())
}

// ---- PFDEBUG ----------------------------------------------------------------------

/// PFDEBUG GETREG | DECODE | ENCODING | TODENSE key.
fn pfdebug(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let subcommand = &arguments[1];
    let Some(entry) = keyspace.lookup_write(context, &arguments[2]) else {
        return Frame::error(PFDEBUG_NO_KEY);
    };
    let hll = match hll_string(&mut entry.value) {
        Ok(string) => string.make_raw(),
        Err(error) => return error,
    };
    let is = |name: &str| subcommand.eq_ignore_ascii_case(name.as_bytes());
    if is("getreg") {
        let was_sparse = !hll::is_dense(hll);
        if let Err(error) = hll::to_dense(hll) {
            return corrupt(error);
        }
        let registers = &hll[hll::HEADER_BYTES..];
        let reply = Frame::Array(
            (0..REGISTERS)
                .map(|index| Frame::Integer(hll::dense_get(registers, index) as i64))
                .collect(),
        );
        keyspace.stats.dirty += was_sparse as u64;
        reply
    } else if is("decode") {
        if hll::is_dense(hll) {
            return Frame::error(NOT_SPARSE);
        }
        Frame::bulk(hll::describe_sparse(hll))
    } else if is("encoding") {
        Frame::simple(if hll::is_dense(hll) {
            "dense"
        } else {
            "sparse"
        })
    } else if is("todense") {
        if hll::is_dense(hll) {
            return Frame::Integer(0);
        }
        if let Err(error) = hll::to_dense(hll) {
            return corrupt(error);
        }
        keyspace.stats.dirty += 1;
        Frame::Integer(1)
    } else {
        Frame::error_owned(format!(
            "ERR Unknown PFDEBUG subcommand '{}'",
            String::from_utf8_lossy(subcommand)
        ))
    }
}

#[cfg(test)]
mod tests {
    //! Expected values come from Redis 7 (`redis-server`, whose HyperLogLog code
    //! 7.2 shares): replies, and the exact bytes GET returned.

    use super::*;
    use crate::testing::{Harness, START_MS};
    use resp::Protocol;

    fn int(value: i64) -> Frame {
        Frame::Integer(value)
    }

    fn error(text: &str) -> Frame {
        Frame::Error(Bytes::copy_from_slice(text.as_bytes()))
    }

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(&text[at..at + 2], 16).unwrap())
            .collect()
    }

    fn stored(h: &Harness, key: &str) -> Vec<u8> {
        match h.get(key) {
            Some(Value::String(string)) => string.as_cow().into_owned(),
            other => panic!("{key} holds {other:?}"),
        }
    }

    /// PFADD `key` with `prefix{start}..prefix{end-1}` in one call.
    fn add_range(h: &mut Harness, key: &str, prefix: &str, range: std::ops::Range<usize>) -> Frame {
        let mut words: Vec<Vec<u8>> = vec![b"PFADD".to_vec(), key.as_bytes().to_vec()];
        words.extend(range.map(|index| format!("{prefix}{index}").into_bytes()));
        let words: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
        h.run_bytes(&words)
    }

    fn wire(frame: &Frame, protocol: Protocol) -> String {
        let mut out = bytes::BytesMut::new();
        resp::encode(frame, protocol, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn table_rows_match_redis() {
        let spec = |name: &str| crate::commands::lookup(name.as_bytes()).unwrap();
        for (name, arity, write, range) in [
            ("pfadd", -2, true, (1, 1, 1)),
            ("pfcount", -2, false, (1, -1, 1)),
            ("pfmerge", -2, true, (1, -1, 1)),
            ("pfdebug", 3, true, (2, 2, 1)),
        ] {
            let spec = spec(name);
            assert_eq!(spec.arity, arity, "{name}");
            assert_eq!(spec.is_write(), write, "{name}");
            assert_eq!(spec.legacy_key_range(), range, "{name}");
            assert_eq!(spec.group, "hyperloglog", "{name}");
            assert!(!spec.has_movable_keys(), "{name}");
        }
        assert!(spec("pfcount").has(MAY_REPLICATE));
        assert!(spec("pfadd").has(FAST | DENYOOM));
        assert_eq!(spec("pfcount").key_specs[0].flags, RW | ACCESS);
        assert!(!spec("pfcount").key_specs[0].notes.is_empty());
    }

    #[test]
    fn add_and_count_byte_for_byte_as_redis() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["PFADD", "h", "a", "b", "c"]), int(1));
        assert_eq!(
            stored(&h, "h"),
            hex("48594c4c01000000000000000000008060f38050b1844bfb80425a")
        );
        assert_eq!(h.encoding("h"), Some("raw"));
        assert_eq!(h.run(&["PFADD", "h", "a", "c"]), int(0));
        assert_eq!(h.run(&["PFCOUNT", "h"]), int(3));
        // The count is cached in the header, and the cache marked valid.
        assert_eq!(
            stored(&h, "h"),
            hex("48594c4c01000000030000000000000060f38050b1844bfb80425a")
        );
        assert_eq!(
            h.run(&["PFDEBUG", "DECODE", "h"]),
            Frame::bulk("Z:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603")
        );
        assert_eq!(
            h.run(&["PFDEBUG", "ENCODING", "h"]),
            Frame::simple("sparse")
        );

        // 200 elements added one at a time.
        for index in 0..200 {
            h.run(&["PFADD", "s", &format!("e{index}")]);
        }
        assert_eq!(h.run(&["PFCOUNT", "s"]), int(200));
        assert_eq!(h.run(&["STRLEN", "s"]), int(513));
        assert_eq!(stored(&h, "s"), hex(SPARSE_200));
    }

    /// `PFADD s e0`, ..., `PFADD s e199`, then PFCOUNT, in Redis.
    const SPARSE_200: &str = "48594c4c01000000c800000000000000368421801980409f8408a40e88409084406c9c0190018812883884409480411c8817884055800080407a80411d8812804075800d842a8040638440768c404684414880098040d5800980409480407e9040738040628440a280408384405d84148040cb8407840d8040f080405e80068427844081803c844047840780404e80408f84039404844043840c842684406e80407380404084409d84198019802a8441028c088441298010801c884060801080404b8c4052881b8040b080406e8040bc802b8c40f58040618c1a840380407e80408080404580088440fd80405a80406684409f8040468c108c018401841e8811802384407d8440de84406280308812844065840784198040de84404684408b8814802988008402800a8840578041a79011842e844070801f840180189440f98440848c168421813c881d801380368410804089844044804147800380228040b88440bb88404684168040c684404980048440e680404380388c405c80405584409980268005800380405480409e88404c882e8840448040b080198408841f880380405b841b803f804044804055800d88128440d380405988408b800290407e800784407b801d841d8040af8418840f844045803384404f80288440a78440768040578419844048800e9022840a80406a840d8039801380409a8828804046844044";

    #[test]
    fn dense_values_match_redis() {
        let mut h = Harness::new();
        assert_eq!(add_range(&mut h, "d", "x", 0..5000), int(1));
        assert_eq!(h.run(&["PFDEBUG", "ENCODING", "d"]), Frame::simple("dense"));
        assert_eq!(h.run(&["PFCOUNT", "d"]), int(4970));
        let bytes = stored(&h, "d");
        assert_eq!(bytes.len(), hll::DENSE_BYTES);
        assert_eq!(
            bytes[..40],
            hex("48594c4c000000006a13000000000000000004412000002008000000001010001000011000051000")
        );
        let Frame::Array(registers) = h.run(&["PFDEBUG", "GETREG", "d"]) else {
            panic!("GETREG answers an array");
        };
        assert_eq!(registers.len(), REGISTERS);
        let (mut weighted, mut sum) = (0i64, 0i64);
        for (index, register) in registers.iter().enumerate() {
            let Frame::Integer(value) = register else {
                panic!("register {index}");
            };
            weighted += (index as i64 + 1) * value;
            sum += value;
        }
        assert_eq!((weighted, sum), (72393654, 8998));
    }

    #[test]
    fn sparse_turns_dense_where_redis_does() {
        let mut h = Harness::new();
        for index in 0..1680 {
            h.run(&["PFADD", "t", &format!("y{index}")]);
        }
        assert_eq!(h.run(&["STRLEN", "t"]), int(2999));
        assert_eq!(
            h.run(&["PFDEBUG", "ENCODING", "t"]),
            Frame::simple("sparse")
        );
        assert_eq!(h.run(&["PFCOUNT", "t"]), int(1675));
        assert_eq!(h.run(&["PFADD", "t", "y1680"]), int(1));
        assert_eq!(h.run(&["PFDEBUG", "ENCODING", "t"]), Frame::simple("dense"));
        assert_eq!(h.run(&["STRLEN", "t"]), int(hll::DENSE_BYTES as i64));
        // TODENSE of a dense value changes nothing.
        assert_eq!(h.run(&["PFDEBUG", "TODENSE", "t"]), int(0));
        h.run(&["PFADD", "u", "a"]);
        assert_eq!(h.run(&["PFDEBUG", "TODENSE", "u"]), int(1));
        assert_eq!(
            h.run(&["PFDEBUG", "DECODE", "u"]),
            error("ERR HLL encoding is not sparse")
        );
        assert_eq!(h.run(&["PFCOUNT", "u"]), int(1));
    }

    #[test]
    fn a_million_distinct_elements() {
        let mut h = Harness::new();
        for start in (0..1_000_000).step_by(10_000) {
            add_range(&mut h, "big", "item:", start..start + 10_000);
        }
        // Redis answers 993158: within 1% of the truth.
        assert_eq!(h.run(&["PFCOUNT", "big"]), int(993158));
    }

    #[test]
    fn unions_and_merges() {
        let mut h = Harness::new();
        for start in (0..100_000).step_by(10_000) {
            add_range(&mut h, "u1", "a:", start..start + 10_000);
            add_range(&mut h, "u2", "b:", start..start + 10_000);
        }
        assert_eq!(h.run(&["PFCOUNT", "u1"]), int(100563));
        assert_eq!(h.run(&["PFCOUNT", "u2"]), int(101417));
        let before = (stored(&h, "u1"), stored(&h, "u2"));
        assert_eq!(h.run(&["PFCOUNT", "u1", "u2", "missing"]), int(202050));
        assert_eq!((stored(&h, "u1"), stored(&h, "u2")), before);
        assert_eq!(h.run(&["PFMERGE", "m", "u1", "u2"]), Frame::OK);
        assert_eq!(h.run(&["PFCOUNT", "m"]), int(202050));
        assert!((202050.0f64 / 200_000.0 - 1.0).abs() < 0.02);

        // Sparse sources give a sparse result, byte for byte as Redis's.
        h.run(&["PFADD", "h", "a", "b", "c"]);
        for index in 0..200 {
            h.run(&["PFADD", "s", &format!("e{index}")]);
        }
        assert_eq!(h.run(&["PFMERGE", "ms", "h", "s"]), Frame::OK);
        assert_eq!(
            h.run(&["PFDEBUG", "ENCODING", "ms"]),
            Frame::simple("sparse")
        );
        assert_eq!(h.run(&["PFCOUNT", "ms"]), int(203));
        assert_eq!(stored(&h, "ms"), hex(MERGED_SPARSE));
        // One dense source makes the result dense.
        add_range(&mut h, "d", "x", 0..5000);
        assert_eq!(h.run(&["PFMERGE", "md", "h", "d"]), Frame::OK);
        assert_eq!(
            h.run(&["PFDEBUG", "ENCODING", "md"]),
            Frame::simple("dense")
        );
        assert_eq!(h.run(&["PFCOUNT", "md"]), int(4974));
        assert_eq!(h.run(&["PFCOUNT", "h", "s", "d"]), int(5170));
        // The destination is merged too.
        assert_eq!(h.run(&["PFMERGE", "h", "s"]), Frame::OK);
        assert_eq!(h.run(&["PFCOUNT", "h"]), int(203));
        // Only a destination: an empty HLL, cache marked stale as Redis leaves it.
        assert_eq!(h.run(&["PFMERGE", "new"]), Frame::OK);
        assert_eq!(
            stored(&h, "new"),
            hex("48594c4c0100000000000000000000807fff")
        );
        assert_eq!(h.encoding("new"), Some("raw"));
        assert_eq!(h.run(&["PFADD", "e"]), int(1));
        assert_eq!(h.run(&["PFADD", "e"]), int(0));
        assert_eq!(stored(&h, "e"), hex("48594c4c0100000000000000000000807fff"));
        assert_eq!(h.run(&["PFCOUNT", "missing"]), int(0));
        assert_eq!(h.run(&["PFCOUNT", "missing", "other"]), int(0));
        assert_eq!(h.run(&["EXISTS", "missing"]), int(0));
    }

    /// `PFMERGE ms h s` in Redis, with `h` and `s` as in the test above.
    const MERGED_SPARSE: &str = "48594c4c01000000cb00000000000000368421801980409f8408a40e88409084406c9c0190018812883884409480411c8817884055800080407a80411d8812804075800d842a8040638440768c404684414880098040d5800980409480407e9040738040628440a280408384405d84148040cb8407840d8040f080405e80068427844081803c844047840780404e80408f84039404844043840c842684406e80407380404084409d84198019802a8441028c088441298010801c884060801080404b8c4052881b8040b080406e8040bc802b8c40f58040618c1a840380407e80408080404580088440fd80405a80406684409f8040468c108c018401841e8811802384406280198440de84406280308812844065840784198040de84404684408b8814802988008402800a8840578041a79011842e844070801f840180189440f98440848c168421813c881d801380368410804089844044804147800380228040b88440bb88404684168040c684404980048440e680404380388c405c801384404084409980268005800380405480409e88404c882e8840448040b080198408841f880380405b841b803f804044804055800d88128440d380405988408b800290407e800784407b801d841d8040af8418840f844045803384404f80288440a784407680405784198440488001800b9022840a80406a840d8039801380409a8828804046844044";

    #[test]
    fn values_travel_through_get_and_set() {
        let mut h = Harness::new();
        h.run(&["PFADD", "a", "x", "y", "z"]);
        add_range(&mut h, "d", "x", 0..5000);
        for (key, member) in [("a", "x"), ("d", "x0")] {
            let Frame::Bulk(bytes) = h.run(&["GET", key]) else {
                panic!("GET {key}");
            };
            h.run_bytes(&[b"SET", b"copy", &bytes]);
            assert_eq!(h.run(&["PFCOUNT", "copy"]), h.run(&["PFCOUNT", key]));
            assert_eq!(h.run(&["PFADD", "copy", member]), int(0));
        }
        // Bytes written by Redis (PFADD h a b c) count as Redis counts them.
        h.run_bytes(&[
            b"SET",
            b"redis",
            &hex("48594c4c01000000000000000000008060f38050b1844bfb80425a"),
        ]);
        assert_eq!(h.encoding("redis"), Some("embstr"));
        assert_eq!(h.run(&["PFCOUNT", "redis"]), int(3));
        assert_eq!(h.encoding("redis"), Some("raw"));
        assert_eq!(h.run(&["PFADD", "redis", "a", "b", "c"]), int(0));
        assert_eq!(h.run(&["PFADD", "redis", "d"]), int(1));
        assert_eq!(h.run(&["PFCOUNT", "redis"]), int(4));
    }

    #[test]
    fn wrong_types_and_corrupt_values() {
        let mut h = Harness::new();
        const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
        const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
        const CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";
        h.set("str", "hello");
        h.set("int", "12345678901234567");
        h.set_value("list", Value::list(["a"]), None);
        h.run(&["PFADD", "ok", "a"]);
        for key in ["str", "int"] {
            assert_eq!(h.run(&["PFCOUNT", key]), error(NOT_HLL), "{key}");
            assert_eq!(h.run(&["PFADD", key, "x"]), error(NOT_HLL), "{key}");
            assert_eq!(h.run(&["PFMERGE", key]), error(NOT_HLL), "{key}");
            assert_eq!(h.run(&["PFMERGE", "ok", key]), error(NOT_HLL), "{key}");
            assert_eq!(h.run(&["PFCOUNT", "ok", key]), error(NOT_HLL), "{key}");
            assert_eq!(h.run(&["PFDEBUG", "ENCODING", key]), error(NOT_HLL));
        }
        assert_eq!(h.get("int"), Some(Value::string("12345678901234567")));
        assert_eq!(h.run(&["PFCOUNT", "list"]), error(WRONGTYPE));
        assert_eq!(h.run(&["PFADD", "list", "a"]), error(WRONGTYPE));
        assert_eq!(h.run(&["PFMERGE", "list"]), error(WRONGTYPE));
        assert_eq!(h.run(&["PFMERGE", "dest", "ok", "list"]), error(WRONGTYPE));
        assert_eq!(h.run(&["EXISTS", "dest"]), int(0));
        // A dense header on a value of the wrong length is not an HLL.
        let mut truncated = hex("48594c4c0000000000000000000000");
        truncated.resize(hll::DENSE_BYTES - 1, 0);
        h.run_bytes(&[b"SET", b"short", &truncated]);
        assert_eq!(h.run(&["PFCOUNT", "short"]), error(NOT_HLL));
        h.run_bytes(&[
            b"SET",
            b"enc",
            b"HYLL\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x7f\xff",
        ]);
        assert_eq!(h.run(&["PFCOUNT", "enc"]), error(NOT_HLL));
        assert_eq!(
            h.run(&["PFDEBUG", "ENCODING", "missing"]),
            error("ERR The specified key does not exist")
        );
        assert_eq!(
            h.run(&["PFDEBUG", "NOPE", "ok"]),
            error("ERR Unknown PFDEBUG subcommand 'NOPE'")
        );

        // Sparse opcodes covering 16328 registers (VAL, XZERO, VAL run of 3).
        let bad: &[u8] = b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xc2\x80\x7f\xc3\xbe";
        h.run_bytes(&[b"SET", b"bad", bad]);
        assert_eq!(h.run(&["PFCOUNT", "bad"]), error(CORRUPT));
        assert_eq!(h.run(&["PFCOUNT", "bad", "ok"]), error(CORRUPT));
        assert_eq!(h.run(&["PFMERGE", "dest", "bad"]), error(CORRUPT));
        assert_eq!(h.run(&["PFDEBUG", "GETREG", "bad"]), error(CORRUPT));
        assert_eq!(h.run(&["PFDEBUG", "TODENSE", "bad"]), error(CORRUPT));
        // Redis still updates a register the opcodes do cover.
        assert_eq!(h.run(&["PFADD", "bad", "q"]), int(1));
        assert_eq!(
            stored(&h, "bad"),
            b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xc2\x80U\xae\x94j\x13\xbe"
        );
        // An element whose register lies past them is refused.
        let beyond = (0..)
            .map(|index: u32| format!("p{index}"))
            .find(|element| hll::register_and_value(element.as_bytes()).0 >= 16328)
            .unwrap();
        assert_eq!(h.run(&["PFADD", "bad", &beyond]), error(CORRUPT));
    }

    #[test]
    fn replicated_reads_do_not_store_the_count() {
        let mut h = Harness::new();
        h.run(&["PFADD", "h", "a", "b", "c"]);
        h.set_with_expiry("gone", "v", START_MS + 5);
        let before = stored(&h, "h");
        h.context.lazy_expire = false;
        let dirty = h.keyspace.stats.dirty;
        assert_eq!(h.run(&["PFCOUNT", "h"]), int(3));
        assert_eq!(stored(&h, "h"), before);
        assert_eq!(h.keyspace.stats.dirty, dirty);
        h.advance(10);
        assert_eq!(h.run(&["PFCOUNT", "gone"]), int(0));
        assert_eq!(h.keyspace.db_ref(0).len(), 2);
        h.context.lazy_expire = true;
        assert_eq!(h.run(&["PFCOUNT", "h"]), int(3));
        assert_ne!(stored(&h, "h"), before);
        assert_eq!(h.keyspace.stats.dirty, dirty + 1);
    }

    #[test]
    fn reply_shapes_in_both_protocols() {
        let mut h = Harness::new();
        let added = h.run(&["PFADD", "h", "a"]);
        assert_eq!(wire(&added, Protocol::Resp2), ":1\r\n");
        assert_eq!(wire(&added, Protocol::Resp3), ":1\r\n");
        let merged = h.run(&["PFMERGE", "m", "h"]);
        assert_eq!(wire(&merged, Protocol::Resp3), "+OK\r\n");
        let encoding = h.run(&["PFDEBUG", "ENCODING", "h"]);
        assert_eq!(wire(&encoding, Protocol::Resp2), "+sparse\r\n");
        assert_eq!(
            h.run(&["PFADD"]),
            error("ERR wrong number of arguments for 'pfadd' command")
        );
        assert_eq!(
            h.run(&["PFDEBUG", "GETREG"]),
            error("ERR wrong number of arguments for 'pfdebug' command")
        );
    }
}
