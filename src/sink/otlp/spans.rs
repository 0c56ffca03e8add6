//! One trace per job (`traces = true`): when a job closes, a span for it
//! (publication to close) and a child for each expected minion: returned,
//! failed with its root cause, or missing with its reason and evidence.
//!
//! With Salt's tracing on, the job span is in the job's own trace, a child of
//! the span its publication named (`traceparent`), and each minion's span
//! **links** to the trace its `ret` event carried, so a trace viewer leads
//! from the job to every minion's own trace. Without it, the same spans are in
//! a trace of saltsight's own (ids derived from the master and the jid, so a
//! restart makes the same ones), with the jid as an attribute.
//!
//! Spans are made on the consumer task from the records as they pass (the
//! memory of open jobs bounded, the oldest forgotten past it, counted), kept in
//! a spool of their own as JSON lines ([`SpanLine`]), and become one
//! `ExportTraceServiceRequest` when a batch leaves it.

use std::collections::BTreeMap;

use foldhash::HashMap;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::logs::{Sender, hex, nanos};
use super::proto::opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest;
use super::proto::opentelemetry::proto::common::v1::{
    AnyValue, InstrumentationScope, KeyValue, any_value,
};
use super::proto::opentelemetry::proto::resource::v1::Resource;
use super::proto::opentelemetry::proto::trace::v1::{
    ResourceSpans, ScopeSpans, Span, Status, span, status,
};
use crate::fifo::FifoMap;
use crate::record::{Record, RecordBody, TraceContext, stable_hash};
use crate::time::Stamp;

/// Open jobs remembered until they close.
const MAX_JOBS: usize = 10_000;
/// Minion spans one job makes at most (the rest counted on the job's span).
const MAX_MINION_SPANS: usize = 10_000;

/// One span as spooled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpanLine {
    pub master: String,
    pub trace_id: String,
    pub span_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_span_id: Option<String>,
    pub name: String,
    pub start: Stamp,
    pub end: Stamp,
    pub error: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    pub attributes: BTreeMap<String, Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<TraceContext>,
}

/// How a minion's part in a job ended.
#[derive(Debug, Clone)]
enum Ending {
    Returned {
        at: Stamp,
        succeeded: bool,
        retcode: Option<i64>,
        trace: Option<TraceContext>,
    },
    Missing {
        at: Stamp,
        reason: String,
        evidence: String,
    },
}

#[derive(Debug, Default)]
struct OpenJob {
    fun: String,
    tgt: Vec<String>,
    published_at: Option<Stamp>,
    endings: BTreeMap<String, Ending>,
    /// Each failed minion's root cause, as one line.
    causes: HashMap<String, String>,
    unlisted: u32,
}

/// The jobs being followed until they close.
#[derive(Debug)]
pub struct JobSpans {
    jobs: FifoMap<OpenJob>,
    /// Jobs forgotten before they closed (the bound), counted here.
    forgotten: std::sync::Arc<crate::sink::OutputCounts>,
}

impl JobSpans {
    /// Counting the jobs it forgets in `counts`.
    pub fn new(counts: std::sync::Arc<crate::sink::OutputCounts>) -> Self {
        Self {
            jobs: FifoMap::new(MAX_JOBS),
            forgotten: counts,
        }
    }

    /// Takes one record; when it closes a job, that job's spans.
    pub fn take(&mut self, record: &Record) -> Vec<SpanLine> {
        match &record.body {
            RecordBody::JobPublished(p) => {
                let job = self.job(&p.jid);
                job.fun.clone_from(&p.fun);
                job.tgt.clone_from(&p.tgt);
                job.published_at = Some(record.at);
            }
            RecordBody::MinionReturn(r) => {
                let ending = Ending::Returned {
                    at: record.at,
                    succeeded: r.succeeded,
                    retcode: r.retcode,
                    trace: r.return_trace.clone(),
                };
                self.end(&r.jid, &r.minion, ending);
            }
            RecordBody::MinionMissing(m) => {
                let ending = Ending::Missing {
                    at: m.deadline,
                    reason: m.reason.as_str().to_owned(),
                    evidence: m.evidence.as_str().to_owned(),
                };
                self.end(&m.jid, &m.minion, ending);
            }
            RecordBody::StateFailure(f) => {
                let cause = format!(
                    "{} {}:{} ({}): {}",
                    f.cause.category.as_str(),
                    f.state.sls,
                    f.state.state_id,
                    f.state.function,
                    f.state.comment
                );
                if let Some(job) = self.jobs.get_mut(&*f.jid) {
                    job.causes.entry(f.minion.to_string()).or_insert(cause);
                }
            }
            RecordBody::RenderFailure(f) => {
                let cause = format!("render {}: {}", f.sls.as_deref().unwrap_or("?"), f.message);
                if let Some(job) = self.jobs.get_mut(&f.jid) {
                    job.causes.entry(f.minion.clone()).or_insert(cause);
                }
            }
            RecordBody::JobCompleted(c) if c.revision == 0 => {
                if let Some(job) = self.jobs.remove(&c.jid) {
                    return spans(record, c, job);
                }
            }
            _ => {}
        }
        Vec::new()
    }

