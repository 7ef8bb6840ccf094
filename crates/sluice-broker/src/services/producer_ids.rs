//! Producer ids for InitProducerId, unique across restarts: ids are handed out of blocks
//! whose end is written to `<data_dir>/meta/producer_ids` (atomically, fsync'd) before the
//! first id of the block is used. A crash skips the rest of a block; it never reuses an id.
//!
//! Every id ever handed out is below the durable block end, so [`ProducerIds::is_issued`]
//! (a lock-free check on the produce path) tells ids this broker issued from ids a client
//! made up. It may also accept the unused rest of a block, never an id above it.
//!
//! New ids are also rationed per client address ([`AddressBuckets`]): each id is a new
//! producer that one batch can park in a partition's producer table for the eviction
//! window, so an address that could take ids without bound could fill any partition's
//! table and refuse every new idempotent producer there (issue 32: 10,000 ids and one
//! batch each did). Addresses are what every connection has, credentials or not.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::Mutex;
use sluice_coordinator::ProducerIdAllocator;
use sluice_record::ProducerId;

use crate::config::limits;

const FILE_NAME: &str = "producer_ids";

#[derive(Debug)]
pub struct ProducerIds {
    allocator: Mutex<ProducerIdAllocator>,
    meta_dir: PathBuf,
    /// The durable block end: every id handed out is below it. Raised only after the new
    /// end is on disk and before any id of the new block is handed out.
    issued_end: AtomicI64,
    /// Serializes block writes (blocking threads only).
    write: std::sync::Mutex<()>,
    /// Ids handed out since start (for metrics).
    issued_total: AtomicU64,
    /// New ids per client address (see [`AddressBuckets`]).
    per_address: Mutex<AddressBuckets>,
    /// The monotonic clock's zero for `per_address`.
    started: Instant,
}

impl ProducerIds {
    /// Reads the durable block end. Blocking.
    pub fn open(data_dir: &Path) -> std::io::Result<Self> {
        let meta_dir = data_dir.join("meta");
        sluice_log::fs::create_private_dir_all(&meta_dir)?;
        let block_end = match std::fs::read_to_string(meta_dir.join(FILE_NAME)) {
            Ok(text) => text.trim().parse::<i64>().map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}", meta_dir.join(FILE_NAME).display()),
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e),
        };
        Ok(Self {
            allocator: Mutex::new(ProducerIdAllocator::new(block_end)),
            meta_dir,
            issued_end: AtomicI64::new(block_end.max(0)),
            write: std::sync::Mutex::new(()),
            issued_total: AtomicU64::new(0),
            per_address: Mutex::new(AddressBuckets::default()),
            started: Instant::now(),
        })
    }

    /// Takes one new id's allowance for `ip` (`max` ids per `window_ms`): `Err` with the
    /// milliseconds until one is available when the address has used its share.
    /// Non-blocking.
    pub fn charge(&self, ip: IpAddr, max: u64, window_ms: u64) -> Result<(), u64> {
        let now_ms = self.started.elapsed().as_millis() as u64;
        let rate = Rate::new(max, window_ms);
        self.per_address.lock().take(ip, now_ms, rate)
    }

    /// The next producer id, reserving (durably) a new block when needed. Blocking.
    pub fn next(&self) -> std::io::Result<ProducerId> {
        let id = self.next_id()?;
        self.issued_total.fetch_add(1, Ordering::Relaxed);
        Ok(id)
    }

    /// Producer ids handed out since start.
    pub fn issued_total(&self) -> u64 {
        self.issued_total.load(Ordering::Relaxed)
    }

    fn next_id(&self) -> std::io::Result<ProducerId> {
        loop {
            if let Some(id) = self.allocator.lock().next_id() {
                return Ok(id);
            }
            let _write = self.write.lock().unwrap_or_else(|p| p.into_inner());
            // Another thread may have reserved a block while we waited.
            if let Some(id) = self.allocator.lock().next_id() {
                return Ok(id);
            }
            let end = self.allocator.lock().block_end_to_persist();
            crate::services::atomic_file::write_atomically(
                &self.meta_dir,
                FILE_NAME,
                format!("{end}\n").as_bytes(),
            )?;
            self.issued_end.fetch_max(end, Ordering::Release);
            self.allocator.lock().block_persisted(end);
        }
    }

    /// Whether `producer_id` may have been handed out by this broker (now or before a
    /// restart). Non-blocking.
    pub fn is_issued(&self, producer_id: ProducerId) -> bool {
        producer_id.0 >= 0 && producer_id.0 < self.issued_end.load(Ordering::Acquire)
    }
}

/// A token bucket's size and refill: `max` ids, refilled over `window_ms`.
#[derive(Debug, Clone, Copy)]
struct Rate {
    max: f64,
    per_ms: f64,
}

impl Rate {
    fn new(max: u64, window_ms: u64) -> Self {
        let max = max.max(1) as f64;
        Self {
            max,
            per_ms: max / window_ms.max(1) as f64,
        }
    }
}

/// One address's allowance: ids left as of `at_ms`.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at_ms: u64,
}

impl Bucket {
    fn full(rate: Rate, now_ms: u64) -> Self {
        Self {
            tokens: rate.max,
            at_ms: now_ms,
        }
    }

