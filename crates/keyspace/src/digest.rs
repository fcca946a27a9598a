//! DEBUG DIGEST and DEBUG OBJECT: a digest of the whole dataset, and the one-line
//! description of a stored value. The node calls these; they only read.

use crate::dump;
use crate::set::SetEncoding;
use crate::value::{canonical_i64, StringValue, Value};
use crate::{Context, Entry, Keyspace, SlotState};
use siphasher::sip128::SipHasher13;

/// Fixed SipHash keys: the digest must be the same on every node and every run,
/// whatever the keyspace's own hash seed.
const DIGEST_KEYS: [(u64, u64); 2] = [
    (0x736c_6f74_7261_6674, 0x6469_6765_7374_2d31),
    (0x0f1e_2d3c_4b5a_6978, 0x8796_a5b4_c3d2_e1f0),
];

/// Bytes in a digest (40 hex characters, like Redis's SHA1-based one).
const DIGEST_BYTES: usize = 20;

/// An order-independent digest of every live key in every database, as 40
/// lowercase hex characters; all zeros when the dataset is empty (as Redis's
/// DEBUG DIGEST). Each key contributes a hash of its database index, name, type,
/// serialized value and expiry time; the contributions are XORed, so neither
/// insertion order nor hash-table layout matters. Access data (LRU/LFU) is left
/// out. Slots' migration states contribute one more hash when there are any
/// (then an empty dataset does not digest to zeros); a keyspace without states
/// digests exactly as before they existed.
pub fn digest(keyspace: &Keyspace, now_ms: u64) -> String {
    let mut total = [0u8; DIGEST_BYTES];
    let mut material = Vec::new();
    for (index, db) in keyspace.dbs().iter().enumerate() {
        for (key, entry) in db.iter(now_ms) {
            material.clear();
            key_material(&mut material, index, key, entry);
            for (slot, byte) in total.iter_mut().zip(key_hash(&material)) {
                *slot ^= byte;
            }
        }
    }
    if !keyspace.slot_states().is_empty() {
        material.clear();
        slot_states_material(&mut material, keyspace);
        for (slot, byte) in total.iter_mut().zip(key_hash(&material)) {
            *slot ^= byte;
        }
    }
    if !keyspace.scripts.is_empty() {
        material.clear();
        scripts_material(&mut material, keyspace);
        for (slot, byte) in total.iter_mut().zip(key_hash(&material)) {
            *slot ^= byte;
        }
    }
    to_hex(&total)
}

/// What cached scripts and function libraries contribute: starts with a
/// database index no database (nor the slot states) has, `u64::MAX - 1`.
fn scripts_material(out: &mut Vec<u8>, keyspace: &Keyspace) {
    out.extend_from_slice(&(u64::MAX - 1).to_le_bytes());
    for map in [&keyspace.scripts.scripts, &keyspace.scripts.libraries] {
        out.extend_from_slice(&(map.len() as u64).to_le_bytes());
        for (name, code) in map {
            for part in [name, code] {
                out.extend_from_slice(&(part.len() as u64).to_le_bytes());
                out.extend_from_slice(part);
            }
        }
    }
}

/// What the slot states contribute to the digest. It starts with a database
/// index no database has (`u64::MAX`), so it never equals a key's material.
fn slot_states_material(out: &mut Vec<u8>, keyspace: &Keyspace) {
    out.extend_from_slice(&u64::MAX.to_le_bytes());
    out.extend_from_slice(&(keyspace.slot_states().len() as u64).to_le_bytes());
    for (&slot, &state) in keyspace.slot_states() {
        let state: u8 = match state {
            SlotState::Frozen => 1,
            SlotState::Gone => 2,
        };
        out.extend_from_slice(&slot.to_le_bytes());
        out.push(state);
    }
}

/// DEBUG DIGEST-VALUE: the digest of one value (type and content, not the key,
/// its database or its TTL); all zeros for a missing key, as Redis.
pub fn value_digest(entry: Option<&Entry>) -> String {
    let Some(entry) = entry else {
        return to_hex(&[0u8; DIGEST_BYTES]);
    };
    let mut material = Vec::new();
    for field in [
        entry.value.type_name().as_bytes(),
        &dump::encode_body(&entry.value),
    ] {
        material.extend_from_slice(&(field.len() as u64).to_le_bytes());
        material.extend_from_slice(field);
    }
    to_hex(&key_hash(&material))
}

/// What one key contributes to the digest, each field length-prefixed so no two
/// different keys can produce the same bytes.
fn key_material(out: &mut Vec<u8>, db_index: usize, key: &[u8], entry: &Entry) {
    let type_name = entry.value.type_name().as_bytes();
    let serialized = dump::encode_body(&entry.value);
    out.extend_from_slice(&(db_index as u64).to_le_bytes());
    for field in [key, type_name, &serialized] {
        out.extend_from_slice(&(field.len() as u64).to_le_bytes());
        out.extend_from_slice(field);
    }
    out.extend_from_slice(&entry.expire_at_ms().unwrap_or(0).to_le_bytes());
}

