//! Sends an HTTP output's spooled batches upstream, oldest first, one at a time.
//!
//! - 2xx: the batch leaves the spool.
//! - 429 or 503: wait as `Retry-After` says (capped), else back off; retry.
//! - other 5xx, 408, connection errors, timeouts: back off (full jitter); retry
//!   without limit. The spool's bound, not the sender, decides what is dropped.
//! - other 4xx (and 3xx: redirects are not followed): the batch moves to the
//!   dead-letter directory with the status and response body; counted, logged.

use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

use super::encode::clickhouse_query;
use super::retry::{Backoff, parse_retry_after};
use super::spool::{Sealed, Spool};
use crate::config::outputs::{Encoding, HttpAuth, HttpOutputConfig, RetryConfig};
use crate::time::Stamp;

/// The response body kept for a dead letter and shown in logs, at most.
const BODY_KEEP_BYTES: usize = 64 << 10;
const BODY_LOG_BYTES: usize = 512;

#[derive(Debug, thiserror::Error)]
pub enum HttpSetupError {
    #[error("url {0:?} is not a valid URL: {1}")]
    Url(String, String),
    #[error(
        "url {0:?} holds credentials; use bearer_token_file or basic_auth_password_file instead"
    )]
    CredentialsInUrl(String),
    #[error("header {0:?}: {1}")]
    Header(String, String),
    #[error("ca_file: {0}")]
    Ca(String),
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

/// What one request came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Attempt {
    Delivered,
    Retry {
        status: Option<u16>,
        /// Upstream's `Retry-After`, when it sent one with 429 or 503.
        after: Option<Duration>,
        error: String,
    },
    Reject {
        status: u16,
        body: String,
    },
}

pub struct HttpSender {
    name: String,
    client: reqwest::Client,
    url: reqwest::Url,
    /// The URL without its query, for logs and dead letters.
    shown_url: String,
    encoding: Encoding,
    gzip: bool,
    retry: RetryConfig,
}

