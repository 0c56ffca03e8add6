//! Alertmanager → the master's bus: `POST /alerts` on the metrics listener
//! (`reactor.alerts`) takes Alertmanager's webhook payload (version 4) and
//! fires one `saltsight/alert/<alertname>` event per alert, so a Reactor SLS
//! can act on any Prometheus alert without salt-api.
//!
//! The payload is checked whole before anything is fired: a body that is not
//! JSON, not version 4, or has no alerts is refused (a 4xx, counted) and fires
//! nothing. Each event is redacted like every event saltsight shows, and its
//! tag keeps only the characters a Reactor glob can match plainly.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Firer;
use crate::metrics::server::{AlertWebhook, WebhookRefusal};
use crate::record::redact::Redactor;

/// Alerts one request may carry (Alertmanager sends a group's at once; its
/// `max_alerts` is 0, unlimited, by default).
const MAX_ALERTS: usize = 1_000;
/// Bytes of an alert name kept in the tag.
const MAX_NAME: usize = 128;

/// Alertmanager's webhook body (`version: "4"`), the fields saltsight reads.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Payload {
    version: String,
    #[serde(default)]
    receiver: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    group_key: String,
    #[serde(default)]
    external_url: String,
    #[serde(default)]
    truncated_alerts: u64,
    alerts: Vec<Alert>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct Alert {
    #[serde(default)]
    status: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    #[serde(default)]
    starts_at: String,
    #[serde(default)]
    ends_at: String,
    #[serde(
        default,
        rename(deserialize = "generatorURL", serialize = "generatorURL")
    )]
    generator_url: String,
    #[serde(default)]
    fingerprint: String,
}

/// The webhook: parses, redacts, fires.
pub struct Alerts {
    firer: Arc<Firer>,
    redactor: Redactor,
    max_bytes: usize,
}

impl Alerts {
    pub fn new(firer: Arc<Firer>, redactor: Redactor, max_bytes: usize) -> Self {
        Self {
            firer,
            redactor,
            max_bytes,
        }
    }
}

impl AlertWebhook for Alerts {
    fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    fn refused(&self) {
        self.firer.counts.alerts_refused.inc();
    }

    fn receive(&self, body: &[u8]) -> Result<usize, WebhookRefusal> {
        let refuse = |why: String| {
            self.firer.counts.alerts_refused.inc();
            Err(WebhookRefusal::Malformed(why))
        };
        let payload: Payload = match serde_json::from_slice(body) {
            Ok(payload) => payload,
            Err(e) => return refuse(format!("not Alertmanager's webhook payload: {e}")),
        };
        if payload.version != "4" {
            return refuse(format!(
                "webhook payload version {:?}; saltsight reads version \"4\"",
                payload.version
            ));
        }
        if payload.alerts.is_empty() || payload.alerts.len() > MAX_ALERTS {
            return refuse(format!(
                "{} alerts; between 1 and {MAX_ALERTS} are accepted",
                payload.alerts.len()
            ));
        }
        let stamp = super::pull::salt_stamp(std::time::SystemTime::now());
        let mut fired = 0;
        for alert in payload.alerts {
            let name = alert
                .labels
                .get("alertname")
                .map_or("unnamed", String::as_str);
            let tag = format!("saltsight/alert/{}", tag_safe(name));
            let mut data = match serde_json::to_value(&alert) {
                Ok(Value::Object(map)) => map,
                _ => continue,
            };
            data.insert("receiver".into(), payload.receiver.clone().into());
            data.insert("group_status".into(), payload.status.clone().into());
            data.insert("group_key".into(), payload.group_key.clone().into());
            data.insert("external_url".into(), payload.external_url.clone().into());
            data.insert("truncated_alerts".into(), payload.truncated_alerts.into());
            data.insert("_stamp".into(), stamp.clone().into());
            let event = self.redactor.event(&tag, Value::Object(data));
            let event = event.get();
            self.firer.counts.alerts_fired.inc();
            if self.firer.fire(&event.tag, &event.data).is_ok() {
                fired += 1;
                tracing::info!(tag = %event.tag, status = %alert.status, "Fired an Alertmanager alert for the Reactor.");
            }
        }
        Ok(fired)
    }
}

/// An alert name as a tag segment: letters, digits, `_`, `-`, `.` and `:`
/// kept, anything else (a `/`, a space, a `*`) as `_`, at most [`MAX_NAME`] bytes.
fn tag_safe(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':') {
                c
            } else {
                '_'
            }
        })
        .collect();
    out.truncate(MAX_NAME);
    if out.is_empty() {
        out.push_str("unnamed");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alert_names_become_plain_tag_segments() {
        assert_eq!(
            tag_safe("SaltsightMinionsMissing"),
            "SaltsightMinionsMissing"
        );
        assert_eq!(tag_safe("disk/full *now*"), "disk_full__now_");
        assert_eq!(tag_safe(""), "unnamed");
        assert_eq!(tag_safe(&"x".repeat(500)).len(), MAX_NAME);
    }
}
