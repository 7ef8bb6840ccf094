//! ACLs and the authorizer: Kafka's model (resource type and pattern, principal, host,
//! operation, ALLOW/DENY), the durable ACL store, and the one check every handler calls.
//!
//! Semantics follow Kafka's StandardAuthorizer: super users are allowed everything; otherwise
//! the ACLs whose resource pattern matches (LITERAL equal name or `*`, PREFIXED name prefix),
//! whose principal matches (or `User:*`) and whose host matches (or `*`) are considered. A
//! matching DENY for the operation (or ALL) wins over every ALLOW. An ALLOW for the operation,
//! for ALL, or for an operation that implies it (READ, WRITE, DELETE and ALTER imply DESCRIBE;
//! ALTER_CONFIGS implies DESCRIBE_CONFIGS) allows. When no ACL at all is set on the resource,
//! `allow.everyone.if.no.acl.found` decides. Without `authorizer.class.name` every check
//! allows (Kafka without an authorizer) and the ACL APIs answer SECURITY_DISABLED.
//!
//! Durability: `<data_dir>/meta/acls.json`, owner-only, replaced atomically (temp file, fsync,
//! rename, fsync dir) on the blocking pool before a change is answered or used, as SCRAM
//! credentials are. A file that does not parse refuses to start (ACLs, DENY ones above all,
//! are never dropped silently). Checks read an immutable snapshot swapped in after the write:
//! a check takes no lock across I/O and allocates nothing.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

use crate::config::limits;

/// Kafka's resource types (ResourceType codes).
pub mod resource {
    pub const ANY: i8 = 1;
    pub const TOPIC: i8 = 2;
    pub const GROUP: i8 = 3;
    pub const CLUSTER: i8 = 4;
    pub const TRANSACTIONAL_ID: i8 = 5;
    /// A delegation token by id (DESCRIBE lets a principal describe someone else's token).
    pub const DELEGATION_TOKEN: i8 = 6;
    /// A user principal (`User:<name>`): CREATE_TOKENS / DESCRIBE_TOKENS for that owner.
    pub const USER: i8 = 7;
}

/// Kafka's pattern types (PatternType codes).
pub mod pattern {
    pub const ANY: i8 = 1;
    pub const MATCH: i8 = 2;
    pub const LITERAL: i8 = 3;
    pub const PREFIXED: i8 = 4;
}

/// Kafka's ACL operations (AclOperation codes).
pub mod op {
    pub const ANY: i8 = 1;
    pub const ALL: i8 = 2;
    pub const READ: i8 = 3;
    pub const WRITE: i8 = 4;
    pub const CREATE: i8 = 5;
    pub const DELETE: i8 = 6;
    pub const ALTER: i8 = 7;
    pub const DESCRIBE: i8 = 8;
    pub const CLUSTER_ACTION: i8 = 9;
    pub const DESCRIBE_CONFIGS: i8 = 10;
    pub const ALTER_CONFIGS: i8 = 11;
    pub const IDEMPOTENT_WRITE: i8 = 12;
    /// Create delegation tokens owned by the USER resource (CreateDelegationToken v3).
    pub const CREATE_TOKENS: i8 = 13;
    /// Describe delegation tokens owned by the USER resource.
    pub const DESCRIBE_TOKENS: i8 = 14;
}

/// The operations Kafka reports in authorized-operations fields, per resource type
/// (`AclEntry.supportedOperations`).
pub mod supported {
    use super::op::*;
    pub const TOPIC: &[i8] = &[
        READ,
        WRITE,
        CREATE,
        DESCRIBE,
        DELETE,
        ALTER,
        DESCRIBE_CONFIGS,
        ALTER_CONFIGS,
    ];
    pub const GROUP: &[i8] = &[READ, DESCRIBE, DELETE];
    pub const CLUSTER: &[i8] = &[
        CREATE,
        CLUSTER_ACTION,
        DESCRIBE_CONFIGS,
        ALTER_CONFIGS,
        IDEMPOTENT_WRITE,
        ALTER,
        DESCRIBE,
    ];
}

/// Kafka's permission types (AclPermissionType codes).
pub mod permission {
    pub const ANY: i8 = 1;
    pub const DENY: i8 = 2;
    pub const ALLOW: i8 = 3;
}

/// The literal resource name that matches every name of its type.
pub const WILDCARD: &str = "*";
/// The cluster resource's only name.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// One ACL binding, as stored.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Acl {
    pub resource_type: i8,
    pub resource_name: String,
    pub pattern_type: i8,
    pub principal: String,
    pub host: String,
    pub operation: i8,
    pub permission: i8,
}

