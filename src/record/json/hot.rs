//! The records made per return (`minion_return`, `late_return`,
//! `state_failure`) written field by field: each key as bytes fixed at
//! compile time, each value through the [`Writer`] (a kind's name, an id and
//! a time, never escaped, as they are; a return's state counts with fixed
//! keys too), a shared part's kept fields as one copy. serde's derive writes
//! a flattened record through a map, quoting every key and passing every
//! field through two wrappers: that was half the cost of these lines.
//!
//! The bytes are the derive's, in its order and with its skips. Each record
//! and part is taken apart here naming every field, so a field added to one
//! does not compile here until it is written; the tests (`tests.rs`) build
//! them by struct literal (the same holds there) and hold every field, each
//! way it can be written, to serde_json's output. A `rename` or a skip added
//! to the derive is caught by the tests alone.

use serde::Serialize;

use super::{Error, Writer};
use crate::record::{MinionReturn, Record, RecordBody, Shared, StateCounts, StateFailure};

/// The bodies written here.
enum Body<'r> {
    Return(&'r MinionReturn),
    Failure(&'r StateFailure),
}

/// Appends `record` as [`super::line`] would, when it is of a kind written
/// here: `Ok(false)`, with nothing appended, when it is not (or a shared part
/// of it is not an object, which only the derive knows how to write or
/// refuse; no part of these kinds is one today). On an error, `out` may hold
/// part of it.
pub(super) fn record(record: &Record, out: &mut Vec<u8>) -> Result<bool, Error> {
    // Every field named: one added to a record does not compile here until
    // it is written.
    let Record {
        kind,
        schema_version,
        id,
        master,
        at,
        body,
        redacted,
    } = record;
    let body = match body {
        RecordBody::MinionReturn(body) | RecordBody::LateReturn(body) => Body::Return(body),
        RecordBody::StateFailure(body) => Body::Failure(body),
        _ => return Ok(false),
    };
    let start = out.len();
    out.extend_from_slice(b"{\"kind\":\"");
    out.extend_from_slice(kind.as_str().as_bytes());
    field(out, b"\",\"schema_version\":", schema_version)?;
    out.extend_from_slice(b",\"id\":\"");
    out.extend_from_slice(id.as_str().as_bytes());
    field(out, b"\",\"master\":", master)?;
    out.extend_from_slice(b",\"at\":");
    if !at.append_quoted(out) {
        at.serialize(&mut Writer { out })?;
    }
    let written = match body {
        Body::Return(body) => minion_return(body, out)?,
        Body::Failure(body) => state_failure(body, out)?,
    };
    if !written {
        out.truncate(start);
        return Ok(false);
    }
    if !redacted.is_empty() {
        field(out, b",\"redacted\":", redacted)?;
    }
    out.push(b'}');
    Ok(true)
}

fn minion_return(r: &MinionReturn, out: &mut Vec<u8>) -> Result<bool, Error> {
    let MinionReturn {
        jid,
        minion,
        fun,
        retcode,
        salt_success,
        succeeded,
        context,
        schedule,
        duration_ms,
        states,
        trimmed,
        return_trace,
    } = r;
    field(out, b",\"jid\":", jid)?;
    field(out, b",\"minion\":", minion)?;
    field(out, b",\"fun\":", fun)?;
    field(out, b",\"retcode\":", retcode)?;
    field(out, b",\"salt_success\":", salt_success)?;
    field(out, b",\"succeeded\":", succeeded)?;
    if !flattened(out, context) {
        return Ok(false);
    }
    if let Some(schedule) = schedule {
        field(out, b",\"schedule\":", schedule)?;
    }
    field(out, b",\"duration_ms\":", duration_ms)?;
    if let Some(StateCounts {
        ok,
        changed,
        failed,
        would_change,
    }) = states
    {
        field(out, b",\"states\":{\"ok\":", ok)?;
        field(out, b",\"changed\":", changed)?;
        field(out, b",\"failed\":", failed)?;
        field(out, b",\"would_change\":", would_change)?;
        out.push(b'}');
    }
    if let Some(trimmed) = trimmed {
        field(out, b",\"trimmed\":", trimmed)?;
    }
    if let Some(trace) = return_trace {
        field(out, b",\"return_trace\":", trace)?;
    }
    Ok(true)
}

fn state_failure(f: &StateFailure, out: &mut Vec<u8>) -> Result<bool, Error> {
    let StateFailure {
        jid,
        minion,
        fun,
        state,
        run_num,
        duration_ms,
        start_time,
        cause,
        fallout,
        output,
        fingerprint,
        incident,
        first_failing,
        context,
        correlation,
    } = f;
    field(out, b",\"jid\":", jid)?;
    field(out, b",\"minion\":", minion)?;
    field(out, b",\"fun\":", fun)?;
    if !flattened(out, state) {
        return Ok(false);
    }
    field(out, b",\"run_num\":", run_num)?;
    field(out, b",\"duration_ms\":", duration_ms)?;
    field(out, b",\"start_time\":", start_time)?;
    if !flattened(out, cause) {
        return Ok(false);
    }
    field(out, b",\"fallout\":", fallout)?;
    if !output.is_empty() {
        let Some(fields) = output.kept_fields() else {
            return Ok(false);
        };
        out.extend_from_slice(b",\"output\":{");
        out.extend_from_slice(fields.as_bytes());
        out.push(b'}');
    }
    field(out, b",\"fingerprint\":", fingerprint)?;
    if let Some(incident) = incident {
        field(out, b",\"incident\":", incident)?;
    }
    if let Some(first_failing) = first_failing {
        field(out, b",\"first_failing\":", first_failing)?;
    }
    Ok(flattened(out, context) && flattened(out, correlation))
}

/// `key` (its comma, quotes and colon) and `value`.
#[inline]
fn field<T: Serialize + ?Sized>(out: &mut Vec<u8>, key: &[u8], value: &T) -> Result<(), Error> {
    out.extend_from_slice(key);
    value.serialize(&mut Writer { out })
}

/// A flattened part's fields after those before it; `false` when it is not
/// an object.
#[inline]
fn flattened<T: Serialize>(out: &mut Vec<u8>, part: &Shared<T>) -> bool {
    match part.kept_fields() {
        Some("") => true,
        Some(fields) => {
            out.push(b',');
            out.extend_from_slice(fields.as_bytes());
            true
        }
        None => false,
    }
}
