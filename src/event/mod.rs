//! Frame → [`Event`]: the envelope, the tag, and the fields later stages need.
//! No IO and no clock: the same bytes always give the same event.
//!
//! An [`Event`] borrows from the frame it came from; the consumer decodes a frame,
//! hands the event down synchronously, and drops both. Nothing here allocates in the
//! common case (3008 writes every string as str, and those are borrowed).

pub mod args;
pub mod batch;
pub mod changes;
pub mod cursor;
pub mod json;
pub mod payload;
pub mod states;
pub mod tag;
pub mod text;

use bytes::Bytes;

use crate::time::Stamp;
use cursor::Cursor;

pub use payload::{Fields, Int, Raw, Text, TextList};
pub use tag::TagClass;

/// One decoded event off the bus.
#[derive(Debug, Clone)]
pub struct Event<'a> {
    pub tag: &'a str,
    pub class: TagClass,
    /// The event's own `_stamp`, when present and well formed.
    pub stamp: Option<Stamp>,
    pub body: Body<'a>,
    /// The raw msgpack `data` map, as Salt sent it.
    pub data: &'a [u8],
    /// The first field of `data` that had an unexpected type (left empty in `body`).
    pub malformed_field: Option<&'static str>,
    /// The frame, when it came shared ([`decode_shared`]): what a stage
    /// keeps of it past the event (a big job's names) it keeps by reference.
    pub frame: Option<&'a Bytes>,
}

