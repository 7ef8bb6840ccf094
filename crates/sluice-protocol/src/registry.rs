//! The shape of an API registry: which Kafka APIs a broker serves, at which versions, and
//! whether ApiVersions lists them. The table itself is the broker's handler table
//! (`sluice-broker`, `handlers/table.rs`), where each row also names its handler, so the
//! versions parsed, the versions advertised, the dispatch and the per-API metrics cannot
//! drift apart. This crate only reads a table it is handed: header parsing refuses what it
//! does not list (asking it for one key's row, [`ApiTable`]: the broker answers from its
//! dense index in O(1), a plain list by a scan), ApiVersions is encoded from its advertised
//! rows.
//!
//! Advertise only what is encoded correctly: over-advertising breaks clients worse than
//! under-advertising.

use kafka_protocol::messages::ApiKey;

/// One served API and its inclusive version range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiSupport {
    pub key: ApiKey,
    pub min_version: i16,
    pub max_version: i16,
    /// Listed in ApiVersions. An unadvertised API is still parsed and dispatched (for
    /// clients that know it is there), but no client discovers it.
    pub advertised: bool,
    /// The lowest version ApiVersions lists: `min_version`, except where Kafka lists versions
    /// it refuses for a client's sake. Produce is listed from v0 although v0-2 are refused
    /// (KAFKA-18659): librdkafka before 2.12 decides whether the broker supports compression
    /// from Produce v0's presence, and silently sends uncompressed batches without it.
    pub advertised_min_version: i16,
}

impl ApiSupport {
    /// A row served and advertised over `min_version..=max_version`.
    pub const fn new(key: ApiKey, min_version: i16, max_version: i16, advertised: bool) -> Self {
        ApiSupport {
            key,
            min_version,
            max_version,
            advertised,
            advertised_min_version: min_version,
        }
    }

    /// True when `version` is in the range.
    pub const fn serves(&self, version: i16) -> bool {
        self.min_version <= version && version <= self.max_version
    }
}

/// A table of served APIs as header parsing asks it, once per request: the row of one key.
pub trait ApiTable {
    /// The row of `key`, if it is served.
    fn row(&self, key: ApiKey) -> Option<ApiSupport>;
}

/// A plain list, looked up by a scan: for small tables (tests). The broker hands its
/// handler table, keyed by API key.
impl ApiTable for [ApiSupport] {
    fn row(&self, key: ApiKey) -> Option<ApiSupport> {
        lookup(self, key)
    }
}

/// The row for `key` in `apis`, if it is served.
pub fn lookup(apis: &[ApiSupport], key: ApiKey) -> Option<ApiSupport> {
    apis.iter().copied().find(|a| a.key == key)
}

/// True when `version` of `key` is served by `apis`.
pub fn is_supported<T: ApiTable + ?Sized>(apis: &T, key: ApiKey, version: i16) -> bool {
    apis.row(key).is_some_and(|a| a.serves(version))
}

/// Why a table is unusable: a range beyond what the codec encodes, an empty range, or a
/// key listed twice. Broker tests run this over the broker's table.
pub fn check(apis: &[ApiSupport]) -> Result<(), String> {
    for (i, a) in apis.iter().enumerate() {
        let codec = a.key.valid_versions();
        let codec_max = crate::adapted::max_version(a.key).map_or(codec.max, |m| m.max(codec.max));
        if a.min_version > a.max_version {
            return Err(format!("{:?}: empty range", a.key));
        }
        if a.advertised_min_version > a.min_version {
            return Err(format!(
                "{:?}: advertised from above its served floor",
                a.key
            ));
        }
        if a.min_version < codec.min || a.max_version > codec_max {
            return Err(format!(
                "{:?} beyond codec {codec} (adapted up to {codec_max})",
                a.key
            ));
        }
        if apis[i + 1..].iter().any(|b| b.key == a.key) {
            return Err(format!("{:?} twice", a.key));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn api(key: ApiKey, min_version: i16, max_version: i16) -> ApiSupport {
        ApiSupport::new(key, min_version, max_version, true)
    }

    // Goal: the check refuses ranges the codec cannot encode, empty ranges and duplicates,
    // and accepts a sound table.
    #[test]
    fn check_finds_each_fault() {
        assert!(check(&[api(ApiKey::Metadata, 0, 13)]).is_ok());
        assert!(check(&[api(ApiKey::Metadata, 0, 99)]).is_err());
        assert!(check(&[api(ApiKey::Metadata, 5, 4)]).is_err());
        let twice = [api(ApiKey::Metadata, 0, 1), api(ApiKey::Metadata, 2, 3)];
        assert!(check(&twice).is_err());
        let advertised_above = ApiSupport {
            advertised_min_version: 1,
            ..api(ApiKey::Metadata, 0, 13)
        };
        assert!(check(&[advertised_above]).is_err());
    }

    // Goal: lookups see only the table they are given, version bounds inclusive.
    #[test]
    fn is_supported_is_inclusive() {
        let apis: &[ApiSupport] = &[api(ApiKey::Heartbeat, 1, 3)];
        assert!(!is_supported(apis, ApiKey::Heartbeat, 0));
        assert!(is_supported(apis, ApiKey::Heartbeat, 1));
        assert!(is_supported(apis, ApiKey::Heartbeat, 3));
        assert!(!is_supported(apis, ApiKey::Heartbeat, 4));
        assert!(!is_supported(apis, ApiKey::Metadata, 1));
    }
}
