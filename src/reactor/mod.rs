//! Closing the loop with Salt's Reactor (`[reactor]`, off by default):
//! saltsight's verdicts fired onto the master's bus as `saltsight/...`
//! events (`verdicts.rs`), and Alertmanager's webhook turned into
//! `saltsight/alert/<alertname>` events (`alerts.rs`), written through the
//! master's pull socket as `fire_event` writes (`pull.rs`). docs/reactor.md.
//!
//! This is the one write saltsight makes, and it can never slow the reader or
//! the pipeline: [`Firer::fire`] only encodes, takes a token and `try_send`s
//! into a bounded queue; one thread of its own connects and writes, each
//! connect and write bounded by [`pull::IO_TIMEOUT`]. What does not fit (over
//! the rate, the queue full, the socket absent or refusing) is counted, logged
//! rate-limited and dropped, never kept for a retry: a Reactor acting on a
//! stale verdict minutes later would do more harm than one not acting.
//! Nothing is opened unless `[reactor] enabled = true`. At shutdown the
//! events already queued are given up to [`DRAIN`] to be written.

pub mod alerts;
pub mod pull;
pub mod verdicts;

use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tracing::{debug, info, warn};

use crate::config::reactor::ReactorConfig;
use crate::ratelimit::LogLimiter;
use pull::{FireError, PullSocket};

/// The prefix of every tag saltsight fires; saltsight ignores events under it.
pub const TAG_PREFIX: &str = "saltsight/";

pub use crate::record::RETRY_OF;

/// How long the end of a run waits for queued events to be written.
pub const DRAIN: Duration = Duration::from_secs(2);

crate::counts! {
    /// What the Reactor link fired and refused.
    pub struct ReactorCounts {
        counter fired = "saltsight_reactor_events_fired", "saltsight/ events written to the master's pull socket";
        counter rate_limited = "saltsight_reactor_events_rate_limited", "saltsight/ events dropped over reactor.max_per_second and reactor.burst";
        counter queue_full = "saltsight_reactor_events_queue_full", "saltsight/ events dropped because reactor.queue was full";
        counter unwritten = "saltsight_reactor_events_unwritten", "saltsight/ events dropped because the master's pull socket was absent, refused or timed out";
        counter unencodable = "saltsight_reactor_events_unencodable", "saltsight/ events that could not be encoded";
        counter loop_suppressed = "saltsight_reactor_loop_suppressed", "Verdicts not fired because one of that kind was already fired for the original job of a Reactor retry";
        counter unnamed_reactor_jobs = "saltsight_reactor_unnamed_reactor_jobs", "Verdicts of jobs the Reactor started that name no original job, not fired";
        counter fired_forgotten = "saltsight_reactor_fired_forgotten", "Original jobs whose fired verdicts the loop rule forgot at its bound (50,000): a retry of one of them could fire that kind again";
        counter jobs_forgotten = "saltsight_reactor_jobs_forgotten", "Open jobs whose publication the verdicts output forgot at its bound (10,000) before they closed: their missing verdict fires without the job's fun and args";
        counter alerts_fired = "saltsight_reactor_alerts", "Alertmanager alerts accepted on /alerts and handed to the firer";
        counter alerts_refused = "saltsight_reactor_alert_requests_refused", "Requests to /alerts refused: malformed, too large, not version 4, or alerts off";
    }
}

/// Why an event was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    RateLimited,
    QueueFull,
    Unencodable,
}

/// The handle that fires events: shared by the verdict output and the alert
/// webhook.
pub struct Firer {
    queue: SyncSender<Vec<u8>>,
    /// Events queued and not yet written or given up, with its change signalled.
    in_flight: Arc<(Mutex<usize>, Condvar)>,
    bucket: Mutex<TokenBucket>,
    counts: Arc<ReactorCounts>,
    refusals: Mutex<LogLimiter>,
}

impl std::fmt::Debug for Firer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Firer").finish_non_exhaustive()
    }
}

impl Firer {
    /// Starts the writer thread (it connects on the first event). Call only
    /// when `[reactor]` is enabled.
    pub fn start(config: &ReactorConfig, counts: Arc<ReactorCounts>) -> std::io::Result<Arc<Self>> {
        let (queue, rx) = mpsc::sync_channel::<Vec<u8>>(config.queue);
        let socket = PullSocket::new(config.endpoint.clone());
        let writer_counts = counts.clone();
        let in_flight = Arc::new((Mutex::new(0), Condvar::new()));
        let writer_in_flight = in_flight.clone();
        info!(endpoint = %config.endpoint, "Firing saltsight/ events through the master's pull socket (reactor.enabled).");
        std::thread::Builder::new()
            .name("saltsight-reactor".into())
            .spawn(move || write_loop(socket, &rx, &writer_counts, &writer_in_flight))?;
        Ok(Arc::new(Self {
            queue,
            in_flight,
            bucket: Mutex::new(TokenBucket::new(config.max_per_second, config.burst)),
            counts,
            refusals: Mutex::new(LogLimiter::new(Duration::from_secs(60))),
        }))
    }

    pub fn counts(&self) -> &Arc<ReactorCounts> {
        &self.counts
    }

