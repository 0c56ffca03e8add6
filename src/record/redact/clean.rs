//! Shared texts found clean lately, remembered by address on the thread that
//! redacts records: a job's jid and function, a return's minion and a
//! failure's fingerprint are held by many records (`Arc<str>`), and each was
//! scanned again for each (a third of redaction's cost per record).
//!
//! Only texts no rule changed are remembered, so a text recalled fires no
//! rule, exactly as a scan of it would. Each is held while remembered, so no
//! other text is at its address; each is remembered with the redactor whose
//! rules found it clean.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Texts remembered at most, per thread: a failing return's records hold five.
const CLEAN_TEXTS: usize = 8;

/// A number per redactor made in this process (its rules decide what is clean).
pub(super) fn redactor_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Relaxed)
}

#[derive(Default)]
struct CleanTexts {
    /// (redactor, text), the oldest overwritten first.
    texts: [Option<(u64, Arc<str>)>; CLEAN_TEXTS],
    next: usize,
}

thread_local! {
    static CLEAN: RefCell<CleanTexts> = RefCell::default();
}

/// Whether redactor `redactor` found this very text (by address) clean lately.
pub(super) fn known(redactor: u64, text: &Arc<str>) -> bool {
    CLEAN.with_borrow(|clean| {
        clean
            .texts
            .iter()
            .flatten()
            .any(|(id, held)| *id == redactor && Arc::ptr_eq(held, text))
    })
}

/// Remembers that redactor `redactor` found `text` clean.
pub(super) fn remember(redactor: u64, text: &Arc<str>) {
    CLEAN.with_borrow_mut(|clean| {
        let at = clean.next;
        clean.texts[at] = Some((redactor, Arc::clone(text)));
        clean.next = (at + 1) % CLEAN_TEXTS;
    });
}
