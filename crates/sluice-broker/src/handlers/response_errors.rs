//! [`ResponseErrors`]: whether a response carries a non-zero error code, at its top level or
//! in any entry (topic, partition, group, resource, member, ...), for the per-API error
//! counter (`sluice_request_errors_total`). One impl per response type a handler encodes:
//! [`super::encode`] requires it, so a new handler cannot forget to say. Reading the codes
//! walks the response's vectors; it allocates nothing.
//!
//! Produce and Fetch build their responses themselves (`ProduceCall`, `FetchCall`) and answer
//! the same question there.

use kafka_protocol::messages::*;

use crate::error_code::NONE;

/// See the module comment.
pub(crate) trait ResponseErrors {
    fn has_error(&self) -> bool;
}

fn code(c: i16) -> bool {
    c != NONE
}

/// A response of an adapted version answers as the message it wraps.
impl<T: ResponseErrors> ResponseErrors for sluice_protocol::adapted::Versioned<T> {
    fn has_error(&self) -> bool {
        self.0.has_error()
    }
}

/// A response that carries its topic ids beside it answers as the message.
impl<T: ResponseErrors> ResponseErrors for sluice_protocol::adapted::WithTopicIds<T> {
    fn has_error(&self) -> bool {
        self.message.has_error()
    }
}

/// Responses whose only error code is the top-level one.
macro_rules! top_level {
    ($($t:ty),* $(,)?) => {$(
        impl ResponseErrors for $t {
            fn has_error(&self) -> bool {
                code(self.error_code)
            }
        }
    )*};
}

top_level!(
    AddOffsetsToTxnResponse,
    ApiVersionsResponse,
    ConsumerGroupHeartbeatResponse,
    CreateDelegationTokenResponse,
    DescribeAclsResponse,
    DescribeClientQuotasResponse,
    DescribeClusterResponse,
    DescribeDelegationTokenResponse,
    EndTxnResponse,
    ExpireDelegationTokenResponse,
    HeartbeatResponse,
    InitProducerIdResponse,
    JoinGroupResponse,
    ListConfigResourcesResponse,
    ListGroupsResponse,
    ListTransactionsResponse,
    RenewDelegationTokenResponse,
    SaslAuthenticateResponse,
    SaslHandshakeResponse,
    SyncGroupResponse,
);

/// Responses whose codes are one per entry of one list (`$list`).
macro_rules! per_entry {
    ($($t:ty => $list:ident),* $(,)?) => {$(
        impl ResponseErrors for $t {
            fn has_error(&self) -> bool {
                self.$list.iter().any(|e| code(e.error_code))
            }
        }
    )*};
}

per_entry!(
    AlterClientQuotasResponse => entries,
    AlterConfigsResponse => responses,
    AlterUserScramCredentialsResponse => results,
    ConsumerGroupDescribeResponse => groups,
    CreateAclsResponse => results,
    CreatePartitionsResponse => results,
    DeleteGroupsResponse => results,
    DeleteTopicsResponse => responses,
    DescribeConfigsResponse => results,
    DescribeGroupsResponse => groups,
    DescribeTransactionsResponse => transaction_states,
    IncrementalAlterConfigsResponse => responses,
);

/// Responses whose codes are per partition under a list of topics (`$topics`, each with
/// `$parts`).
macro_rules! per_partition {
    ($($t:ty => $topics:ident . $parts:ident),* $(,)?) => {$(
        impl ResponseErrors for $t {
            fn has_error(&self) -> bool {
                self.$topics.iter().flat_map(|t| &t.$parts).any(|p| code(p.error_code))
            }
        }
    )*};
}

per_partition!(
    DeleteRecordsResponse => topics.partitions,
    DescribeProducersResponse => topics.partitions,
    ListOffsetsResponse => topics.partitions,
    OffsetCommitResponse => topics.partitions,
    OffsetForLeaderEpochResponse => topics.partitions,
    TxnOffsetCommitResponse => topics.partitions,
);

impl ResponseErrors for AddPartitionsToTxnResponse {
    fn has_error(&self) -> bool {
        let topic = |t: &add_partitions_to_txn_response::AddPartitionsToTxnTopicResult| {
            t.results_by_partition
                .iter()
                .any(|p| code(p.partition_error_code))
        };
        code(self.error_code)
            || self.results_by_topic_v3_and_below.iter().any(topic)
            || self
                .results_by_transaction
                .iter()
                .any(|r| r.topic_results.iter().any(topic))
    }
}

impl ResponseErrors for CreateTopicsResponse {
    fn has_error(&self) -> bool {
        self.topics
            .iter()
            .any(|t| code(t.error_code) || code(t.topic_config_error_code))
    }
}

impl ResponseErrors for DeleteAclsResponse {
    fn has_error(&self) -> bool {
        self.filter_results
            .iter()
            .any(|f| code(f.error_code) || f.matching_acls.iter().any(|a| code(a.error_code)))
    }
}

impl ResponseErrors for DescribeUserScramCredentialsResponse {
    fn has_error(&self) -> bool {
        code(self.error_code) || self.results.iter().any(|r| code(r.error_code))
    }
}

impl ResponseErrors for FindCoordinatorResponse {
    fn has_error(&self) -> bool {
        code(self.error_code) || self.coordinators.iter().any(|c| code(c.error_code))
    }
}

impl ResponseErrors for LeaveGroupResponse {
    fn has_error(&self) -> bool {
        code(self.error_code) || self.members.iter().any(|m| code(m.error_code))
    }
}

impl ResponseErrors for MetadataResponse {
    fn has_error(&self) -> bool {
        code(self.error_code)
            || self
                .topics
                .iter()
                .any(|t| code(t.error_code) || t.partitions.iter().any(|p| code(p.error_code)))
    }
}

impl ResponseErrors for DescribeLogDirsResponse {
    fn has_error(&self) -> bool {
        code(self.error_code) || self.results.iter().any(|d| code(d.error_code))
    }
}

impl ResponseErrors for DescribeTopicPartitionsResponse {
    fn has_error(&self) -> bool {
        self.topics
            .iter()
            .any(|t| code(t.error_code) || t.partitions.iter().any(|p| code(p.error_code)))
    }
}

impl ResponseErrors for OffsetDeleteResponse {
    fn has_error(&self) -> bool {
        code(self.error_code)
            || self
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .any(|p| code(p.error_code))
    }
}

impl ResponseErrors for OffsetFetchResponse {
    fn has_error(&self) -> bool {
        let groups = self.groups.iter().any(|g| {
            code(g.error_code)
                || g.topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .any(|p| code(p.error_code))
        });
        code(self.error_code)
            || groups
            || self
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .any(|p| code(p.error_code))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: a code anywhere in the response counts, and only a non-zero one.
    #[test]
    fn codes_are_found_at_every_level() {
        let mut r = MetadataResponse::default();
        let mut t = metadata_response::MetadataResponseTopic::default();
        t.partitions
            .push(metadata_response::MetadataResponsePartition::default());
        r.topics.push(t);
        assert!(!r.has_error());
        r.topics[0].partitions[0].error_code = 9;
        assert!(r.has_error(), "a partition's code");
        let mut c = CreateTopicsResponse::default();
        c.topics
            .push(create_topics_response::CreatableTopicResult::default());
        assert!(!c.has_error());
        c.topics[0].error_code = 36;
        assert!(c.has_error(), "a topic's code");
        let mut h = HeartbeatResponse::default();
        assert!(!h.has_error());
        h.error_code = 27;
        assert!(h.has_error(), "the top-level code");
    }
}