/// Why an ACL cannot be created (answered as INVALID_REQUEST with this message).
pub fn check_new(acl: &Acl) -> Result<(), String> {
    if !matches!(
        acl.resource_type,
        resource::TOPIC
            | resource::GROUP
            | resource::CLUSTER
            | resource::TRANSACTIONAL_ID
            | resource::DELEGATION_TOKEN
            | resource::USER
    ) {
        return Err(format!(
            "resource type {} is not supported",
            acl.resource_type
        ));
    }
    if !matches!(acl.pattern_type, pattern::LITERAL | pattern::PREFIXED) {
        return Err("an ACL's pattern type must be LITERAL or PREFIXED".into());
    }
    if acl.resource_name.is_empty() {
        return Err("the resource name must not be empty".into());
    }
    if acl.resource_type == resource::CLUSTER && acl.resource_name != CLUSTER_NAME {
        return Err(format!("the cluster resource is named {CLUSTER_NAME}"));
    }
    if acl.pattern_type == pattern::PREFIXED && acl.resource_name == WILDCARD {
        return Err("a PREFIXED pattern cannot be the wildcard".into());
    }
    match acl.principal.split_once(':') {
        Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {}
        _ => {
            return Err(format!(
                "principal {:?} is not <type>:<name>",
                acl.principal
            ))
        }
    }
    if acl.host != WILDCARD && acl.host.parse::<IpAddr>().is_err() {
        return Err(format!("host {:?} is not an IP address or *", acl.host));
    }
    if !(op::ALL..=op::DESCRIBE_TOKENS).contains(&acl.operation) {
        return Err(format!("operation {} is not valid", acl.operation));
    }
    if !matches!(acl.permission, permission::ALLOW | permission::DENY) {
        return Err("the permission type must be ALLOW or DENY".into());
    }
    Ok(())
}

/// A DescribeAcls / DeleteAcls filter (`None` fields and ANY codes match everything).
#[derive(Debug, Clone)]
pub struct Filter {
    pub resource_type: i8,
    pub resource_name: Option<String>,
    pub pattern_type: i8,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: i8,
    pub permission: i8,
}

impl Filter {
    /// Whether the filter is well formed (codes Kafka knows for filters).
    pub fn check(&self) -> Result<(), String> {
        if !(resource::ANY..=resource::USER).contains(&self.resource_type) {
            return Err("unknown resource type".into());
        }
        if !(pattern::ANY..=pattern::PREFIXED).contains(&self.pattern_type) {
            return Err("unknown pattern type".into());
        }
        if !(op::ANY..=op::DESCRIBE_TOKENS).contains(&self.operation) {
            return Err("unknown operation".into());
        }
        if !(permission::ANY..=permission::ALLOW).contains(&self.permission) {
            return Err("unknown permission type".into());
        }
        Ok(())
    }

    /// Kafka's filter matching: MATCH matches every pattern that would apply to the name
    /// (the literal name, the wildcard, and prefixes of it); ANY matches every pattern type.
    pub fn matches(&self, acl: &Acl) -> bool {
        let code = |f: i8, v: i8, any: i8| f == any || f == v;
        if !code(self.resource_type, acl.resource_type, resource::ANY)
            || !code(self.operation, acl.operation, op::ANY)
            || !code(self.permission, acl.permission, permission::ANY)
        {
            return false;
        }
        if self.principal.as_ref().is_some_and(|p| *p != acl.principal)
            || self.host.as_ref().is_some_and(|h| *h != acl.host)
        {
            return false;
        }
        match self.pattern_type {
            pattern::MATCH => match &self.resource_name {
                None => true,
                Some(name) => pattern_applies(acl, name),
            },
            pattern::ANY => self
                .resource_name
                .as_ref()
                .is_none_or(|n| *n == acl.resource_name),
            p => {
                p == acl.pattern_type
                    && self
                        .resource_name
                        .as_ref()
                        .is_none_or(|n| *n == acl.resource_name)
            }
        }
    }
}

/// Whether `acl`'s resource pattern covers the resource named `name`.
fn pattern_applies(acl: &Acl, name: &str) -> bool {
    match acl.pattern_type {
        pattern::LITERAL => acl.resource_name == name || acl.resource_name == WILDCARD,
        pattern::PREFIXED => name.starts_with(acl.resource_name.as_str()),
        _ => false,
    }
}

