//! The object backend's two clients against the real servers: SeaweedFS's S3 server and
//! PostgreSQL, both started by `scripts/stores.sh` (the test command starts them and sets
//! `SLUICE_TEST_STORES=required`, so there these tests cannot skip). Run alone:
//! `eval "$(scripts/stores.sh start /tmp/stores)"; cargo test -p sluice-object --test stores`.

use std::io::IoSlice;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use postgres::NoTls;
use sluice_object::meta_store::{EntryRow, MetaError, MetaStore, RoundRow, SCHEMA_VERSION};
use sluice_object::{Environment, ObjectError, ObjectStore, ObjectStoreConfig};
use uuid::Uuid;

/// The stores' addresses, or `None` (the test is skipped, loudly) outside the test command.
fn stores() -> Option<(String, String, String)> {
    let vars = [
        "SLUICE_TEST_PG_URL",
        "SLUICE_TEST_S3_ENDPOINT",
        "SLUICE_TEST_S3_BUCKET",
    ];
    let values: Vec<Option<String>> = vars.iter().map(|v| std::env::var(v).ok()).collect();
    if values.iter().any(Option::is_none) {
        assert_ne!(
            std::env::var("SLUICE_TEST_STORES").as_deref(),
            Ok("required"),
            "SLUICE_TEST_STORES=required but {vars:?} are not all set"
        );
        eprintln!("SKIPPED: the real stores are not running (scripts/stores.sh start DIR)");
        return None;
    }
    let mut values = values.into_iter().map(Option::unwrap);
    Some((values.next()?, values.next()?, values.next()?))
}

fn object_store(endpoint: &str, bucket: &str, prefix: &str) -> ObjectStore {
    let config = ObjectStoreConfig {
        url: format!("s3://{bucket}/{prefix}"),
        endpoint: Some(endpoint.to_string()),
        request_timeout: Duration::from_secs(10),
    };
    ObjectStore::new(&config, &Environment::current()).expect("client")
}

/// A fresh database on the test server, so tests never see each other's rows.
fn fresh_database(url: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "sluice_t_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let mut admin = postgres::Client::connect(url, NoTls).expect("admin connection");
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .expect("create database");
    let base = url.rsplit_once('/').expect("url has a database").0;
    format!("{base}/{name}")
}

#[test]
fn objects_round_trip_with_ranges_listing_and_deletes() {
    let Some((_, endpoint, bucket)) = stores() else {
        return;
    };
    let prefix = format!("t{}/", Uuid::new_v4().simple());
    let store = object_store(&endpoint, &bucket, &prefix);
    store.check_bucket().expect("bucket exists");
    let parts: [&[u8]; 3] = [b"hello ", &[7u8; 100_000], b" world"];
    let body: Vec<u8> = parts.concat();
    let slices: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
    let key = store.key("objects/0001");
    store
        .put(&key, &slices, body.len() as u64, crc32c::crc32c(&body))
        .expect("put");
    assert_eq!(store.get_range(&key, 0, 6).unwrap(), b"hello ");
    assert_eq!(store.get_range(&key, 100_006, 6).unwrap(), b" world");
    assert_eq!(store.get_range(&key, 0, body.len() as u64).unwrap(), body);
    // A range past the end is an error, never a short read taken as whole.
    assert!(store.get_range(&key, body.len() as u64 - 3, 10).is_err());
    for n in 2..=4 {
        store
            .put(
                &store.key(&format!("objects/000{n}")),
                &[IoSlice::new(b"x")],
                1,
                crc32c::crc32c(b"x"),
            )
            .unwrap();
    }
    let (listed, more) = store.list_page(&store.key("objects/"), None).unwrap();
    let keys: Vec<&str> = listed.iter().map(|o| o.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            key.as_str(),
            &store.key("objects/0002"),
            &store.key("objects/0003"),
            &store.key("objects/0004")
        ]
    );
    assert_eq!(listed[0].size_bytes, body.len() as u64);
    assert!(more.is_none());
    store.delete(&key).unwrap();
    store.delete(&key).expect("deleting a missing key succeeds");
    let missing = store.get_range(&key, 0, 1).unwrap_err();
    assert!(matches!(missing, ObjectError::NotFound(_)), "{missing}");
    assert!(!missing.is_retriable());
}

#[test]
fn a_wrong_checksum_or_secret_is_refused_and_an_unreachable_store_is_retriable() {
    let Some((_, endpoint, bucket)) = stores() else {
        return;
    };
    let store = object_store(&endpoint, &bucket, "checks/");
    let key = store.key("bad-crc");
    let refused = store.put(&key, &[IoSlice::new(b"abc")], 3, 0xdead_beef);
    assert!(
        refused.is_err(),
        "a PUT whose CRC-32C does not match must not be stored"
    );
    let stored = store.get_range(&key, 0, 3);
    assert!(
        matches!(stored, Err(ObjectError::NotFound(_))),
        "{refused:?} then {stored:?}"
    );

    let mut env = Environment::current();
    env.vars
        .insert("AWS_SECRET_ACCESS_KEY".into(), "not-the-secret".into());
    let config = ObjectStoreConfig {
        url: format!("s3://{bucket}/checks"),
        endpoint: Some(endpoint.clone()),
        request_timeout: Duration::from_secs(10),
    };
    let forged = ObjectStore::new(&config, &env).unwrap();
    let error = forged
        .put(
            &forged.key("x"),
            &[IoSlice::new(b"x")],
            1,
            crc32c::crc32c(b"x"),
        )
        .unwrap_err();
    assert!(!error.is_retriable(), "{error}");

    let config = ObjectStoreConfig {
        url: format!("s3://{bucket}/checks"),
        endpoint: Some("http://127.0.0.1:9".into()),
        request_timeout: Duration::from_secs(2),
    };
    let gone = ObjectStore::new(&config, &Environment::current()).unwrap();
    let error = gone.check_bucket().unwrap_err();
    assert!(error.is_retriable(), "{error}");
}

