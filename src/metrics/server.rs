//! The HTTP endpoint: `/metrics` (OpenMetrics or the 0.0.4 text format, as the
//! scrape's `Accept` asks: [`super::exposition`]), `/` (a landing page),
//! `/healthz` (the process answers) and `/readyz` (connected to the bus), over
//! HTTP/1.1, with TLS and basic auth when a web config asks for them; and,
//! only when `reactor.alerts` hands it an [`AlertWebhook`], `POST /alerts`
//! (Alertmanager's webhook), behind the same auth, its body bounded.
//!
//! Bounded like everything else: at most [`MAX_CONNECTIONS`] connections at once
//! (more are closed at accept), a header read timeout, a TLS handshake timeout.
//! Only GET and HEAD are answered, and POST on `/alerts` when it is served. The listener is bound before the pipeline
//! starts, so a port in use is an error at start, not a silent absence.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::registry::Registry;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::exposition::Format;
use super::web::{self, BasicAuth, WebError};
use crate::bus::ReaderStats;
use crate::config::metrics::MetricsConfig;
use crate::config::web::WebConfig;

pub const MAX_CONNECTIONS: usize = 64;
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {address} for metrics: {source}")]
    Bind {
        address: String,
        source: std::io::Error,
    },
    #[error("web config: {0}")]
    Web(#[from] WebError),
}

/// Where Alertmanager posts.
pub const ALERTS_PATH: &str = "/alerts";

