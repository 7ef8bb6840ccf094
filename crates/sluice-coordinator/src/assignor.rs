//! Server-side partition assignors of KIP-848 consumer groups: `uniform` (the default) and
//! `range`. An assignor turns the group's members (with their subscribed topics) and the
//! subscribed topics' metadata into the group's *target assignment*; reconciliation
//! ([`crate::consumer_group`]) then moves each member towards it.
//!
//! What every assignor guarantees (checked by the tests below):
//! - each partition of a subscribed topic goes to exactly one member, and only to a member
//!   subscribed to its topic; a topic nobody subscribes to is not assigned;
//! - the result depends only on its inputs (no hashing order, no randomness), so the same
//!   group always computes the same target.
//!
//! `uniform` also guarantees balance and stickiness: with identical subscriptions the
//! member counts differ by at most one; with different subscriptions no single partition
//! move would narrow the gap between two members that could both own it. A partition stays
//! with its previous target owner unless balance requires a move.
//!
//! `range` lays out each topic like the client-side `RangeAssignor`: the topic's subscribers
//! sorted by member id, each gets a contiguous range, the first `partitions % members` get
//! one extra.

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A topic id (Kafka's 16-byte UUID).
pub type TopicUuid = [u8; 16];

/// A member's partitions: topic id → partition indexes.
pub type Assignment = BTreeMap<TopicUuid, BTreeSet<i32>>;

/// Metadata of one subscribed topic, as the assignor sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicInfo {
    pub id: TopicUuid,
    pub partitions: i32,
}

/// The server-side assignors Sluice offers, by Kafka's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Assignor {
    Uniform,
    Range,
}

impl Assignor {
    /// The group's assignor when no member asks for one (Kafka's first entry of
    /// `group.consumer.assignors`).
    pub const DEFAULT: Assignor = Assignor::Uniform;

    pub fn from_name(name: &str) -> Option<Assignor> {
        match name {
            "uniform" => Some(Assignor::Uniform),
            "range" => Some(Assignor::Range),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Assignor::Uniform => "uniform",
            Assignor::Range => "range",
        }
    }

    /// The target assignment. `members`: member id → subscribed topic names (topics not in
    /// `topics` are ignored). `topics`: subscribed topics by name. `previous`: the last
    /// target, for stickiness. Every member gets an entry (possibly empty).
    pub fn assign(
        self,
        members: &BTreeMap<String, BTreeSet<String>>,
        topics: &BTreeMap<String, TopicInfo>,
        previous: &BTreeMap<String, Assignment>,
    ) -> BTreeMap<String, Assignment> {
        match self {
            Assignor::Uniform => uniform(members, topics, previous),
            Assignor::Range => range(members, topics),
        }
    }
}

fn range(
    members: &BTreeMap<String, BTreeSet<String>>,
    topics: &BTreeMap<String, TopicInfo>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    for (name, info) in topics {
        // BTreeMap iteration: subscribers in member-id order.
        let subscribers: Vec<&String> = members
            .iter()
            .filter(|(_, subs)| subs.contains(name))
            .map(|(m, _)| m)
            .collect();
        if subscribers.is_empty() || info.partitions <= 0 {
            continue;
        }
        let n = subscribers.len() as i32;
        let per = info.partitions / n;
        let extra = info.partitions % n;
        for (i, m) in subscribers.into_iter().enumerate() {
            let i = i as i32;
            let start = i * per + i.min(extra);
            let len = per + i32::from(i < extra);
            if len > 0 {
                out.get_mut(m)
                    .expect("every member has an entry")
                    .entry(info.id)
                    .or_default()
                    .extend(start..start + len);
            }
        }
    }
    out
}

