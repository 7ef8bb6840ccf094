//! [`SimFs`]: an in-memory [`Fs`] that models the page cache against the disk, so tests can
//! cut the power at any point and see exactly what a real machine could keep. It exists for
//! the crash-model test (`tests/log/model.rs`); the log never uses it in production.
//!
//! What it models (POSIX plus what `docs/storage.md` §11 assumes, and no more):
//! - Per file, the bytes written (what reads see) and the bytes durable as of the last
//!   `sync_data`. `sync_data` makes the file's data and size durable, nothing else.
//! - Per directory, the entries (create, rename, unlink, mkdir, rmdir) as seen now and as
//!   durable as of the last `sync_dir` of that directory. Syncing a file never makes its
//!   name durable, and syncing a directory never makes the directory's own name durable
//!   in its parent. A rename is atomic: after a crash either the old or the new name holds.
//! - [`SimFs::crash`] forgets everything not made durable. Two modes, chosen per crash:
//!   *drop* keeps only synced state, except that the last unsynced write of each file may
//!   survive torn (a random prefix of it, or random 512-byte sectors of it); *writeback*
//!   models the kernel having flushed some dirty pages on its own: a random subset of each
//!   file's dirty sectors survives, the size is the old or the new one (the gap reads as
//!   zeros), and each directory keeps a random prefix of its unsynced changes (in order,
//!   as a journaling file system commits them) or, half the time, any subset of them that
//!   keeps each name's own changes in order.
//!
//! What it cannot model: lying disk caches, bit rot, reordering inside one `sync_data`
//! (it is all or nothing), the kernel's own ordering guarantees (ext4 commits metadata in
//! order across directories; here each directory is independent, which is harsher).
//!
//! Test hooks: [`SimFs::cut_power_after`] freezes the disk after a number of mutating
//! operations (every later operation fails with `EIO`, so the log stops exactly there);
//! [`SimFs::arm`] injects `ENOSPC` on writes (after one short write) or `EIO` on syncs,
//! like `FaultyFs`; [`SimFs::set_capacity`] makes a full disk the way a real one is full:
//! a write that would grow the files past the capacity is cut short, then refused
//! (`ENOSPC`), while overwrites, truncates, unlinks and syncs go on, and space freed by
//! them (or a larger capacity, a grown file system) lets writes through again;
//! [`SimFs::pause`] holds every operation at a gate so a test can line requests up in the
//! log's queue deterministically. Everything random comes from [`SimRng`], so a run is
//! reproducible from its seed (given the same sequence of operations).
//!
//! Thread-safe: one mutex guards the whole tree; handles are positional and carry the
//! generation they were opened in, so a handle that outlived a crash fails instead of
//! writing into the new world.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::fs::{DirEntry, FaultOp, Fs, FsFile, OpenMode};

/// Sector size for torn writes and writeback: the smallest unit a disk writes.
pub const SECTOR_BYTES: usize = 512;

/// A small deterministic generator (SplitMix64): the same seed gives the same run.
#[derive(Debug, Clone)]
pub struct SimRng {
    state: u64,
}

impl SimRng {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        self.next_u64() % n
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        debug_assert!(lo <= hi);
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// What a crash keeps beyond the durable state (see the module header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// Only synced state, plus maybe a torn part of each file's last unsynced write.
    Drop,
    /// Also any of the dirty sectors, either file size, and a prefix or any subset of
    /// each directory's unsynced changes (the kernel flushed some of it on its own).
    Writeback,
}

type NodeId = u64;
const ROOT: NodeId = 0;

/// One change to a directory's entries, kept until the directory is synced.
#[derive(Debug, Clone)]
enum DirOp {
    Insert(String, NodeId),
    Remove(String),
    /// Atomic within one directory: both names change together or not at all.
    Rename(String, String, NodeId),
}

impl DirOp {
    /// The names this change touches.
    fn names(&self) -> [Option<&str>; 2] {
        match self {
            DirOp::Insert(name, _) | DirOp::Remove(name) => [Some(name), None],
            DirOp::Rename(from, to, _) => [Some(from), Some(to)],
        }
    }

    fn apply(&self, entries: &mut BTreeMap<String, NodeId>) {
        match self {
            DirOp::Insert(name, id) => {
                entries.insert(name.clone(), *id);
            }
            DirOp::Remove(name) => {
                entries.remove(name);
            }
            DirOp::Rename(from, to, id) => {
                entries.remove(from);
                entries.insert(to.clone(), *id);
            }
        }
    }
}

#[derive(Debug, Default)]
struct DirNode {
    entries: BTreeMap<String, NodeId>,
    durable: BTreeMap<String, NodeId>,
    /// Changes since the last `sync_dir`, oldest first.
    unsynced: Vec<DirOp>,
}