/// The typed contents, one variant per tag class.
#[derive(Debug, Clone)]
pub enum Body<'a> {
    /// `salt/job/<jid>/new`: who was targeted, and who of them is not connected.
    JobNew(JobPublication<'a>),
    /// `salt/job/<jid>/publish` (3007+): what went out, with `metadata` when given.
    JobPublish(JobPublication<'a>),
    /// `salt/job/<jid>/ret/<id>`.
    JobReturn(JobReturn<'a>),
    /// `salt/job/<jid>/prog/<id>/<n>` (masters with `state_events`).
    JobProgress(JobProgress<'a>),
    /// Bare `<jid>` tag with `{minions}` (3006/3007).
    JobMinions(JobMinions<'a>),
    /// `salt/run/<jid>/new`.
    RunNew(RunJob<'a>),
    /// `salt/run/<jid>/ret`.
    RunReturn(RunJob<'a>),
    /// `salt/run/<jid>/args`: an orchestration step about to publish a job.
    RunArgs(RunArgs<'a>),
    /// `salt/batch/<jid>/{new,progress,complete,halted}` (3008.2+).
    Batch(batch::BatchEvent<'a>),
    /// `salt/minion/<id>/start` or `minion_start`.
    MinionStart(MinionStart<'a>),
    /// `salt/auth`.
    Auth(KeyChange<'a>),
    /// `salt/key`.
    Key(KeyChange<'a>),
    /// `salt/presence/present` or `salt/presence/change`.
    Presence(Presence<'a>),
    /// `salt/beacon/<id>/<name>/...`.
    Beacon(Beacon<'a>),
    /// Any other tag; the tag and raw data are on the [`Event`].
    Other,
}

impl<'a> Event<'a> {
    /// The job a return, a progress event or a `publish` belongs to.
    pub fn job_jid(&self) -> Option<&str> {
        match &self.body {
            Body::JobReturn(r) => Some(r.jid.as_str()),
            Body::JobProgress(p) => Some(p.jid.as_str()),
            Body::JobPublish(p) => Some(p.jid.as_str()),
            _ => None,
        }
    }

    /// The same event, of job `jid` (a sub-batch Salt gave a jid of its own,
    /// read as its batch's).
    pub fn of_job(&self, jid: &str) -> Event<'a> {
        let mut event = self.clone();
        let owned = || Text(std::borrow::Cow::Owned(jid.to_owned()));
        match &mut event.body {
            Body::JobReturn(r) => r.jid = owned(),
            Body::JobProgress(p) => p.jid = owned(),
            Body::JobPublish(p) => p.jid = owned(),
            _ => {}
        }
        event
    }
}

#[derive(Debug, Clone, Default)]
pub struct JobPublication<'a> {
    pub jid: Text<'a>,
    pub fun: Option<Text<'a>>,
    pub arg: Option<Raw<'a>>,
    pub tgt: Option<TextList<'a>>,
    pub tgt_type: Option<Text<'a>>,
    pub user: Option<Text<'a>>,
    /// Expected minions (`new` only).
    pub minions: Option<TextList<'a>>,
    /// Targeted but not connected (`new` only).
    pub missing: Option<TextList<'a>>,
    pub metadata: Option<Raw<'a>>,
    /// The job's trace context, with Salt's tracing on (3008+).
    pub traceparent: Option<Text<'a>>,
}

#[derive(Debug, Clone, Default)]
pub struct JobReturn<'a> {
    pub jid: Text<'a>,
    pub minion: Text<'a>,
    pub fun: Option<Text<'a>>,
    pub fun_args: Option<Raw<'a>>,
    pub retcode: Option<i64>,
    pub success: Option<bool>,
    /// The `return` value, raw: true, a string, a list of render errors, a map of states.
    pub ret: Option<Raw<'a>>,
    pub out: Option<Text<'a>>,
    /// The schedule name, for runs started by a minion's scheduler (no `new` event).
    pub schedule: Option<Text<'a>>,
    pub metadata: Option<Raw<'a>>,
    pub tgt: Option<TextList<'a>>,
    pub tgt_type: Option<Text<'a>>,
    pub user: Option<Text<'a>>,
    /// The trace context of the return's own request, with Salt's tracing on.
    pub traceparent: Option<Text<'a>>,
    /// `ret`'s states, read by the decode as it passed over them.
    states: Option<states::States<'a>>,
    /// `minion`, shared by every record made of the return (made by the
    /// first to ask).
    minion_name: std::cell::OnceCell<std::sync::Arc<str>>,
}

impl<'a> JobReturn<'a> {
    /// The minion's name, one allocation shared by triage's findings, the
    /// return's record and the history's verdict.
    pub fn minion_name(&self) -> std::sync::Arc<str> {
        std::sync::Arc::clone(self.minion_name.get_or_init(|| self.minion.as_str().into()))
    }

    /// The states of its return when it is a state run, walked once in the
    /// decode and read by every stage from there; `None` when it is not one.
    pub fn states(&self) -> Option<&states::States<'a>> {
        self.states.as_ref()
    }
}

#[derive(Debug, Clone, Default)]
pub struct JobProgress<'a> {
    pub jid: Text<'a>,
    pub minion: Text<'a>,
    /// `data.data`: `{ret: <one state's result>, len: <states in the run>}`.
    pub progress: Option<Raw<'a>>,
}

#[derive(Debug, Clone, Default)]
pub struct JobMinions<'a> {
    pub jid: Text<'a>,
    pub minions: Option<TextList<'a>>,
}

#[derive(Debug, Clone, Default)]
pub struct RunJob<'a> {
    pub jid: Text<'a>,
    pub fun: Option<Text<'a>>,
    pub fun_args: Option<Raw<'a>>,
    pub user: Option<Text<'a>>,
    pub success: Option<bool>,
    pub ret: Option<Raw<'a>>,
}

/// `salt/run/<jid>/args` (`{type, tgt, name, args}`): the orchestration `jid` is
/// about to publish a job to `tgt`.
#[derive(Debug, Clone, Default)]
pub struct RunArgs<'a> {
    pub jid: Text<'a>,
    pub tgt: Option<TextList<'a>>,
}

#[derive(Debug, Clone, Default)]
pub struct MinionStart<'a> {
    pub minion: Text<'a>,
}

#[derive(Debug, Clone, Default)]
pub struct KeyChange<'a> {
    pub minion: Text<'a>,
    pub act: Option<Text<'a>>,
    pub result: Option<bool>,
}

#[derive(Debug, Clone, Default)]
pub struct Presence<'a> {
    pub present: Option<TextList<'a>>,
    pub new: Option<TextList<'a>>,
    pub lost: Option<TextList<'a>>,
}

#[derive(Debug, Clone, Default)]
pub struct Beacon<'a> {
    pub minion: Text<'a>,
    pub name: Text<'a>,
}

/// Why a frame gave no event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("frame is not a msgpack map with a `body`: {detail}")]
    Envelope { detail: String },
    #[error("event body has no tag separator (\"\\n\\n\")")]
    NoTagSeparator,
    #[error("event tag is not UTF-8")]
    TagNotUtf8,
    #[error("data of event {tag:?} is not a msgpack map")]
    DataNotAMap { tag: String },
    #[error("event {tag:?} has no `{field}`")]
    MissingField { tag: String, field: &'static str },
}

crate::label_set! {
    /// Why a frame gave no event, as a bounded label for metrics and logs.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum DecodeReason {
        Envelope = "envelope",
        NoTagSeparator = "no_tag_separator",
        TagNotUtf8 = "tag_not_utf8",
        DataNotAMap = "data_not_a_map",
        MissingField = "missing_field",
    }
}

