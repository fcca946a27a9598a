//! The one binary encoding used for log records, snapshots metadata and Raft
//! messages on the wire: postcard over serde.
//!
//! A leader encodes an entry's request once, when it proposes it, and uses
//! the bytes for its log record and for the appends to each follower
//! (`Request::keep_encoding`); a follower decodes an append with
//! [`decode_append`], which keeps each request's bytes as received for its
//! record and makes the commands' arguments views of them. [`encode_entry`]
//! and [`encode_append`] write exactly the bytes `encode` writes for an entry
//! and an AppendEntries request, with a kept encoding in place, and
//! `decode_append` reads what `decode` reads (tested below).

use std::sync::Arc;

use bytes::Bytes;
use openraft::alias::{LogIdOf, VoteOf};
use openraft::raft::AppendEntriesRequest;
use openraft::EntryPayload;
use postcard::ser_flavors::Flavor;
use serde::{de::DeserializeOwned, Serialize};

use crate::types::{Entry, Request, TypeConfig};

/// Encodes `value`; encoding our own types cannot fail except on allocation.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    postcard::to_stdvec(value).expect("serializing an in-memory value")
}

/// Appends the encoding of `value` to `out`.
pub fn encode_into<T: Serialize + ?Sized>(value: &T, out: Vec<u8>) -> Vec<u8> {
    postcard::serialize_with_flavor(value, Appending(out)).expect("serializing an in-memory value")
}

/// Decodes `bytes` as a `T`, with an I/O error for malformed input.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> std::io::Result<T> {
    postcard::from_bytes(bytes)
        .map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidData, error.to_string()))
}

/// A log entry's encoding, as `encode(entry)`: its log record. A request's
/// kept encoding is used if it has one.
pub fn encode_entry(entry: &Entry) -> Vec<u8> {
    append_entry(entry, Vec::with_capacity(entry_capacity(entry)))
}

/// An AppendEntries request's encoding, as `encode(request)`.
pub fn encode_append(request: &AppendEntriesRequest<TypeConfig>) -> Vec<u8> {
    let capacity = 64 + request.entries.iter().map(entry_capacity).sum::<usize>();
    // The fields in their declared order, as serde's derive writes them.
    let mut out = encode_into(&request.vote, Vec::with_capacity(capacity));
    out = encode_into(&request.prev_log_id, out);
    out = encode_into(&request.entries.len(), out);
    for entry in &request.entries {
        out = append_entry(entry, out);
    }
    encode_into(&request.leader_commit, out)
}

/// Decodes an AppendEntries request as `decode` does, from `payload` as it
/// arrived: each normal entry's request keeps its own bytes of `payload` as
/// its encoding (the follower's log record is made of them), and its
/// commands' arguments are views of `payload`, not copies.
pub fn decode_append(payload: &Bytes) -> std::io::Result<AppendEntriesRequest<TypeConfig>> {
    let _source = crate::types::shared::Source::set(payload);
    let (vote, rest) = take::<VoteOf<TypeConfig>>(payload)?;
    let (prev_log_id, rest) = take::<Option<LogIdOf<TypeConfig>>>(rest)?;
    let (count, mut rest) = take::<usize>(rest)?;
    // Every entry takes at least four bytes (a log id and a variant): a
    // count beyond them is malformed and must not reserve memory, nor may a
    // large one reserve much before its entries are read.
    let mut entries = Vec::with_capacity(count.min(rest.len() / 4).min(4096));
    for _ in 0..count {
        let (log_id, after_id) = take::<LogIdOf<TypeConfig>>(rest)?;
        let (variant, request_bytes) = take::<u32>(after_id)?;
        if variant == NORMAL_VARIANT {
            let (request, after) = take::<Request>(request_bytes)?;
            let own = &request_bytes[..request_bytes.len() - after.len()];
            request.keep_received_encoding(payload.slice_ref(own));
            entries.push(Entry {
                log_id,
                payload: EntryPayload::Normal(Arc::new(request)),
            });
            rest = after;
        } else {
            let (entry, after) = take::<Entry>(rest)?;
            entries.push(entry);
            rest = after;
        }
    }
    let (leader_commit, _) = take::<Option<LogIdOf<TypeConfig>>>(rest)?;
    Ok(AppendEntriesRequest {
        vote,
        prev_log_id,
        entries,
        leader_commit,
    })
}

