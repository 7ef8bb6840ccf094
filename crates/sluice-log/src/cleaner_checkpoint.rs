//! The cleaner's checkpoint, `<data_dir>/cleaner-offset-checkpoint`: per compacted
//! partition, how far the log cleaner has cleaned (its *first dirty offset*), so a restart
//! goes on from there instead of finding every partition wholly dirty and cleaning it all
//! again (Kafka keeps the same thing in a file of the same name), and the latest *delete
//! horizon* left in it, so tombstones and markers whose horizon passes while nothing new
//! is written still go after a restart (Kafka keeps that horizon in memory only).
//!
//! Guarantees:
//! - Replaced atomically and durably ([`fs::write_file_atomic`]: tmp file, fsync, rename,
//!   fsync the directory), after the pass's swaps are durable, so a crash leaves the file of
//!   the previous pass or of this one. Either is right: cleaning below an offset the file
//!   names already happened and is on disk.
//! - A file that does not parse is ignored whole (each partition is then cleaned once, as
//!   with no file): it never makes the cleaner skip anything it should not.
//! - An entry counts only for the same topic id (a topic deleted and created again under
//!   its name starts dirty) and only while its offset is within the partition's log.
//! - While batches on disk hold stamped tombstones or markers, the file names a horizon
//!   for their partition (the cleaner stores one before it swaps in the first stamped
//!   batch of a partition that had none), so after a restart the partition becomes due by
//!   itself; a stale horizon only makes a pass come early and find less to remove.
//!
//! Format (text, one entry per line, as Kafka's; the version differs because each line
//! also holds the topic id and the horizon; version 1 files, without the horizon, are read):
//!
//! ```text
//! sluice-cleaner-offset-checkpoint 2
//! <entry count>
//! <topic> <partition> <topic id, 32 hex digits> <first dirty offset> <delete horizon ms, -1: none>
//! ```

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use crate::fs::{self, Fs};
use crate::types::{Offset, TopicId};

pub(crate) const FILE_NAME: &str = "cleaner-offset-checkpoint";
const HEADER: &str = "sluice-cleaner-offset-checkpoint 2";
/// The format before delete horizons were kept: still read (no horizon).
const HEADER_V1: &str = "sluice-cleaner-offset-checkpoint 1";

/// A partition as the checkpoint names it.
pub(crate) type EntryKey = (String, i32, TopicId);

/// What the checkpoint keeps per partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Entry {
    /// Offsets below it were cleaned.
    pub(crate) first_dirty: Offset,
    /// The latest delete horizon among the batches still holding tombstones or markers
    /// after the last pass (`None`: none holds any).
    pub(crate) delete_horizon_ms: Option<i64>,
}

pub(crate) fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE_NAME)
}

pub(crate) fn encode(entries: &[(EntryKey, Entry)]) -> String {
    let mut out = format!("{HEADER}\n{}\n", entries.len());
    for ((topic, partition, topic_id), entry) in entries {
        debug_assert!(
            !topic.contains(char::is_whitespace),
            "Kafka topic names have no spaces"
        );
        let id: String = topic_id.0.iter().map(|b| format!("{b:02x}")).collect();
        let horizon = entry.delete_horizon_ms.unwrap_or(-1);
        debug_assert!(entry.delete_horizon_ms.is_none_or(|h| h >= 0));
        let _ = writeln!(
            out,
            "{topic} {partition} {id} {} {horizon}",
            entry.first_dirty.0
        );
    }
    out
}

