//! Request and response versions of Kafka 4.x that `kafka-protocol` 0.18 does not encode or
//! decode, served here on top of its message structs: OffsetCommit v10 and OffsetFetch v10
//! (topic ids instead of names, KIP-848), TxnOffsetCommit v6 (topic ids, KIP-1319; the
//! crate's struct has no id field, so [`WithTopicIds`] carries them beside it), ListOffsets
//! v11 (KIP-1023, no schema change), DeleteGroups v3 (a per-group error message) and
//! ApiVersions v5 (the cluster and node a client expects, KIP-1242).
//!
//! Each new version differs from the one before it in a few fields only, so the nested
//! structs whose layout did not change are read and written by the crate itself at the older
//! version, and only the changed levels are written out here. [`Versioned`] wraps a crate
//! struct so that it decodes and encodes at every version, the adapted ones included: the
//! broker's handlers decode into it and respond with it, and tests use the same codecs.
//!
//! Guarantees: array lengths are checked against the bytes left before anything is
//! allocated, and a truncated or malformed body is an error, never a panic.

use anyhow::{bail, Result};
use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartitions, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use uuid::Uuid;

/// The highest version of `key` served through this module, if any.
pub const fn max_version(key: ApiKey) -> Option<i16> {
    match key {
        ApiKey::OffsetCommit | ApiKey::OffsetFetch => Some(10),
        ApiKey::ListOffsets => Some(11),
        ApiKey::TxnOffsetCommit => Some(6),
        ApiKey::DeleteGroups => Some(3),
        ApiKey::ApiVersions => Some(5),
        _ => None,
    }
}

/// A crate message struct that decodes and encodes at every version of its API, the
/// versions of this module included.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Versioned<T>(pub T);

mod wire;
use wire::{Reader, Writer};

/// Wire form of one adapted message version: `read` and `write` of the whole body.
trait Adapted: Sized {
    /// The first version written here; older ones are the crate's.
    const FIRST_ADAPTED: i16;
    /// The newest version the crate encodes, whose nested structs this module reuses.
    const CRATE_MAX: i16;
    fn read(r: &mut Reader) -> Result<Self>;
    fn write(&self, w: &mut Writer);
}

impl<T: Adapted + Decodable> Decodable for Versioned<T> {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if version < T::FIRST_ADAPTED {
            return T::decode(buf, version).map(Versioned);
        }
        let bytes = buf.copy_to_bytes(buf.remaining());
        let mut r = Reader::new(bytes);
        // Bytes after the body are tolerated, as the crate and Kafka tolerate them.
        T::read(&mut r).map(Versioned)
    }
}

impl<T: Adapted + Encodable> Encodable for Versioned<T> {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if version < T::FIRST_ADAPTED {
            return self.0.encode(buf, version);
        }
        let mut w = Writer::default();
        self.0.write(&mut w);
        buf.put_slice(&w.finish()?);
        Ok(())
    }

    // Sizing writes the body once more: these are offset and admin answers (a Java 4.x
    // consumer commits at v10, a few times a second at most), never the produce or fetch
    // path, and their bodies are small.
    fn compute_size(&self, version: i16) -> Result<usize> {
        if version < T::FIRST_ADAPTED {
            return self.0.compute_size(version);
        }
        let mut w = Writer::default();
        self.0.write(&mut w);
        Ok(w.finish()?.len())
    }
}

// ---- OffsetCommit v10: topic ids instead of names ---------------------------------------

