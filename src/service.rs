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

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

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
}

impl ServiceManager {
    /// Reads `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID`. The variables
    /// are left in the environment: unsetting them is unsound once threads run,
    /// and what saltsight starts (git) ignores them.
    pub fn from_env() -> Self {
        ServiceManager {
            present: std::env::var_os("NOTIFY_SOCKET").is_some(),
            watchdog: sd_notify::watchdog_enabled().filter(|d| !d.is_zero()),
        }
    }

    pub fn is_present(&self) -> bool {
        self.present
    }

    /// The consumer loop's watchdog, when systemd asked for one (`WatchdogSec=`).
    pub fn watchdog(&self) -> Option<Watchdog> {
        let timeout = self.watchdog?;
        Some(Watchdog::new(timeout))
    }

    pub fn ready(&self, status: &str) {
        self.send(&[NotifyState::Ready, NotifyState::Status(status)]);
    }

    pub fn status(&self, status: &str) {
        self.send(&[NotifyState::Status(status)]);
    }

    /// A reload began; [`ServiceManager::ready`] ends it.
    pub fn reloading(&self) {
        match sd_notify::NotifyState::monotonic_usec_now() {
            Ok(now) => self.send(&[NotifyState::Reloading, now]),
            Err(_) => self.send(&[NotifyState::Reloading]),
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
        let status = bus_status(connected, &endpoint);
        debug!(status, "Ready.");
        self.ready(&status);
        loop {
            connected = stats.connection_change(connected).await;
            self.status(&bus_status(connected, &endpoint));
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

    /// Pings if a ping is due, and says how soon the owner must feed it again.
    /// One clock read; cheap enough to call per event.
    pub fn feed(&mut self) -> Duration {
        let now = Instant::now();
        if now >= self.next {
            self.next = now + self.every;
            if let Err(error) = sd_notify::notify(&[NotifyState::Watchdog]) {
                warn!(%error, "Cannot ping the service manager's watchdog.");
            }
        }
        self.next - now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_pings_at_half_its_timeout_and_no_sooner() {
        let mut dog = Watchdog::new(Duration::from_secs(30));
        let start = dog.next;
        let wait = dog.feed();
        let next = dog.next;
        assert!(next >= start + Duration::from_secs(15));
        assert!(wait <= Duration::from_secs(15) && wait > Duration::from_secs(14));
        dog.feed();
        assert_eq!(dog.next, next, "a feed before the due time does not ping");
    }
}
