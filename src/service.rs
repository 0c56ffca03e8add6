//! systemd's service-manager protocol (`sd_notify(3)`): readiness, status,
//! reloading, stopping and watchdog pings, as datagrams to `$NOTIFY_SOCKET`.
//! Outside systemd (no `NOTIFY_SOCKET`) every call is a no-op.
//!
//! Readiness means "the first attempt to reach the bus is over": connected, or
//! refused and retrying. A master that is down must not fail saltsight's start
//! (it starts after the master, or the master restarts), so a failed attempt is
//! ready too, with a status saying what is wrong.
//!
//! The watchdog is fed from the consumer loop (`app::run`), the one place that
//! proves events are being handled: a consumer stuck in a handler stops the
//! pings, and systemd restarts the service.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use sd_notify::NotifyState;
use tracing::{debug, warn};

use crate::bus::{Endpoint, ReaderStats};

/// The service manager, if saltsight runs under one.
#[derive(Debug, Clone, Default)]
pub struct ServiceManager {
    /// `NOTIFY_SOCKET` was set at start.
    present: bool,
    /// `WATCHDOG_USEC`, when it is meant for this process.
    watchdog: Option<Duration>,
    /// Shared by the bus follower and the reloader, so neither overwrites what
    /// the other said.
    status: Arc<Mutex<StatusLine>>,
}

/// What `systemctl status` shows: the bus connection, once the first attempt is
/// over (which is readiness), and a failed reload until a reload works.
#[derive(Debug, Default)]
struct StatusLine {
    bus: Option<String>,
    reload_failed: bool,
}

impl StatusLine {
    /// `None` until ready.
    fn render(&self) -> Option<String> {
        let bus = self.bus.as_deref()?;
        Some(if self.reload_failed {
            format!("{bus} {RELOAD_FAILED}")
        } else {
            bus.to_owned()
        })
    }
}

const RELOAD_FAILED: &str =
    "The last config reload failed; the running config stays (see the log).";

impl ServiceManager {
    /// Reads `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID`. The variables
    /// are left in the environment: unsetting them is unsound once threads run,
    /// and what saltsight starts (git) ignores them.
    pub fn from_env() -> Self {
        ServiceManager {
            present: std::env::var_os("NOTIFY_SOCKET").is_some(),
            watchdog: sd_notify::watchdog_enabled().filter(|d| !d.is_zero()),
            status: Arc::default(),
        }
    }

    /// The consumer loop's watchdog, when systemd asked for one (`WatchdogSec=`).
    pub fn watchdog(&self) -> Option<Watchdog> {
        let timeout = self.watchdog?;
        Some(Watchdog::new(timeout))
    }

    fn status_line(&self) -> MutexGuard<'_, StatusLine> {
        self.status.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A reload began. Before readiness there is nothing to say: systemd is
    /// still waiting for READY=1, which the bus follower sends.
    pub fn reload_begins(&self) {
        if self.status_line().bus.is_none() {
            return;
        }
        match sd_notify::NotifyState::monotonic_usec_now() {
            Ok(now) => self.send(&[NotifyState::Reloading, now]),
            Err(_) => self.send(&[NotifyState::Reloading]),
        }
    }

    /// A reload ended: READY=1 again, and a failure stays in the status line
    /// until a reload works.
    pub fn reload_ended(&self, ok: bool) {
        let mut line = self.status_line();
        line.reload_failed = !ok;
        if let Some(status) = line.render() {
            self.send(&[NotifyState::Ready, NotifyState::Status(&status)]);
        }
    }

    pub fn stopping(&self, status: &str) {
        self.send(&[NotifyState::Stopping, NotifyState::Status(status)]);
    }

    fn send(&self, states: &[NotifyState<'_>]) {
        if !self.present {
            return;
        }
        if let Err(error) = sd_notify::notify(states) {
            warn!(%error, "Cannot notify the service manager (NOTIFY_SOCKET).");
        }
    }

    /// Says READY=1 once the reader's first connection attempt is over, with a
    /// status naming the endpoint and whether it answered; then keeps the
    /// status true as the connection comes and goes (`systemctl status`).
    pub async fn follow_the_bus(self, stats: Arc<ReaderStats>, endpoint: Endpoint) {
        if !self.present {
            return;
        }
        stats.first_attempt_over().await;
        let mut connected = stats.connected.load(Ordering::Relaxed);
        self.bus_is(connected, &endpoint, true);
        loop {
            connected = stats.connection_change(connected).await;
            self.bus_is(connected, &endpoint, false);
        }
    }

    /// Updates the bus part of the status line and sends it, with READY=1 the
    /// first time.
    fn bus_is(&self, connected: bool, endpoint: &Endpoint, first: bool) {
        let mut line = self.status_line();
        line.bus = Some(bus_status(connected, endpoint));
        let status = line.render().unwrap_or_default();
        debug!(status, "Status.");
        if first {
            self.send(&[NotifyState::Ready, NotifyState::Status(&status)]);
        } else {
            self.send(&[NotifyState::Status(&status)]);
        }
    }
}

fn bus_status(connected: bool, endpoint: &Endpoint) -> String {
    if connected {
        format!("Watching the event bus at {endpoint}.")
    } else {
        format!("Not connected to the event bus at {endpoint}; retrying (see the log).")
    }
}

/// Pings systemd's watchdog at half its timeout, as systemd advises, when the
/// owner calls [`Watchdog::feed`] at least that often.
#[derive(Debug)]
pub struct Watchdog {
    every: Duration,
    next: Instant,
}

impl Watchdog {
    fn new(timeout: Duration) -> Self {
        let every = (timeout / 2).max(Duration::from_millis(10));
        Watchdog {
            every,
            next: Instant::now(),
        }
    }

    /// Pings if a ping is due at `now`, and says when the owner must feed it
    /// again. No clock read: cheap enough to call per event.
    pub fn feed(&mut self, now: Instant) -> Instant {
        if now >= self.next {
            self.next = now + self.every;
            if let Err(error) = sd_notify::notify(&[NotifyState::Watchdog]) {
                warn!(%error, "Cannot ping the service manager's watchdog.");
            }
        }
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_line_keeps_a_failed_reload_beside_the_bus_until_one_works() {
        let mut line = StatusLine {
            bus: None,
            reload_failed: true,
        };
        assert_eq!(line.render(), None, "nothing is said before readiness");
        line.bus = Some("Watching the event bus at unix:/x.".into());
        assert_eq!(
            line.render().as_deref(),
            Some(
                "Watching the event bus at unix:/x. The last config reload failed; the running \
                 config stays (see the log)."
            )
        );
        line.reload_failed = false;
        assert_eq!(
            line.render().as_deref(),
            Some("Watching the event bus at unix:/x.")
        );
    }

    #[test]
    fn the_watchdog_pings_at_half_its_timeout_and_no_sooner() {
        let mut dog = Watchdog::new(Duration::from_secs(30));
        let start = dog.next;
        let due = dog.feed(Instant::now());
        let next = dog.next;
        assert!(next >= start + Duration::from_secs(15));
        assert_eq!(due, next);
        dog.feed(Instant::now());
        assert_eq!(dog.next, next, "a feed before the due time does not ping");
    }
}
