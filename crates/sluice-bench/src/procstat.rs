//! Resource sampling: each broker process (one, or one per broker of a cluster, summed)
//! through /proc/<pid> (CPU, RSS, threads, disk I/O) and
//! its data directory (bytes on disk), and this process through getrusage. Linux only; every
//! read that fails yields None rather than an error, since a broker on another host or a
//! process we may not inspect must not stop a run.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// One reading of a process and its data directory.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcReading {
    /// user + system CPU, seconds.
    pub cpu_s: Option<f64>,
    pub rss_bytes: Option<u64>,
    pub peak_rss_bytes: Option<u64>,
    pub threads: Option<u64>,
    pub read_bytes: Option<u64>,
    pub write_bytes: Option<u64>,
    /// Allocated bytes of all files under the data directory.
    pub disk_bytes: Option<u64>,
}

/// Samples one process (by pid) and optionally one directory tree.
#[derive(Debug, Clone)]
pub struct ProcSampler {
    pid: u32,
    data_dir: Option<PathBuf>,
    ticks_per_s: f64,
}

impl ProcSampler {
    pub fn new(pid: u32, data_dir: Option<PathBuf>) -> Self {
        let ticks_per_s = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .filter(|&t| t > 0)
            .unwrap_or(100) as f64;
        ProcSampler {
            pid,
            data_dir,
            ticks_per_s,
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn data_dir(&self) -> Option<&Path> {
        self.data_dir.as_deref()
    }

    pub fn sample(&self) -> ProcReading {
        let base = PathBuf::from(format!("/proc/{}", self.pid));
        let mut r = ProcReading::default();
        if let Ok(stat) = std::fs::read_to_string(base.join("stat")) {
            // Fields after the parenthesised command name (which may itself contain spaces):
            // state is field 3, utime 14, stime 15, num_threads 20.
            if let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) {
                let f: Vec<&str> = rest.split_whitespace().collect();
                // A zombie (killed, not yet reaped by its parent) is a dead broker: it reads
                // as gone, not as a process with frozen figures.
                if matches!(f.first(), Some(&"Z") | Some(&"X")) {
                    return ProcReading::default();
                }
                let num = |i: usize| f.get(i).and_then(|s| s.parse::<u64>().ok());
                if let (Some(u), Some(s)) = (num(11), num(12)) {
                    r.cpu_s = Some((u + s) as f64 / self.ticks_per_s);
                }
                r.threads = num(17);
            }
        }
        if let Ok(status) = std::fs::read_to_string(base.join("status")) {
            for line in status.lines() {
                let kib = || {
                    line.split_whitespace()
                        .nth(1)
                        .and_then(|v| v.parse::<u64>().ok())
                        .map(|v| v * 1024)
                };
                if line.starts_with("VmRSS:") {
                    r.rss_bytes = kib();
                } else if line.starts_with("VmHWM:") {
                    r.peak_rss_bytes = kib();
                }
            }
        }
        if let Ok(io) = std::fs::read_to_string(base.join("io")) {
            for line in io.lines() {
                let v = || {
                    line.split_whitespace()
                        .nth(1)
                        .and_then(|v| v.parse::<u64>().ok())
                };
                if line.starts_with("read_bytes:") {
                    r.read_bytes = v();
                } else if line.starts_with("write_bytes:") {
                    r.write_bytes = v();
                }
            }
        }
        r.disk_bytes = self.data_dir.as_deref().map(dir_bytes);
        r
    }
}

/// Adds readings field by field: a field is the sum of the readings that have it (None when
/// none has it). The cluster's figure of several broker processes.
pub fn sum_readings<'a>(readings: impl IntoIterator<Item = &'a ProcReading>) -> ProcReading {
    fn add<T: std::ops::Add<Output = T> + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
        match (a, b) {
            (Some(x), Some(y)) => Some(x + y),
            (x, None) => x,
            (None, y) => y,
        }
    }
    readings
        .into_iter()
        .fold(ProcReading::default(), |acc, r| ProcReading {
            cpu_s: add(acc.cpu_s, r.cpu_s),
            rss_bytes: add(acc.rss_bytes, r.rss_bytes),
            peak_rss_bytes: add(acc.peak_rss_bytes, r.peak_rss_bytes),
            threads: add(acc.threads, r.threads),
            read_bytes: add(acc.read_bytes, r.read_bytes),
            write_bytes: add(acc.write_bytes, r.write_bytes),
            disk_bytes: add(acc.disk_bytes, r.disk_bytes),
        })
}

/// One broker's figures over one sampling interval.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct BrokerTick {
    pub pid: u32,
    pub cpu_pct: Option<f64>,
    pub rss_mib: Option<f64>,
    pub disk_mib: Option<f64>,
}

/// Every sampled broker process of a run (one for the embedded broker, one per --broker-pid):
/// each one's first and last reading with a CPU figure, and its peak RSS. CPU is differenced
/// per broker, so a broker that cannot be read in one interval does not distort the others.
#[derive(Debug, Clone, Default)]
pub struct BrokerTrack {
    samplers: Vec<ProcSampler>,
    pub first: Vec<ProcReading>,
    pub last: Vec<ProcReading>,
    pub peak_rss_bytes: Vec<Option<u64>>,
    /// When a broker process could no longer be read (it died: its `last` figures are as of
    /// the tick before), seconds since load start.
    pub gone_at_s: Vec<Option<f64>>,
}

