//! The Prometheus exporter-toolkit web configuration (`--web.config.file`), so
//! saltsight's endpoint is secured the way node_exporter's is: TLS with an
//! optional client CA, basic auth with bcrypt hashes, and a few response headers.
//!
//! Unknown keys are errors, as in exporter-toolkit. Keys it has that saltsight
//! does not implement (`cipher_suites`, `curve_preferences`, `client_allowed_sans`,
//! inline `cert`/`key`, `rate_limit`) are errors that say so, never silently
//! ignored. Relative paths are relative to the file's directory. The file is
//! read once, at start.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use yaml_rust2::{Yaml, YamlLoader};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebConfig {
    pub path: PathBuf,
    pub tls: Option<TlsServerConfig>,
    /// user → bcrypt hash. Empty: no authentication.
    pub basic_auth_users: BTreeMap<String, String>,
    /// Response headers (the ones exporter-toolkit allows).
    pub headers: Vec<(String, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// `NoClientCert` (the default).
    None,
    /// `VerifyClientCertIfGiven`: optional, verified against the client CA.
    VerifyIfGiven,
    /// `RequireAndVerifyClientCert`.
    RequireAndVerify,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    Tls12,
    Tls13,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsServerConfig {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    pub client_auth: ClientAuth,
    pub client_ca_file: Option<PathBuf>,
    pub min_version: TlsVersion,
    pub max_version: TlsVersion,
}

const ALLOWED_HEADERS: &[&str] = &[
    "Content-Security-Policy",
    "X-Frame-Options",
    "X-Content-Type-Options",
    "X-XSS-Protection",
    "Strict-Transport-Security",
];

/// Reads and checks `path`; every problem is pushed to `errors`, prefixed with it.
pub fn load(path: &Path, errors: &mut Vec<String>) -> Option<WebConfig> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            errors.push(format!("cannot read web config {}: {e}", path.display()));
            return None;
        }
    };
    let mut problems = Vec::new();
    let config = parse(&text, path, &mut problems);
    let before = errors.len();
    errors.extend(
        problems
            .into_iter()
            .map(|p| format!("web config {}: {p}", path.display())),
    );
    (errors.len() == before).then_some(config).flatten()
}

fn parse(text: &str, path: &Path, errors: &mut Vec<String>) -> Option<WebConfig> {
    let docs = match YamlLoader::load_from_str(text) {
        Ok(docs) => docs,
        Err(e) => {
            errors.push(format!("not YAML: {e}"));
            return None;
        }
    };
    let base = path.parent().unwrap_or(Path::new("."));
    let mut config = WebConfig {
        path: path.to_path_buf(),
        tls: None,
        basic_auth_users: BTreeMap::new(),
        headers: Vec::new(),
    };
    let root = match docs.first() {
        None | Some(Yaml::Null) => return Some(config),
        Some(Yaml::Hash(map)) => map,
        Some(_) => {
            errors.push("the top level must be a map".into());
            return None;
        }
    };
    for (key, value) in root {
        match key.as_str().unwrap_or_default() {
            "tls_server_config" => config.tls = tls(value, base, errors),
            "http_server_config" => config.headers = http(value, errors),
            "basic_auth_users" => config.basic_auth_users = users(value, errors),
            "rate_limit" => errors.push("rate_limit is not supported by saltsight".into()),
            other => errors.push(format!("unknown key {other:?}")),
        }
    }
    Some(config)
}

fn entries<'a>(
    value: &'a Yaml,
    section: &str,
    errors: &mut Vec<String>,
) -> Vec<(&'a str, &'a Yaml)> {
    match value {
        Yaml::Null => Vec::new(),
        Yaml::Hash(map) => map
            .iter()
            .map(|(k, v)| (k.as_str().unwrap_or_default(), v))
            .collect(),
        _ => {
            errors.push(format!("{section} must be a map"));
            Vec::new()
        }
    }
}

fn text<'a>(value: &'a Yaml, key: &str, errors: &mut Vec<String>) -> Option<&'a str> {
    let text = value.as_str();
    if text.is_none() {
        errors.push(format!("{key} must be a string"));
    }
    text
}