impl HttpSender {
    pub fn new(name: &str, config: &HttpOutputConfig) -> Result<Self, HttpSetupError> {
        let mut url = reqwest::Url::parse(&config.url)
            .map_err(|e| HttpSetupError::Url(config.url.clone(), e.to_string()))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(HttpSetupError::CredentialsInUrl(
                url.host_str().unwrap_or("").to_string(),
            ));
        }
        let mut shown = url.clone();
        shown.set_query(None);
        if config.encoding == Encoding::ClickHouse {
            url.query_pairs_mut()
                .append_pair("query", &clickhouse_query(&config.table))
                // Rows from a newer saltsight into an older table keep flowing.
                .append_pair("input_format_skip_unknown_fields", "1");
        }
        let mut headers = HeaderMap::new();
        for (name, value) in &config.headers {
            let name_parsed = HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| HttpSetupError::Header(name.clone(), e.to_string()))?;
            let value_parsed = HeaderValue::from_str(value)
                .map_err(|e| HttpSetupError::Header(name.clone(), e.to_string()))?;
            headers.insert(name_parsed, value_parsed);
        }
        let content_type = match config.encoding {
            Encoding::Ndjson => "application/x-ndjson",
            Encoding::ClickHouse => "text/plain; charset=utf-8",
        };
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        if config.gzip {
            headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        match &config.auth {
            HttpAuth::None => {}
            HttpAuth::Bearer(token) => {
                let mut value = HeaderValue::from_str(&format!("Bearer {}", token.expose()))
                    .map_err(|_| {
                        HttpSetupError::Header(
                            "Authorization".into(),
                            "the bearer token holds characters a header cannot".into(),
                        )
                    })?;
                value.set_sensitive(true);
                headers.insert(header::AUTHORIZATION, value);
            }
            HttpAuth::Basic { user, password } => {
                let mut value = basic_auth_value(user, password.expose())?;
                value.set_sensitive(true);
                headers.insert(header::AUTHORIZATION, value);
            }
        }
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("saltsight/", env!("CARGO_PKG_VERSION")))
            .default_headers(headers)
            .connect_timeout(config.connect_timeout)
            .timeout(config.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy();
        if let Some(pem) = &config.ca_pem {
            let certs = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| HttpSetupError::Ca(e.to_string()))?;
            builder = builder.tls_certs_merge(certs);
        }
        let client = builder
            .build()
            .map_err(|e| HttpSetupError::Client(e.to_string()))?;
        Ok(Self {
            name: name.to_string(),
            client,
            url,
            shown_url: shown.to_string(),
            encoding: config.encoding,
            gzip: config.gzip,
            retry: config.retry,
        })
    }

    /// The request body for a batch: gzipped (once, reused by every retry).
    pub fn prepare(&self, body: &[u8]) -> Bytes {
        if !self.gzip {
            return Bytes::copy_from_slice(body);
        }
        let mut encoder =
            GzEncoder::new(Vec::with_capacity(body.len() / 4 + 64), Compression::fast());
        // Writing into a Vec cannot fail.
        let _ = std::io::Write::write_all(&mut encoder, body);
        Bytes::from(encoder.finish().unwrap_or_default())
    }

    /// One POST of a prepared body.
    pub async fn attempt(&self, body: Bytes) -> Attempt {
        let response = match self.client.post(self.url.clone()).body(body).send().await {
            Ok(response) => response,
            Err(e) => {
                return Attempt::Retry {
                    status: None,
                    after: None,
                    error: error_chain(&e),
                };
            }
        };
        let status = response.status();
        if status.is_success() {
            return Attempt::Delivered;
        }
        let code = status.as_u16();
        let retry_after = response
            .headers()
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, SystemTime::now()));
        let body = read_capped(response).await;
        match code {
            429 | 503 => Attempt::Retry {
                status: Some(code),
                after: retry_after,
                error: body,
            },
            408 | 500..=599 => Attempt::Retry {
                status: Some(code),
                after: None,
                error: body,
            },
            _ => Attempt::Reject { status: code, body },
        }
    }

    /// Sends the spool's batches until `cancel`. A batch in flight when `cancel`
    /// fires stays in the spool and is sent again on the next start.
    pub async fn run(self, spool: Spool, cancel: CancellationToken) {
        let span = info_span!("sender", output = %self.name);
        async move {
            let mut backoff = Backoff::new(self.retry);
            while let Some(sealed) = spool.next(&cancel).await {
                let segment = match spool.read(sealed) {
                    Ok(Some(segment)) => segment,
                    Ok(None) => continue,
                    Err(e) => {
                        warn!(error = %e, "Cannot read a spooled batch; retrying.");
                        if sleep_or_cancel(backoff.next_delay(), &cancel).await {
                            return;
                        }
                        continue;
                    }
                };
                if segment.records == 0 {
                    spool.forget(sealed.seq);
                    continue;
                }
                if segment.encoding != self.encoding {
                    let why = serde_json::json!({
                        "output": self.name,
                        "url": self.shown_url,
                        "reason": format!("the batch is encoded as {}, the output now sends {}", segment.encoding.as_str(), self.encoding.as_str()),
                        "records": segment.records,
                        "at": Stamp::from_system_time(SystemTime::now()).to_string(),
                    });
                    self.dead_letter(&spool, sealed, &why);
                    continue;
                }
                let body = self.prepare(&segment.body);
                if !self.deliver(&spool, sealed, body, &mut backoff, &cancel).await {
                    return;
                }
            }
        }
        .instrument(span)
        .await;
    }

    /// Tries one batch until it is delivered or dead-lettered (true), or `cancel`
    /// (false).
    async fn deliver(
        &self,
        spool: &Spool,
        sealed: Sealed,
        body: Bytes,
        backoff: &mut Backoff,
        cancel: &CancellationToken,
    ) -> bool {
        let mut failures = 0u32;
        loop {
            let attempt = tokio::select! {
                attempt = self.attempt(body.clone()) => attempt,
                () = cancel.cancelled() => return false,
            };
            match attempt {
                Attempt::Delivered => {
                    debug!(
                        seq = sealed.seq,
                        records = sealed.records,
                        "Batch delivered."
                    );
                    if failures > 0 {
                        info!(
                            failures,
                            "Upstream took the batch after {failures} failed attempt(s)."
                        );
                    }
                    spool.delivered(sealed);
                    backoff.reset();
                    return true;
                }
                Attempt::Retry {
                    status,
                    after,
                    error,
                } => {
                    failures += 1;
                    spool.stats().retries.fetch_add(1, Ordering::Relaxed);
                    let wait = match after {
                        Some(asked) => backoff.honour(asked),
                        None => backoff.next_delay(),
                    };
                    // The first failure, then every 10th: an outage of hours
                    // stays readable.
                    if failures == 1 || failures % 10 == 0 {
                        warn!(
                            url = %self.shown_url,
                            status = status.map(|s| s.to_string()).unwrap_or_else(|| "none".into()),
                            error = %cap(&error, BODY_LOG_BYTES),
                            failures,
                            retry_in_ms = wait.as_millis() as u64,
                            honours_retry_after = after.is_some(),
                            pending_batches = spool.pending(),
                            "Upstream did not take the batch; retrying."
                        );
                    }
                    if sleep_or_cancel(wait, cancel).await {
                        return false;
                    }
                }
                Attempt::Reject { status, body } => {
                    let why = serde_json::json!({
                        "output": self.name,
                        "url": self.shown_url,
                        "status": status,
                        "response_body": body,
                        "records": sealed.records,
                        "at": Stamp::from_system_time(SystemTime::now()).to_string(),
                    });
                    self.dead_letter(spool, sealed, &why);
                    backoff.reset();
                    return true;
                }
            }
        }
    }

    fn dead_letter(&self, spool: &Spool, sealed: Sealed, why: &serde_json::Value) {
        let dead_total = spool.stats().dead_batches.load(Ordering::Relaxed) + 1;
        match spool.dead_letter(sealed, why) {
            Ok(()) => warn!(
                url = %self.shown_url,
                status = why["status"].as_u64().unwrap_or(0),
                reason = %cap(why["response_body"].as_str().or(why["reason"].as_str()).unwrap_or(""), BODY_LOG_BYTES),
                records = sealed.records,
                dead_letter_dir = %spool.dir().join("dead-letter").display(),
                dead_batches_total = dead_total,
                "Upstream refused the batch; moved to the dead-letter directory."
            ),
            Err(e) => {
                // It stays in the spool, and is tried again after a restart.
                warn!(error = %e, "Cannot move a refused batch to the dead-letter directory.");
                spool.forget_in_index(sealed.seq);
            }
        }
    }
}

