//! `sluice-bench`: the benchmark lab. Drives any Kafka-compatible broker over TCP through
//! librdkafka — an embedded `sluice serve` child by default, or `--bootstrap host:port` — with
//! an open-loop, seeded schedule, and reports throughput, ack and end-to-end latency (also
//! from intended send time), a loss/duplicate/reorder audit, consumer lag, and the broker
//! process's CPU, memory and disk.
//!
//! Exit codes: 0 success; 1 the run could not be done (unreachable broker, admin failure);
//! 2 bad usage; 3 a `--gate` was violated or a metric regressed past `--max-regress`; 4
//! acknowledged records were lost or delivery was below 100 % (unless `--allow-loss` or a gate
//! on `lost`, `lost_acked`, `lost_unsynced` or `delivery_pct` judges it; records acknowledged
//! with acks=1 or 0 and lost, `lost_unsynced`, are reported but permitted by their contract),
//! or records were delivered more than once (unless `--allow-duplicates` or a gate on
//! `duplicates` judges it);
//! 130 interrupted by Ctrl-C (report still written).
//!
//! Commands: `sluice-bench [FLAGS]` runs `--preset` (baseline by default); `bench list` lists
//! the presets; `bench run PRESET|FILE` runs a preset or a scenario file; `bench sweep
//! KEY=V1,V2 ...` runs every combination of the values over the chosen preset or file.

pub mod args;
pub mod audit;
pub mod availability;
pub mod bootstrap;
pub mod brokermetrics;
pub mod calibrate;
pub mod clientconf;
pub mod clientstats;
pub mod compare;
pub mod compression;
pub mod csv;
pub mod engine;
pub mod export;
pub mod faults;
pub mod gate;
pub mod hist;
pub mod html;
pub mod keys;
pub mod lagview;
pub mod limits;
pub mod omb_import;
pub mod payload;
pub mod presets;
pub mod procstat;
pub mod regress;
pub mod report;
pub mod scenario;
pub mod scenario_file;
pub mod settle;
pub mod shaping;
pub mod target;
pub mod topology;
pub mod txmeta;
pub mod txn;
pub mod units;
pub mod vocab;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::args::Action;
use crate::gate::Gate;
use crate::scenario::Scenario;
use crate::target::{EmbeddedBroker, Target};

pub const EXIT_ERROR: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_GATE_FAILED: u8 = 3;
pub const EXIT_DATA_LOSS: u8 = 4;
pub const EXIT_INTERRUPTED: u8 = 130;

pub use crate::args::BenchArgs;

fn unix_now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// A broker to run against, as given on the command line.
#[derive(Debug, Clone)]
enum TargetSpec {
    Embedded,
    Bootstrap(String),
    /// `sluice serve --storage null` (client-ceiling calibration).
    Null,
}

impl TargetSpec {
    fn name(&self) -> String {
        match self {
            TargetSpec::Embedded => "embedded".into(),
            TargetSpec::Bootstrap(b) => b.clone(),
            TargetSpec::Null => "null".into(),
        }
    }

    /// The short name in tables and A/B labels (see `target::short_label`).
    fn label(&self) -> String {
        match self {
            TargetSpec::Bootstrap(b) => target::short_label(b),
            other => other.name(),
        }
    }
}

/// Settles the disk before a run of a comparison and says how long it took.
fn settle_before_run() -> settle::Settle {
    let s = settle::settle();
    println!(
        "settle: sync {:.0} ms, then the disks {} after {:.0} ms",
        s.sync_ms,
        if s.idle { "idle" } else { "still busy" },
        s.idle_ms
    );
    s
}