fn tls(value: &Yaml, base: &Path, errors: &mut Vec<String>) -> Option<TlsServerConfig> {
    let (mut cert, mut key, mut ca) = (None, None, None);
    let mut client_auth = ClientAuth::None;
    let (mut min_version, mut max_version) = (TlsVersion::Tls12, TlsVersion::Tls13);
    let path = |v: &str| base.join(v);
    for (name, v) in entries(value, "tls_server_config", errors) {
        let key_name = format!("tls_server_config.{name}");
        match name {
            "cert_file" => cert = text(v, &key_name, errors).map(path),
            "key_file" => key = text(v, &key_name, errors).map(path),
            "client_ca_file" => ca = text(v, &key_name, errors).map(path),
            "client_auth_type" => match text(v, &key_name, errors).unwrap_or("NoClientCert") {
                "" | "NoClientCert" => client_auth = ClientAuth::None,
                "VerifyClientCertIfGiven" => client_auth = ClientAuth::VerifyIfGiven,
                "RequireAndVerifyClientCert" => client_auth = ClientAuth::RequireAndVerify,
                t @ ("RequestClientCert" | "RequireAnyClientCert" | "RequireClientCert") => {
                    errors.push(format!(
                        "client_auth_type {t} accepts client certificates without verifying them; saltsight supports NoClientCert, VerifyClientCertIfGiven and RequireAndVerifyClientCert"
                    ))
                }
                t => errors.push(format!("invalid client_auth_type {t:?}")),
            },
            "min_version" | "max_version" => {
                let version = match text(v, &key_name, errors).unwrap_or("TLS12") {
                    "TLS12" => TlsVersion::Tls12,
                    "TLS13" => TlsVersion::Tls13,
                    t @ ("TLS10" | "TLS11") => {
                        errors.push(format!("{key_name} {t}: TLS before 1.2 is not supported"));
                        TlsVersion::Tls12
                    }
                    t => {
                        errors.push(format!("{key_name}: unknown TLS version {t:?}"));
                        TlsVersion::Tls12
                    }
                };
                if name == "min_version" {
                    min_version = version;
                } else {
                    max_version = version;
                }
            }
            // rustls always follows the server's order of its own safe suites.
            "prefer_server_cipher_suites" => {}
            "cipher_suites" | "curve_preferences" | "client_allowed_sans" | "cert" | "key"
            | "client_ca" => errors.push(format!("{key_name} is not supported by saltsight")),
            other => errors.push(format!("unknown key tls_server_config.{other}")),
        }
    }
    if min_version > max_version {
        errors.push("tls_server_config: min_version is above max_version".into());
    }
    match (&ca, client_auth) {
        (Some(_), ClientAuth::None) => errors.push(
            "tls_server_config: client_ca_file is set but client_auth_type is NoClientCert".into(),
        ),
        (None, ClientAuth::VerifyIfGiven | ClientAuth::RequireAndVerify) => errors.push(
            "tls_server_config: client_auth_type verifies client certificates but no client_ca_file is set"
                .into(),
        ),
        _ => {}
    }
    match (cert, key) {
        (Some(cert_file), Some(key_file)) => Some(TlsServerConfig {
            cert_file,
            key_file,
            client_auth,
            client_ca_file: ca,
            min_version,
            max_version,
        }),
        (None, None) if matches!(value, Yaml::Null) => None,
        _ => {
            errors.push("tls_server_config needs both cert_file and key_file".into());
            None
        }
    }
}

