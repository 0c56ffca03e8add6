//! What the running agent says of the bus, asked on its own `/metrics` over
//! loopback (`saltsight status`): connected or not, and the bus lag's p99 over
//! the last `pressure.sustain`. Only where the config lets it be asked plainly:
//! metrics on, a fixed port, no TLS or basic auth (those are for Prometheus);
//! otherwise the history and the spools are all status reads.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::time::Duration;

use serde::Serialize;

use crate::config::Config;
use crate::config::metrics::ListenAddress;

/// A scrape read at most (the whole exposition is tens of KB).
const MAX_BYTES: u64 = 8 << 20;
const TIMEOUT: Duration = Duration::from_secs(2);

/// The agent's answer, or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Live {
    /// Where it was asked.
    pub address: String,
    /// `saltsight_bus_connected`, when it answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connected: Option<bool>,
    /// `saltsight_master_bus_lag_p99_seconds`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bus_lag_p99_s: Option<f64>,
    /// Why it could not be asked (no agent answering, a bad answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unanswered: Option<String>,
}

/// Where the agent this config runs serves `/metrics` on loopback, when it
/// can be asked plainly.
pub fn address(config: &Config) -> Option<SocketAddr> {
    let metrics = &config.metrics;
    if !metrics.enabled || metrics.web.is_some() {
        return None;
    }
    let addr = match metrics.listen {
        ListenAddress::Any(port) => SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port),
        ListenAddress::Addr(a) if a.ip().is_unspecified() => {
            let loopback = match a.ip() {
                IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
            };
            SocketAddr::new(loopback, a.port())
        }
        ListenAddress::Addr(a) => a,
    };
    (addr.port() != 0).then_some(addr)
}

/// The value of an unlabelled sample.
fn sample(exposition: &str, name: &str) -> Option<f64> {
    exposition
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Asks the agent at `addr`.
pub fn ask(addr: SocketAddr) -> Live {
    let mut live = Live {
        address: addr.to_string(),
        connected: None,
        bus_lag_p99_s: None,
        unanswered: None,
    };
    let answer = (|| -> std::io::Result<String> {
        let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT)?;
        stream.set_read_timeout(Some(TIMEOUT))?;
        stream.set_write_timeout(Some(TIMEOUT))?;
        stream
            .write_all(b"GET /metrics HTTP/1.0\r\nHost: saltsight\r\nAccept: text/plain\r\n\r\n")?;
        let mut body = String::new();
        stream.take(MAX_BYTES).read_to_string(&mut body)?;
        Ok(body)
    })();
    match answer {
        Err(error) => live.unanswered = Some(format!("no saltsight answering ({error})")),
        Ok(text) if !text.starts_with("HTTP/1.") || !text.contains(" 200 ") => {
            let status = text.lines().next().unwrap_or_default().to_owned();
            live.unanswered = Some(format!("it answered {status:?}"));
        }
        Ok(text) => {
            live.connected = sample(&text, "saltsight_bus_connected").map(|v| v > 0.0);
            live.bus_lag_p99_s = sample(&text, "saltsight_master_bus_lag_p99_seconds");
            if live.connected.is_none() {
                live.unanswered = Some("its /metrics has no saltsight_bus_connected".into());
            }
        }
    }
    live
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unlabelled_sample_is_read_and_a_prefix_is_not_it() {
        let text = "saltsight_bus_connected_total 9\nsaltsight_bus_connected 1\nsaltsight_master_bus_lag_p99_seconds 0.25\n";
        assert_eq!(sample(text, "saltsight_bus_connected"), Some(1.0));
        assert_eq!(
            sample(text, "saltsight_master_bus_lag_p99_seconds"),
            Some(0.25)
        );
        assert_eq!(sample(text, "saltsight_nope"), None);
    }
}
