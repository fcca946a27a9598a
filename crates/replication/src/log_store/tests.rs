//! Log store: restart, crash recovery (torn and corrupt records), segments,
//! purge, group commit.

use super::*;
use crate::scratch::Scratch;
use crate::types::{Op, Request};
use openraft::entry::RaftEntry;
use openraft::testing::log_id;
use openraft::type_config::TypeConfigExt;

fn entry(term: u64, index: u64) -> Entry {
    let request = Request::new(
        index * 10,
        index,
        Op::Exec {
            db: 0,
            resp3: false,
            watched: Vec::new(),
            commands: vec![vec![
                bytes::Bytes::from_static(b"SET"),
                bytes::Bytes::from(format!("key:{index}")),
                bytes::Bytes::from(vec![b'v'; 40]),
            ]],
        },
    );
    Entry::new_normal(
        log_id::<TypeConfig>(term, 1, index),
        std::sync::Arc::new(request),
    )
}

async fn append(store: &mut LogStore, entries: Vec<Entry>) {
    let (sender, receiver) = TypeConfig::oneshot();
    store
        .append(entries, IOFlushed::signal(sender))
        .await
        .unwrap();
    receiver.await.unwrap().unwrap();
}

async fn indexes(store: &mut LogStore) -> Vec<u64> {
    store
        .try_get_log_entries(..)
        .await
        .unwrap()
        .iter()
        .map(|entry| entry.log_id.index)
        .collect()
}

fn options(segment_bytes: u64) -> LogStoreOptions {
    LogStoreOptions {
        segment_bytes,
        ..LogStoreOptions::default()
    }
}

/// Segments exactly as long as their records, for tests that measure them.
fn plain_options(segment_bytes: u64) -> LogStoreOptions {
    LogStoreOptions {
        preallocate: 0,
        ..options(segment_bytes)
    }
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
        .collect();
    paths.sort();
    paths
}

#[tokio::test]
async fn state_survives_a_restart() {
    let scratch = Scratch::new("log-restart");
    let vote = Vote::new_committed(3, 2);
    {
        let mut store = LogStore::open(&scratch.0, options(1 << 20)).await.unwrap();
        append(&mut store, (1..=30).map(|index| entry(1, index)).collect()).await;
        store
            .truncate_after(Some(log_id::<TypeConfig>(1, 1, 25)))
            .await
            .unwrap();
        append(&mut store, (26..=28).map(|index| entry(2, index)).collect()).await;
        store.purge(log_id::<TypeConfig>(1, 1, 10)).await.unwrap();
        store.save_vote(&vote).await.unwrap();
        store
            .save_committed(Some(log_id::<TypeConfig>(2, 1, 27)))
            .await
            .unwrap();
    }
    let mut store = LogStore::open(&scratch.0, options(1 << 20)).await.unwrap();
    assert_eq!(indexes(&mut store).await, (11..=28).collect::<Vec<_>>());
    let state = store.get_log_state().await.unwrap();
    assert_eq!(
        state.last_purged_log_id,
        Some(log_id::<TypeConfig>(1, 1, 10))
    );
    assert_eq!(state.last_log_id, Some(log_id::<TypeConfig>(2, 1, 28)));
    assert_eq!(store.read_vote().await.unwrap(), Some(vote));
    let entries = store.try_get_log_entries(26..27).await.unwrap();
    assert_eq!(entries[0], entry(2, 26));
    // The committed id is persisted lazily (advisory); the vote is not.
    let committed = store.read_committed().await.unwrap();
    assert!(committed.is_none() || committed == Some(log_id::<TypeConfig>(2, 1, 27)));
}

#[tokio::test]
async fn a_torn_tail_is_cut_at_the_last_whole_record() {
    let scratch = Scratch::new("log-torn");
    {
        let mut store = LogStore::open(&scratch.0, plain_options(1 << 20))
            .await
            .unwrap();
        append(&mut store, (1..=20).map(|index| entry(1, index)).collect()).await;
    }
    let segment = segments(&scratch.0).pop().unwrap();
    let length = std::fs::metadata(&segment).unwrap().len();
    // Cut the file in the middle of the last record.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap();
    file.set_len(length - 7).unwrap();
    drop(file);

    let mut store = LogStore::open(&scratch.0, plain_options(1 << 20))
        .await
        .unwrap();
    assert_eq!(indexes(&mut store).await, (1..=19).collect::<Vec<_>>());
    // The store appends again right after the last good record.
    append(&mut store, vec![entry(2, 20), entry(2, 21)]).await;
    drop(store);
    let mut store = LogStore::open(&scratch.0, plain_options(1 << 20))
        .await
        .unwrap();
    assert_eq!(indexes(&mut store).await, (1..=21).collect::<Vec<_>>());
    let last = store.try_get_log_entries(21..22).await.unwrap();
    assert_eq!(last[0], entry(2, 21));
}

