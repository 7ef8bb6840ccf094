"""Reads and damages Sluice's on-disk layout from a test, the way a disk or an operator would.

The journal (`<data>/journal/<seq:020>.wal`) is the only copy of record batches. A segment of
a partition is `<base:020>.extents`: 32-byte records `start u64 · journal seq u64 · file
position u64 · length u32 · crc32c u32` (CRC-32C of the 28 bytes before it), each a byte
range of the segment stored in a journal file; the records tile the segment from position 0
(see crates/sluice-log/src/extents.rs). Only call these on a stopped broker: extents are
persisted by the checkpointer, so after a clean stop they cover every segment's data.

Guarantees: every reader here checks what it parses (record CRCs, tiling, batch framing)
and raises AssertionError on anything unexpected, so a test built on it fails loudly
instead of damaging the wrong bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from kwire import crc32c

RECORD_LEN = 32
EXTENTS_SUFFIX = ".extents"
JOURNAL_MAGIC = b"SLUICEJ2"
JOURNAL_HEADER_LEN = 16


@dataclass(frozen=True)
class Extent:
    start: int  # position of its first byte in the segment
    seq: int  # journal file sequence number
    file_position: int  # position in that journal file
    length: int

    @property
    def end(self) -> int:
        return self.start + self.length


def journal_dir(data_dir: Path) -> Path:
    return data_dir / "journal"


def journal_path(data_dir: Path, seq: int) -> Path:
    return journal_dir(data_dir) / f"{seq:020}.wal"


def journal_files(data_dir: Path) -> list[Path]:
    return sorted(journal_dir(data_dir).glob("*.wal"))


def extents_path(partition_dir: Path, base: int) -> Path:
    return partition_dir / f"{base:020}{EXTENTS_SUFFIX}"


def segment_bases(partition_dir: Path) -> list[int]:
    """Base offsets of the partition's segments (one per `.extents` file), ascending."""
    out = []
    for p in partition_dir.glob(f"*{EXTENTS_SUFFIX}"):
        stem = p.name[: -len(EXTENTS_SUFFIX)]
        if len(stem) == 20 and stem.isdigit():
            out.append(int(stem))
    return sorted(out)


def encode_record(e: Extent) -> bytes:
    head = struct.pack(">QQQI", e.start, e.seq, e.file_position, e.length)
    return head + struct.pack(">I", crc32c(head))


def parse_extents(raw: bytes) -> list[Extent]:
    """The records of an `.extents` file; asserts every one is whole, checks and tiles."""
    assert len(raw) % RECORD_LEN == 0, f"extents file of {len(raw)} bytes is not whole records"
    out: list[Extent] = []
    for i in range(0, len(raw), RECORD_LEN):
        rec = raw[i:i + RECORD_LEN]
        start, seq, pos, length, crc = struct.unpack(">QQQII", rec)
        assert crc32c(rec[:28]) == crc, f"extent record {i // RECORD_LEN} fails its CRC"
        want = out[-1].end if out else 0
        assert start == want, f"extent record {i // RECORD_LEN} starts at {start}, not {want}"
        out.append(Extent(start, seq, pos, length))
    return out


def extents(partition_dir: Path, base: int) -> list[Extent]:
    return parse_extents(extents_path(partition_dir, base).read_bytes())


def segment_size(partition_dir: Path, base: int) -> int:
    """A segment's logical size: the end of its last extent."""
    ex = extents(partition_dir, base)
    return ex[-1].end if ex else 0


def map_position(data_dir: Path, partition_dir: Path, base: int, position: int) -> tuple[Path, int]:
    """(journal file, position in it) holding byte `position` of the segment."""
    for e in extents(partition_dir, base):
        if e.start <= position < e.end:
            return journal_path(data_dir, e.seq), e.file_position + (position - e.start)
    raise AssertionError(f"position {position} is past the end of segment {base}")


def segment_bytes(data_dir: Path, partition_dir: Path, base: int) -> bytes:
    """The segment's logical bytes, read through its extents from the journal files."""
    out = bytearray()
    for e in extents(partition_dir, base):
        with open(journal_path(data_dir, e.seq), "rb") as f:
            assert f.read(8) == JOURNAL_MAGIC, f"journal file {e.seq} has the wrong magic"
            f.seek(e.file_position)
            chunk = f.read(e.length)
        assert len(chunk) == e.length, f"journal file {e.seq} is shorter than extent {e}"
        out += chunk
    return bytes(out)


def write_segment_bytes(data_dir: Path, partition_dir: Path, base: int, position: int, data: bytes) -> None:
    """Writes `data` "into the segment" at `position`: into the journal file(s) its extents
    map those bytes to, splitting across extents where needed."""
    done = 0
    while done < len(data):
        path, pos = map_position(data_dir, partition_dir, base, position + done)
        ext = next(e for e in extents(partition_dir, base) if e.start <= position + done < e.end)
        n = min(len(data) - done, ext.end - (position + done))
        with open(path, "r+b") as f:
            f.seek(pos)
            f.write(data[done:done + n])
        done += n


@dataclass(frozen=True)
class Batch:
    position: int  # in the segment
    length: int  # whole batch, 12 + batchLength
    base_offset: int
    last_offset: int


def parse_batches(data: bytes) -> list[Batch]:
    """The record batches of a segment's bytes; asserts they frame it exactly (v2 batches,
    each batch's CRC-32C correct)."""
    out, pos = [], 0
    while pos < len(data):
        assert pos + 61 <= len(data), f"{len(data) - pos} trailing bytes at {pos}"
        base, length = struct.unpack(">qi", data[pos:pos + 12])
        magic = data[pos + 16]
        assert magic == 2, f"batch at {pos} has magic {magic}"
        crc = struct.unpack(">I", data[pos + 17:pos + 21])[0]
        assert crc32c(data[pos + 21:pos + 12 + length]) == crc, f"batch at {pos} fails its CRC"
        last_delta = struct.unpack(">i", data[pos + 23:pos + 27])[0]
        out.append(Batch(pos, 12 + length, base, base + last_delta))
        pos += 12 + length
    return out


def segment_batches(data_dir: Path, partition_dir: Path, base: int) -> list[Batch]:
    batches = parse_batches(segment_bytes(data_dir, partition_dir, base))
    assert not batches or batches[0].base_offset == base, f"segment {base} starts at {batches[0]}"
    return batches
