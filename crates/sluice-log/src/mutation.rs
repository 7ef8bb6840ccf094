//! Named mutation points of the sync-order mutation check (`scripts/mutation-check.sh`,
//! `docs/storage.md` §11a).
//!
//! Every place where the order of writes, syncs, renames and unlinks decides what a crash
//! can leave behind carries a `mutated!("name")` test next to its sync. Built with the
//! `mutation` feature, the one point named by the environment variable `SLUICE_MUTATE`
//! breaks its order (a sync skipped, or moved after the step that depends on it), so the
//! check can show that the crash tests fail for each one. Without the feature,
//! `mutated!(..)` is the literal `false`: production builds carry no trace of it (no
//! branch, no lookup, the name not even evaluated).
//!
//! Guarantee: [`POINTS`] lists every point, and `tests/log/mutation_points.rs` checks that
//! it matches the `mutated!` sites in `src/`, that every sync call in `src/` sits next to a
//! point (or says why none is needed), and that the script runs exactly these.

/// Every mutation point: its name and what the mutation breaks.
pub const POINTS: &[(&str, &str)] = &[
    ("commit.ack_before_journal_sync", "the round's journal fdatasync runs after its high watermarks are published and its appends answered"),
    ("commit.segment_lengths_after_handoff", "a round's segment lengths are published after the round is handed to the checkpointer"),
    ("commit.undo_rolled_dir_unsynced", "an undone round's rolled segments are unlinked without a directory sync"),
    ("journal.roll_marker_unsynced", "a journal roll does not sync the end marker of the file it leaves"),
    ("journal.new_file_dir_unsynced", "a new (or recycled) journal file's directory entry is not synced before rounds go to it"),
    ("journal.reuse_header_unsynced", "a journal file reused in place does not sync its new header"),
    ("journal.reuse_dir_unsynced", "a journal file reused in place does not sync the rename's directory"),
    ("journal.discard_unsynced", "an undone round's journal cut is not synced before the next round"),
    ("extents.records_past_durable", "extent records are persisted for bytes the journal has not synced yet"),
    ("checkpoint.extents_unsynced", "a checkpoint does not persist and sync the extents of the segments written since the last one"),
    ("checkpoint.new_dirs_unsynced", "a checkpoint does not sync the directories that got new segment files"),
    ("checkpoint.index_unsynced", "index files of sealed segments are written without a sync"),
    ("checkpoint.retire_before_write", "journal files are retired before the checkpoint that stops needing them is written"),
    ("checkpoint_file.unsynced", "the checkpoint file is renamed into place without its data sync"),
    ("checkpoint_file.dir_unsynced", "the checkpoint file's rename is not made durable by a directory sync"),
    ("producer_snapshot.before_durable", "a producer snapshot is written before its log end is covered by a journal sync"),
    ("producer_snapshot.unsynced", "a producer snapshot is renamed into place without its data sync"),
    ("producer_snapshot.dir_unsynced", "a producer snapshot's rename is not made durable by a directory sync"),
    ("partition_create.dir_unsynced", "a new partition's directory is not synced after its first segment file"),
    ("partition_create.metadata_unsynced", "partition.metadata is renamed into place without its data sync"),
    ("partition_create.metadata_dir_unsynced", "partition.metadata's rename is not made durable by a directory sync"),
    ("partition_create.data_dir_unsynced", "the data directory is not synced after a partition's directory is created"),
    ("partition_delete.dir_unsynced", "a deleted partition's metadata unlink is not synced before its other files go"),
    ("partition_delete.data_dir_unsynced", "the data directory is not synced after a partition's directory is removed"),
    ("delete_records.unpersisted", "DeleteRecords is answered without the new log start in a durable checkpoint"),
    ("retention.dir_unsynced_before_unlinks", "retention unlinks segments without first syncing the partition directory"),
    ("retention.unlinks_synced_once", "retention syncs the directory once after all its unlinks instead of after each"),
    ("journal_cleaner.copy_unsynced", "the journal cleaner's copy is named by extents files before its data sync"),
    ("journal_cleaner.copy_dir_unsynced", "the journal cleaner's copy is named by extents files before its directory entry is synced"),
    ("journal_cleaner.moved_unsynced", "the rewritten <base>.extents.moved is renamed over <base>.extents without its data sync"),
    ("journal_cleaner.switch_dir_unsynced", "the journal cleaner's rename over <base>.extents is not made durable before the old files are retired"),
    ("cleaner.data_unsynced", "the log cleaner's cleaned data file is named before its data sync"),
    ("cleaner.data_dir_unsynced", "the log cleaner's cleaned data file is named before its directory entry is synced"),
    ("cleaner.extents_unsynced", "<base>.extents.cleaned is switched in without its data sync"),
    ("cleaner.swap_dir_unsynced", "old segment files are removed before the rename to the swap file is durable"),
    ("cleaner.removals_dir_unsynced", "the swap file takes its name before the old segments' removals are durable"),
    ("cleaner.rename_dir_unsynced", "the swap into place is not made durable by a directory sync"),
    ("cleaner.horizon_after_swap", "a pass swaps in stamped batches before a delete horizon for them is stored"),
    ("cleaner.abort_marker_before_checkpoint", "an ABORT marker is removed before a durable checkpoint forgets its aborted transaction"),
    ("cleaner_checkpoint.unsynced", "cleaner-offset-checkpoint is renamed into place without its data sync"),
    ("cleaner_checkpoint.dir_unsynced", "cleaner-offset-checkpoint's rename is not made durable by a directory sync"),
    ("recovery.journal_cut_unsynced", "recovery's cut of a torn journal tail is not synced"),
    ("recovery.below_start_dir_unsynced", "recovery unlinks segments below the log start without a directory sync after each"),
    ("recovery.segments_unsynced", "recovery does not sync the extents of what it replayed before its checkpoint"),
    ("recovery.dirs_unsynced", "recovery does not sync the directories it changed (the data directory among them) before its checkpoint"),
    ("recovery.swap_removals_dir_unsynced", "recovery completes an interrupted swap without syncing the old segments' removals first"),
    ("recovery.swap_rename_dir_unsynced", "recovery completes an interrupted swap without syncing its rename"),
    ("round_store.journal_cache_unsynced", "with a round store, a checkpoint vouches for journal bytes the checkpointer did not sync first"),
    ("round_store.restored_marker_unsynced", "start-up on a round store: the end marker of a restored journal file is not synced"),
    ("round_store.restored_unsynced", "start-up on a round store: the last journal file rounds were restored into is not synced"),
    ("round_store.cut_unsynced", "start-up on a round store: the cut after the last committed round is not synced"),
    ("round_store.cut_dir_unsynced", "start-up on a round store: the journal directory is not synced after the cut"),
];

