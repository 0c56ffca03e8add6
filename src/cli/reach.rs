//! A bus that cannot be reached ends the commands that follow it live
//! (`tail`, `capture`, `top`) with the reason and its exit code, unless they
//! were told to wait.

use anyhow::Context;

use crate::bus::Endpoint;

/// Connects once (and closes): a bus this user may not open, or with no master
/// behind it, ends `tail` and `capture` with the reason (exit 77 or 69) instead
/// of retrying for ever, unless `--wait`.
pub async fn reachable_or_exit(endpoint: &Endpoint) -> anyhow::Result<()> {
    endpoint
        .connect()
        .await
        .map(drop)
        .context("the event bus cannot be reached (--wait waits for it)")
}
