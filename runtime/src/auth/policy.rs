//! `[[callers]]`: what an authenticated caller may list, call and reach.
//!
//! Rules, in one place:
//! - Entries apply in order; the first whose every criterion matches wins.
//!   A criterion is a list (`subjects`, `client_ids`, `scopes`); an empty
//!   or absent list matches anyone, a non-empty one matches when the
//!   token's value is in it (for `scopes`: when the token carries at least
//!   one of them). An entry with no criteria matches every caller.
//! - With no entries, every authenticated caller may use every tool (the
//!   token's scopes are still checked). With entries, a caller that matches
//!   none may use nothing: deny by default.
//! - A requester with no identity (stdio, the static token, an open
//!   loopback bind) is not subject to `[[callers]]`: the config refuses
//!   `[[callers]]` without `[http.oauth]`.
//! - `tools` names tools as they are listed, `*` matching any run of
//!   characters. A tool a caller may not use is neither listed to it nor
//!   run for it, in every protocol revision.
//! - `roots` and `network` only narrow: a call reaches a directory only if
//!   both the tool's grant and the caller's entry cover it (and in the
//!   narrower mode of the two), a host only if both list it.

use super::Caller;
use crate::config::CallerRule;
use crate::grants::files::Root;
use crate::grants::network::HostPattern;

/// What one requester may use.
#[derive(Debug, Clone, Copy)]
pub enum Access<'a> {
    /// Everything the tools are granted: no identity to check, or no
    /// `[[callers]]` entries.
    Everything,
    /// What the entry that matched allows.
    Rule(&'a CallerRule),
    /// Nothing: entries exist and none matched.
    Nothing,
}

/// The access `caller` (none: a requester without identity) has under
/// `rules`.
pub fn access<'a>(rules: &'a [CallerRule], caller: Option<&Caller>) -> Access<'a> {
    let Some(caller) = caller else {
        return Access::Everything;
    };
    if rules.is_empty() {
        return Access::Everything;
    }
    rules
        .iter()
        .find(|rule| matches(rule, caller))
        .map_or(Access::Nothing, Access::Rule)
}

fn matches(rule: &CallerRule, caller: &Caller) -> bool {
    let within = |list: &[String], value: Option<&String>| {
        list.is_empty() || value.is_some_and(|v| list.contains(v))
    };
    within(&rule.subjects, caller.subject.as_ref())
        && within(&rule.client_ids, caller.client_id.as_ref())
        && (rule.scopes.is_empty() || rule.scopes.iter().any(|s| caller.scopes.contains(s)))
}

impl Access<'_> {
    /// Whether the requester may list and call `tool`.
    pub fn may_use(&self, tool: &str) -> bool {
        match self {
            Access::Everything => true,
            Access::Rule(rule) => rule.tools.iter().any(|pattern| glob(pattern, tool)),
            Access::Nothing => false,
        }
    }

    /// The name of the entry that applies, for the journal and messages:
    /// `None` when no entry is involved.
    pub fn policy_name(&self) -> Option<&str> {
        match self {
            Access::Everything => None,
            Access::Rule(rule) => Some(&rule.name),
            Access::Nothing => Some("(no matching [[callers]] entry)"),
        }
    }

    /// The directories the requester's calls may reach at most, if the
    /// entry narrows them.
    pub fn roots(&self) -> Option<&[Root]> {
        match self {
            Access::Rule(rule) => rule.roots.as_deref(),
            Access::Everything | Access::Nothing => None,
        }
    }

    /// The hosts the requester's calls may reach at most, if the entry
    /// narrows them.
    pub fn hosts(&self) -> Option<&std::sync::Arc<[HostPattern]>> {
        match self {
            Access::Rule(rule) => rule.network.as_ref(),
            Access::Everything | Access::Nothing => None,
        }
    }
}

/// Whether `name` matches `pattern`, where `*` matches any run of
/// characters (none included) and everything else only itself. Linear in
/// both lengths (the classic backtracking-to-the-last-star scan).
pub fn glob(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ni));
            pi += 1;
        } else if pi < p.len() && p[pi] == n[ni] {
            pi += 1;
            ni += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&b| b == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_documented() {
        assert!(glob("*", "anything"));
        assert!(glob("*", ""));
        assert!(glob("read_*", "read_text_file"));
        assert!(!glob("read_*", "write_file"));
        assert!(glob("*_file", "write_file"));
        assert!(glob("a*b*c", "aXXbYYc"));
        assert!(!glob("a*b*c", "aXXbYY"));
        assert!(glob("list_directory", "list_directory"));
        assert!(!glob("list_directory", "list_directory2"));
        assert!(!glob("", "x"));
        // Linear: a pathological pattern finishes at once.
        let long = "a".repeat(10_000);
        assert!(!glob(&format!("{}b", "*a".repeat(100)), &long));
    }

    fn rule(
        name: &str,
        subjects: &[&str],
        clients: &[&str],
        scopes: &[&str],
        tools: &[&str],
    ) -> CallerRule {
        let owned = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect();
        CallerRule {
            name: name.into(),
            subjects: owned(subjects),
            client_ids: owned(clients),
            scopes: owned(scopes),
            tools: owned(tools),
            roots: None,
            network: None,
        }
    }

    fn caller(sub: &str, client: &str, scopes: &[&str]) -> Caller {
        Caller {
            issuer: "https://as".into(),
            subject: Some(sub.into()),
            client_id: Some(client.into()),
            scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn the_first_matching_entry_wins_and_no_match_is_nothing() {
        let rules = [
            rule(
                "reader",
                &[],
                &["reader-agent"],
                &[],
                &["read_*", "list_directory"],
            ),
            rule("admins", &[], &[], &["tools.admin"], &["*"]),
        ];
        let reader = access(
            &rules,
            Some(&caller("s1", "reader-agent", &["tools.admin"])),
        );
        assert_eq!(reader.policy_name(), Some("reader"));
        assert!(reader.may_use("read_text_file"));
        assert!(!reader.may_use("write_file"));
        let admin = access(&rules, Some(&caller("s2", "ops", &["x", "tools.admin"])));
        assert!(admin.may_use("write_file"));
        let stranger = access(&rules, Some(&caller("s3", "other", &["x"])));
        assert!(matches!(stranger, Access::Nothing));
        assert!(!stranger.may_use("read_text_file"));
        assert!(matches!(access(&rules, None), Access::Everything));
        assert!(matches!(
            access(&[], Some(&caller("a", "b", &[]))),
            Access::Everything
        ));
    }

    #[test]
    fn every_criterion_of_an_entry_must_match() {
        let rules = [rule("both", &["alice"], &["app"], &[], &["*"])];
        assert!(matches!(
            access(&rules, Some(&caller("alice", "app", &[]))),
            Access::Rule(_)
        ));
        assert!(matches!(
            access(&rules, Some(&caller("alice", "other", &[]))),
            Access::Nothing
        ));
        let none = Caller {
            issuer: "https://as".into(),
            subject: None,
            client_id: None,
            scopes: Vec::new(),
        };
        assert!(matches!(access(&rules, Some(&none)), Access::Nothing));
    }
}
