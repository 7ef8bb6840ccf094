//! AlterUserScramCredentials (key 51), v0: creates, replaces and deletes SCRAM credentials
//! (KIP-554; `kafka-configs.sh --alter --add-config 'SCRAM-SHA-512=[password=...]'
//! --entity-type users`).
//!
//! The client sends the salt and the salted password; the store keeps StoredKey and
//! ServerKey derived from them ([`crate::services::scram`]). One result per user: a user any of whose
//! changes is refused gets that error and none of its changes (UNACCEPTABLE_CREDENTIAL for an
//! empty name, salt or salted password, or iterations outside 4096..=16384;
//! UNSUPPORTED_SASL_MECHANISM; RESOURCE_NOT_FOUND for deleting what does not exist;
//! DUPLICATE_RESOURCE for two changes of one user's mechanism). The accepted changes are
//! written durably in one file replacement, on the blocking pool, before the answer.
//! Needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED per user).

use kafka_protocol::error::ResponseError;
use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
};

use super::{str_bytes, Ctx, Reply};
use crate::config::limits;
use crate::services::scram::{Change, Credential, ScramMechanism};
use crate::{error_code, services::acl};

/// A user's first refusal: (code, message).
type Refusal = (i16, String);

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: AlterUserScramCredentialsRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    // Kafka: ALTER on the cluster; every user named gets the refusal.
    if !ctx.allowed_cluster(acl::op::ALTER) {
        let mut resp = AlterUserScramCredentialsResponse::default();
        let names = req.deletions.iter().map(|d| &d.name);
        for name in names.chain(req.upsertions.iter().map(|u| &u.name)) {
            if resp.results.iter().all(|r| r.user != *name) {
                let mut r = AlterUserScramCredentialsResult::default();
                r.user = name.clone();
                r.error_code = ResponseError::ClusterAuthorizationFailed.code();
                resp.results.push(r);
            }
        }
        return ctx.respond(&resp);
    }
    let store = &ctx.broker.scram;
    let mut refused: BTreeMap<String, Refusal> = BTreeMap::new();
    let mut changes: Vec<Change> = Vec::new();
    let mut seen: BTreeSet<(String, i8)> = BTreeSet::new();
    let mut users: Vec<String> = Vec::new();
    let mut refuse = |user: &str, code: i16, msg: String| {
        refused.entry(user.to_string()).or_insert((code, msg));
    };
    let ops = req
        .deletions
        .iter()
        .map(|d| (d.name.to_string(), d.mechanism, None))
        .chain(req.upsertions.iter().map(|u| {
            let name = u.name.to_string();
            (name, u.mechanism, Some(u))
        }));
    for (user, mech_id, upsert) in ops {
        if !users.contains(&user) {
            users.push(user.clone());
        }
        if user.is_empty() || user.len() > limits::SCRAM_USER_NAME_BYTES_MAX {
            refuse(
                &user,
                ResponseError::UnacceptableCredential.code(),
                "Username must not be empty or too long".into(),
            );
            continue;
        }
        if !seen.insert((user.clone(), mech_id)) {
            refuse(
                &user,
                ResponseError::DuplicateResource.code(),
                "A user credential cannot be altered twice in the same request".into(),
            );
            continue;
        }
        let Some(mech) = ScramMechanism::from_type_id(mech_id) else {
            refuse(
                &user,
                ResponseError::UnsupportedSaslMechanism.code(),
                format!("Unknown SCRAM mechanism type {mech_id}"),
            );
            continue;
        };
        match upsert {
            None => match store.get(&user, mech) {
                Some(_) => changes.push(Change::Delete { user, mech }),
                None => refuse(
                    &user,
                    ResponseError::ResourceNotFound.code(),
                    "Attempt to delete a user credential that does not exist".into(),
                ),
            },
            Some(u) => {
                if let Err(msg) = acceptable(mech, u.iterations, &u.salt, &u.salted_password) {
                    refuse(&user, ResponseError::UnacceptableCredential.code(), msg);
                    continue;
                }
                let credential =
                    Credential::from_salted(mech, &u.salt, u.iterations, &u.salted_password);
                changes.push(Change::Upsert {
                    user,
                    mech,
                    credential,
                });
            }
        }
    }
    changes.retain(|c| {
        let user = match c {
            Change::Delete { user, .. } | Change::Upsert { user, .. } => user,
        };
        !refused.contains_key(user)
    });
    let write = match changes.is_empty() {
        true => Ok(()),
        false => {
            let broker_changes = changes.clone();
            ctx.blocking(move |b| b.scram.apply(&broker_changes).map_err(|e| e.to_string()))
                .await
                .unwrap_or_else(|| Err("the write task failed".into()))
        }
    };
    if let Err(e) = &write {
        tracing::error!(error = %e, "SCRAM credentials not saved");
    }
    let mut resp = AlterUserScramCredentialsResponse::default();
    resp.results = users
        .into_iter()
        .map(|user| {
            let mut r = AlterUserScramCredentialsResult::default();
            let (code, msg) = match (refused.remove(&user), &write) {
                (Some((code, msg)), _) => (code, Some(msg)),
                (None, Err(e)) => (
                    ResponseError::UnknownServerError.code(),
                    Some(format!("credentials not saved: {e}")),
                ),
                (None, Ok(())) => (error_code::NONE, None),
            };
            r.user = str_bytes(user);
            r.error_code = code;
            r.error_message = msg.map(str_bytes);
            r
        })
        .collect();
    ctx.respond(&resp)
}

/// Kafka's checks of an upserted credential.
fn acceptable(
    mech: ScramMechanism,
    iterations: i32,
    salt: &[u8],
    salted: &[u8],
) -> Result<(), String> {
    if !(limits::SCRAM_ITERATIONS_MIN..=limits::SCRAM_ITERATIONS_MAX).contains(&iterations) {
        return Err(format!(
            "Iterations must be between {} and {}",
            limits::SCRAM_ITERATIONS_MIN,
            limits::SCRAM_ITERATIONS_MAX
        ));
    }
    if salt.is_empty() || salt.len() > 1024 {
        return Err("Salt must not be empty or too long".into());
    }
    if salted.len() != mech.hash_len() {
        return Err(format!(
            "Salted password must be {} bytes for {}",
            mech.hash_len(),
            mech.name()
        ));
    }
    Ok(())
}
