//! The durable Raft log store (being written).