/// True when the build has the `mutation` feature and `SLUICE_MUTATE` names `name`. The
/// first time it answers true it creates the file `SLUICE_MUTATE_REACHED` names, if any,
/// so the check can tell a mutation no test reached from one every test survived.
#[cfg(feature = "mutation")]
pub fn is_active(name: &'static str) -> bool {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::OnceLock;
    static ACTIVE: OnceLock<Option<String>> = OnceLock::new();
    static REACHED: AtomicBool = AtomicBool::new(false);
    debug_assert!(
        POINTS.iter().any(|(point, _)| *point == name),
        "{name} is not in mutation::POINTS"
    );
    let active = ACTIVE.get_or_init(|| std::env::var("SLUICE_MUTATE").ok());
    if active.as_deref() != Some(name) {
        return false;
    }
    if !REACHED.swap(true, Ordering::Relaxed) {
        if let Ok(path) = std::env::var("SLUICE_MUTATE_REACHED") {
            let _ = std::fs::write(path, name);
        }
    }
    true
}

/// Whether the mutation point `name` is broken in this run (see the module header).
#[cfg(feature = "mutation")]
macro_rules! mutated {
    ($name:literal) => {
        $crate::mutation::is_active($name)
    };
}

/// Whether the mutation point `name` is broken in this run: never, without the
/// `mutation` feature.
#[cfg(not(feature = "mutation"))]
macro_rules! mutated {
    ($name:literal) => {
        false
    };
}

pub(crate) use mutated;
