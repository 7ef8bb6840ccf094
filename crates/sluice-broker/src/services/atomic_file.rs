//! The services' durable files (topics, ACLs, SCRAM credentials, quotas, producer-id blocks,
//! delegation tokens under `<data dir>/meta`): each is replaced whole, atomically.
//!
//! Guarantee: after [`write_atomically`] returns, the file holds the new bytes across a crash
//! or power loss, and at no point does a reader or a restart see a partial file: the bytes go
//! to `<name>.tmp` (private to the broker's user), are synced, renamed over `<name>`, and the
//! directory is synced so the rename itself is durable. Blocking: call it off the async
//! workers.

use std::fs;
use std::io::Write;
use std::path::Path;

/// Replaces `dir/name` with `bytes`, durably (see the module comment).
pub(crate) fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = sluice_log::fs::create_private_file(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    fs::rename(&tmp, dir.join(name))?;
    fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: a write replaces the whole file and leaves no temporary file behind.
    #[test]
    fn replaces_whole_file_without_leftovers() {
        let dir = tempfile::tempdir().unwrap();
        write_atomically(dir.path(), "x.json", b"first, longer contents").unwrap();
        write_atomically(dir.path(), "x.json", b"second").unwrap();
        assert_eq!(fs::read(dir.path().join("x.json")).unwrap(), b"second");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["x.json"]);
    }
}
