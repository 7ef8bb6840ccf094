//! The fast tier for the security and configuration APIs: SASL handshake and
//! authentication, ACLs (the ACL APIs, and the exact refusal of each API whose check no
//! integration test reaches), client quotas, SCRAM credentials, the two AlterConfigs forms and
//! OffsetForLeaderEpoch, each against a real in-process `Server` over a loopback socket
//! (see `handlers.rs` for the tier). The integration suite drives the same APIs with Kafka's
//! own tools (`kafka-acls.sh`, `kafka-configs.sh`) and real clients over TLS.

use crate::common::requests::{create_topic, list_offsets_at, produce_values};
use crate::common::{topic_name, Client, InProcessBroker};
use bytes::Bytes;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

const NONE: i16 = 0;
const JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
    username=\"admin\" password=\"admin-pw\" user_admin=\"admin-pw\" user_alice=\"alice-pw\";";

// Kafka's enum values on the wire.
const RESOURCE_ANY: i8 = 1;
const RESOURCE_TOPIC: i8 = 2;
const PATTERN_ANY: i8 = 1;
const PATTERN_LITERAL: i8 = 3;
const OPERATION_ANY: i8 = 1;
const OPERATION_READ: i8 = 3;
const PERMISSION_ANY: i8 = 1;
const PERMISSION_ALLOW: i8 = 3;
const SCRAM_SHA_256: i8 = 1;
const CONFIG_SET: i8 = 0;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// A broker whose only listener is SASL_PLAINTEXT with PLAIN users admin and alice, an
/// authorizer, and admin as the super user.
fn secured_broker() -> InProcessBroker {
    InProcessBroker::start_with(|c| {
        c.set("listeners", "SASL_PLAINTEXT://127.0.0.1:0").unwrap();
        c.set("sasl.enabled.mechanisms", "PLAIN").unwrap();
        c.set("listener.name.sasl_plaintext.plain.sasl.jaas.config", JAAS)
            .unwrap();
        c.set(
            "authorizer.class.name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        )
        .unwrap();
        c.set("super.users", "User:admin").unwrap();
    })
}

fn handshake(client: &mut Client, mechanism: &str) -> SaslHandshakeResponse {
    let mut req = SaslHandshakeRequest::default();
    req.mechanism = s(mechanism);
    client.call(ApiKey::SaslHandshake, 1, &req)
}

/// PLAIN login on a fresh connection: the SaslAuthenticate error code.
fn login(broker: &InProcessBroker, user: &str, password: &str) -> (Client, i16) {
    let mut client = broker.client();
    assert_eq!(handshake(&mut client, "PLAIN").error_code, NONE);
    let mut req = SaslAuthenticateRequest::default();
    req.auth_bytes = Bytes::from(format!("\0{user}\0{password}"));
    let resp: SaslAuthenticateResponse = client.call(ApiKey::SaslAuthenticate, 2, &req);
    (client, resp.error_code)
}

fn acl_filter_any() -> DescribeAclsRequest {
    let mut f = DescribeAclsRequest::default();
    f.resource_type_filter = RESOURCE_ANY;
    f.pattern_type_filter = PATTERN_ANY;
    f.operation = OPERATION_ANY;
    f.permission_type = PERMISSION_ANY;
    // Nullable strings default to "" in kafka-protocol; null is "any".
    f.resource_name_filter = None;
    f.principal_filter = None;
    f.host_filter = None;
    f
}

#[test]
fn sasl_handshake_names_the_mechanisms_and_plain_checks_the_password() {
    let broker = secured_broker();
    let mut client = broker.client();
    let refused = handshake(&mut client, "GSSAPI");
    assert_eq!(
        refused.error_code,
        ResponseError::UnsupportedSaslMechanism.code()
    );
    assert_eq!(refused.mechanisms, vec![s("PLAIN")]);
    let (_, wrong) = login(&broker, "alice", "not-her-password");
    assert_eq!(wrong, ResponseError::SaslAuthenticationFailed.code());
    let (_, unknown) = login(&broker, "mallory", "alice-pw");
    assert_eq!(unknown, ResponseError::SaslAuthenticationFailed.code());
    let (mut alice, ok) = login(&broker, "alice", "alice-pw");
    assert_eq!(ok, NONE);
    // Authenticated: the connection now serves ordinary requests.
    let versions: ApiVersionsResponse = alice.call(
        ApiKey::ApiVersions,
        3,
        &crate::common::api_versions_request(),
    );
    assert_eq!(versions.error_code, NONE);
}

#[test]
fn acls_are_created_described_and_deleted_by_an_authorized_principal_only() {
    let broker = secured_broker();
    let (mut admin, ok) = login(&broker, "admin", "admin-pw");
    assert_eq!(ok, NONE);
    let (mut alice, ok) = login(&broker, "alice", "alice-pw");
    assert_eq!(ok, NONE);

    // Alice has no ALTER on the cluster.
    let read = OPERATION_READ;
    assert_eq!(
        grant(&mut alice, RESOURCE_TOPIC, "orders", "User:alice", read),
        ResponseError::ClusterAuthorizationFailed.code()
    );
    assert_eq!(
        grant(&mut admin, RESOURCE_TOPIC, "orders", "User:alice", read),
        NONE
    );

    let described: DescribeAclsResponse = admin.call(ApiKey::DescribeAcls, 2, &acl_filter_any());
    assert_eq!(described.error_code, NONE);
    assert_eq!(described.resources.len(), 1, "{described:?}");
    let r = &described.resources[0];
    assert_eq!(
        (r.resource_type, r.resource_name.as_str()),
        (RESOURCE_TOPIC, "orders")
    );
    assert_eq!(r.acls[0].principal.as_str(), "User:alice");
    assert_eq!(r.acls[0].operation, OPERATION_READ);
    let hidden: DescribeAclsResponse = alice.call(ApiKey::DescribeAcls, 2, &acl_filter_any());
    assert_eq!(
        hidden.error_code,
        ResponseError::ClusterAuthorizationFailed.code()
    );

    let deleted = delete_acls(&mut admin, RESOURCE_TOPIC, Some("orders"), PATTERN_LITERAL);
    assert_eq!(deleted.filter_results[0].error_code, NONE);
    assert_eq!(deleted.filter_results[0].matching_acls.len(), 1);
    let after: DescribeAclsResponse = admin.call(ApiKey::DescribeAcls, 2, &acl_filter_any());
    assert!(after.resources.is_empty(), "{after:?}");
}

/// DeleteAcls v2 with one filter: the resource type, name (None: any) and pattern type
/// given, any principal, host, operation and permission.
fn delete_acls(
    client: &mut Client,
    resource_type: i8,
    name: Option<&str>,
    pattern: i8,
) -> DeleteAclsResponse {
    let mut filter = DeleteAclsFilter::default();
    filter.resource_type_filter = resource_type;
    filter.resource_name_filter = name.map(s);
    filter.pattern_type_filter = pattern;
    filter.operation = OPERATION_ANY;
    filter.permission_type = PERMISSION_ANY;
    filter.principal_filter = None;
    filter.host_filter = None;
    let mut delete = DeleteAclsRequest::default();
    delete.filters = vec![filter];
    client.call(ApiKey::DeleteAcls, 2, &delete)
}

fn user_entity(user: &str) -> EntityData {
    let mut e = EntityData::default();
    e.entity_type = s("user");
    e.entity_name = Some(s(user));
    e
}

fn alter_quota(client: &mut Client, user: &str, key: &str, value: f64, remove: bool) -> i16 {
    let mut op = OpData::default();
    op.key = s(key);
    op.value = value;
    op.remove = remove;
    let mut entry = EntryData::default();
    entry.entity = vec![user_entity(user)];
    entry.ops = vec![op];
    let mut req = AlterClientQuotasRequest::default();
    req.entries = vec![entry];
    let resp: AlterClientQuotasResponse = client.call(ApiKey::AlterClientQuotas, 1, &req);
    resp.entries[0].error_code
}

fn user_quotas(client: &mut Client, user: &str) -> Vec<(String, f64)> {
    let mut component = ComponentData::default();
    component.entity_type = s("user");
    component.match_type = 0; // exact
    component._match = Some(s(user));
    let mut req = DescribeClientQuotasRequest::default();
    req.components = vec![component];
    let resp: DescribeClientQuotasResponse = client.call(ApiKey::DescribeClientQuotas, 1, &req);
    assert_eq!(resp.error_code, NONE);
    resp.entries
        .unwrap_or_default()
        .iter()
        .flat_map(|e| e.values.iter().map(|v| (v.key.to_string(), v.value)))
        .collect()
}

#[test]
fn client_quotas_are_set_described_and_removed() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(
        alter_quota(
            &mut client,
            "alice",
            "producer_byte_rate",
            1_048_576.0,
            false
        ),
        NONE
    );
    assert_eq!(
        user_quotas(&mut client, "alice"),
        vec![("producer_byte_rate".to_string(), 1_048_576.0)]
    );
    assert!(user_quotas(&mut client, "bob").is_empty());
    // A quota type the broker does not enforce is refused, not stored and ignored.
    assert_eq!(
        alter_quota(&mut client, "alice", "request_percentage", 50.0, false),
        ResponseError::InvalidRequest.code()
    );
    assert_eq!(
        alter_quota(&mut client, "alice", "producer_byte_rate", 0.0, true),
        NONE
    );
    assert!(user_quotas(&mut client, "alice").is_empty());
}