/// What `POST /alerts` hands its body to (`reactor::alerts`).
pub trait AlertWebhook: Send + Sync {
    /// Bodies above this are refused with a 413, unread.
    fn max_bytes(&self) -> usize;
    /// A request was refused before its body reached [`AlertWebhook::receive`].
    fn refused(&self);
    /// How many alerts were fired, or why the body fired nothing.
    fn receive(&self, body: &[u8]) -> Result<usize, WebhookRefusal>;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookRefusal {
    /// Not a payload the webhook takes: a 400 with the reason.
    Malformed(String),
}

/// What every request needs.
struct Site {
    registry: Arc<Registry>,
    reader: Arc<ReaderStats>,
    alerts: Option<Arc<dyn AlertWebhook>>,
    /// The web config's effect, replaced whole on reload ([`WebSwitch`]).
    web: watch::Receiver<Arc<Web>>,
}

/// What the web config decides: TLS (per connection), basic auth and headers
/// (per request, so a revoked password stops working on open connections too).
struct Web {
    tls: Option<TlsAcceptor>,
    auth: Option<BasicAuth>,
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl Web {
    /// Reads the certificate and key files now: a reload picks up rotated ones.
    fn build(web: Option<&WebConfig>) -> Result<Web, WebError> {
        let tls = web
            .and_then(|w| w.tls.as_ref())
            .map(web::acceptor)
            .transpose()?;
        let auth = web.and_then(|w| BasicAuth::new(w.basic_auth_users.clone()));
        let headers = web
            .map(|w| {
                w.headers
                    .iter()
                    .filter_map(|(name, value)| {
                        Some((
                            HeaderName::from_bytes(name.as_bytes()).ok()?,
                            HeaderValue::from_str(value).ok()?,
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(Web { tls, auth, headers })
    }
}

/// Replaces the running server's web config (SIGHUP).
#[derive(Clone)]
pub struct WebSwitch(watch::Sender<Arc<Web>>);

impl WebSwitch {
    /// Builds the new TLS and auth first; on an error the old ones stay.
    pub fn replace(&self, web: Option<&WebConfig>) -> Result<(), WebError> {
        let web = Web::build(web)?;
        self.0.send_replace(Arc::new(web));
        Ok(())
    }
}

pub struct MetricsServer {
    listener: TcpListener,
    site: Arc<Site>,
    switch: WebSwitch,
}

impl MetricsServer {
    /// Binds the listener and prepares TLS and auth; serving starts with [`serve`].
    pub async fn bind(
        config: &MetricsConfig,
        registry: Arc<Registry>,
        reader: Arc<ReaderStats>,
        alerts: Option<Arc<dyn AlertWebhook>>,
    ) -> Result<MetricsServer, ServeError> {
        let address = config.listen.socket_addr();
        let listener = match TcpListener::bind(address).await {
            Ok(listener) => listener,
            // `:port` on a host without IPv6: every IPv4 interface.
            Err(_) if matches!(config.listen, crate::config::metrics::ListenAddress::Any(_)) => {
                TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], address.port())))
                    .await
                    .map_err(|source| ServeError::Bind {
                        address: config.listen.to_string(),
                        source,
                    })?
            }
            Err(source) => {
                return Err(ServeError::Bind {
                    address: config.listen.to_string(),
                    source,
                });
            }
        };
        let (switch, web) = watch::channel(Arc::new(Web::build(config.web.as_ref())?));
        Ok(MetricsServer {
            listener,
            site: Arc::new(Site {
                registry,
                reader,
                alerts,
                web,
            }),
            switch: WebSwitch(switch),
        })
    }

    /// The handle that replaces the web config while serving.
    pub fn web_switch(&self) -> WebSwitch {
        self.switch.clone()
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Accepts until `cancel`.
    pub async fn serve(self, cancel: CancellationToken) {
        let address = self.local_addr();
        {
            let web = self.site.web.borrow();
            let scope = match address.map(|a| a.ip()) {
                Some(ip) if ip.is_unspecified() => "every interface",
                Some(ip) if ip.is_loopback() => "loopback only",
                _ => "one interface",
            };
            info!(
                address = %address.map_or_else(|| "?".into(), |a| a.to_string()),
                scope,
                tls = web.tls.is_some(),
                basic_auth = web.auth.is_some(),
                alerts = self.site.alerts.is_some(),
                "Serving metrics."
            );
        }
        let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        loop {
            let accepted = tokio::select! {
                accepted = self.listener.accept() => accepted,
                () = cancel.cancelled() => break,
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    warn!(%error, "Metrics endpoint: accept failed.");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let Ok(permit) = permits.clone().try_acquire_owned() else {
                debug!(%peer, "Metrics endpoint: too many connections; closed one.");
                continue;
            };
            let site = self.site.clone();
            let tls = site.web.borrow().tls.clone();
            tokio::spawn(async move {
                let _permit = permit;
                match tls {
                    None => connection(stream, site).await,
                    Some(acceptor) => {
                        match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await
                        {
                            Ok(Ok(stream)) => connection(stream, site).await,
                            Ok(Err(error)) => {
                                debug!(%peer, %error, "Metrics endpoint: TLS handshake failed.")
                            }
                            Err(_) => debug!(%peer, "Metrics endpoint: TLS handshake timed out."),
                        }
                    }
                }
            });
        }
    }
}

async fn connection<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    stream: S,
    site: Arc<Site>,
) {
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let site = site.clone();
        async move {
            let response = match &site.alerts {
                Some(webhook)
                    if request.method() == Method::POST && request.uri().path() == ALERTS_PATH =>
                {
                    let web = site.web.borrow().clone();
                    let response = match refuse_unauthorised(&web, &request) {
                        Some(refused) => {
                            webhook.refused();
                            refused
                        }
                        None => alerts(webhook.as_ref(), request.into_body()).await,
                    };
                    with_headers(&web, response)
                }
                _ => respond(&site, &request),
            };
            Ok::<_, Infallible>(response)
        }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service)
        .await;
    if let Err(error) = served {
        debug!(%error, "Metrics endpoint: connection ended with an error.");
    }
}

/// `POST /alerts`: the body read up to the webhook's bound, then handed over.
async fn alerts<B>(webhook: &dyn AlertWebhook, body: B) -> Response<Full<Bytes>>
where
    B: hyper::body::Body,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    use http_body_util::BodyExt;
    let max = webhook.max_bytes();
    let too_large = || {
        webhook.refused();
        reply(
            StatusCode::PAYLOAD_TOO_LARGE,
            "text/plain",
            format!("the body is over reactor.alerts_max_bytes ({max})\n"),
        )
    };
    if hyper::body::Body::size_hint(&body)
        .exact()
        .is_some_and(|n| n > max as u64)
    {
        return too_large();
    }
    let bytes = match http_body_util::Limited::new(body, max).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => return too_large(),
        Err(error) => {
            webhook.refused();
            return reply(
                StatusCode::BAD_REQUEST,
                "text/plain",
                format!("cannot read the body: {error}\n"),
            );
        }
    };
    match webhook.receive(&bytes) {
        Ok(fired) => reply(
            StatusCode::OK,
            "text/plain",
            format!("fired {fired} alert events\n"),
        ),
        Err(WebhookRefusal::Malformed(why)) => {
            reply(StatusCode::BAD_REQUEST, "text/plain", format!("{why}\n"))
        }
    }
}

fn with_headers(web: &Web, mut response: Response<Full<Bytes>>) -> Response<Full<Bytes>> {
    for (name, value) in &web.headers {
        response.headers_mut().insert(name.clone(), value.clone());
    }
    response
}

/// A 401 when basic auth is configured and the request does not pass it.
fn refuse_unauthorised<B>(web: &Web, request: &Request<B>) -> Option<Response<Full<Bytes>>> {
    let auth = web.auth.as_ref()?;
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if auth.admits(given) {
        return None;
    }
    let mut response = reply(StatusCode::UNAUTHORIZED, "text/plain", "Unauthorized\n");
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"saltsight\""),
    );
    Some(response)
}

