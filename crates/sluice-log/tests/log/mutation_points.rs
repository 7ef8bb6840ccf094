//! The mutation points of the sync-order mutation check stay complete (docs/storage.md
//! §11a, `scripts/mutation-check.sh`): a cheap check of the sources, run in the normal
//! suite, so that a new sync cannot be added without a mutation point that breaks it.
//!
//! What must hold:
//! - the `mutated!("..")` sites in `src/` name exactly the points of
//!   `sluice_log::mutation::POINTS`, each listed once;
//! - every sync call in the log's production code (`sync_data()`, `sync_dir(`, a
//!   segment's `sync()`, the checkpointer's `sync_counted()` and `sync_new_dirs(`) has a
//!   mutation point within the five lines before it (or on its line), or a comment
//!   `No mutation point: <why>` there (a wrapper whose callers carry the point, a sync
//!   no durability depends on); `write_file_atomic` has its points inside, by file name;
//! - the script runs exactly these points (`scripts/mutation-check.sh --list`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const SYNC_CALLS: [&str; 5] = [
    ".sync_data()",
    ".sync_dir(",
    ".sync()",
    "sync_counted()",
    "sync_new_dirs(",
];
/// Lines before a sync call in which its mutation point (or the reason for none) is.
const WINDOW_LINES: usize = 5;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// (file name, production lines: everything before the `#[cfg(test)]` module).
fn sources() -> Vec<(String, Vec<String>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(crate_dir().join("src"))
        .expect("src")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).expect("read source");
            let lines = text
                .lines()
                .take_while(|l| !l.starts_with("#[cfg(test)]"))
                .map(str::to_owned)
                .collect();
            (file_name(path), lines)
        })
        .collect()
}

fn file_name(path: &Path) -> String {
    path.file_name().expect("name").to_string_lossy().into()
}

fn is_comment(line: &str) -> bool {
    line.trim_start().starts_with("//")
}

/// Every `mutated!("name")` in code (not comments), with where it is.
fn mutated_sites(sources: &[(String, Vec<String>)]) -> Vec<(String, String)> {
    let mut sites = Vec::new();
    for (file, lines) in sources {
        for (i, line) in lines.iter().enumerate().filter(|(_, l)| !is_comment(l)) {
            for part in line.split("mutated!(\"").skip(1) {
                let name = part.split('"').next().expect("name");
                sites.push((name.to_owned(), format!("{file}:{}", i + 1)));
            }
        }
    }
    sites
}

fn points() -> BTreeSet<String> {
    let names: Vec<&str> = sluice_log::mutation::POINTS.iter().map(|p| p.0).collect();
    let set: BTreeSet<String> = names.iter().map(|n| n.to_string()).collect();
    assert_eq!(set.len(), names.len(), "a point is listed twice in POINTS");
    set
}

#[test]
fn every_mutation_point_is_in_the_source_and_in_the_list() {
    let sites = mutated_sites(&sources());
    let in_source: BTreeSet<String> = sites.iter().map(|s| s.0.clone()).collect();
    let listed = points();
    let unlisted: Vec<&(String, String)> =
        sites.iter().filter(|s| !listed.contains(&s.0)).collect();
    assert!(
        unlisted.is_empty(),
        "mutated! names missing from mutation::POINTS: {unlisted:?}"
    );
    let unused: Vec<&String> = listed.difference(&in_source).collect();
    assert!(
        unused.is_empty(),
        "mutation::POINTS names no mutated! site uses: {unused:?}"
    );
}

#[test]
fn every_sync_call_has_a_mutation_point() {
    let mut missing = Vec::new();
    let mut syncs = 0;
    for (file, lines) in sources() {
        // The simulated file system and the catalogue itself are not the log.
        if file == "sim_fs.rs" || file == "mutation.rs" {
            continue;
        }
        for (i, line) in lines.iter().enumerate() {
            let code = line.trim_start();
            let is_sync = SYNC_CALLS.iter().any(|call| code.contains(call));
            // Definitions, and the `Fs` implementations delegating to the system.
            let exempt = is_comment(code)
                || code.contains("fn ")
                || code.starts_with("self.0.")
                || code.starts_with("self.inner.");
            if !is_sync || exempt {
                continue;
            }
            syncs += 1;
            let window = &lines[i.saturating_sub(WINDOW_LINES)..=i];
            let covered = window
                .iter()
                .any(|l| l.contains("mutat") || l.contains("No mutation point: "));
            if !covered {
                missing.push(format!("{file}:{}: {code}", i + 1));
            }
        }
    }
    assert!(
        syncs > 30,
        "found only {syncs} sync calls: the scan is broken"
    );
    assert!(
        missing.is_empty(),
        "sync calls without a mutation point (add one to src/mutation.rs and a mutated!(..) \
         beside the call, then run scripts/mutation-check.sh on it; or say `No mutation point: \
         <why>` in a comment above it):\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_script_runs_every_mutation_point() {
    let script = crate_dir().join("../../scripts/mutation-check.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg("--list")
        .output()
        .expect("run scripts/mutation-check.sh --list");
    assert!(out.status.success(), "{script:?} --list failed");
    let listed: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(listed, points(), "the script's points differ from POINTS");
}