fn scram_infos(client: &mut Client, user: &str) -> (i16, Vec<(i8, i32)>) {
    let mut name = UserName::default();
    name.name = s(user);
    let mut req = DescribeUserScramCredentialsRequest::default();
    req.users = Some(vec![name]);
    let resp: DescribeUserScramCredentialsResponse =
        client.call(ApiKey::DescribeUserScramCredentials, 0, &req);
    let r = &resp.results[0];
    let infos = r
        .credential_infos
        .iter()
        .map(|c| (c.mechanism, c.iterations))
        .collect();
    (r.error_code, infos)
}

#[test]
fn scram_credentials_are_upserted_described_and_deleted() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    let mut upsert = ScramCredentialUpsertion::default();
    upsert.name = s("alice");
    upsert.mechanism = SCRAM_SHA_256;
    upsert.iterations = 8192;
    upsert.salt = Bytes::from_static(b"0123456789abcdef");
    upsert.salted_password = Bytes::from(vec![7u8; 32]);
    let mut req = AlterUserScramCredentialsRequest::default();
    req.upsertions = vec![upsert];
    let resp: AlterUserScramCredentialsResponse =
        client.call(ApiKey::AlterUserScramCredentials, 0, &req);
    assert_eq!(resp.results[0].error_code, NONE);
    assert_eq!(
        scram_infos(&mut client, "alice"),
        (NONE, vec![(SCRAM_SHA_256, 8192)])
    );

    let mut deletion = ScramCredentialDeletion::default();
    deletion.name = s("alice");
    deletion.mechanism = SCRAM_SHA_256;
    let mut req = AlterUserScramCredentialsRequest::default();
    req.deletions = vec![deletion];
    let resp: AlterUserScramCredentialsResponse =
        client.call(ApiKey::AlterUserScramCredentials, 0, &req);
    assert_eq!(resp.results[0].error_code, NONE);
    let (code, infos) = scram_infos(&mut client, "alice");
    assert_eq!(code, ResponseError::ResourceNotFound.code());
    assert!(infos.is_empty());
}