/// One run: start (or reach) the target, run the scenario, stop the target, build the report.
fn run_one(
    spec: &TargetSpec,
    scenario: &Scenario,
    label: Option<&str>,
    args: &BenchArgs,
    stop: &Arc<AtomicBool>,
) -> Result<report::Report, String> {
    let started_at = unix_now_s();
    let target = start_target(spec, args)?;
    // The null broker speaks plaintext only: the user's security settings stay out of it.
    let plain_scenario;
    let scenario = if matches!(target, Target::Null(_)) {
        plain_scenario = Scenario {
            client_config: scenario.client_config.without_security(),
            ..scenario.clone()
        };
        &plain_scenario
    } else {
        scenario
    };
    if let Err(e) = engine::check_metadata(target.bootstrap(), &scenario.client_config) {
        let _ = target.shutdown();
        return Err(e);
    }
    let info = target_info(spec, &target);
    if !args.quiet {
        eprintln!(
            "sluice bench: preset {}{} against {} broker {} — warmup {:.1} s, measure {:.1} s",
            scenario.preset,
            label.map(|l| format!(" [{l}]")).unwrap_or_default(),
            info.kind,
            info.bootstrap,
            scenario.warmup_s.as_secs_f64(),
            scenario.duration_s.as_secs_f64()
        );
    }
    let opts = vocab::RunOptions {
        bootstrap: info.bootstrap.clone(),
        broker_pids: info.broker_pids.clone(),
        broker_data_dirs: target.data_dirs().to_vec(),
        delete_topic: matches!(target, Target::External { .. }) && !args.keep_topic,
        delivers: target.delivers(),
        progress: !args.quiet,
        broker_metrics: match &target {
            Target::External { .. } => args.broker_metrics.clone(),
            other => other.metrics_url().into_iter().collect(),
        },
    };
    let result = engine::run(scenario, &opts, stop.clone());
    let mut warnings = Vec::new();
    if let Some(note) = target.shutdown() {
        warnings.push(note);
    }
    let data = match result {
        Ok(d) => d,
        Err(e) => {
            return Err(std::iter::once(e)
                .chain(warnings)
                .collect::<Vec<_>>()
                .join("\n"))
        }
    };
    let mut rep = report::build(scenario, info, data, started_at, warnings);
    rep.label = label.map(str::to_string);
    rep.loss = rep.loss_line();
    rep.duplicated = rep.duplicate_line();
    rep.unsynced = rep.unsynced_line();
    rep.gates = gate::evaluate(&args.gates, &rep.metrics());
    Ok(rep)
}

/// Starts the embedded or null broker, or checks that an external one is reachable.
fn start_target(spec: &TargetSpec, args: &BenchArgs) -> Result<Target, String> {
    Ok(match spec {
        TargetSpec::Bootstrap(b) => {
            target::check_reachable(b)?;
            Target::External {
                bootstrap: b.clone(),
                pids: args.broker_pid.clone(),
                data_dirs: args.broker_data_dir.clone(),
            }
        }
        TargetSpec::Embedded => {
            let bin = target::broker_bin(args.broker_bin.as_deref())?;
            Target::Embedded(EmbeddedBroker::start(
                &bin,
                &args.serve_args,
                args.embedded_port,
                args.embedded_listener.as_deref(),
            )?)
        }
        TargetSpec::Null => {
            let bin = target::broker_bin(args.broker_bin.as_deref())?;
            Target::Null(EmbeddedBroker::start(
                &bin,
                &calibrate::null_serve_args(),
                None,
                None,
            )?)
        }
    })
}

/// The report's description of the target.
fn target_info(spec: &TargetSpec, target: &Target) -> report::TargetInfo {
    report::TargetInfo {
        kind: target.kind(),
        spec: spec.name(),
        bootstrap: target.bootstrap().to_string(),
        broker_pid: target.pids().first().copied(),
        broker_data_dir: target.data_dirs().first().map(|p| p.display().to_string()),
        broker_pids: target.pids(),
        broker_data_dirs: target
            .data_dirs()
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        label: spec.label(),
    }
}

