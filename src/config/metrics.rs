//! `[metrics]`: the HTTP endpoint (listen address, exporter-toolkit web config)
//! and what the catalog exposes (the function labels, opt-in per-minion
//! series, salt-exporter's names). As written, then resolved.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;

use serde::Deserialize;

/// The default port. The Prometheus wiki's "Default port allocations" page has
/// no free port left in 9100-9999; README.md says which port this is and why.
pub const DEFAULT_PORT: u16 = 10097;

/// Functions whose series exist from the start when `metrics.functions` is not
/// given; the functions seen then get their own value too, up to
/// `metrics.max_functions`.
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
pub const MAX_FUNCTIONS: usize = 1_000;
/// Function label values learned by default: more than any fleet's set of
/// functions in daily use, few enough to bound every per-function family.
pub const DEFAULT_MAX_FUNCTIONS: usize = 200;

/// How a label's values are chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelChoice {
    /// Exactly these; the rest are `other`, not counted as refused.
    Listed(Vec<String>),
    /// These first, then the values seen, up to `max` in all; later ones are
    /// `other`, and counted.
    Learned { seed: Vec<String>, max: usize },
}
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
    /// Unset: the functions seen, up to `max_functions`.
    pub functions: Option<Vec<String>>,
    /// Without `functions`: function label values given as first seen, at most.
    pub max_functions: Option<u64>,
    /// Per-minion series (`saltsight_minion_*`). Off by default.
    pub per_minion: Option<bool>,
    /// Minions given per-minion series at most; later ones are refused, counted.
    pub max_minions: Option<u64>,
    /// Also expose salt-exporter's metric names and labels.
    pub salt_exporter_compat: Option<bool>,
    /// salt-exporter's own switches (with `salt_exporter_compat`).
    pub salt_exporter: Option<super::salt_exporter::SaltExporterSection>,
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
    pub functions: LabelChoice,
    pub per_minion: bool,
    pub max_minions: usize,
    /// salt-exporter's series, as configured (`salt_exporter_compat = true`).
    pub salt_exporter: Option<super::salt_exporter::SaltExporterConfig>,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            listen: ListenAddress::Any(DEFAULT_PORT),
            web: None,
            functions: LabelChoice::Learned {
                seed: DEFAULT_FUNCTIONS.iter().map(|f| (*f).to_owned()).collect(),
                max: DEFAULT_MAX_FUNCTIONS,
            },
            per_minion: false,
            max_minions: DEFAULT_MAX_MINIONS as usize,
            salt_exporter: None,
        }
    }
}

/// `[metrics]` with `--web.listen-address` and `--web.config.file` over it;
/// `master_pki_dir` is where salt-exporter's series find the accepted keys.
pub fn resolve(
    section: &MetricsSection,
    listen_flag: Option<&str>,
    web_config_flag: Option<&PathBuf>,
    master_pki_dir: Option<PathBuf>,
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
    let functions = match (&section.functions, section.max_functions) {
        (None, max) => {
            let max = max.unwrap_or(DEFAULT_MAX_FUNCTIONS as u64);
            if max > MAX_FUNCTIONS as u64 {
                errors.push(format!(
                    "metrics.max_functions is {max}; at most {MAX_FUNCTIONS} (each one multiplies the series of every per-function metric)"
                ));
            }
            match defaults.functions {
                LabelChoice::Learned { seed, .. } => LabelChoice::Learned {
                    max: (max as usize).max(seed.len()),
                    seed,
                },
                listed => listed,
            }
        }
        (Some(_), Some(_)) => {
            errors.push(
                "metrics.max_functions bounds the functions learned as seen; with metrics.functions listed, only those are labelled: set one of the two".into(),
            );
            defaults.functions
        }
        (Some(list), None) => {
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
            LabelChoice::Listed(list.clone())
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
        salt_exporter: match (section.salt_exporter_compat, &section.salt_exporter) {
            (Some(true), compat) => Some(super::salt_exporter::resolve(
                &compat.clone().unwrap_or_default(),
                master_pki_dir,
                errors,
            )),
            (_, Some(_)) => {
                errors.push(
                    "[metrics.salt_exporter] configures salt-exporter's series, which are off: set metrics.salt_exporter_compat = true".into(),
                );
                None
            }
            (_, None) => None,
        },
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
        resolve(&section, None, None, None, &mut errors);
        assert_eq!(errors.len(), 4, "{errors:#?}");
        // The flag wins over the file.
        let mut errors = Vec::new();
        let config = resolve(&section, Some("127.0.0.1:1"), None, None, &mut errors);
        assert_eq!(config.listen.to_string(), "127.0.0.1:1");
        assert_eq!(errors.len(), 3);
    }
}
