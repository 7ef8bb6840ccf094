//! The broker under test. Either an embedded Sluice — a `sluice serve` child process (the
//! `sluice` binary beside this one, or `--broker-bin`) on an ephemeral loopback port with a
//! temporary data directory, stopped with SIGTERM when the target is dropped — or the same
//! child with `--storage null` (the calibration's no-op log), or any broker reachable at a
//! `--bootstrap` list, which is checked with a plain TCP connect first so an unreachable
//! address fails within seconds.

use std::io::{BufRead, BufReader, Read};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use crate::limits;

/// A broker to run against.
#[derive(Debug)]
pub enum Target {
    Embedded(EmbeddedBroker),
    External {
        bootstrap: String,
        /// Given with --broker-pid: local broker processes to sample (one per broker).
        pids: Vec<u32>,
        /// Given with --broker-data-dir: the brokers' data directories (paired with `pids`
        /// by position), for bytes on disk.
        data_dirs: Vec<PathBuf>,
    },
    /// `sluice serve --storage null`: the client-ceiling calibration (see `calibrate`).
    Null(EmbeddedBroker),
}

impl Target {
    pub fn bootstrap(&self) -> &str {
        match self {
            Target::Embedded(b) => &b.bootstrap,
            Target::External { bootstrap, .. } => bootstrap,
            Target::Null(b) => &b.bootstrap,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Target::Embedded(_) => "embedded",
            Target::External { .. } => "bootstrap",
            Target::Null(_) => "null",
        }
    }

    /// The broker processes to sample: the embedded (or null) child, or the --broker-pid list.
    pub fn pids(&self) -> Vec<u32> {
        match self {
            Target::Embedded(b) | Target::Null(b) => vec![b.child.id()],
            Target::External { pids, .. } => pids.clone(),
        }
    }

    /// The brokers' data directories, paired with `pids` by position (none for the null
    /// target, which keeps nothing there).
    pub fn data_dirs(&self) -> &[PathBuf] {
        match self {
            Target::Embedded(b) => std::slice::from_ref(&b.data_dir),
            Target::External { data_dirs, .. } => data_dirs,
            Target::Null(_) => &[],
        }
    }

    /// The broker's Prometheus endpoint the bench found itself (the embedded or null
    /// broker's admin listener); `--broker-metrics` gives it for other targets.
    pub fn metrics_url(&self) -> Option<String> {
        match self {
            Target::Embedded(b) | Target::Null(b) => {
                b.metrics.as_ref().map(|a| format!("http://{a}/metrics"))
            }
            Target::External { .. } => None,
        }
    }

    /// Whether consumers can receive what producers send: not from the null target, whose
    /// log keeps nothing (the run then neither waits to drain nor counts loss).
    pub fn delivers(&self) -> bool {
        !matches!(self, Target::Null(_))
    }

    /// Stops an embedded broker; returns a note when it did not exit cleanly.
    pub fn shutdown(self) -> Option<String> {
        match self {
            Target::Embedded(b) | Target::Null(b) => b.stop(),
            Target::External { .. } => None,
        }
    }
}

/// The broker binary for the embedded and null targets: `given` (`--broker-bin`), else the
/// `sluice` in this executable's directory (where cargo and an install put both binaries).
pub fn broker_bin(given: Option<&Path>) -> Result<PathBuf, String> {
    let path = match given {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe()
            .map_err(|e| format!("cannot find this executable: {e}"))?
            .parent()
            .map(|dir| dir.join("sluice"))
            .ok_or("this executable has no directory")?,
    };
    if path.is_file() {
        return Ok(path);
    }
    Err(format!(
        "no broker binary at {}: build it (`cargo build --release -p sluice`, next to \
         sluice-bench in target/release) or give its path with --broker-bin",
        path.display()
    ))
}

/// The short name of a bootstrap list in tables and A/B labels: its first address, and `+N`
/// for the N others (`10.0.0.1:9092+2`), so a three-broker list does not fill a column.
pub fn short_label(bootstrap: &str) -> String {
    let mut entries = bootstrap
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty());
    let Some(first) = entries.next() else {
        return bootstrap.to_string();
    };
    match entries.count() {
        0 => first.to_string(),
        n => format!("{first}+{n}"),
    }
}

