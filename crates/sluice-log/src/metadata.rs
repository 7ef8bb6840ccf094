//! Partition directories: `<data_dir>/<topic>-<partition>/` and their `partition.metadata`.
//!
//! `partition.metadata` is a small text file written once, atomically and durably, when the
//! partition is created; its presence marks the directory as a complete partition:
//!
//! ```text
//! version: 1
//! topic_id: <32 lowercase hex digits>
//! topic: <topic name>
//! partition: <decimal>
//! ```
//!
//! Directory names are parsed at the LAST '-' so topic names may contain '-'. Anything that
//! is not `<name>-<digits>` is not a partition directory and is never touched.

use std::fmt::Write as _;

use crate::types::TopicId;

pub(crate) const FILE_NAME: &str = "partition.metadata";
/// Kafka's limit on topic name length.
pub(crate) const TOPIC_NAME_LEN_MAX: usize = 249;

/// `<topic>-<partition>`.
pub(crate) fn dir_name(topic: &str, partition: i32) -> String {
    format!("{topic}-{partition}")
}

/// Splits a directory name at its last '-': `("a-b", 3)` for `a-b-3`.
pub(crate) fn parse_dir_name(name: &str) -> Option<(&str, i32)> {
    let (topic, digits) = name.rsplit_once('-')?;
    if topic.is_empty() || digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((topic, digits.parse().ok()?))
}

/// Kafka's legal topic names (ASCII alphanumerics, '.', '_', '-'), which also keeps every
/// name a single, safe path component.
pub(crate) fn is_legal_topic_name(topic: &str) -> bool {
    let legal_chars = topic
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    legal_chars
        && !topic.is_empty()
        && topic.len() <= TOPIC_NAME_LEN_MAX
        && topic != "."
        && topic != ".."
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PartitionMetadata {
    pub(crate) topic_id: TopicId,
    pub(crate) topic: String,
    pub(crate) partition: i32,
}

impl PartitionMetadata {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut hex = String::with_capacity(32);
        for b in self.topic_id.0 {
            let _ = write!(hex, "{b:02x}");
        }
        format!(
            "version: 1\ntopic_id: {hex}\ntopic: {}\npartition: {}\n",
            self.topic, self.partition
        )
        .into_bytes()
    }

    /// `None` when the file is not a version-1 metadata file with all three fields.
    pub(crate) fn decode(data: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(data).ok()?;
        let mut fields = text.lines().filter_map(|line| line.split_once(": "));
        let (key, version) = fields.next()?;
        if key != "version" || version != "1" {
            return None;
        }
        let (mut topic_id, mut topic, mut partition) = (None, None, None);
        for (key, value) in fields {
            match key {
                "topic_id" => topic_id = parse_hex_id(value),
                "topic" => topic = Some(value.to_owned()),
                "partition" => partition = value.parse().ok(),
                _ => {}
            }
        }
        Some(Self {
            topic_id: topic_id?,
            topic: topic?,
            partition: partition?,
        })
    }
}

fn parse_hex_id(hex: &str) -> Option<TopicId> {
    if hex.len() != 32 {
        return None;
    }
    let mut id = [0u8; 16];
    for (i, byte) in id.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(TopicId(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_names_split_at_last_dash() {
        // Goal: topic names containing '-' survive the round trip; other names are rejected.
        assert_eq!(
            parse_dir_name(&dir_name("my-topic", 12)),
            Some(("my-topic", 12))
        );
        assert_eq!(parse_dir_name("journal"), None);
        assert_eq!(parse_dir_name("meta"), None);
        assert_eq!(parse_dir_name("x-"), None);
        assert_eq!(parse_dir_name("-3"), None);
        assert!(is_legal_topic_name("a.b_c-d"));
        assert!(!is_legal_topic_name("../x"));
        assert!(!is_legal_topic_name(".."));
    }

    #[test]
    fn metadata_round_trips() {
        // Goal: partition.metadata decodes to what was encoded and rejects garbage.
        let meta = PartitionMetadata {
            topic_id: TopicId([0xab; 16]),
            topic: "t-1".into(),
            partition: 7,
        };
        assert_eq!(PartitionMetadata::decode(&meta.encode()), Some(meta));
        assert_eq!(PartitionMetadata::decode(b"version: 2\n"), None);
        assert_eq!(PartitionMetadata::decode(b"\xff\xfe"), None);
    }
}