#[tokio::test]
async fn a_flipped_byte_ends_the_log_before_that_record() {
    let scratch = Scratch::new("log-flip");
    {
        let mut store = LogStore::open(&scratch.0, plain_options(2000))
            .await
            .unwrap();
        append(&mut store, (1..=60).map(|index| entry(1, index)).collect()).await;
    }
    let files = segments(&scratch.0);
    assert!(files.len() >= 3, "small segments roll: {files:?}");
    // Damage a payload byte of the second segment's third record.
    let target = &files[1];
    let mut data = std::fs::read(target).unwrap();
    let first_index: u64 = target
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let record = data.len() / files_records(&data);
    data[record * 2 + 20] ^= 0x40;
    std::fs::write(target, &data).unwrap();

    let mut store = LogStore::open(&scratch.0, plain_options(2000))
        .await
        .unwrap();
    let expected: Vec<u64> = (1..first_index + 2).collect();
    assert_eq!(indexes(&mut store).await, expected);
    // Later segments are gone, so new appends continue cleanly.
    assert_eq!(segments(&scratch.0).len(), 2);
    append(&mut store, vec![entry(3, first_index + 2)]).await;
    drop(store);
    let mut store = LogStore::open(&scratch.0, plain_options(2000))
        .await
        .unwrap();
    assert_eq!(indexes(&mut store).await.last(), Some(&(first_index + 2)));
}

/// The end of the records of a segment written ahead with zeros: the offset
/// of the first header announcing an empty record.
fn records_end(data: &[u8]) -> usize {
    let mut offset = 0;
    while offset + RECORD_HEADER_BYTES <= data.len() {
        let length = u32::from_le_bytes(data[offset..offset + 4].try_into().unwrap()) as usize;
        if length == 0 {
            break;
        }
        offset += RECORD_HEADER_BYTES + length;
    }
    offset
}

#[tokio::test]
async fn appends_continue_after_the_records_not_after_the_zeros_written_ahead() {
    let scratch = Scratch::new("log-ahead");
    let options = LogStoreOptions {
        preallocate: 64 << 10,
        ..options(1 << 20)
    };
    {
        let mut store = LogStore::open(&scratch.0, options.clone()).await.unwrap();
        append(&mut store, (1..=20).map(|index| entry(1, index)).collect()).await;
    }
    let segment = segments(&scratch.0).pop().unwrap();
    let data = std::fs::read(&segment).unwrap();
    assert_eq!(data.len(), 64 << 10, "the segment is written ahead");
    let end = records_end(&data);
    assert!(end > 0 && data[end..].iter().all(|&byte| byte == 0));

    // A restart reads the zeros as the segment's end and appends after the
    // records: a second restart finds every entry.
    let mut store = LogStore::open(&scratch.0, options.clone()).await.unwrap();
    assert_eq!(indexes(&mut store).await, (1..=20).collect::<Vec<_>>());
    append(&mut store, (21..=25).map(|index| entry(1, index)).collect()).await;
    drop(store);
    let mut store = LogStore::open(&scratch.0, options.clone()).await.unwrap();
    assert_eq!(indexes(&mut store).await, (1..=25).collect::<Vec<_>>());
    drop(store);

    // Records past the first extension: the file grows by another step.
    {
        let mut store = LogStore::open(&scratch.0, options.clone()).await.unwrap();
        append(
            &mut store,
            (26..=1200).map(|index| entry(1, index)).collect(),
        )
        .await;
    }
    let data = std::fs::read(&segment).unwrap();
    assert!(data.len() > 64 << 10 && data.len() % (64 << 10) != 1);
    let mut store = LogStore::open(&scratch.0, options.clone()).await.unwrap();
    assert_eq!(indexes(&mut store).await, (1..=1200).collect::<Vec<_>>());
    drop(store);

    // A torn last record (its end never reached the disk) before the zeros
    // is cut like any torn record, and appends continue in its place.
    let mut data = std::fs::read(&segment).unwrap();
    let end = records_end(&data);
    data[end - 7..end].fill(0);
    std::fs::write(&segment, &data).unwrap();
    let mut store = LogStore::open(&scratch.0, options.clone()).await.unwrap();
    assert_eq!(indexes(&mut store).await, (1..=1199).collect::<Vec<_>>());
    append(&mut store, vec![entry(2, 1200), entry(2, 1201)]).await;
    drop(store);
    let mut store = LogStore::open(&scratch.0, options).await.unwrap();
    assert_eq!(indexes(&mut store).await, (1..=1201).collect::<Vec<_>>());
    let last = store.try_get_log_entries(1200..1202).await.unwrap();
    assert_eq!(last, vec![entry(2, 1200), entry(2, 1201)]);
}