impl Adapted for OffsetCommitRequest {
    const FIRST_ADAPTED: i16 = 10;
    const CRATE_MAX: i16 = 9;
    fn read(r: &mut Reader) -> Result<Self> {
        let mut req = OffsetCommitRequest::default();
        req.group_id = GroupId(r.compact_string()?);
        req.generation_id_or_member_epoch = r.i32()?;
        req.member_id = r.compact_string()?;
        req.group_instance_id = r.compact_nullable_string()?;
        req.topics = r
            .id_topics::<OffsetCommitRequestPartition>(Self::CRATE_MAX)?
            .into_iter()
            .map(|(id, partitions)| {
                let mut t = OffsetCommitRequestTopic::default();
                t.topic_id = id;
                t.partitions = partitions;
                t
            })
            .collect();
        r.tags()?;
        Ok(req)
    }
    fn write(&self, w: &mut Writer) {
        w.compact_string(&self.group_id.0);
        w.i32(self.generation_id_or_member_epoch);
        w.compact_string(&self.member_id);
        w.compact_nullable_string(self.group_instance_id.as_deref());
        let topics: Vec<_> = self
            .topics
            .iter()
            .map(|t| (t.topic_id, t.partitions.as_slice()))
            .collect();
        w.id_topics(&topics, Self::CRATE_MAX);
        w.no_tags();
    }
}

impl Adapted for OffsetCommitResponse {
    const FIRST_ADAPTED: i16 = 10;
    const CRATE_MAX: i16 = 9;
    fn read(r: &mut Reader) -> Result<Self> {
        let mut resp = OffsetCommitResponse::default();
        resp.throttle_time_ms = r.i32()?;
        resp.topics = r
            .id_topics::<OffsetCommitResponsePartition>(Self::CRATE_MAX)?
            .into_iter()
            .map(|(id, partitions)| {
                let mut t = OffsetCommitResponseTopic::default();
                t.topic_id = id;
                t.partitions = partitions;
                t
            })
            .collect();
        r.tags()?;
        Ok(resp)
    }
    fn write(&self, w: &mut Writer) {
        w.i32(self.throttle_time_ms);
        let topics: Vec<_> = self
            .topics
            .iter()
            .map(|t| (t.topic_id, t.partitions.as_slice()))
            .collect();
        w.id_topics(&topics, Self::CRATE_MAX);
        w.no_tags();
    }
}

// ---- OffsetFetch v10: topic ids instead of names ----------------------------------------

impl Adapted for OffsetFetchRequest {
    const FIRST_ADAPTED: i16 = 10;
    const CRATE_MAX: i16 = 9;
    fn read(r: &mut Reader) -> Result<Self> {
        let mut req = OffsetFetchRequest::default();
        req.groups = r.compact_array(|r| {
            let mut g = OffsetFetchRequestGroup::default();
            g.group_id = GroupId(r.compact_string()?);
            g.member_id = r.compact_nullable_string()?;
            g.member_epoch = r.i32()?;
            g.topics = r.compact_nullable_array(|r| {
                let mut t = OffsetFetchRequestTopics::default();
                t.topic_id = r.uuid()?;
                t.partition_indexes = r.compact_array(|r| r.i32())?;
                r.tags()?;
                Ok(t)
            })?;
            r.tags()?;
            Ok(g)
        })?;
        req.require_stable = r.bool()?;
        r.tags()?;
        Ok(req)
    }
    fn write(&self, w: &mut Writer) {
        w.compact_array(&self.groups, |w, g| {
            w.compact_string(&g.group_id.0);
            w.compact_nullable_string(g.member_id.as_deref());
            w.i32(g.member_epoch);
            w.compact_nullable_array(g.topics.as_deref(), |w, t| {
                w.uuid(t.topic_id);
                w.compact_array(&t.partition_indexes, |w, p| w.i32(*p));
                w.no_tags();
            });
            w.no_tags();
        });
        w.bool(self.require_stable);
        w.no_tags();
    }
}

