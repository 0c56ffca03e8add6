//! An HTTP upstream: one POST per batch (gzipped once, reused by every retry),
//! and what its reply means (`deliver::Attempt`):
//!
//! - 2xx: delivered.
//! - 429 or 503: retry, after `Retry-After` when it says (capped).
//! - other 5xx, 408, connection errors, timeouts: retry.
//! - other 4xx (and 3xx: redirects are not followed): refused for good.

use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};

use super::config::{HttpAuth, HttpSettings};
use crate::sink::deliver::{Attempt, Upstream};
use crate::sink::encode::{Encoding, clickhouse_query};
use crate::sink::retry::parse_retry_after;

/// The response body kept for a dead letter, at most.
const BODY_KEEP_BYTES: usize = 64 << 10;

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

/// An HTTP output's upstream.
pub struct HttpUpstream {
    client: reqwest::Client,
    url: reqwest::Url,
    /// The URL without its query, for logs and dead letters.
    shown_url: String,
    encoding: Encoding,
    gzip: bool,
}

impl HttpUpstream {
    pub fn new(config: &HttpSettings) -> Result<Self, HttpSetupError> {
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
            Encoding::Otlp | Encoding::OtlpSpans => "application/x-protobuf",
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
        // reqwest is built without a crypto provider of its own: it uses the
        // process's default, rustls' ring one (installed once; a second call
        // finds it there).
        let _ = rustls::crypto::ring::default_provider().install_default();
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
            client,
            url,
            shown_url: shown.to_string(),
            encoding: config.encoding,
            gzip: config.gzip,
        })
    }
}

impl Upstream for HttpUpstream {
    fn shown(&self) -> &str {
        &self.shown_url
    }

    fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// The request body for a batch: gzipped (once, reused by every retry).
    fn prepare(&self, body: &[u8]) -> Bytes {
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
    async fn attempt(&self, body: Bytes) -> Attempt {
        self.post(body, false).await.0
    }
}

impl HttpUpstream {
    /// One POST of a prepared body; with `read_reply`, a 2xx's body too
    /// (capped), for an upstream whose success can be partial (OTLP).
    pub async fn post(&self, body: Bytes, read_reply: bool) -> (Attempt, Option<Bytes>) {
        let response = match self.client.post(self.url.clone()).body(body).send().await {
            Ok(response) => response,
            Err(e) => {
                let attempt = Attempt::Retry {
                    status: None,
                    after: None,
                    error: error_chain(&e),
                };
                return (attempt, None);
            }
        };
        let status = response.status();
        if status.is_success() {
            let reply = if read_reply {
                read_capped_bytes(response).await
            } else {
                None
            };
            return (Attempt::Delivered, reply);
        }
        let code = status.as_u16();
        let retry_after = response
            .headers()
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, SystemTime::now()));
        let body = read_capped(response).await;
        let attempt = match code {
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
        };
        (attempt, None)
    }
}

/// `check-config`'s question: does the upstream answer, within `timeout`?
/// ClickHouse must answer `SELECT 1` with 1; any other upstream must answer a
/// HEAD of its URL with a status that is neither a refusal of the credentials
/// (401, 403, 407) nor a server error. `Ok` says what answered.
pub async fn probe(settings: &HttpSettings, timeout: Duration) -> Result<String, String> {
    let clickhouse = settings.encoding == Encoding::ClickHouse;
    // Its own client: no gzip header on a request without a body, no insert
    // query in the URL, and the short timeout.
    let settings = HttpSettings {
        gzip: false,
        connect_timeout: settings.connect_timeout.min(timeout),
        timeout,
        encoding: Encoding::Ndjson,
        ..settings.clone()
    };
    let upstream = HttpUpstream::new(&settings).map_err(|e| e.to_string())?;
    let (what, request) = if clickhouse {
        let mut url = upstream.url.clone();
        url.query_pairs_mut().append_pair("query", "SELECT 1");
        ("SELECT 1", upstream.client.get(url))
    } else {
        ("HEAD", upstream.client.head(upstream.url.clone()))
    };
    let response = request.send().await.map_err(|e| error_chain(&e))?;
    let status = response.status();
    let body = read_capped(response).await;
    let body = body.trim();
    let said = if body.is_empty() {
        format!("{what} answered {status}")
    } else {
        format!(
            "{what} answered {status}: {}",
            crate::plain::within(body, 200)
        )
    };
    match status.as_u16() {
        401 | 403 | 407 => Err(format!("{said} (check the credentials)")),
        500..=599 => Err(said),
        200 if clickhouse && body == "1" => Ok(said),
        _ if clickhouse => Err(said),
        _ => Ok(said),
    }
}

fn basic_auth_value(user: &str, password: &str) -> Result<HeaderValue, HttpSetupError> {
    let encoded = STANDARD.encode(format!("{user}:{password}").as_bytes());
    HeaderValue::from_str(&format!("Basic {encoded}")).map_err(|_| {
        HttpSetupError::Header(
            "Authorization".into(),
            "the user name holds characters a header cannot".into(),
        )
    })
}

async fn read_capped(response: reqwest::Response) -> String {
    let body = read_capped_bytes(response).await.unwrap_or_default();
    String::from_utf8_lossy(&body).into_owned()
}

/// A response's body, at most [`BODY_KEEP_BYTES`] of it.
async fn read_capped_bytes(mut response: reqwest::Response) -> Option<Bytes> {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = BODY_KEEP_BYTES.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= BODY_KEEP_BYTES {
            break;
        }
    }
    Some(Bytes::from(body))
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
        let mut config =
            HttpSettings::with_defaults("http://127.0.0.1:8123/?database=x", Encoding::ClickHouse);
        let sender = HttpUpstream::new(&config).unwrap();
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
        let error = HttpUpstream::new(&config).err().expect("refused");
        assert!(!error.to_string().contains("pw"), "{error}");
    }

    #[test]
    fn gzip_bodies_decompress_to_the_batch() {
        let config = HttpSettings::with_defaults("http://127.0.0.1:1/", Encoding::Ndjson);
        let sender = HttpUpstream::new(&config).unwrap();
        let body = b"{\"a\":1}\n".repeat(100);
        let gz = sender.prepare(&body);
        assert!(gz.len() < body.len() / 4);
        let mut decoded = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut decoded)
            .unwrap();
        assert_eq!(decoded, body);
    }
}