#[derive(Debug, Default)]
struct FileNode {
    /// What reads see (the page cache).
    data: Vec<u8>,
    /// What the disk holds as of the last `sync_data`.
    durable: Vec<u8>,
    /// The last write since the last sync (offset, length), the one a crash may tear.
    last_write: Option<(u64, usize)>,
}

#[derive(Debug)]
enum Node {
    Dir(DirNode),
    File(FileNode),
}

/// An armed fault, as in `FaultyFs`: after `remaining_ops` matching operations, every
/// matching operation fails.
#[derive(Debug, Clone)]
struct Fault {
    op: FaultOp,
    remaining_ops: u64,
    path_contains: Option<String>,
    /// A write fault first lets half of one write through (a short write, as a real
    /// disk filling up gives), then fails.
    short_write_done: bool,
}

/// Counters a test can print or assert on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimStats {
    pub writes: u64,
    pub file_syncs: u64,
    pub dir_syncs: u64,
    pub crashes: u64,
    /// Files a crash tore (kept part of an unsynced write).
    pub torn_files: u64,
    pub faults_injected: u64,
    /// Writes refused or cut short by the capacity (see [`SimFs::set_capacity`]).
    space_refusals: u64,
}

impl SimStats {
    /// Writes refused or cut short by the capacity.
    pub fn space_refusals(&self) -> u64 {
        self.space_refusals
    }
}

#[derive(Debug)]
struct State {
    /// Ordered, so a crash visits nodes in the same order every run (determinism).
    nodes: BTreeMap<NodeId, Node>,
    next_id: NodeId,
    /// Bumped by every crash; handles from an older generation fail.
    generation: u64,
    /// Mutating operations left before the power goes (None: not armed).
    cut_after: Option<u64>,
    power_cut: bool,
    fault: Option<Fault>,
    /// Bytes all linked files may hold together (None: unbounded).
    capacity: Option<usize>,
    stats: SimStats,
}

#[derive(Debug, Default)]
struct Gate {
    paused: bool,
    /// Operations waiting at the gate right now.
    blocked: usize,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    gate: Mutex<Gate>,
    gate_changed: Condvar,
}

/// The simulated file system. Clones share one tree.
#[derive(Debug, Clone)]
pub struct SimFs {
    shared: Arc<Shared>,
}

impl Default for SimFs {
    fn default() -> Self {
        Self::new()
    }
}

fn eio(why: &str) -> io::Error {
    io::Error::new(
        io::Error::from_raw_os_error(libc::EIO).kind(),
        format!("EIO: {why}"),
    )
}

fn power_error() -> io::Error {
    io::Error::from_raw_os_error(libc::EIO)
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: not found", path.display()),
    )
}

/// The normal components of an absolute or relative path (`.` and `..` are not used by
/// the log and are refused).
fn components(path: &Path) -> io::Result<Vec<String>> {
    let mut parts = Vec::new();
    for component in path.components() {
        match component {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(name) => parts.push(
                name.to_str()
                    .ok_or_else(|| io::Error::other("non-UTF-8 path"))?
                    .to_owned(),
            ),
            _ => return Err(io::Error::other("unsupported path component")),
        }
    }
    Ok(parts)
}

impl State {
    fn dir(&self, id: NodeId) -> Option<&DirNode> {
        match self.nodes.get(&id) {
            Some(Node::Dir(dir)) => Some(dir),
            _ => None,
        }
    }
    fn dir_mut(&mut self, id: NodeId) -> Option<&mut DirNode> {
        match self.nodes.get_mut(&id) {
            Some(Node::Dir(dir)) => Some(dir),
            _ => None,
        }
    }
    fn file_mut(&mut self, id: NodeId) -> io::Result<&mut FileNode> {
        match self.nodes.get_mut(&id) {
            Some(Node::File(file)) => Ok(file),
            _ => Err(eio("stale file handle")),
        }
    }

    /// The node at `parts`, following the current (not the durable) entries.
    fn lookup(&self, parts: &[String]) -> Option<NodeId> {
        let mut id = ROOT;
        for part in parts {
            id = *self.dir(id)?.entries.get(part)?;
        }
        Some(id)
    }

    /// The parent directory of `path` and the last name in it.
    fn parent_of(&self, path: &Path) -> io::Result<(NodeId, String)> {
        let mut parts = components(path)?;
        let name = parts
            .pop()
            .ok_or_else(|| io::Error::other("path has no file name"))?;
        let parent = self.lookup(&parts).ok_or_else(|| not_found(path))?;
        if self.dir(parent).is_none() {
            return Err(io::Error::other("parent is not a directory"));
        }
        Ok((parent, name))
    }