/// Checks that at least one `host:port` of a comma-separated bootstrap list accepts a TCP
/// connection, so a typo fails in seconds instead of librdkafka retrying forever.
pub fn check_reachable(bootstrap: &str) -> Result<(), String> {
    match connect_first(bootstrap, limits::BOOTSTRAP_CONNECT_TIMEOUT) {
        Ok(_) => Ok(()),
        Err(problems) if problems.is_empty() => {
            Err(format!("bootstrap list {bootstrap:?} names no host:port"))
        }
        Err(problems) => Err(format!(
            "cannot reach any bootstrap broker: {}",
            problems.join("; ")
        )),
    }
}

/// The first address of a comma-separated bootstrap list that accepts a TCP connection
/// within `timeout`, with the list entry it came from; else every problem met, in order
/// (none when the list names no `host:port`).
pub fn connect_first(
    bootstrap: &str,
    timeout: std::time::Duration,
) -> Result<(String, TcpStream), Vec<String>> {
    let mut problems = Vec::new();
    for entry in bootstrap
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
    {
        let addrs = match entry.to_socket_addrs() {
            Ok(a) => a.collect::<Vec<_>>(),
            Err(e) => {
                problems.push(format!("{entry}: {e}"));
                continue;
            }
        };
        if addrs.is_empty() {
            problems.push(format!("{entry}: resolves to no address"));
        }
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, timeout) {
                Ok(stream) => return Ok((entry.to_string(), stream)),
                Err(e) => problems.push(format!("{entry} ({addr}): {e}")),
            }
        }
    }
    Err(problems)
}

/// A `sluice serve` child process and its temporary data directory.
#[derive(Debug)]
pub struct EmbeddedBroker {
    child: Child,
    bootstrap: String,
    /// Its admin listener (`--metrics-listen 127.0.0.1:0`, unless a --serve-arg set one).
    metrics: Option<String>,
    /// Holds the data directory and the broker's log; removed on drop.
    workdir: tempfile::TempDir,
    data_dir: PathBuf,
    stopped: bool,
}

/// A reader thread passes the child's stdout lines on and keeps draining the pipe afterwards.
fn stdout_lines(stdout: std::process::ChildStdout) -> Result<mpsc::Receiver<String>, String> {
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::Builder::new()
        .name("embedded-stdout".into())
        .spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            loop {
                line.clear();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let _ = tx.send(line.trim().to_string());
                    }
                }
            }
        })
        .map_err(|e| format!("cannot start a thread: {e}"))?;
    Ok(rx)
}