fn topic_config(client: &mut Client, topic: &str, key: &str) -> Option<String> {
    let mut resource = describe_configs_request::DescribeConfigsResource::default();
    resource.resource_type = RESOURCE_TOPIC;
    resource.resource_name = s(topic);
    resource.configuration_keys = Some(vec![s(key)]);
    let mut req = DescribeConfigsRequest::default();
    req.resources = vec![resource];
    let resp: DescribeConfigsResponse = client.call(ApiKey::DescribeConfigs, 4, &req);
    assert_eq!(resp.results[0].error_code, NONE);
    resp.results[0]
        .configs
        .iter()
        .find(|c| c.name.as_str() == key)
        .and_then(|c| c.value.as_ref().map(|v| v.to_string()))
}

#[test]
fn topic_configs_change_through_both_alter_forms() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "configs", 1), NONE);

    let mut set = incremental_alter_configs_request::AlterableConfig::default();
    set.name = s("retention.ms");
    set.config_operation = CONFIG_SET;
    set.value = Some(s("60000"));
    let mut resource = incremental_alter_configs_request::AlterConfigsResource::default();
    resource.resource_type = RESOURCE_TOPIC;
    resource.resource_name = s("configs");
    resource.configs = vec![set];
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![resource];
    let resp: IncrementalAlterConfigsResponse =
        client.call(ApiKey::IncrementalAlterConfigs, 1, &req);
    assert_eq!(resp.responses[0].error_code, NONE);
    assert_eq!(
        topic_config(&mut client, "configs", "retention.ms").as_deref(),
        Some("60000")
    );

    // The legacy form replaces every override, and refuses an unknown key whole.
    let alter = |name: &str, value: &str| {
        let mut c = alter_configs_request::AlterableConfig::default();
        c.name = s(name);
        c.value = Some(s(value));
        let mut r = alter_configs_request::AlterConfigsResource::default();
        r.resource_type = RESOURCE_TOPIC;
        r.resource_name = s("configs");
        r.configs = vec![c];
        let mut req = AlterConfigsRequest::default();
        req.resources = vec![r];
        req
    };
    let refused: AlterConfigsResponse =
        client.call(ApiKey::AlterConfigs, 2, &alter("no.such.config", "1"));
    assert_eq!(
        refused.responses[0].error_code,
        ResponseError::InvalidConfig.code()
    );
    let replaced: AlterConfigsResponse =
        client.call(ApiKey::AlterConfigs, 2, &alter("segment.ms", "3600000"));
    assert_eq!(replaced.responses[0].error_code, NONE);
    assert_eq!(
        topic_config(&mut client, "configs", "segment.ms").as_deref(),
        Some("3600000")
    );
    assert_ne!(
        topic_config(&mut client, "configs", "retention.ms").as_deref(),
        Some("60000"),
        "AlterConfigs replaces the overrides it does not name"
    );
}

