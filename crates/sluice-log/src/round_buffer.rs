//! The committer's aligned round buffer, for the journal written with `O_DIRECT`
//! (`sluice.journal.direct.io`).
//!
//! A direct write must start and end on a page and come from page-aligned memory
//! ([`crate::fs::DIRECT_IO_ALIGN`]). Commit rounds already end on a page (the padding
//! entry), and every round but the first of a file starts on one; the first starts right
//! after the 16-byte file header, so its buffer begins with the header again and the write
//! covers the file from byte 0 (rewriting the header with the same bytes). The round's
//! pieces (entry headers, stamps, request bytes) are copied into the buffer in order, and
//! the buffer is written with one `pwrite`.
//!
//! Guarantees: the buffer is allocated once and grows only when a round is larger than
//! any before (no allocation per round in steady state); a buffer larger than
//! [`ROUND_BUFFER_KEPT_BYTES_MAX`] is released after its round; every write handed to the
//! file is aligned (asserted here, checked again by the kernel or the simulated file
//! system).

use std::io::{self, IoSlice};

use crate::config::ROUND_BUFFER_KEPT_BYTES_MAX;
use crate::fs::{self, DirectFile, DIRECT_IO_ALIGN};

/// One reusable, page-aligned staging buffer for a round.
#[derive(Debug, Default)]
pub(crate) struct RoundBuffer {
    /// Over-allocated by one page; the aligned window starts at `align`.
    storage: Vec<u8>,
    align: usize,
}

impl RoundBuffer {
    /// Capacity of the aligned window.
    fn capacity(&self) -> usize {
        self.storage.len().saturating_sub(DIRECT_IO_ALIGN)
    }

    /// Makes room for `len` aligned bytes (grows to a power of two, so a slowly growing
    /// round size reallocates a handful of times at most).
    fn reserve(&mut self, len: usize) {
        if self.capacity() >= len {
            return;
        }
        let size = len.next_power_of_two() + DIRECT_IO_ALIGN;
        self.storage = vec![0u8; size];
        self.align = self.storage.as_ptr().align_offset(DIRECT_IO_ALIGN);
        debug_assert!(self.align < DIRECT_IO_ALIGN && self.capacity() >= len);
    }

    /// Lays out a round that goes at `offset` of the file and writes it with one direct
    /// write. `prefix` is what the file holds before `offset` on the round's first page
    /// (the file header for the first round of a file, else empty: `offset` is on a page).
    /// The round's length must bring it to a page boundary.
    pub(crate) fn write(
        &mut self,
        file: &dyn DirectFile,
        prefix: &[u8],
        round: &[IoSlice<'_>],
        round_len: u64,
        offset: u64,
    ) -> io::Result<()> {
        let page = DIRECT_IO_ALIGN as u64;
        let start = offset - offset % page;
        assert_eq!(
            (offset - start) as usize,
            prefix.len(),
            "a round starts on a page or right after the file header"
        );
        let total = prefix.len() + usize::try_from(round_len).expect("round fits memory");
        assert_eq!(total % DIRECT_IO_ALIGN, 0, "rounds end on a page");
        self.reserve(total);
        let out = &mut self.storage[self.align..self.align + total];
        out[..prefix.len()].copy_from_slice(prefix);
        let mut at = prefix.len();
        for slice in round {
            out[at..at + slice.len()].copy_from_slice(slice);
            at += slice.len();
        }
        debug_assert_eq!(at, total);
        let written =
            fs::write_all_direct_at(file, &self.storage[self.align..self.align + total], start);
        if self.capacity() > ROUND_BUFFER_KEPT_BYTES_MAX {
            *self = Self::default();
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::AlignedWrites;
    use crate::fs::{Fs, OpenMode};
    use crate::sim_fs::SimFs;
    use std::path::Path;

    #[test]
    fn rounds_are_written_aligned_with_the_prefix() {
        let fs = SimFs::new();
        fs.create_dir_all(Path::new("/d")).unwrap();
        let path = Path::new("/d/f");
        let file = fs.open(path, OpenMode::CreateTruncate).unwrap();
        let direct = AlignedWrites(fs.open(path, OpenMode::Existing).unwrap());
        let mut buffer = RoundBuffer::default();
        let body = vec![7u8; 4096 - 16];
        buffer
            .write(
                &direct,
                &[1u8; 16],
                &[IoSlice::new(&body)],
                body.len() as u64,
                16,
            )
            .unwrap();
        let second = vec![9u8; 8192];
        buffer
            .write(
                &direct,
                &[],
                &[IoSlice::new(&second[..100]), IoSlice::new(&second[100..])],
                8192,
                4096,
            )
            .unwrap();
        let data = fs::read_whole(file.as_ref()).unwrap();
        assert_eq!(data.len(), 3 * 4096);
        assert_eq!(&data[..16], &[1u8; 16]);
        assert!(data[16..4096].iter().all(|&b| b == 7));
        assert!(data[4096..].iter().all(|&b| b == 9));
    }

    #[test]
    fn a_buffer_beyond_the_kept_maximum_is_released() {
        let fs = SimFs::new();
        fs.create_dir_all(Path::new("/d")).unwrap();
        let path = Path::new("/d/f");
        drop(fs.open(path, OpenMode::CreateTruncate).unwrap());
        let direct = AlignedWrites(fs.open(path, OpenMode::Existing).unwrap());
        let mut buffer = RoundBuffer::default();
        let small = vec![1u8; 8192];
        buffer
            .write(&direct, &[], &[IoSlice::new(&small)], 8192, 4096)
            .unwrap();
        let kept = buffer.capacity();
        assert!(kept >= 8192);
        buffer
            .write(&direct, &[], &[IoSlice::new(&small)], 8192, 12288)
            .unwrap();
        assert_eq!(buffer.capacity(), kept, "reused, not reallocated");
        let huge = vec![2u8; ROUND_BUFFER_KEPT_BYTES_MAX + 4096];
        let len = huge.len() as u64;
        buffer
            .write(&direct, &[], &[IoSlice::new(&huge)], len, 20480)
            .unwrap();
        assert_eq!(buffer.capacity(), 0, "released after the huge round");
    }

    #[test]
    #[should_panic(expected = "rounds end on a page")]
    fn a_round_off_the_page_is_refused() {
        let fs = SimFs::new();
        fs.create_dir_all(Path::new("/d")).unwrap();
        let path = Path::new("/d/f");
        drop(fs.open(path, OpenMode::CreateTruncate).unwrap());
        let direct = AlignedWrites(fs.open(path, OpenMode::Existing).unwrap());
        let mut buffer = RoundBuffer::default();
        let _ = buffer.write(&direct, &[], &[IoSlice::new(&[0u8; 100])], 100, 4096);
    }
}