/// The client-ceiling run for one scenario (see `calibrate`): its gates are not judged, its
/// report is not kept, only the rates.
fn calibrate_client(
    scenario: &Scenario,
    label: Option<&str>,
    args: &BenchArgs,
    stop: &Arc<AtomicBool>,
) -> Result<calibrate::ClientCeiling, String> {
    let s = calibrate::scenario(scenario);
    let quiet = BenchArgs {
        gates: Vec::new(),
        ..args.clone()
    };
    let rep = run_one(&TargetSpec::Null, &s, label, &quiet, stop)?;
    let c = calibrate::ClientCeiling {
        produce_msg_s: rep.throughput.acked_msg_s,
        produce_mib_s: rep.throughput.produced_mib_s,
        consume_msg_s: rep.throughput.received_msg_s,
        measure_s: rep.window.measure_s,
    };
    eprintln!(
        "sluice bench: client ceiling{}: {:.0} msg/s ({:.1} MiB/s) produced, {:.0} msg/s consumed (unthrottled, null target, {:.1} s)",
        label.map(|l| format!(" [{l}]")).unwrap_or_default(),
        c.produce_msg_s,
        c.produce_mib_s,
        c.consume_msg_s,
        c.measure_s
    );
    Ok(c)
}

fn write_file(path: &std::path::Path, what: &str, bytes: &[u8]) -> Result<(), ExitCode> {
    match std::fs::write(path, bytes) {
        Ok(()) => {
            eprintln!("sluice bench: {what} written to {}", path.display());
            Ok(())
        }
        Err(e) => {
            eprintln!("sluice bench: cannot write {}: {e}", path.display());
            Err(ExitCode::from(EXIT_ERROR))
        }
    }
}

/// Everything decided before the first run: the runs (label, scenario), the base scenario,
/// the file's gates and warnings, and the loaded baseline.
struct Plan {
    base: Scenario,
    runs: Vec<(Option<String>, Scenario)>,
    gates: Vec<Gate>,
    warnings: Vec<String>,
    description: Option<String>,
    baseline: Option<regress::Baseline>,
}

fn plan(args: &BenchArgs) -> Result<Plan, String> {
    let source = args.source()?;
    let base = args.scenario_from(&source)?;
    let cli_sweep = match args.action()? {
        Action::Sweep(s) => s,
        _ => Vec::new(),
    };
    let (gates, warnings, file_sweep) = match source.file() {
        Some(f) => (f.gates.clone(), f.scenario()?.1, f.sweep.clone()),
        None => (Vec::new(), Vec::new(), Vec::new()),
    };
    let variants = source
        .preset()
        .expand(&base)
        .into_iter()
        .map(|(l, s)| (l.map(str::to_string), s))
        .collect();
    let sweep = scenario_file::merge_sweeps(&file_sweep, &cli_sweep);
    let runs = scenario_file::expand(variants, &sweep)?;
    let baseline = match &args.baseline {
        Some(p) => Some(regress::load(p)?),
        None => None,
    };
    Ok(Plan {
        base,
        runs,
        gates,
        warnings,
        description: source.file().and_then(|f| f.description.clone()),
        baseline,
    })
}

/// --broker-pid and --broker-data-dir: bounded, distinct pids, and data directories paired
/// with pids by position (one directory alone, without a pid, is accepted as before).
fn check_broker_pids(args: &BenchArgs) -> Result<(), String> {
    let pids = &args.broker_pid;
    if pids.len() > limits::MAX_BROKER_PIDS {
        return Err(format!("at most {} --broker-pid", limits::MAX_BROKER_PIDS));
    }
    let mut seen = pids.clone();
    seen.sort_unstable();
    seen.dedup();
    if seen.len() != pids.len() {
        return Err("--broker-pid lists a pid twice".into());
    }
    let dirs = args.broker_data_dir.len();
    if dirs > 1 && dirs != pids.len() {
        return Err(format!(
            "{dirs} --broker-data-dir for {} --broker-pid: give one per pid, in the same order",
            pids.len()
        ));
    }
    Ok(())
}

/// Target names for the comparison: the spec's short label, with `#<position>` added when the same spec is
/// given twice (an A/A run, e.g. `--target embedded --target embedded`, measures the noise).
fn unique_names(targets: &[TargetSpec]) -> Vec<String> {
    let names: Vec<String> = targets.iter().map(TargetSpec::label).collect();
    names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            if names.iter().filter(|m| *m == n).count() > 1 {
                format!("{n}#{}", i + 1)
            } else {
                n.clone()
            }
        })
        .collect()
}