/// Whether an ALLOW for `granted` allows `wanted` (Kafka's implied operations).
fn implies(granted: i8, wanted: i8) -> bool {
    granted == wanted
        || granted == op::ALL
        || (wanted == op::DESCRIBE
            && matches!(granted, op::READ | op::WRITE | op::DELETE | op::ALTER))
        || (wanted == op::DESCRIBE_CONFIGS && granted == op::ALTER_CONFIGS)
}

pub use crate::config::security::AuthorizerConfig;

const FILE_NAME: &str = "acls.json";

#[derive(Serialize, Deserialize)]
struct AclFile {
    version: u32,
    acls: Vec<Acl>,
}

/// The authorizer and its durable ACLs.
#[derive(Debug)]
pub struct Authorizer {
    config: AuthorizerConfig,
    meta_dir: PathBuf,
    /// The current ACLs, sorted; replaced whole after each durable change.
    acls: RwLock<Arc<Vec<Acl>>>,
    /// Serializes changes (held on the blocking pool only, across the file write).
    writer: Mutex<()>,
}

impl Authorizer {
    /// Loads the ACLs (none when the file does not exist). Blocking.
    pub fn open(data_dir: &Path, config: AuthorizerConfig) -> std::io::Result<Authorizer> {
        let meta_dir = data_dir.join("meta");
        sluice_log::fs::create_private_dir_all(&meta_dir)?;
        let path = meta_dir.join(FILE_NAME);
        let acls = match std::fs::read(&path) {
            Ok(bytes) => decode_file(&bytes).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}; refusing to start rather than lose ACLs (restore it from a backup, or remove it to start with none)", path.display()),
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        Ok(Authorizer {
            config,
            meta_dir,
            acls: RwLock::new(Arc::new(acls)),
            writer: Mutex::new(()),
        })
    }

    /// An authorizer is configured (`authorizer.class.name`).
    pub fn enabled(&self) -> bool {
        self.config.enabled
    }

    /// The one check: may `principal` from `host` do `operation` on the resource? Allocates
    /// nothing and takes the snapshot lock only to clone an `Arc`.
    pub fn authorize(
        &self,
        principal: &str,
        host: IpAddr,
        operation: i8,
        resource_type: i8,
        name: &str,
    ) -> bool {
        if !self.config.enabled || self.config.super_users.iter().any(|s| s == principal) {
            return true;
        }
        let acls = self.acls.read().clone();
        let mut any_on_resource = false;
        let mut allowed = false;
        for acl in acls.iter() {
            if acl.resource_type != resource_type || !pattern_applies(acl, name) {
                continue;
            }
            any_on_resource = true;
            let principal_matches = acl.principal == principal || acl.principal == "User:*";
            if !principal_matches || !host_matches(&acl.host, host) {
                continue;
            }
            match acl.permission {
                permission::DENY if acl.operation == operation || acl.operation == op::ALL => {
                    return false
                }
                permission::ALLOW if implies(acl.operation, operation) => allowed = true,
                _ => {}
            }
        }
        allowed || (!any_on_resource && self.config.allow_everyone_if_no_acl_found)
    }

    /// Kafka's `authorizeByResourceType`: may `principal` do `operation` on *some* resource
    /// of `resource_type`? Used where Kafka accepts "WRITE on any topic" (an idempotent
    /// InitProducerId). Super users, and the no-ACL default for a name no ACL covers, are
    /// decided by an ordinary check of a made-up name first, as Kafka does; then an ALLOW
    /// (for the operation or ALL) counts unless a DENY dominates it: a DENY on the wildcard,
    /// a LITERAL DENY of the same name, or a PREFIXED DENY on a prefix of its name.
    pub fn authorize_by_resource_type(
        &self,
        principal: &str,
        host: IpAddr,
        operation: i8,
        resource_type: i8,
    ) -> bool {
        /// The name Kafka checks first (no real resource is expected to carry ACLs for it).
        const PROBE_NAME: &str = "hardcode";
        if self.authorize(principal, host, operation, resource_type, PROBE_NAME) {
            return true;
        }
        let acls = self.acls.read().clone();
        let applies = |a: &&Acl| {
            a.resource_type == resource_type
                && (a.principal == principal || a.principal == "User:*")
                && host_matches(&a.host, host)
                && (a.operation == operation || a.operation == op::ALL)
        };
        let denies = |a: &Acl| a.permission == permission::DENY;
        if acls
            .iter()
            .filter(applies)
            .any(|a| denies(a) && a.pattern_type == pattern::LITERAL && a.resource_name == WILDCARD)
        {
            return false;
        }
        let dominated = |allow: &Acl| {
            acls.iter().filter(applies).filter(|d| denies(d)).any(|d| {
                (d.pattern_type == pattern::LITERAL
                    && allow.pattern_type == pattern::LITERAL
                    && d.resource_name == allow.resource_name)
                    || (d.pattern_type == pattern::PREFIXED
                        && allow.resource_name.starts_with(d.resource_name.as_str()))
            })
        };
        acls.iter()
            .filter(applies)
            .filter(|a| a.permission == permission::ALLOW)
            .any(|a| {
                (a.pattern_type == pattern::LITERAL && a.resource_name == WILDCARD) || !dominated(a)
            })
    }

