//! The records made per return (`minion_return`, `late_return`,
//! `state_failure`) written field by field: each key as bytes fixed at
//! compile time, each value through the [`Writer`] (a kind's name, an id and
//! a time, never escaped, as they are; a return's state counts with fixed
//! keys too), a shared part's kept fields as one copy. serde's derive
//! writes a flattened record through a map,
//! quoting every key and passing every field through two wrappers: that was
//! half the cost of these lines.
//!
//! The bytes are the derive's, in its order and with its skips: the tests
//! (`tests.rs`) hold every field of these kinds, each way it can be written,
//! to serde_json's output, and build the records by struct literal, so a field
//! added to one of them does not compile there until it is written here too.

use serde::Serialize;

use super::{Error, Writer};
use crate::record::{MinionReturn, Record, RecordBody, Shared, StateFailure};

/// Appends `record` as [`super::line`] would, when it is of a kind written
/// here: `Ok(false)`, with nothing appended, when it is not (or a shared part
/// of it is not an object, which only the derive knows how to refuse).
pub(super) fn record(record: &Record, out: &mut Vec<u8>) -> Result<bool, Error> {
    let start = out.len();
    let written = match &record.body {
        RecordBody::MinionReturn(body) | RecordBody::LateReturn(body) => {
            head(record, out)?;
            minion_return(body, out)?
        }
        RecordBody::StateFailure(body) => {
            head(record, out)?;
            state_failure(body, out)?
        }
        _ => false,
    };
    if !written {
        out.truncate(start);
        return Ok(false);
    }
    if !record.redacted.is_empty() {
        field(out, b",\"redacted\":", &record.redacted)?;
    }
    out.push(b'}');
    Ok(true)
}

/// What every record starts with. A kind's name, an id (hex) and a time's
/// digits are never escaped: written between quotes as they are.
fn head(record: &Record, out: &mut Vec<u8>) -> Result<(), Error> {
    out.extend_from_slice(b"{\"kind\":\"");
    out.extend_from_slice(record.kind.as_str().as_bytes());
    field(out, b"\",\"schema_version\":", &record.schema_version)?;
    out.extend_from_slice(b",\"id\":\"");
    out.extend_from_slice(record.id.as_str().as_bytes());
    field(out, b"\",\"master\":", &record.master)?;
    out.extend_from_slice(b",\"at\":");
    if record.at.append_quoted(out) {
        return Ok(());
    }
    record.at.serialize(&mut Writer { out })
}

fn minion_return(r: &MinionReturn, out: &mut Vec<u8>) -> Result<bool, Error> {
    field(out, b",\"jid\":", &r.jid)?;
    field(out, b",\"minion\":", &r.minion)?;
    field(out, b",\"fun\":", &r.fun)?;
    field(out, b",\"retcode\":", &r.retcode)?;
    field(out, b",\"salt_success\":", &r.salt_success)?;
    field(out, b",\"succeeded\":", &r.succeeded)?;
    if !flattened(out, &r.context) {
        return Ok(false);
    }
    if let Some(schedule) = &r.schedule {
        field(out, b",\"schedule\":", schedule)?;
    }
    field(out, b",\"duration_ms\":", &r.duration_ms)?;
    if let Some(states) = &r.states {
        field(out, b",\"states\":{\"ok\":", &states.ok)?;
        field(out, b",\"changed\":", &states.changed)?;
        field(out, b",\"failed\":", &states.failed)?;
        field(out, b",\"would_change\":", &states.would_change)?;
        out.push(b'}');
    }
    if let Some(trimmed) = &r.trimmed {
        field(out, b",\"trimmed\":", trimmed)?;
    }
    if let Some(trace) = &r.return_trace {
        field(out, b",\"return_trace\":", trace)?;
    }
    Ok(true)
}

fn state_failure(f: &StateFailure, out: &mut Vec<u8>) -> Result<bool, Error> {
    field(out, b",\"jid\":", &f.jid)?;
    field(out, b",\"minion\":", &f.minion)?;
    field(out, b",\"fun\":", &f.fun)?;
    if !flattened(out, &f.state) {
        return Ok(false);
    }
    field(out, b",\"run_num\":", &f.run_num)?;
    field(out, b",\"duration_ms\":", &f.duration_ms)?;
    field(out, b",\"start_time\":", &f.start_time)?;
    if !flattened(out, &f.cause) {
        return Ok(false);
    }
    field(out, b",\"fallout\":", &f.fallout)?;
    if !f.output.is_empty() {
        let Some(fields) = f.output.kept_fields() else {
            return Ok(false);
        };
        out.extend_from_slice(b",\"output\":{");
        out.extend_from_slice(fields.as_bytes());
        out.push(b'}');
    }
    field(out, b",\"fingerprint\":", &f.fingerprint)?;
    if let Some(incident) = &f.incident {
        field(out, b",\"incident\":", incident)?;
    }
    if let Some(first_failing) = &f.first_failing {
        field(out, b",\"first_failing\":", first_failing)?;
    }
    Ok(flattened(out, &f.context) && flattened(out, &f.correlation))
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
