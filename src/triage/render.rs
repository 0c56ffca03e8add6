//! Render and compile failures: a state run that never ran a state. Salt returns
//! a list of strings and a non-zero retcode (1, the state compiler's; 5, the
//! pillar's), one string per error, naming the SLS only in its text, in one of
//! the forms Salt's state compiler and pillar write (`Rendering SLS 'base:web'
//! failed: ...`, `State 'x' in SLS 'web' is not formed as a list`, `Detected
//! conflicting IDs ... found in SLS 'base:a' and SLS 'base:b'`, ...). The line is
//! the template's own (`; line N`, an imported template's `map.jinja(N):`, a
//! YAML problem mark), never a frame of Salt's traceback.
//!
//! The pillar's header line is not a failure (the errors after it are pillar
//! SLS); identical strings in one return are one failure; a refusal because a
//! state run is already running is one `already_running` failure per return.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::category::{Category, Classification, EVIDENCE_MAX};
use crate::event::json::to_json;
use crate::plain::within;

/// One render error of a return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderError {
    pub saltenv: Option<String>,
    pub sls: Option<String>,
    pub line: Option<u32>,
    pub column: Option<u32>,
    /// The message after Salt's prefix (the whole text when there is none).
    pub message: String,
    /// A pillar SLS (after the pillar's header), not a state SLS.
    pub pillar: bool,
    /// `render`, or `already_running`; the form that named the SLS as its rule.
    pub classification: Classification,
}

/// Strings of one return looked at, at most (a return is a handful).
const MAX_ERRORS: usize = 1_000;

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("render pattern compiles (tested)")
}

static PILLAR_HEADER: LazyLock<Regex> =
    LazyLock::new(|| re(r"^Pillar failed to render with the following messages:?\s*$"));
