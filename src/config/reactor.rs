//! `[reactor]`: saltsight's verdicts fired onto the master's bus as
//! `saltsight/...` events for Salt's Reactor, and Alertmanager's webhooks
//! turned into `saltsight/alert/<alertname>` events. Off by default: it is the
//! one write saltsight ever makes (docs/reactor.md).
//!
//! The alert endpoint puts events in front of the Reactor, which can run
//! anything on every minion: on an address other than loopback it must be
//! behind basic auth or required client certificates (the web config), or the
//! config is refused.

use serde::Deserialize;

use super::defaults::{
    DEFAULT_REACTOR_ALERT_MAX_BYTES, DEFAULT_REACTOR_BURST, DEFAULT_REACTOR_MAX_MINIONS,
    DEFAULT_REACTOR_PER_SECOND, DEFAULT_REACTOR_QUEUE,
};
use super::master::{MasterBusSettings, PULL_SOCKET};
use super::metrics::{ListenAddress, MetricsConfig};
use super::web::ClientAuth;
use crate::bus::Endpoint;

crate::label_set! {
    /// What saltsight's verdicts can fire, each under its own tag
    /// (docs/reactor.md).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum FireKind {
        /// `saltsight/job/<jid>/missing`: minions that did not return, with reasons.
        Missing = "missing",
        /// `saltsight/job/<jid>/failed`: the job's root-cause groups.
        Failed = "failed",
        /// `saltsight/incident/<id>/{open,closed}`.
        Incident = "incident",
        /// `saltsight/rollout/<repo>/<commit>/<status>`, when the status changes.
        Rollout = "rollout",
        /// `saltsight/pressure/<id>/{open,closed}`.
        Pressure = "pressure",
        /// `saltsight/alert/<alertname>`: from Alertmanager (`reactor.alerts`).
        Alert = "alert",
    }
}

/// `[reactor]` as written.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ReactorSection {
    pub enabled: Option<bool>,
    pub fire: Option<Vec<String>>,
    pub endpoint: Option<String>,
    pub max_per_second: Option<u64>,
    pub burst: Option<u64>,
    pub queue: Option<u64>,
    pub max_minions: Option<u64>,
    pub alerts: Option<bool>,
    pub alerts_max_bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ReactorConfig {
    /// Verdicts are fired (the pull socket is opened only when this is on).
    pub enabled: bool,
    /// Which verdicts fire (`alert` is governed by `alerts`).
    pub fire: Vec<FireKind>,
    /// The master's pull socket.
    pub endpoint: Endpoint,
    /// Where `endpoint` came from, for `check-config`.
    pub endpoint_origin: String,
    /// Events fired per second at most, with `burst` above it at once; the
    /// rest are counted and dropped.
    pub max_per_second: u32,
    pub burst: u32,
    /// Events waiting for the writer at most; the rest are counted and dropped.
    pub queue: usize,
    /// Minions one event lists at most (the rest counted in it).
    pub max_minions: usize,
    /// `POST /alerts` on the metrics listener takes Alertmanager's webhook.
    pub alerts: bool,
    pub alerts_max_bytes: usize,
}

impl ReactorConfig {
    pub fn fires(&self, kind: FireKind) -> bool {
        self.enabled && self.fire.contains(&kind)
    }
}

impl Default for ReactorConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            fire: FireKind::ALL
                .iter()
                .copied()
                .filter(|k| *k != FireKind::Alert)
                .collect(),
            endpoint: Endpoint::Unix(format!("/var/run/salt/master/{PULL_SOCKET}").into()),
            endpoint_origin: "Salt defaults".into(),
            max_per_second: DEFAULT_REACTOR_PER_SECOND,
            burst: DEFAULT_REACTOR_BURST,
            queue: DEFAULT_REACTOR_QUEUE,
            max_minions: DEFAULT_REACTOR_MAX_MINIONS,
            alerts: false,
            alerts_max_bytes: DEFAULT_REACTOR_ALERT_MAX_BYTES,
        }
    }
}