    fn job(&mut self, jid: &str) -> &mut OpenJob {
        let (job, forgotten) = self.jobs.entry(jid, OpenJob::default);
        self.forgotten.trace_jobs_forgotten.add(forgotten);
        job
    }

    fn end(&mut self, jid: &str, minion: &str, ending: Ending) {
        // Only jobs whose publication was seen: their spans have a start.
        if let Some(job) = self.jobs.get_mut(jid) {
            if job.endings.len() < MAX_MINION_SPANS {
                job.endings.insert(minion.to_owned(), ending);
            } else {
                job.unlisted += 1;
            }
        }
    }
}

/// The job's span and its minions', at its close.
fn spans(record: &Record, c: &crate::record::JobCompleted, job: OpenJob) -> Vec<SpanLine> {
    let master = record.master.to_string();
    let id = |parts: &[&str]| stable_hash(parts.iter().map(|p| p.as_bytes()));
    let (trace_id, parent) = match &c.context.trace {
        Some(t) => (t.trace_id.clone(), Some(t.span_id.clone())),
        None => (format!("{:032x}", id(&[&master, "trace", &c.jid])), None),
    };
    let span_id = |minion: &str| format!("{:016x}", id(&[&master, "span", &c.jid, minion]) as u64);
    let job_span = span_id("");
    let start = job.published_at.unwrap_or(c.published_at);
    let missing: u32 = c.missing.values().sum();
    let mut lines = Vec::with_capacity(job.endings.len() + 1);
    let mut attributes = BTreeMap::from([
        ("salt.jid".to_owned(), json!(c.jid)),
        ("salt.function".to_owned(), json!(c.fun)),
        ("salt.target".to_owned(), json!(job.tgt)),
        ("salt.run_kind".to_owned(), json!(c.context.run_kind)),
        ("salt.expected".to_owned(), json!(c.expected)),
        ("salt.returned".to_owned(), json!(c.returned)),
        ("salt.succeeded".to_owned(), json!(c.succeeded)),
        ("salt.failed".to_owned(), json!(c.failed)),
        ("salt.missing".to_owned(), json!(missing)),
    ]);
    if job.unlisted > 0 {
        attributes.insert("salt.minion_spans_unlisted".into(), json!(job.unlisted));
    }
    lines.push(SpanLine {
        master: master.clone(),
        trace_id: trace_id.clone(),
        span_id: job_span.clone(),
        parent_span_id: parent,
        name: format!("salt job {}", c.fun),
        start,
        end: start.plus(std::time::Duration::from_millis(c.duration_ms)),
        error: c.failed > 0 || missing > 0,
        message: match (c.failed, missing) {
            (0, 0) => String::new(),
            (failed, missing) => format!("{failed} failed, {missing} missing"),
        },
        attributes,
        links: Vec::new(),
    });
    for (minion, ending) in job.endings {
        let mut attributes = BTreeMap::from([
            ("salt.jid".to_owned(), json!(c.jid)),
            ("salt.minion".to_owned(), json!(minion)),
        ]);
        let (end, error, message, links) = match ending {
            Ending::Returned {
                at,
                succeeded,
                retcode,
                trace,
            } => {
                if let Some(retcode) = retcode {
                    attributes.insert("salt.retcode".into(), json!(retcode));
                }
                let cause = job.causes.get(&minion).cloned();
                if let Some(cause) = &cause {
                    attributes.insert("salt.root_cause".into(), json!(cause));
                }
                let message = if succeeded {
                    String::new()
                } else {
                    cause.unwrap_or_else(|| "failed".into())
                };
                (at, !succeeded, message, trace.into_iter().collect())
            }
            Ending::Missing {
                at,
                reason,
                evidence,
            } => {
                attributes.insert("salt.missing.reason".into(), json!(reason));
                attributes.insert("salt.missing.evidence".into(), json!(evidence));
                (
                    at,
                    true,
                    format!("no return: {reason} ({evidence})"),
                    Vec::new(),
                )
            }
        };
        lines.push(SpanLine {
            master: master.clone(),
            trace_id: trace_id.clone(),
            span_id: span_id(&minion),
            parent_span_id: Some(job_span.clone()),
            name: format!("salt minion {minion}"),
            start,
            end: end.max(start),
            error,
            message,
            attributes,
            links,
        });
    }
    lines
}