    /// Queues `data` under `tag` for the master's bus, or says why not
    /// (counted and logged, rate-limited).
    pub fn fire(&self, tag: &str, data: &impl Serialize) -> Result<(), Refused> {
        let refused = |reason: Refused| {
            let (count, label) = match reason {
                Refused::RateLimited => (&self.counts.rate_limited, "rate_limited"),
                Refused::QueueFull => (&self.counts.queue_full, "queue_full"),
                Refused::Unencodable => (&self.counts.unencodable, "unencodable"),
            };
            count.inc();
            let admitted = self.refusals.lock().ok().and_then(|mut l| l.admit(label));
            if let Some(suppressed) = admitted {
                warn!(
                    tag,
                    reason = label,
                    suppressed,
                    "A saltsight/ event was not fired."
                );
            }
            Err(reason)
        };
        // The token first: over the rate (a flood), nothing is encoded.
        let admitted = self
            .bucket
            .lock()
            .map(|mut b| b.take(Instant::now()))
            .unwrap_or(false);
        if !admitted {
            return refused(Refused::RateLimited);
        }
        let frame = match pull::frame(tag, data) {
            Ok(frame) => frame,
            Err(error) => {
                debug!(%error, tag, "Cannot encode a saltsight/ event.");
                return refused(Refused::Unencodable);
            }
        };
        let (count, _) = &*self.in_flight;
        if let Ok(mut n) = count.lock() {
            *n += 1;
        }
        match self.queue.try_send(frame) {
            Ok(()) => {
                debug!(tag, "Queued a saltsight/ event.");
                Ok(())
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                done(&self.in_flight);
                refused(Refused::QueueFull)
            }
        }
    }

    /// Waits, at most `timeout`, until every queued event was written or given
    /// up (the end of a run).
    pub fn drain(&self, timeout: Duration) {
        let (count, changed) = &*self.in_flight;
        let Ok(n) = count.lock() else { return };
        if let Ok((n, waited)) = changed.wait_timeout_while(n, timeout, |n| *n > 0) {
            if waited.timed_out() {
                warn!(
                    unwritten = *n,
                    "Stopping with saltsight/ events not yet written."
                );
            }
        }
    }
}

/// The writer thread: one event at a time, given up on the first error.
/// After a failed connect, events are dropped without trying for a second,
/// so an absent master costs one connect a second, not one per event.
fn write_loop(
    mut socket: PullSocket,
    rx: &mpsc::Receiver<Vec<u8>>,
    counts: &ReactorCounts,
    in_flight: &(Mutex<usize>, Condvar),
) {
    let mut failures = LogLimiter::new(Duration::from_secs(60));
    let mut down_until: Option<Instant> = None;
    while let Ok(frame) = rx.recv() {
        if down_until.is_some_and(|until| Instant::now() < until) {
            counts.unwritten.inc();
            done(in_flight);
            continue;
        }
        let written = socket.write(&frame);
        done(in_flight);
        match written {
            Ok(()) => {
                down_until = None;
                counts.fired.inc();
            }
            Err(error) => {
                counts.unwritten.inc();
                if matches!(error, FireError::Connect { .. }) {
                    down_until = Some(Instant::now() + Duration::from_secs(1));
                }
                if let Some(suppressed) = failures.admit("write") {
                    warn!(%error, suppressed, "A saltsight/ event was dropped; the next one will try again.");
                }
            }
        }
    }
    debug!(endpoint = %socket.endpoint(), "The reactor writer stopped.");
}

/// One queued event written or given up.
fn done(in_flight: &(Mutex<usize>, Condvar)) {
    let (count, changed) = in_flight;
    if let Ok(mut n) = count.lock() {
        *n = n.saturating_sub(1);
    }
    changed.notify_all();
}

/// A token bucket: `per_second` tokens a second, at most `burst` saved up.
/// A dozen lines for one caller: a rate-limiting crate would bring a clock
/// abstraction and keyed state this does not need.
#[derive(Debug)]
struct TokenBucket {
    per_second: f64,
    burst: f64,
    tokens: f64,
    at: Option<Instant>,
}

impl TokenBucket {
    fn new(per_second: u32, burst: u32) -> Self {
        Self {
            per_second: f64::from(per_second),
            burst: f64::from(burst.max(1)),
            tokens: f64::from(burst.max(1)),
            at: None,
        }
    }

    fn take(&mut self, now: Instant) -> bool {
        if let Some(at) = self.at {
            let earned = now.saturating_duration_since(at).as_secs_f64() * self.per_second;
            self.tokens = (self.tokens + earned).min(self.burst);
        }
        self.at = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let mut bucket = TokenBucket::new(10, 3);
        let t = Instant::now();
        assert!((0..3).all(|_| bucket.take(t)));
        assert!(!bucket.take(t));
        assert!(!bucket.take(t + Duration::from_millis(50)));
        assert!(bucket.take(t + Duration::from_millis(160)));
        assert!(!bucket.take(t + Duration::from_millis(160)));
        let later = t + Duration::from_secs(60);
        assert_eq!((0..10).filter(|_| bucket.take(later)).count(), 3);
    }
}
