//! What an external cause names: the URL a tool says it failed on, the host it
//! could not reach, the package it could not install. Read from the failure's
//! texts when the rule that chose the category did not capture it, always
//! trimmed of the punctuation messages put around them (Salt writes
//! `Failed to cache <url>: Error: ...`).

use std::sync::LazyLock;

use regex::Regex;

use super::patterns::Patterns;

fn compile(patterns: &[&'static str]) -> Patterns {
    Patterns::new(patterns.to_vec()).expect("evidence patterns compile (tested)")
}

/// Where a tool names the URL it failed on, before any URL in the text. A
/// capture counts only when it holds `://`.
static URL_HINTS: LazyLock<Patterns> = LazyLock::new(|| {
    compile(&[
        // libzypp: Download (curl) error for '<url>':
        r"Download \(curl\) error for '([^']+)'",
        // librepo: Curl error (N): <text> for <url> [<detail>]
        r"Curl error \(\d+\): [^\n\[]*? for (\S+) \[",
        // pip
        r"Could not fetch URL (\S+?): ",
        // salt/modules/file.py and fileclient: Failed to cache <url>: ...
        r"Failed to cache (\S+?)[:,]?(?:\s|$)",
        // git remote-curl: unable to access '<url>':
        r"unable to access '([^']+)'",
        // apt acquire: Failed to fetch <url>
        r"Failed to fetch (\S+)",
        // Go's url.Error (Go >= 1.14 quotes the URL)
        r#"(?:Get|Put|Post|Head|Delete|Patch) "([^"]+)""#,
        // yum 3
        r"Could not retrieve mirrorlist (\S+)",
        // node: network request to <url> failed
        r"request to (\S+) failed",
    ])
});

/// Any URL. Brackets, quotes and angle brackets end it.
static URL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"\b(?:https?|ftp|salt|file|s3|git\+ssh|ssh|git)://[^\s'"<>\]\[]+"#)
        .expect("URL pattern")
});

/// Help links tools append to every failure of a kind: never the cause.
static HELP_LINK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^https?://(?:curl\.se/docs/|curl\.haxx\.se/docs/|www\.docker\.com/increase-rate-limit|docs\.docker\.com/)",
    )
    .expect("help link pattern")
});

/// Where a tool names the host it could not reach, when no URL says it.
static HOST_HINTS: LazyLock<Patterns> = LazyLock::new(|| {
    compile(&[
        // curl, every version: "port N", ":N"
        r"Failed to connect to ([A-Za-z0-9._-]+|\[[0-9A-Fa-f:]+\])(?: port |:)\d+",
        // curl before 7.50: "Failed connect to host:port"
        r"Failed connect to ([A-Za-z0-9._-]+):\d+",
        // apt connect.cc
        r"Could not connect to ([A-Za-z0-9._-]+):\d+",
        // ssh sshconnect.c, and a peer that closed or reset the session
        r"connect to host ([A-Za-z0-9._-]+) port \d+",
        r"Connection (?:reset|closed) by ([A-Za-z0-9._-]+) port \d+",
        // kubectl
        r"The connection to the server ([A-Za-z0-9._-]+):\d+",
        // Go net.OpError
        r"dial tcp ([0-9.]+|\[[0-9A-Fa-f:]+\]):\d+",
        // Node
        r"(?:ECONNREFUSED|ETIMEDOUT|EHOSTUNREACH|ECONNRESET) ([0-9.]+|\[[0-9A-Fa-f:]+\]):\d+",
        // urllib3 / requests
        r"ConnectionPool\(host='([^']+)'",
        r"Connection\(host='([^']+)'",
        // wget
        r"Connecting to ([A-Za-z0-9._-]+)(?: \([^)]*\))?(?:\|[^|]*\|)?:\d+\.\.\. failed",
        // a registry in a docker image reference
        r"manifest for ([a-z0-9-]+(?:\.[a-z0-9-]+)+(?::\d+)?)/",
        r"pulling ([a-z0-9-]+(?:\.[a-z0-9-]+)+(?::\d+)?)/",
    ])
});

