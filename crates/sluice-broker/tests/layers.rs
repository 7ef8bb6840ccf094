//! The broker's layers keep their direction: reads every source file under `src/` and fails
//! on an import that points up (the layers are described in `src/lib.rs` and
//! docs/broker.md).
//!
//! Top-down: `net/` (sockets, TLS, SASL, connections, server), `handlers/` (one per Kafka
//! API), `services/` (topics, coordinators, credentials, ACLs, quotas, ...), the leaf modules
//! (`clock`, `error_code`, `log_limit`, `memory`, `metrics`, `response_chunks`), and
//! `config/`. A file may import its own layer and the layers below it. The crate root
//! (`lib.rs`, which holds `Broker` and the public re-exports) may import anything; only the
//! network and the handlers may import the root's names.
//!
//! Production code only: a file's `#[cfg(test)]` module is left out, since tests may reach
//! anywhere. Paths are read from the text (`crate::x`, and `crate::{x, y::z}` groups) after
//! comments and string literals are blanked, so a path named in a doc comment does not count.

use std::fs;
use std::path::Path;

/// The layers, top (0) to bottom.
const NET: usize = 0;
const HANDLERS: usize = 1;
const SERVICES: usize = 2;
const LEAF: usize = 3;
const CONFIG: usize = 4;
const NAMES: [&str; 5] = ["net", "handlers", "services", "leaf", "config"];

const LEAVES: [&str; 6] = [
    "clock",
    "error_code",
    "log_limit",
    "memory",
    "metrics",
    "response_chunks",
];

/// Where an import lands: a layer, or the crate root's own names (`None`).
fn target_layer(first_segment: &str) -> Option<usize> {
    match first_segment {
        "net" => Some(NET),
        "handlers" => Some(HANDLERS),
        "services" => Some(SERVICES),
        "config" => Some(CONFIG),
        s if LEAVES.contains(&s) => Some(LEAF),
        _ => None,
    }
}

/// The layer of a file, by its path under `src/` (`None`: the crate root, `lib.rs`).
fn file_layer(rel: &str) -> Option<usize> {
    if rel == "lib.rs" {
        return None;
    }
    let first = rel.split('/').next().unwrap_or(rel);
    let first = first.strip_suffix(".rs").unwrap_or(first);
    match target_layer(first) {
        Some(layer) => Some(layer),
        None => panic!("src/{rel} is in no layer: add it to tests/layers.rs"),
    }
}

/// The source with comments, string and char literals blanked, and without its
/// `#[cfg(test)]` module.
fn code_only(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |e| e + 2);
        } else if rest.starts_with("r#\"") || rest.starts_with("r\"") {
            let hashes = rest[1..].chars().take_while(|&c| c == '#').count();
            let close = format!("\"{}", "#".repeat(hashes));
            let body = 2 + hashes;
            i += rest[body..]
                .find(&close)
                .map_or(rest.len(), |e| body + e + close.len());
            out.push_str("\"\"");
        } else if bytes[i] == b'"' {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            i = j + 1;
            out.push_str("\"\"");
        } else if rest.starts_with("'\\''") || rest.starts_with("'\"'") {
            i += 4.min(rest.len());
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The first segment of every `crate::` path in `code`, with groups expanded.
fn crate_imports(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let boundary = rest[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        rest = &rest[at + "crate::".len()..];
        if !boundary {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut element = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                if depth == 0 || (depth == 1 && c == ',') {
                    found.push(first_segment(&element));
                    element.clear();
                    if depth == 0 {
                        break;
                    }
                } else {
                    element.push(c);
                }
            }
        } else {
            found.push(first_segment(rest));
        }
    }
    found.retain(|s| !s.is_empty());
    found
}

fn first_segment(path: &str) -> String {
    path.trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The upward imports of one file (`rel`: its path under `src/`).
fn violations(rel: &str, text: &str) -> Vec<String> {
    let Some(from) = file_layer(rel) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for segment in crate_imports(&code_only(text)) {
        let bad = match target_layer(&segment) {
            Some(to) => to < from,
            None => from > HANDLERS,
        };
        if bad {
            let to = target_layer(&segment).map_or("the crate root", |l| NAMES[l]);
            out.push(format!(
                "src/{rel} ({}) imports crate::{segment} ({to})",
                NAMES[from]
            ));
        }
    }
    out
}

fn sources(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            out.push((rel, fs::read_to_string(&path).unwrap()));
        }
    }
}

// Goal: no production import in the broker points up a layer.
#[test]
fn broker_layers_import_downward() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &root, &mut files);
    assert!(files.len() > 50, "read {} files", files.len());
    let bad: Vec<String> = files
        .iter()
        .flat_map(|(rel, text)| violations(rel, text))
        .collect();
    assert!(bad.is_empty(), "upward imports:\n{}", bad.join("\n"));
}

// Goal: the check sees imports in every form the sources use, and only in code.
#[test]
fn check_finds_upward_imports() {
    let src = "//! See [`crate::net::server`].\n\
               use crate::config::limits;\n\
               use crate::{error_code, handlers::{self, Reply}};\n\
               fn f() { let s = \"crate::net\"; crate::Broker::x(); }\n\
               #[cfg(test)]\nmod tests { use crate::net::server; }\n";
    let found = violations("services/x.rs", src);
    assert_eq!(
        found,
        [
            "src/services/x.rs (services) imports crate::handlers (handlers)",
            "src/services/x.rs (services) imports crate::Broker (the crate root)",
        ]
    );
    assert!(violations("net/x.rs", src).is_empty());
    assert_eq!(violations("config/x.rs", src).len(), 3);
    assert!(violations("lib.rs", src).is_empty());
}