    fn change_dir(&mut self, dir: NodeId, op: DirOp) {
        let node = self.dir_mut(dir).expect("change of a live directory");
        op.apply(&mut node.entries);
        node.unsynced.push(op);
    }

    fn new_node(&mut self, node: Node) -> NodeId {
        let id = self.next_id;
        self.next_id += 1;
        self.nodes.insert(id, node);
        id
    }

    /// Counts a mutating operation against the armed power cut; fails once it is cut.
    fn mutate(&mut self) -> io::Result<()> {
        if self.power_cut {
            return Err(power_error());
        }
        if let Some(left) = self.cut_after.as_mut() {
            if *left == 0 {
                self.power_cut = true;
                self.cut_after = None;
                return Err(power_error());
            }
            *left -= 1;
        }
        Ok(())
    }

    fn read_allowed(&self) -> io::Result<()> {
        if self.power_cut {
            return Err(power_error());
        }
        Ok(())
    }

    fn check_fault(&mut self, op: FaultOp, path: &Path) -> io::Result<()> {
        let Some(fault) = self.fault.as_mut() else {
            return Ok(());
        };
        let matches = fault.op == op
            && fault
                .path_contains
                .as_deref()
                .is_none_or(|part| path.to_string_lossy().contains(part));
        if !matches {
            return Ok(());
        }
        if fault.remaining_ops > 0 {
            fault.remaining_ops -= 1;
            return Ok(());
        }
        self.stats.faults_injected += 1;
        Err(match op {
            FaultOp::Write => io::Error::from_raw_os_error(libc::ENOSPC),
            FaultOp::Sync => io::Error::from_raw_os_error(libc::EIO),
            FaultOp::Open => io::Error::from_raw_os_error(libc::EMFILE),
        })
    }

    /// Bytes held by the files linked in the tree now (each file once). Unlinked files
    /// hold nothing, as if no handle kept them open.
    fn used_bytes(&self) -> usize {
        let mut seen = BTreeSet::new();
        let mut stack = vec![ROOT];
        let mut used = 0;
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            match self.nodes.get(&id) {
                Some(Node::Dir(dir)) => stack.extend(dir.entries.values().copied()),
                Some(Node::File(file)) => used += file.data.len(),
                None => {}
            }
        }
        used
    }

    /// How many bytes of a write of `len` at `offset` into file `id` fit under the
    /// capacity: all of an overwrite, and of a write past the end as much as the room left.
    fn fitting(&self, id: NodeId, offset: usize, len: usize) -> usize {
        let Some(capacity) = self.capacity else {
            return len;
        };
        let file_len = match self.nodes.get(&id) {
            Some(Node::File(file)) => file.data.len(),
            _ => return len,
        };
        if offset + len <= file_len {
            return len;
        }
        let allowed_end = file_len + capacity.saturating_sub(self.used_bytes());
        len.min(allowed_end.saturating_sub(offset))
    }

    /// Logs the removal of everything below directory `id` (children first, as
    /// `remove_dir_all` unlinks them), so a crash may keep any prefix of it.
    fn remove_tree(&mut self, id: NodeId) {
        let children: Vec<(String, NodeId)> = match self.dir(id) {
            Some(dir) => dir.entries.iter().map(|(n, c)| (n.clone(), *c)).collect(),
            None => return,
        };
        for (name, child) in children {
            self.remove_tree(child);
            self.change_dir(id, DirOp::Remove(name));
        }
    }
}

/// What a crash keeps of one file.
fn crash_file(file: &mut FileNode, writeback: bool, rng: &mut SimRng) -> bool {
    let mut torn = false;
    let mut kept = file.durable.clone();
    if writeback {
        let new_len = if rng.chance(50) {
            file.data.len()
        } else {
            file.durable.len()
        };
        kept.resize(new_len, 0);
        let percent = [0, 30, 70, 100][rng.below(4) as usize];
        for start in (0..new_len).step_by(SECTOR_BYTES) {
            let end = (start + SECTOR_BYTES).min(new_len);
            let current = file.data.get(start..end.min(file.data.len()));
            let durable = file.durable.get(start..end.min(file.durable.len()));
            let dirty = current != durable || end > file.durable.len();
            if dirty && rng.chance(percent) {
                let from = current.unwrap_or(&[]);
                kept[start..start + from.len()].copy_from_slice(from);
                torn = true;
            }
        }
    } else if let Some((offset, len)) = file.last_write.filter(|_| rng.chance(50)) {
        // The last write reached the disk in part: a prefix, or some of its sectors.
        let offset = offset as usize;
        let available = file.data.len().saturating_sub(offset).min(len);
        let keep = |kept: &mut Vec<u8>, from: usize, to: usize| {
            if kept.len() < to {
                kept.resize(to, 0);
            }
            kept[from..to].copy_from_slice(&file.data[from..to]);
        };
        if rng.chance(50) {
            let prefix = rng.range(0, available as u64) as usize;
            if prefix > 0 {
                keep(&mut kept, offset, offset + prefix);
                torn = true;
            }
        } else {
            let mut at = offset;
            while at < offset + available {
                let end = ((at / SECTOR_BYTES + 1) * SECTOR_BYTES).min(offset + available);
                if rng.chance(50) {
                    keep(&mut kept, at, end);
                    torn = true;
                }
                at = end;
            }
        }
    }
    file.data = kept.clone();
    file.durable = kept;
    file.last_write = None;
    torn
}

