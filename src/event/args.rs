//! What a job's raw fields say by Salt's conventions: target lists, the first
//! positional argument, kwargs (`{"__kwarg__": true, ...}`), `timeout`, `test`,
//! metadata; and which functions the salt CLI runs on its own behalf.

use std::time::Duration;

use super::json::to_json;
use super::{Raw, TextList};

/// Functions the salt CLI runs on its own behalf: evidence about other jobs, not
/// user jobs.
pub const INTERNAL_FUNCTIONS: &[&str] = &[
    "saltutil.find_job",
    "saltutil.running",
    "saltutil.is_running",
];

/// A list of texts as owned strings (empty when absent).
pub fn texts(list: Option<&TextList<'_>>) -> Vec<String> {
    list.map_or_else(Vec::new, |l| l.iter().map(str::to_owned).collect())
}

/// A list of texts borrowed from the event (empty when absent): a job's
/// minions are read without a copy of each name, into room made once.
pub fn text_refs<'l>(list: Option<&'l TextList<'_>>) -> Vec<&'l str> {
    list.map_or_else(Vec::new, |l| l.iter().collect())
}

/// Whether `fun` is one the salt CLI runs on its own behalf.
pub fn is_internal(fun: &str) -> bool {
    INTERNAL_FUNCTIONS.contains(&fun)
}

/// The first positional argument as text (find_job's watched jid).
pub fn first_arg(arg: Option<Raw<'_>>) -> Option<String> {
    match to_json(arg?.0).ok()? {
        serde_json::Value::Array(items) => match items.first()? {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        },
        _ => None,
    }
}

/// A kwarg as published: `{"__kwarg__": true, name: value}` in `arg` (and in a
/// return's `fun_args`).
pub fn kwarg(arg: Option<Raw<'_>>, name: &str) -> Option<serde_json::Value> {
    let serde_json::Value::Array(items) = to_json(arg?.0).ok()? else {
        return None;
    };
    items.into_iter().find_map(|item| {
        let serde_json::Value::Object(mut obj) = item else {
            return None;
        };
        if obj.get("__kwarg__") != Some(&serde_json::Value::Bool(true)) {
            return None;
        }
        obj.remove(name)
    })
}

/// A `timeout=N` kwarg, in seconds.
pub fn timeout_kwarg(arg: Option<Raw<'_>>) -> Option<Duration> {
    let secs = kwarg(arg, "timeout")?.as_f64()?;
    (secs.is_finite() && secs > 0.0).then(|| Duration::from_secs_f64(secs.min(1e9)))
}

/// Whether the job runs with `test=True` (Salt takes true, "True", "true", 1).
pub fn test_kwarg(arg: Option<Raw<'_>>) -> bool {
    match kwarg(arg, "test") {
        Some(serde_json::Value::Bool(b)) => b,
        Some(serde_json::Value::String(s)) => s.eq_ignore_ascii_case("true"),
        Some(serde_json::Value::Number(n)) => n.as_i64() == Some(1),
        _ => false,
    }
}

/// A raw field (metadata, arguments) as JSON; nil and undecodable values are none.
pub fn raw_to_json(raw: Option<Raw<'_>>) -> Option<serde_json::Value> {
    raw.filter(|r| !r.is_nil()).and_then(|r| to_json(r.0).ok())
}

/// Functions whose return is a state run (a map of state results, or render
/// errors).
pub fn is_state_run(fun: &str) -> bool {
    fun.starts_with("state.")
        && !matches!(
            fun,
            "state.running" | "state.show_sls" | "state.show_highstate" | "state.show_top"
        )
}