    /// Refills to `now_ms`, then takes one token or says how long until one is there.
    fn take(&mut self, now_ms: u64, rate: Rate) -> Result<(), u64> {
        let elapsed = now_ms.saturating_sub(self.at_ms) as f64;
        self.tokens = (self.tokens + elapsed * rate.per_ms).min(rate.max);
        self.at_ms = now_ms;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        Err(((1.0 - self.tokens) / rate.per_ms).ceil().max(1.0) as u64)
    }

    /// Whether the bucket would be full by `now_ms` (its address has been idle long
    /// enough that forgetting it changes nothing).
    fn is_full(&self, now_ms: u64, rate: Rate) -> bool {
        self.tokens + now_ms.saturating_sub(self.at_ms) as f64 * rate.per_ms >= rate.max
    }
}

/// Token buckets of new producer ids per client address, at most
/// [`limits::PRODUCER_ID_ADDRESSES_MAX`] of them: a new address at the bound first makes
/// room by forgetting full buckets, and while none is full shares one overflow bucket
/// with every other such address (so cycling through addresses cannot reset anyone's
/// allowance, and the map cannot grow).
#[derive(Debug, Default)]
pub struct AddressBuckets {
    buckets: HashMap<IpAddr, Bucket>,
    overflow: Option<Bucket>,
}

impl AddressBuckets {
    fn take(&mut self, ip: IpAddr, now_ms: u64, rate: Rate) -> Result<(), u64> {
        if let Some(bucket) = self.buckets.get_mut(&ip) {
            return bucket.take(now_ms, rate);
        }
        if self.buckets.len() >= limits::PRODUCER_ID_ADDRESSES_MAX {
            self.buckets.retain(|_, b| !b.is_full(now_ms, rate));
        }
        if self.buckets.len() >= limits::PRODUCER_ID_ADDRESSES_MAX {
            let overflow = self
                .overflow
                .get_or_insert_with(|| Bucket::full(rate, now_ms));
            return overflow.take(now_ms, rate);
        }
        let bucket = self.buckets.entry(ip).or_insert(Bucket::full(rate, now_ms));
        bucket.take(now_ms, rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_address_gets_max_ids_then_the_refill_rate() {
        // Goal: an address takes `max` ids at once, then is refused with the wait until the
        // next one (window / max); another address is unaffected; after the wait one more
        // is there, and after a whole window the bucket is full again, never fuller.
        let mut buckets = AddressBuckets::default();
        let rate = Rate::new(10, 1_000);
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        for _ in 0..10 {
            assert_eq!(buckets.take(a, 0, rate), Ok(()));
        }
        assert_eq!(buckets.take(a, 0, rate), Err(100));
        assert_eq!(buckets.take(b, 0, rate), Ok(()));
        assert_eq!(buckets.take(a, 40, rate), Err(60));
        assert_eq!(buckets.take(a, 100, rate), Ok(()));
        assert!(buckets.take(a, 100, rate).is_err());
        let taken = (0..20)
            .filter(|_| buckets.take(a, 10_000, rate).is_ok())
            .count();
        assert_eq!(taken, 10, "a bucket holds at most max");
    }

    #[test]
    fn the_address_map_is_bounded_and_cycling_addresses_gains_nothing() {
        // Goal: past PRODUCER_ID_ADDRESSES_MAX addresses with spent buckets, new addresses
        // share one overflow bucket (max ids in all, not per address); once buckets are
        // full again they are forgotten and new addresses get their own.
        let mut buckets = AddressBuckets::default();
        let rate = Rate::new(2, 1_000);
        let addr = |i: u32| IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i));
        let max = limits::PRODUCER_ID_ADDRESSES_MAX as u32;
        for i in 0..max {
            assert_eq!(buckets.take(addr(i), 0, rate), Ok(()));
        }
        let new = (max..max + 10)
            .filter(|i| buckets.take(addr(*i), 0, rate).is_ok())
            .count();
        assert_eq!(new, 2, "new addresses share one bucket of max");
        assert_eq!(buckets.buckets.len(), limits::PRODUCER_ID_ADDRESSES_MAX);
        // 500 ms later every old bucket has refilled its one token: all are full again.
        assert_eq!(buckets.take(addr(max + 20), 500, rate), Ok(()));
        assert_eq!(buckets.buckets.len(), 1);
    }

    #[test]
    fn only_ids_below_the_durable_block_end_are_issued() {
        // Goal: an id handed out is issued, before and after a restart; ids past the durable
        // block end and negative ids are not.
        let dir = tempfile::tempdir().expect("tempdir");
        let ids = ProducerIds::open(dir.path()).expect("open");
        assert!(!ids.is_issued(ProducerId(0)), "nothing issued yet");
        let first = ids.next().expect("id");
        assert!(ids.is_issued(ProducerId(first.0)));
        assert!(!ids.is_issued(ProducerId(-1)));
        assert!(!ids.is_issued(ProducerId(first.0 + 1_000_000)));
        drop(ids);
        let reopened = ProducerIds::open(dir.path()).expect("reopen");
        assert!(reopened.is_issued(ProducerId(first.0)));
        assert!(!reopened.is_issued(ProducerId(first.0 + 1_000_000)));
    }
}
