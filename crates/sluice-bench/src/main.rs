//! The `sluice-bench` binary: the benchmark lab, separate from the broker so the broker builds
//! without cmake or librdkafka. Its embedded and null targets run the `sluice` binary beside
//! it (or `--broker-bin`) as a child process; `sluice bench ARGS` runs this binary.

use std::process::ExitCode;

use clap::Parser;

/// `--version`: the crate version and the git revision it was built from (`build.rs`).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("SLUICE_BENCH_GIT_SHA"),
    ")"
);

#[derive(Debug, Parser)]
#[command(
    name = "sluice-bench",
    version = VERSION,
    about = "Benchmark a Kafka-compatible broker: an embedded Sluice (the `sluice` binary beside this one) by default, or any broker (--bootstrap)"
)]
struct Cli {
    #[command(flatten)]
    args: sluice_bench::BenchArgs,
}

fn main() -> ExitCode {
    sluice_bench::run(Cli::parse().args)
}
