//! The metadata store on PostgreSQL (`metadata.store.url`): the schema, its migrations and
//! the one transaction per round.
//!
//! Schema (version [`SCHEMA_VERSION`], every table prefixed `sluice_`; the full description
//! is in `docs/object-storage.md` §3):
//! - `sluice_schema`: one row, the schema version and the store's id. A broker refuses a
//!   store whose version is newer than its own, and migrates an older one in one transaction.
//! - `sluice_writer`: one row, the writer epoch. Every broker start takes the next epoch;
//!   a round committed under an older one is refused, so a broker that lost its place (a
//!   second broker started on the same stores) can never write again.
//! - `sluice_rounds`: one row per committed round: its object, the journal position its
//!   bytes had (so a broker can lay the journal out again), length and CRC-32C.
//! - `sluice_partitions`: per partition, the log end offset every round must continue.
//! - `sluice_entries`: per round and partition, the offsets it added and where they lie in
//!   the round's object.
//! - `sluice_meta`: named documents (the broker's metadata files), each with a version.
//!
//! Guarantees: [`MetaStore::commit_round`] is one transaction: it succeeds only if the
//! writer epoch is still current and every partition's log end equals the round's first
//! offset for it; then all of the round's rows are written, or none. An outcome left
//! unknown by a lost connection is resolved before the call returns (the round's row is
//! looked up once the store answers again), so a caller is never told "failed" for a round
//! that committed.

use std::time::{Duration, Instant};

use postgres::error::SqlState;
use postgres::{Client, NoTls};
use uuid::Uuid;

/// The schema version this broker writes.
pub const SCHEMA_VERSION: i32 = 1;

/// An error of the metadata store.
#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    /// The store could not be reached, or the connection broke: a retry may succeed.
    #[error("metadata store unreachable: {0}")]
    Unreachable(String),
    /// Another broker took the writer epoch: this one must stop writing.
    #[error("metadata store: this broker was fenced: {0}")]
    Fenced(String),
    /// A partition's log end in the store is not where this broker's log ends.
    #[error("metadata store: log end mismatch: {0}")]
    LogEndMismatch(String),
    /// The store's schema cannot be used by this broker.
    #[error("metadata store schema: {0}")]
    Schema(String),
    /// A commit's connection broke and the store has not answered since: whether the
    /// round committed is not known.
    #[error("metadata store: outcome unknown: {0}")]
    OutcomeUnknown(String),
    /// Any other refusal.
    #[error("metadata store: {0}")]
    Other(String),
}

impl MetaError {
    /// Whether the same call may succeed later.
    pub fn is_retriable(&self) -> bool {
        matches!(self, MetaError::Unreachable(_))
    }
}

fn classify(error: postgres::Error) -> MetaError {
    if error.is_closed() || error.as_db_error().is_none() {
        return MetaError::Unreachable(error.to_string());
    }
    let db = error.as_db_error().expect("checked above");
    let code = db.code();
    if *code == SqlState::from_code("SL001") {
        MetaError::Fenced(db.message().to_string())
    } else if *code == SqlState::from_code("SL002") {
        MetaError::LogEndMismatch(db.message().to_string())
    } else if *code == SqlState::ADMIN_SHUTDOWN
        || *code == SqlState::CRASH_SHUTDOWN
        || *code == SqlState::CANNOT_CONNECT_NOW
        || *code == SqlState::T_R_SERIALIZATION_FAILURE
        || *code == SqlState::T_R_DEADLOCK_DETECTED
    {
        MetaError::Unreachable(db.message().to_string())
    } else {
        MetaError::Other(format!("{}: {}", code.code(), db.message()))
    }
}

/// Where a round's bytes lie: in the object store and in the journal that wrote them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundRow {
    pub object_key: String,
    pub journal_seq: u64,
    pub journal_position: u64,
    pub size_bytes: u64,
    pub crc32c: u32,
}

