//! Start-up of the object backend (`storage.backend=object`, docs/object-storage.md): checks
//! both stores before the log opens, migrates the metadata store's schema, takes this
//! broker's writer epoch, ties the data dir to its store, and hands the log the round store
//! (`sluice_object::ObjectRoundStore`) that makes each commit round durable.
//!
//! Guarantees: a missing bucket, an unreachable store, refused credentials or a schema newer
//! than this broker's stop the start with a message naming the setting and the store
//! (passwords left out); a data dir that holds another store's cache, or a local-backend
//! journal, is refused rather than mixed in. Runs on the start-up's blocking thread.

use std::path::Path;
use std::time::Duration;

use sluice_log::round_store::RoundStore;
use sluice_object::meta_store::{redact_url, MetaStore};
use sluice_object::{Environment, ObjectRoundStore, ObjectStore, ObjectStoreConfig};

use crate::config::object_backend::ObjectBackendConfig;

/// Socket timeout of every object-store request.
const OBJECT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a connection to PostgreSQL may take.
const METADATA_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an unknown commit outcome is asked about before the log stops writing.
const COMMIT_RESOLVE_TIMEOUT: Duration = Duration::from_secs(60);
/// The file in the data dir naming the store whose cache it is.
pub(crate) const STORE_MARKER_FILE: &str = "object-store.id";

/// The round store of `config`, or `None` on the local backend.
pub(crate) fn open(
    config: &ObjectBackendConfig,
    data_dir: &Path,
) -> Result<Option<Box<dyn RoundStore>>, String> {
    if !config.enabled {
        return Ok(None);
    }
    let objects = ObjectStore::new(
        &ObjectStoreConfig {
            url: config.object_store_url.clone(),
            endpoint: Some(config.object_store_endpoint.clone()).filter(|e| !e.is_empty()),
            request_timeout: OBJECT_REQUEST_TIMEOUT,
        },
        &Environment::current(),
    )?;
    objects
        .check_bucket()
        .map_err(|e| format!("object.store.url {}: {e}", objects.describe()))?;
    let url = &config.metadata_store_url;
    let mut meta = MetaStore::connect(url, METADATA_CONNECT_TIMEOUT)
        .map_err(|e| format!("metadata.store.url {}: {e}", redact_url(url)))?;
    meta.migrate()
        .map_err(|e| format!("metadata.store.url {}: {e}", redact_url(url)))?;
    let store_id = meta
        .store_id()
        .map_err(|e| format!("metadata.store.url {}: {e}", redact_url(url)))?;
    claim_data_dir(data_dir, &store_id)?;
    let epoch = meta
        .take_writer_epoch()
        .map_err(|e| format!("metadata.store.url {}: {e}", redact_url(url)))?;
    tracing::info!(
        objects = %objects.describe(),
        metadata = %redact_url(url),
        %store_id,
        writer_epoch = epoch,
        "object backend: both stores reachable, this broker is the writer"
    );
    let store = ObjectRoundStore::new(objects, meta, epoch, COMMIT_RESOLVE_TIMEOUT)
        .map_err(|e| format!("metadata.store.url {}: {e}", redact_url(url)))?;
    Ok(Some(Box::new(store)))
}

/// Ties `data_dir` to the store `store_id`: a new dir is marked, a dir marked for another
/// store or holding a local-backend journal is refused.
fn claim_data_dir(data_dir: &Path, store_id: &str) -> Result<(), String> {
    let marker = data_dir.join(STORE_MARKER_FILE);
    match std::fs::read_to_string(&marker) {
        Ok(found) if found.trim() == store_id => return Ok(()),
        Ok(found) => {
            return Err(format!(
                "{} caches the object store {}, not this one ({store_id}): use an empty data dir \
                 for a different store",
                data_dir.display(),
                found.trim()
            ))
        }
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("{}: {e}", marker.display()))
        }
        Err(_) => {}
    }
    let journal = data_dir.join("journal");
    let has_journal = std::fs::read_dir(&journal).is_ok_and(|mut entries| entries.next().is_some());
    if has_journal {
        return Err(format!(
            "{} holds a journal written by the local backend (storage.backend=local): the object \
             backend needs an empty data dir (it does not upload existing data)",
            data_dir.display()
        ));
    }
    sluice_log::fs::write_file_atomic(
        &sluice_log::fs::StdFs,
        &marker,
        format!("{store_id}\n").as_bytes(),
    )
    .map_err(|e| format!("{}: {e}", marker.display()))
}
