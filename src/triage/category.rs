//! A failure's category, from the ordered rule table (`rules.rs`) over its
//! texts: the state's comment, then its command's stderr and stdout. The first
//! rule that matches wins; a `cmd.*` state running a silent `curl` or `wget` is
//! judged by its exit code; a command that ran and exited non-zero is `command`;
//! text nothing matches is `other`. For a cause outside the state tree the host,
//! URL and package it names are kept as evidence (`evidence.rs`).

use std::sync::LazyLock;

use regex::Regex;

use super::evidence;
use super::patterns::Patterns;
use super::rules::{Cause, EXIT_RULES, Names, RULES, Scope};
use crate::plain::within;
pub use crate::record::{Category, Classification};

/// What triage knows of a failed state, to classify it.
#[derive(Debug, Clone, Copy, Default)]
pub struct FailureText<'a> {
    /// `module.function`, e.g. `cmd.run`.
    pub function: &'a str,
    pub comment: &'a str,
    pub stderr: Option<&'a str>,
    pub stdout: Option<&'a str>,
    /// `changes.retcode`, when the state ran a command.
    pub exit_code: Option<i64>,
}

impl<'a> FailureText<'a> {
    /// A text with nothing but a comment (a render message, a test).
    pub fn comment(comment: &'a str) -> Self {
        Self {
            comment,
            ..Self::default()
        }
    }

    /// The texts in the order they are read; the first is the comment.
    fn texts(&self) -> Vec<&'a str> {
        let mut texts = vec![self.comment];
        texts.extend(self.stderr);
        texts.extend(self.stdout);
        texts
    }
}

/// Every rule at once: one pass over each text says which rules match it; a
/// rule's own regex (for its captures) is compiled when it first matches.
static RULE_PATTERNS: LazyLock<Patterns> = LazyLock::new(|| {
    Patterns::new(RULES.iter().map(|r| r.pattern).collect()).expect("rule set compiles (tested)")
});

/// `Command "<curl|wget> ..." run` without a pipe.
static SILENT_TOOL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"^Command "(?:sudo )?(curl|wget)\s[^|]*" run$"#).expect("tool pattern")
});

/// Salt's comment on a command that ran (`cmd.run`, `cmd.script`, `cmd.wait`).
static COMMAND_RAN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"^Command "[\s\S]*" run$"#).expect("command pattern"));

/// The matched text kept as evidence, at most.
pub const EVIDENCE_MAX: usize = 240;

/// Classifies a failure. See the module doc for the order.
pub fn classify(failure: &FailureText<'_>) -> Classification {
    let texts = failure.texts();
    let matched = RULE_PATTERNS.matches(&texts);
    for (i, rule) in RULES.iter().enumerate() {
        let Some(at) = (0..texts.len())
            .find(|&t| matched[t].matched(i) && (rule.scope == Scope::Any || t == 0))
        else {
            continue;
        };
        let Some(caps) = RULE_PATTERNS.regex(i).captures(texts[at]) else {
            continue;
        };
        let named = (1..caps.len())
            .find_map(|g| caps.get(g))
            .map(|m| evidence::trim(m.as_str()));
        let mut found = found(
            rule.category,
            rule.id,
            caps.get(0).map_or("", |m| m.as_str()),
        );
        match (rule.names, named) {
            (Names::Host, Some(host)) => found.host = Some(host.to_owned()),
            (Names::Url, Some(url)) => found.url = Some(url.to_owned()),
            (Names::Package, Some(package)) => found.package = evidence::package(package),
            (Names::PackageIs(package), _) => found.package = Some(package.to_owned()),
            _ => {}
        }
        if rule.cause == Cause::Remote {
            add_remote_evidence(&mut found, &texts);
        }
        return found;
    }
    let code = failure.exit_code.filter(|c| *c != 0);
    if let Some(code) = code.filter(|_| failure.function.starts_with("cmd.")) {
        if let Some(tool) = SILENT_TOOL.captures(failure.comment).and_then(|c| c.get(1)) {
            let exit = EXIT_RULES
                .iter()
                .find(|r| r.tool == tool.as_str() && r.codes.contains(&code));
            if let Some(rule) = exit {
                let mut found = found(rule.category, rule.id, &format!("exit code {code}"));
                add_remote_evidence(&mut found, &texts);
                return found;
            }
        }
    }
    if let Some(code) = code.filter(|_| COMMAND_RAN.is_match(failure.comment)) {
        return found(
            Category::Command,
            "command_exit",
            &format!("exit code {code}"),
        );
    }
    Classification {
        category: Category::Other,
        rule: "none".into(),
        evidence: None,
        host: None,
        url: None,
        package: None,
    }
}

fn found(category: Category, rule: &'static str, evidence: &str) -> Classification {
    Classification {
        category,
        rule: rule.into(),
        evidence: Some(within(evidence, EVIDENCE_MAX).to_owned()),
        host: None,
        url: None,
        package: None,
    }
}

