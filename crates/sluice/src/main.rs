//! The `sluice` binary: the broker only, command-line parsing and wiring. `sluice serve` runs
//! the broker. The benchmark lab is a separate binary, `sluice-bench` (crate `sluice-bench`,
//! which links librdkafka): `sluice bench ARGS` only replaces this process with the
//! `sluice-bench` beside it, so the broker builds without cmake or librdkafka and the command
//! users know keeps working wherever both binaries are installed together.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sluice_broker::{BrokerConfig, Server};
use sluice_protocol::alloc_guard::GuardedAlloc;

/// `--version`: the crate version and the git revision it was built from (`build.rs`).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("SLUICE_GIT_SHA"),
    ")"
);

/// Hostile array counts in requests must not abort the process; see `alloc_guard`.
#[global_allocator]
static ALLOC: GuardedAlloc = GuardedAlloc;

#[derive(Debug, Parser)]
#[command(
    name = "sluice",
    version = VERSION,
    about = "A durable single-node Kafka-compatible broker"
)]
struct Cli {
    /// Log line format on stderr: text, or json (one JSON object per line). Filters come
    /// from SLUICE_LOG (e.g. `info`, `sluice_broker=debug,info`).
    #[arg(long, global = true, value_enum, default_value = "text")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

// Parsed once at start; the size difference between the variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Run the broker.
    Serve(ServeArgs),
    /// Benchmark a broker: runs `sluice-bench ARGS` from this binary's directory (the lab is
    /// a separate binary; see `sluice-bench --help`).
    #[command(disable_help_flag = true, disable_version_flag = true)]
    Bench {
        /// Everything after `bench`, passed on unchanged.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<OsString>,
    },
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// Address to listen on (port 0 picks a free port), or Kafka's listener list
    /// (`SASL_SSL://0.0.0.0:9093,PLAINTEXT://127.0.0.1:9092`). Config key: listeners
    /// (default 127.0.0.1:9092).
    #[arg(long)]
    listen: Option<String>,
    /// Data directory. Config key: log.dirs (default ./data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// host:port given to clients of the first listener (defaults to the bound address), or
    /// Kafka's `NAME://host:port,...`. Config key: advertised.listeners.
    #[arg(long)]
    advertised_listener: Option<String>,
    /// This broker's id. Config key: node.id.
    #[arg(long)]
    node_id: Option<i32>,
    /// Create unknown topics when clients ask for their metadata. Config key: auto.create.topics.enable.
    #[arg(long, action = clap::ArgAction::Set)]
    auto_create_topics: Option<bool>,
    /// Partitions for new topics. Config key: num.partitions.
    #[arg(long)]
    default_partitions: Option<i32>,
    /// Default retention.ms for new topics (-1: forever). Config key: log.retention.ms.
    #[arg(long, allow_hyphen_values = true)]
    retention_ms: Option<i64>,
    /// Default retention.bytes for new topics (-1: no limit). Config key: log.retention.bytes.
    #[arg(long, allow_hyphen_values = true)]
    retention_bytes: Option<i64>,
    /// Default segment.bytes. Config key: log.segment.bytes.
    #[arg(long)]
    segment_bytes: Option<i64>,
    /// Default segment.ms. Config key: log.roll.ms.
    #[arg(long)]
    segment_ms: Option<i64>,
    /// Default max.message.bytes. Config key: message.max.bytes.
    #[arg(long)]
    max_message_bytes: Option<i64>,
    /// How often retention runs. Config key: log.retention.check.interval.ms.
    #[arg(long)]
    retention_check_interval_ms: Option<u64>,
    /// always: answer acks=1/all only after fdatasync (default); never: page-cache durability.
    #[arg(long, value_parser = ["always", "never"])]
    fsync: Option<String>,
    /// disk (default), or null: a no-op log behind the same front end that acknowledges
    /// produce and keeps nothing (fetch finds an empty log), for `sluice-bench --calibrate`.
    /// Never for data. Config key: sluice.storage.
    #[arg(long, value_parser = ["disk", "null"])]
    storage: Option<String>,
    /// Concurrent connection limit. Config key: max.connections.
    #[arg(long)]
    max_connections: Option<usize>,
    /// Largest request in bytes. Config key: socket.request.max.bytes.
    #[arg(long)]
    max_request_bytes: Option<usize>,
    /// Request bytes buffered across all connections. Config key: queued.max.request.bytes.
    #[arg(long)]
    queued_max_request_bytes: Option<usize>,
    /// host:port of the admin listener serving Prometheus /metrics and /ready (off when not
    /// given; port 0 picks a free port). Config key: metrics.listen.
    #[arg(long)]
    metrics_listen: Option<String>,
    /// A server.properties-style file. Precedence: flags > SLUICE_* environment > file >
    /// defaults (docs/configuration.md).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Sets any broker setting by its Kafka name, e.g.
    /// `--override group.initial.rebalance.delay.ms=0`. Repeatable; wins over the
    /// environment and the file, loses to the dedicated flags above.
    #[arg(long = "override", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
}

