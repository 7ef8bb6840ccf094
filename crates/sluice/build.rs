//! Records the git revision for `sluice --version`. Tolerant of a build outside a git
//! checkout (a source tarball, a Docker build without `.git`): the revision is then taken
//! from `SLUICE_GIT_SHA` in the build environment, or reads "unknown".

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    println!("cargo:rerun-if-env-changed=SLUICE_GIT_SHA");
    println!("cargo:rerun-if-changed=build.rs");
    let given = std::env::var("SLUICE_GIT_SHA")
        .ok()
        .filter(|s| !s.trim().is_empty());
    let sha = given.or_else(|| {
        let sha = git(&["rev-parse", "--short=12", "HEAD"])?;
        let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some();
        Some(format!("{sha}{}", if dirty { "-dirty" } else { "" }))
    });
    println!(
        "cargo:rustc-env=SLUICE_GIT_SHA={}",
        sha.as_deref().unwrap_or("unknown")
    );
    // Re-run when HEAD moves (the paths work in worktrees too).
    for what in ["HEAD", "index"] {
        if let Some(p) = git(&["rev-parse", "--git-path", what]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
}