    /// Kafka's authorized-operations bit field (bit `op` set for each operation of
    /// `operations` the principal may do on the resource), for the `*_authorized_operations`
    /// fields of DescribeCluster, Metadata and the describe-group APIs.
    pub fn authorized_operations(
        &self,
        principal: &str,
        host: IpAddr,
        resource_type: i8,
        name: &str,
        operations: &[i8],
    ) -> i32 {
        operations
            .iter()
            .filter(|&&o| self.authorize(principal, host, o, resource_type, name))
            .fold(0, |bits, &o| bits | (1 << o))
    }

    /// The ACLs a filter matches.
    pub fn describe(&self, filter: &Filter) -> Vec<Acl> {
        let acls = self.acls.read().clone();
        acls.iter().filter(|a| filter.matches(a)).cloned().collect()
    }

    /// Adds ACLs (each checked by the caller with [`check_new`]; duplicates are kept once),
    /// durably, then makes them visible. Blocking (file write).
    pub fn create(&self, new: &[Acl]) -> std::io::Result<()> {
        self.change(|acls| {
            acls.extend(new.iter().cloned());
            Vec::<Acl>::new()
        })
        .map(drop)
    }

    /// Removes the ACLs each filter matches, durably; returns them per filter. Blocking.
    pub fn delete(&self, filters: &[Filter]) -> std::io::Result<Vec<Vec<Acl>>> {
        self.change(|acls| {
            let mut removed = vec![Vec::new(); filters.len()];
            acls.retain(|a| {
                let hits: Vec<usize> = (0..filters.len())
                    .filter(|&i| filters[i].matches(a))
                    .collect();
                for &i in &hits {
                    removed[i].push(a.clone());
                }
                hits.is_empty()
            });
            removed
        })
    }

