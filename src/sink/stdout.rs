//! Events and records on standard output: one JSON object per line, or the
//! readable form of `salt-run state.event pretty=True` (the tag, then the data
//! indented, keys sorted).

use std::io::{self, Write};

use serde_json::{Value, json};

use crate::bus::{BusGap, GapReason};
use crate::event::json::to_json;
use crate::event::{Event, Stamp};

/// `{"tag": ..., "data": {...}}`, the data as Salt sent it.
pub fn event_json(event: &Event<'_>) -> Value {
    let data = to_json(event.data).unwrap_or_else(|e| json!({"saltsight_error": e.to_string()}));
    json!({"tag": event.tag, "data": data})
}

/// The readable form: the tag on its own line, then the data, indented, keys sorted.
pub fn write_pretty(out: &mut impl Write, event: &Event<'_>) -> io::Result<()> {
    let data = to_json(event.data).unwrap_or_else(|e| json!({"saltsight_error": e.to_string()}));
    // serde_json's maps are ordered by key unless `preserve_order` is on: sorted.
    let text = serde_json::to_string_pretty(&data).map_err(io::Error::other)?;
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
