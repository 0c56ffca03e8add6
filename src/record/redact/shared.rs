//! Parts many records hold ([`crate::record::Shared`]) are redacted once:
//! what each became is remembered by its pointer, with the rules it fired.

use std::sync::Arc;

use super::{Fired, Inner, Tally};

/// Shared parts remembered at most (a job's few failures): each is held, so
/// its address is not another's while remembered.
const SHARED_PARTS: usize = 64;

/// A shared part redacted once: what it became and the rules it fired.
pub(super) struct Scrubbed {
    /// `seen`'s address: what a lookup compares (a `dyn` pointer's data
    /// address is computed through its vtable, at every step of the scan).
    at: usize,
    /// Held, so that no other part is at `at` while it is remembered.
    _seen: Arc<dyn std::any::Any + Send + Sync>,
    became: Arc<dyn std::any::Any + Send + Sync>,
    tally: Tally,
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
        let at = Arc::as_ptr(seen).addr();
        let known = shared.iter().rev().find(|k| k.at == at)?;
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
        if shared.len() >= SHARED_PARTS {
            shared.pop_front();
        }
        shared.push_back(Scrubbed {
            at: Arc::as_ptr(&seen).addr(),
            _seen: seen,
            became,
            tally,
        });
    }
}
