//! How `tail` shows events (redacted): one JSON object per line, or the
//! readable form of `salt-run state.event pretty=True` (the tag, then the data
//! indented, keys sorted).

use std::io::{self, Write};

use serde_json::{Value, json};

use crate::bus::{BusGap, GapReason};
use crate::event::Event;
use crate::event::json::{Limits, to_json_within};
use crate::record::redact::{EventJson, Redacted};
use crate::time::Stamp;

/// The event's data as JSON, as Salt sent it (to be redacted before it is
/// shown), within `limits`: a frame of tens of megabytes is not built whole.
pub fn event_data(event: &Event<'_>, limits: Limits) -> Value {
    to_json_within(event.data, limits).unwrap_or_else(|e| json!({"saltsight_error": e.to_string()}))
}

/// `{"tag": ..., "data": {...}}` on one line.
pub fn write_event_line(out: &mut impl Write, event: &Redacted<EventJson>) -> io::Result<()> {
    write_line(out, &json!({"tag": event.tag, "data": event.data}))
}

/// The readable form: the tag on its own line, then the data, indented, keys sorted.
pub fn write_pretty(out: &mut impl Write, event: &Redacted<EventJson>) -> io::Result<()> {
    // serde_json's maps are ordered by key unless `preserve_order` is on: sorted.
    let text = serde_json::to_string_pretty(&event.data).map_err(io::Error::other)?;
    writeln!(out, "{}\t{text}", event.tag)
}

/// One JSON object on one line.
pub fn write_line(out: &mut impl Write, value: &Value) -> io::Result<()> {
    serde_json::to_writer(&mut *out, value).map_err(io::Error::other)?;
    out.write_all(b"\n")
}

/// How a gap reads to an operator on a terminal.
pub fn gap_line(gap: &BusGap) -> String {
    let secs = gap
        .ended_at
        .duration_since(gap.started_at)
        .map_or(0.0, |d| d.as_secs_f64());
    let what = match gap.reason {
        GapReason::QueueFull => format!("{} frames dropped (pipeline behind)", gap.dropped_frames),
        other => other.as_str().replace('_', " "),
    };
    format!(
        "-- bus gap: {what}, {secs:.3}s from {} --",
        Stamp::from_system_time(gap.started_at)
    )
}