static ALREADY_RUNNING: LazyLock<Regex> =
    LazyLock::new(|| re(r#"^The function "[^"]+" is running as PID \d+"#));

/// How a form names the SLS: which capture group holds it, and the saltenv.
struct Form {
    id: &'static str,
    regex: Regex,
    sls: usize,
    saltenv: Option<usize>,
}

/// Ordered: the first form that matches names the SLS. Each is verbatim from
/// Salt's `state.py`, `utils/requisite.py` or `pillar/__init__.py`.
static FORMS: LazyLock<Vec<Form>> = LazyLock::new(|| {
    [
        // state.py render_state; pillar (`failed.` or `failed, render error:`)
        ("rendering_sls", r"^Rendering SLS '(?:([^:']+):)?([^']+)' failed", 2, Some(1)),
        ("rendering_sls", r"^Rendering SLS (\S+) failed, render error", 1, None),
        ("no_matching_sls", r"^No matching sls found for '([^']+)' in env '([^']+)'", 1, Some(2)),
        // an include (unquoted, saltenv); a pillar SLS (quoted, environment)
        (
            "sls_not_available",
            r"^Specified SLS '?([^'\s]+)'? (?:in (?:saltenv|environment) '?([^'\s]+)'? is not available|on local filesystem cannot be found)",
            1,
            Some(2),
        ),
        (
            "conflicting_ids",
            r#"^Detected conflicting IDs[\s\S]*?found in SLS ['"](?:([^:'"]+):)?([^'"]+)['"]"#,
            2,
            Some(1),
        ),
        ("cannot_extend", r"^Cannot extend ID '[^']+' in '(?:([^:']+):)?([^']+)'", 2, Some(1)),
        ("include", r"within SLS '(?:([^:']+):)?([^']+)'", 2, Some(1)),
        // 3008 requisites: ({'SLS': 'x', 'ID': 'y'}, ...) and `in SLS [x]`
        ("requisite", r"\{'SLS': '([^']+)'", 1, None),
        ("requisite", r" in SLS \[([^\]]+)\]", 1, None),
        ("compile", r#"(?:in|is) SLS "([^"]+)""#, 1, None),
        ("requisite", r#"SLS "([^"]+)" ID"#, 1, None),
        ("compile", r"(?:in|In) SLS '(?:([^:']+):)?([^']+)'", 2, Some(1)),
        ("compile", r"(?:in|of) SLS ([A-Za-z0-9_./-]+)", 1, None),
        ("compile", r"^SLS '?([A-Za-z0-9_./-]+)'? does not render", 1, None),
        ("pillar_top", r"^Rendering (Primary) Top file failed", 0, None),
        ("pillar_top", r"^Rendering Top file (\S+) failed", 1, None),
    ]
    .into_iter()
    .map(|(id, pattern, sls, saltenv)| Form {
        id,
        regex: re(pattern),
        sls,
        saltenv,
    })
    .collect()
});

/// Salt's prefix before the error itself (the pillar's "failed. Please see
/// master log for details." is kept whole: it is all there is).
static PREFIX: LazyLock<Regex> =
    LazyLock::new(|| re(r"^Rendering SLS (?:'[^']+'|\S+) failed(?:, render error:?|:)\s*"));

/// `SaltRenderError`'s own position: `; line N` (Jinja, after any traceback).
static JINJA_LINE: LazyLock<Regex> = LazyLock::new(|| re(r"; line (\d+)"));
/// An error inside an imported template: `<path>/map.jinja(5):`.
static IMPORTED_LINE: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^\S+?\((\d+)\):$"));
/// A traceback frame in the SLS itself (py renderer) or the template (Jinja).
static SLS_FRAME_LINE: LazyLock<Regex> =
    LazyLock::new(|| re(r#"File "(?:[^"]+\.sls|<template>)", line (\d+)"#));
/// A YAML mark; the last one is the problem.
static YAML_LINE: LazyLock<Regex> = LazyLock::new(|| re(r"line (\d+), column (\d+)"));

/// The render errors of a return that is a list of strings, with a non-zero
/// retcode. `None` when the return is not that shape.
pub fn render_errors(raw: &[u8], retcode: Option<i64>) -> Option<Vec<RenderError>> {
    if retcode.unwrap_or(0) == 0 {
        return None;
    }
    let Ok(Value::Array(items)) = to_json(raw) else {
        return None;
    };
    let texts: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
    if texts.is_empty() || texts.len() != items.len() {
        return None;
    }
    Some(errors(&texts))
}

/// The errors the strings of one return say (see the module doc).
pub fn errors(texts: &[&str]) -> Vec<RenderError> {
    // A string starting with white space continues the one before it (Salt
    // splits some messages over several).
    let mut joined: Vec<String> = Vec::new();
    for text in texts.iter().take(MAX_ERRORS) {
        match joined.last_mut() {
            Some(last) if text.starts_with([' ', '\t']) && !text.trim().is_empty() => {
                last.push('\n');
                last.push_str(text);
            }
            _ => joined.push((*text).to_owned()),
        }
    }
    let mut out: Vec<RenderError> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    let mut pillar = false;
    for text in &joined {
        if text.trim().is_empty() {
            continue;
        }
        if PILLAR_HEADER.is_match(text) {
            pillar = true;
            continue;
        }
        if ALREADY_RUNNING.is_match(text) {
            if !out
                .iter()
                .any(|e| e.classification.category == Category::AlreadyRunning)
            {
                out.push(already_running(text));
            }
            continue;
        }
        if seen.contains(&text.as_str()) {
            continue;
        }
        seen.push(text);
        out.push(parse(text, pillar));
    }
    out
}

fn already_running(text: &str) -> RenderError {
    RenderError {
        saltenv: None,
        sls: None,
        line: None,
        column: None,
        message: text.trim().to_owned(),
        pillar: false,
        classification: classification(Category::AlreadyRunning, "already_running", text),
    }
}

fn classification(category: Category, rule: &'static str, text: &str) -> Classification {
    let first = text.lines().next().unwrap_or_default();
    Classification {
        category,
        rule: rule.into(),
        evidence: Some(within(first, EVIDENCE_MAX).to_owned()),
        host: None,
        url: None,
        package: None,
    }
}

/// One string: its SLS, saltenv, line and column.
pub fn parse(text: &str, pillar: bool) -> RenderError {
    let form = FORMS
        .iter()
        .find_map(|f| f.regex.captures(text).map(|c| (f, c)));
    let (rule, saltenv, sls) = match &form {
        Some((f, _)) if f.id == "pillar_top" && f.sls == 0 => (f.id, None, Some("top".to_owned())),
        Some((f, c)) => (
            f.id,
            f.saltenv
                .and_then(|g| c.get(g))
                .map(|m| m.as_str().to_owned()),
            c.get(f.sls).map(|m| m.as_str().to_owned()),
        ),
        None => ("render", None, None),
    };
    let message = PREFIX.replace(text, "");
    let (line, column) = position(&message);
    RenderError {
        saltenv,
        sls,
        line,
        column,
        message: message.trim().to_owned(),
        pillar,
        classification: classification(Category::Render, rule, text),
    }
}

/// The line (and column) in the template, never in Salt's own code.
fn position(message: &str) -> (Option<u32>, Option<u32>) {
    let number = |m: Option<regex::Match<'_>>| {
        m.and_then(|m| m.as_str().parse::<u32>().ok())
            .filter(|n| *n > 0)
    };
    for pattern in [&*JINJA_LINE, &*IMPORTED_LINE, &*SLS_FRAME_LINE] {
        if let Some(line) = number(pattern.captures(message).and_then(|c| c.get(1))) {
            return (Some(line), None);
        }
    }
    match YAML_LINE.captures_iter(message).last() {
        Some(c) => (number(c.get(1)), number(c.get(2))),
        None => (None, None),
    }
}

#[cfg(test)]
mod tests;