/// `--omb-json` / `--ssp-json`: one file per run (see `export::numbered_path`).
fn write_exports(args: &BenchArgs, reports: &[report::Report]) -> Result<(), ExitCode> {
    let n = reports.len();
    for (i, r) in reports.iter().enumerate() {
        let label = r.label.as_deref();
        if let Some(p) = &args.omb_json {
            let bytes = serde_json::to_vec_pretty(&export::omb(r)).unwrap_or_default();
            write_file(&export::numbered_path(p, i, n, label), "OMB result", &bytes)?;
        }
        if let Some(p) = &args.ssp_json {
            let bytes = serde_json::to_vec_pretty(&export::ssp(r)).unwrap_or_default();
            write_file(&export::numbered_path(p, i, n, label), "SSP result", &bytes)?;
        }
    }
    Ok(())
}

/// Metrics a gate may judge loss by instead of the default exit 4.
const LOSS_METRICS: [&str; 4] = ["lost", "lost_acked", "lost_unsynced", "delivery_pct"];
/// The metric a gate may judge duplicates by instead of the default exit 4.
const DUPLICATE_METRICS: [&str; 1] = ["duplicates"];

/// Whether any gate reads one of `metrics` (on either side).
fn gated_on(gates: &[gate::Gate], metrics: &[&str]) -> bool {
    gates.iter().any(|g| {
        metrics.contains(&g.metric.as_str())
            || g.rhs_metric
                .as_deref()
                .is_some_and(|m| metrics.contains(&m))
    })
}

/// How the run's data verdicts are judged: `--allow-loss`, `--allow-duplicates` and the gates.
struct DataPolicy<'a> {
    allow_loss: bool,
    allow_duplicates: bool,
    gates: &'a [gate::Gate],
}

impl DataPolicy<'_> {
    /// The lines that make the run exit 4 (`EXIT_DATA_LOSS`), from each run's (loss line,
    /// duplicate line): a loss line unless `--allow-loss` or a loss gate judges loss instead,
    /// a duplicate line unless `--allow-duplicates` or a gate on `duplicates` does. Empty: no
    /// exit 4.
    fn failures<'r>(
        &self,
        runs: impl Iterator<Item = (Option<&'r String>, Option<&'r String>)>,
    ) -> Vec<String> {
        let judge_loss = !self.allow_loss && !gated_on(self.gates, &LOSS_METRICS);
        let judge_dups = !self.allow_duplicates && !gated_on(self.gates, &DUPLICATE_METRICS);
        let mut out = Vec::new();
        for (loss, dup) in runs {
            out.extend(loss.filter(|_| judge_loss).cloned());
            out.extend(dup.filter(|_| judge_dups).cloned());
        }
        out
    }
}

/// Runs `sluice-bench` and returns the process exit code.
pub fn run(mut args: BenchArgs) -> ExitCode {
    match run_phases(&mut args) {
        Ok(code) | Err(code) => code,
    }
}

/// The phases of an invocation: the plan, the targets and their checks, the runs, the gates
/// and data policy, the files written, the exit code. An `Err` is an early exit code.
fn run_phases(args: &mut BenchArgs) -> Result<ExitCode, ExitCode> {
    let list = matches!(args.action(), Ok(Action::List));
    if args.list_presets || list {
        print!("{}", presets::preset_list());
        return Ok(ExitCode::SUCCESS);
    }
    let plan = plan(args).map_err(|e| {
        eprintln!("sluice bench: {e}");
        ExitCode::from(EXIT_USAGE)
    })?;
    args.gates.extend(plan.gates.iter().cloned());
    if !args.quiet {
        if let Some(d) = &plan.description {
            eprintln!("sluice bench: scenario {}: {d}", plan.base.preset);
        }
    }
    for w in &plan.warnings {
        eprintln!("sluice bench: warning: {w}");
    }
    let targets = target_specs(args);
    check_targets(args, &targets)?;
    // Ctrl-C / SIGTERM: stop producing, finish the report with what was measured.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(sig, stop.clone()) {
            eprintln!("sluice bench: cannot install a signal handler: {e}");
            return Err(ExitCode::from(EXIT_ERROR));
        }
    }
    let started_at = unix_now_s();
    let done = run_all(args, &plan, &targets, &stop)?;
    let interrupted = done.reports.iter().any(|r| r.window.interrupted)
        || stop.load(std::sync::atomic::Ordering::Relaxed);
    let verdict = Verdict::of(args, &done.reports);
    let comparison = write_outputs(
        args,
        &plan,
        done,
        started_at,
        interrupted,
        verdict.set_gates,
    )?;
    Ok(exit_code(
        interrupted,
        verdict.gates_failed,
        &verdict.failures,
        comparison.as_ref(),
    ))
}

