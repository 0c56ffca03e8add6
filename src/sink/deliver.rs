//! Delivery from a spool to an upstream, the same loop for every output that
//! spools: oldest batch first, one at a time; the upstream ([`Upstream`])
//! prepares a batch once and says what each attempt came to ([`Attempt`]), the
//! loop decides what happens next:
//!
//! - delivered: the batch leaves the spool;
//! - retry: back off (full jitter), or wait as upstream asked (capped); retried
//!   without limit: the spool's bound, not the sender, decides what is dropped;
//! - rejected: the batch moves to the dead-letter directory with why; counted,
//!   logged.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

use super::encode::Encoding;
use super::retry::{Backoff, RetryConfig};
use super::spool::{Sealed, Spool};
use crate::time::Stamp;

/// The response body shown in logs, at most.
const BODY_LOG_BYTES: usize = 512;

/// What one attempt to deliver a batch came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Attempt {
    Delivered,
    /// Taken, but upstream refused `rejected` of its records (an OTLP partial
    /// success): the batch leaves the spool; the refused are counted, logged.
    Partial {
        rejected: u64,
        message: String,
    },
    Retry {
        status: Option<u16>,
        /// How long upstream asked to wait (`Retry-After`), when it did.
        after: Option<Duration>,
        error: String,
    },
    /// Refused for good: the batch goes to the dead-letter directory.
    Reject {
        status: u16,
        body: String,
    },
}

/// Where a spooled output delivers.
pub trait Upstream: Send + Sync + 'static {
    /// How logs and dead letters name it (no credentials).
    fn shown(&self) -> &str;
    /// The encoding it takes; a batch spooled in another is dead-lettered.
    fn encoding(&self) -> Encoding;
    /// The body for a batch, made once and reused by every retry.
    fn prepare(&self, batch: &[u8]) -> Bytes;
    /// One attempt to deliver a prepared body.
    fn attempt(&self, body: Bytes) -> impl Future<Output = Attempt> + Send;
}

/// One output's sender: its spool, its upstream and its retry settings.
pub struct Sender<U: Upstream> {
    name: String,
    spool: Spool,
    upstream: U,
    retry: RetryConfig,
}

/// A sender waiting to be started on the runtime, whatever its upstream.
pub struct Delivery {
    pub spool: Spool,
    start: Box<dyn FnOnce(CancellationToken) -> JoinHandle<()> + Send>,
}

impl Delivery {
    pub fn new<U: Upstream>(name: &str, spool: Spool, upstream: U, retry: RetryConfig) -> Self {
        let sender = Sender {
            name: name.to_owned(),
            spool: spool.clone(),
            upstream,
            retry,
        };
        Self {
            spool,
            start: Box::new(move |cancel| tokio::spawn(sender.run(cancel))),
        }
    }

    /// Starts the sender task; it stops on `cancel`.
    pub fn start(self, cancel: CancellationToken) -> JoinHandle<()> {
        (self.start)(cancel)
    }
}

impl<U: Upstream> Sender<U> {
    /// Sends the spool's batches until `cancel`. A batch in flight when `cancel`
    /// fires stays in the spool and is sent again on the next start.
    pub async fn run(self, cancel: CancellationToken) {
        let spool = self.spool.clone();
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
                if segment.encoding != self.upstream.encoding() {
                    let why = serde_json::json!({
                        "output": self.name,
                        "url": self.upstream.shown(),
                        "reason": format!("the batch is encoded as {}, the output now sends {}", segment.encoding.as_str(), self.upstream.encoding().as_str()),
                        "records": segment.records,
                        "at": Stamp::now().to_string(),
                    });
                    self.dead_letter(&spool, sealed, &why);
                    continue;
                }
                let body = self.upstream.prepare(&segment.body);
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
                attempt = self.upstream.attempt(body.clone()) => attempt,
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
                Attempt::Partial { rejected, message } => {
                    spool
                        .stats()
                        .rejected_records
                        .fetch_add(rejected, Ordering::Relaxed);
                    warn!(
                        url = %self.upstream.shown(),
                        seq = sealed.seq,
                        records = sealed.records,
                        rejected,
                        message = %crate::plain::within(&message, BODY_LOG_BYTES),
                        "Upstream took the batch but refused some of its records."
                    );
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
                            url = %self.upstream.shown(),
                            status = status.map(|s| s.to_string()).unwrap_or_else(|| "none".into()),
                            error = %crate::plain::within(&error, BODY_LOG_BYTES),
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
                        "url": self.upstream.shown(),
                        "status": status,
                        "response_body": body,
                        "records": sealed.records,
                        "at": Stamp::now().to_string(),
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
                url = %self.upstream.shown(),
                status = why["status"].as_u64().unwrap_or(0),
                reason = %crate::plain::within(why["response_body"].as_str().or(why["reason"].as_str()).unwrap_or(""), BODY_LOG_BYTES),
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