impl ServeArgs {
    /// The command-line settings as (key, value) in the order they apply: `--override`
    /// first, then the dedicated flags, each an alias of one key of the config table.
    fn flags(&self) -> Result<Vec<(String, String)>, String> {
        let mut out = Vec::new();
        for item in &self.overrides {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| format!("--override {item}: expected KEY=VALUE"))?;
            out.push((key.trim().to_string(), value.to_string()));
        }
        let n = |v: Option<i64>| v.map(|x| x.to_string());
        let u = |v: Option<usize>| v.map(|x| x.to_string());
        let aliases = [
            ("listeners", self.listen.clone()),
            (
                "log.dirs",
                self.data_dir.as_ref().map(|d| d.display().to_string()),
            ),
            ("advertised.listeners", self.advertised_listener.clone()),
            ("node.id", self.node_id.map(|v| v.to_string())),
            (
                "auto.create.topics.enable",
                self.auto_create_topics.map(|v| v.to_string()),
            ),
            (
                "num.partitions",
                self.default_partitions.map(|v| v.to_string()),
            ),
            ("log.retention.ms", n(self.retention_ms)),
            ("log.retention.bytes", n(self.retention_bytes)),
            ("log.segment.bytes", n(self.segment_bytes)),
            ("log.roll.ms", n(self.segment_ms)),
            ("message.max.bytes", n(self.max_message_bytes)),
            (
                "log.retention.check.interval.ms",
                self.retention_check_interval_ms.map(|v| v.to_string()),
            ),
            ("sluice.fsync", self.fsync.clone()),
            ("sluice.storage", self.storage.clone()),
            ("max.connections", u(self.max_connections)),
            ("socket.request.max.bytes", u(self.max_request_bytes)),
            ("queued.max.request.bytes", u(self.queued_max_request_bytes)),
            ("metrics.listen", self.metrics_listen.clone()),
        ];
        for (key, value) in aliases {
            if let Some(value) = value {
                out.push((key.to_string(), value));
            }
        }
        Ok(out)
    }

    /// Builds the broker config from its sources: defaults < file < environment < flags.
    fn to_config(&self) -> Result<BrokerConfig, String> {
        let text = match &self.config {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| format!("reading {}: {e}", path.display()))?,
            ),
            None => None,
        };
        let name = self.config.as_ref().map(|p| p.display().to_string());
        let file = name.as_deref().zip(text.as_deref());
        // Every variable, so that a misspelt SLUICE_* one is refused rather than ignored (a
        // value that is not UTF-8 is then refused by its setting's check).
        let env: Vec<(String, String)> = std::env::vars_os()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .collect();
        BrokerConfig::load(file, &env, &self.flags()?).map_err(|e| e.to_string())
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::Bench { args } => exec_bench(args),
    }
}

/// `sluice bench ARGS`: replaces this process with `sluice-bench ARGS` from the same
/// directory, so signals, exit codes and output are the bench's own. Only returns on failure.
fn exec_bench(args: Vec<OsString>) -> ExitCode {
    use std::os::unix::process::CommandExt;
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("sluice-bench")));
    let Some(bench) = beside.filter(|p| p.is_file()) else {
        eprintln!(
            "sluice: the benchmark lab is a separate binary, sluice-bench, and none is installed \
             beside this one; build it with `cargo build --release -p sluice-bench` (it needs \
             cmake, a C compiler and make for librdkafka) and run target/release/sluice-bench"
        );
        return ExitCode::FAILURE;
    };
    let error = std::process::Command::new(&bench).args(args).exec();
    eprintln!("sluice: cannot run {}: {error}", bench.display());
    ExitCode::FAILURE
}

