//! The one binary encoding used for log records, snapshots metadata and Raft
//! messages on the wire: postcard over serde.

use serde::{de::DeserializeOwned, Serialize};

/// Encodes `value`; encoding our own types cannot fail except on allocation.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    postcard::to_stdvec(value).expect("serializing an in-memory value")
}

/// Decodes `bytes` as a `T`, with an I/O error for malformed input.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> std::io::Result<T> {
    postcard::from_bytes(bytes)
        .map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidData, error.to_string()))
}
