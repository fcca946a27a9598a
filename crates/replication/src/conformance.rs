//! openraft's own storage conformance suite, run against the durable log store
//! and the keyspace state machine together.
//!
//! Every case gets a fresh directory holding a new [`LogStore`] (under `log/`)
//! and a new [`StateMachine`] (under `snapshot/`); the directory is removed when
//! the case's guard drops. The whole suite runs, no case skipped, once per log
//! configuration worth telling apart: the writer on its own thread with the
//! production segment size, and the writer as a task (as under simulation) with
//! segments so small that every entry starts a new one, so that truncation and
//! purging cross segment boundaries.

use keyspace::Keyspace;
use openraft::testing::log::{StoreBuilder, Suite};
use openraft::type_config::TypeConfigExt;
use openraft::StorageError;

use crate::log_store::{LogStore, LogStoreOptions, WriterMode};
use crate::scratch::Scratch;
use crate::state_machine::StateMachine;
use crate::types::TypeConfig;

struct Builder {
    label: &'static str,
    log_options: LogStoreOptions,
}

impl StoreBuilder<TypeConfig, LogStore, StateMachine, Scratch> for Builder {
    async fn build(&self) -> Result<(Scratch, LogStore, StateMachine), StorageError<TypeConfig>> {
        let dir = Scratch::new(self.label);
        let log = LogStore::open(&dir.0.join("log"), self.log_options.clone())
            .await
            .map_err(|error| StorageError::write(TypeConfig::err_from_error(&error)))?;
        let template = Keyspace::new(16, 0x5eed);
        let state_machine = StateMachine::open(
            &dir.0.join("snapshot"),
            self.log_options.fs.clone(),
            template,
            1,
        )
        .map_err(|error| StorageError::write(TypeConfig::err_from_error(&error)))?;
        Ok((dir, log, state_machine))
    }
}

async fn run_suite(builder: Builder) {
    let label = builder.label;
    if let Err(error) = Suite::test_all(builder).await {
        panic!("openraft storage suite ({label}): {error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_passes_the_openraft_suite() {
    run_suite(Builder {
        label: "conformance-thread",
        log_options: LogStoreOptions::default(),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_with_a_task_writer_and_one_entry_segments_passes_the_openraft_suite() {
    run_suite(Builder {
        label: "conformance-task",
        log_options: LogStoreOptions {
            segment_bytes: 1,
            writer: WriterMode::Task,
            ..LogStoreOptions::default()
        },
    })
    .await;
}
