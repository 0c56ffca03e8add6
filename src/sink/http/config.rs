//! An `http` output's settings: its keys as written, resolved and checked
//! (credentials read from files here, once, at start: the config file itself
//! never holds one, so it may be world-readable).

use std::fmt;
use std::path::Path;
use std::time::Duration;

use crate::config::defaults::*;
use crate::config::duration::positive_or;
use crate::config::spool::SpoolConfig;
use crate::sink::encode::Encoding;
use crate::sink::retry::RetryConfig;
use crate::sink::spool::BatchConfig;

/// Declares an output's section: its own keys, then the transport keys every
/// output that posts over HTTP takes (`http`, `otlp`), listed here once, with
/// `take_transport` handing those to [`resolve_transport`] as a [`Transport`].
macro_rules! section_with_transport {
    ($(#[$meta:meta])* pub struct $name:ident { $($own:tt)* }) => {
        $crate::sink::http::config::section_with_transport! {
            @make [$(#[$meta])*] $name [$($own)*]
            headers: Option<std::collections::BTreeMap<String, String>>,
            bearer_token_file: Option<std::path::PathBuf>,
            basic_auth_user: Option<String>,
            basic_auth_password_file: Option<std::path::PathBuf>,
            ca_file: Option<std::path::PathBuf>,
            connect_timeout: Option<String>,
            timeout: Option<String>,
            gzip: Option<bool>,
            batch_max_records: Option<u64>,
            batch_max_bytes: Option<u64>,
            batch_max_age: Option<String>,
            retry_min: Option<String>,
            retry_max: Option<String>,
            retry_after_max: Option<String>,
        }
    };
    (@make [$($meta:tt)*] $name:ident [$($own:tt)*] $($key:ident: $ty:ty,)*) => {
        $($meta)*
        #[derive(Debug, Default, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $($own)*
            $(pub $key: $ty,)*
        }

        impl $name {
            /// Its transport keys, taken out.
            pub fn take_transport(&mut self) -> $crate::sink::http::config::Transport {
                $crate::sink::http::config::Transport {
                    $($key: self.$key.take(),)*
                }
            }
        }
    };
}

pub(crate) use section_with_transport;

section_with_transport! {
    /// The transport keys alone, as [`resolve_transport`] takes them.
    pub struct Transport {}
}

section_with_transport! {
    /// An `http` output's keys as written.
    pub struct HttpSection {
        pub url: Option<String>,
        pub encoding: Option<String>,
        pub table: Option<String>,
    }
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
pub enum HttpAuth {
    None,
    Bearer(Secret),
    Basic { user: String, password: Secret },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSettings {
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

impl HttpSettings {
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

/// Checks an `http` output's keys; every problem into `problems`.
pub fn resolve(
    mut section: HttpSection,
    spool: &SpoolConfig,
    problems: &mut Vec<String>,
) -> Option<HttpSettings> {
    let encoding = match section.encoding.as_deref().unwrap_or("ndjson") {
        "ndjson" => {
            if section.table.is_some() {
                problems.push("`table` applies to encoding = \"clickhouse\" only".into());
            }
            Encoding::Ndjson
        }
        "clickhouse" => Encoding::ClickHouse,
        other => {
            problems.push(format!("encoding {other:?} is not ndjson or clickhouse"));
            Encoding::Ndjson
        }
    };
    let url = match section.url.as_deref() {
        None => {
            problems.push("`url` is missing".into());
            String::new()
        }
        Some(url) => checked_url("url", url, problems),
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
    let transport = section.take_transport();
    let settings = resolve_transport(transport, url, encoding, spool, problems)?;
    Some(HttpSettings { table, ..settings })
}

/// `url` as the key `key` gives it, when it is http(s) and holds no
/// credentials; empty (with the problem said) when not.
pub fn checked_url(key: &str, url: &str, problems: &mut Vec<String>) -> String {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        problems.push(format!("{key} {url:?} must start with http:// or https://"));
        return String::new();
    }
    let authority = url.split("://").nth(1).unwrap_or("").split('/').next();
    if authority.is_some_and(|a| a.contains('@')) {
        problems.push(format!(
            "{key} holds credentials (user:password@); use bearer_token_file or basic_auth_password_file"
        ));
    }
    url.into()
}

/// The transport keys checked, for requests to `url` encoded as `encoding`
/// (the ClickHouse table at its default); every problem into `problems`.
pub fn resolve_transport(
    section: Transport,
    url: String,
    encoding: Encoding,
    spool: &SpoolConfig,
    problems: &mut Vec<String>,
) -> Option<HttpSettings> {
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
    Some(HttpSettings {
        url,
        encoding,
        table: DEFAULT_CLICKHOUSE_TABLE.into(),
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
    })
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
            // Not "<path>: <error>": a path ending in `token` or `password`
            // followed by a colon reads as a secret to the redactor.
            problems.push(format!("cannot read {key} {} ({e})", path.display()));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve_text(text: &str) -> Result<HttpSettings, Vec<String>> {
        let section: HttpSection = toml::from_str(text).expect("toml");
        let mut problems = Vec::new();
        let settings = resolve(section, &SpoolConfig::default(), &mut problems);
        match settings {
            Some(settings) if problems.is_empty() => Ok(settings),
            _ => Err(problems),
        }
    }

    #[test]
    fn an_http_output_resolves_with_its_defaults_and_reads_its_token() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "s3cr3t-token\n").unwrap();
        let text = format!(
            "url = \"http://127.0.0.1:8123/\"\nencoding = \"clickhouse\"\nbearer_token_file = {:?}\nheaders = {{ \"X-Scope\" = \"fleet\" }}\n",
            token.display().to_string()
        );
        let http = resolve_text(&text).unwrap();
        assert_eq!(http.encoding, Encoding::ClickHouse);
        assert_eq!(http.table, DEFAULT_CLICKHOUSE_TABLE);
        assert_eq!(http.auth, HttpAuth::Bearer(Secret("s3cr3t-token".into())));
        assert_eq!(http.batch, BatchConfig::default());
        assert_eq!(http.headers, vec![("X-Scope".into(), "fleet".into())]);
        assert!(http.gzip);
        assert!(
            !format!("{http:?}").contains("s3cr3t"),
            "Debug shows the secret"
        );
    }

    #[test]
    fn basic_auth_needs_both_halves_and_excludes_bearer() {
        let errors = resolve_text("url = \"http://h/\"\nbasic_auth_user = \"u\"\n").unwrap_err();
        assert!(errors[0].contains("needs both"), "{errors:?}");
    }
}