impl SimFs {
    /// An empty file system holding only the root directory (durable).
    pub fn new() -> Self {
        let mut nodes = BTreeMap::new();
        nodes.insert(ROOT, Node::Dir(DirNode::default()));
        let state = State {
            nodes,
            next_id: ROOT + 1,
            generation: 0,
            cut_after: None,
            power_cut: false,
            fault: None,
            capacity: None,
            stats: SimStats::default(),
        };
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(state),
                gate: Mutex::new(Gate::default()),
                gate_changed: Condvar::new(),
            }),
        }
    }

    /// Loses power: every write, size change and directory change not made durable is
    /// dropped (some may survive torn, see the module header), every open handle goes
    /// stale, and the power, the fault and the cut are reset. The caller must have stopped
    /// the log (it is a new boot).
    pub fn crash(&self, rng: &mut SimRng) {
        let mode = match rng.chance(50) {
            true => CrashMode::Writeback,
            false => CrashMode::Drop,
        };
        self.crash_with(rng, mode);
    }

    /// [`Self::crash`] in the given mode (for tests that need one outcome).
    pub fn crash_with(&self, rng: &mut SimRng, mode: CrashMode) {
        let mut state = self.shared.state.lock();
        let writeback = mode == CrashMode::Writeback;
        let ids: Vec<NodeId> = state.nodes.keys().copied().collect();
        let mut torn_files = 0;
        for id in ids {
            match state.nodes.get_mut(&id) {
                Some(Node::Dir(dir)) => {
                    // Writeback keeps a prefix of the changes (in order, as a journaling
                    // file system commits them) or, half the time, any subset of them
                    // (POSIX promises no order without a directory sync) in which each
                    // name's own changes stay in order: a rename never lands without the
                    // change that created its source name.
                    let len = dir.unsynced.len();
                    let prefix = rng.range(0, len as u64) as usize;
                    let any_subset = rng.chance(50);
                    let mut blocked: BTreeSet<&str> = BTreeSet::new();
                    for (i, op) in dir.unsynced.iter().enumerate() {
                        let names = op.names();
                        let kept = match (writeback, any_subset) {
                            (false, _) => false,
                            (true, false) => i < prefix,
                            (true, true) => {
                                !names.iter().flatten().any(|n| blocked.contains(n))
                                    && rng.chance(50)
                            }
                        };
                        if kept {
                            op.apply(&mut dir.durable);
                        } else {
                            blocked.extend(names.into_iter().flatten());
                        }
                    }
                    dir.unsynced.clear();
                    dir.entries = dir.durable.clone();
                }
                Some(Node::File(file)) => torn_files += u64::from(crash_file(file, writeback, rng)),
                None => {}
            }
        }
        // Drop what no durable entry reaches any more.
        let mut reachable = BTreeSet::from([ROOT]);
        let mut todo = vec![ROOT];
        while let Some(id) = todo.pop() {
            if let Some(dir) = state.dir(id) {
                for &child in dir.entries.values() {
                    // The API has no hard links: a node with two names would mean the
                    // crash kept a change without the change it depends on.
                    assert!(
                        reachable.insert(child),
                        "a node has two names after a crash"
                    );
                    todo.push(child);
                }
            }
        }
        state.nodes.retain(|id, _| reachable.contains(id));
        state.generation += 1;
        state.cut_after = None;
        state.power_cut = false;
        state.fault = None;
        state.stats.crashes += 1;
        state.stats.torn_files += torn_files;
    }

    /// Cuts the power after `ops` more mutating operations (writes, syncs, size changes,
    /// directory changes): that one and every later operation fails with `EIO`, and the
    /// disk keeps what it had. `crash` then decides what survives.
    pub fn cut_power_after(&self, ops: u64) {
        self.shared.state.lock().cut_after = Some(ops);
    }

    /// Whether the power is cut (an armed cut has fired).
    pub fn is_power_cut(&self) -> bool {
        self.shared.state.lock().power_cut
    }

    /// Whether a power cut is armed and has not fired yet.
    pub fn is_cut_armed(&self) -> bool {
        self.shared.state.lock().cut_after.is_some()
    }

    /// Arms a fault like `FaultyFs::arm`: after `after_ops` more `op` operations (on paths
    /// containing `path_contains`, if given), every such operation fails (`ENOSPC` for
    /// writes, `EIO` for file and directory syncs). A failed sync makes nothing durable.
    pub fn arm(&self, op: FaultOp, after_ops: u64, path_contains: Option<&str>) {
        self.shared.state.lock().fault = Some(Fault {
            op,
            remaining_ops: after_ops,
            path_contains: path_contains.map(str::to_owned),
            short_write_done: false,
        });
    }

    pub fn disarm(&self) {
        self.shared.state.lock().fault = None;
    }

    /// Bounds the bytes all files may hold together, like a small file system (None: no
    /// bound). See the module header; a crash keeps the capacity.
    pub fn set_capacity(&self, bytes: Option<u64>) {
        let bytes = bytes.map(|b| usize::try_from(b).unwrap_or(usize::MAX));
        self.shared.state.lock().capacity = bytes;
    }

    /// Bytes held by the files linked in the tree now.
    pub fn used_bytes(&self) -> u64 {
        self.shared.state.lock().used_bytes() as u64
    }

    pub fn stats(&self) -> SimStats {
        self.shared.state.lock().stats
    }

    /// Holds every operation at a gate until [`Self::resume`].
    pub fn pause(&self) {
        self.shared.gate.lock().paused = true;
    }

    pub fn resume(&self) {
        self.shared.gate.lock().paused = false;
        self.shared.gate_changed.notify_all();
    }

    /// Operations waiting at the gate.
    pub fn blocked(&self) -> usize {
        self.shared.gate.lock().blocked
    }

    /// Makes `path` and every directory above it exist durably (a data dir that was
    /// there before the process started).
    pub fn create_dir_all_durable(&self, path: &Path) -> io::Result<()> {
        self.create_dir_all(path)?;
        let mut state = self.shared.state.lock();
        let mut id = ROOT;
        for part in components(path)? {
            let dir = state.dir_mut(id).expect("just created");
            dir.durable = dir.entries.clone();
            dir.unsynced.clear();
            id = dir.entries[&part];
        }
        Ok(())
    }

    /// Length of a file as durable now (what a crash would keep at least), for tests.
    pub fn durable_len(&self, path: &Path) -> Option<usize> {
        let state = self.shared.state.lock();
        let id = state.lookup(&components(path).ok()?)?;
        match state.nodes.get(&id) {
            Some(Node::File(file)) => Some(file.durable.len()),
            _ => None,
        }
    }

    fn gate(&self) {
        let mut gate = self.shared.gate.lock();
        if !gate.paused {
            return;
        }
        gate.blocked += 1;
        self.shared.gate_changed.notify_all();
        while gate.paused {
            self.shared.gate_changed.wait(&mut gate);
        }
        gate.blocked -= 1;
    }

    fn state(&self) -> parking_lot::MutexGuard<'_, State> {
        self.gate();
        self.shared.state.lock()
    }
}