/// One request for a batch of spooled span lines; lines that are not one
/// are skipped, and counted in the second value.
pub fn request(batch: &[u8], sender: &Sender) -> (ExportTraceServiceRequest, u64) {
    let mut spans = Vec::new();
    let mut skipped = 0;
    let mut master = String::new();
    for line in batch.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let Ok(line) = serde_json::from_slice::<SpanLine>(line) else {
            skipped += 1;
            continue;
        };
        let (Some(trace_id), Some(span_id)) = (hex(&line.trace_id, 16), hex(&line.span_id, 8))
        else {
            skipped += 1;
            continue;
        };
        if master.is_empty() {
            master.clone_from(&line.master);
        }
        spans.push(Span {
            trace_id,
            span_id,
            parent_span_id: line
                .parent_span_id
                .as_deref()
                .and_then(|p| hex(p, 8))
                .unwrap_or_default(),
            name: line.name,
            kind: span::SpanKind::Internal as i32,
            start_time_unix_nano: nanos(line.start),
            end_time_unix_nano: nanos(line.end),
            attributes: line
                .attributes
                .into_iter()
                .filter_map(|(key, value)| key_value(key, value))
                .collect(),
            links: line
                .links
                .iter()
                .filter_map(|l| {
                    Some(span::Link {
                        trace_id: hex(&l.trace_id, 16)?,
                        span_id: hex(&l.span_id, 8)?,
                        ..span::Link::default()
                    })
                })
                .collect(),
            status: Some(Status {
                message: line.message,
                code: if line.error {
                    status::StatusCode::Error
                } else {
                    status::StatusCode::Ok
                } as i32,
            }),
            ..Span::default()
        });
    }
    let resource = Resource {
        attributes: super::logs::resource(sender, &master),
        ..Resource::default()
    };
    let request = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "saltsight".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..InstrumentationScope::default()
                }),
                spans,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    };
    (request, skipped)
}