/// Logs go to stderr, filtered by `SLUICE_LOG` (tracing's EnvFilter syntax; default
/// `info`), as text or as one JSON object per line.
fn init_logging(format: LogFormat) {
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG").unwrap_or_else(|_| "info".into());
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter);
    match format {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn serve(args: ServeArgs) -> ExitCode {
    // Fetch buffers are reused by the heap instead of faulted in afresh; see the function.
    if !sluice_protocol::alloc_guard::tune_system_allocator() {
        tracing::debug!("system allocator thresholds left at their defaults");
    }
    let config = match args.to_config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sluice: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("sluice-net")
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sluice: cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        // Install the signal handlers before anything can announce readiness: a SIGTERM that
        // arrives right after the listening line must still mean a clean shutdown.
        let shutdown = match shutdown_signal() {
            Ok(f) => f,
            Err(e) => {
                eprintln!("sluice: cannot install signal handlers: {e}");
                return ExitCode::FAILURE;
            }
        };
        let server = match Server::bind(config).await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "startup failed");
                eprintln!("sluice: {e}");
                return ExitCode::FAILURE;
            }
        };
        if let Ok(addr) = server.local_addr() {
            // The one line on stdout: scripts and tests wait for it to know the port.
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "sluice listening on {addr}");
            // The admin listener's line comes after, so the first line stays the contract.
            if let Some(admin) = server.admin_addr() {
                let _ = writeln!(out, "sluice metrics listening on {admin}");
            }
            // Every listener after the first, by name (the first line stays the contract).
            for (name, addr) in server.listener_addrs().into_iter().skip(1) {
                let _ = writeln!(out, "sluice listener {name} listening on {addr}");
            }
            let _ = out.flush();
        }
        match server.run(shutdown).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("sluice: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

/// Installs SIGTERM and SIGINT handlers now and returns a future that completes on either.
fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM received"),
            _ = int.recv() => tracing::info!("SIGINT received"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Args as _;

    // Goal: the convenience flags are aliases of config-table rows: with every flag given,
    // each key `flags` produces is a row of the table (not a security key or a typo that
    // `BrokerConfig::set` would refuse only when someone uses the flag), and the values
    // load. A flag added to `ServeArgs` but not to `flags` is caught by the count.
    #[test]
    fn every_flag_is_a_table_key() {
        let cli = Cli::try_parse_from([
            "sluice",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            "/tmp/x",
            "--advertised-listener",
            "localhost:9092",
            "--node-id",
            "3",
            "--auto-create-topics",
            "false",
            "--default-partitions",
            "2",
            "--retention-ms",
            "-1",
            "--retention-bytes",
            "-1",
            "--segment-bytes",
            "1048576",
            "--segment-ms",
            "60000",
            "--max-message-bytes",
            "2000000",
            "--retention-check-interval-ms",
            "1000",
            "--fsync",
            "never",
            "--storage",
            "disk",
            "--max-connections",
            "10",
            "--max-request-bytes",
            "1048576",
            "--queued-max-request-bytes",
            "104857600",
            "--metrics-listen",
            "127.0.0.1:0",
        ])
        .expect("every flag parses");
        let Command::Serve(args) = cli.command else {
            panic!("serve")
        };
        let flags = args.flags().expect("flags");
        let with_values = ServeArgs::augment_args(clap::Command::new("x"))
            .get_arguments()
            .filter(|a| !matches!(a.get_id().as_str(), "config" | "overrides"))
            .count();
        assert_eq!(flags.len(), with_values, "one key per flag: {flags:?}");
        for (key, _) in &flags {
            assert!(
                sluice_broker::config_table::lookup(key).is_some(),
                "--{key}: not a row of the config table"
            );
        }
        let c = BrokerConfig::load(None, &[], &flags).expect("the flags' values load");
        assert_eq!(c.node_id, 3);
        assert_eq!(c.topic_defaults.partitions, 2);
    }
}