/// The URL, host and package of a cause at a remote end, where the rule did not
/// capture them.
fn add_remote_evidence(found: &mut Classification, texts: &[&str]) {
    if found.url.is_none() {
        found.url = evidence::url(texts);
    }
    if found.host.is_none() {
        // The host of a URL the tool says it failed on is the name it meant (Go
        // then says which address it dialled); a host the tool names comes
        // before the host of any other URL (a command line's may not be it).
        let named = evidence::named_url(texts).and_then(evidence::host_of);
        found.host = named
            .or_else(|| evidence::host(texts))
            .or_else(|| found.url.as_deref().and_then(evidence::host_of));
    }
    if found.package.is_none() && found.category == Category::DependencyPackage {
        found.package = found.url.as_deref().and_then(evidence::package_of_url);
    }
}

/// A text cut to the configured size, with its length before.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Capped {
    pub text: String,
    pub original_len: usize,
}

impl Capped {
    pub fn new(text: &str, max: usize) -> Self {
        Self {
            text: within(text, max).to_owned(),
            original_len: text.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Classification {
        classify(&FailureText::comment(text))
    }

    #[test]
    fn every_rule_compiles_and_ids_are_unique() {
        assert_eq!(RULE_PATTERNS.len(), RULES.len());
        for i in 0..RULES.len() {
            RULE_PATTERNS.regex(i);
        }
        let mut ids: Vec<_> = RULES.iter().map(|r| r.id).collect();
        ids.extend(EXIT_RULES.iter().map(|r| r.id));
        ids.extend(["command_exit", "none"]);
        let all = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), all);
    }

    #[test]
    fn the_corpus_matches_the_rules_it_matched_with_unicode_classes() {
        let texts = crate::triage::patterns::corpus_texts();
        RULE_PATTERNS.assert_reads_as_written(&texts);
    }

    #[test]
    fn a_command_needs_a_non_zero_exit_code() {
        let comment = "Command \"echo about to fail; echo err >&2; exit 1\" run";
        let failure = |stderr, exit_code| FailureText {
            function: "cmd.run",
            comment,
            stderr,
            stdout: None,
            exit_code,
        };
        let c = classify(&failure(Some("err"), Some(1)));
        assert_eq!(c.category, Category::Command);
        assert_eq!(c.evidence.as_deref(), Some("exit code 1"));
        assert_eq!(classify(&failure(None, Some(0))).category, Category::Other);
        // stderr is evidence too: a command failing on permissions is `permission`.
        let denied = "mkdir: cannot create directory: Permission denied";
        assert_eq!(
            classify(&failure(Some(denied), Some(1))).category,
            Category::Permission
        );
    }

    #[test]
    fn salt_s_own_phrases_are_read_in_the_comment_only() {
        let echoed = FailureText {
            function: "cmd.run",
            comment: "Command \"./check.sh\" run",
            stderr: Some("The named service nginx is not available"),
            stdout: None,
            exit_code: Some(1),
        };
        assert_eq!(classify(&echoed).rule, "command_exit");
        assert_eq!(
            one("The named service nginx is not available").rule,
            "service_not_installed"
        );
    }

    #[test]
    fn a_silent_tool_is_judged_by_its_exit_code_unless_piped() {
        let curl = |comment, exit_code| {
            classify(&FailureText {
                function: "cmd.run",
                comment,
                stderr: None,
                stdout: None,
                exit_code: Some(exit_code),
            })
        };
        let plain = "Command \"curl -sf https://join.example.net/v1/token -o /etc/t\" run";
        let c = curl(plain, 6);
        assert_eq!(
            (c.category, c.rule.as_ref(), c.host.as_deref()),
            (
                Category::NetworkDns,
                "curl_exit_resolve",
                Some("join.example.net")
            )
        );
        assert_eq!(curl(plain, 7).category, Category::NetworkConnect);
        assert_eq!(
            curl(plain, 22).category,
            Category::Command,
            "HTTP errors alike"
        );
        let piped = "Command \"curl -s https://k.example.net/gpg | gpg --dearmor\" run";
        assert_eq!(curl(piped, 6).rule, "command_exit", "the status is gpg's");
        let wget = "Command \"wget -q https://dl.example.net/a.deb\" run";
        assert_eq!(curl(wget, 4).rule, "wget_exit_network");
        assert_eq!(curl(wget, 8).category, Category::Command);
    }

    #[test]
    fn the_host_is_the_one_the_tool_meant() {
        let failure = |comment, stderr| {
            classify(&FailureText {
                function: "cmd.run",
                comment,
                stderr: Some(stderr),
                stdout: None,
                exit_code: Some(1),
            })
        };
        // Go names the URL it failed on, then the address it dialled.
        let go = failure(
            "Command \"docker pull registry.example.com/app:1\" run",
            "Error response from daemon: Get \"https://registry.example.com/v2/\": dial tcp 10.0.0.4:443: connect: no route to host",
        );
        assert_eq!(go.host.as_deref(), Some("registry.example.com"));
        // A script fetched from one host fails to reach another.
        let script = failure(
            "Command \"curl -fsSL https://get.example.com/install.sh | bash\" run",
            "curl: (7) Failed to connect to repo.example.net port 443 after 2 ms: Couldn't connect to server",
        );
        assert_eq!(
            (script.host.as_deref(), script.url.as_deref()),
            (
                Some("repo.example.net"),
                Some("https://get.example.com/install.sh")
            )
        );
    }

    #[test]
    fn unknown_text_is_other() {
        let c = one("Something unusual happened");
        assert_eq!(
            (c.category, c.rule.as_ref(), c.evidence),
            (Category::Other, "none", None)
        );
    }
}