impl Adapted for OffsetFetchResponse {
    const FIRST_ADAPTED: i16 = 10;
    const CRATE_MAX: i16 = 9;
    fn read(r: &mut Reader) -> Result<Self> {
        let mut resp = OffsetFetchResponse::default();
        resp.throttle_time_ms = r.i32()?;
        resp.groups = r.compact_array(|r| {
            let mut g = OffsetFetchResponseGroup::default();
            g.group_id = GroupId(r.compact_string()?);
            g.topics = r
                .id_topics::<OffsetFetchResponsePartitions>(Self::CRATE_MAX)?
                .into_iter()
                .map(|(id, partitions)| {
                    let mut t = OffsetFetchResponseTopics::default();
                    t.topic_id = id;
                    t.partitions = partitions;
                    t
                })
                .collect();
            g.error_code = r.i16()?;
            r.tags()?;
            Ok(g)
        })?;
        r.tags()?;
        Ok(resp)
    }
    fn write(&self, w: &mut Writer) {
        w.i32(self.throttle_time_ms);
        w.compact_array(&self.groups, |w, g| {
            w.compact_string(&g.group_id.0);
            let topics: Vec<_> = g
                .topics
                .iter()
                .map(|t| (t.topic_id, t.partitions.as_slice()))
                .collect();
            w.id_topics(&topics, Self::CRATE_MAX);
            w.i16(g.error_code);
            w.no_tags();
        });
        w.no_tags();
    }
}

// ---- TxnOffsetCommit v6: topic ids instead of names ---------------------------------------

/// The first TxnOffsetCommit version that names topics by id.
const TXN_OFFSET_COMMIT_IDS: i16 = 6;
/// The newest TxnOffsetCommit version the crate encodes (its partitions' layout is v6's).
const TXN_OFFSET_COMMIT_CRATE_MAX: i16 = 5;

/// A message whose topics are named by id from some version on, where the crate's struct has
/// no id field (TxnOffsetCommit v6): the struct, and its topics' ids in the same order (empty
/// below that version). At those versions the struct's topic names are empty on decode and
/// ignored on encode.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WithTopicIds<T> {
    pub message: T,
    pub topic_ids: Vec<Uuid>,
}

impl Decodable for WithTopicIds<TxnOffsetCommitRequest> {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if version < TXN_OFFSET_COMMIT_IDS {
            let message = TxnOffsetCommitRequest::decode(buf, version)?;
            return Ok(Self {
                message,
                topic_ids: Vec::new(),
            });
        }
        let mut r = Reader::new(buf.copy_to_bytes(buf.remaining()));
        let mut req = TxnOffsetCommitRequest::default();
        req.transactional_id = TransactionalId(r.compact_string()?);
        req.group_id = GroupId(r.compact_string()?);
        req.producer_id = ProducerId(r.i64()?);
        req.producer_epoch = r.i16()?;
        req.generation_id = r.i32()?;
        req.member_id = r.compact_string()?;
        req.group_instance_id = r.compact_nullable_string()?;
        let (topic_ids, topics) = r
            .id_topics::<TxnOffsetCommitRequestPartition>(TXN_OFFSET_COMMIT_CRATE_MAX)?
            .into_iter()
            .map(|(id, partitions)| {
                let mut t = TxnOffsetCommitRequestTopic::default();
                t.partitions = partitions;
                (id, t)
            })
            .unzip();
        req.topics = topics;
        r.tags()?;
        Ok(Self {
            message: req,
            topic_ids,
        })
    }
}

impl Encodable for WithTopicIds<TxnOffsetCommitRequest> {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if version < TXN_OFFSET_COMMIT_IDS {
            return self.message.encode(buf, version);
        }
        let m = &self.message;
        let mut w = Writer::default();
        w.compact_string(&m.transactional_id.0);
        w.compact_string(&m.group_id.0);
        w.i64(m.producer_id.0);
        w.i16(m.producer_epoch);
        w.i32(m.generation_id);
        w.compact_string(&m.member_id);
        w.compact_nullable_string(m.group_instance_id.as_deref());
        let ids = self.ids(m.topics.len())?;
        let topics: Vec<_> = ids
            .iter()
            .zip(&m.topics)
            .map(|(id, t)| (*id, t.partitions.as_slice()))
            .collect();
        w.id_topics(&topics, TXN_OFFSET_COMMIT_CRATE_MAX);
        w.no_tags();
        buf.put_slice(&w.finish()?);
        Ok(())
    }
    fn compute_size(&self, version: i16) -> Result<usize> {
        let mut out = BytesMut::new();
        self.encode(&mut out, version)?;
        Ok(out.len())
    }
}