/// The host of a URL that has one (not `salt://`, `file://`).
static URL_HOST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:https?|ftp|s3|ssh|git\+ssh|git)://(?:[^/@\s]+@)?(\[[0-9A-Fa-f:]+\]|[^/:\s?#]+)",
    )
    .expect("URL host pattern")
});

/// Punctuation around a name in a message, never part of it.
const TRAILING: &[char] = &['.', ',', ';', ':', ')', ']', '}', '\'', '"', '`', '>', '’'];

pub fn trim(name: &str) -> &str {
    name.trim_end_matches(TRAILING)
}

/// The URL a tool says it failed on, else the first URL in the texts (help links
/// skipped).
pub fn url(texts: &[&str]) -> Option<String> {
    named_url(texts)
        .or_else(|| {
            texts.iter().find_map(|t| {
                URL.find_iter(t)
                    .map(|m| trim(m.as_str()))
                    .find(|u| !HELP_LINK.is_match(u))
            })
        })
        .map(str::to_owned)
}

/// The URL a tool says it failed on (one of [`URL_HINTS`]).
pub fn named_url<'t>(texts: &[&'t str]) -> Option<&'t str> {
    URL_HINTS.first(texts, |_, hint, t| {
        hint.captures_iter(t)
            .filter_map(|c| c.get(1))
            .map(|m| trim(m.as_str()))
            .find(|u| u.contains("://") && !HELP_LINK.is_match(u))
    })
}

/// The host a tool says it could not reach.
pub fn host(texts: &[&str]) -> Option<String> {
    HOST_HINTS.first(texts, |_, hint, t| {
        hint.captures(t)
            .and_then(|c| c.get(1))
            .map(|m| host_name(m.as_str()).to_owned())
    })
}

/// The host of `url`, when it has one.
pub fn host_of(url: &str) -> Option<String> {
    URL_HOST
        .captures(url)
        .and_then(|c| c.get(1))
        .map(|m| host_name(m.as_str()).to_owned())
        .filter(|h| !h.is_empty())
}

/// A host as named: trimmed, an IPv6 literal without its brackets kept whole,
/// a registry's port dropped.
fn host_name(raw: &str) -> &str {
    if raw.starts_with('[') {
        return raw.find(']').map_or(raw, |end| &raw[..=end]);
    }
    let host = trim(raw);
    host.split(':').next().unwrap_or(host)
}

/// An apt pool file: `.../libssl3_3.0.2-0ubuntu1.10_amd64.deb` names `libssl3`.
static DEB_FILE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"/([A-Za-z0-9.+-]+)_[^/_]+_[a-z0-9]+\.deb$").expect("deb pattern")
});

/// A package as named by a rule: without a version (`salt-minion=3006.9`), a
/// pip specifier or extras (`celery[redis]>=5`), or Python 2's `u'...'`.
pub fn package(raw: &str) -> Option<String> {
    let name = trim(raw).trim_start_matches("u'").trim_matches('\'');
    let end = name
        .find(['=', '<', '>', '!', '~', '['])
        .unwrap_or(name.len());
    let name = trim(&name[..end]);
    (!name.is_empty()).then(|| name.to_owned())
}