/// 160 bits from two keyed SipHash-1-3-128 runs.
fn key_hash(material: &[u8]) -> [u8; DIGEST_BYTES] {
    let first = SipHasher13::new_with_keys(DIGEST_KEYS[0].0, DIGEST_KEYS[0].1)
        .hash(material)
        .as_bytes();
    let second = SipHasher13::new_with_keys(DIGEST_KEYS[1].0, DIGEST_KEYS[1].1)
        .hash(material)
        .as_bytes();
    let mut out = [0u8; DIGEST_BYTES];
    out[..16].copy_from_slice(&first);
    out[16..].copy_from_slice(&second[..DIGEST_BYTES - 16]);
    out
}

fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for &byte in bytes {
        text.push(DIGITS[(byte >> 4) as usize] as char);
        text.push(DIGITS[(byte & 0x0F) as usize] as char);
    }
    text
}

/// Redis's 24-bit LRU clock mask (`LRU_CLOCK_MAX`).
const LRU_CLOCK_MAX: u64 = (1 << 24) - 1;

/// The DEBUG OBJECT line for a stored value, in Redis's shape:
/// `Value at:0x7f... refcount:1 encoding:embstr serializedlength:6 lru:123 lru_seconds_idle:4`.
///
/// The address is derived from the value (stable, not a real pointer);
/// `serializedlength` is what Redis's RDB encoding of the value would take,
/// without LZF compression.
pub fn debug_object(keyspace: &Keyspace, entry: &Entry, context: &Context) -> String {
    let body = dump::encode_body(&entry.value);
    let address = SipHasher13::new_with_keys(DIGEST_KEYS[1].1, DIGEST_KEYS[0].0)
        .hash(&body)
        .as_u64()
        .0
        & 0x00ff_ffff_fff0;
    let (lru, idle) = if keyspace.config.lfu {
        // The field holds LFU data; Redis still reads it as an LRU clock.
        let lru = entry.access as u64 & LRU_CLOCK_MAX;
        let clock = context.now_seconds() & LRU_CLOCK_MAX;
        let idle = if clock >= lru {
            clock - lru
        } else {
            clock + (LRU_CLOCK_MAX - lru)
        };
        (lru, idle)
    } else {
        (
            entry.access as u64 & LRU_CLOCK_MAX,
            keyspace.idle_seconds(entry, context),
        )
    };
    format!(
        "Value at:0x7f{address:010x} refcount:{} encoding:{} serializedlength:{} lru:{lru} lru_seconds_idle:{idle}{}",
        refcount(keyspace, &entry.value),
        entry.value.encoding_name(),
        rdb_value_length(&entry.value),
        quicklist_details(&entry.value),
    )
}

/// The fields Redis adds to DEBUG OBJECT for a quicklist, with the nodes this
/// list would fill (no compression: `list-compress-depth 0`).
fn quicklist_details(value: &Value) -> String {
    let Value::List(list) = value else {
        return String::new();
    };
    if !list.is_quicklist() {
        return String::new();
    }
    let nodes = list.node_sizes();
    let average = list.len() as f64 / nodes.len() as f64;
    format!(
        " ql_nodes:{} ql_avg_node:{average:.2} ql_listpack_max:-2 ql_compressed:0 ql_uncompressed_size:{}",
        nodes.len(),
        nodes.iter().sum::<usize>(),
    )
}

/// Redis's OBJ_SHARED_INTEGERS: integers below this are shared objects.
const SHARED_INTEGERS: i64 = 10_000;

/// What OBJECT REFCOUNT and DEBUG OBJECT report: Redis shares the objects of small
/// non-negative integers (refcount INT_MAX) unless an LRU/LFU eviction policy
/// forbids it; everything else has one reference.
pub fn refcount(keyspace: &Keyspace, value: &Value) -> i64 {
    match value {
        Value::String(StringValue::Int(integer))
            if !keyspace.config.lfu && (0..SHARED_INTEGERS).contains(integer) =>
        {
            i32::MAX as i64
        }
        _ => 1,
    }
}