/// The brokers to run against: `--target`s, else `--bootstrap`, else the embedded one.
fn target_specs(args: &BenchArgs) -> Vec<TargetSpec> {
    if !args.targets.is_empty() {
        args.targets
            .iter()
            .map(|t| match t.as_str() {
                "embedded" => TargetSpec::Embedded,
                "null" => TargetSpec::Null,
                _ => TargetSpec::Bootstrap(t.clone()),
            })
            .collect()
    } else if let Some(b) = &args.bootstrap {
        vec![TargetSpec::Bootstrap(b.clone())]
    } else {
        vec![TargetSpec::Embedded]
    }
}

/// The flags that describe the targets, checked; an unreachable broker fails now, not after
/// the runs before it.
fn check_targets(args: &BenchArgs, targets: &[TargetSpec]) -> Result<(), ExitCode> {
    let usage = |e: String| {
        eprintln!("sluice bench: {e}");
        ExitCode::from(EXIT_USAGE)
    };
    let external = targets
        .iter()
        .filter(|t| matches!(t, TargetSpec::Bootstrap(_)))
        .count();
    if args.broker_metrics.len() > limits::MAX_BROKER_METRICS_URLS {
        return Err(usage(format!(
            "at most {} --broker-metrics",
            limits::MAX_BROKER_METRICS_URLS
        )));
    }
    if let Some(e) = args
        .broker_metrics
        .iter()
        .find_map(|u| brokermetrics::parse_url(u).err())
    {
        return Err(usage(format!("--broker-metrics {e}")));
    }
    if (!args.broker_pid.is_empty() || !args.broker_data_dir.is_empty()) && external != 1 {
        return Err(usage("--broker-pid and --broker-data-dir describe the one non-embedded target; give exactly one --bootstrap or non-embedded --target".into()));
    }
    check_broker_pids(args).map_err(usage)?;
    for t in targets {
        if let TargetSpec::Bootstrap(b) = t {
            if let Err(e) = target::check_reachable(b) {
                eprintln!("sluice bench: {e}");
                return Err(ExitCode::from(EXIT_ERROR));
            }
        }
    }
    Ok(())
}

/// The reports of the runs done, and what names them in a set.
struct Done {
    reports: Vec<report::Report>,
    keys: Vec<compare::RunKey>,
    target_names: Vec<String>,
    /// One run of one target: a report, not a set.
    single: bool,
    /// A run failed after others had their report (the failure decides the exit code).
    failed: bool,
}

/// Every run of the plan on every target, in A B B A order and `--repeats` times, each with
/// the client ceiling when calibrating; stops at Ctrl-C or at a failed run.
fn run_all(
    args: &BenchArgs,
    plan: &Plan,
    targets: &[TargetSpec],
    stop: &Arc<AtomicBool>,
) -> Result<Done, ExitCode> {
    let order = compare::abba(targets.len());
    let mut done = Done {
        reports: Vec::new(),
        keys: Vec::new(),
        target_names: unique_names(targets),
        single: plan.runs.len() == 1 && order.len() == 1 && args.repeats == 1,
        failed: false,
    };
    'runs: for (label, scenario) in &plan.runs {
        let ceiling = match args.calibrate {
            true => Some(
                calibrate_client(scenario, label.as_deref(), args, stop).map_err(|e| {
                    eprintln!("sluice bench: calibration failed: {e}");
                    ExitCode::from(EXIT_ERROR)
                })?,
            ),
            false => None,
        };
        let rounds = order.len() * args.repeats as usize;
        for &ti in order.iter().cycle().take(rounds) {
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                break 'runs;
            }
            let settled = (!done.single && !args.no_settle).then(settle_before_run);
            match run_one(&targets[ti], scenario, label.as_deref(), args, stop) {
                Ok(mut rep) => {
                    rep.settle = settled;
                    rep.warnings.extend(plan.warnings.iter().cloned());
                    if let Some(c) = &ceiling {
                        report::attach_ceiling(&mut rep, c);
                    }
                    print!("{}", rep.human());
                    print!("{}", report::calibration_lines(&rep));
                    done.keys.push(compare::RunKey {
                        label: label.clone(),
                        target: done.target_names[ti].clone(),
                    });
                    done.reports.push(rep);
                }
                Err(e) => {
                    eprintln!("sluice bench: {e}");
                    if done.reports.is_empty() {
                        return Err(ExitCode::from(EXIT_ERROR));
                    }
                    done.failed = true;
                    break 'runs;
                }
            }
        }
    }
    Ok(done)
}

