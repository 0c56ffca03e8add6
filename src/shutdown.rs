//! Signals → a [`CancellationToken`]. The token stops the source only (the head of
//! the pipeline); every later stage ends when its input closes, so what is in
//! flight is drained in order.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// How long the pipeline may take to drain after the source stops.
pub const GRACE: Duration = Duration::from_secs(5);

/// A token cancelled on the first SIGINT or SIGTERM. A second signal exits at once.
pub fn on_signals() -> std::io::Result<CancellationToken> {
    use tokio::signal::unix::{SignalKind, signal};
    let token = CancellationToken::new();
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let cancel = token.clone();
    tokio::spawn(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        info!(
            signal = name,
            "Shutting down: stopping the bus reader and draining the pipeline."
        );
        cancel.cancel();
        tokio::select! {
            _ = term.recv() => {},
            _ = int.recv() => {},
        }
        warn!("Second signal: exiting without draining.");
        std::process::exit(130);
    });
    Ok(token)
}
