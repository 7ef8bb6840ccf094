//! A global-allocator guard against hostile array counts.
//!
//! `kafka-protocol` decodes an array by reading its count off the wire and calling
//! `Vec::with_capacity(count)` before it reads a single element. A request of a few bytes that
//! claims two billion elements therefore asks the allocator for hundreds of gigabytes; the
//! system allocator refuses, and Rust aborts the whole process on allocation failure. One
//! hostile client could kill the broker for everyone.
//!
//! [`GuardedAlloc`] serves allocations of [`HUGE_ALLOC_BYTES`] or more from an anonymous
//! `mmap` with `MAP_NORESERVE`: the kernel hands out address space without committing memory,
//! so the reservation succeeds, the decoder fails at the first missing element, and the vector
//! is freed untouched. Nothing in Sluice legitimately allocates that much in one piece (requests
//! are capped far below it), so the guard changes no other behaviour. Smaller allocations go
//! straight to the system allocator. The binary installs it with `#[global_allocator]`.
//!
//! The module also owns the binary's one tuning of the system allocator,
//! [`tune_system_allocator`] (fixed glibc thresholds, so fetch buffers are reused).
//!
//! Limit: under `vm.overcommit_memory = 2` (strict accounting) the kernel ignores
//! `MAP_NORESERVE`, and the guard cannot help; the request size limit still applies.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

/// Allocations at least this large are reserved lazily instead of being committed.
pub const HUGE_ALLOC_BYTES: usize = 1 << 30;

/// The mmap alignment we can promise (the page size on every platform we run on).
const PAGE_BYTES: usize = 4096;

/// Lets a test turn the guard off to show the abort it prevents.
static GUARD_DISABLED: AtomicBool = AtomicBool::new(false);

/// Disables the guard for the rest of the process (tests only).
pub fn disable_for_test() {
    GUARD_DISABLED.store(true, Ordering::SeqCst);
}

/// The system allocator, with lazily-reserved huge allocations.
#[derive(Debug, Default)]
pub struct GuardedAlloc;

fn is_huge(layout: Layout) -> bool {
    layout.size() >= HUGE_ALLOC_BYTES
        && layout.align() <= PAGE_BYTES
        && !GUARD_DISABLED.load(Ordering::Relaxed)
}

unsafe fn map_huge(size: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping with no address hint; the kernel picks the place.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        ptr.cast()
    }
}

/// Below this size, allocations come from the system allocator's heap rather than a fresh
/// mapping of their own (glibc `M_MMAP_THRESHOLD`). glibc's own default is dynamic: 128 KiB
/// at start, raised to the size of the largest mapped block freed so far (at most 32 MiB).
pub const SYSTEM_MMAP_THRESHOLD_BYTES: usize = 16 << 20;

/// Free memory at the top of a heap is returned to the kernel only above this size (glibc
/// `M_TRIM_THRESHOLD`; its dynamic default is twice the mmap threshold).
pub const SYSTEM_TRIM_THRESHOLD_BYTES: usize = 32 << 20;

/// Pins the system allocator's mmap and trim thresholds (glibc only; elsewhere a no-op).
///
/// Why: a fetch reads each partition's records into a fresh buffer (1 MiB for a default
/// consumer) and frees all of them once the response is written. Under glibc's dynamic
/// thresholds, which depend on the largest *mapped* block freed so far, those frees return
/// the heap's top to the kernel after every fetch, so the next fetch's buffers are fresh
/// pages: one page fault and one kernel page clear per 4 KiB read (measured: about 250k faults
/// and 1.6x the broker CPU per MB for a 1 GiB, 12-partition backlog). Fixed thresholds keep such
/// buffers in the heap for reuse. Cost: up to [`SYSTEM_TRIM_THRESHOLD_BYTES`] of free memory
/// may stay resident per malloc arena after a burst, instead of being returned at once.
/// Call once at startup, before other threads exist.
pub fn tune_system_allocator() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only sets glibc's malloc parameters; it takes its own locks.
        let mmap = unsafe {
            libc::mallopt(
                libc::M_MMAP_THRESHOLD,
                SYSTEM_MMAP_THRESHOLD_BYTES as libc::c_int,
            )
        };
        // SAFETY: as above.
        let trim = unsafe {
            libc::mallopt(
                libc::M_TRIM_THRESHOLD,
                SYSTEM_TRIM_THRESHOLD_BYTES as libc::c_int,
            )
        };
        mmap == 1 && trim == 1
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

// SAFETY: every pointer is either from `System` (and returned to it) or from `map_huge` (and
// unmapped with the same size); the two are told apart by the layout, which Rust guarantees is
// the same on dealloc as on alloc. The guard flag only ever goes from off to on in tests before
// any huge allocation exists.
unsafe impl GlobalAlloc for GuardedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_huge(layout) {
            unsafe { map_huge(layout.size()) }
        } else {
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_huge(layout) {
            // Anonymous mappings are zero-filled.
            unsafe { map_huge(layout.size()) }
        } else {
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_huge(layout) {
            unsafe { libc::munmap(ptr.cast(), layout.size()) };
        } else {
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        if !is_huge(layout) && !is_huge(new_layout) {
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        let new_ptr = unsafe { self.alloc(new_layout) };
        if !new_ptr.is_null() {
            let n = layout.size().min(new_size);
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new_ptr, n);
                self.dealloc(ptr, layout);
            }
        }
        new_ptr
    }
}
