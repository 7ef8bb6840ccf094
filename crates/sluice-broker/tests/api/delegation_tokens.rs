//! The fast tier for delegation tokens (CreateDelegationToken, RenewDelegationToken,
//! ExpireDelegationToken, DescribeDelegationToken, and SASL/SCRAM logins with a token),
//! against a real in-process `Server` over a loopback socket, on a manual clock so tokens
//! expire when a test moves it. Each test checks Kafka's answer for one family of cases:
//! where token requests are refused, the owner/renewer rules, the v3 owner and its ACL, the
//! bounds, and the SCRAM login as the token's owner. The integration suite drives the same
//! with `kafka-delegation-tokens.sh` and the Java client (`test_delegation_tokens.py`).

use crate::common::requests::{create_topic, produce_values};
use crate::common::{Client, InProcessBroker};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use bytes::Bytes;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_delegation_token_request::CreatableRenewers;
use kafka_protocol::messages::describe_delegation_token_request::DescribeDelegationTokenOwner;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use ring::{digest, hmac, pbkdf2};

const NONE: i16 = 0;
const KEY: &str = "the-token-secret";
const JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
    user_admin=\"admin-pw\" user_alice=\"alice-pw\" user_bob=\"bob-pw\" user_eve=\"eve-pw\";";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn code(e: ResponseError) -> i16 {
    e.code()
}