/// A file system may leave zeros where the last writes went (ext4 after a
/// power loss can keep a file's new size without its data). Read as the
/// end of the records, they must not stay in front of later appends, even
/// where the store does not write ahead itself.
#[tokio::test]
async fn appends_after_a_zero_tail_land_after_the_records() {
    for preallocate in [0, 4096] {
        let scratch = Scratch::new("log-zero-tail");
        let options = LogStoreOptions {
            preallocate,
            ..options(1 << 20)
        };
        {
            let mut store = LogStore::open(&scratch.0, options.clone()).await.unwrap();
            append(&mut store, (1..=10).map(|index| entry(1, index)).collect()).await;
        }
        let segment = segments(&scratch.0).pop().unwrap();
        let mut data = std::fs::read(&segment).unwrap();
        data.extend_from_slice(&[0; 10_000]);
        std::fs::write(&segment, &data).unwrap();

        let mut store = LogStore::open(&scratch.0, options.clone()).await.unwrap();
        assert_eq!(indexes(&mut store).await, (1..=10).collect::<Vec<_>>());
        append(&mut store, (11..=12).map(|index| entry(1, index)).collect()).await;
        drop(store);
        let mut store = LogStore::open(&scratch.0, options).await.unwrap();
        assert_eq!(
            indexes(&mut store).await,
            (1..=12).collect::<Vec<_>>(),
            "preallocate {preallocate}"
        );
    }
}

#[tokio::test]
async fn segments_written_ahead_roll_and_recover_whole() {
    let scratch = Scratch::new("log-ahead-roll");
    {
        let mut store = LogStore::open(&scratch.0, options(2000)).await.unwrap();
        for index in 1..=60 {
            append(&mut store, vec![entry(1, index)]).await;
        }
    }
    let files = segments(&scratch.0);
    assert!(files.len() >= 3, "small segments roll: {files:?}");
    // A full segment is cut to its records when the next one starts; only
    // the last one ends in zeros written ahead.
    for file in &files[..files.len() - 1] {
        let data = std::fs::read(file).unwrap();
        assert_eq!(records_end(&data), data.len(), "{}", file.display());
    }
    let last = std::fs::read(files.last().unwrap()).unwrap();
    assert!(records_end(&last) < last.len());
    let mut store = LogStore::open(&scratch.0, options(2000)).await.unwrap();
    assert_eq!(indexes(&mut store).await, (1..=60).collect::<Vec<_>>());
    assert_eq!(segments(&scratch.0), files);
    append(&mut store, vec![entry(1, 61)]).await;
    drop(store);
    let mut store = LogStore::open(&scratch.0, options(2000)).await.unwrap();
    assert_eq!(indexes(&mut store).await, (1..=61).collect::<Vec<_>>());
}

/// Records in a segment whose records all have the same size.
fn files_records(data: &[u8]) -> usize {
    let length = u32::from_le_bytes(data[..4].try_into().unwrap()) as usize;
    data.len() / (length + RECORD_HEADER_BYTES)
}

