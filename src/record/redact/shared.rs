//! Parts many records hold ([`crate::record::Shared`]) are redacted once:
//! what each became is remembered by its pointer, with the rules it fired.

use std::sync::Arc;

use super::{Fired, Inner, Tally};
use crate::fifo::FifoMap;

/// Shared parts remembered at most (a job's few failures): each is held, so
/// its address is not another's while remembered.
const SHARED_PARTS: usize = 64;

/// A shared part redacted once: what it became and the rules it fired.
pub(super) struct Scrubbed {
    /// Held, so that no other part is at its address while it is remembered.
    _seen: Arc<dyn std::any::Any + Send + Sync>,
    became: Arc<dyn std::any::Any + Send + Sync>,
    tally: Tally,
}

/// The shared parts redacted lately, by their address, the oldest forgotten
/// first: a record of a job's failures looks up four.
pub(super) type ScrubbedParts = FifoMap<Scrubbed, usize>;

pub(super) fn scrubbed_parts() -> ScrubbedParts {
    FifoMap::new(SHARED_PARTS)
}

impl Inner {
    /// What redaction made of the shared part `seen` (the same pointer), when
    /// it is remembered; its rules fired again into `fired`.
    pub(super) fn recall_shared<T: Send + Sync + 'static>(
        &self,
        seen: &Arc<T>,
        fired: &mut Fired,
    ) -> Option<Arc<T>> {
        let shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        let known = shared.get(&Arc::as_ptr(seen).addr())?;
        let became = known.became.clone().downcast::<T>().ok()?;
        self.replay(&known.tally, fired);
        Some(became)
    }

    /// Remembers what redaction made of the shared part `seen`, forgetting
    /// the oldest past [`SHARED_PARTS`].
    pub(super) fn remember_shared<T: Send + Sync + 'static>(
        &self,
        seen: Arc<T>,
        became: Arc<T>,
        tally: Tally,
    ) {
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        let at = Arc::as_ptr(&seen).addr();
        shared.insert(
            &at,
            Scrubbed {
                _seen: seen,
                became,
                tally,
            },
        );
    }
}