impl<T> WithTopicIds<T> {
    /// The ids of `topics` topics, or an error when they do not pair up.
    fn ids(&self, topics: usize) -> Result<&[Uuid]> {
        if self.topic_ids.len() != topics {
            bail!("{} topic ids for {topics} topics", self.topic_ids.len());
        }
        Ok(&self.topic_ids)
    }
}

impl Decodable for WithTopicIds<TxnOffsetCommitResponse> {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if version < TXN_OFFSET_COMMIT_IDS {
            let message = TxnOffsetCommitResponse::decode(buf, version)?;
            return Ok(Self {
                message,
                topic_ids: Vec::new(),
            });
        }
        let mut r = Reader::new(buf.copy_to_bytes(buf.remaining()));
        let mut resp = TxnOffsetCommitResponse::default();
        resp.throttle_time_ms = r.i32()?;
        let (topic_ids, topics) = r
            .id_topics::<TxnOffsetCommitResponsePartition>(TXN_OFFSET_COMMIT_CRATE_MAX)?
            .into_iter()
            .map(|(id, partitions)| {
                let mut t = TxnOffsetCommitResponseTopic::default();
                t.partitions = partitions;
                (id, t)
            })
            .unzip();
        resp.topics = topics;
        r.tags()?;
        Ok(Self {
            message: resp,
            topic_ids,
        })
    }
}

impl Encodable for WithTopicIds<TxnOffsetCommitResponse> {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if version < TXN_OFFSET_COMMIT_IDS {
            return self.message.encode(buf, version);
        }
        let m = &self.message;
        let mut w = Writer::default();
        w.i32(m.throttle_time_ms);
        let ids = self.ids(m.topics.len())?;
        let topics: Vec<_> = ids
            .iter()
            .zip(&m.topics)
            .map(|(id, t)| (*id, t.partitions.as_slice()))
            .collect();
        w.id_topics(&topics, TXN_OFFSET_COMMIT_CRATE_MAX);
        w.no_tags();
        buf.put_slice(&w.finish()?);
        Ok(())
    }
    fn compute_size(&self, version: i16) -> Result<usize> {
        let mut out = BytesMut::new();
        self.encode(&mut out, version)?;
        Ok(out.len())
    }
}

// ---- ListOffsets v11: v10's layout (a new special timestamp, -6) -------------------------

impl Adapted for ListOffsetsRequest {
    const FIRST_ADAPTED: i16 = 11;
    const CRATE_MAX: i16 = 10;
    fn read(r: &mut Reader) -> Result<Self> {
        r.crate_struct(Self::CRATE_MAX)
    }
    fn write(&self, w: &mut Writer) {
        w.crate_struct(self, Self::CRATE_MAX)
    }
}

impl Adapted for ListOffsetsResponse {
    const FIRST_ADAPTED: i16 = 11;
    const CRATE_MAX: i16 = 10;
    fn read(r: &mut Reader) -> Result<Self> {
        r.crate_struct(Self::CRATE_MAX)
    }
    fn write(&self, w: &mut Writer) {
        w.crate_struct(self, Self::CRATE_MAX)
    }
}

// ---- DeleteGroups v3: a per-group error message -------------------------------------------

impl Adapted for DeleteGroupsRequest {
    const FIRST_ADAPTED: i16 = 3;
    const CRATE_MAX: i16 = 2;
    fn read(r: &mut Reader) -> Result<Self> {
        r.crate_struct(Self::CRATE_MAX)
    }
    fn write(&self, w: &mut Writer) {
        w.crate_struct(self, Self::CRATE_MAX)
    }
}

/// The tag under which a v3 result's `ErrorMessage` travels inside the crate's struct
/// (`unknown_tagged_fields`; never written as a tag, since the field is a regular one).
pub const DELETE_GROUPS_ERROR_MESSAGE: i32 = i32::MAX;

