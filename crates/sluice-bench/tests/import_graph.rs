//! The bench's modules import in one direction only: `scripts/import-graph.py --check` finds no
//! cycle among them (issue 36: a 13-file circle ran through the old `engine.rs`). The script
//! itself is checked first on a two-module crate that does have a cycle, so a script that never
//! reports one cannot pass this test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn import_graph(args: &[&str]) -> Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    Command::new("python3")
        .arg(root.join("scripts/import-graph.py"))
        .args(args)
        .output()
        .expect("python3 runs scripts/import-graph.py")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn the_script_reports_a_cycle_and_the_import_that_closes_it() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let src: PathBuf = dir.path().join("src");
    std::fs::create_dir(&src).expect("src");
    std::fs::write(src.join("lib.rs"), "pub mod high;\npub mod low;\n").expect("lib.rs");
    std::fs::write(
        src.join("high.rs"),
        "use crate::low::Clock;\npub struct Run(Clock);\n",
    )
    .expect("high.rs");
    // The upward import: a lower module borrowing a name from the module that uses it.
    std::fs::write(
        src.join("low.rs"),
        "pub struct Clock;\npub fn f(_: &crate::high::Run) {}\n",
    )
    .expect("low.rs");
    let crate_dir = dir.path().to_str().expect("utf-8 path");
    let out = import_graph(&[crate_dir, "--check"]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("cycle 1: 2 modules"), "{t}");
    // Either import closes a two-module cycle; the one listed names what it borrows.
    assert!(t.contains("closed by 1 upward imports"), "{t}");
    assert!(
        t.contains("low -> high {Run}") || t.contains("high -> low {Clock}"),
        "{t}"
    );
    // Without --check it only prints.
    assert_eq!(import_graph(&[crate_dir]).status.code(), Some(0));
}

#[test]
fn bench_modules_import_in_one_direction() {
    let out = import_graph(&["sluice-bench", "--check"]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("no cycles"), "{t}");
    // The folder modules count as one node each, and still form no cycle.
    let out = import_graph(&["sluice-bench", "--depth", "1", "--check"]);
    assert!(out.status.success(), "{}", text(&out));
}