impl DecodeError {
    /// A short, bounded label for metrics and logs.
    pub fn reason(&self) -> DecodeReason {
        match self {
            DecodeError::Envelope { .. } => DecodeReason::Envelope,
            DecodeError::NoTagSeparator => DecodeReason::NoTagSeparator,
            DecodeError::TagNotUtf8 => DecodeReason::TagNotUtf8,
            DecodeError::DataNotAMap { .. } => DecodeReason::DataNotAMap,
            DecodeError::MissingField { .. } => DecodeReason::MissingField,
        }
    }

    /// The tag, when the frame got far enough to have one.
    pub fn tag(&self) -> Option<&str> {
        match self {
            DecodeError::DataNotAMap { tag } | DecodeError::MissingField { tag, .. } => Some(tag),
            _ => None,
        }
    }
}

const TAG_END: &[u8] = b"\n\n";

/// The frame's `body`: bin in current Salt, str holding the same raw bytes in older
/// Salt; both are taken as bytes (as text it would fail: the msgpack after the tag
/// is not UTF-8). Read with the scanner: the envelope is two keys, and a serde
/// derive would treat an integer key as a field index.
fn envelope_body(frame: &[u8]) -> Result<&[u8], DecodeError> {
    let envelope = |detail: &str| DecodeError::Envelope {
        detail: detail.to_owned(),
    };
    let mut cursor = Cursor::new(frame);
    let pairs = cursor
        .read_map_len()
        .ok_or_else(|| envelope("not a msgpack map"))?;
    let mut body = None;
    for _ in 0..pairs {
        let key = match cursor.peek() {
            Some(0xa0..=0xbf | 0xd9..=0xdb) => cursor.read_str_or_bin(),
            _ => cursor.take_raw().ok().map(|_| &b""[..]),
        }
        .ok_or_else(|| envelope("truncated or invalid key"))?;
        if key == b"body" {
            body = Some(
                cursor
                    .read_str_or_bin()
                    .ok_or_else(|| envelope("`body` is not bin or str"))?,
            );
        } else {
            cursor
                .take_raw()
                .map_err(|_| envelope("truncated or invalid value"))?;
        }
    }
    if !cursor.is_at_end() {
        return Err(envelope("bytes after the map"));
    }
    body.ok_or_else(|| envelope("no `body`"))
}

/// Splits a frame's body into its tag and its raw msgpack `data`.
pub fn split_body(frame: &[u8]) -> Result<(&str, &[u8]), DecodeError> {
    let body = envelope_body(frame)?;
    let at = body
        .windows(TAG_END.len())
        .position(|w| w == TAG_END)
        .ok_or(DecodeError::NoTagSeparator)?;
    let tag = std::str::from_utf8(&body[..at]).map_err(|_| DecodeError::TagNotUtf8)?;
    Ok((tag, &body[at + TAG_END.len()..]))
}