impl BrokerTrack {
    /// Takes each broker's first reading now.
    pub fn start(samplers: Vec<ProcSampler>) -> BrokerTrack {
        let first: Vec<ProcReading> = samplers.iter().map(ProcSampler::sample).collect();
        BrokerTrack {
            peak_rss_bytes: first
                .iter()
                .map(|r| r.peak_rss_bytes.or(r.rss_bytes))
                .collect(),
            last: first.clone(),
            gone_at_s: vec![None; first.len()],
            first,
            samplers,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.samplers.is_empty()
    }

    pub fn pids(&self) -> Vec<u32> {
        self.samplers.iter().map(ProcSampler::pid).collect()
    }

    /// Samples every broker; `dt_s` is the time since the previous tick, `elapsed_s` since
    /// load start.
    pub fn tick(&mut self, dt_s: f64, elapsed_s: f64) -> Vec<BrokerTick> {
        debug_assert_eq!(self.samplers.len(), self.last.len());
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        let mut out = Vec::with_capacity(self.samplers.len());
        for (i, s) in self.samplers.iter().enumerate() {
            let now = s.sample();
            let cpu_pct = match (self.last[i].cpu_s, now.cpu_s) {
                (Some(a), Some(b)) => Some((b - a) / dt_s.max(1e-9) * 100.0),
                _ => None,
            };
            if now.cpu_s.is_some() {
                self.last[i] = now;
            } else if self.last[i].cpu_s.is_some() && self.gone_at_s[i].is_none() {
                self.gone_at_s[i] = Some(elapsed_s);
            }
            let peak = now.peak_rss_bytes.or(now.rss_bytes);
            self.peak_rss_bytes[i] = self.peak_rss_bytes[i].max(peak);
            out.push(BrokerTick {
                pid: s.pid(),
                cpu_pct,
                rss_mib: now.rss_bytes.map(mib),
                disk_mib: now.disk_bytes.map(mib),
            });
        }
        out
    }
}

/// The cluster's figures of one interval: CPU, RSS and disk summed over the brokers that had
/// them.
pub fn sum_ticks(ticks: &[BrokerTick]) -> (Option<f64>, Option<f64>, Option<f64>) {
    let sum = |f: fn(&BrokerTick) -> Option<f64>| {
        ticks
            .iter()
            .filter_map(f)
            .fold(None, |a: Option<f64>, v| Some(a.unwrap_or(0.0) + v))
    };
    (sum(|t| t.cpu_pct), sum(|t| t.rss_mib), sum(|t| t.disk_mib))
}

/// Allocated bytes (st_blocks × 512) of every regular file under `dir`; unreadable entries
/// count as 0. Iterative, so a deep tree cannot overflow the stack.
pub fn dir_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(md) = e.metadata() else { continue };
            if md.is_dir() {
                stack.push(e.path());
            } else if md.is_file() {
                total += md.blocks() * 512;
            }
        }
    }
    total
}

/// CPU and peak RSS of this (the bench client) process.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ClientUsage {
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    pub max_rss_mib: f64,
}

pub fn client_usage() -> Option<ClientUsage> {
    use nix::sys::resource::{getrusage, UsageWho};
    let u = getrusage(UsageWho::RUSAGE_SELF).ok()?;
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    Some(ClientUsage {
        cpu_user_s: secs(u.user_time()),
        cpu_system_s: secs(u.system_time()),
        // Linux reports ru_maxrss in KiB.
        max_rss_mib: u.max_rss() as f64 / 1024.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_this_process_and_a_directory() {
        let dir = tempfile::tempdir().ok();
        let path = dir.as_ref().map(|d| d.path().to_path_buf());
        if let Some(p) = &path {
            let _ = std::fs::write(p.join("f"), vec![1u8; 100_000]);
        }
        let s = ProcSampler::new(std::process::id(), path);
        // Burn a little CPU so the counter is non-zero.
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        assert!(x != 1);
        let r = s.sample();
        assert!(r.cpu_s.is_some());
        assert!(r.rss_bytes.unwrap_or(0) > 1024 * 1024);
        assert!(r.threads.unwrap_or(0) >= 1);
        assert!(r.disk_bytes.unwrap_or(0) >= 100_000);
        assert!(ProcSampler::new(u32::MAX, None).sample().cpu_s.is_none());
        assert!(client_usage().is_some());
    }

    #[test]
    fn sums_what_each_broker_has() {
        let a = ProcReading {
            cpu_s: Some(1.5),
            rss_bytes: Some(10),
            ..Default::default()
        };
        let b = ProcReading {
            cpu_s: Some(2.0),
            disk_bytes: Some(7),
            ..Default::default()
        };
        let s = sum_readings([&a, &b]);
        assert_eq!(s.cpu_s, Some(3.5));
        assert_eq!(s.rss_bytes, Some(10));
        assert_eq!(s.disk_bytes, Some(7));
        assert_eq!(s.threads, None);
        let mut t = BrokerTrack::start(vec![
            ProcSampler::new(std::process::id(), None),
            ProcSampler::new(u32::MAX, None),
        ]);
        let ticks = t.tick(1.0, 1.0);
        assert_eq!(ticks.len(), 2);
        assert!(ticks[0].rss_mib.is_some() && ticks[1].rss_mib.is_none());
        let (cpu, rss, disk) = sum_ticks(&ticks);
        assert!(cpu.is_some() && rss == ticks[0].rss_mib && disk.is_none());
    }
}