/// SASL_PLAINTEXT with PLAIN users (admin, alice, bob, eve) and both SCRAM mechanisms, an
/// authorizer with admin as super user, and tokens on (`key`), on a manual clock.
fn token_broker(key: &str) -> InProcessBroker {
    let key = key.to_string();
    InProcessBroker::start_manual(move |c| {
        c.set("listeners", "SASL_PLAINTEXT://127.0.0.1:0").unwrap();
        c.set(
            "sasl.enabled.mechanisms",
            "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        )
        .unwrap();
        c.set("listener.name.sasl_plaintext.plain.sasl.jaas.config", JAAS)
            .unwrap();
        c.set(
            "authorizer.class.name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        )
        .unwrap();
        c.set("super.users", "User:admin").unwrap();
        c.set("delegation.token.secret.key", &key).unwrap();
        c.set("delegation.token.expiry.time.ms", "60000").unwrap();
    })
}

fn handshake(client: &mut Client, mechanism: &str) -> i16 {
    let mut req = SaslHandshakeRequest::default();
    req.mechanism = s(mechanism);
    let resp: SaslHandshakeResponse = client.call(ApiKey::SaslHandshake, 1, &req);
    resp.error_code
}

fn authenticate(client: &mut Client, bytes: Vec<u8>) -> SaslAuthenticateResponse {
    let mut req = SaslAuthenticateRequest::default();
    req.auth_bytes = Bytes::from(bytes);
    client.call(ApiKey::SaslAuthenticate, 2, &req)
}

/// PLAIN login; panics unless it succeeds.
fn login(broker: &InProcessBroker, user: &str) -> Client {
    let mut client = broker.client();
    assert_eq!(handshake(&mut client, "PLAIN"), NONE);
    let resp = authenticate(&mut client, format!("\0{user}\0{user}-pw").into_bytes());
    assert_eq!(resp.error_code, NONE, "{user}");
    client
}

/// A SCRAM-SHA-256 login as `user` with `password`, with `tokenauth=true` when `token`:
/// the connection and the SaslAuthenticate error code of the step that ended it.
fn scram_login(broker: &InProcessBroker, user: &str, password: &str, token: bool) -> (Client, i16) {
    let mut client = broker.client();
    assert_eq!(handshake(&mut client, "SCRAM-SHA-256"), NONE);
    let ext = if token { ",tokenauth=true" } else { "" };
    let first_bare = format!("n={user},r=clientnonce123{ext}");
    let first = authenticate(&mut client, format!("n,,{first_bare}").into_bytes());
    if first.error_code != NONE {
        return (client, first.error_code);
    }
    let server_first = String::from_utf8(first.auth_bytes.to_vec()).unwrap();
    let field = |k: &str| {
        server_first
            .split(',')
            .find_map(|f| f.strip_prefix(k))
            .unwrap()
            .to_string()
    };
    let (nonce, salt, iterations) = (field("r="), field("s="), field("i="));
    let mut salted = [0u8; 32];
    pbkdf2::derive(
        pbkdf2::PBKDF2_HMAC_SHA256,
        iterations.parse().unwrap(),
        &B64.decode(salt).unwrap(),
        password.as_bytes(),
        &mut salted,
    );
    let mac = |key: &[u8], data: &[u8]| {
        hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data)
            .as_ref()
            .to_vec()
    };
    let client_key = mac(&salted, b"Client Key");
    let stored_key = digest::digest(&digest::SHA256, &client_key);
    let without_proof = format!("c=biws,r={nonce}");
    let auth = format!("{first_bare},{server_first},{without_proof}");
    let signature = mac(stored_key.as_ref(), auth.as_bytes());
    let proof: Vec<u8> = client_key
        .iter()
        .zip(&signature)
        .map(|(a, b)| a ^ b)
        .collect();
    let last = format!("{without_proof},p={}", B64.encode(proof));
    let resp = authenticate(&mut client, last.into_bytes());
    (client, resp.error_code)
}

fn renewer(kind: &str, name: &str) -> CreatableRenewers {
    let mut r = CreatableRenewers::default();
    r.principal_type = s(kind);
    r.principal_name = s(name);
    r
}

/// CreateDelegationToken at `version` with these renewers and (v3) owner.
fn create(
    client: &mut Client,
    version: i16,
    renewers: Vec<CreatableRenewers>,
    owner: Option<&str>,
) -> CreateDelegationTokenResponse {
    let mut req = CreateDelegationTokenRequest::default();
    req.renewers = renewers;
    req.max_lifetime_ms = -1;
    if let Some(owner) = owner {
        req.owner_principal_type = Some(s("User"));
        req.owner_principal_name = Some(s(owner));
    }
    client.call(ApiKey::CreateDelegationToken, version, &req)
}

fn renew(client: &mut Client, hmac: &Bytes, period_ms: i64) -> RenewDelegationTokenResponse {
    let mut req = RenewDelegationTokenRequest::default();
    req.hmac = hmac.clone();
    req.renew_period_ms = period_ms;
    client.call(ApiKey::RenewDelegationToken, 2, &req)
}

fn expire(client: &mut Client, hmac: &Bytes, period_ms: i64) -> ExpireDelegationTokenResponse {
    let mut req = ExpireDelegationTokenRequest::default();
    req.hmac = hmac.clone();
    req.expiry_time_period_ms = period_ms;
    client.call(ApiKey::ExpireDelegationToken, 2, &req)
}

/// DescribeDelegationToken v3: the error code and the token ids listed.
fn describe(client: &mut Client, owners: Option<&[&str]>) -> (i16, Vec<String>) {
    let mut req = DescribeDelegationTokenRequest::default();
    req.owners = owners.map(|o| {
        o.iter()
            .map(|name| {
                let mut owner = DescribeDelegationTokenOwner::default();
                owner.principal_type = s("User");
                owner.principal_name = s(name);
                owner
            })
            .collect()
    });
    let resp: DescribeDelegationTokenResponse =
        client.call(ApiKey::DescribeDelegationToken, 3, &req);
    let ids = resp.tokens.iter().map(|t| t.token_id.to_string()).collect();
    (resp.error_code, ids)
}

fn grant(admin: &mut Client, resource_type: i8, name: &str, principal: &str, op: i8) {
    let mut c = AclCreation::default();
    c.resource_type = resource_type;
    c.resource_name = s(name);
    c.resource_pattern_type = 3; // LITERAL
    c.principal = s(principal);
    c.host = s("*");
    c.operation = op;
    c.permission_type = 3; // ALLOW
    let mut req = CreateAclsRequest::default();
    req.creations = vec![c];
    let resp: CreateAclsResponse = admin.call(ApiKey::CreateAcls, 2, &req);
    assert_eq!(resp.results[0].error_code, NONE);
}

// Goal: Kafka refuses every token API on a PLAINTEXT listener
// (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, before anything else) and answers
// DELEGATION_TOKEN_AUTH_DISABLED on a SASL listener without a secret key.
#[test]
fn plaintext_is_not_allowed_and_no_key_is_disabled() {
    let plain = InProcessBroker::start_with(|c| {
        c.set("delegation.token.secret.key", KEY).unwrap();
    });
    let mut client = plain.client();
    let not_allowed = code(ResponseError::DelegationTokenRequestNotAllowed);
    assert_eq!(create(&mut client, 3, vec![], None).error_code, not_allowed);
    let hmac = Bytes::from_static(&[1u8; 64]);
    let renewed = renew(&mut client, &hmac, 0);
    assert_eq!(
        (renewed.error_code, renewed.expiry_timestamp_ms),
        (not_allowed, -1)
    );
    assert_eq!(expire(&mut client, &hmac, -1).error_code, not_allowed);
    assert_eq!(describe(&mut client, None).0, not_allowed);

    let off = token_broker("");
    let mut alice = login(&off, "alice");
    let disabled = code(ResponseError::DelegationTokenAuthDisabled);
    assert_eq!(create(&mut alice, 1, vec![], None).error_code, disabled);
    assert_eq!(renew(&mut alice, &hmac, 0).error_code, disabled);
    assert_eq!(expire(&mut alice, &hmac, 0).error_code, disabled);
    assert_eq!(describe(&mut alice, None).0, disabled);
}

// Goal: the owner/renewer rules, describe's filtering, expiry and removal, each with Kafka's
// code; the HMAC is HMAC-SHA512(key, token id); renewal never passes the max timestamp.
#[test]
fn create_renew_expire_and_describe_follow_kafka() {
    let broker = token_broker(KEY);
    let mut alice = login(&broker, "alice");
    let mut bob = login(&broker, "bob");
    let mut eve = login(&broker, "eve");
    let t = create(&mut alice, 1, vec![renewer("User", "bob")], None);
    assert_eq!(t.error_code, NONE);
    assert_eq!(
        (t.principal_type.as_str(), t.principal_name.as_str()),
        ("User", "alice")
    );
    let key = hmac::Key::new(hmac::HMAC_SHA512, KEY.as_bytes());
    assert_eq!(
        t.hmac.as_ref(),
        hmac::sign(&key, t.token_id.as_bytes()).as_ref()
    );
    assert_eq!(t.expiry_timestamp_ms - t.issue_timestamp_ms, 60_000);
    assert_eq!(
        t.max_timestamp_ms - t.issue_timestamp_ms,
        7 * 24 * 3_600_000
    );

    // Owners and renewers see it; eve (no ACL) does not; an empty owner list lists nothing.
    let id = t.token_id.to_string();
    assert_eq!(describe(&mut alice, None), (NONE, vec![id.clone()]));
    assert_eq!(
        describe(&mut bob, Some(&["alice"])),
        (NONE, vec![id.clone()])
    );
    assert_eq!(describe(&mut eve, None), (NONE, vec![]));
    assert_eq!(describe(&mut alice, Some(&[])), (NONE, vec![]));
    assert_eq!(describe(&mut alice, Some(&["carol"])), (NONE, vec![]));
    let mut admin = login(&broker, "admin");
    grant(&mut admin, 7, "User:alice", "User:eve", 14); // DESCRIBE_TOKENS on USER alice
    assert_eq!(describe(&mut eve, None), (NONE, vec![id.clone()]));

    let mismatch = code(ResponseError::DelegationTokenOwnerMismatch);
    assert_eq!(renew(&mut eve, &t.hmac, 0).error_code, mismatch);
    assert_eq!(expire(&mut eve, &t.hmac, -1).error_code, mismatch);
    let unknown = Bytes::from_static(&[9u8; 64]);
    let not_found = code(ResponseError::DelegationTokenNotFound);
    assert_eq!(renew(&mut bob, &unknown, 0).error_code, not_found);
    assert_eq!(expire(&mut bob, &Bytes::new(), 0).error_code, not_found);

    broker.advance_ms(10_000);
    let renewed = renew(&mut bob, &t.hmac, 5_000);
    assert_eq!(renewed.error_code, NONE);
    assert_eq!(renewed.expiry_timestamp_ms, t.issue_timestamp_ms + 15_000);
    let shortened = expire(&mut alice, &t.hmac, 1_000);
    assert_eq!(shortened.expiry_timestamp_ms, t.issue_timestamp_ms + 11_000);
    broker.advance_ms(1_001);
    let expired = code(ResponseError::DelegationTokenExpired);
    assert_eq!(renew(&mut alice, &t.hmac, 0).error_code, expired);
    assert_eq!(expire(&mut alice, &t.hmac, 0).error_code, expired);
    // Listed until removed; a negative period removes it even when expired.
    assert_eq!(describe(&mut alice, None).1, vec![id]);
    let removed = expire(&mut alice, &t.hmac, -1);
    assert_eq!(removed.error_code, NONE);
    assert_eq!(describe(&mut alice, None), (NONE, vec![]));
    assert_eq!(renew(&mut alice, &t.hmac, 0).error_code, not_found);
}

// Goal: v3's owner needs CREATE_TOKENS on that USER (DELEGATION_TOKEN_AUTHORIZATION_FAILED),
// answers with the requester, and bad renewers get INVALID_PRINCIPAL_TYPE,
// POLICY_VIOLATION (too many) or INVALID_REQUEST (empty or too long), never a panic.
#[test]
fn v3_owner_and_bad_renewers() {
    let broker = token_broker(KEY);
    let mut alice = login(&broker, "alice");
    let mut admin = login(&broker, "admin");
    let denied = create(&mut alice, 3, vec![], Some("carol"));
    assert_eq!(
        denied.error_code,
        code(ResponseError::DelegationTokenAuthorizationFailed)
    );
    assert_eq!(denied.principal_name.as_str(), "carol");
    assert_eq!(denied.token_requester_principal_name.as_str(), "alice");
    let for_carol = create(&mut admin, 3, vec![], Some("carol"));
    assert_eq!(for_carol.error_code, NONE);
    assert_eq!(for_carol.principal_name.as_str(), "carol");
    assert_eq!(for_carol.token_requester_principal_name.as_str(), "admin");
    grant(&mut admin, 7, "User:dave", "User:alice", 13); // CREATE_TOKENS on USER dave
    assert_eq!(create(&mut alice, 3, vec![], Some("dave")).error_code, NONE);
    // A null owner list: every token (the default request's list is empty: none).
    let mut all = DescribeDelegationTokenRequest::default();
    all.owners = None;
    let resp: DescribeDelegationTokenResponse =
        admin.call(ApiKey::DescribeDelegationToken, 3, &all);
    let dave = resp
        .tokens
        .iter()
        .find(|t| t.principal_name.as_str() == "dave");
    assert_eq!(
        dave.unwrap().token_requester_principal_name.as_str(),
        "alice"
    );

    let group = create(&mut alice, 2, vec![renewer("Group", "g")], None);
    assert_eq!(group.error_code, code(ResponseError::InvalidPrincipalType));
    let many: Vec<_> = (0..1000)
        .map(|i| renewer("User", &format!("u{i}")))
        .collect();
    assert_eq!(
        create(&mut alice, 2, many, None).error_code,
        code(ResponseError::PolicyViolation)
    );
    let long = renewer("User", &"x".repeat(5000));
    assert_eq!(
        create(&mut alice, 2, vec![long], None).error_code,
        code(ResponseError::InvalidRequest)
    );
    let empty = renewer("User", "");
    assert_eq!(
        create(&mut alice, 1, vec![empty], None).error_code,
        code(ResponseError::InvalidRequest)
    );
    // A truncated body closes that connection only.
    let mut raw = broker.client();
    let frame = raw.frame_body(ApiKey::CreateDelegationToken, 2, &[0xff, 0xff]);
    std::io::Write::write_all(&mut raw.stream, &frame).unwrap();
    assert!(raw.read_frame().is_none());
    assert_eq!(describe(&mut alice, None).0, NONE);
}

// Goal: a SCRAM login with `tokenauth=true`, the token id and base64(HMAC) authenticates as
// the token's owner (its ACLs apply), may not manage tokens, and stops working once the
// token expires; the same id without the extension, or a wrong password, fails.
#[test]
fn scram_login_with_a_token_is_the_owner() {
    let broker = token_broker(KEY);
    let mut admin = login(&broker, "admin");
    assert_eq!(create_topic(&mut admin, "t", 1), NONE);
    grant(&mut admin, 2, "t", "User:alice", 4); // WRITE on topic t
    let mut alice = login(&broker, "alice");
    let t = create(&mut alice, 1, vec![], None);
    assert_eq!(t.error_code, NONE);
    let (id, password) = (t.token_id.to_string(), B64.encode(&t.hmac));
    let failed = code(ResponseError::SaslAuthenticationFailed);

    let (mut with_token, ok) = scram_login(&broker, &id, &password, true);
    assert_eq!(ok, NONE);
    assert_eq!(produce_values(&mut with_token, "t", 0, &[b"x"]).0, NONE);
    let mut eve = login(&broker, "eve");
    assert_eq!(produce_values(&mut eve, "t", 0, &[b"x"]).0, 29); // TOPIC_AUTHORIZATION_FAILED
    let not_allowed = code(ResponseError::DelegationTokenRequestNotAllowed);
    assert_eq!(
        create(&mut with_token, 1, vec![], None).error_code,
        not_allowed
    );
    assert_eq!(describe(&mut with_token, None).0, not_allowed);

    assert_eq!(scram_login(&broker, &id, "wrong", true).1, failed);
    assert_eq!(scram_login(&broker, &id, &password, false).1, failed);
    assert_eq!(
        scram_login(&broker, "no-such-token", &password, true).1,
        failed
    );
    broker.advance_ms(60_001);
    assert_eq!(scram_login(&broker, &id, &password, true).1, failed);
}
