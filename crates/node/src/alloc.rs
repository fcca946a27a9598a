//! A counting wrapper around the allocator (mimalloc), so INFO memory can
//! report `used_memory` as Redis does: the bytes of the blocks currently
//! allocated, counted by their usable size (the allocator's size class, as
//! Redis counts jemalloc's), so it follows the real heap rather than the
//! sizes asked for.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

// The C library is built and linked by `libmimalloc-sys`; these entry points
// (mimalloc 3's "u" family, declared in its `mimalloc.h`) also hand back the
// usable size of the block they allocate, reallocate or free, so counting
// costs no second lookup of the block's page.
use libmimalloc_sys as _;

unsafe extern "C" {
    fn mi_umalloc(size: usize, usable: *mut usize) -> *mut c_void;
    fn mi_ucalloc(count: usize, size: usize, usable: *mut usize) -> *mut c_void;
    fn mi_umalloc_aligned(size: usize, alignment: usize, usable: *mut usize) -> *mut c_void;
    fn mi_uzalloc_aligned(size: usize, alignment: usize, usable: *mut usize) -> *mut c_void;
    fn mi_urealloc(
        pointer: *mut c_void,
        new_size: usize,
        usable_before: *mut usize,
        usable_after: *mut usize,
    ) -> *mut c_void;
    fn mi_ufree(pointer: *mut c_void, usable: *mut usize);
}

/// Every mimalloc block is aligned to a machine word at least. Asking the
/// aligned entry points for no more than that would be correct too, but their
/// fast path only serves sizes whose free list happens to be non-empty; past
/// it, a size that is not a power of two is over-allocated into the next size
/// class (mimalloc 3's `alloc-aligned.c`), which costs time and memory.
const WORD_ALIGN: usize = std::mem::size_of::<usize>();

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

// SAFETY: every method passes the caller's size and pointer to mimalloc, with
// the layout's alignment whenever it exceeds the word alignment every block
// has; the counters are only bookkeeping, fed with the usable sizes mimalloc
// reports for the blocks it hands out and takes back.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let mut usable = 0;
        // SAFETY: a non-zero size (`GlobalAlloc`'s contract) and a power-of-two
        // alignment (`Layout`'s).
        let pointer = unsafe {
            if layout.align() <= WORD_ALIGN {
                mi_umalloc(layout.size(), &mut usable)
            } else {
                mi_umalloc_aligned(layout.size(), layout.align(), &mut usable)
            }
        };
        if !pointer.is_null() {
            add(usable);
        }
        pointer.cast()
    }

    unsafe fn dealloc(&self, pointer: *mut u8, _layout: Layout) {
        let mut usable = 0;
        // SAFETY: `pointer` is a live block of this allocator (the caller's
        // contract); mimalloc frees aligned and plain blocks alike.
        unsafe { mi_ufree(pointer.cast(), &mut usable) };
        subtract(usable);
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let mut usable = 0;
        // SAFETY: as in `alloc`.
        let pointer = unsafe {
            if layout.align() <= WORD_ALIGN {
                mi_ucalloc(1, layout.size(), &mut usable)
            } else {
                mi_uzalloc_aligned(layout.size(), layout.align(), &mut usable)
            }
        };
        if !pointer.is_null() {
            add(usable);
        }
        pointer.cast()
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() > WORD_ALIGN {
            // Rare (no hot path asks for more than word alignment): a new
            // aligned block, the bytes copied, the old block freed.
            // SAFETY: `new_size` is non-zero and, with the layout's alignment,
            // a valid layout (the caller's contract).
            let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
            // SAFETY: as in `alloc`.
            let moved = unsafe { self.alloc(new_layout) };
            if !moved.is_null() {
                // SAFETY: both blocks are live and distinct, and each holds at
                // least the smaller of the two sizes.
                unsafe {
                    std::ptr::copy_nonoverlapping(pointer, moved, layout.size().min(new_size));
                    self.dealloc(pointer, layout);
                }
            }
            return moved;
        }
        let (mut before, mut after) = (0, 0);
        // SAFETY: `pointer` is a live block of this allocator with word
        // alignment at most, which every block keeps when it moves.
        let moved = unsafe { mi_urealloc(pointer.cast(), new_size, &mut before, &mut after) };
        if !moved.is_null() {
            add(after);
            subtract(before);
        }
        moved.cast()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of every alignment come back aligned, keep their bytes when they
    /// grow or shrink, and the counters return to where they were once all are
    /// freed (the test binary's own allocations do not go through this one).
    #[test]
    fn blocks_are_aligned_keep_their_bytes_and_are_counted_back_to_zero() {
        let before = allocated_bytes();
        let mut live = Vec::new();
        for align in [1, 2, 4, 8, 16, 32, 64, 4096, 1 << 16] {
            for size in [1, 3, 8, 24, 100, 1000, 1025, 5000, 70_000] {
                let layout = Layout::from_size_align(size, align).unwrap();
                for zeroed in [false, true] {
                    // SAFETY: a non-zero size; the block is used within its
                    // size and freed below with its current layout.
                    unsafe {
                        let block = if zeroed {
                            CountingAllocator.alloc_zeroed(layout)
                        } else {
                            CountingAllocator.alloc(layout)
                        };
                        assert!(!block.is_null());
                        assert_eq!(block as usize % align, 0, "{size} bytes at {align}");
                        if zeroed {
                            assert!(std::slice::from_raw_parts(block, size)
                                .iter()
                                .all(|&b| b == 0));
                        }
                        for at in 0..size {
                            *block.add(at) = (at % 251) as u8;
                        }
                        live.push((block, layout));
                    }
                }
            }
        }
        assert!(allocated_bytes() > before);
        for (block, layout) in &mut live {
            let written = layout.size();
            for new_size in [layout.size() * 3, (layout.size() / 2).max(layout.align())] {
                let kept = written.min(new_size);
                // SAFETY: a live block with its layout; the new size is
                // non-zero and a multiple of the alignment.
                unsafe {
                    let moved = CountingAllocator.realloc(*block, *layout, new_size);
                    assert!(!moved.is_null());
                    assert_eq!(moved as usize % layout.align(), 0);
                    let bytes = std::slice::from_raw_parts(moved, kept);
                    assert!(bytes
                        .iter()
                        .enumerate()
                        .all(|(at, &b)| b == (at % 251) as u8));
                    *block = moved;
                    *layout = Layout::from_size_align(new_size, layout.align()).unwrap();
                }
            }
        }
        for (block, layout) in live {
            // SAFETY: each block is live, with its current layout.
            unsafe { CountingAllocator.dealloc(block, layout) };
        }
        assert_eq!(allocated_bytes(), before);
    }
}
