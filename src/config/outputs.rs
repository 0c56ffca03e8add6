//! Where records go: the `[spool]` section and the `[[output]]` list, as written
//! and resolved. Credentials are read from files here, once, at start; the config
//! file itself never holds one, so it may be world-readable.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::duration::positive_or;

pub const DEFAULT_SPOOL_DIR: &str = "/var/lib/saltsight/spool";
pub const DEFAULT_SPOOL_MAX_BYTES: u64 = 1 << 30;
pub const DEFAULT_BATCH_MAX_RECORDS: usize = 1_000;
pub const DEFAULT_BATCH_MAX_BYTES: usize = 1 << 20;
pub const DEFAULT_BATCH_MAX_AGE: Duration = Duration::from_secs(1);
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
pub const DEFAULT_RETRY_MIN: Duration = Duration::from_millis(500);
pub const DEFAULT_RETRY_MAX: Duration = Duration::from_secs(60);
pub const DEFAULT_RETRY_AFTER_MAX: Duration = Duration::from_secs(600);
pub const DEFAULT_FILE_MAX_BYTES: u64 = 100 << 20;
pub const DEFAULT_FILE_KEEP: usize = 5;
pub const DEFAULT_CLICKHOUSE_TABLE: &str = "saltsight.records";

/// `[spool]` as written.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SpoolSection {
    pub dir: Option<PathBuf>,
    pub max_bytes: Option<u64>,
    pub fsync: Option<bool>,
}

/// One `[[output]]` as written.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OutputSection {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub name: Option<String>,
    // file
    pub path: Option<PathBuf>,
    pub max_bytes: Option<u64>,
    pub keep: Option<u64>,
    // http
    pub url: Option<String>,
    pub encoding: Option<String>,
    pub table: Option<String>,
    pub headers: Option<BTreeMap<String, String>>,
    pub bearer_token_file: Option<PathBuf>,
    pub basic_auth_user: Option<String>,
    pub basic_auth_password_file: Option<PathBuf>,
    pub ca_file: Option<PathBuf>,
    pub connect_timeout: Option<String>,
    pub timeout: Option<String>,
    pub gzip: Option<bool>,
    pub batch_max_records: Option<u64>,
    pub batch_max_bytes: Option<u64>,
    pub batch_max_age: Option<String>,
    pub retry_min: Option<String>,
    pub retry_max: Option<String>,
    pub retry_after_max: Option<String>,
}

/// A credential read from a file. Its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpoolConfig {
    /// Each HTTP output spools in `<dir>/<output name>/`.
    pub dir: PathBuf,
    /// Bound on each output's spool; past it the oldest batches are dropped.
    pub max_bytes: u64,
    /// fsync each batch (and its directory) when it is sealed.
    pub fsync: bool,
}