fn entry(topic: Uuid, partition: i32, base: i64, last: i64, position: u64) -> EntryRow {
    EntryRow {
        topic_id: topic,
        partition,
        base_offset: base,
        last_offset: last,
        position,
        size_bytes: 100,
    }
}

fn round(seq: u64, position: u64) -> RoundRow {
    RoundRow {
        object_key: format!("rounds/{seq}-{position}"),
        journal_seq: seq,
        journal_position: position,
        size_bytes: 4096,
        crc32c: 0x1234_5678,
    }
}

#[test]
fn the_schema_is_created_once_and_a_newer_one_is_refused() {
    let Some((url, _, _)) = stores() else { return };
    let url = fresh_database(&url);
    let mut store = MetaStore::connect(&url, Duration::from_secs(5)).unwrap();
    assert_eq!(store.migrate().unwrap(), 0);
    assert_eq!(store.migrate().unwrap(), SCHEMA_VERSION);
    let id = store.store_id().unwrap();
    assert_eq!(id.len(), 36, "a UUID: {id}");
    assert_eq!(
        store.store_id().unwrap(),
        id,
        "the id is the store's, not the call's"
    );
    let mut admin = postgres::Client::connect(&url, NoTls).unwrap();
    admin
        .execute("UPDATE sluice_schema SET version = version + 1", &[])
        .unwrap();
    let error = store.migrate().unwrap_err();
    assert!(matches!(error, MetaError::Schema(_)), "{error}");
    assert!(error.to_string().contains("newer"), "{error}");
}

#[test]
fn rounds_continue_log_ends_and_a_stale_writer_is_fenced() {
    let Some((url, _, _)) = stores() else { return };
    let url = fresh_database(&url);
    let mut store = MetaStore::connect(&url, Duration::from_secs(5)).unwrap();
    store.migrate().unwrap();
    let epoch = store.take_writer_epoch().unwrap();
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let budget = Duration::from_secs(5);
    store
        .commit_round(
            epoch,
            1,
            &round(1, 16),
            &[entry(a, 0, 0, 9, 0), entry(b, 3, 0, 0, 200)],
            budget,
        )
        .unwrap();
    // Two entries of one partition in one round: the log end moves past the last.
    store
        .commit_round(
            epoch,
            2,
            &round(1, 4112),
            &[entry(a, 0, 10, 19, 0), entry(a, 0, 20, 24, 100)],
            budget,
        )
        .unwrap();
    // A round that does not continue a partition's log end commits nothing at all.
    let error = store
        .commit_round(
            epoch,
            3,
            &round(1, 8208),
            &[entry(b, 3, 1, 1, 0), entry(a, 0, 24, 30, 100)],
            budget,
        )
        .unwrap_err();
    assert!(matches!(error, MetaError::LogEndMismatch(_)), "{error}");
    let mut ends = store.log_ends().unwrap();
    ends.sort();
    let mut expected = vec![(a, 0, 25), (b, 3, 1)];
    expected.sort();
    assert_eq!(ends, expected);
    assert_eq!(
        store.rounds_from(0, 0).unwrap(),
        vec![round(1, 16), round(1, 4112)]
    );
    assert_eq!(store.rounds_from(1, 17).unwrap(), vec![round(1, 4112)]);
    assert_eq!(store.next_round_id().unwrap(), 3);

    // A second broker takes the epoch: the first can no longer commit rounds or documents.
    let mut second = MetaStore::connect(&url, Duration::from_secs(5)).unwrap();
    let newer = second.take_writer_epoch().unwrap();
    assert!(newer > epoch);
    let fenced = store
        .commit_round(epoch, 3, &round(1, 8208), &[entry(b, 3, 1, 1, 0)], budget)
        .unwrap_err();
    assert!(matches!(fenced, MetaError::Fenced(_)), "{fenced}");
    assert!(matches!(
        store.store_meta(epoch, "topics", b"{}"),
        Err(MetaError::Fenced(_))
    ));
    second
        .commit_round(newer, 3, &round(1, 8208), &[entry(b, 3, 1, 1, 0)], budget)
        .unwrap();
}

#[test]
fn documents_are_versioned() {
    let Some((url, _, _)) = stores() else { return };
    let url = fresh_database(&url);
    let mut store = MetaStore::connect(&url, Duration::from_secs(5)).unwrap();
    store.migrate().unwrap();
    let epoch = store.take_writer_epoch().unwrap();
    assert_eq!(store.load_meta("topics").unwrap(), None);
    assert_eq!(store.store_meta(epoch, "topics", b"one").unwrap(), 1);
    assert_eq!(store.store_meta(epoch, "topics", b"two").unwrap(), 2);
    assert_eq!(
        store.load_meta("topics").unwrap(),
        Some((b"two".to_vec(), 2))
    );
}