/// The gates over every run (cross-run `metric@run` gates judged once) and the data policy.
struct Verdict {
    set_gates: Vec<gate::GateResult>,
    gates_failed: usize,
    failures: Vec<String>,
}

impl Verdict {
    fn of(args: &BenchArgs, reports: &[report::Report]) -> Verdict {
        let runs: Vec<gate::RunMetrics<'_>> = reports
            .iter()
            .map(|r| (r.label.as_deref(), r.target.spec.as_str(), r.metrics()))
            .collect();
        let set_gates = gate::evaluate_set(&args.gates, &runs);
        let gates_failed = reports
            .iter()
            .flat_map(|r| &r.gates)
            .chain(&set_gates)
            .filter(|g| !g.passed)
            .count();
        let failures = DataPolicy {
            allow_loss: args.allow_loss,
            allow_duplicates: args.allow_duplicates,
            gates: &args.gates,
        }
        .failures(
            reports
                .iter()
                .map(|r| (r.loss.as_ref(), r.duplicated.as_ref())),
        );
        Verdict {
            set_gates,
            gates_failed,
            failures,
        }
    }
}

/// Writes the CSV, the exports, the JSON (a run or a set, with the `--baseline` comparison)
/// and the HTML page; returns the comparison.
fn write_outputs(
    args: &BenchArgs,
    plan: &Plan,
    mut done: Done,
    started_at: f64,
    interrupted: bool,
    set_gates: Vec<gate::GateResult>,
) -> Result<Option<regress::Comparison>, ExitCode> {
    let json_path = args.json.clone().or_else(|| {
        (!args.no_report).then(|| {
            let stamp: String = units::utc_string(started_at)
                .chars()
                .filter(|c| c.is_ascii_digit())
                .collect();
            PathBuf::from(format!("sluice-bench-{}-{}.json", plan.base.preset, stamp))
        })
    });
    if let Some(path) = &args.csv {
        write_file(
            path,
            "CSV time series",
            csv::intervals(&done.reports).as_bytes(),
        )?;
    }
    // --baseline: both sides read from the JSON form, so old and new files compare alike.
    let comparison = plan.baseline.as_ref().map(|b| {
        let new: Vec<regress::RunMetrics> = (done.reports.iter())
            .map(|r| regress::run_metrics(&serde_json::to_value(r).unwrap_or_default()))
            .collect();
        regress::compare(b, &new, args.max_regress)
    });
    write_exports(args, &done.reports)?;
    let (json, html_page) = if done.single && done.reports.len() == 1 {
        let rep = &mut done.reports[0];
        if !set_gates.is_empty() {
            rep.gates.extend(set_gates);
            print!("{}", report::gate_lines(&rep.gates));
        }
        if let Some(c) = &comparison {
            print!("{}", c.human());
        }
        let doc = regress::WithBaseline {
            doc: &*rep,
            baseline: comparison.as_ref(),
        };
        let page = args.html.as_ref().map(|_| html::render(rep));
        (serde_json::to_vec_pretty(&doc), page)
    } else {
        let set = compare::build(
            &plan.base.preset,
            units::utc_string(started_at),
            done.target_names,
            done.keys,
            done.reports,
            interrupted,
            set_gates,
        );
        print!("{}", set.human());
        if let Some(c) = &comparison {
            print!("{}", c.human());
        }
        let doc = regress::WithBaseline {
            doc: &set,
            baseline: comparison.as_ref(),
        };
        (
            serde_json::to_vec_pretty(&doc),
            args.html.as_ref().map(|_| set.html()),
        )
    };
    if let Some(path) = json_path {
        let bytes = json.map_err(|e| {
            eprintln!("sluice bench: cannot encode the report: {e}");
            ExitCode::from(EXIT_ERROR)
        })?;
        write_file(&path, "report", &bytes)?;
    }
    if let (Some(path), Some(page)) = (&args.html, html_page) {
        write_file(path, "HTML report", page.as_bytes())?;
    }
    if done.failed && !interrupted {
        return Err(ExitCode::from(EXIT_ERROR));
    }
    Ok(comparison)
}

