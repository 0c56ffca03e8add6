//! Failure categories from one ordered rule table. Each rule names its category,
//! a pattern over the failure's text (the state's comment, then its command's
//! stderr), and what to keep as evidence: the matched text, and for external
//! causes the host, URL or package it names. The first rule that matches wins, so
//! the specific rules come first (a mirror that cannot be resolved is DNS, not
//! "package not found"); text no rule matches is `other`.

use std::sync::LazyLock;

use regex::Regex;

pub use crate::record::{Category, Classification};

/// What the first capture group of a rule holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Names {
    Nothing,
    Host,
    Url,
    Package,
}

struct Rule {
    id: &'static str,
    category: Category,
    pattern: &'static str,
    names: Names,
}

/// Ordered: the first match wins. Patterns are case-sensitive where the tools'
/// messages are fixed text, `(?i)` where wording varies.
const RULES: &[Rule] = &[
    // DNS first: a mirror or URL that cannot be resolved is a DNS problem.
    Rule {
        id: "apt_resolve",
        category: Category::NetworkDns,
        pattern: r"Temporary failure resolving '([^']+)'",
        names: Names::Host,
    },
    Rule {
        id: "curl_resolve",
        category: Category::NetworkDns,
        pattern: r"Could not resolve (?:host|hostname|proxy):? '?([A-Za-z0-9._-]+)",
        names: Names::Host,
    },
    Rule {
        id: "getaddrinfo",
        category: Category::NetworkDns,
        pattern: r"(?i)(?:Name or service not known|nodename nor servname provided|Name does not resolve|No address associated with hostname|Temporary failure in name resolution|getaddrinfo failed|NXDOMAIN)",
        names: Names::Nothing,
    },
    // Packages: missing from the mirror, or the mirror unreachable.
    Rule {
        id: "apt_no_package",
        category: Category::DependencyPackage,
        pattern: r"Unable to locate package (\S+)",
        names: Names::Package,
    },
    Rule {
        id: "apt_no_candidate",
        category: Category::DependencyPackage,
        pattern: r"Package '?([^' ]+)'? has no installation candidate",
        names: Names::Package,
    },
    Rule {
        id: "dnf_no_match",
        category: Category::DependencyPackage,
        pattern: r"No match for argument:? (\S+)",
        names: Names::Package,
    },
    Rule {
        id: "yum_no_package",
        category: Category::DependencyPackage,
        pattern: r"No package (\S+) available",
        names: Names::Package,
    },
    Rule {
        id: "pip_no_version",
        category: Category::DependencyPackage,
        pattern: r"Could not find a version that satisfies the requirement (\S+)",
        names: Names::Package,
    },
    Rule {
        id: "apt_fetch_failed",
        category: Category::DependencyPackage,
        pattern: r"Failed to fetch (\S+)",
        names: Names::Url,
    },
    Rule {
        id: "repo_metadata",
        category: Category::DependencyPackage,
        pattern: r"(?:Failed to download metadata for repo|Cannot find a valid baseurl for repo|Cannot retrieve repository metadata)[: ]*'?([^'\s]+)?",
        names: Names::Nothing,
    },
    Rule {
        id: "apt_index_failed",
        category: Category::DependencyPackage,
        pattern: r"Some index files failed to download|Unable to fetch some archives",
        names: Names::Nothing,
    },
    // Connecting.
    Rule {
        id: "connect_to_port",
        category: Category::NetworkConnect,
        pattern: r"Failed to connect to ([A-Za-z0-9._:-]+) port \d+",
        names: Names::Host,
    },
    Rule {
        id: "connect_error",
        category: Category::NetworkConnect,
        pattern: r"(?i)(?:Connection refused|Connection timed out|Connection reset by peer|No route to host|Network is unreachable|certificate verify failed)",
        names: Names::Nothing,
    },
    // The state tree.
    Rule {
        id: "salt_source_missing",
        category: Category::SourceMissing,
        pattern: r"Source file (salt://\S+) not found",
        names: Names::Url,
    },
    Rule {
        id: "salt_no_sls",
        category: Category::SourceMissing,
        pattern: r"No matching sls found for '([^']+)'",
        names: Names::Nothing,
    },
    Rule {
        id: "salt_state_not_found",
        category: Category::SourceMissing,
        pattern: r"State '[^']+' was not found in SLS '[^']+'",
        names: Names::Nothing,
    },
    Rule {
        id: "permission",
        category: Category::Permission,
        pattern: r"(?i)(?:Permission denied|Operation not permitted|EACCES|Access is denied|must be run as root|are you root\?)",
        names: Names::Nothing,
    },
    Rule {
        id: "timeout",
        category: Category::Timeout,
        pattern: r"(?i)(?:timed out|timeout expired|deadline exceeded|Timeout waiting)",
        names: Names::Nothing,
    },
    // A command that ran and exited non-zero (cmd.run, cmd.script, cmd.wait).
    Rule {
        id: "command_exit",
        category: Category::Command,
        pattern: r#"^Command "[\s\S]*" run$"#,
        names: Names::Nothing,
    },
];

/// A URL anywhere in the text; its host is an external cause's host when the
/// rule did not name one.
static URL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"\b[a-z][a-z0-9+.-]*://(?:[^\s/@'"]+@)?([^\s/:'"\]]+)[^\s'"]*"#)
        .expect("URL pattern")
});

static COMPILED: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    RULES
        .iter()
        .map(|r| Regex::new(r.pattern).expect("rule pattern compiles (tested)"))
        .collect()
});

pub const EVIDENCE_MAX: usize = 240;