/// Bytes Redis's RDB encoding of `value` takes (`rdbSavedObjectLen`), assuming no
/// compression. A list is saved as its quicklist nodes (a listpack as one node):
/// the node count, then each node's container type and listpack bytes.
fn rdb_value_length(value: &Value) -> usize {
    match value {
        Value::String(string) => rdb_string_length(&string.as_cow()),
        Value::List(list) => {
            let nodes = if list.is_quicklist() {
                list.node_sizes()
            } else {
                vec![list.packed_bytes()]
            };
            let node_bytes: usize = nodes
                .iter()
                .map(|&size| 1 + rdb_length_prefix(size as u64) + size)
                .sum();
            rdb_length_prefix(nodes.len() as u64) + node_bytes
        }
        // Small encodings are saved as one blob (listpack or intset bytes);
        // hashtables as a count and each string.
        Value::Hash(hash) if hash.is_table() => {
            rdb_length_prefix(hash.len() as u64)
                + hash
                    .pairs()
                    .iter()
                    .map(|pair| rdb_string_length(pair.field()) + rdb_string_length(pair.value()))
                    .sum::<usize>()
        }
        Value::Hash(hash) => rdb_blob_length(hash.listpack_bytes()),
        Value::Set(set) => match set.encoding() {
            SetEncoding::Intset => rdb_blob_length(set.intset_bytes()),
            SetEncoding::Listpack => rdb_blob_length(set.listpack_bytes()),
            SetEncoding::Table => {
                rdb_length_prefix(set.len() as u64)
                    + set
                        .members()
                        .map(|member| rdb_string_length(&member))
                        .sum::<usize>()
            }
        },
        // A listpack is saved as one string; a skiplist as the count, then each
        // member as a string and its score as a binary double.
        Value::ZSet(zset) if zset.is_skiplist() => {
            rdb_length_prefix(zset.len() as u64)
                + zset
                    .iter()
                    .map(|entry| rdb_string_length(entry.member()) + 8)
                    .sum::<usize>()
        }
        Value::ZSet(zset) => {
            let size = zset_listpack_bytes(zset);
            rdb_length_prefix(size as u64) + size
        }
        // Not Redis's RDB stream layout: our own serialized length.
        Value::Stream(_) => dump::encode_body(value).len().saturating_sub(1),
    }
}

/// A blob saved as an RDB string: its length prefix and bytes.
fn rdb_blob_length(bytes: usize) -> usize {
    rdb_length_prefix(bytes as u64) + bytes
}

/// Bytes Redis's listpack of this sorted set takes: the header and end byte,
/// then each member and its score (as `d2string` prints it) as entries.
fn zset_listpack_bytes(zset: &crate::value::ZSetValue) -> usize {
    7 + zset
        .iter()
        .map(|entry| {
            crate::list::entry_bytes(entry.member())
                + crate::list::entry_bytes(resp::format_double(entry.score).as_bytes())
        })
        .sum::<usize>()
}

fn rdb_string_length(data: &[u8]) -> usize {
    // Short strings that are canonical integers fitting 32 bits are stored as
    // integers (1 type byte + 1, 2 or 4 bytes).
    if data.len() <= 11 {
        if let Some(integer) = canonical_i64(data) {
            if i8::try_from(integer).is_ok() {
                return 2;
            }
            if i16::try_from(integer).is_ok() {
                return 3;
            }
            if i32::try_from(integer).is_ok() {
                return 5;
            }
        }
    }
    rdb_length_prefix(data.len() as u64) + data.len()
}