/// The tag of a frame of which only the first bytes are known (one skipped for
/// its size): `None` when they do not reach the end of the tag.
pub fn tag_of_head(head: &[u8]) -> Option<&str> {
    let mut cursor = Cursor::new(head);
    for _ in 0..cursor.read_map_len()? {
        let key = cursor.read_str_or_bin()?;
        if key != b"body" {
            cursor.take_raw().ok()?;
            continue;
        }
        // The body's header, then as much of it as there is.
        let marker = cursor.peek()?;
        let header = match marker {
            0xa0..=0xbf => 1,
            0xd9 | 0xc4 => 2,
            0xda | 0xc5 => 3,
            0xdb | 0xc6 => 5,
            _ => return None,
        };
        let body = head.get(cursor.position() + header..)?;
        let at = body.windows(TAG_END.len()).position(|w| w == TAG_END)?;
        return std::str::from_utf8(&body[..at]).ok();
    }
    None
}

/// Decodes one frame held shared (the bus's, a recording's): as
/// [`decode`], the event able to keep parts of the frame by reference.
pub fn decode_shared(frame: &Bytes) -> Result<Event<'_>, DecodeError> {
    let mut event = decode(frame)?;
    event.frame = Some(frame);
    Ok(event)
}

/// Decodes one frame (the msgpack map, without any length prefix).
pub fn decode(frame: &[u8]) -> Result<Event<'_>, DecodeError> {
    let (tag, data) = split_body(frame)?;
    let parsed = tag::parse(tag);
    let fields = Fields::scan(data).map_err(|_| DecodeError::DataNotAMap {
        tag: tag.to_owned(),
    })?;
    let stamp = fields.stamp.as_ref().and_then(|s| Stamp::parse(s.as_str()));
    let mut malformed_field = fields.malformed;
    let body = build_body(tag, &parsed, fields, &mut malformed_field)?;
    Ok(Event {
        tag,
        class: parsed.class,
        stamp,
        body,
        data,
        malformed_field,
        frame: None,
    })
}

