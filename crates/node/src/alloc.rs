//! A counting wrapper around the allocator (mimalloc), so INFO memory can
//! report `used_memory` as Redis does: the bytes of the blocks currently
//! allocated, counted by their usable size (the allocator's size class, as
//! Redis counts jemalloc's), so it follows the real heap rather than the
//! sizes asked for.

use mimalloc::MiMalloc as System;
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

pub struct CountingAllocator;

/// One counter per cache line; threads pick one by the address of a thread-local,
/// so concurrent allocations rarely touch the same line. A block freed on another
/// thread than it was allocated on makes one shard go down and another up; only
/// the sum means anything.
#[repr(align(64))]
struct Shard(AtomicIsize);

const SHARD_COUNT: usize = 16;
static SHARDS: [Shard; SHARD_COUNT] = [const { Shard(AtomicIsize::new(0)) }; SHARD_COUNT];
static PEAK_BYTES: AtomicUsize = AtomicUsize::new(0);

fn shard() -> &'static AtomicIsize {
    thread_local! {
        static MARKER: u8 = const { 0 };
    }
    let address = MARKER.with(|marker| marker as *const u8 as usize);
    let mixed = (address >> 6) ^ (address >> 13) ^ (address >> 21);
    &SHARDS[mixed % SHARD_COUNT].0
}

fn add(bytes: usize) {
    shard().fetch_add(bytes as isize, Ordering::Relaxed);
}

fn subtract(bytes: usize) {
    shard().fetch_sub(bytes as isize, Ordering::Relaxed);
}

// SAFETY: every method forwards to `System` with the caller's layout and pointer
// unchanged; the counters are only bookkeeping (usable sizes are read of live
// blocks only: after an allocation, before a free).
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is; the caller upholds `alloc`'s contract.
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() {
            // SAFETY: a live block mimalloc just returned.
            add(unsafe { System.usable_size(pointer) });
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: `pointer` is a live block of this allocator (the caller's
        // contract), measured before it is freed.
        subtract(unsafe { System.usable_size(pointer) });
        // SAFETY: forwarded as is; the caller upholds `dealloc`'s contract.
        unsafe { System.dealloc(pointer, layout) };
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is; the caller upholds `alloc_zeroed`'s contract.
        let pointer = unsafe { System.alloc_zeroed(layout) };
        if !pointer.is_null() {
            // SAFETY: a live block mimalloc just returned.
            add(unsafe { System.usable_size(pointer) });
        }
        pointer
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `pointer` is a live block of this allocator.
        let before = unsafe { System.usable_size(pointer) };
        // SAFETY: forwarded as is; the caller upholds `realloc`'s contract.
        let moved = unsafe { System.realloc(pointer, layout, new_size) };
        if !moved.is_null() {
            // SAFETY: a live block mimalloc just returned.
            add(unsafe { System.usable_size(moved) });
            subtract(before);
        }
        moved
    }
}

/// Bytes held by copies of a keyspace being saved (a standalone node's
/// BGSAVE): Redis's fork shares those pages, so, as there, they do not count
/// against `maxmemory`.
static SAVE_COPY_BYTES: AtomicUsize = AtomicUsize::new(0);

/// Counts `bytes` of a save's copy (until [`release_save_copy`]).
pub fn hold_save_copy(bytes: usize) {
    SAVE_COPY_BYTES.fetch_add(bytes, Ordering::Relaxed);
}

pub fn release_save_copy(bytes: usize) {
    SAVE_COPY_BYTES.fetch_sub(bytes, Ordering::Relaxed);
}

/// Allocated bytes that count against `maxmemory`: all but save copies.
pub fn counted_bytes() -> usize {
    allocated_bytes().saturating_sub(SAVE_COPY_BYTES.load(Ordering::Relaxed))
}

/// Bytes currently allocated.
pub fn allocated_bytes() -> usize {
    let total: isize = SHARDS
        .iter()
        .map(|shard| shard.0.load(Ordering::Relaxed))
        .sum();
    let now = total.max(0) as usize;
    PEAK_BYTES.fetch_max(now, Ordering::Relaxed);
    now
}

/// Highest `allocated_bytes` observed.
pub fn peak_bytes() -> usize {
    PEAK_BYTES.load(Ordering::Relaxed).max(allocated_bytes())
}

/// Resident set size from /proc (0 where unavailable).
pub fn resident_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|text| text.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map(|pages| pages * 4096)
        .unwrap_or(0)
}