fn respond<B>(site: &Site, request: &Request<B>) -> Response<Full<Bytes>> {
    let web = site.web.borrow().clone();
    let mut response = with_headers(&web, route(site, &web, request));
    if request.method() == Method::HEAD {
        *response.body_mut() = Full::new(Bytes::new());
    }
    response
}

fn reply(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    if let Ok(value) = HeaderValue::from_str(content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
}

const LANDING: &str = "<!doctype html>\n<html><head><title>saltsight</title></head><body>\n<h1>saltsight</h1>\n<p>Watches a Salt master's event bus: failed jobs, missing returns, root-cause states.</p>\n<ul>\n<li><a href=\"metrics\">metrics</a></li>\n<li><a href=\"healthz\">healthz</a> (the process answers)</li>\n<li><a href=\"readyz\">readyz</a> (connected to the event bus)</li>\n</ul>\n</body></html>\n";

fn route<B>(site: &Site, web: &Web, request: &Request<B>) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "only GET and HEAD\n",
        );
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    if let Some(refused) = refuse_unauthorised(web, request) {
        return refused;
    }
    match request.uri().path() {
        "/metrics" => {
            let format = Format::negotiate(
                request
                    .headers()
                    .get(header::ACCEPT)
                    .and_then(|v| v.to_str().ok()),
            );
            let mut body = String::new();
            match prometheus_client::encoding::text::encode(&mut body, &site.registry) {
                Ok(()) => {
                    if format == Format::Text {
                        body = super::exposition::to_text_format(&body);
                    }
                    let mut response = reply(StatusCode::OK, format.content_type(), body);
                    response
                        .headers_mut()
                        .insert(header::VARY, HeaderValue::from_static("Accept"));
                    response
                }
                Err(_) => reply(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "text/plain",
                    "encoding failed\n",
                ),
            }
        }
        "/" => reply(StatusCode::OK, "text/html; charset=utf-8", LANDING),
        "/healthz" => reply(StatusCode::OK, "text/plain", "ok\n"),
        "/readyz" if site.reader.connected.load(Ordering::Relaxed) => reply(
            StatusCode::OK,
            "text/plain",
            "ready: connected to the event bus\n",
        ),
        "/readyz" => reply(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            "not ready: not connected to the event bus\n",
        ),
        _ => reply(StatusCode::NOT_FOUND, "text/plain", "not found\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    fn site(auth: Option<BasicAuth>) -> Site {
        let mut registry = Registry::default();
        let c = prometheus_client::metrics::counter::Counter::<u64>::default();
        registry.register("saltsight_test", "help", c.clone());
        c.inc();
        let web = Web {
            tls: None,
            auth,
            headers: vec![(
                HeaderName::from_static("x-frame-options"),
                HeaderValue::from_static("deny"),
            )],
        };
        Site {
            registry: Arc::new(registry),
            reader: Arc::new(ReaderStats::default()),
            alerts: None,
            web: watch::channel(Arc::new(web)).1,
        }
    }

    fn get(site: &Site, method: Method, path: &str, auth: Option<&str>) -> (StatusCode, String) {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        let response = respond(site, &request.body(()).unwrap());
        assert_eq!(response.headers()["x-frame-options"], "deny");
        let status = response.status();
        let body = futures_body(response);
        (status, body)
    }

    fn futures_body(response: Response<Full<Bytes>>) -> String {
        use http_body_util::BodyExt;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let bytes = runtime
            .block_on(response.into_body().collect())
            .unwrap()
            .to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[test]
    fn routes_answer_as_exporters_do() {
        let site = site(None);
        let (status, body) = get(&site, Method::GET, "/metrics", None);
        assert_eq!(status, StatusCode::OK);
        assert!(
            body.contains("# TYPE saltsight_test_total counter\nsaltsight_test_total 1\n")
                && !body.contains("# EOF"),
            "the 0.0.4 text by default: {body}"
        );
        let request = Request::builder()
            .uri("/metrics")
            .header(
                "accept",
                "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
            )
            .body(())
            .unwrap();
        let response = respond(&site, &request);
        assert_eq!(
            response.headers()["content-type"],
            crate::metrics::exposition::OPENMETRICS
        );
        let body = futures_body(response);
        assert!(
            body.contains("# TYPE saltsight_test counter\nsaltsight_test_total 1\n")
                && body.ends_with("# EOF\n"),
            "OpenMetrics when asked: {body}"
        );
        assert_eq!(get(&site, Method::GET, "/healthz", None).0, StatusCode::OK);
        assert_eq!(
            get(&site, Method::GET, "/readyz", None).0,
            StatusCode::SERVICE_UNAVAILABLE
        );
        site.reader.connected.store(true, Ordering::Relaxed);
        assert_eq!(get(&site, Method::GET, "/readyz", None).0, StatusCode::OK);
        assert!(
            get(&site, Method::GET, "/", None)
                .1
                .contains("href=\"metrics\"")
        );
        assert_eq!(
            get(&site, Method::GET, "/nope", None).0,
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            get(&site, Method::POST, "/metrics", None).0,
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(
            get(&site, Method::HEAD, "/metrics", None),
            (StatusCode::OK, String::new())
        );
    }

    #[test]
    fn basic_auth_guards_every_path() {
        let users =
            std::collections::BTreeMap::from([("p".to_owned(), bcrypt::hash("pw", 4).unwrap())]);
        let site = site(BasicAuth::new(users));
        for path in ["/metrics", "/", "/healthz"] {
            assert_eq!(
                get(&site, Method::GET, path, None).0,
                StatusCode::UNAUTHORIZED
            );
        }
        let good = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(b"p:pw")
        );
        assert_eq!(
            get(&site, Method::GET, "/metrics", Some(&good)).0,
            StatusCode::OK
        );
        let bad = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(b"p:nope")
        );
        assert_eq!(
            get(&site, Method::GET, "/metrics", Some(&bad)).0,
            StatusCode::UNAUTHORIZED
        );
    }

    /// A webhook that takes `{"n": <alerts>}` and counts what it refused.
    #[derive(Default)]
    struct Counting {
        refused: std::sync::atomic::AtomicU64,
        received: std::sync::Mutex<Vec<Vec<u8>>>,
    }

    impl AlertWebhook for Counting {
        fn max_bytes(&self) -> usize {
            64
        }
        fn refused(&self) {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
        fn receive(&self, body: &[u8]) -> Result<usize, WebhookRefusal> {
            self.received.lock().unwrap().push(body.to_vec());
            let value: serde_json::Value = serde_json::from_slice(body)
                .map_err(|e| WebhookRefusal::Malformed(e.to_string()))?;
            Ok(value["n"].as_u64().unwrap_or(0) as usize)
        }
    }

    /// A body that says nothing of its size: `left` chunks of `size` bytes.
    struct Chunks {
        left: usize,
        size: usize,
    }

    impl hyper::body::Body for Chunks {
        type Data = Bytes;
        type Error = Infallible;
        fn poll_frame(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
            if self.left == 0 {
                return std::task::Poll::Ready(None);
            }
            self.left -= 1;
            let chunk = Bytes::from(vec![b' '; self.size]);
            std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(chunk))))
        }
    }

    #[tokio::test]
    async fn alerts_are_read_within_their_bound_and_refusals_counted() {
        let webhook = Counting::default();
        let full = |text: &str| Full::new(Bytes::from(text.to_owned()));
        let response = alerts(&webhook, full("{\"n\": 2}")).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(futures_body_async(response).await, "fired 2 alert events\n");
        let response = alerts(&webhook, full("nope")).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        // Over the bound by its length: refused unread.
        let response = alerts(&webhook, full(&" ".repeat(65))).await;
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
        // Over the bound with no length: refused once the bound is passed.
        let response = alerts(
            &webhook,
            Chunks {
                left: 100,
                size: 10,
            },
        )
        .await;
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(
            webhook.received.lock().unwrap().len(),
            2,
            "only two were read whole"
        );
        assert_eq!(webhook.refused.load(Ordering::Relaxed), 2);
        let response = alerts(&webhook, Chunks { left: 6, size: 10 }).await;
        assert_eq!(
            response.status(),
            StatusCode::BAD_REQUEST,
            "60 spaces: read, not JSON"
        );
    }

    async fn futures_body_async(response: Response<Full<Bytes>>) -> String {
        use http_body_util::BodyExt;
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}