fn build_body<'a>(
    tag: &'a str,
    parsed: &tag::ParsedTag<'a>,
    f: Fields<'a>,
    malformed: &mut Option<&'static str>,
) -> Result<Body<'a>, DecodeError> {
    let missing = |field| DecodeError::MissingField {
        tag: tag.to_owned(),
        field,
    };
    // Ids in the tag are authoritative: the tag is how Salt routes the event.
    let jid = || parsed.jid.map(Text::borrowed).ok_or_else(|| missing("jid"));
    let minion_from_tag = || {
        parsed
            .minion
            .map(Text::borrowed)
            .ok_or_else(|| missing("id"))
    };
    let publication = |f: Fields<'a>| -> Result<JobPublication<'a>, DecodeError> {
        Ok(JobPublication {
            jid: jid()?,
            fun: f.fun,
            arg: f.arg,
            tgt: f.tgt,
            tgt_type: f.tgt_type,
            user: f.user,
            minions: f.minions,
            missing: f.missing,
            metadata: f.metadata,
            traceparent: f.traceparent,
        })
    };
    let run = |f: Fields<'a>| -> Result<RunJob<'a>, DecodeError> {
        Ok(RunJob {
            jid: jid()?,
            fun: f.fun,
            fun_args: f.fun_args,
            user: f.user,
            success: f.success,
            ret: f.ret,
        })
    };
    let key_change = |f: Fields<'a>| -> Result<KeyChange<'a>, DecodeError> {
        Ok(KeyChange {
            minion: f.id.ok_or_else(|| missing("id"))?,
            act: f.act,
            result: f.result,
        })
    };
    Ok(match parsed.class {
        TagClass::JobNew => Body::JobNew(publication(f)?),
        TagClass::JobPublish => Body::JobPublish(publication(f)?),
        TagClass::JobReturn => Body::JobReturn(JobReturn {
            jid: jid()?,
            minion: minion_from_tag()?,
            fun: f.fun,
            fun_args: f.fun_args,
            retcode: f.retcode.map(|Int(n)| n),
            success: f.success,
            ret: f.ret,
            out: f.out,
            schedule: f.schedule,
            metadata: f.metadata,
            tgt: f.tgt,
            tgt_type: f.tgt_type,
            user: f.user,
            traceparent: f.traceparent,
            states: f.states,
            minion_name: std::cell::OnceCell::new(),
        }),
        TagClass::JobProgress => Body::JobProgress(JobProgress {
            jid: jid()?,
            minion: minion_from_tag()?,
            progress: f.inner_data,
        }),
        TagClass::JobMinions => Body::JobMinions(JobMinions {
            jid: jid()?,
            minions: f.minions,
        }),
        TagClass::RunNew => Body::RunNew(run(f)?),
        TagClass::RunReturn => Body::RunReturn(run(f)?),
        TagClass::RunArgs => Body::RunArgs(RunArgs {
            jid: jid()?,
            tgt: f.tgt,
        }),
        TagClass::Batch => {
            let state = f
                .batch_state
                .map(|raw| batch::StateFields::read(raw.0))
                .unwrap_or_default();
            if malformed.is_none() {
                *malformed = state.malformed;
            }
            Body::Batch(batch::BatchEvent {
                jid: jid()?,
                step: parsed
                    .detail
                    .and_then(batch::BatchStep::of)
                    .unwrap_or_default(),
                fun: f.fun,
                arg: state.arg,
                tgt: f.tgt,
                tgt_type: f.tgt_type,
                user: f.user,
                minions: state.minions,
                size: state.size.or(f.batch_size.map(|Int(n)| n)),
                total: f.total_minions.map(|Int(n)| n),
                halted: state.halted,
                halted_reason: state.halted_reason.or(f.reason),
                abandoned: f.abandoned_pending,
            })
        }
        TagClass::MinionStart => {
            let minion = match parsed.minion {
                Some(id) => Text::borrowed(id),
                None => f.id.ok_or_else(|| missing("id"))?,
            };
            Body::MinionStart(MinionStart { minion })
        }
        TagClass::Auth => Body::Auth(key_change(f)?),
        TagClass::Key => Body::Key(key_change(f)?),
        TagClass::Presence => Body::Presence(Presence {
            present: f.present,
            new: f.new,
            lost: f.lost,
        }),
        TagClass::Beacon => Body::Beacon(Beacon {
            minion: minion_from_tag()?,
            name: parsed.detail.map(Text::borrowed).unwrap_or_default(),
        }),
        TagClass::Saltsight | TagClass::Other => Body::Other,
    })
}

/// Encodes a frame the way Salt 3008's publisher does: `{"head": {}, "body":
/// bin(tag + "\n\n" + data)}`, `data` being msgpack already. The inverse of
/// [`decode`], for tests, benchmarks and fuzz seeds; with `body_as_str` the body
/// is a msgpack str holding the same bytes, as older Salt wrote it.
pub fn encode_frame(tag: &str, data: &[u8], body_as_str: bool) -> Vec<u8> {
    let mut body = Vec::with_capacity(tag.len() + 2 + data.len());
    body.extend_from_slice(tag.as_bytes());
    body.extend_from_slice(TAG_END);
    body.extend_from_slice(data);
    let mut out = vec![
        0x82, 0xa4, b'h', b'e', b'a', b'd', 0x80, 0xa4, b'b', b'o', b'd', b'y',
    ];
    out.push(if body_as_str { 0xdb } else { 0xc6 });
    out.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// [`encode_frame`] with the data given as JSON-shaped serde data.
#[cfg(test)]
pub(crate) fn salt_frame(tag: &str, data: &serde_json::Value, body_as_str: bool) -> Vec<u8> {
    encode_frame(
        tag,
        &rmp_serde::to_vec_named(data).expect("encode"),
        body_as_str,
    )
}

#[cfg(test)]
mod tests;
