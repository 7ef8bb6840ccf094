//! Settling the disk between the runs of a comparison.
//!
//! Runs of an A/B comparison or a sweep share one machine, and a run can leave disk work
//! behind that lands on the next one: a broker that never fsyncs (Kafka) leaves its data
//! dirty for the kernel's flusher threads, which write it out about 30 s later, and deleting
//! gigabytes of log on a file system mounted with `discard` sends the device discards that
//! keep it busy for seconds. Measured on this project's machine, that writeback turned the
//! next run's ack max from about 70 ms into 1.2-2.6 s (docs/transactions.md §13.4).
//!
//! Before each run of a comparison the bench therefore writes back every dirty page
//! (`sync(2)`, which waits for it) and then waits until the block devices have done no I/O
//! for [`limits::SETTLE_IDLE`], at most [`limits::SETTLE_MAX`]. A run's own writeback still
//! counts against the broker that caused it; only leftovers of earlier runs are waited out.
//! What it took is reported per run (`settle`: `sync_ms`, `idle_ms`, `idle`).

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::limits;

/// What settling before one run took.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Settle {
    /// The `sync(2)`: the dirty pages the earlier runs left, written back.
    pub sync_ms: f64,
    /// The wait for the devices to go idle after it (discards, a broker's delayed deletes).
    pub idle_ms: f64,
    /// Whether the devices went idle before [`limits::SETTLE_MAX`] (false: the run started
    /// anyway, with the devices still busy).
    pub idle: bool,
}

/// Syncs, then waits for the block devices to go idle (bounded). Blocking.
pub fn settle() -> Settle {
    let started = Instant::now();
    nix::unistd::sync();
    let sync_ms = ms(started.elapsed());
    let waited = Instant::now();
    let idle = wait_idle(limits::SETTLE_IDLE, limits::SETTLE_MAX);
    Settle {
        sync_ms,
        idle_ms: ms(waited.elapsed()),
        idle,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Waits until the devices' busy time and requests in flight have stayed at zero growth for
/// `quiet`, at most `max`. Returns whether they went quiet. Without `/proc/diskstats` there
/// is nothing to wait for.
fn wait_idle(quiet: Duration, max: Duration) -> bool {
    let deadline = Instant::now() + max;
    let Some(mut last) = read_busy() else {
        return true;
    };
    let mut quiet_since = Instant::now();
    loop {
        let now = Instant::now();
        if now.duration_since(quiet_since) >= quiet {
            return true;
        }
        if now >= deadline {
            return false;
        }
        std::thread::sleep(limits::SETTLE_POLL);
        let Some(busy) = read_busy() else {
            return true;
        };
        if busy.in_flight > 0 || busy.io_ticks_ms != last.io_ticks_ms {
            quiet_since = Instant::now();
        }
        last = busy;
    }
}

/// The block devices' requests in flight and total busy time, summed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Busy {
    in_flight: u64,
    io_ticks_ms: u64,
}

fn read_busy() -> Option<Busy> {
    std::fs::read_to_string("/proc/diskstats")
        .ok()
        .map(|s| parse_diskstats(&s))
}

/// Sums the devices of `/proc/diskstats` that hold files: loop, RAM and zram devices and
/// partitions (whose I/O their disk already counts) are left out. Lines it cannot read are
/// skipped.
fn parse_diskstats(text: &str) -> Busy {
    let mut busy = Busy::default();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // major minor name, then reads (4), writes (4), in flight, io ticks, ...
        let (Some(name), Some(in_flight), Some(ticks)) = (
            fields.get(2),
            fields.get(11).and_then(|v| v.parse::<u64>().ok()),
            fields.get(12).and_then(|v| v.parse::<u64>().ok()),
        ) else {
            continue;
        };
        if !is_whole_disk(name) {
            continue;
        }
        busy.in_flight += in_flight;
        busy.io_ticks_ms += ticks;
    }
    busy
}

/// A physical or virtual disk, not a partition of one and not a memory or loop device.
fn is_whole_disk(name: &str) -> bool {
    let skip = ["loop", "ram", "zram", "dm-", "md", "sr"];
    if skip.iter().any(|p| name.starts_with(p)) {
        return false;
    }
    // Partitions: vda1, sda2, nvme0n1p1, mmcblk0p1.
    let is_partition = if name.starts_with("nvme") || name.starts_with("mmcblk") {
        name.rsplit_once('p').is_some_and(|(head, tail)| {
            head.ends_with(|c: char| c.is_ascii_digit())
                && !tail.is_empty()
                && tail.chars().all(|c| c.is_ascii_digit())
        })
    } else {
        name.ends_with(|c: char| c.is_ascii_digit())
    };
    !is_partition
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
 254       0 vda 2563589 80137 302234514 8364275 30114265 210361 770221272 8889293 3 4872332 20118635 497369 101 601036384 420436 8791338 2444630
 254       1 vda1 2563000 80000 302230000 8364000 30114000 210000 770220000 8889000 3 4872000 20118000 497000 101 601036000 420000 8791000 2444000
   7       0 loop0 100 0 800 10 0 0 0 0 0 20 10 0 0 0 0 0 0
 252       0 zram0 5 0 40 0 9 0 72 0 1 0 0 0 0 0 0 0 0
 259       0 nvme0n1 10 0 80 1 20 0 160 2 0 7 3 0 0 0 0 0 0
 259       1 nvme0n1p1 10 0 80 1 20 0 160 2 0 7 3 0 0 0 0 0 0
";

    #[test]
    fn sums_whole_disks_only() {
        let busy = parse_diskstats(SAMPLE);
        assert_eq!(
            busy,
            Busy {
                in_flight: 3,
                io_ticks_ms: 4_872_332 + 7
            }
        );
    }

    #[test]
    fn partitions_and_memory_devices_are_not_disks() {
        for disk in ["vda", "sda", "nvme0n1", "mmcblk0", "xvdb"] {
            assert!(is_whole_disk(disk), "{disk}");
        }
        for other in [
            "vda1",
            "sdb2",
            "nvme0n1p3",
            "mmcblk0p1",
            "loop3",
            "zram0",
            "ram1",
            "dm-0",
        ] {
            assert!(!is_whole_disk(other), "{other}");
        }
    }

    #[test]
    fn short_or_garbled_lines_are_skipped() {
        let busy = parse_diskstats("8 0 sda 1 2\n8 16 sdb x y z w a b c d e f\n\n");
        assert_eq!(busy, Busy::default());
    }

    #[test]
    fn a_quiet_machine_settles_within_the_bound() {
        // Bounded either way: on a busy disk it gives up at `max` and says so.
        let started = Instant::now();
        let quiet = wait_idle(Duration::from_millis(200), Duration::from_millis(600));
        let took = started.elapsed();
        assert!(
            took <= Duration::from_millis(600) + limits::SETTLE_POLL * 3,
            "{took:?}"
        );
        if quiet {
            assert!(took >= Duration::from_millis(200), "{took:?}");
        }
    }
}