fn uniform(
    members: &BTreeMap<String, BTreeSet<String>>,
    topics: &BTreeMap<String, TopicInfo>,
    previous: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    let by_id: HashMap<TopicUuid, (&String, i32)> = topics
        .iter()
        .map(|(n, t)| (t.id, (n, t.partitions)))
        .collect();
    let mut out: BTreeMap<String, Assignment> = members
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    let mut owned: BTreeSet<(TopicUuid, i32)> = BTreeSet::new();

    // 1. Stickiness: keep every previous ownership that is still valid.
    for (m, prev) in previous {
        let Some(subs) = members.get(m) else { continue };
        for (tid, parts) in prev {
            let Some(&(name, count)) = by_id.get(tid) else {
                continue;
            };
            if !subs.contains(name) {
                continue;
            }
            for &p in parts {
                if (0..count).contains(&p) && owned.insert((*tid, p)) {
                    out.get_mut(m)
                        .expect("member entry")
                        .entry(*tid)
                        .or_default()
                        .insert(p);
                }
            }
        }
    }

    let count_of = |out: &BTreeMap<String, Assignment>, m: &str| -> usize {
        out.get(m)
            .map_or(0, |a| a.values().map(BTreeSet::len).sum())
    };
    // Members ordered by (partition count, member id): the least loaded first.
    let mut load: BTreeSet<(usize, String)> = members
        .keys()
        .map(|m| (count_of(&out, m), m.clone()))
        .collect();

    // 2. Every unowned partition goes to the least loaded subscriber of its topic.
    for (name, info) in topics {
        for p in 0..info.partitions.max(0) {
            if owned.contains(&(info.id, p)) {
                continue;
            }
            let Some((c, m)) = load
                .iter()
                .find(|(_, m)| members[m].contains(name))
                .cloned()
            else {
                break; // nobody subscribes to this topic
            };
            load.remove(&(c, m.clone()));
            load.insert((c + 1, m.clone()));
            out.get_mut(&m)
                .expect("member entry")
                .entry(info.id)
                .or_default()
                .insert(p);
            owned.insert((info.id, p));
        }
    }

    // 3. Balance: move one partition at a time from a more loaded member to a less loaded
    // subscriber of its topic while that narrows a gap of two or more. Every move lowers
    // the sum of squared counts, so this ends; the bound is only a backstop.
    let total: usize = owned.len();
    let mut moves_left = total.saturating_mul(2).saturating_add(members.len());
    'balance: while moves_left > 0 {
        let order: Vec<(usize, String)> = load.iter().cloned().collect();
        for (ca, a) in order.iter().rev() {
            for (cb, b) in order.iter() {
                if cb + 1 >= *ca {
                    break; // ascending: no lighter member left for `a`
                }
                let subs_b = &members[b];
                // The highest partition of `a` whose topic `b` subscribes to.
                let candidate = out[a].iter().rev().find_map(|(tid, parts)| {
                    let name = by_id.get(tid)?.0;
                    if subs_b.contains(name) {
                        parts.iter().next_back().map(|p| (*tid, *p))
                    } else {
                        None
                    }
                });
                if let Some((tid, p)) = candidate {
                    let from = out.get_mut(a).expect("member entry");
                    let parts = from.get_mut(&tid).expect("candidate topic");
                    parts.remove(&p);
                    if parts.is_empty() {
                        from.remove(&tid);
                    }
                    out.get_mut(b)
                        .expect("member entry")
                        .entry(tid)
                        .or_default()
                        .insert(p);
                    load.remove(&(*ca, a.clone()));
                    load.insert((ca - 1, a.clone()));
                    load.remove(&(*cb, b.clone()));
                    load.insert((cb + 1, b.clone()));
                    moves_left -= 1;
                    continue 'balance;
                }
            }
        }
        break;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tid(n: u8) -> TopicUuid {
        [n; 16]
    }

    fn topics(spec: &[(&str, u8, i32)]) -> BTreeMap<String, TopicInfo> {
        spec.iter()
            .map(|(n, id, p)| {
                (
                    n.to_string(),
                    TopicInfo {
                        id: tid(*id),
                        partitions: *p,
                    },
                )
            })
            .collect()
    }

    fn members(spec: &[(&str, &[&str])]) -> BTreeMap<String, BTreeSet<String>> {
        spec.iter()
            .map(|(m, ts)| (m.to_string(), ts.iter().map(|t| t.to_string()).collect()))
            .collect()
    }

    fn count(a: &Assignment) -> usize {
        a.values().map(BTreeSet::len).sum()
    }

    /// Every partition of a subscribed topic is assigned exactly once, to a subscriber.
    fn check_complete(
        ms: &BTreeMap<String, BTreeSet<String>>,
        ts: &BTreeMap<String, TopicInfo>,
        out: &BTreeMap<String, Assignment>,
    ) {
        let mut seen = BTreeSet::new();
        for (m, a) in out {
            for (t, parts) in a {
                let name = ts.iter().find(|(_, i)| i.id == *t).unwrap().0;
                assert!(ms[m].contains(name), "{m} got unsubscribed {name}");
                for p in parts {
                    assert!(seen.insert((*t, *p)), "partition {p} of {name} twice");
                }
            }
        }
        for (name, info) in ts {
            if ms.values().any(|s| s.contains(name)) {
                for p in 0..info.partitions {
                    assert!(seen.contains(&(info.id, p)), "{name}-{p} unassigned");
                }
            }
        }
    }

    // Goal: the range layout matches the client RangeAssignor, per topic, by member id.
    #[test]
    fn range_layout() {
        let ts = topics(&[("a", 1, 7), ("b", 2, 2)]);
        let ms = members(&[("m2", &["a", "b"]), ("m1", &["a", "b"]), ("m3", &["a"])]);
        let out = Assignor::Range.assign(&ms, &ts, &BTreeMap::new());
        check_complete(&ms, &ts, &out);
        let parts = |m: &str, t: u8| -> Vec<i32> {
            out[m]
                .get(&tid(t))
                .map(|s| s.iter().copied().collect())
                .unwrap_or_default()
        };
        assert_eq!(parts("m1", 1), vec![0, 1, 2]);
        assert_eq!(parts("m2", 1), vec![3, 4]);
        assert_eq!(parts("m3", 1), vec![5, 6]);
        assert_eq!(parts("m1", 2), vec![0]);
        assert_eq!(parts("m2", 2), vec![1]);
        assert!(parts("m3", 2).is_empty());
    }

    // Goal: uniform balances identical subscriptions to within one partition.
    #[test]
    fn uniform_balances_homogeneous() {
        let ts = topics(&[("a", 1, 7), ("b", 2, 5), ("c", 3, 1)]);
        for n in 1..=15 {
            let names: Vec<String> = (0..n).map(|i| format!("m{i:02}")).collect();
            let ms: BTreeMap<String, BTreeSet<String>> = names
                .iter()
                .map(|m| {
                    (
                        m.clone(),
                        ["a", "b", "c"].iter().map(|s| s.to_string()).collect(),
                    )
                })
                .collect();
            let out = Assignor::Uniform.assign(&ms, &ts, &BTreeMap::new());
            check_complete(&ms, &ts, &out);
            let counts: Vec<usize> = out.values().map(count).collect();
            let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
            assert!(hi - lo <= 1, "n={n}: {counts:?}");
        }
    }

    // Goal: uniform is sticky: adding a member moves only what balance needs, and removing
    // one moves only the departed member's partitions.
    #[test]
    fn uniform_is_sticky() {
        let ts = topics(&[("a", 1, 12)]);
        let two = members(&[("m1", &["a"]), ("m2", &["a"])]);
        let first = Assignor::Uniform.assign(&two, &ts, &BTreeMap::new());
        let three = members(&[("m1", &["a"]), ("m2", &["a"]), ("m3", &["a"])]);
        let second = Assignor::Uniform.assign(&three, &ts, &first);
        check_complete(&three, &ts, &second);
        let moved = |old: &BTreeMap<String, Assignment>, new: &BTreeMap<String, Assignment>| {
            let mut n = 0;
            for (m, a) in new {
                for (t, ps) in a {
                    for p in ps {
                        let before = old
                            .get(m)
                            .and_then(|x| x.get(t))
                            .is_some_and(|s| s.contains(p));
                        if !before {
                            n += 1;
                        }
                    }
                }
            }
            n
        };
        assert_eq!(moved(&first, &second), 4, "only m3's four partitions move");
        assert!(second.values().all(|a| count(a) == 4));
        let back = members(&[("m1", &["a"]), ("m3", &["a"])]);
        let third = Assignor::Uniform.assign(&back, &ts, &second);
        check_complete(&back, &ts, &third);
        assert_eq!(moved(&second, &third), 4, "only m2's four partitions move");
    }

    // Goal: with different subscriptions uniform still assigns everything to subscribers
    // and balances what can be balanced.
    #[test]
    fn uniform_heterogeneous() {
        let ts = topics(&[("a", 1, 6), ("b", 2, 6)]);
        let ms = members(&[("m1", &["a"]), ("m2", &["a", "b"]), ("m3", &["b"])]);
        let out = Assignor::Uniform.assign(&ms, &ts, &BTreeMap::new());
        check_complete(&ms, &ts, &out);
        let counts: Vec<usize> = out.values().map(count).collect();
        assert_eq!(counts, vec![4, 4, 4]);
        // A topic nobody subscribes to is not assigned; a missing topic is ignored.
        let ms = members(&[("m1", &["a", "zzz"])]);
        let out = Assignor::Uniform.assign(&ms, &ts, &BTreeMap::new());
        assert_eq!(count(&out["m1"]), 6);
        assert!(!out["m1"].contains_key(&tid(2)));
    }

    // Goal: previous ownerships of vanished partitions, topics or subscriptions are dropped.
    #[test]
    fn uniform_ignores_stale_previous() {
        let ts = topics(&[("a", 1, 2)]);
        let ms = members(&[("m1", &["a"])]);
        let mut prev = BTreeMap::new();
        let mut a = Assignment::new();
        a.insert(tid(1), [0, 1, 5].into_iter().collect());
        a.insert(tid(9), [0].into_iter().collect());
        prev.insert("m1".to_string(), a.clone());
        prev.insert("gone".to_string(), a);
        let out = Assignor::Uniform.assign(&ms, &ts, &prev);
        check_complete(&ms, &ts, &out);
        assert_eq!(out.len(), 1);
        assert_eq!(count(&out["m1"]), 2);
    }
}