impl Default for SpoolConfig {
    fn default() -> Self {
        Self {
            dir: PathBuf::from(DEFAULT_SPOOL_DIR),
            max_bytes: DEFAULT_SPOOL_MAX_BYTES,
            fsync: true,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// One JSON record per line (Vector, Logstash, Fluent Bit http inputs).
    Ndjson,
    /// One row per line for `INSERT INTO <table> FORMAT JSONEachRow`.
    ClickHouse,
}

impl Encoding {
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Ndjson => "ndjson",
            Encoding::ClickHouse => "clickhouse",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpAuth {
    None,
    Bearer(Secret),
    Basic { user: String, password: Secret },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchConfig {
    pub max_records: usize,
    pub max_bytes: usize,
    pub max_age: Duration,
}

impl Default for BatchConfig {
    fn default() -> Self {
        Self {
            max_records: DEFAULT_BATCH_MAX_RECORDS,
            max_bytes: DEFAULT_BATCH_MAX_BYTES,
            max_age: DEFAULT_BATCH_MAX_AGE,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryConfig {
    /// First backoff delay (before jitter).
    pub min: Duration,
    /// Longest backoff delay (before jitter).
    pub max: Duration,
    /// A `Retry-After` longer than this is cut to it.
    pub retry_after_max: Duration,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            min: DEFAULT_RETRY_MIN,
            max: DEFAULT_RETRY_MAX,
            retry_after_max: DEFAULT_RETRY_AFTER_MAX,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOutputConfig {
    pub url: String,
    pub encoding: Encoding,
    /// ClickHouse only: the table inserted into.
    pub table: String,
    pub headers: Vec<(String, String)>,
    pub auth: HttpAuth,
    /// PEM certificates trusted in addition to the system's.
    pub ca_pem: Option<Vec<u8>>,
    pub connect_timeout: Duration,
    pub timeout: Duration,
    pub gzip: bool,
    pub batch: BatchConfig,
    pub retry: RetryConfig,
}

impl HttpOutputConfig {
    /// An output to `url` with every other setting at its default.
    pub fn with_defaults(url: impl Into<String>, encoding: Encoding) -> Self {
        Self {
            url: url.into(),
            encoding,
            table: DEFAULT_CLICKHOUSE_TABLE.into(),
            headers: Vec::new(),
            auth: HttpAuth::None,
            ca_pem: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            timeout: DEFAULT_REQUEST_TIMEOUT,
            gzip: true,
            batch: BatchConfig::default(),
            retry: RetryConfig::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputKind {
    Stdout,
    File {
        path: PathBuf,
        max_bytes: u64,
        keep: usize,
    },
    Http(Box<HttpOutputConfig>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputConfig {
    /// Unique; names the spool directory and appears in logs.
    pub name: String,
    pub kind: OutputKind,
}

impl OutputConfig {
    pub fn stdout() -> Self {
        Self {
            name: "stdout".into(),
            kind: OutputKind::Stdout,
        }
    }
}

pub fn resolve_spool(section: &SpoolSection, errors: &mut Vec<String>) -> SpoolConfig {
    let defaults = SpoolConfig::default();
    let max_bytes = section.max_bytes.unwrap_or(defaults.max_bytes);
    // Each output's batch_max_bytes must fit four times (checked per output).
    if max_bytes < 4096 {
        errors.push(format!(
            "spool.max_bytes is {max_bytes}; it must be at least 4096"
        ));
    }
    let dir = section.dir.clone().unwrap_or(defaults.dir);
    if !dir.is_absolute() {
        errors.push(format!("spool.dir {} must be absolute", dir.display()));
    }
    SpoolConfig {
        dir,
        max_bytes,
        fsync: section.fsync.unwrap_or(defaults.fsync),
    }
}

/// The outputs, or one `stdout` output when none is configured.
pub fn resolve_outputs(
    sections: &[OutputSection],
    spool: &SpoolConfig,
    errors: &mut Vec<String>,
) -> Vec<OutputConfig> {
    if sections.is_empty() {
        return vec![OutputConfig::stdout()];
    }
    let mut names = BTreeSet::new();
    let mut outputs = Vec::new();
    for (index, section) in sections.iter().enumerate() {
        let kind_name = section.kind.as_deref().unwrap_or("");
        let name = section
            .name
            .clone()
            .unwrap_or_else(|| kind_name.to_string());
        let at = format!("output[{index}] ({name})");
        if !valid_name(&name) {
            errors.push(format!(
                "{at}: name {name:?} must be letters, digits, '-' or '_' (it names a spool directory)"
            ));
        } else if !names.insert(name.clone()) {
            errors.push(format!(
                "{at}: two outputs are named {name:?}; give each a unique name"
            ));
        }
        let mut problems = Vec::new();
        let kind = match kind_name {
            "stdout" => {
                only_keys(section, &[], &mut problems);
                Some(OutputKind::Stdout)
            }
            "file" => {
                only_keys(section, &["path", "max_bytes", "keep"], &mut problems);
                resolve_file(section, &mut problems)
            }
            "http" => resolve_http(section, spool, &mut problems).map(OutputKind::Http),
            "" => {
                problems.push("`type` is missing (stdout, file or http)".into());
                None
            }
            other => {
                problems.push(format!("type {other:?} is not stdout, file or http"));
                None
            }
        };
        errors.extend(problems.into_iter().map(|p| format!("{at}: {p}")));
        if let Some(kind) = kind {
            outputs.push(OutputConfig { name, kind });
        }
    }
    outputs
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Keys that belong to another output type are a mistake worth naming.
fn only_keys(section: &OutputSection, allowed: &[&str], problems: &mut Vec<String>) {
    let set: [(&str, bool); 20] = [
        ("path", section.path.is_some()),
        ("max_bytes", section.max_bytes.is_some()),
        ("keep", section.keep.is_some()),
        ("url", section.url.is_some()),
        ("encoding", section.encoding.is_some()),
        ("table", section.table.is_some()),
        ("headers", section.headers.is_some()),
        ("bearer_token_file", section.bearer_token_file.is_some()),
        ("basic_auth_user", section.basic_auth_user.is_some()),
        (
            "basic_auth_password_file",
            section.basic_auth_password_file.is_some(),
        ),
        ("ca_file", section.ca_file.is_some()),
        ("connect_timeout", section.connect_timeout.is_some()),
        ("timeout", section.timeout.is_some()),
        ("gzip", section.gzip.is_some()),
        ("batch_max_records", section.batch_max_records.is_some()),
        ("batch_max_bytes", section.batch_max_bytes.is_some()),
        ("batch_max_age", section.batch_max_age.is_some()),
        ("retry_min", section.retry_min.is_some()),
        ("retry_max", section.retry_max.is_some()),
        ("retry_after_max", section.retry_after_max.is_some()),
    ];
    for (key, present) in set {
        if present && !allowed.contains(&key) {
            problems.push(format!("`{key}` does not apply to this output type"));
        }
    }
}

fn resolve_file(section: &OutputSection, problems: &mut Vec<String>) -> Option<OutputKind> {
    let Some(path) = section.path.clone() else {
        problems.push("`path` is missing".into());
        return None;
    };
    if !path.is_absolute() {
        problems.push(format!("path {} must be absolute", path.display()));
    }
    let max_bytes = section.max_bytes.unwrap_or(DEFAULT_FILE_MAX_BYTES);
    if max_bytes < 4096 {
        problems.push(format!(
            "max_bytes is {max_bytes}; it must be at least 4096"
        ));
    }
    let keep = section.keep.unwrap_or(DEFAULT_FILE_KEEP as u64);
    if !(1..=1000).contains(&keep) {
        problems.push(format!("keep is {keep}; it must be between 1 and 1000"));
    }
    Some(OutputKind::File {
        path,
        max_bytes,
        keep: keep as usize,
    })
}

fn resolve_http(
    section: &OutputSection,
    spool: &SpoolConfig,
    problems: &mut Vec<String>,
) -> Option<Box<HttpOutputConfig>> {
    let mut allowed = vec![
        "url",
        "encoding",
        "headers",
        "bearer_token_file",
        "basic_auth_user",
        "basic_auth_password_file",
        "ca_file",
        "connect_timeout",
        "timeout",
        "gzip",
        "batch_max_records",
        "batch_max_bytes",
        "batch_max_age",
        "retry_min",
        "retry_max",
        "retry_after_max",
    ];
    let encoding = match section.encoding.as_deref().unwrap_or("ndjson") {
        "ndjson" => Encoding::Ndjson,
        "clickhouse" => {
            allowed.push("table");
            Encoding::ClickHouse
        }
        other => {
            problems.push(format!("encoding {other:?} is not ndjson or clickhouse"));
            Encoding::Ndjson
        }
    };
    only_keys(section, &allowed, problems);
    let url = match section.url.as_deref() {
        None => {
            problems.push("`url` is missing".into());
            String::new()
        }
        Some(url) if url.starts_with("http://") || url.starts_with("https://") => {
            let authority = url.split("://").nth(1).unwrap_or("").split('/').next();
            if authority.is_some_and(|a| a.contains('@')) {
                problems.push(
                    "url holds credentials (user:password@); use bearer_token_file or basic_auth_password_file".into(),
                );
            }
            url.into()
        }
        Some(url) => {
            problems.push(format!("url {url:?} must start with http:// or https://"));
            String::new()
        }
    };
    let table = section
        .table
        .clone()
        .unwrap_or_else(|| DEFAULT_CLICKHOUSE_TABLE.into());
    if !table
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
        || table.is_empty()
    {
        problems.push(format!(
            "table {table:?} must be [database.]table of letters, digits and '_'"
        ));
    }
    let mut headers = Vec::new();
    for (name, value) in section.headers.iter().flatten() {
        let token = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !token {
            problems.push(format!("header name {name:?} is not a valid HTTP token"));
        }
        if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
            problems.push(format!("header {name:?} has a line break in its value"));
        }
        if name.eq_ignore_ascii_case("authorization") {
            problems.push(
                "an Authorization header may not be written inline; use bearer_token_file or basic_auth_user with basic_auth_password_file".into(),
            );
        }
        headers.push((name.clone(), value.clone()));
    }
    let auth = match (
        &section.bearer_token_file,
        &section.basic_auth_user,
        &section.basic_auth_password_file,
    ) {
        (None, None, None) => HttpAuth::None,
        (Some(token), None, None) => read_secret(token, "bearer_token_file", problems)
            .map_or(HttpAuth::None, HttpAuth::Bearer),
        (None, Some(user), Some(password)) => {
            read_secret(password, "basic_auth_password_file", problems).map_or(
                HttpAuth::None,
                |password| HttpAuth::Basic {
                    user: user.clone(),
                    password,
                },
            )
        }
        (None, Some(_), None) | (None, None, Some(_)) => {
            problems
                .push("basic auth needs both basic_auth_user and basic_auth_password_file".into());
            HttpAuth::None
        }
        (Some(_), _, _) => {
            problems.push("use bearer_token_file or basic auth, not both".into());
            HttpAuth::None
        }
    };
    let ca_pem = section
        .ca_file
        .as_ref()
        .and_then(|path| match std::fs::read(path) {
            Ok(pem) if pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") => Some(pem),
            Ok(_) => {
                problems.push(format!(
                    "ca_file {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                    path.display()
                ));
                None
            }
            Err(e) => {
                problems.push(format!("cannot read ca_file {}: {e}", path.display()));
                None
            }
        });
    let mut duration = |key: &str, value: &Option<String>, default: Duration| {
        positive_or(key, value.as_deref(), default, problems)
    };
    let connect_timeout = duration(
        "connect_timeout",
        &section.connect_timeout,
        DEFAULT_CONNECT_TIMEOUT,
    );
    let timeout = duration("timeout", &section.timeout, DEFAULT_REQUEST_TIMEOUT);
    let max_age = duration(
        "batch_max_age",
        &section.batch_max_age,
        DEFAULT_BATCH_MAX_AGE,
    );
    let retry = RetryConfig {
        min: duration("retry_min", &section.retry_min, DEFAULT_RETRY_MIN),
        max: duration("retry_max", &section.retry_max, DEFAULT_RETRY_MAX),
        retry_after_max: duration(
            "retry_after_max",
            &section.retry_after_max,
            DEFAULT_RETRY_AFTER_MAX,
        ),
    };
    if retry.min > retry.max {
        problems.push(format!(
            "retry_min ({:?}) is above retry_max ({:?})",
            retry.min, retry.max
        ));
    }
    let max_records = section
        .batch_max_records
        .unwrap_or(DEFAULT_BATCH_MAX_RECORDS as u64);
    if !(1..=1_000_000).contains(&max_records) {
        problems.push(format!(
            "batch_max_records is {max_records}; it must be between 1 and 1000000"
        ));
    }
    let max_bytes = section
        .batch_max_bytes
        .unwrap_or(DEFAULT_BATCH_MAX_BYTES as u64);
    if max_bytes < 1024 || max_bytes.saturating_mul(4) > spool.max_bytes {
        problems.push(format!(
            "batch_max_bytes is {max_bytes}; it must be at least 1024 and at most a quarter of spool.max_bytes ({})",
            spool.max_bytes
        ));
    }
    Some(Box::new(HttpOutputConfig {
        url,
        encoding,
        table,
        headers,
        auth,
        ca_pem,
        connect_timeout,
        timeout,
        gzip: section.gzip.unwrap_or(true),
        batch: BatchConfig {
            max_records: max_records as usize,
            max_bytes: max_bytes as usize,
            max_age,
        },
        retry,
    }))
}

/// A credential file's content, trimmed of the line break editors add. The value
/// never appears in an error.
fn read_secret(path: &Path, key: &str, problems: &mut Vec<String>) -> Option<Secret> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let value = text.trim_end_matches(['\r', '\n']).to_string();
            if value.is_empty() {
                problems.push(format!("{key} {} is empty", path.display()));
                None
            } else if value.contains(['\r', '\n']) {
                problems.push(format!("{key} {} holds more than one line", path.display()));
                None
            } else {
                Some(Secret(value))
            }
        }
        Err(e) => {
            problems.push(format!("cannot read {key} {}: {e}", path.display()));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(toml_text: &str) -> Result<Vec<OutputConfig>, Vec<String>> {
        #[derive(Deserialize)]
        struct Doc {
            #[serde(default)]
            output: Vec<OutputSection>,
        }
        let doc: Doc = toml::from_str(toml_text).expect("toml");
        let mut errors = Vec::new();
        let outputs = resolve_outputs(&doc.output, &SpoolConfig::default(), &mut errors);
        if errors.is_empty() {
            Ok(outputs)
        } else {
            Err(errors)
        }
    }

    #[test]
    fn no_output_means_stdout() {
        assert_eq!(resolve("").unwrap(), vec![OutputConfig::stdout()]);
    }

    #[test]
    fn an_http_output_resolves_with_its_defaults_and_reads_its_token() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "s3cr3t-token\n").unwrap();
        let text = format!(
            "[[output]]\ntype = \"http\"\nname = \"ch\"\nurl = \"http://127.0.0.1:8123/\"\nencoding = \"clickhouse\"\nbearer_token_file = {:?}\nheaders = {{ \"X-Scope\" = \"fleet\" }}\n",
            token.display().to_string()
        );
        let outputs = resolve(&text).unwrap();
        let OutputKind::Http(http) = &outputs[0].kind else {
            panic!("not http: {outputs:?}")
        };
        assert_eq!(outputs[0].name, "ch");
        assert_eq!(http.encoding, Encoding::ClickHouse);
        assert_eq!(http.table, DEFAULT_CLICKHOUSE_TABLE);
        assert_eq!(http.auth, HttpAuth::Bearer(Secret("s3cr3t-token".into())));
        assert_eq!(http.batch, BatchConfig::default());
        assert_eq!(http.headers, vec![("X-Scope".into(), "fleet".into())]);
        assert!(http.gzip);
        assert!(
            !format!("{outputs:?}").contains("s3cr3t"),
            "Debug shows the secret"
        );
    }

    #[test]
    fn every_problem_is_named() {
        let errors = resolve(
            "[[output]]\ntype = \"http\"\nname = \"a\"\nurl = \"https://u:hunter2@h/\"\n\n[[output]]\ntype = \"http\"\nurl = \"ftp://x\"\ntable = \"t\"\nheaders = { Authorization = \"Bearer x\" }\nbearer_token_file = \"/nonexistent/token\"\nbatch_max_age = \"soon\"\n\n[[output]]\ntype = \"file\"\nurl = \"http://x\"\n\n[[output]]\ntype = \"file\"\npath = \"/tmp/x\"\n\n[[output]]\ntype = \"kafka\"\n",
        )
        .unwrap_err();
        let all = errors.join("\n");
        for expected in [
            "must start with http:// or https://",
            "url holds credentials",
            "`table` does not apply",
            "Authorization header may not be written inline",
            "cannot read bearer_token_file /nonexistent/token",
            "batch_max_age",
            "output[2] (file): `path` is missing",
            "output[2] (file): `url` does not apply",
            "two outputs are named \"file\"",
            "type \"kafka\" is not stdout, file or http",
        ] {
            assert!(all.contains(expected), "{expected:?} not in:\n{all}");
        }
        assert!(!all.contains("hunter2"), "a credential in an error: {all}");
    }

    #[test]
    fn basic_auth_needs_both_halves_and_excludes_bearer() {
        let errors =
            resolve("[[output]]\ntype = \"http\"\nurl = \"http://h/\"\nbasic_auth_user = \"u\"\n")
                .unwrap_err();
        assert!(errors[0].contains("needs both"), "{errors:?}");
    }
}