fn rdb_length_prefix(length: u64) -> usize {
    if length < 1 << 6 {
        1
    } else if length < 1 << 14 {
        2
    } else if length <= u32::MAX as u64 {
        5
    } else {
        9
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMPTY: &str = "0000000000000000000000000000000000000000";

    fn keyspace(seed: u64) -> Keyspace {
        Keyspace::new(16, seed)
    }

    #[test]
    fn empty_dataset_digests_to_zeros() {
        let keyspace = keyspace(1);
        assert_eq!(digest(&keyspace, 0), EMPTY);
    }

    #[test]
    fn digest_ignores_order_layout_and_access() {
        let mut first = keyspace(1);
        let mut second = keyspace(99);
        let mut context = Context::new(5_000, 1);
        for index in 0..200 {
            let key = format!("key:{index}");
            first.set(
                &mut context,
                key.as_bytes(),
                Value::string(format!("v{index}")),
                None,
            );
        }
        for index in (0..200).rev() {
            let key = format!("key:{index}");
            second.set(
                &mut context,
                key.as_bytes(),
                Value::string(format!("v{index}")),
                None,
            );
        }
        let before = digest(&first, 5_000);
        assert_eq!(before.len(), 40);
        assert!(before
            .bytes()
            .all(|byte| byte.is_ascii_hexdigit() && !byte.is_ascii_uppercase()));
        assert_eq!(before, digest(&second, 5_000));

        // Reading changes access data, not the digest.
        let mut later = Context::new(900_000, 2);
        first.read(&mut later, b"key:7");
        assert_eq!(digest(&first, 5_000), before);
    }

    #[test]
    fn digest_covers_value_expiry_and_database() {
        let mut context = Context::new(1_000, 1);
        let mut base = keyspace(3);
        base.set(&mut context, b"k", Value::string("v"), None);
        let reference = digest(&base, 1_000);
        assert_ne!(reference, EMPTY);

        let mut other_value = keyspace(3);
        other_value.set(&mut context, b"k", Value::string("w"), None);
        assert_ne!(digest(&other_value, 1_000), reference);

        let mut with_ttl = keyspace(3);
        with_ttl.set(&mut context, b"k", Value::string("v"), Some(50_000));
        assert_ne!(digest(&with_ttl, 1_000), reference);
        // Once expired, the key no longer counts.
        assert_eq!(digest(&with_ttl, 50_001), EMPTY);

        let mut other_db = keyspace(3);
        context.db = 1;
        other_db.set(&mut context, b"k", Value::string("v"), None);
        assert_ne!(digest(&other_db, 1_000), reference);

        // Deleting the key brings the digest back to zero.
        other_db.delete(&mut context, b"k");
        assert_eq!(digest(&other_db, 1_000), EMPTY);
    }

    /// Slot states are state: setting one changes the digest, each state and
    /// slot differently; clearing them gives back the digest without states.
    #[test]
    fn digest_covers_slot_states() {
        let mut context = Context::new(1_000, 1);
        let mut keyspace = keyspace(3);
        keyspace.set(&mut context, b"k", Value::string("v"), None);
        let reference = digest(&keyspace, 1_000);
        let mut seen = vec![reference.clone()];
        for (slot, state) in [
            (5, SlotState::Frozen),
            (5, SlotState::Gone),
            (6, SlotState::Gone),
        ] {
            keyspace.set_slot_state(slot, Some(state));
            let with_state = digest(&keyspace, 1_000);
            assert!(!seen.contains(&with_state), "{slot} {state:?}");
            seen.push(with_state);
            keyspace.set_slot_state(slot, None);
            assert_eq!(digest(&keyspace, 1_000), reference);
        }
        // Two states at once differ from either alone.
        keyspace.set_slot_state(5, Some(SlotState::Gone));
        keyspace.set_slot_state(6, Some(SlotState::Gone));
        assert!(!seen.contains(&digest(&keyspace, 1_000)));

        // An empty keyspace with a state is not the empty digest.
        let mut empty = Keyspace::new(1, 1);
        empty.set_slot_state(0, Some(SlotState::Frozen));
        assert_ne!(digest(&empty, 0), EMPTY);
        empty.set_slot_state(0, None);
        assert_eq!(digest(&empty, 0), EMPTY);
    }

    #[test]
    fn debug_object_has_redis_shape() {
        let mut keyspace = keyspace(4);
        let mut context = Context::new(10_000, 1);
        keyspace.set(&mut context, b"s", Value::string("hello"), None);
        keyspace.set(&mut context, b"n", Value::string("12345"), None);
        keyspace.set(&mut context, b"big", Value::string(vec![b'x'; 100]), None);
        let later = Context::new(25_000, 1);

        let line = debug_object(
            &keyspace,
            keyspace.db_ref(0).peek(b"s", 25_000).unwrap(),
            &later,
        );
        assert!(line.starts_with("Value at:0x7f"), "{line}");
        assert!(
            line.ends_with(
                " refcount:1 encoding:embstr serializedlength:6 lru:10 lru_seconds_idle:15"
            ),
            "{line}"
        );
        let address = line["Value at:0x".len()..].split(' ').next().unwrap();
        assert_eq!(address.len(), 12);
        assert!(address.bytes().all(|byte| byte.is_ascii_hexdigit()));

        let line = debug_object(
            &keyspace,
            keyspace.db_ref(0).peek(b"n", 25_000).unwrap(),
            &later,
        );
        assert!(
            line.contains(" refcount:1 encoding:int serializedlength:3 "),
            "{line}"
        );

        let line = debug_object(
            &keyspace,
            keyspace.db_ref(0).peek(b"big", 25_000).unwrap(),
            &later,
        );
        assert!(
            line.contains(" encoding:raw serializedlength:102 "),
            "{line}"
        );
    }

    #[test]
    fn rdb_lengths() {
        assert_eq!(rdb_string_length(b"1"), 2);
        assert_eq!(rdb_string_length(b"-200"), 3);
        assert_eq!(rdb_string_length(b"100000"), 5);
        assert_eq!(rdb_string_length(b"10000000000"), 12);
        assert_eq!(rdb_string_length(b"01"), 3);
        assert_eq!(rdb_string_length(&[b'a'; 64]), 66);
        assert_eq!(rdb_string_length(&[b'a'; 16384]), 16389);
    }
}