/// `[reactor]` checked, every problem in `errors`. The pull socket is the
/// master's (`master`), beside the bus endpoint when that was set explicitly
/// (`explicit_bus`), or `reactor.endpoint`.
pub fn resolve(
    section: &ReactorSection,
    explicit_bus: Option<&Endpoint>,
    master: Option<&MasterBusSettings>,
    metrics: &MetricsConfig,
    errors: &mut Vec<String>,
) -> ReactorConfig {
    let d = ReactorConfig::default();
    let enabled = section.enabled.unwrap_or(d.enabled);
    let alerts = section.alerts.unwrap_or(d.alerts);
    let fire = match &section.fire {
        None => d.fire,
        Some(names) => names
            .iter()
            .filter_map(|name| match name.parse::<FireKind>() {
                Ok(FireKind::Alert) => {
                    errors.push("reactor.fire: `alert` is not a verdict; alerts are fired when reactor.alerts = true".into());
                    None
                }
                Ok(kind) => Some(kind),
                Err(_) => {
                    errors.push(format!(
                        "reactor.fire: {name:?} is not one of missing, failed, incident, rollout, pressure"
                    ));
                    None
                }
            })
            .collect(),
    };
    let (endpoint, endpoint_origin) = match (&section.endpoint, explicit_bus, master) {
        (Some(text), _, _) => match text.parse::<Endpoint>() {
            Ok(endpoint) => (endpoint, "reactor.endpoint".to_string()),
            Err(problem) => {
                errors.push(format!("reactor.{problem}"));
                (d.endpoint, String::new())
            }
        },
        (None, Some(Endpoint::Unix(path)), _) => (
            Endpoint::Unix(path.with_file_name(PULL_SOCKET)),
            "beside bus.endpoint".to_string(),
        ),
        (None, Some(Endpoint::Tcp(addr)), master) => {
            let port = master.map_or(4513, |m| m.tcp_master_pull_port);
            (
                Endpoint::Tcp(std::net::SocketAddr::new(addr.ip(), port)),
                "bus.endpoint's host, the master's tcp_master_pull_port".to_string(),
            )
        }
        (None, None, Some(master)) => (master.pull_endpoint(), "the Salt master config".into()),
        (None, None, None) => (d.endpoint, d.endpoint_origin),
    };
    let mut count = |key: &str, value: Option<u64>, default: u64, range: (u64, u64)| match value {
        None => default,
        Some(n) if n < range.0 || n > range.1 => {
            errors.push(format!(
                "reactor.{key} is {n}; it must be between {} and {}",
                range.0, range.1
            ));
            default
        }
        Some(n) => n,
    };
    let max_per_second = count(
        "max_per_second",
        section.max_per_second,
        d.max_per_second.into(),
        (1, 10_000),
    ) as u32;
    let burst = count("burst", section.burst, d.burst.into(), (1, 100_000)) as u32;
    let queue = count("queue", section.queue, d.queue as u64, (1, 100_000)) as usize;
    let max_minions = count(
        "max_minions",
        section.max_minions,
        d.max_minions as u64,
        (1, 100_000),
    ) as usize;
    let alerts_max_bytes = count(
        "alerts_max_bytes",
        section.alerts_max_bytes,
        d.alerts_max_bytes as u64,
        (1024, 64 << 20),
    ) as usize;
    if alerts {
        if !enabled {
            errors.push("reactor.alerts needs reactor.enabled = true: the alerts are fired onto the master's bus".into());
        }
        if !metrics.enabled {
            errors.push("reactor.alerts needs the metrics listener (metrics.enabled): the webhook is served there".into());
        }
        if let Some(problem) = unguarded(metrics) {
            errors.push(problem);
        }
    }
    ReactorConfig {
        enabled,
        fire,
        endpoint,
        endpoint_origin,
        max_per_second,
        burst,
        queue,
        max_minions,
        alerts,
        alerts_max_bytes,
    }
}