/// The entries of a checkpoint file; `None` when it does not parse (then it is ignored).
pub(crate) fn decode(text: &str) -> Option<HashMap<EntryKey, Entry>> {
    let mut lines = text.lines();
    let with_horizon = match lines.next()? {
        HEADER => true,
        HEADER_V1 => false,
        _ => return None,
    };
    let count: usize = lines.next()?.parse().ok()?;
    let mut entries = HashMap::with_capacity(count.min(1 << 16));
    for line in lines.by_ref().take(count) {
        let mut fields = line.split(' ');
        let topic = fields.next().filter(|t| !t.is_empty())?.to_string();
        let partition: i32 = fields.next()?.parse().ok()?;
        let id = fields.next().filter(|h| h.len() == 32)?;
        let mut topic_id = [0u8; 16];
        for (i, byte) in topic_id.iter_mut().enumerate() {
            *byte = u8::from_str_radix(id.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        let offset: i64 = fields.next()?.parse().ok()?;
        let horizon: i64 = match with_horizon {
            true => fields.next()?.parse().ok()?,
            false => -1,
        };
        if fields.next().is_some() || offset < 0 || horizon < -1 {
            return None;
        }
        let entry = Entry {
            first_dirty: Offset(offset),
            delete_horizon_ms: (horizon >= 0).then_some(horizon),
        };
        entries.insert((topic, partition, TopicId(topic_id)), entry);
    }
    (entries.len() == count && lines.next().is_none()).then_some(entries)
}

/// Reads the checkpoint; an absent file is empty, an unreadable or malformed one is
/// ignored with a warning (the partitions are then cleaned once, whole).
pub(crate) fn load(fs: &dyn Fs, data_dir: &Path) -> HashMap<EntryKey, Entry> {
    let path = path(data_dir);
    if !fs.exists(&path) {
        return HashMap::new();
    }
    let decoded = fs::read_file(fs, &path)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .and_then(|text| decode(&text));
    decoded.unwrap_or_else(|| {
        tracing::warn!(path = %path.display(), "ignoring a malformed cleaner checkpoint; compacted partitions are cleaned once whole");
        HashMap::new()
    })
}

/// Replaces the checkpoint with `entries` (sorted, so the file is deterministic).
pub(crate) fn store(
    fs: &dyn Fs,
    data_dir: &Path,
    mut entries: Vec<(EntryKey, Entry)>,
) -> io::Result<()> {
    entries.sort();
    fs::write_file_atomic(fs, &path(data_dir), encode(&entries).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(topic: &str, partition: i32, id: u8) -> EntryKey {
        (topic.to_string(), partition, TopicId([id; 16]))
    }

    #[test]
    fn round_trip_and_rejects_anything_malformed() {
        // Goal: what is stored is read back; any damage makes the whole file ignored.
        let entry = |first_dirty, delete_horizon_ms| Entry {
            first_dirty: Offset(first_dirty),
            delete_horizon_ms,
        };
        let entries = vec![
            (
                key("connect-offsets", 0, 7),
                entry(1234, Some(1_700_000_000_000)),
            ),
            (key("a.b_c-d", 3, 0xab), entry(0, None)),
        ];
        let text = encode(&entries);
        let back = decode(&text).expect("decodes");
        assert_eq!(back.len(), 2);
        assert_eq!(
            back[&key("connect-offsets", 0, 7)],
            entry(1234, Some(1_700_000_000_000))
        );
        assert_eq!(back[&key("a.b_c-d", 3, 0xab)], entry(0, None));
        assert_eq!(decode(&encode(&[])).map(|m| m.len()), Some(0));
        for cut in 0..text.len() - 1 {
            if let Some(partial) = decode(&text[..cut]) {
                panic!("a file cut at {cut} decoded to {partial:?}");
            }
        }
        for bad in [
            text.replace("1234", "-5"),
            text.replace("1234", "12x4"),
            text.replace(" 1700000000000", " -2"),
            text.replace(" 1700000000000", ""),
            text.replace("\n2\n", "\n3\n"),
            text.replace("\n2\n", "\n1\n"),
            text.replace("connect-offsets 0", "connect-offsets  0"),
            text.replace(HEADER, "0"),
            format!("{text}extra 0 00 1\n"),
        ] {
            assert_eq!(decode(&bad), None, "{bad:?}");
        }
    }

    #[test]
    fn version_1_files_are_read_without_horizons() {
        // Goal: a checkpoint written before horizons were kept still says how far each
        // partition was cleaned (an upgrade does not clean everything again).
        let text = format!("{HEADER_V1}\n1\nt 0 {} 42\n", "07".repeat(16));
        let back = decode(&text).expect("decodes");
        let entry = back[&key("t", 0, 7)];
        assert_eq!(
            (entry.first_dirty, entry.delete_horizon_ms),
            (Offset(42), None)
        );
        assert_eq!(
            decode(&format!("{HEADER_V1}\n1\nt 0 {} 42 5\n", "07".repeat(16))),
            None
        );
    }
}
