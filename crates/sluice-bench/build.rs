//! Records the git commit and the rustc version for the report's reproducibility block and
//! `sluice-bench --version`. Outside a git checkout (a source tarball, a Docker build without
//! `.git`) the commit comes from `SLUICE_GIT_SHA` in the build environment, or reads "unknown".

use std::process::Command;

fn run(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=SLUICE_GIT_SHA");
    let given = std::env::var("SLUICE_GIT_SHA")
        .ok()
        .filter(|s| !s.trim().is_empty());
    let sha = given.or_else(|| {
        let sha = run("git", &["rev-parse", "--short=12", "HEAD"])?;
        let dirty = run("git", &["status", "--porcelain", "--untracked-files=no"])
            .is_some_and(|s| !s.is_empty());
        Some(format!("{sha}{}", if dirty { "-dirty" } else { "" }))
    });
    println!(
        "cargo:rustc-env=SLUICE_BENCH_GIT_SHA={}",
        sha.as_deref().unwrap_or("unknown")
    );
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = run(&rustc, &["--version"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=SLUICE_BENCH_RUSTC={version}");
    // Re-run when HEAD moves (the paths work in worktrees too).
    for what in ["HEAD", "index"] {
        if let Some(p) = run("git", &["rev-parse", "--git-path", what]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