/// The package an apt URL downloads, when it is a pool file.
pub fn package_of_url(url: &str) -> Option<String> {
    DEB_FILE
        .captures(url)
        .and_then(|c| c.get(1))
        .map(|m| m.as_str().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles() {
        assert_eq!(URL_HINTS.len(), 9);
        assert_eq!(HOST_HINTS.len(), 13);
        for hints in [&*URL_HINTS, &*HOST_HINTS] {
            for i in 0..hints.len() {
                hints.regex(i);
            }
        }
        assert!(URL.is_match("https://x") && URL_HOST.is_match("https://x"));
    }

    #[test]
    fn the_corpus_matches_the_hints_it_matched_with_unicode_classes() {
        let texts = crate::triage::patterns::corpus_texts();
        URL_HINTS.assert_reads_as_written(&texts);
        HOST_HINTS.assert_reads_as_written(&texts);
    }

    #[test]
    fn urls_are_trimmed_of_the_punctuation_around_them() {
        assert_eq!(
            url(&["Failed to cache https://cdn.example.net/zips/highcharts.txt: Error: HTTP 404"])
                .as_deref(),
            Some("https://cdn.example.net/zips/highcharts.txt")
        );
        assert_eq!(
            url(&["Error reading https://files.example.com/a.txt: timed out"]).as_deref(),
            Some("https://files.example.com/a.txt")
        );
        assert_eq!(
            host(&["curl: (7) Failed connect to files.example.com:8080; Connection refused"])
                .as_deref(),
            Some("files.example.com")
        );
        assert_eq!(
            url(&["see (https://files.example.com/a.tgz)."]).as_deref(),
            Some("https://files.example.com/a.tgz")
        );
        assert_eq!(
            url(&["Failed to cache salt://app/x.tgz, check minion log"]).as_deref(),
            Some("salt://app/x.tgz")
        );
    }

    #[test]
    fn the_url_a_tool_names_comes_before_others_and_help_links_never() {
        let curl = "curl: (60) SSL certificate problem: self-signed certificate\nMore details here: https://curl.se/docs/sslcerts.html";
        assert_eq!(
            url(&["Command \"curl -fsS https://api.example.net/v1\" run", curl]).as_deref(),
            Some("https://api.example.net/v1")
        );
        assert_eq!(url(&[curl]), None);
        let git = "fatal: unable to access 'https://git.example.net/o/r.git/': Could not resolve host: git.example.net";
        assert_eq!(
            url(&[
                "Command \"git clone https://git.example.net/o/r.git\" run",
                git
            ])
            .as_deref(),
            Some("https://git.example.net/o/r.git/")
        );
    }

    #[test]
    fn hosts_come_from_tools_and_urls() {
        assert_eq!(
            host(&["curl: (7) Failed to connect to vault.example.net port 8200 after 3 ms: Couldn't connect to server"]).as_deref(),
            Some("vault.example.net")
        );
        assert_eq!(
            host(&["curl: (7) Failed to connect to vault.example.net:8200 after 66 ms: Could not connect to server"]).as_deref(),
            Some("vault.example.net")
        );
        assert_eq!(
            host(&["ssh: connect to host git.example.net port 2222: Connection refused"])
                .as_deref(),
            Some("git.example.net")
        );
        assert_eq!(
            host(&["dial tcp 10.0.3.11:8500: connect: connection refused"]).as_deref(),
            Some("10.0.3.11")
        );
        assert_eq!(
            host_of("https://deploy@git.example.net:8443/x").as_deref(),
            Some("git.example.net")
        );
        assert_eq!(
            host_of("http://[2001:db8::1]:80/x").as_deref(),
            Some("[2001:db8::1]")
        );
        assert_eq!(host_of("salt://files/x"), None);
        assert_eq!(host_of("file:///srv/x"), None);
    }

    #[test]
    fn packages_lose_versions_specifiers_and_quotes() {
        for (raw, name) in [
            ("salt-minion=3006.9", "salt-minion"),
            ("saltlab-internal-lib==2.1.0", "saltlab-internal-lib"),
            ("celery[redis]>=5.3", "celery"),
            ("u'cronie'", "cronie"),
            ("jq.", "jq"),
            ("app-misc/screenfetch", "app-misc/screenfetch"),
        ] {
            assert_eq!(package(raw).as_deref(), Some(name), "{raw}");
        }
        assert_eq!(
            package_of_url(
                "http://archive.example.net/pool/main/o/openssl/libssl3_3.0.2-0ubuntu1.10_amd64.deb"
            )
            .as_deref(),
            Some("libssl3")
        );
    }
}
