//! Object-store credentials and region, found the way AWS tools find them:
//! `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` (and `AWS_SESSION_TOKEN`) in the
//! environment, else the profile `AWS_PROFILE` (or `default`) of the shared credentials file
//! (`AWS_SHARED_CREDENTIALS_FILE`, or `~/.aws/credentials`); the region from `AWS_REGION`,
//! `AWS_DEFAULT_REGION`, the profile's `region` in `AWS_CONFIG_FILE` (or `~/.aws/config`),
//! else `us-east-1`.
//!
//! Guarantees: a secret never appears in `Debug` output, a log line or an error message.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;

/// An access key pair (and a session token for temporary credentials).
#[derive(Clone)]
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// Where credentials are looked up: the process environment and the home directory (a
/// seam so tests need not change the process's environment).
#[derive(Debug, Clone, Default)]
pub struct Environment {
    pub vars: HashMap<String, String>,
}

impl Environment {
    /// The process's environment.
    pub fn current() -> Self {
        Self {
            vars: std::env::vars().collect(),
        }
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    fn aws_file(&self, var: &str, default_name: &str) -> Option<PathBuf> {
        if let Some(path) = self.get(var) {
            return Some(PathBuf::from(path));
        }
        self.get("HOME")
            .map(|home| PathBuf::from(home).join(".aws").join(default_name))
    }

    fn profile(&self) -> &str {
        self.get("AWS_PROFILE").unwrap_or("default")
    }
}

/// The credentials `env` names, or an error saying where they were looked for.
pub fn find_credentials(env: &Environment) -> Result<Credentials, String> {
    if let (Some(id), Some(secret)) = (
        env.get("AWS_ACCESS_KEY_ID"),
        env.get("AWS_SECRET_ACCESS_KEY"),
    ) {
        return Ok(Credentials {
            access_key_id: id.to_string(),
            secret_access_key: secret.to_string(),
            session_token: env.get("AWS_SESSION_TOKEN").map(str::to_string),
        });
    }
    let path = env.aws_file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
    let profile = env.profile();
    let section = path
        .as_ref()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|text| ini_section(&text, profile));
    if let Some(section) = section {
        if let (Some(id), Some(secret)) = (
            section.get("aws_access_key_id"),
            section.get("aws_secret_access_key"),
        ) {
            return Ok(Credentials {
                access_key_id: id.clone(),
                secret_access_key: secret.clone(),
                session_token: section.get("aws_session_token").cloned(),
            });
        }
    }
    Err(format!(
        "no object-store credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or put \
         aws_access_key_id and aws_secret_access_key in profile [{profile}] of {}",
        path.map_or_else(
            || "~/.aws/credentials".to_string(),
            |p| p.display().to_string()
        )
    ))
}

/// The region `env` names (see the module comment), `us-east-1` when none does.
pub fn find_region(env: &Environment) -> String {
    if let Some(region) = env
        .get("AWS_REGION")
        .or_else(|| env.get("AWS_DEFAULT_REGION"))
    {
        return region.to_string();
    }
    let profile = env.profile();
    // The config file names non-default profiles `[profile NAME]`.
    let section_name = if profile == "default" {
        profile.to_string()
    } else {
        format!("profile {profile}")
    };
    env.aws_file("AWS_CONFIG_FILE", "config")
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|text| ini_section(&text, &section_name))
        .and_then(|section| section.get("region").cloned())
        .unwrap_or_else(|| "us-east-1".to_string())
}

/// The `key = value` pairs of `[name]` in an INI text (comments `#` and `;`).
fn ini_section(text: &str, name: &str) -> Option<HashMap<String, String>> {
    let mut found = None;
    let mut current: Option<bool> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let here = header.trim() == name;
            current = Some(here);
            if here {
                found.get_or_insert_with(HashMap::new);
            }
            continue;
        }
        if current == Some(true) {
            if let Some((key, value)) = line.split_once('=') {
                let map = found.get_or_insert_with(HashMap::new);
                map.insert(key.trim().to_ascii_lowercase(), value.trim().to_string());
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Environment {
        Environment {
            vars: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn environment_variables_come_first() {
        let found = find_credentials(&env(&[
            ("AWS_ACCESS_KEY_ID", "id"),
            ("AWS_SECRET_ACCESS_KEY", "secret"),
            ("AWS_SESSION_TOKEN", "token"),
        ]))
        .unwrap();
        assert_eq!(found.access_key_id, "id");
        assert_eq!(found.session_token.as_deref(), Some("token"));
        let shown = format!("{found:?}");
        assert!(!shown.contains("secret") || shown.contains("<redacted>"));
        assert!(!shown.contains("\"secret\"") && !shown.contains("token\""));
    }

    #[test]
    fn a_named_profile_is_read_from_the_shared_files() {
        let dir = tempfile::tempdir().unwrap();
        let credentials = dir.path().join("credentials");
        let config = dir.path().join("config");
        std::fs::write(
            &credentials,
            "[default]\naws_access_key_id = d\naws_secret_access_key = ds\n\
             # comment\n[lab]\naws_access_key_id=lab-id\naws_secret_access_key = lab-secret\n",
        )
        .unwrap();
        std::fs::write(
            &config,
            "[default]\nregion = eu-west-1\n[profile lab]\nregion=ap-south-1\n",
        )
        .unwrap();
        let vars = env(&[
            ("AWS_PROFILE", "lab"),
            ("AWS_SHARED_CREDENTIALS_FILE", credentials.to_str().unwrap()),
            ("AWS_CONFIG_FILE", config.to_str().unwrap()),
        ]);
        let found = find_credentials(&vars).unwrap();
        assert_eq!(
            (
                found.access_key_id.as_str(),
                found.secret_access_key.as_str()
            ),
            ("lab-id", "lab-secret")
        );
        assert_eq!(find_region(&vars), "ap-south-1");
        let mut default = vars.clone();
        default.vars.remove("AWS_PROFILE");
        assert_eq!(find_region(&default), "eu-west-1");
        assert_eq!(find_credentials(&default).unwrap().access_key_id, "d");
    }

    #[test]
    fn missing_credentials_say_where_they_were_looked_for() {
        let error = find_credentials(&env(&[("HOME", "/nonexistent")])).unwrap_err();
        assert!(error.contains("AWS_ACCESS_KEY_ID"), "{error}");
        assert!(error.contains("/nonexistent/.aws/credentials"), "{error}");
        assert_eq!(find_region(&env(&[])), "us-east-1");
    }
}
