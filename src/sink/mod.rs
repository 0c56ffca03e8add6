//! Outputs. For now one: [`stdout`], JSON lines and the readable `tail` form.
//! Upstream delivery (spool, HTTP) lands here as its own modules.

pub mod stdout;