/// True when cancelled.
async fn sleep_or_cancel(wait: Duration, cancel: &CancellationToken) -> bool {
    tokio::select! {
        () = tokio::time::sleep(wait) => false,
        () = cancel.cancelled() => true,
    }
}

fn basic_auth_value(user: &str, password: &str) -> Result<HeaderValue, HttpSetupError> {
    let encoded = crate::base64::encode(format!("{user}:{password}").as_bytes());
    HeaderValue::from_str(&format!("Basic {encoded}")).map_err(|_| {
        HttpSetupError::Header(
            "Authorization".into(),
            "the user name holds characters a header cannot".into(),
        )
    })
}

async fn read_capped(mut response: reqwest::Response) -> String {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = BODY_KEEP_BYTES.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= BODY_KEEP_BYTES {
            break;
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

fn cap(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The error and its causes on one line ("error sending request: connection refused").
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clickhouse_urls_carry_the_insert_and_no_credentials_are_accepted_inline() {
        let mut config = HttpOutputConfig::with_defaults(
            "http://127.0.0.1:8123/?database=x",
            Encoding::ClickHouse,
        );
        let sender = HttpSender::new("ch", &config).unwrap();
        let query: Vec<(String, String)> = sender.url.query_pairs().into_owned().collect();
        assert_eq!(
            query,
            vec![
                ("database".into(), "x".into()),
                (
                    "query".into(),
                    "INSERT INTO saltsight.records FORMAT JSONEachRow".into()
                ),
                ("input_format_skip_unknown_fields".into(), "1".into()),
            ]
        );
        assert_eq!(sender.shown_url, "http://127.0.0.1:8123/");
        config.url = "http://user:pw@127.0.0.1:8123/".into();
        let error = HttpSender::new("ch", &config).err().expect("refused");
        assert!(!error.to_string().contains("pw"), "{error}");
    }

    #[test]
    fn gzip_bodies_decompress_to_the_batch() {
        let config = HttpOutputConfig::with_defaults("http://127.0.0.1:1/", Encoding::Ndjson);
        let sender = HttpSender::new("up", &config).unwrap();
        let body = b"{\"a\":1}\n".repeat(100);
        let gz = sender.prepare(&body);
        assert!(gz.len() < body.len() / 4);
        let mut decoded = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut decoded)
            .unwrap();
        assert_eq!(decoded, body);
    }
}
