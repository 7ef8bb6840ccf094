//! Proves the allocation guard: requests whose array counts claim billions of elements decode
//! to an error instead of aborting the process. A child process with the guard disabled shows
//! the abort the guard prevents.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{CreateTopicsRequest, MetadataRequest, ProduceRequest};
use sluice_protocol::alloc_guard::{self, GuardedAlloc};
use sluice_protocol::codec::decode_request;

#[global_allocator]
static ALLOC: GuardedAlloc = GuardedAlloc;

/// Metadata v1 body: a topics array claiming `count` entries and nothing after it.
fn hostile_metadata_v1(count: i32) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i32(count);
    b.freeze()
}

/// Metadata v12 (flexible) body: a compact array with an unsigned-varint count of ~4 billion.
fn hostile_metadata_v12() -> Bytes {
    Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x0f])
}

fn decode_all_hostile() {
    for count in [2_000_000_000, i32::MAX] {
        let r = decode_request::<MetadataRequest>(&mut hostile_metadata_v1(count), 1);
        assert!(r.is_err(), "count {count} decoded");
    }
    assert!(decode_request::<MetadataRequest>(&mut hostile_metadata_v12(), 12).is_err());
    // CreateTopics v2: topics array count, then nothing.
    assert!(
        decode_request::<CreateTopicsRequest>(&mut hostile_metadata_v1(1_500_000_000), 2).is_err()
    );
    // Produce v3: transactional id (null), acks, timeout, then a huge topic array.
    let mut b = BytesMut::new();
    b.put_i16(-1);
    b.put_i16(1);
    b.put_i32(1000);
    b.put_i32(2_000_000_000);
    assert!(decode_request::<ProduceRequest>(&mut b.freeze(), 3).is_err());
}

// Goal: with the guard, hostile counts are plain decode errors and the process lives on.
#[test]
fn hostile_counts_are_errors_not_aborts() {
    decode_all_hostile();
    // The process is still healthy: ordinary allocations work.
    let v: Vec<u64> = (0..1000).collect();
    assert_eq!(v.iter().sum::<u64>(), 499_500);
}

// Child half of the next test: only runs when asked to by the parent.
#[test]
fn unguarded_child() {
    if std::env::var_os("SLUICE_UNGUARDED_CHILD").is_none() {
        return;
    }
    alloc_guard::disable_for_test();
    decode_all_hostile();
}

// Goal: show that without the guard the same bytes abort the process, so the guard matters.
#[test]
fn without_guard_the_process_aborts() {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "unguarded_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SLUICE_UNGUARDED_CHILD", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "unguarded decode survived: {stderr}");
    assert!(
        stderr.contains("memory allocation"),
        "unexpected failure: {stderr}"
    );
}