#[test]
fn offset_for_leader_epoch_answers_the_log_end_of_epoch_0() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "epochs", 1), NONE);
    for _ in 0..3 {
        assert_eq!(
            produce_values(&mut client, "epochs", 0, &[b"a", b"b"]).0,
            NONE
        );
    }
    let ask = |topic: &str, partition: i32| {
        let mut p = OffsetForLeaderPartition::default();
        p.partition = partition;
        p.current_leader_epoch = 0;
        p.leader_epoch = 0;
        let mut t = OffsetForLeaderTopic::default();
        t.topic = topic_name(topic);
        t.partitions = vec![p];
        let mut req = OffsetForLeaderEpochRequest::default();
        req.replica_id = (-1).into();
        req.topics = vec![t];
        req
    };
    let resp: OffsetForLeaderEpochResponse =
        client.call(ApiKey::OffsetForLeaderEpoch, 4, &ask("epochs", 0));
    let p = &resp.topics[0].partitions[0];
    assert_eq!(p.error_code, NONE);
    assert_eq!((p.leader_epoch, p.end_offset), (0, 6));
    let unknown: OffsetForLeaderEpochResponse =
        client.call(ApiKey::OffsetForLeaderEpoch, 4, &ask("epochs", 7));
    assert_eq!(
        unknown.topics[0].partitions[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
}

// -- every API refuses a principal without the ACL it needs --------------------------------

const RESOURCE_GROUP: i8 = 3;
const RESOURCE_TRANSACTIONAL_ID: i8 = 5;
const OPERATION_CREATE: i8 = 5;
const OPERATION_WRITE: i8 = 4;
const OPERATION_DESCRIBE: i8 = 8;
const TOPIC_DENIED: i16 = 29; // TOPIC_AUTHORIZATION_FAILED
const GROUP_DENIED: i16 = 30; // GROUP_AUTHORIZATION_FAILED
const CLUSTER_DENIED: i16 = 31; // CLUSTER_AUTHORIZATION_FAILED
const TXN_ID_DENIED: i16 = 53; // TRANSACTIONAL_ID_AUTHORIZATION_FAILED

/// CreateAcls v2 of one ALLOW binding for any host; its result code.
fn grant(admin: &mut Client, resource_type: i8, name: &str, principal: &str, op: i8) -> i16 {
    let mut creation = AclCreation::default();
    creation.resource_type = resource_type;
    creation.resource_name = s(name);
    creation.resource_pattern_type = PATTERN_LITERAL;
    creation.principal = s(principal);
    creation.host = s("*");
    creation.operation = op;
    creation.permission_type = PERMISSION_ALLOW;
    let mut create = CreateAclsRequest::default();
    create.creations = vec![creation];
    let resp: CreateAclsResponse = admin.call(ApiKey::CreateAcls, 2, &create);
    resp.results[0].error_code
}

/// The secured broker with topic `t` (one partition, two records) and, committed by admin,
/// offsets of the standalone groups `g-one` and `g-two`; admin's and alice's sessions.
fn broker_with_data() -> (InProcessBroker, Client, Client) {
    let broker = secured_broker();
    let (mut admin, ok) = login(&broker, "admin", "admin-pw");
    assert_eq!(ok, NONE);
    assert_eq!(create_topic(&mut admin, "t", 1), NONE);
    assert_eq!(produce_values(&mut admin, "t", 0, &[b"a", b"b"]).0, NONE);
    for g in ["g-one", "g-two"] {
        assert_eq!(commit_offset(&mut admin, g, "t", 1), NONE);
    }
    let (alice, ok) = login(&broker, "alice", "alice-pw");
    assert_eq!(ok, NONE);
    (broker, admin, alice)
}

/// OffsetCommit v8 of a standalone group (no member): the partition's code.
fn commit_offset(client: &mut Client, group: &str, topic: &str, offset: i64) -> i16 {
    use offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
    let mut p = OffsetCommitRequestPartition::default();
    p.committed_offset = offset;
    let mut t = OffsetCommitRequestTopic::default();
    t.name = topic_name(topic);
    t.partitions = vec![p];
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(s(group));
    req.generation_id_or_member_epoch = -1;
    req.topics = vec![t];
    let resp: OffsetCommitResponse = client.call(ApiKey::OffsetCommit, 8, &req);
    resp.topics[0].partitions[0].error_code
}

/// Metadata v12 naming one topic, auto-creation allowed: the topic's code.
fn metadata_auto_create(client: &mut Client, topic: &str) -> i16 {
    let mut t = metadata_request::MetadataRequestTopic::default();
    t.name = Some(topic_name(topic));
    let mut req = MetadataRequest::default();
    req.topics = Some(vec![t]);
    req.allow_auto_topic_creation = true;
    let resp: MetadataResponse = client.call(ApiKey::Metadata, 12, &req);
    resp.topics[0].error_code
}

// Goal: the topic APIs without a check of their own in another test answer
// TOPIC_AUTHORIZATION_FAILED to a principal without the operation Kafka asks for (ListOffsets
// DESCRIBE, DeleteRecords DELETE, CreatePartitions ALTER), and Metadata's auto-creation needs
// CREATE even when the principal may DESCRIBE the name: nothing is created without it.
#[test]
fn topic_apis_refuse_a_principal_without_acls() {
    let (_broker, mut admin, mut alice) = broker_with_data();
    assert_eq!(list_offsets_at(&mut alice, "t", 0, -1).0, TOPIC_DENIED);
    assert_eq!(list_offsets_at(&mut admin, "t", 0, -1), (NONE, 2));

    let mut dp = delete_records_request::DeleteRecordsPartition::default();
    dp.offset = 1;
    let mut dt = delete_records_request::DeleteRecordsTopic::default();
    dt.name = topic_name("t");
    dt.partitions = vec![dp];
    let mut delete = DeleteRecordsRequest::default();
    delete.topics = vec![dt];
    delete.timeout_ms = 10_000;
    let resp: DeleteRecordsResponse = alice.call(ApiKey::DeleteRecords, 2, &delete);
    assert_eq!(resp.topics[0].partitions[0].error_code, TOPIC_DENIED);
    assert_eq!(list_offsets_at(&mut admin, "t", 0, -2), (NONE, 0));

    let mut ct = create_partitions_request::CreatePartitionsTopic::default();
    ct.name = topic_name("t");
    ct.count = 3;
    ct.assignments = None;
    let mut grow = CreatePartitionsRequest::default();
    grow.topics = vec![ct];
    grow.timeout_ms = 10_000;
    let resp: CreatePartitionsResponse = alice.call(ApiKey::CreatePartitions, 3, &grow);
    assert_eq!(resp.results[0].error_code, TOPIC_DENIED);

    assert_eq!(metadata_auto_create(&mut alice, "auto"), TOPIC_DENIED);
    let describe = OPERATION_DESCRIBE;
    assert_eq!(
        grant(&mut admin, RESOURCE_TOPIC, "auto", "User:alice", describe),
        NONE
    );
    assert_eq!(metadata_auto_create(&mut alice, "auto"), TOPIC_DENIED);
    assert_eq!(
        list_offsets_at(&mut admin, "auto", 0, -1).0,
        ResponseError::UnknownTopicOrPartition.code(),
        "created without CREATE"
    );
    assert_eq!(
        grant(
            &mut admin,
            RESOURCE_TOPIC,
            "auto",
            "User:alice",
            OPERATION_CREATE
        ),
        NONE
    );
    assert_eq!(metadata_auto_create(&mut alice, "auto"), NONE);
}

// Goal: the classic group APIs without a check in another test refuse a principal without
// the group ACL: DescribeGroups, DeleteGroups, OffsetCommit and OffsetFetch answer
// GROUP_AUTHORIZATION_FAILED, and ListGroups lists only the groups it may DESCRIBE.
#[test]
fn group_apis_refuse_a_principal_without_acls() {
    let (_broker, mut admin, mut alice) = broker_with_data();
    let listed = |client: &mut Client| {
        let resp: ListGroupsResponse =
            client.call(ApiKey::ListGroups, 5, &ListGroupsRequest::default());
        assert_eq!(resp.error_code, NONE);
        let mut ids: Vec<String> = resp.groups.iter().map(|g| g.group_id.to_string()).collect();
        ids.sort();
        ids
    };
    assert!(listed(&mut alice).is_empty());
    assert_eq!(
        grant(
            &mut admin,
            RESOURCE_GROUP,
            "g-two",
            "User:alice",
            OPERATION_DESCRIBE
        ),
        NONE
    );
    assert_eq!(listed(&mut alice), vec!["g-two"]);
    assert_eq!(listed(&mut admin), vec!["g-one", "g-two"]);

    let mut describe = DescribeGroupsRequest::default();
    describe.groups = vec![GroupId(s("g-one"))];
    let resp: DescribeGroupsResponse = alice.call(ApiKey::DescribeGroups, 5, &describe);
    assert_eq!(resp.groups[0].error_code, GROUP_DENIED);

    let mut delete = DeleteGroupsRequest::default();
    delete.groups_names = vec![GroupId(s("g-one"))];
    let resp: DeleteGroupsResponse = alice.call(ApiKey::DeleteGroups, 2, &delete);
    assert_eq!(resp.results[0].error_code, GROUP_DENIED);

    assert_eq!(commit_offset(&mut alice, "g-one", "t", 2), GROUP_DENIED);

    let mut ft = offset_fetch_request::OffsetFetchRequestTopics::default();
    ft.name = topic_name("t");
    ft.partition_indexes = vec![0];
    let mut fg = offset_fetch_request::OffsetFetchRequestGroup::default();
    fg.group_id = GroupId(s("g-one"));
    fg.member_epoch = -1;
    fg.topics = Some(vec![ft]);
    let mut fetch = OffsetFetchRequest::default();
    fetch.groups = vec![fg];
    let resp: OffsetFetchResponse = alice.call(ApiKey::OffsetFetch, 8, &fetch);
    assert_eq!(resp.groups[0].error_code, GROUP_DENIED);
    let resp: OffsetFetchResponse = admin.call(ApiKey::OffsetFetch, 8, &fetch);
    assert_eq!(resp.groups[0].topics[0].partitions[0].committed_offset, 1);
}

/// TxnOffsetCommit v3 of offset 1 on `t`-0 for group `g-one`, a made-up producer: the
/// partition's code.
fn txn_offset_commit(client: &mut Client, transactional_id: &str) -> i16 {
    use txn_offset_commit_request::{TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic};
    let mut p = TxnOffsetCommitRequestPartition::default();
    p.committed_offset = 1;
    let mut t = TxnOffsetCommitRequestTopic::default();
    t.name = topic_name("t");
    t.partitions = vec![p];
    let mut req = TxnOffsetCommitRequest::default();
    req.transactional_id = TransactionalId(s(transactional_id));
    req.group_id = GroupId(s("g-one"));
    req.producer_id = ProducerId(7);
    req.generation_id = -1;
    req.topics = vec![t];
    let resp: TxnOffsetCommitResponse = client.call(ApiKey::TxnOffsetCommit, 3, &req);
    resp.topics[0].partitions[0].error_code
}

// Goal: the cluster and transaction APIs without a check in another test refuse a principal
// without ACLs: DescribeUserScramCredentials and DeleteAcls with CLUSTER_AUTHORIZATION_FAILED
// (and DeleteAcls deletes nothing), TxnOffsetCommit with TRANSACTIONAL_ID_AUTHORIZATION_FAILED
// and, once the transactional id is allowed, GROUP_AUTHORIZATION_FAILED.
#[test]
fn cluster_and_transaction_apis_refuse_a_principal_without_acls() {
    let (_broker, mut admin, mut alice) = broker_with_data();
    let resp: DescribeUserScramCredentialsResponse = alice.call(
        ApiKey::DescribeUserScramCredentials,
        0,
        &DescribeUserScramCredentialsRequest::default(),
    );
    assert_eq!(resp.error_code, CLUSTER_DENIED);

    assert_eq!(
        grant(&mut admin, RESOURCE_TOPIC, "t", "User:bob", OPERATION_READ),
        NONE
    );
    let resp = delete_acls(&mut alice, RESOURCE_ANY, None, PATTERN_ANY);
    assert_eq!(resp.filter_results[0].error_code, CLUSTER_DENIED);
    assert!(resp.filter_results[0].matching_acls.is_empty());
    let left: DescribeAclsResponse = admin.call(ApiKey::DescribeAcls, 2, &acl_filter_any());
    assert_eq!(left.resources.len(), 1, "{left:?}");

    assert_eq!(txn_offset_commit(&mut alice, "tx"), TXN_ID_DENIED);
    let txn = RESOURCE_TRANSACTIONAL_ID;
    assert_eq!(
        grant(&mut admin, txn, "tx", "User:alice", OPERATION_WRITE),
        NONE
    );
    assert_eq!(txn_offset_commit(&mut alice, "tx"), GROUP_DENIED);
}