/// One partition's part of a round: offsets `[base_offset, last_offset]`, `size_bytes`
/// bytes at `position` in the round's object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryRow {
    pub topic_id: Uuid,
    pub partition: i32,
    pub base_offset: i64,
    pub last_offset: i64,
    pub position: u64,
    pub size_bytes: u32,
}

const SCHEMA_V1: &str = r#"
CREATE TABLE sluice_schema (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    version integer NOT NULL,
    store_id uuid NOT NULL DEFAULT gen_random_uuid()
);
CREATE TABLE sluice_writer (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    epoch bigint NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO sluice_writer (epoch) VALUES (0);
CREATE TABLE sluice_rounds (
    round_id bigint PRIMARY KEY,
    writer_epoch bigint NOT NULL,
    object_key text NOT NULL,
    journal_seq bigint NOT NULL,
    journal_position bigint NOT NULL,
    size_bytes bigint NOT NULL,
    crc32c bigint NOT NULL,
    committed_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX sluice_rounds_journal ON sluice_rounds (journal_seq, journal_position);
CREATE TABLE sluice_partitions (
    topic_id uuid NOT NULL,
    partition integer NOT NULL,
    log_end_offset bigint NOT NULL,
    PRIMARY KEY (topic_id, partition)
);
CREATE TABLE sluice_entries (
    topic_id uuid NOT NULL,
    partition integer NOT NULL,
    base_offset bigint NOT NULL,
    last_offset bigint NOT NULL,
    round_id bigint NOT NULL REFERENCES sluice_rounds (round_id),
    position bigint NOT NULL,
    size_bytes integer NOT NULL,
    PRIMARY KEY (topic_id, partition, base_offset)
);
CREATE INDEX sluice_entries_round ON sluice_entries (round_id);
CREATE TABLE sluice_meta (
    name text PRIMARY KEY,
    contents bytea NOT NULL,
    version bigint NOT NULL
);
CREATE FUNCTION sluice_commit_round(
    p_epoch bigint, p_round_id bigint, p_object_key text, p_journal_seq bigint,
    p_journal_position bigint, p_size bigint, p_crc bigint,
    p_topics uuid[], p_partitions integer[], p_bases bigint[], p_lasts bigint[],
    p_positions bigint[], p_sizes integer[]
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    current_epoch bigint;
    touched integer;
    updated integer;
BEGIN
    SELECT epoch INTO current_epoch FROM sluice_writer FOR SHARE;
    IF current_epoch <> p_epoch THEN
        RAISE EXCEPTION 'writer epoch % is stale (current %)', p_epoch, current_epoch
            USING ERRCODE = 'SL001';
    END IF;
    INSERT INTO sluice_rounds (round_id, writer_epoch, object_key, journal_seq,
                               journal_position, size_bytes, crc32c)
        VALUES (p_round_id, p_epoch, p_object_key, p_journal_seq, p_journal_position,
                p_size, p_crc);
    SELECT count(*) INTO touched
        FROM (SELECT DISTINCT t, p FROM unnest(p_topics, p_partitions) AS e(t, p)) AS d;
    -- A partition the store has not seen yet starts where this round says it does.
    INSERT INTO sluice_partitions (topic_id, partition, log_end_offset)
        SELECT t, p, min(b) FROM unnest(p_topics, p_partitions, p_bases) AS e(t, p, b)
        GROUP BY t, p
        ON CONFLICT DO NOTHING;
    UPDATE sluice_partitions sp SET log_end_offset = rp.last + 1
        FROM (SELECT t, p, min(b) AS first, max(l) AS last
              FROM unnest(p_topics, p_partitions, p_bases, p_lasts) AS e(t, p, b, l)
              GROUP BY t, p) AS rp
        WHERE sp.topic_id = rp.t AND sp.partition = rp.p AND sp.log_end_offset = rp.first;
    GET DIAGNOSTICS updated = ROW_COUNT;
    IF updated <> touched THEN
        RAISE EXCEPTION '% of % partitions do not end where round % continues them',
            touched - updated, touched, p_round_id USING ERRCODE = 'SL002';
    END IF;
    INSERT INTO sluice_entries (topic_id, partition, base_offset, last_offset, round_id,
                                position, size_bytes)
        SELECT t, p, b, l, p_round_id, pos, s
        FROM unnest(p_topics, p_partitions, p_bases, p_lasts, p_positions, p_sizes)
            AS e(t, p, b, l, pos, s);
END;
$$;
"#;

/// A connection to the metadata store, used by one thread at a time.
pub struct MetaStore {
    url: String,
    client: Option<Client>,
    connect_timeout: Duration,
}

impl std::fmt::Debug for MetaStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry a password: only the host part is shown.
        f.debug_struct("MetaStore")
            .field("url", &redact_url(&self.url))
            .finish_non_exhaustive()
    }
}

/// `postgresql://user:secret@host/db` without the password, for messages.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{}{user}:***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_string(),
    }
}