#[derive(Debug)]
struct SimFile {
    shared: SimFs,
    id: NodeId,
    generation: u64,
    path: PathBuf,
}

impl SimFile {
    fn state(&self) -> io::Result<parking_lot::MutexGuard<'_, State>> {
        let state = self.shared.state();
        if state.generation != self.generation {
            return Err(eio("handle from before a crash"));
        }
        Ok(state)
    }
}

impl FsFile for SimFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut state = self.state()?;
        state.read_allowed()?;
        let file = state.file_mut(self.id)?;
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(file.data.len());
        let n = buf.len().min(file.data.len() - start);
        buf[..n].copy_from_slice(&file.data[start..start + n]);
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        let mut state = self.state()?;
        state.mutate()?;
        let mut buf = buf;
        if let Err(error) = state.check_fault(FaultOp::Write, &self.path) {
            let fault = state.fault.as_mut().expect("the fault that fired");
            if fault.short_write_done || buf.len() < 2 {
                return Err(error);
            }
            fault.short_write_done = true;
            buf = &buf[..buf.len() / 2];
        }
        let start = usize::try_from(offset).map_err(|_| io::Error::other("offset too large"))?;
        let fits = state.fitting(self.id, start, buf.len());
        if fits < buf.len() {
            state.stats.space_refusals += 1;
            if fits == 0 {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            buf = &buf[..fits];
        }
        state.stats.writes += 1;
        let file = state.file_mut(self.id)?;
        if file.data.len() < start + buf.len() {
            file.data.resize(start + buf.len(), 0);
        }
        file.data[start..start + buf.len()].copy_from_slice(buf);
        file.last_write = Some((offset, buf.len()));
        Ok(buf.len())
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut state = self.state()?;
        state.mutate()?;
        state.check_fault(FaultOp::Sync, &self.path)?;
        state.stats.file_syncs += 1;
        let file = state.file_mut(self.id)?;
        file.durable = file.data.clone();
        file.last_write = None;
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut state = self.state()?;
        state.mutate()?;
        let file = state.file_mut(self.id)?;
        let len = usize::try_from(len).map_err(|_| io::Error::other("length too large"))?;
        file.data.resize(len, 0);
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        let mut state = self.state()?;
        state.read_allowed()?;
        Ok(state.file_mut(self.id)?.data.len() as u64)
    }
}