#[tokio::test]
async fn purge_removes_whole_segments_only() {
    let scratch = Scratch::new("log-purge");
    let mut store = LogStore::open(&scratch.0, options(1000)).await.unwrap();
    append(&mut store, (1..=50).map(|index| entry(1, index)).collect()).await;
    let before = segments(&scratch.0).len();
    assert!(before > 3);
    store.purge(log_id::<TypeConfig>(1, 1, 30)).await.unwrap();
    let after = segments(&scratch.0);
    assert!(after.len() < before);
    // The oldest remaining segment still holds entry 31.
    let oldest: u64 = after[0]
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        oldest <= 31,
        "segment {oldest} left entry 31 without a file"
    );
    assert_eq!(indexes(&mut store).await, (31..=50).collect::<Vec<_>>());
    drop(store);
    let mut store = LogStore::open(&scratch.0, options(1000)).await.unwrap();
    assert_eq!(indexes(&mut store).await, (31..=50).collect::<Vec<_>>());
    // Truncating everything after a purge leaves an empty log that continues.
    store
        .truncate_after(Some(log_id::<TypeConfig>(1, 1, 30)))
        .await
        .unwrap();
    assert!(indexes(&mut store).await.is_empty());
    append(&mut store, vec![entry(4, 31)]).await;
    drop(store);
    let mut store = LogStore::open(&scratch.0, options(1000)).await.unwrap();
    assert_eq!(indexes(&mut store).await, vec![31]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_share_fsyncs() {
    let scratch = Scratch::new("log-group");
    let store = LogStore::open(&scratch.0, options(64 << 20)).await.unwrap();
    // Submit many appends without waiting for each flush, then wait for all.
    let mut waits = Vec::new();
    let mut writer = store.clone();
    for index in 1..=400 {
        let (sender, receiver) = TypeConfig::oneshot();
        writer
            .append(vec![entry(1, index)], IOFlushed::signal(sender))
            .await
            .unwrap();
        waits.push(receiver);
    }
    for wait in waits {
        wait.await.unwrap().unwrap();
    }
    let fsyncs = store.fsync_count();
    assert!(fsyncs < 400, "{fsyncs} fsyncs for 400 appends");
    let mut reader = store.clone();
    assert_eq!(indexes(&mut reader).await.len(), 400);
}

#[tokio::test]
async fn appends_must_be_contiguous() {
    let scratch = Scratch::new("log-gap");
    let mut store = LogStore::open(&scratch.0, options(1 << 20)).await.unwrap();
    append(&mut store, vec![entry(1, 1), entry(1, 2)]).await;
    let (sender, _receiver) = TypeConfig::oneshot();
    let result = store
        .append(vec![entry(1, 5)], IOFlushed::signal(sender))
        .await;
    assert!(result.is_err());
}

#[tokio::test]
async fn a_purge_past_the_last_entry_survives_a_restart() {
    let scratch = Scratch::new("log-purge-past-end");
    {
        let mut store = LogStore::open(&scratch.0, options(1 << 20)).await.unwrap();
        append(&mut store, (1..=10).map(|index| entry(1, index)).collect()).await;
        // As when installing a snapshot that is ahead of the whole log.
        store.purge(log_id::<TypeConfig>(2, 1, 20)).await.unwrap();
        append(&mut store, (21..=23).map(|index| entry(2, index)).collect()).await;
    }
    let mut store = LogStore::open(&scratch.0, options(1 << 20)).await.unwrap();
    assert_eq!(indexes(&mut store).await, vec![21, 22, 23]);
    let state = store.get_log_state().await.unwrap();
    assert_eq!(
        state.last_purged_log_id,
        Some(log_id::<TypeConfig>(2, 1, 20))
    );
    assert_eq!(state.last_log_id, Some(log_id::<TypeConfig>(2, 1, 23)));
}

#[tokio::test]
async fn a_purge_interrupted_after_its_metadata_is_finished_on_open() {
    let scratch = Scratch::new("log-purge-interrupted");
    {
        let mut store = LogStore::open(&scratch.0, options(1 << 20)).await.unwrap();
        append(&mut store, (1..=10).map(|index| entry(1, index)).collect()).await;
    }
    // The metadata of a purge past the last entry reached the disk; removing
    // the segment did not.
    let meta = Meta {
        last_purged: Some(log_id::<TypeConfig>(2, 1, 20)),
        ..Meta::default()
    };
    StdFs
        .write_atomic(&scratch.0.join(META_FILE), &encode_meta(&meta))
        .unwrap();
    {
        let mut store = LogStore::open(&scratch.0, options(1 << 20)).await.unwrap();
        assert!(indexes(&mut store).await.is_empty());
        append(&mut store, (21..=22).map(|index| entry(2, index)).collect()).await;
    }
    let mut store = LogStore::open(&scratch.0, options(1 << 20)).await.unwrap();
    assert_eq!(indexes(&mut store).await, vec![21, 22]);
}

/// Queues an append without waiting for its flush; answers the wait.
async fn queue(store: &mut LogStore, entries: Vec<Entry>) -> impl std::future::Future<Output = ()> {
    let (sender, receiver) = TypeConfig::oneshot();
    store
        .append(entries, IOFlushed::signal(sender))
        .await
        .unwrap();
    async move { receiver.await.unwrap().unwrap() }
}

/// The writer hands a round's records to the segment in one write: appends
/// that roll segments, a truncation and the appends after it, all queued
/// before any is flushed, must land on disk exactly as a one-by-one writer
/// would put them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_of_queued_writes_recovers_in_order() {
    let scratch = Scratch::new("log-round");
    let mut waits = Vec::new();
    {
        let mut store = LogStore::open(&scratch.0, options(300)).await.unwrap();
        for index in 1..=60 {
            waits.push(queue(&mut store, vec![entry(1, index)]).await);
        }
        store
            .truncate_after(Some(log_id::<TypeConfig>(1, 1, 40)))
            .await
            .unwrap();
        for index in 41..=50 {
            waits.push(queue(&mut store, vec![entry(2, index)]).await);
        }
        for wait in waits {
            wait.await;
        }
        assert!(segments(&scratch.0).len() > 5, "the records span segments");
    }
    let mut store = LogStore::open(&scratch.0, options(300)).await.unwrap();
    let recovered: Vec<(u64, u64)> = store
        .try_get_log_entries(..)
        .await
        .unwrap()
        .iter()
        .map(|entry| (entry.log_id.leader_id.term, entry.log_id.index))
        .collect();
    let expected: Vec<(u64, u64)> = (1..=40)
        .map(|index| (1, index))
        .chain((41..=50).map(|index| (2, index)))
        .collect();
    assert_eq!(recovered, expected);
}

