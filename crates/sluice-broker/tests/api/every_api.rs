//! Every row of the broker's handler table, at every version it serves, sent to an
//! in-process broker: the fast tier's floor under each handler. A new API or a widened
//! version range is covered here the moment its row exists (its request comes from the
//! shared seeds, which the decoder fuzzing also needs), so no handler ships without an
//! in-process check that it answers. Deeper checks of each API's answers and error codes
//! live in the per-area files (`handlers.rs`, `admin.rs`, `groups.rs`, `transactions.rs`,
//! `security_apis.rs`).

use crate::common::seeds::{seed_body, served};
use crate::common::InProcessBroker;
use bytes::Buf;
use kafka_protocol::messages::{ApiKey, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Decodable;

// Goal: each served (API, version) gets exactly one response on its own connection, with its
// correlation id, that decodes as that API's response at that version with no bytes left
// over; a handler that closed the connection, answered with the wrong shape or never
// answered fails here (the client's read timeout is 30 s).
#[test]
fn every_api_answers_every_version_it_serves() {
    let start = || InProcessBroker::start_with(|c| c.group.group_initial_rebalance_delay_ms = 0);
    let shared = start();
    let mut answered = 0;
    for (key, version) in served() {
        let what = format!("{key:?} v{version}");
        // Each JoinGroup seed joins the same group as a new member that never rejoins, so a
        // second one would wait out the first one's rebalance timeout: a broker of its own.
        let own = (key == ApiKey::JoinGroup).then(start);
        let broker = own.as_ref().unwrap_or(&shared);
        let mut client = broker.client();
        let frame = client.frame_body(key, version, &seed_body(key, version));
        std::io::Write::write_all(&mut client.stream, &frame).expect("send");
        let mut body = client
            .read_frame()
            .unwrap_or_else(|| panic!("{what}: the broker closed the connection"));
        let header = ResponseHeader::decode(&mut body, key.response_header_version(version))
            .unwrap_or_else(|e| panic!("{what}: response header: {e}"));
        assert_eq!(header.correlation_id, client.correlation_id(), "{what}");
        let response = sluice_protocol::adapted::decode_response(key, &mut body, version)
            .unwrap_or_else(|e| panic!("{what}: response body: {e}"));
        assert_eq!(body.remaining(), 0, "{what}: bytes after the response");
        assert_eq!(api_key(&response), key, "{what}");
        answered += 1;
    }
    assert!(
        answered >= sluice_broker::api_table::apis().len(),
        "{answered}"
    );
}

/// The API a decoded response belongs to.
fn api_key(response: &ResponseKind) -> ApiKey {
    macro_rules! keys {
        ($($variant:ident),* $(,)?) => {
            match response {
                $(ResponseKind::$variant(_) => ApiKey::$variant,)*
                other => panic!("unexpected response kind {other:?}"),
            }
        };
    }
    keys!(
        Produce,
        Fetch,
        ListOffsets,
        Metadata,
        OffsetCommit,
        OffsetFetch,
        FindCoordinator,
        JoinGroup,
        Heartbeat,
        LeaveGroup,
        SyncGroup,
        DescribeGroups,
        ListGroups,
        SaslHandshake,
        ApiVersions,
        CreateTopics,
        DeleteTopics,
        DeleteRecords,
        InitProducerId,
        OffsetForLeaderEpoch,
        AddPartitionsToTxn,
        AddOffsetsToTxn,
        EndTxn,
        TxnOffsetCommit,
        DescribeAcls,
        CreateAcls,
        DeleteAcls,
        DescribeConfigs,
        AlterConfigs,
        CreatePartitions,
        DeleteGroups,
        IncrementalAlterConfigs,
        OffsetDelete,
        DescribeClientQuotas,
        AlterClientQuotas,
        DescribeUserScramCredentials,
        AlterUserScramCredentials,
        DescribeCluster,
        DescribeProducers,
        DescribeTransactions,
        ListTransactions,
        ListConfigResources,
        DescribeTopicPartitions,
        DescribeLogDirs,
        ConsumerGroupHeartbeat,
        ConsumerGroupDescribe,
        SaslAuthenticate,
        CreateDelegationToken,
        RenewDelegationToken,
        ExpireDelegationToken,
        DescribeDelegationToken,
    )
}
