//! KIP-848 `SubscribedTopicRegex`: a member subscribes to every topic whose whole name
//! matches a regular expression, resolved here on the broker (Kafka resolves it with RE2/J,
//! `Pattern.matcher(topic).matches()`).
//!
//! Syntax: the `regex` crate's, which descends from RE2 like RE2/J and shares its guarantees
//! (no backreferences or lookaround, matching in time linear in the name). Where they differ,
//! and why it does not change which topic names match (topic names are ASCII letters,
//! digits, `.`, `_` and `-`):
//! - `\d`, `\w`, `\s` and `\b` are Unicode-aware here and ASCII-only in RE2/J: the same on
//!   ASCII names;
//! - accepted here, refused by RE2/J: the `x` (verbose) and `R` (CRLF) flags, character
//!   class set operations (`[a-z&&[^x]]`, `--`, `~~`) and nested classes; a pattern using
//!   them is valid on Sluice and INVALID_REGULAR_EXPRESSION on Kafka;
//! - refused here, accepted by RE2/J: `\Q...\E` quoting and `\C`;
//! - counted repetition is bounded by compiled size here (`consumer_regex_compiled_bytes_max`)
//!   and by 1000 in RE2/J.
//!
//! Guarantees: a pattern matches a name only if it matches all of it (the pattern is parsed
//! alone and anchored as a syntax tree, so no text in it can escape the anchors); compiling
//! never takes more than the configured memory; matching never panics.

use regex::{Regex, RegexBuilder};
use regex_syntax::hir::{Hir, Look};

/// A compiled `SubscribedTopicRegex`.
#[derive(Debug, Clone)]
pub struct TopicRegex {
    anchored: Regex,
}

impl TopicRegex {
    /// Compiles `pattern` for whole-name matching, within `compiled_bytes_max` of memory for
    /// the program and as much for the lazy DFA's cache. The error is the reason the pattern
    /// is refused, for the client's error message.
    pub fn compile(pattern: &str, compiled_bytes_max: usize) -> Result<Self, String> {
        let hir = regex_syntax::ParserBuilder::new()
            .build()
            .parse(pattern)
            .map_err(|e| e.to_string())?;
        // Anchored as a tree, not as text: `\A(?:p)\z` would let a pattern that ends inside
        // a verbose-mode comment swallow the closing anchor.
        let whole = Hir::concat(vec![Hir::look(Look::Start), hir, Hir::look(Look::End)]);
        let anchored = RegexBuilder::new(&whole.to_string())
            .size_limit(compiled_bytes_max)
            .dfa_size_limit(compiled_bytes_max)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self { anchored })
    }

    /// True when the whole topic name matches.
    pub fn matches(&self, topic: &str) -> bool {
        self.anchored.is_match(topic)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 256 * 1024;

    fn re(p: &str) -> TopicRegex {
        TopicRegex::compile(p, MAX).expect(p)
    }

    // Goal: RE2/J's `matches()`: the whole name, never a part of it.
    #[test]
    fn whole_name_only() {
        assert!(re("orders-.*").matches("orders-eu"));
        assert!(!re("orders").matches("orders-eu"));
        assert!(!re("rders-eu").matches("orders-eu"));
        assert!(
            re("a|ab").matches("ab"),
            "an alternative that covers the whole name"
        );
        assert!(re("(?i)ORDERS").matches("orders"));
        assert!(re(r"t\d+").matches("t42"));
    }

    // Goal: no pattern can escape the anchors, however it ends.
    #[test]
    fn anchors_cannot_be_escaped() {
        // Verbose mode: a trailing comment must not swallow the closing anchor.
        let v = re("(?x) orders # all of them");
        assert!(v.matches("orders"));
        assert!(!v.matches("orders-eu"));
        assert!(TopicRegex::compile("a)|(b", MAX).is_err());
        assert!(TopicRegex::compile(r"a\", MAX).is_err());
    }

    // Goal: invalid and oversized patterns are refused, never a panic or unbounded memory.
    #[test]
    fn refusals() {
        for bad in ["(", "[a-", "a{2,1}", r"\Qa\E", r"(?<!a)b", r"(a)\1"] {
            assert!(TopicRegex::compile(bad, MAX).is_err(), "{bad}");
        }
        assert!(TopicRegex::compile(r"\w{1000}", MAX).is_err(), "too large");
        assert!(TopicRegex::compile(r"[a-z]{100}", MAX).is_ok());
    }
}
