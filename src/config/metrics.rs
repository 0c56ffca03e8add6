//! `[metrics]`: the HTTP endpoint (listen address, exporter-toolkit web config)
//! and what the catalog exposes (the function allow-list, opt-in per-minion
//! series, salt-exporter's names). As written, then resolved.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;

use serde::Deserialize;

/// The default port. The Prometheus wiki's "Default port allocations" page has
/// no free port left in 9100-9999; README.md says which port this is and why.
pub const DEFAULT_PORT: u16 = 10097;

/// Functions that get their own `function` label value by default; every other
/// function is `other`.
pub const DEFAULT_FUNCTIONS: &[&str] = &[
    "state.apply",
    "state.highstate",
    "state.sls",
    "state.sls_id",
    "state.single",
    "runner.state.orchestrate",
    "cmd.run",
    "cmd.script",
    "pkg.install",
    "pkg.upgrade",
    "service.restart",
    "saltutil.sync_all",
    "saltutil.refresh_pillar",
    "test.ping",
];

/// More functions than this would make the `function` label a cardinality risk.
pub const MAX_FUNCTIONS: usize = 100;
pub const DEFAULT_MAX_MINIONS: u64 = 5_000;

#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MetricsSection {
    /// Serve /metrics, /, /healthz and /readyz while `run` runs.
    pub enabled: Option<bool>,
    /// `host:port`, `[v6]:port`, or `:port` for every interface.
    pub listen_address: Option<String>,
    /// TLS and basic auth, in the Prometheus exporter-toolkit format.
    pub web_config_file: Option<PathBuf>,
    /// Functions with their own `function` label value; the rest are `other`.
    pub functions: Option<Vec<String>>,
    /// Per-minion series (`saltsight_minion_*`). Off by default.
    pub per_minion: Option<bool>,
    /// Minions given per-minion series at most; later ones are refused, counted.
    pub max_minions: Option<u64>,
    /// Also expose salt-exporter's metric names and labels.
    pub salt_exporter_compat: Option<bool>,
}

/// Where the endpoint listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenAddress {
    /// `:port`: every interface, IPv6 and IPv4.
    Any(u16),
    Addr(SocketAddr),
}

impl ListenAddress {
    /// The address to bind (`[::]` for every interface).
    pub fn socket_addr(self) -> SocketAddr {
        match self {
            ListenAddress::Any(port) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
            ListenAddress::Addr(addr) => addr,
        }
    }
}

impl std::fmt::Display for ListenAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListenAddress::Any(port) => write!(f, ":{port}"),
            ListenAddress::Addr(addr) => write!(f, "{addr}"),
        }
    }
}

/// Parses `:port`, `host:port` (an IP literal or `localhost`) and `[v6]:port`.
pub fn parse_listen_address(text: &str) -> Result<ListenAddress, String> {
    let bad = || format!("metrics.listen_address {text:?} is not host:port, [v6]:port or :port");
    if let Some(port) = text.strip_prefix(':') {
        return port.parse().map(ListenAddress::Any).map_err(|_| bad());
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(ListenAddress::Addr(addr));
    }
    let (host, port) = text.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    match host {
        "localhost" => Ok(ListenAddress::Addr(SocketAddr::from((
            [127, 0, 0, 1],
            port,
        )))),
        _ => Err(format!(
            "metrics.listen_address {text:?}: the host must be an IP address or localhost"
        )),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsConfig {
    pub enabled: bool,
    pub listen: ListenAddress,
    /// `--web.config.file`, read and checked.
    pub web: Option<super::web::WebConfig>,
    pub functions: Vec<String>,
    pub per_minion: bool,
    pub max_minions: usize,
    pub salt_exporter_compat: bool,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            listen: ListenAddress::Any(DEFAULT_PORT),
            web: None,
            functions: DEFAULT_FUNCTIONS.iter().map(|f| (*f).to_owned()).collect(),
            per_minion: false,
            max_minions: DEFAULT_MAX_MINIONS as usize,
            salt_exporter_compat: false,
        }
    }
}

/// `[metrics]` with `--web.listen-address` and `--web.config.file` over it.
pub fn resolve(
    section: &MetricsSection,
    listen_flag: Option<&str>,
    web_config_flag: Option<&PathBuf>,
    errors: &mut Vec<String>,
) -> MetricsConfig {
    let defaults = MetricsConfig::default();
    let listen = match listen_flag.or(section.listen_address.as_deref()) {
        None => defaults.listen,
        Some(text) => parse_listen_address(text).unwrap_or_else(|e| {
            errors.push(e);
            defaults.listen
        }),
    };
    let functions = match &section.functions {
        None => defaults.functions,
        Some(list) => {
            let mut seen = std::collections::BTreeSet::new();
            for f in list {
                if f.trim().is_empty() || f == "other" {
                    errors.push(format!(
                        "metrics.functions: {f:?} cannot be a function label (\"other\" is every function not listed)"
                    ));
                } else if !seen.insert(f.as_str()) {
                    errors.push(format!("metrics.functions lists {f:?} twice"));
                }
            }
            if list.len() > MAX_FUNCTIONS {
                errors.push(format!(
                    "metrics.functions lists {} functions; at most {MAX_FUNCTIONS} (each one multiplies the series of every per-function metric)",
                    list.len()
                ));
            }
            list.clone()
        }
    };
    let max_minions = section.max_minions.unwrap_or(DEFAULT_MAX_MINIONS);
    if max_minions == 0 || max_minions > 1_000_000 {
        errors.push(format!(
            "metrics.max_minions is {max_minions}; it must be between 1 and 1000000"
        ));
    }
    MetricsConfig {
        enabled: section.enabled.unwrap_or(defaults.enabled),
        listen,
        web: web_config_flag
            .or(section.web_config_file.as_ref())
            .and_then(|path| super::web::load(path, errors)),
        functions,
        per_minion: section.per_minion.unwrap_or(false),
        max_minions: max_minions as usize,
        salt_exporter_compat: section.salt_exporter_compat.unwrap_or(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_parse_as_exporters_write_them() {
        assert_eq!(
            parse_listen_address(":10097"),
            Ok(ListenAddress::Any(10097))
        );
        assert_eq!(
            parse_listen_address("127.0.0.1:0"),
            Ok(ListenAddress::Addr("127.0.0.1:0".parse().unwrap()))
        );
        assert_eq!(
            parse_listen_address("[::1]:9"),
            Ok(ListenAddress::Addr("[::1]:9".parse().unwrap()))
        );
        assert_eq!(
            parse_listen_address("localhost:80"),
            Ok(ListenAddress::Addr("127.0.0.1:80".parse().unwrap()))
        );
        assert_eq!(ListenAddress::Any(7).socket_addr().to_string(), "[::]:7");
        for bad in ["10044", ":http", "example.com:80", "1.2.3.4:99999", ""] {
            assert!(parse_listen_address(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bad_metrics_settings_are_all_listed() {
        let section = MetricsSection {
            listen_address: Some("nowhere".into()),
            functions: Some(vec!["cmd.run".into(), "cmd.run".into(), "other".into()]),
            max_minions: Some(0),
            ..MetricsSection::default()
        };
        let mut errors = Vec::new();
        resolve(&section, None, None, &mut errors);
        assert_eq!(errors.len(), 4, "{errors:#?}");
        // The flag wins over the file.
        let mut errors = Vec::new();
        let config = resolve(&section, Some("127.0.0.1:1"), None, &mut errors);
        assert_eq!(config.listen.to_string(), "127.0.0.1:1");
        assert_eq!(errors.len(), 3);
    }
}