/// Sets the v3 error message of a DeleteGroups result.
pub fn set_delete_groups_error_message(result: &mut DeletableGroupResult, message: &str) {
    result.unknown_tagged_fields.insert(
        DELETE_GROUPS_ERROR_MESSAGE,
        Bytes::copy_from_slice(message.as_bytes()),
    );
}

/// The v3 error message of a DeleteGroups result, if it has one.
pub fn delete_groups_error_message(result: &DeletableGroupResult) -> Option<&str> {
    result
        .unknown_tagged_fields
        .get(&DELETE_GROUPS_ERROR_MESSAGE)
        .and_then(|b| std::str::from_utf8(b).ok())
}

impl Adapted for DeleteGroupsResponse {
    const FIRST_ADAPTED: i16 = 3;
    const CRATE_MAX: i16 = 2;
    fn read(r: &mut Reader) -> Result<Self> {
        let mut resp = DeleteGroupsResponse::default();
        resp.throttle_time_ms = r.i32()?;
        resp.results = r.compact_array(|r| {
            let mut g = DeletableGroupResult::default();
            g.group_id = GroupId(r.compact_string()?);
            g.error_code = r.i16()?;
            if let Some(m) = r.compact_nullable_string()? {
                set_delete_groups_error_message(&mut g, &m);
            }
            r.tags()?;
            Ok(g)
        })?;
        r.tags()?;
        Ok(resp)
    }
    fn write(&self, w: &mut Writer) {
        w.i32(self.throttle_time_ms);
        w.compact_array(&self.results, |w, g| {
            w.compact_string(&g.group_id.0);
            w.i16(g.error_code);
            w.compact_nullable_string(delete_groups_error_message(g));
            w.no_tags();
        });
        w.no_tags();
    }
}

// ---- ApiVersions v5: the cluster and node the client expects ------------------------------

/// An ApiVersions request with v5's fields (KIP-1242): the cluster id and node id the client
/// means to reach (`None` and -1 when it does not know them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApiVersionsRequestV5 {
    pub request: ApiVersionsRequest,
    pub cluster_id: Option<StrBytes>,
    pub node_id: i32,
}

impl Decodable for ApiVersionsRequestV5 {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if version < 5 {
            let request = ApiVersionsRequest::decode(buf, version)?;
            return Ok(Self {
                request,
                cluster_id: None,
                node_id: -1,
            });
        }
        let mut r = Reader::new(buf.copy_to_bytes(buf.remaining()));
        let mut request = ApiVersionsRequest::default();
        request.client_software_name = r.compact_string()?;
        request.client_software_version = r.compact_string()?;
        let cluster_id = r.compact_nullable_string()?;
        let node_id = r.i32()?;
        r.tags()?;
        Ok(Self {
            request,
            cluster_id,
            node_id,
        })
    }
}

impl Encodable for ApiVersionsRequestV5 {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if version < 5 {
            return self.request.encode(buf, version);
        }
        let mut w = Writer::default();
        w.compact_string(&self.request.client_software_name);
        w.compact_string(&self.request.client_software_version);
        w.compact_nullable_string(self.cluster_id.as_deref());
        w.i32(self.node_id);
        w.no_tags();
        buf.put_slice(&w.finish()?);
        Ok(())
    }
    fn compute_size(&self, version: i16) -> Result<usize> {
        let mut out = BytesMut::new();
        self.encode(&mut out, version)?;
        Ok(out.len())
    }
}

/// ApiVersions v5's response is v4's layout.
impl Adapted for ApiVersionsResponse {
    const FIRST_ADAPTED: i16 = 5;
    const CRATE_MAX: i16 = 4;
    fn read(r: &mut Reader) -> Result<Self> {
        r.crate_struct(Self::CRATE_MAX)
    }
    fn write(&self, w: &mut Writer) {
        w.crate_struct(self, Self::CRATE_MAX)
    }
}

// ---- Whole messages by API key, for tests and tools ---------------------------------------