impl Fs for SimFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn FsFile>> {
        let mut state = self.state();
        state.check_fault(FaultOp::Open, path)?;
        let (parent, name) = state.parent_of(path)?;
        let existing = state
            .dir(parent)
            .and_then(|d| d.entries.get(&name))
            .copied();
        let id = match (existing, mode) {
            (Some(id), OpenMode::Existing) => {
                state.read_allowed()?;
                id
            }
            (None, OpenMode::Existing) => return Err(not_found(path)),
            (Some(_), OpenMode::CreateNew) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{}: exists", path.display()),
                ))
            }
            (Some(id), OpenMode::CreateTruncate) => {
                state.mutate()?;
                state.file_mut(id)?.data.clear();
                id
            }
            (None, _) => {
                state.mutate()?;
                let id = state.new_node(Node::File(FileNode::default()));
                state.change_dir(parent, DirOp::Insert(name, id));
                id
            }
        };
        if !matches!(state.nodes.get(&id), Some(Node::File(_))) {
            return Err(io::Error::other("is a directory"));
        }
        Ok(Box::new(SimFile {
            shared: self.clone(),
            id,
            generation: state.generation,
            path: path.to_owned(),
        }))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state();
        let mut id = ROOT;
        for part in components(path)? {
            let found = state
                .dir(id)
                .ok_or_else(|| io::Error::other("not a directory"))?
                .entries
                .get(&part)
                .copied();
            id = match found {
                Some(child) => child,
                None => {
                    state.mutate()?;
                    let child = state.new_node(Node::Dir(DirNode::default()));
                    state.change_dir(id, DirOp::Insert(part, child));
                    child
                }
            };
        }
        match state.dir(id) {
            Some(_) => Ok(()),
            None => Err(io::Error::other("not a directory")),
        }
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let state = self.state();
        state.read_allowed()?;
        let id = state
            .lookup(&components(path)?)
            .ok_or_else(|| not_found(path))?;
        let dir = state
            .dir(id)
            .ok_or_else(|| io::Error::other("not a directory"))?;
        Ok(dir
            .entries
            .iter()
            .map(|(name, child)| DirEntry {
                name: name.clone(),
                is_dir: matches!(state.nodes.get(child), Some(Node::Dir(_))),
            })
            .collect())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state();
        let (parent, name) = state.parent_of(path)?;
        let id = state
            .dir(parent)
            .and_then(|d| d.entries.get(&name))
            .copied();
        match id.map(|id| state.nodes.get(&id)) {
            None => return Err(not_found(path)),
            Some(Some(Node::Dir(_))) => return Err(io::Error::other("is a directory")),
            _ => {}
        }
        state.mutate()?;
        state.change_dir(parent, DirOp::Remove(name));
        Ok(())
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state();
        let (parent, name) = state.parent_of(path)?;
        let id = state
            .dir(parent)
            .and_then(|d| d.entries.get(&name))
            .copied()
            .ok_or_else(|| not_found(path))?;
        state.mutate()?;
        state.remove_tree(id);
        state.change_dir(parent, DirOp::Remove(name));
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.state();
        let (from_dir, from_name) = state.parent_of(from)?;
        let (to_dir, to_name) = state.parent_of(to)?;
        let id = state
            .dir(from_dir)
            .and_then(|d| d.entries.get(&from_name))
            .copied()
            .ok_or_else(|| not_found(from))?;
        if from_dir != to_dir {
            // The log renames within a directory only; an atomic rename across two
            // directories' unsynced changes is not modeled.
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "rename across directories",
            ));
        }
        state.mutate()?;
        state.change_dir(from_dir, DirOp::Rename(from_name, to_name, id));
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state();
        state.mutate()?;
        state.check_fault(FaultOp::Sync, path)?;
        let id = state
            .lookup(&components(path)?)
            .ok_or_else(|| not_found(path))?;
        let dir = state
            .dir_mut(id)
            .ok_or_else(|| io::Error::other("not a directory"))?;
        dir.durable = dir.entries.clone();
        dir.unsynced.clear();
        state.stats.dir_syncs += 1;
        Ok(())
    }

    /// The simulated directory lives in this process only: there is no other process to
    /// keep out, and an abandoned (crashed) log must not hold it against its own reopen.
    fn lock_data_dir(&self, _dir: &Path) -> io::Result<crate::fs::DataDirLock> {
        Ok(crate::fs::DataDirLock::none())
    }

    fn exists(&self, path: &Path) -> bool {
        let state = self.state();
        components(path).is_ok_and(|parts| state.lookup(&parts).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{read_file, write_all_at, write_file_atomic};

    fn fs_with_dir() -> SimFs {
        let fs = SimFs::new();
        fs.create_dir_all_durable(Path::new("/d")).expect("mkdir");
        fs
    }

    fn read(fs: &SimFs, path: &str) -> Option<Vec<u8>> {
        read_file(fs, Path::new(path)).ok()
    }

    #[test]
    fn synced_data_and_entries_survive_and_unsynced_ones_may_not() {
        // Goal: a file synced and whose directory was synced survives every crash
        // intact; a file whose directory was never synced is gone under the drop mode
        // (and never appears with bytes it was not given).
        for seed in 0..64 {
            let fs = fs_with_dir();
            let mut rng = SimRng::new(seed);
            let kept = fs
                .open(Path::new("/d/kept"), OpenMode::CreateNew)
                .expect("create");
            write_all_at(kept.as_ref(), b"durable", 0).expect("write");
            kept.sync_data().expect("sync");
            fs.sync_dir(Path::new("/d")).expect("sync dir");
            write_all_at(kept.as_ref(), b"-and-more", 7).expect("write");
            let lost = fs
                .open(Path::new("/d/lost"), OpenMode::CreateNew)
                .expect("create");
            write_all_at(lost.as_ref(), b"x", 0).expect("write");
            lost.sync_data().expect("sync");
            fs.crash(&mut rng);
            let data = read(&fs, "/d/kept").expect("kept survives");
            assert!(data.starts_with(b"durable"), "seed {seed}: {data:?}");
            assert!(
                b"durable-and-more".starts_with(&data)
                    || data.len() == 16
                        && data[7..]
                            .iter()
                            .all(|&b| b == 0 || b"-and-more".contains(&b)),
                "seed {seed}: only written bytes or zeros: {data:?}"
            );
            if let Some(lost) = read(&fs, "/d/lost") {
                assert_eq!(lost, b"x", "seed {seed}");
            }
            assert!(kept.write_at(b"z", 0).is_err(), "stale handle refused");
        }
    }

    #[test]
    fn atomic_replace_gives_old_or_new_contents() {
        // Goal: write_file_atomic interrupted by a power cut at every point leaves either
        // the old or the new contents, never a mix or nothing.
        for cut in 0..8 {
            for seed in 0..16 {
                let fs = fs_with_dir();
                let path = Path::new("/d/c");
                write_file_atomic(&fs, path, b"old contents").expect("first");
                fs.cut_power_after(cut);
                let result = write_file_atomic(&fs, path, b"new contents!");
                fs.crash(&mut SimRng::new(seed));
                let data = read(&fs, "/d/c").expect("never lost");
                assert!(
                    data == b"old contents" || data == b"new contents!",
                    "cut {cut} seed {seed}: {:?}",
                    String::from_utf8_lossy(&data)
                );
                if result.is_ok() {
                    assert_eq!(data, b"new contents!", "acknowledged replace holds");
                }
            }
        }
    }

    #[test]
    fn power_cut_and_faults_fail_operations() {
        // Goal: once the armed cut fires every operation fails with EIO; an armed fault
        // fails only its operation kind; a failed sync makes nothing durable; a write fault
        // lets half of one write through, then fails with ENOSPC.
        let fs = fs_with_dir();
        let file = fs
            .open(Path::new("/d/f"), OpenMode::CreateNew)
            .expect("create");
        fs.arm(FaultOp::Sync, 0, Some("/d/f"));
        write_all_at(file.as_ref(), b"abc", 0).expect("writes pass");
        let err = file.sync_data().unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EIO));
        assert_eq!(fs.durable_len(Path::new("/d/f")), Some(0));
        fs.arm(FaultOp::Write, 0, None);
        assert_eq!(file.write_at(b"wxyz", 3).expect("a short write first"), 2);
        let err = file.write_at(b"yz", 5).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
        fs.disarm();
        fs.cut_power_after(1);
        file.sync_data().expect("one more operation");
        assert!(!fs.is_power_cut());
        assert!(file.write_at(b"x", 3).is_err());
        assert!(fs.is_power_cut());
        assert!(fs.read_dir(Path::new("/d")).is_err());
        let mut rng = SimRng::new(1);
        fs.crash(&mut rng);
        assert!(!fs.is_power_cut());
        assert_eq!(fs.stats().faults_injected, 3);
    }

    #[test]
    fn a_full_disk_refuses_growth_only_until_space_is_freed() {
        // Goal: with a capacity, a write that grows the files past it is cut short, then
        // refused with ENOSPC; overwrites, truncates and syncs still work; a truncate or an
        // unlink frees room, and so does a larger capacity.
        let fs = fs_with_dir();
        fs.set_capacity(Some(10));
        let a = fs.open(Path::new("/d/a"), OpenMode::CreateNew).expect("a");
        write_all_at(a.as_ref(), b"123456", 0).expect("fits");
        assert_eq!(a.write_at(b"789abc", 6).expect("short"), 4);
        let err = a.write_at(b"x", 10).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
        write_all_at(a.as_ref(), b"ZZ", 0).expect("an overwrite needs no room");
        a.sync_data().expect("a sync needs no room");
        assert_eq!(fs.used_bytes(), 10);
        a.set_len(4).expect("a cut needs no room");
        write_all_at(a.as_ref(), b"456", 4).expect("room after the cut");
        let b = fs.open(Path::new("/d/b"), OpenMode::CreateNew).expect("b");
        assert_eq!(b.write_at(b"xyz", 0).expect("short"), 3);
        assert!(b.write_at(b"!", 3).is_err());
        fs.remove_file(Path::new("/d/a"))
            .expect("unlink needs no room");
        write_all_at(b.as_ref(), b"!", 3).expect("room after the unlink");
        fs.set_capacity(Some(4));
        assert!(b.write_at(b"?", 4).is_err());
        fs.set_capacity(Some(100));
        write_all_at(b.as_ref(), b"?", 4).expect("room on a grown disk");
        assert_eq!(fs.stats().space_refusals(), 4);
        assert_eq!(read(&fs, "/d/b").expect("b"), b"xyz!?");
    }

    #[test]
    fn chained_renames_keep_exactly_one_name() {
        // Goal: a file renamed twice without a directory sync (a journal file retired to
        // the pool, then taken as a new file) has exactly one of its three names after any
        // crash: a rename never lands without the one that created its source name.
        for seed in 0..128 {
            let fs = fs_with_dir();
            let file = fs
                .open(Path::new("/d/a.wal"), OpenMode::CreateNew)
                .expect("create");
            write_all_at(file.as_ref(), b"x", 0).expect("write");
            file.sync_data().expect("sync");
            fs.sync_dir(Path::new("/d")).expect("sync dir");
            fs.rename(Path::new("/d/a.wal"), Path::new("/d/a.free"))
                .expect("retire");
            fs.rename(Path::new("/d/a.free"), Path::new("/d/b.wal"))
                .expect("take");
            fs.crash_with(&mut SimRng::new(seed), CrashMode::Writeback);
            let names = fs.read_dir(Path::new("/d")).expect("list");
            assert_eq!(names.len(), 1, "seed {seed}: {names:?}");
        }
    }

    #[test]
    fn crashes_are_deterministic_from_the_seed() {
        // Goal: the same operations and the same seed give the same surviving bytes.
        let run = |seed| {
            let fs = fs_with_dir();
            let file = fs
                .open(Path::new("/d/f"), OpenMode::CreateNew)
                .expect("create");
            fs.sync_dir(Path::new("/d")).expect("sync dir");
            for i in 0..20u8 {
                write_all_at(file.as_ref(), &[i; 700], u64::from(i) * 700).expect("write");
                if i == 5 {
                    file.sync_data().expect("sync");
                }
            }
            fs.crash(&mut SimRng::new(seed));
            read(&fs, "/d/f").expect("file")
        };
        for seed in 0..32 {
            assert!(run(seed) == run(seed), "seed {seed} differs between runs");
        }
        let distinct: std::collections::HashSet<Vec<u8>> = (0..32).map(run).collect();
        assert!(distinct.len() > 4, "crashes vary with the seed");
    }
}