/// An entry whose value is `size` bytes, so entries weigh differently.
fn sized_entry(term: u64, index: u64, size: usize) -> Entry {
    let mut entry = entry(term, index);
    if let openraft::EntryPayload::Normal(request) = &mut entry.payload {
        let mut request = (**request).clone();
        if let Op::Exec { commands, .. } = &mut request.op {
            commands[0][2] = bytes::Bytes::from(vec![b'v'; size]);
        }
        entry.payload = openraft::EntryPayload::Normal(std::sync::Arc::new(request));
    }
    entry
}

/// `bytes_between` and `purge_point` as the definitions say, by walking the
/// held entries.
async fn walked(store: &mut LogStore, after: u64, through: u64, keep: u64) -> (u64, Option<u64>) {
    let held = store.try_get_log_entries(..).await.unwrap();
    let between = held
        .iter()
        .filter(|entry| entry.log_id.index > after && entry.log_id.index <= through)
        .map(entry_bytes)
        .sum();
    let mut kept = 0;
    let mut point = None;
    for entry in held
        .iter()
        .rev()
        .filter(|entry| entry.log_id.index <= through)
    {
        kept += entry_bytes(entry);
        if kept > keep {
            point = Some(entry.log_id.index);
            break;
        }
    }
    (between, point)
}

/// The running totals answer exactly as a walk over the held entries, through
/// appends, truncations, purges and a reopen.
#[tokio::test]
async fn held_bytes_are_answered_from_running_totals() {
    let scratch = Scratch::new("log-totals");
    let mut store = LogStore::open(&scratch.0, options(1 << 20)).await.unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |bound: u64| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % bound.max(1)
    };
    let mut last = 0u64;
    let mut purged = 0u64;
    let mut term = 1;
    for round in 0..300 {
        match next(10) {
            0 if last > purged + 1 => {
                last = purged + 1 + next(last - purged);
                store
                    .truncate_after(Some(log_id::<TypeConfig>(term, 1, last)))
                    .await
                    .unwrap();
                term += 1;
            }
            1 if last > purged => {
                purged += 1 + next(last - purged);
                store
                    .purge(log_id::<TypeConfig>(term, 1, purged))
                    .await
                    .unwrap();
            }
            2 if round % 50 == 2 => {
                drop(store);
                store = LogStore::open(&scratch.0, options(1 << 20)).await.unwrap();
            }
            _ => {
                let count = 1 + next(5);
                let entries = (last + 1..=last + count)
                    .map(|index| sized_entry(term, index, next(300) as usize))
                    .collect();
                append(&mut store, entries).await;
                last += count;
            }
        }
        let all = walked(&mut store, 0, u64::MAX, u64::MAX).await.0;
        assert_eq!(store.memory_bytes(), all, "round {round}");
        for _ in 0..4 {
            let after = next(last + 3);
            let through = next(last + 3);
            let keep = next(all + 100);
            let (between, point) = walked(&mut store, after, through, keep).await;
            assert_eq!(
                store.bytes_between(after, through),
                between,
                "round {round}"
            );
            assert_eq!(store.purge_point(through, keep), point, "round {round}");
        }
    }
}