/// Classifies a failure from its texts, tried in order (comment, then stderr).
/// `exit_code` is the command's, when the state ran one: a `command_exit` match
/// needs it to be non-zero.
pub fn classify(texts: &[&str], exit_code: Option<i64>) -> Classification {
    for (rule, regex) in RULES.iter().zip(COMPILED.iter()) {
        if rule.category == Category::Command && exit_code.is_none_or(|c| c == 0) {
            continue;
        }
        let Some(caps) = texts.iter().find_map(|t| regex.captures(t)) else {
            continue;
        };
        let whole = caps.get(0).map_or("", |m| m.as_str());
        let named = caps.get(1).map(|m| m.as_str().trim_end_matches(['.', ',']));
        let mut found = Classification {
            category: rule.category,
            rule: rule.id.into(),
            evidence: Some(if rule.category == Category::Command {
                format!("exit code {}", exit_code.unwrap_or_default())
            } else {
                cap_text(whole, EVIDENCE_MAX)
            }),
            host: None,
            url: None,
            package: None,
        };
        match (rule.names, named) {
            (Names::Host, Some(host)) => found.host = Some(host.to_owned()),
            (Names::Url, Some(url)) => found.url = Some(url.to_owned()),
            (Names::Package, Some(package)) => found.package = Some(package.to_owned()),
            _ => {}
        }
        if rule.category.is_external() {
            if found.url.is_none() {
                found.url = texts.iter().find_map(|t| URL.find(t)).map(|m| {
                    m.as_str()
                        .trim_end_matches([')', ']', '.', ',', ';'])
                        .to_owned()
                });
            }
            if found.host.is_none() {
                found.host = found
                    .url
                    .as_deref()
                    .and_then(|u| URL.captures(u))
                    .and_then(|c| c.get(1))
                    .map(|m| m.as_str().to_owned());
            }
        }
        return found;
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

/// At most `max` bytes of `text`, cut at a character boundary.
pub fn cap_text(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Classification {
        classify(&[text], None)
    }

    #[test]
    fn every_rule_compiles_and_ids_are_unique() {
        assert_eq!(COMPILED.len(), RULES.len());
        let mut ids: Vec<_> = RULES.iter().map(|r| r.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), RULES.len());
    }

    #[test]
    fn apt_package_missing_names_the_package() {
        let c = one(
            "Problem encountered installing package(s). Additional info follows:\n\nerrors:\n    - E: Unable to locate package saltlab-package-that-cannot-exist",
        );
        assert_eq!(c.category, Category::DependencyPackage);
        assert_eq!(c.rule, "apt_no_package");
        assert_eq!(
            c.package.as_deref(),
            Some("saltlab-package-that-cannot-exist")
        );
    }

    #[test]
    fn an_unresolvable_mirror_is_dns_with_its_host_and_url() {
        let c = one(
            "E: Failed to fetch http://deb.example.org/debian/pool/main/n/nginx.deb  Temporary failure resolving 'deb.example.org'",
        );
        assert_eq!(c.category, Category::NetworkDns);
        assert_eq!(c.host.as_deref(), Some("deb.example.org"));
        assert_eq!(
            c.url.as_deref(),
            Some("http://deb.example.org/debian/pool/main/n/nginx.deb")
        );
        let c = one("curl: (6) Could not resolve host: mirror.internal");
        assert_eq!(
            (c.category, c.host.as_deref()),
            (Category::NetworkDns, Some("mirror.internal"))
        );
    }

    #[test]
    fn an_unreachable_mirror_is_a_package_dependency_with_its_url() {
        let c = one("E: Failed to fetch https://user:pw@mirror.example.com/x.deb 503 Unavailable");
        assert_eq!(c.category, Category::DependencyPackage);
        assert_eq!(c.host.as_deref(), Some("mirror.example.com"));
    }

    #[test]
    fn connect_refused_takes_the_host_from_a_url() {
        let c = one(
            "Unable to manage file: HTTPConnectionPool(host='x', port=80): Failed to establish a new connection: [Errno 111] Connection refused (https://files.example.com/a.tgz)",
        );
        assert_eq!(c.category, Category::NetworkConnect);
        assert_eq!(c.host.as_deref(), Some("files.example.com"));
    }

    #[test]
    fn missing_salt_source_keeps_its_url() {
        let c = one(
            "Unable to manage file: Source file salt://files/does-not-exist.txt not found in saltenv 'base'",
        );
        assert_eq!(c.category, Category::SourceMissing);
        assert_eq!(c.url.as_deref(), Some("salt://files/does-not-exist.txt"));
        assert_eq!(c.host, None, "salt:// is not an external host");
    }

    #[test]
    fn a_command_needs_a_non_zero_exit_code() {
        let text = "Command \"echo about to fail; echo err >&2; exit 1\" run";
        let c = classify(&[text, "err"], Some(1));
        assert_eq!(c.category, Category::Command);
        assert_eq!(c.evidence.as_deref(), Some("exit code 1"));
        assert_eq!(classify(&[text], Some(0)).category, Category::Other);
        // stderr is evidence too: a command failing on permissions is `permission`.
        let c = classify(
            &[text, "mkdir: cannot create directory: Permission denied"],
            Some(1),
        );
        assert_eq!(c.category, Category::Permission);
    }

    #[test]
    fn unknown_text_is_other() {
        let c = one("Something unusual happened");
        assert_eq!(
            (c.category, c.rule.as_ref(), c.evidence),
            (Category::Other, "none", None)
        );
    }

    #[test]
    fn caps_at_a_char_boundary() {
        assert_eq!(cap_text("héllo", 2), "h");
        assert_eq!(cap_text("abc", 10), "abc");
    }
}