    fn change<T>(&self, f: impl FnOnce(&mut Vec<Acl>) -> T) -> std::io::Result<T> {
        let _writer = self.writer.lock();
        let mut acls: Vec<Acl> = (**self.acls.read()).clone();
        let out = f(&mut acls);
        acls.sort();
        acls.dedup();
        if acls.len() > limits::ACLS_MAX {
            return Err(std::io::Error::other(format!(
                "more than {} ACLs",
                limits::ACLS_MAX
            )));
        }
        let file = AclFile {
            version: 1,
            acls: acls.clone(),
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?;
        crate::services::atomic_file::write_atomically(&self.meta_dir, FILE_NAME, &bytes)?;
        *self.acls.write() = Arc::new(acls);
        Ok(out)
    }
}

/// Hosts are compared as addresses (so `::ffff:127.0.0.1` style spellings do not matter).
fn host_matches(acl_host: &str, host: IpAddr) -> bool {
    acl_host == WILDCARD
        || acl_host
            .parse::<IpAddr>()
            .is_ok_and(|h| h == host || Some(h) == host_v4(host).map(IpAddr::V4))
}

fn host_v4(host: IpAddr) -> Option<std::net::Ipv4Addr> {
    match host {
        IpAddr::V6(v6) => v6.to_ipv4_mapped(),
        IpAddr::V4(v4) => Some(v4),
    }
}

fn decode_file(bytes: &[u8]) -> Result<Vec<Acl>, String> {
    let file: AclFile = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if file.version != 1 {
        return Err(format!("unknown ACL file version {}", file.version));
    }
    for acl in &file.acls {
        check_new(acl)?;
    }
    Ok(file.acls)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(rt: i8, name: &str, pt: i8, principal: &str, operation: i8, perm: i8) -> Acl {
        Acl {
            resource_type: rt,
            resource_name: name.into(),
            pattern_type: pt,
            principal: principal.into(),
            host: "*".into(),
            operation,
            permission: perm,
        }
    }

    fn open(dir: &Path, allow_everyone: bool) -> Authorizer {
        let cfg = AuthorizerConfig {
            enabled: true,
            super_users: vec!["User:admin".into()],
            allow_everyone_if_no_acl_found: allow_everyone,
        };
        Authorizer::open(dir, cfg).unwrap()
    }

    // Goal: DENY wins, implied operations, prefixes, wildcard, super users, the no-ACL
    // default, and durability across reopen.
    #[test]
    fn kafka_semantics_and_durability() {
        let dir = tempfile::tempdir().unwrap();
        let h: IpAddr = "127.0.0.1".parse().unwrap();
        let a = open(dir.path(), false);
        use {op::*, pattern::*, permission::*, resource::*};
        a.create(&[
            acl(TOPIC, "t", LITERAL, "User:alice", WRITE, ALLOW),
            acl(TOPIC, "pre-", PREFIXED, "User:bob", READ, ALLOW),
            acl(TOPIC, "pre-x", LITERAL, "User:bob", ALL, DENY),
            acl(TOPIC, "*", LITERAL, "User:carol", DESCRIBE, ALLOW),
        ])
        .unwrap();
        for acl in a.describe(&Filter {
            resource_type: resource::ANY,
            resource_name: None,
            pattern_type: pattern::ANY,
            principal: None,
            host: None,
            operation: op::ANY,
            permission: permission::ANY,
        }) {
            check_new(&acl).unwrap();
        }
        assert!(a.authorize("User:alice", h, WRITE, TOPIC, "t"));
        assert!(a.authorize("User:alice", h, DESCRIBE, TOPIC, "t"));
        assert!(!a.authorize("User:alice", h, READ, TOPIC, "t"));
        assert!(a.authorize("User:bob", h, READ, TOPIC, "pre-a"));
        assert!(!a.authorize("User:bob", h, READ, TOPIC, "pre-x"));
        assert!(a.authorize("User:carol", h, DESCRIBE, TOPIC, "anything"));
        assert!(a.authorize("User:admin", h, DELETE, TOPIC, "t"));
        // No ACL on the resource: the default decides.
        assert!(!a.authorize("User:alice", h, READ, GROUP, "g"));
        drop(a);
        let a = open(dir.path(), true);
        assert!(a.authorize("User:alice", h, READ, GROUP, "g"));
        assert!(!a.authorize("User:bob", h, READ, TOPIC, "pre-x"));
        let removed = a
            .delete(&[Filter {
                resource_type: TOPIC,
                resource_name: Some("pre-x".into()),
                pattern_type: MATCH,
                principal: None,
                host: None,
                operation: op::ANY,
                permission: permission::ANY,
            }])
            .unwrap();
        // MATCH on pre-x matches the literal pre-x, the prefix pre- and the wildcard.
        assert_eq!(removed[0].len(), 3);
        std::fs::write(dir.path().join("meta").join(FILE_NAME), b"{oops").unwrap();
        assert!(Authorizer::open(dir.path(), AuthorizerConfig::default()).is_err());
    }

    // Goal: "WRITE on any topic" is Kafka's authorizeByResourceType: an ALLOW counts unless a
    // DENY dominates it; a wildcard DENY refuses all; super users always pass.
    #[test]
    fn by_resource_type_follows_dominating_denies() {
        let dir = tempfile::tempdir().unwrap();
        let h: IpAddr = "127.0.0.1".parse().unwrap();
        let a = open(dir.path(), false);
        use {op::*, pattern::*, permission::*, resource::*};
        let any_write = |p: &str| a.authorize_by_resource_type(p, h, WRITE, TOPIC);
        assert!(!any_write("User:alice"));
        assert!(any_write("User:admin"));
        a.create(&[
            acl(TOPIC, "app-x", LITERAL, "User:alice", WRITE, ALLOW),
            acl(TOPIC, "app-", PREFIXED, "User:alice", WRITE, DENY),
            acl(TOPIC, "logs", LITERAL, "User:bob", ALL, ALLOW),
            acl(TOPIC, "*", LITERAL, "User:carol", READ, ALLOW),
        ])
        .unwrap();
        assert!(!any_write("User:alice"), "dominated by the prefix DENY");
        assert!(any_write("User:bob"), "ALL implies WRITE");
        assert!(!any_write("User:carol"), "READ is not WRITE");
        a.create(&[acl(TOPIC, "*", LITERAL, "User:bob", WRITE, DENY)])
            .unwrap();
        assert!(
            !any_write("User:bob"),
            "a wildcard DENY refuses every topic"
        );
        assert_eq!(
            a.authorized_operations("User:bob", h, TOPIC, "logs", supported::TOPIC),
            supported::TOPIC
                .iter()
                .filter(|&&o| o != WRITE)
                .fold(0, |b, &o| b | (1 << o))
        );
    }
}