/// Encodes a request of any served version (the adapted ones included).
pub fn encode_request(request: &RequestKind, version: i16, out: &mut BytesMut) -> Result<()> {
    macro_rules! adapted {
        ($($variant:ident),*) => {
            match request {
                $(RequestKind::$variant(r) => Versioned(r.clone()).encode(out, version),)*
                // Topic ids are not in the crate's struct: nil ones stand in.
                RequestKind::TxnOffsetCommit(r) => WithTopicIds {
                    topic_ids: vec![Uuid::nil(); r.topics.len()],
                    message: r.clone(),
                }
                .encode(out, version),
                RequestKind::ApiVersions(r) => ApiVersionsRequestV5 {
                    request: r.clone(),
                    cluster_id: None,
                    node_id: -1,
                }
                .encode(out, version),
                other => other.encode(out, version),
            }
        };
    }
    adapted!(OffsetCommit, OffsetFetch, ListOffsets, DeleteGroups)
}

/// Decodes a request of any served version of `key` (the adapted ones included), as the
/// broker's handlers decode it. An ApiVersions v5 request loses its cluster and node id
/// here (use [`ApiVersionsRequestV5`] to keep them).
pub fn decode_request(key: ApiKey, body: &mut Bytes, version: i16) -> Result<RequestKind> {
    if version <= crate_max(key) {
        return RequestKind::decode(key, body, version);
    }
    Ok(match key {
        ApiKey::OffsetCommit => RequestKind::OffsetCommit(Versioned::decode(body, version)?.0),
        ApiKey::OffsetFetch => RequestKind::OffsetFetch(Versioned::decode(body, version)?.0),
        ApiKey::ListOffsets => RequestKind::ListOffsets(Versioned::decode(body, version)?.0),
        ApiKey::DeleteGroups => RequestKind::DeleteGroups(Versioned::decode(body, version)?.0),
        ApiKey::ApiVersions => {
            RequestKind::ApiVersions(ApiVersionsRequestV5::decode(body, version)?.request)
        }
        ApiKey::TxnOffsetCommit => {
            RequestKind::TxnOffsetCommit(WithTopicIds::decode(body, version)?.message)
        }
        other => bail!("{other:?} v{version} is not adapted"),
    })
}

/// Decodes a response of any served version of `key` (the adapted ones included).
pub fn decode_response(key: ApiKey, body: &mut Bytes, version: i16) -> Result<ResponseKind> {
    if version <= crate_max(key) {
        return ResponseKind::decode(key, body, version);
    }
    Ok(match key {
        ApiKey::OffsetCommit => ResponseKind::OffsetCommit(Versioned::decode(body, version)?.0),
        ApiKey::OffsetFetch => ResponseKind::OffsetFetch(Versioned::decode(body, version)?.0),
        ApiKey::ListOffsets => ResponseKind::ListOffsets(Versioned::decode(body, version)?.0),
        ApiKey::DeleteGroups => ResponseKind::DeleteGroups(Versioned::decode(body, version)?.0),
        ApiKey::ApiVersions => ResponseKind::ApiVersions(Versioned::decode(body, version)?.0),
        ApiKey::TxnOffsetCommit => {
            ResponseKind::TxnOffsetCommit(WithTopicIds::decode(body, version)?.message)
        }
        other => bail!("{other:?} v{version} is not adapted"),
    })
}

/// The newest version of `key` the crate's own codec handles.
fn crate_max(key: ApiKey) -> i16 {
    match key {
        ApiKey::OffsetCommit => OffsetCommitRequest::CRATE_MAX,
        ApiKey::OffsetFetch => OffsetFetchRequest::CRATE_MAX,
        ApiKey::ListOffsets => ListOffsetsRequest::CRATE_MAX,
        ApiKey::DeleteGroups => DeleteGroupsRequest::CRATE_MAX,
        ApiKey::ApiVersions => ApiVersionsResponse::CRATE_MAX,
        ApiKey::TxnOffsetCommit => TXN_OFFSET_COMMIT_CRATE_MAX,
        other => other.valid_versions().max,
    }
}

#[cfg(test)]
mod tests;