fn http(value: &Yaml, errors: &mut Vec<String>) -> Vec<(String, String)> {
    let mut headers = Vec::new();
    for (name, v) in entries(value, "http_server_config", errors) {
        match name {
            // saltsight serves HTTP/1.1; Prometheus scrapes over it either way.
            "http2" if v.as_bool().is_some() => {}
            "http2" => errors.push("http_server_config.http2 must be true or false".into()),
            "headers" => {
                for (header, v) in entries(v, "http_server_config.headers", errors) {
                    let Some(allowed) = ALLOWED_HEADERS
                        .iter()
                        .find(|h| h.eq_ignore_ascii_case(header))
                    else {
                        errors.push(format!(
                            "header {header:?} cannot be set (allowed: {})",
                            ALLOWED_HEADERS.join(", ")
                        ));
                        continue;
                    };
                    if let Some(value) = text(v, &format!("header {allowed}"), errors) {
                        headers.push(((*allowed).to_owned(), value.to_owned()));
                    }
                }
            }
            other => errors.push(format!("unknown key http_server_config.{other}")),
        }
    }
    headers
}

fn users(value: &Yaml, errors: &mut Vec<String>) -> BTreeMap<String, String> {
    let mut users = BTreeMap::new();
    for (user, v) in entries(value, "basic_auth_users", errors) {
        let Some(hash) = v.as_str() else {
            errors.push(format!("basic_auth_users.{user} must be a bcrypt hash"));
            continue;
        };
        // The hash is never echoed: it is a secret's fingerprint.
        if hash.parse::<bcrypt::HashParts>().is_err() {
            errors.push(format!("basic_auth_users.{user} is not a bcrypt hash"));
            continue;
        }
        if user.is_empty() || user.contains(':') {
            errors.push(format!("basic_auth_users: invalid user name {user:?}"));
            continue;
        }
        users.insert(user.to_owned(), hash.to_owned());
    }
    users
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> (Option<WebConfig>, Vec<String>) {
        let mut errors = Vec::new();
        let config = parse(text, Path::new("/etc/saltsight/web.yml"), &mut errors);
        (config, errors)
    }

    #[test]
    fn node_exporter_style_files_parse() {
        let hash = bcrypt::hash("secret", 4).unwrap();
        let (config, errors) = parsed(&format!(
            "tls_server_config:\n  cert_file: tls/cert.pem\n  key_file: /k.pem\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n  min_version: TLS13\n  prefer_server_cipher_suites: true\nhttp_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\nbasic_auth_users:\n  prometheus: '{hash}'\n"
        ));
        assert_eq!(errors, Vec::<String>::new());
        let config = config.unwrap();
        let tls = config.tls.unwrap();
        assert_eq!(tls.cert_file, Path::new("/etc/saltsight/tls/cert.pem"));
        assert_eq!(tls.key_file, Path::new("/k.pem"));
        assert_eq!(
            tls.client_ca_file.as_deref(),
            Some(Path::new("/etc/saltsight/ca.pem"))
        );
        assert_eq!(tls.client_auth, ClientAuth::RequireAndVerify);
        assert_eq!(tls.min_version, TlsVersion::Tls13);
        assert_eq!(
            config.headers,
            vec![("X-Frame-Options".into(), "deny".into())]
        );
        assert_eq!(config.basic_auth_users["prometheus"], hash);
        // An empty file is valid: plain HTTP, no auth.
        let (empty, errors) = parsed("");
        assert!(errors.is_empty() && empty.unwrap().tls.is_none());
    }

    #[test]
    fn mistakes_are_all_named_and_hashes_never_echoed() {
        let (_, errors) = parsed(
            "tls_server_config:\n  cert_file: c.pem\n  client_auth_type: RequireAnyClientCert\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n  min_version: TLS10\nbasic_auth_users:\n  u: $2y$10$notahash\nhttp_server_config:\n  headers:\n    Server: x\nextra: 1\n",
        );
        let all = errors.join("\n");
        for expected in [
            "without verifying",
            "cipher_suites is not supported",
            "TLS before 1.2",
            "basic_auth_users.u is not a bcrypt hash",
            "header \"Server\" cannot be set",
            "unknown key \"extra\"",
            "needs both cert_file and key_file",
        ] {
            assert!(all.contains(expected), "{expected:?} not in:\n{all}");
        }
        assert!(!all.contains("notahash"), "{all}");
        let (_, errors) =
            parsed("tls_server_config:\n  cert_file: c\n  key_file: k\n  client_ca_file: ca\n");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("NoClientCert"));
    }
}