fn take<'a, T: serde::Deserialize<'a>>(bytes: &'a [u8]) -> std::io::Result<(T, &'a [u8])> {
    postcard::take_from_bytes(bytes)
        .map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidData, error.to_string()))
}

/// The variant index serde's derive gives `EntryPayload::Normal`.
const NORMAL_VARIANT: u32 = 1;

fn append_entry(entry: &Entry, out: Vec<u8>) -> Vec<u8> {
    match &entry.payload {
        EntryPayload::Normal(request) => {
            let mut out = encode_into(&entry.log_id, out);
            out = encode_into(&NORMAL_VARIANT, out);
            request.append_encoding(out)
        }
        _ => encode_into(entry, out),
    }
}

fn entry_capacity(entry: &Entry) -> usize {
    match &entry.payload {
        // Without a kept encoding, growing as it goes measured cheaper than
        // estimating the size first.
        EntryPayload::Normal(request) => 32 + request.kept_len().unwrap_or(0),
        _ => 32,
    }
}

/// A postcard output appending to a `Vec`.
struct Appending(Vec<u8>);

impl Flavor for Appending {
    type Output = Vec<u8>;

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.0.extend_from_slice(data);
        Ok(())
    }

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.0.push(data);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<Vec<u8>> {
        Ok(self.0)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use openraft::entry::RaftEntry;
    use openraft::testing::log_id;
    use openraft::Membership;

    use super::*;
    use crate::types::{Op, Request, Vote};

    fn args(seed: u64, count: usize) -> Vec<Bytes> {
        (0..count)
            .map(|at| {
                let length = (seed as usize * 31 + at * 17) % 300;
                Bytes::from(vec![b'a' + (at % 26) as u8; length])
            })
            .collect()
    }

    fn exec(seed: u64, commands: usize) -> Op {
        Op::Exec {
            db: seed as u32 % 3,
            resp3: seed.is_multiple_of(2),
            commands: (0..commands).map(|at| args(seed + at as u64, 3)).collect(),
            watched: (0..seed % 3)
                .map(|at| (Bytes::from(format!("k{at}")), Bytes::from(vec![7; 20])))
                .collect(),
        }
    }

    /// Entries of every payload kind and many shapes of request.
    fn entries() -> Vec<Entry> {
        let mut entries = Vec::new();
        let mut index = 1;
        let mut next =
            |entries: &mut Vec<Entry>,
             make: &dyn Fn(openraft::alias::LogIdOf<TypeConfig>) -> Entry| {
                entries.push(make(log_id::<TypeConfig>(index / 50 + 1, index % 3, index)));
                index += 1;
            };
        next(&mut entries, &|id| Entry::new_blank(id));
        next(&mut entries, &|id| {
            Entry::new_membership(
                id,
                Membership::new_with_defaults(vec![[1u64, 2, 3].into()], []),
            )
        });
        for seed in 0..150u64 {
            next(&mut entries, &|id| {
                let op = match seed % 6 {
                    0 => exec(seed, 1 + seed as usize % 20),
                    1 => Op::Batch(
                        (0..seed % 9)
                            .map(|at| (at * 7, exec(seed + at, 2)))
                            .collect(),
                    ),
                    2 => Op::ExpireTick,
                    3 => Op::Evict {
                        keys: (0..seed as u32 % 5)
                            .map(|db| (db, Bytes::from(vec![1; 9])))
                            .collect(),
                    },
                    4 => Op::PutTopology {
                        expected_epoch: seed,
                        epoch: seed + 1,
                        topology: Bytes::from(vec![3; seed as usize * 11]),
                    },
                    _ => Op::DropSlotKeys {
                        slots: (0..seed as u16).collect(),
                        limit: 1 << (seed % 30),
                    },
                };
                Entry::new_normal(
                    id,
                    Arc::new(Request::new(seed * 1_000_003, u64::MAX - seed, op)),
                )
            });
        }
        entries
    }

    #[test]
    fn an_entry_encodes_as_serde_encodes_it_before_and_after_its_encoding_is_kept() {
        for entry in entries() {
            let expected = encode(&entry);
            // Made for the record alone, then kept, then given up.
            assert_eq!(encode_entry(&entry), expected, "{entry:?}");
            if let EntryPayload::Normal(request) = &entry.payload {
                request.keep_encoding();
                assert_eq!(encode_entry(&entry), expected, "{entry:?}");
                request.retire_encoding();
            }
            assert_eq!(encode_entry(&entry), expected, "{entry:?}");
            let decoded: Entry = decode(&expected).unwrap();
            assert_eq!(decoded, entry);
        }
    }

    #[test]
    fn an_append_encodes_as_serde_encodes_it() {
        let all = entries();
        // No entries, one, and more than a one-byte length holds.
        for (count, prev, commit) in [
            (0, None, None),
            (1, Some(4), None),
            (all.len(), Some(9), Some(3)),
        ] {
            let request = AppendEntriesRequest::<TypeConfig> {
                vote: Vote::new_committed(7, 2),
                prev_log_id: prev.map(|index| log_id::<TypeConfig>(6, 1, index)),
                entries: all[..count].to_vec(),
                leader_commit: commit.map(|index| log_id::<TypeConfig>(6, 1, index)),
            };
            // Made for the message, then taken from the kept encodings.
            let expected = encode(&request);
            assert_eq!(encode_append(&request), expected);
            for entry in &request.entries {
                if let EntryPayload::Normal(kept) = &entry.payload {
                    kept.keep_encoding();
                }
            }
            assert_eq!(encode_append(&request), expected);
        }
        let uncommitted = AppendEntriesRequest::<TypeConfig> {
            vote: Vote::new(3, 1),
            prev_log_id: None,
            entries: all[5..9].to_vec(),
            leader_commit: None,
        };
        assert_eq!(encode_append(&uncommitted), encode(&uncommitted));
    }

    fn append(count: usize) -> AppendEntriesRequest<TypeConfig> {
        AppendEntriesRequest::<TypeConfig> {
            vote: Vote::new_committed(7, 2),
            prev_log_id: Some(log_id::<TypeConfig>(6, 1, 4)),
            entries: entries()[..count].to_vec(),
            leader_commit: Some(log_id::<TypeConfig>(6, 1, 2)),
        }
    }

    fn assert_same(a: &AppendEntriesRequest<TypeConfig>, b: &AppendEntriesRequest<TypeConfig>) {
        assert_eq!(a.vote, b.vote);
        assert_eq!(a.prev_log_id, b.prev_log_id);
        assert_eq!(a.entries, b.entries);
        assert_eq!(a.leader_commit, b.leader_commit);
    }

    /// Whatever `decode` makes of some bytes, `decode_append` makes the same,
    /// or fails where it fails.
    fn decodes_alike(bytes: &[u8]) {
        let payload = Bytes::copy_from_slice(bytes);
        let plain = decode::<AppendEntriesRequest<TypeConfig>>(bytes);
        let shared = decode_append(&payload);
        match (plain, shared) {
            (Ok(plain), Ok(shared)) => assert_same(&plain, &shared),
            (Err(_), Err(_)) => {}
            (plain, shared) => panic!("decode {plain:?}, decode_append {shared:?}"),
        }
    }

    #[test]
    fn a_received_append_keeps_its_bytes_and_shares_its_arguments() {
        for count in [0, 1, 7, 152] {
            let request = append(count);
            let payload = Bytes::from(encode(&request));
            let decoded = decode_append(&payload).unwrap();
            assert_same(&decoded, &request);
            let within = |data: &[u8]| {
                let start = payload.as_ptr() as usize;
                let at = data.as_ptr() as usize;
                at >= start && at + data.len() <= start + payload.len()
            };
            for (entry, sent) in decoded.entries.iter().zip(&request.entries) {
                // The record is the entry's encoding, made of the kept bytes.
                assert_eq!(encode_entry(entry), encode(sent));
                let EntryPayload::Normal(received) = &entry.payload else {
                    continue;
                };
                assert_eq!(received.kept_len(), Some(encode(&**received).len()));
                if let Op::Exec { commands, .. } = &received.op {
                    for argument in commands.iter().flatten().filter(|a| !a.is_empty()) {
                        assert!(within(argument), "an argument was copied");
                    }
                }
            }
            assert_eq!(encode_append(&decoded), payload);
        }
    }

    #[test]
    fn a_damaged_append_decodes_as_serde_decodes_it() {
        // The first entries: a blank, a membership, then requests of each kind.
        let payload = encode(&append(9));
        for end in 0..payload.len() {
            decodes_alike(&payload[..end]);
        }
        for at in 0..payload.len() {
            for flip in [0x01, 0x80, 0xff] {
                let mut damaged = payload.clone();
                damaged[at] ^= flip;
                decodes_alike(&damaged);
            }
        }
    }
}
