//! A harness for the command families' unit tests: a keyspace, a context whose
//! clock the test moves, and helpers to run commands and inspect what they stored.

use crate::commands::resolve;
use crate::{Context, Entry, Keyspace, Value};
use bytes::Bytes;
use resp::Frame;

/// The harness's starting time (Unix ms).
pub const START_MS: u64 = 1_700_000_000_000;

pub struct Harness {
    pub keyspace: Keyspace,
    pub context: Context,
}

impl Harness {
    pub fn new() -> Harness {
        Harness {
            keyspace: Keyspace::new(16, 7),
            context: Context::new(START_MS, 42),
        }
    }

    /// Resolves and runs a command; resolution errors are the reply.
    pub fn run_arguments(&mut self, arguments: &[Bytes]) -> Frame {
        match resolve(arguments) {
            Ok(spec) => self.keyspace.execute(spec, &mut self.context, arguments),
            Err(error) => error,
        }
    }

    pub fn run_bytes(&mut self, words: &[&[u8]]) -> Frame {
        let arguments: Vec<Bytes> = words
            .iter()
            .map(|word| Bytes::copy_from_slice(word))
            .collect();
        self.run_arguments(&arguments)
    }

    pub fn run(&mut self, words: &[&str]) -> Frame {
        let words: Vec<&[u8]> = words.iter().map(|word| word.as_bytes()).collect();
        self.run_bytes(&words)
    }

    pub fn set(&mut self, key: &str, value: &str) {
        self.keyspace.set(
            &mut self.context,
            key.as_bytes(),
            Value::string(value),
            None,
        );
    }

    pub fn set_with_expiry(&mut self, key: &str, value: &str, expire_at_ms: u64) {
        self.keyspace.set(
            &mut self.context,
            key.as_bytes(),
            Value::string(value),
            Some(expire_at_ms),
        );
    }

    /// Stores any value, with an optional expiry time.
    pub fn set_value(&mut self, key: &str, value: Value, expire_at_ms: Option<u64>) {
        self.keyspace
            .set(&mut self.context, key.as_bytes(), value, expire_at_ms);
    }

    pub fn advance(&mut self, milliseconds: u64) {
        self.context.now_ms += milliseconds;
    }

    /// The live entry of `key` in the selected database, without touching it.
    pub fn entry(&self, key: &str) -> Option<&Entry> {
        self.keyspace
            .db_ref(self.context.db)
            .peek(key.as_bytes(), self.context.now_ms)
    }

    pub fn get(&self, key: &str) -> Option<Value> {
        self.entry(key).map(|entry| entry.value.clone())
    }

    pub fn encoding(&self, key: &str) -> Option<&'static str> {
        self.entry(key).map(|entry| entry.value.encoding_name())
    }

    pub fn expire_at(&self, key: &str) -> Option<u64> {
        self.entry(key).and_then(Entry::expire_at_ms)
    }

    /// The expiry time of `key` in database `db`.
    pub fn expire_at_in(&self, db: usize, key: &str) -> Option<u64> {
        self.keyspace
            .db_ref(db)
            .peek(key.as_bytes(), self.context.now_ms)
            .and_then(Entry::expire_at_ms)
    }
}
