//! TEMPORARY shim (replaced by the hand-written decoder from the `fetch-decode` branch):
//! the Fetch request through kafka-protocol, into the reused `Decoded` shape.

use std::ops::Range;

use bytes::Bytes;
use kafka_protocol::messages::FetchRequest;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

#[derive(Debug, Clone)]
pub(crate) struct FetchTopic {
    pub(crate) name: StrBytes,
    pub(crate) topic_id: Uuid,
    pub(crate) partitions: Range<usize>,
}

#[derive(Debug, Clone)]
pub(crate) struct FetchPartition {
    pub(crate) partition: i32,
    pub(crate) fetch_offset: i64,
    pub(crate) partition_max_bytes: i32,
}

#[derive(Debug, Default)]
pub(crate) struct Decoded {
    pub(crate) max_wait_ms: i32,
    pub(crate) min_bytes: i32,
    pub(crate) max_bytes: i32,
    pub(crate) isolation_level: i8,
    pub(crate) session_id: i32,
    pub(crate) session_epoch: i32,
    pub(crate) topics: Vec<FetchTopic>,
    pub(crate) partitions: Vec<FetchPartition>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed Fetch request: {0}")]
pub(crate) struct Malformed(pub(crate) &'static str);

impl Decoded {
    pub(crate) fn decode(&mut self, body: &Bytes, version: i16) -> Result<(), Malformed> {
        self.clear();
        let mut b = body.clone();
        let req: FetchRequest = sluice_protocol::codec::decode_request(&mut b, version)
            .map_err(|_| Malformed("kafka-protocol"))?;
        self.max_wait_ms = req.max_wait_ms;
        self.min_bytes = req.min_bytes;
        self.max_bytes = req.max_bytes;
        self.isolation_level = req.isolation_level;
        self.session_id = req.session_id;
        self.session_epoch = req.session_epoch;
        for t in &req.topics {
            let first = self.partitions.len();
            for p in &t.partitions {
                self.partitions.push(FetchPartition {
                    partition: p.partition,
                    fetch_offset: p.fetch_offset,
                    partition_max_bytes: p.partition_max_bytes,
                });
            }
            self.topics.push(FetchTopic {
                name: t.topic.0.clone(),
                topic_id: t.topic_id,
                partitions: first..self.partitions.len(),
            });
        }
        Ok(())
    }

    pub(crate) fn clear(&mut self) {
        self.topics.clear();
        self.partitions.clear();
    }
}