impl MetaStore {
    /// Connects to `url` (a `postgresql://` URL or a key=value string). TLS to the store is
    /// not supported yet: a URL asking for it (`sslmode=require`, `verify-ca`,
    /// `verify-full`) is refused here rather than silently sent in the clear.
    pub fn connect(url: &str, connect_timeout: Duration) -> Result<Self, MetaError> {
        if [
            "sslmode=require",
            "sslmode=verify-ca",
            "sslmode=verify-full",
        ]
        .iter()
        .any(|mode| url.contains(mode))
        {
            return Err(MetaError::Other(format!(
                "metadata.store.url {}: TLS to PostgreSQL is not supported yet; use a \
                 loopback or private connection with sslmode=disable or prefer",
                redact_url(url)
            )));
        }
        let mut store = Self {
            url: url.to_string(),
            client: None,
            connect_timeout,
        };
        store.client()?;
        Ok(store)
    }

    fn client(&mut self) -> Result<&mut Client, MetaError> {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            let mut config: postgres::Config = self.url.parse().map_err(|e| {
                MetaError::Other(format!("metadata.store.url {}: {e}", redact_url(&self.url)))
            })?;
            config.connect_timeout(self.connect_timeout);
            config.application_name("sluice");
            let client = config
                .connect(NoTls)
                .map_err(|e| MetaError::Unreachable(format!("{}: {e}", redact_url(&self.url))))?;
            self.client = Some(client);
        }
        Ok(self.client.as_mut().expect("connected above"))
    }

    /// Runs `f` on the connection; a broken connection is dropped so the next call
    /// reconnects.
    fn with<T>(
        &mut self,
        f: impl FnOnce(&mut Client) -> Result<T, postgres::Error>,
    ) -> Result<T, MetaError> {
        let client = self.client()?;
        match f(client) {
            Ok(value) => Ok(value),
            Err(error) => {
                let error = classify(error);
                if error.is_retriable() {
                    self.client = None;
                }
                Err(error)
            }
        }
    }

    /// Creates the schema in an empty store, or checks (and migrates) an existing one.
    /// Returns the version found before (0 for an empty store).
    pub fn migrate(&mut self) -> Result<i32, MetaError> {
        let found = self.with(|c| {
            let exists: bool = c
                .query_one("SELECT to_regclass('sluice_schema') IS NOT NULL", &[])?
                .get(0);
            if !exists {
                return Ok(0);
            }
            c.query_one("SELECT version FROM sluice_schema", &[])
                .map(|r| r.get(0))
        })?;
        if found > SCHEMA_VERSION {
            return Err(MetaError::Schema(format!(
                "the store's schema version is {found}, newer than this broker's {SCHEMA_VERSION}: \
                 run a broker of that version or newer"
            )));
        }
        if found == 0 {
            self.with(|c| {
                let mut txn = c.transaction()?;
                txn.batch_execute(SCHEMA_V1)?;
                txn.execute(
                    "INSERT INTO sluice_schema (version) VALUES ($1)",
                    &[&SCHEMA_VERSION],
                )?;
                txn.commit()
            })?;
            tracing::info!(version = SCHEMA_VERSION, "metadata store schema created");
        }
        Ok(found)
    }

    /// The store's identity (made when its schema was created): a data dir caches one store.
    pub fn store_id(&mut self) -> Result<String, MetaError> {
        self.with(|c| {
            let id: Uuid = c
                .query_one("SELECT store_id FROM sluice_schema", &[])?
                .get(0);
            Ok(id.to_string())
        })
    }

    /// Takes the next writer epoch: from now on only this broker's rounds commit.
    pub fn take_writer_epoch(&mut self) -> Result<i64, MetaError> {
        self.with(|c| {
            c.query_one(
                "UPDATE sluice_writer SET epoch = epoch + 1, started_at = now() RETURNING epoch",
                &[],
            )
            .map(|r| r.get(0))
        })
    }

    /// Commits round `round_id` (see the module comment). An unknown outcome is resolved
    /// by looking the round up once the store answers, retrying for at most `resolve_for`;
    /// past that the outcome is still unknown ([`MetaError::OutcomeUnknown`]): the caller
    /// must not undo the round, it must stop writing until a restart resolves it.
    pub fn commit_round(
        &mut self,
        epoch: i64,
        round_id: i64,
        round: &RoundRow,
        entries: &[EntryRow],
        resolve_for: Duration,
    ) -> Result<(), MetaError> {
        let topics: Vec<Uuid> = entries.iter().map(|e| e.topic_id).collect();
        let partitions: Vec<i32> = entries.iter().map(|e| e.partition).collect();
        let bases: Vec<i64> = entries.iter().map(|e| e.base_offset).collect();
        let lasts: Vec<i64> = entries.iter().map(|e| e.last_offset).collect();
        let positions: Vec<i64> = entries.iter().map(|e| e.position as i64).collect();
        let sizes: Vec<i32> = entries.iter().map(|e| e.size_bytes as i32).collect();
        let sent = self.client.as_ref().is_some_and(|c| !c.is_closed());
        let result = self.with(|c| {
            c.execute(
                "SELECT sluice_commit_round($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
                &[
                    &epoch,
                    &round_id,
                    &round.object_key,
                    &(round.journal_seq as i64),
                    &(round.journal_position as i64),
                    &(round.size_bytes as i64),
                    &i64::from(round.crc32c),
                    &topics,
                    &partitions,
                    &bases,
                    &lasts,
                    &positions,
                    &sizes,
                ],
            )
        });
        match result {
            Ok(_) => Ok(()),
            // Not connected before the call: nothing was sent, so nothing committed.
            Err(error) if error.is_retriable() && !sent => Err(error),
            Err(error) if error.is_retriable() => self.resolve(round_id, resolve_for),
            Err(error) => Err(error),
        }
    }

    /// Whether round `round_id` committed, asked until the store answers or `budget` ends.
    fn resolve(&mut self, round_id: i64, budget: Duration) -> Result<(), MetaError> {
        let deadline = Instant::now() + budget;
        loop {
            match self.with(|c| {
                c.query_opt(
                    "SELECT 1 FROM sluice_rounds WHERE round_id = $1",
                    &[&round_id],
                )
            }) {
                Ok(Some(_)) => return Ok(()),
                Ok(None) => {
                    return Err(MetaError::Unreachable(format!(
                        "round {round_id} did not commit (connection lost during the commit)"
                    )))
                }
                Err(error) if error.is_retriable() && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(error) => {
                    return Err(MetaError::OutcomeUnknown(format!(
                        "round {round_id}'s commit lost its connection and the store has not \
                         answered since: {error}"
                    )))
                }
            }
        }
    }

    /// The committed rounds whose journal position is at or after `(seq, position)`, in
    /// journal order.
    pub fn rounds_from(&mut self, seq: u64, position: u64) -> Result<Vec<RoundRow>, MetaError> {
        let (seq, position) = (seq as i64, position as i64);
        self.with(|c| {
            let rows = c.query(
                "SELECT object_key, journal_seq, journal_position, size_bytes, crc32c \
                 FROM sluice_rounds WHERE (journal_seq, journal_position) >= ($1, $2) \
                 ORDER BY journal_seq, journal_position",
                &[&seq, &position],
            )?;
            Ok(rows
                .iter()
                .map(|r| RoundRow {
                    object_key: r.get(0),
                    journal_seq: r.get::<_, i64>(1) as u64,
                    journal_position: r.get::<_, i64>(2) as u64,
                    size_bytes: r.get::<_, i64>(3) as u64,
                    crc32c: r.get::<_, i64>(4) as u32,
                })
                .collect())
        })
    }

    /// Every partition's log end offset, as committed.
    pub fn log_ends(&mut self) -> Result<Vec<(Uuid, i32, i64)>, MetaError> {
        self.with(|c| {
            let rows = c.query(
                "SELECT topic_id, partition, log_end_offset FROM sluice_partitions",
                &[],
            )?;
            Ok(rows
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2)))
                .collect())
        })
    }

    /// The next round id to use: one past the largest committed.
    pub fn next_round_id(&mut self) -> Result<i64, MetaError> {
        self.with(|c| {
            c.query_one(
                "SELECT coalesce(max(round_id), 0) + 1 FROM sluice_rounds",
                &[],
            )
            .map(|r| r.get(0))
        })
    }

    /// Document `name` and its version, if stored.
    pub fn load_meta(&mut self, name: &str) -> Result<Option<(Vec<u8>, i64)>, MetaError> {
        self.with(|c| {
            let row = c.query_opt(
                "SELECT contents, version FROM sluice_meta WHERE name = $1",
                &[&name],
            )?;
            Ok(row.map(|r| (r.get(0), r.get(1))))
        })
    }

    /// Stores document `name` (a new version), under the current writer epoch.
    pub fn store_meta(
        &mut self,
        epoch: i64,
        name: &str,
        contents: &[u8],
    ) -> Result<i64, MetaError> {
        self.with(|c| {
            let mut txn = c.transaction()?;
            let current: i64 = txn.query_one("SELECT epoch FROM sluice_writer FOR SHARE", &[])?.get(0);
            if current != epoch {
                // Reported as a fencing error; nothing written.
                txn.batch_execute("DO $$ BEGIN RAISE EXCEPTION 'writer epoch is stale' USING ERRCODE = 'SL001'; END $$")?;
            }
            let version: i64 = txn
                .query_one(
                    "INSERT INTO sluice_meta (name, contents, version) VALUES ($1, $2, 1) \
                     ON CONFLICT (name) DO UPDATE SET contents = EXCLUDED.contents, \
                     version = sluice_meta.version + 1 RETURNING version",
                    &[&name, &contents],
                )?
                .get(0);
            txn.commit()?;
            Ok(version)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_password_in_messages() {
        assert_eq!(
            redact_url("postgresql://sluice:hunter2@127.0.0.1:5432/db"),
            "postgresql://sluice:***@127.0.0.1:5432/db"
        );
        assert_eq!(
            redact_url("postgresql://127.0.0.1/db"),
            "postgresql://127.0.0.1/db"
        );
    }

    #[test]
    fn tls_urls_are_refused_not_downgraded() {
        let error = MetaStore::connect("postgresql://h/db?sslmode=require", Duration::from_secs(1))
            .unwrap_err();
        assert!(error.to_string().contains("TLS"), "{error}");
        assert!(!error.is_retriable());
    }
}