impl EmbeddedBroker {
    /// Starts `<broker bin> serve --listen [PROTOCOL://]127.0.0.1:<port or 0> --data-dir
    /// <tmp>/data --metrics-listen 127.0.0.1:0 [extra...]` and waits for its "sluice listening
    /// on ADDR" line, then briefly for "sluice metrics listening on ADDR" (the admin listener,
    /// scraped for broker-side metrics; left out when an extra argument sets it). A secured
    /// `protocol` (SSL, SASL_SSL, ...) names the listener after it, as Kafka does without a
    /// `listener.security.protocol.map`; its stores and users come from `extra_args`.
    pub fn start(
        exe: &Path,
        extra_args: &[String],
        port: Option<u16>,
        protocol: Option<&str>,
    ) -> Result<EmbeddedBroker, String> {
        let workdir = tempfile::Builder::new()
            .prefix("sluice-bench-")
            .tempdir()
            .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
        let data_dir = workdir.path().join("data");
        let log_path = workdir.path().join("broker.log");
        let log = std::fs::File::create(&log_path)
            .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
        let mut cmd = Command::new(exe);
        cmd.arg("serve")
            .arg("--listen")
            .arg(match protocol {
                Some(p) => format!("{p}://127.0.0.1:{}", port.unwrap_or(0)),
                None => format!("127.0.0.1:{}", port.unwrap_or(0)),
            })
            .arg("--data-dir")
            .arg(&data_dir);
        let own_metrics = !extra_args
            .iter()
            .any(|a| a.contains("metrics-listen") || a.contains("metrics.listen"));
        if own_metrics {
            cmd.arg("--metrics-listen").arg("127.0.0.1:0");
        }
        cmd.args(extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log));
        // Its own process group: Ctrl-C in the terminal reaches only the bench, which then
        // finishes its report and stops the broker itself.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {} serve: {e}", exe.display()))?;
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            return Err("embedded broker has no stdout pipe".into());
        };
        let rx = stdout_lines(stdout)?;
        let broker = EmbeddedBroker {
            child,
            bootstrap: String::new(),
            metrics: None,
            workdir,
            data_dir,
            stopped: false,
        };
        broker.await_addresses(&rx, own_metrics)
    }

    /// Waits for the broker's "listening on" lines (its own metrics listener's too, when the
    /// bench chose it); stops the broker and says why when they do not come in time.
    fn await_addresses(
        mut self,
        rx: &mpsc::Receiver<String>,
        own_metrics: bool,
    ) -> Result<EmbeddedBroker, String> {
        let deadline = Instant::now() + limits::EMBEDDED_START_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let tail = self.log_tail();
                self.stop();
                return Err(format!(
                    "embedded broker did not report its address within {:?}\n{tail}",
                    limits::EMBEDDED_START_TIMEOUT
                ));
            }
            match rx.recv_timeout(left.min(std::time::Duration::from_millis(100))) {
                Ok(line) => {
                    if let Some(addr) = line.strip_prefix("sluice listening on ") {
                        self.bootstrap = addr.trim().to_string();
                        if !own_metrics {
                            return Ok(self);
                        }
                    } else if let Some(addr) = line.strip_prefix("sluice metrics listening on ") {
                        self.metrics = Some(addr.trim().to_string());
                        if !self.bootstrap.is_empty() {
                            return Ok(self);
                        }
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Ok(Some(status)) = self.child.try_wait() {
                        self.stopped = true;
                        return Err(format!(
                            "embedded broker exited ({status}) before listening\n{}",
                            self.log_tail()
                        ));
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait().map(|s| s.to_string()).unwrap_or_default();
                    self.stopped = true;
                    return Err(format!(
                        "embedded broker exited ({status}) before listening\n{}",
                        self.log_tail()
                    ));
                }
            }
        }
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    fn log_tail(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(self.workdir.path().join("broker.log")) {
            let _ = f.read_to_string(&mut text);
        }
        let lines: Vec<&str> = text.lines().collect();
        let from = lines.len().saturating_sub(limits::EMBEDDED_LOG_TAIL_LINES);
        format!(
            "--- embedded broker log (last lines) ---\n{}",
            lines[from..].join("\n")
        )
    }

    /// SIGTERM, wait for a clean exit, SIGKILL after the timeout. Returns a note when the
    /// broker did not exit 0.
    pub fn stop(mut self) -> Option<String> {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> Option<String> {
        if self.stopped {
            return None;
        }
        self.stopped = true;
        use nix::sys::signal::{kill, Signal};
        use nix::unistd::Pid;
        let pid = Pid::from_raw(self.child.id() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        let deadline = Instant::now() + limits::EMBEDDED_STOP_TIMEOUT;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) if status.success() => return None,
                Ok(Some(status)) => {
                    return Some(format!(
                        "embedded broker exited with {status}\n{}",
                        self.log_tail()
                    ))
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(20))
                }
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return Some(format!(
                        "embedded broker did not exit within {:?} of SIGTERM; killed\n{}",
                        limits::EMBEDDED_STOP_TIMEOUT,
                        self.log_tail()
                    ));
                }
            }
        }
    }
}

impl Drop for EmbeddedBroker {
    fn drop(&mut self) {
        // A run that fails half-way must not leave a broker behind.
        let _ = self.stop_inner();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bootstrap_list_is_labelled_by_its_first_address() {
        assert_eq!(short_label("127.0.0.1:9092"), "127.0.0.1:9092");
        assert_eq!(
            short_label("127.0.0.1:9092, 127.0.0.1:9094,127.0.0.1:9096"),
            "127.0.0.1:9092+2"
        );
        assert_eq!(short_label("a:1,,b:2,"), "a:1+1");
        assert_eq!(short_label(""), "");
    }

    #[test]
    fn unreachable_bootstrap_fails_fast_and_clearly() {
        // Bind then drop a listener to get a port that refuses connections.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or(1);
        let t = Instant::now();
        let err = check_reachable(&format!("127.0.0.1:{port}"))
            .err()
            .unwrap_or_default();
        assert!(err.contains("cannot reach"), "{err}");
        assert!(t.elapsed() < limits::BOOTSTRAP_CONNECT_TIMEOUT * 2);
        assert!(check_reachable("no-port-here").is_err());
        assert!(check_reachable(" , ").is_err());
    }

    #[test]
    fn reachable_listener_passes() {
        let l = std::net::TcpListener::bind("127.0.0.1:0");
        if let Ok(l) = l {
            let addr = l.local_addr().map(|a| a.to_string()).unwrap_or_default();
            assert_eq!(check_reachable(&format!("127.0.0.1:1,{addr}")), Ok(()));
        }
    }
}