fn key_value(key: String, value: Value) -> Option<KeyValue> {
    let value = match value {
        Value::String(s) => any_value::Value::StringValue(s),
        Value::Bool(b) => any_value::Value::BoolValue(b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => any_value::Value::IntValue(i),
            None => any_value::Value::DoubleValue(n.as_f64()?),
        },
        Value::Null => return None,
        other => any_value::Value::StringValue(other.to_string()),
    };
    Some(KeyValue {
        key,
        value: Some(AnyValue { value: Some(value) }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{
        JobCompleted, JobPublished, MinionMissing, MinionReturn, RecordFactory, StateFailure,
    };
    use serde_json::from_value;

    const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
    const PUBLISH_SPAN: &str = "b7ad6b7169203331";
    const RET_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

    fn job(traced: bool) -> Vec<Record> {
        let f = RecordFactory::new("m1");
        let trace = if traced {
            json!({"trace_id": TRACE, "span_id": PUBLISH_SPAN})
        } else {
            json!({})
        };
        let context = |extra: Value| {
            let mut v = json!({"run_kind": "adhoc", "test": false});
            v.as_object_mut()
                .unwrap()
                .extend(trace.as_object().unwrap().clone());
            v.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            v
        };
        let at = |s: i64| Stamp(1_795_654_800_000_000 + s * 1_000_000);
        vec![
            f.make(at(0), &["1"], RecordBody::JobPublished(Box::new(from_value::<JobPublished>(context(json!({
                "jid": "1", "fun": "state.apply", "tgt": ["*"], "tgt_type": "glob", "user": "root",
                "expected": ["web1", "web2", "web3"], "deadline": "2026-11-26T01:01:00Z"
            }))).unwrap()))),
            f.make(at(2), &["1", "web1"], RecordBody::MinionReturn(from_value::<MinionReturn>(context(json!({
                "jid": "1", "minion": "web1", "fun": "state.apply", "retcode": 0, "salt_success": true,
                "succeeded": true, "duration_ms": 2000,
                "return_trace": {"trace_id": RET_TRACE, "span_id": "00f067aa0ba902b7"}
            }))).unwrap())),
            f.make(at(3), &["1", "web2", "s"], RecordBody::StateFailure(Box::new(from_value::<StateFailure>(context(json!({
                "jid": "1", "minion": "web2", "fun": "state.apply", "sls": "web", "state_id": "nginx",
                "function": "pkg.installed", "name": "nginx", "comment": "E: Unable to locate package",
                "comment_len": 28, "run_num": 0, "duration_ms": 1.0, "start_time": null,
                "category": "dependency.package", "rule": "apt", "fallout": 2, "fingerprint": "f"
            }))).unwrap()))),
            f.make(at(3), &["1", "web2"], RecordBody::MinionReturn(from_value::<MinionReturn>(context(json!({
                "jid": "1", "minion": "web2", "fun": "state.apply", "retcode": 2, "salt_success": false,
                "succeeded": false, "duration_ms": 3000
            }))).unwrap())),
            f.make(at(60), &["1", "web3"], RecordBody::MinionMissing(from_value::<MinionMissing>(context(json!({
                "jid": "1", "minion": "web3", "fun": "state.apply", "reason": "no_response",
                "evidence": "connected_silent", "published_at": "2026-11-26T01:00:00Z",
                "deadline": "2026-11-26T01:01:00Z"
            }))).unwrap())),
            f.make(at(60), &["1", "0"], RecordBody::JobCompleted(from_value::<JobCompleted>(context(json!({
                "jid": "1", "fun": "state.apply", "tgt": ["*"], "expected": 3, "returned": 2,
                "succeeded": 1, "failed": 1, "missing": {"no_response": 1},
                "published_at": "2026-11-26T01:00:00Z", "duration_ms": 60000,
                "first_return_ms": 2000, "revision": 0, "evicted": false
            }))).unwrap())),
        ]
    }

    fn spans_of(records: &[Record]) -> Vec<SpanLine> {
        let mut jobs = JobSpans::new(Default::default());
        records.iter().flat_map(|r| jobs.take(r)).collect()
    }

    #[test]
    fn a_traced_job_is_one_span_in_its_own_trace_with_a_child_per_minion() {
        let spans = spans_of(&job(true));
        assert_eq!(spans.len(), 4, "{spans:#?}");
        let job_span = &spans[0];
        assert_eq!(job_span.trace_id, TRACE);
        assert_eq!(job_span.parent_span_id.as_deref(), Some(PUBLISH_SPAN));
        assert!(job_span.error);
        assert_eq!(job_span.message, "1 failed, 1 missing");
        assert_eq!(job_span.end.micros_since(job_span.start), 60_000_000);
        let minion = |name: &str| {
            spans
                .iter()
                .find(|s| s.attributes.get("salt.minion") == Some(&json!(name)))
                .unwrap()
        };
        for name in ["web1", "web2", "web3"] {
            assert_eq!(minion(name).trace_id, TRACE);
            assert_eq!(
                minion(name).parent_span_id.as_ref(),
                Some(&job_span.span_id)
            );
        }
        assert!(!minion("web1").error);
        assert_eq!(
            minion("web1").links[0].trace_id,
            RET_TRACE,
            "linked to its ret's trace"
        );
        assert!(minion("web2").error);
        assert!(
            minion("web2")
                .message
                .starts_with("dependency.package web:nginx (pkg.installed)"),
            "{}",
            minion("web2").message
        );
        assert!(minion("web3").error);
        assert_eq!(
            minion("web3").message,
            "no return: no_response (connected_silent)"
        );

        let (request, skipped) = request(
            spans
                .iter()
                .map(|s| serde_json::to_string(s).unwrap() + "\n")
                .collect::<String>()
                .as_bytes(),
            &Sender { host: "h".into() },
        );
        assert_eq!(skipped, 0);
        let exported = &request.resource_spans[0].scope_spans[0].spans;
        assert_eq!(exported.len(), 4);
        assert_eq!(exported[0].trace_id, hex(TRACE, 16).unwrap());
        assert_eq!(exported[0].parent_span_id, hex(PUBLISH_SPAN, 8).unwrap());
        let web1 = exported
            .iter()
            .find(|s| s.name == "salt minion web1")
            .unwrap();
        assert_eq!(web1.links[0].trace_id, hex(RET_TRACE, 16).unwrap());
        assert_eq!(web1.parent_span_id, exported[0].span_id);
    }

    #[test]
    fn past_its_bound_the_oldest_open_job_is_forgotten_and_counted() {
        let counts = std::sync::Arc::new(crate::sink::OutputCounts::default());
        let mut jobs = JobSpans::new(counts.clone());
        let published = &job(false)[0];
        for i in 0..=MAX_JOBS {
            let mut record = published.clone();
            if let RecordBody::JobPublished(p) = &mut record.body {
                p.jid = i.to_string();
            }
            assert!(jobs.take(&record).is_empty());
        }
        assert_eq!(jobs.jobs.len(), MAX_JOBS);
        assert!(!jobs.jobs.contains_key("0"), "the oldest went");
        assert_eq!(counts.trace_jobs_forgotten.get(), 1);
    }

    #[test]
    fn an_untraced_job_gets_a_trace_of_saltsights_own_the_same_every_time() {
        let spans = spans_of(&job(false));
        assert_eq!(spans.len(), 4);
        assert_eq!(spans[0].parent_span_id, None);
        assert_ne!(spans[0].trace_id, TRACE);
        assert_eq!(
            spans_of(&job(false))[0].trace_id,
            spans[0].trace_id,
            "stable"
        );
        assert!(spans.iter().all(|s| s.trace_id == spans[0].trace_id));
        assert!(spans[1..].iter().all(|s| s.links.len() <= 1));
    }
}
