//! The settings of the object backend (`storage.backend=object`, docs/object-storage.md):
//! which backend makes record data durable, and where its two stores are. Rows of the one
//! config table (`table.rs`); checked together by [`ObjectBackendConfig::check`] at start.

use crate::config::values::ConfigError;

/// `storage.backend` and the stores it names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectBackendConfig {
    /// `storage.backend=object` (false: `local`, the journal in the data dir).
    pub enabled: bool,
    /// `object.store.url`: `s3://bucket/prefix`.
    pub object_store_url: String,
    /// `object.store.endpoint`: an S3-compatible server; empty for AWS.
    pub object_store_endpoint: String,
    /// `metadata.store.url`: `postgresql://...` (may hold a password: never logged).
    pub metadata_store_url: String,
}

/// `storage.backend`: `local` or `object`.
pub(crate) fn parse_backend(key: &str, v: &str) -> Result<bool, ConfigError> {
    match v.trim() {
        "local" => Ok(false),
        "object" => Ok(true),
        _ => Err(ConfigError {
            key: key.into(),
            value: v.into(),
            reason: "expected local or object".into(),
        }),
    }
}

impl ObjectBackendConfig {
    /// With the object backend on, both stores must be named and the S3 URL well formed.
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        if !self.enabled {
            return Ok(());
        }
        let missing = |key: &str| ConfigError {
            key: key.into(),
            value: String::new(),
            reason: "required with storage.backend=object".into(),
        };
        if self.object_store_url.is_empty() {
            return Err(missing("object.store.url"));
        }
        if self.metadata_store_url.is_empty() {
            return Err(missing("metadata.store.url"));
        }
        if let Err(reason) = sluice_object::s3::parse_url(&self.object_store_url) {
            return Err(ConfigError {
                key: "object.store.url".into(),
                value: self.object_store_url.clone(),
                reason,
            });
        }
        Ok(())
    }
}