/// Why the alert endpoint may not be served as configured: an address other
/// than loopback with neither basic auth nor required client certificates.
fn unguarded(metrics: &MetricsConfig) -> Option<String> {
    let loopback = match metrics.listen {
        ListenAddress::Any(_) => false,
        ListenAddress::Addr(addr) => addr.ip().is_loopback(),
    };
    let web = metrics.web.as_ref();
    let basic_auth = web.is_some_and(|w| !w.basic_auth_users.is_empty());
    let client_certs = web
        .and_then(|w| w.tls.as_ref())
        .is_some_and(|tls| tls.client_auth == ClientAuth::RequireAndVerify);
    (!loopback && !basic_auth && !client_certs).then(|| {
        format!(
            "reactor.alerts on {} (not loopback) needs basic_auth_users or client_auth_type: RequireAndVerifyClientCert in the web config (--web.config.file): an unauthenticated way to put events in front of the Reactor is a way into every minion",
            metrics.listen
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::web::WebConfig;

    fn metrics(listen: &str, users: &[&str], client_auth: Option<ClientAuth>) -> MetricsConfig {
        let web = (!users.is_empty() || client_auth.is_some()).then(|| WebConfig {
            path: "/etc/saltsight/web.yml".into(),
            tls: client_auth.map(|client_auth| crate::config::web::TlsServerConfig {
                cert_file: "c".into(),
                key_file: "k".into(),
                client_auth,
                client_ca_file: Some("ca".into()),
                min_version: crate::config::web::TlsVersion::Tls12,
                max_version: crate::config::web::TlsVersion::Tls13,
            }),
            basic_auth_users: users
                .iter()
                .map(|u| ((*u).to_owned(), "$2y$10$x".to_owned()))
                .collect(),
            headers: Vec::new(),
        });
        MetricsConfig {
            listen: crate::config::metrics::parse_listen_address(listen).unwrap(),
            web,
            ..MetricsConfig::default()
        }
    }

    fn alerts(metrics: &MetricsConfig) -> Vec<String> {
        let mut errors = Vec::new();
        let section = ReactorSection {
            enabled: Some(true),
            alerts: Some(true),
            ..ReactorSection::default()
        };
        resolve(&section, None, None, metrics, &mut errors);
        errors
    }

    #[test]
    fn the_alert_endpoint_is_refused_off_loopback_without_auth() {
        let refused = alerts(&metrics(":9470", &[], None));
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(refused[0].contains("reactor.alerts on :9470 (not loopback)"));
        assert_eq!(alerts(&metrics("192.0.2.1:9470", &[], None)).len(), 1);
        assert_eq!(
            alerts(&metrics(":9470", &[], Some(ClientAuth::VerifyIfGiven))).len(),
            1,
            "optional client certificates are no guard"
        );
        assert!(alerts(&metrics("127.0.0.1:9470", &[], None)).is_empty());
        assert!(alerts(&metrics("[::1]:9470", &[], None)).is_empty());
        assert!(alerts(&metrics(":9470", &["alertmanager"], None)).is_empty());
        assert!(alerts(&metrics(":9470", &[], Some(ClientAuth::RequireAndVerify))).is_empty());
    }

    #[test]
    fn off_by_default_and_the_pull_socket_follows_the_bus() {
        let mut errors = Vec::new();
        let m = MetricsConfig::default();
        let config = resolve(&ReactorSection::default(), None, None, &m, &mut errors);
        assert!(!config.enabled && !config.alerts && errors.is_empty());
        assert!(!config.fires(FireKind::Missing));
        let bus = Endpoint::Unix("/srv/lab/run/master_event_pub.ipc".into());
        let config = resolve(
            &ReactorSection::default(),
            Some(&bus),
            None,
            &m,
            &mut errors,
        );
        assert_eq!(
            config.endpoint,
            Endpoint::Unix("/srv/lab/run/master_event_pull.ipc".into())
        );
        let bus = Endpoint::Tcp("127.0.0.1:47120".parse().unwrap());
        let config = resolve(
            &ReactorSection::default(),
            Some(&bus),
            None,
            &m,
            &mut errors,
        );
        assert_eq!(
            config.endpoint,
            Endpoint::Tcp("127.0.0.1:4513".parse().unwrap())
        );
        let section = ReactorSection {
            enabled: Some(true),
            fire: Some(vec!["missing".into(), "alert".into(), "lunch".into()]),
            alerts: Some(true),
            max_per_second: Some(0),
            ..ReactorSection::default()
        };
        resolve(&section, None, None, &m, &mut errors);
        assert_eq!(errors.len(), 4, "{errors:?}");
    }
}
