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

/// Runs `work` to its end, unless `cancel` fired more than [`GRACE`] ago: then it
/// gives up on draining and says so (the caller exits non-zero).
pub async fn within_grace<T>(
    cancel: &CancellationToken,
    work: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    tokio::pin!(work);
    tokio::select! {
        result = &mut work => result,
        () = async {
            cancel.cancelled().await;
            tokio::time::sleep(GRACE).await;
        } => anyhow::bail!("the pipeline did not drain within {GRACE:?} of the stop signal"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn work_that_outlives_the_grace_after_a_stop_is_given_up() {
        let cancel = CancellationToken::new();
        cancel.cancel();
        let stuck = within_grace(&cancel, async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(())
        });
        assert!(stuck.await.is_err());
        let running = CancellationToken::new();
        let quick = within_grace(&running, async { Ok(7) });
        assert_eq!(quick.await.unwrap(), 7);
    }
}