/// The exit code: interrupted, then a failed run (see `write_outputs`), failed gates or a
/// regression, then lost or duplicated records.
fn exit_code(
    interrupted: bool,
    gates_failed: usize,
    failures: &[String],
    comparison: Option<&regress::Comparison>,
) -> ExitCode {
    if interrupted {
        return ExitCode::from(EXIT_INTERRUPTED);
    }
    let regressed = comparison.is_some_and(|c| !c.passed);
    if gates_failed > 0 || regressed {
        if gates_failed > 0 {
            eprintln!("sluice bench: {gates_failed} gate(s) failed");
        }
        if let Some(c) = comparison.filter(|c| !c.passed) {
            if c.rows.is_empty() {
                eprintln!("sluice bench: no run matched a run of the baseline (by label and target); nothing was compared");
            } else {
                eprintln!(
                    "sluice bench: {} metric(s) regressed past --max-regress against the baseline",
                    c.regressions
                );
            }
        }
        return ExitCode::from(EXIT_GATE_FAILED);
    }
    if !failures.is_empty() {
        for l in failures {
            eprintln!("sluice bench: {l}");
        }
        eprintln!("sluice bench: exit {EXIT_DATA_LOSS} (records lost or duplicated; --allow-loss or a gate on lost, lost_acked, lost_unsynced or delivery_pct decides loss instead, --allow-duplicates or a gate on duplicates decides duplicates)");
        return ExitCode::from(EXIT_DATA_LOSS);
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_fail_the_run_unless_allowed_or_gated() {
        let dup = "5 acknowledged records delivered more than once".to_string();
        let loss = "3 acknowledged records were lost".to_string();
        let gates =
            |g: &[&str]| -> Vec<gate::Gate> { g.iter().map(|e| gate::parse(e).unwrap()).collect() };
        let judge = |allow_loss,
                     allow_duplicates,
                     g: &[gate::Gate],
                     runs: &[(Option<&String>, Option<&String>)]| {
            DataPolicy {
                allow_loss,
                allow_duplicates,
                gates: g,
            }
            .failures(runs.iter().copied())
        };
        let none: Vec<gate::Gate> = Vec::new();
        // By default duplicates exit 4 as loss does.
        assert_eq!(
            judge(false, false, &none, &[(None, Some(&dup))]),
            vec![dup.clone()]
        );
        assert!(judge(false, false, &none, &[(None, None)]).is_empty());
        // --allow-loss does not cover duplicates; --allow-duplicates does not cover loss.
        assert_eq!(
            judge(true, false, &none, &[(Some(&loss), Some(&dup))]),
            vec![dup.clone()]
        );
        assert_eq!(
            judge(false, true, &none, &[(Some(&loss), Some(&dup))]),
            vec![loss.clone()]
        );
        // A gate on duplicates decides instead (its own failure exits 3); a loss gate does not.
        assert!(judge(
            false,
            false,
            &gates(&["duplicates<=10"]),
            &[(None, Some(&dup))]
        )
        .is_empty());
        assert_eq!(
            judge(false, false, &gates(&["lost==0"]), &[(None, Some(&dup))]),
            vec![dup.clone()]
        );
        // Every run of a sweep is judged.
        assert_eq!(
            judge(false, false, &none, &[(None, None), (None, Some(&dup))]).len(),
            1
        );
    }
}
