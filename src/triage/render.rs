//! Render failures: a state run that never ran a state, because an SLS did not
//! render. Salt returns a list of strings and retcode 1; the SLS is named only in
//! the text ("Rendering SLS 'base:web' failed: ..."), with a line (Jinja, YAML)
//! when Salt gives one.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::event::json::to_json;

/// One render error of a return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderError {
    pub saltenv: Option<String>,
    pub sls: Option<String>,
    pub line: Option<u32>,
    pub column: Option<u32>,
    /// The message after Salt's prefix (the whole text when there is none).
    pub message: String,
}

static RENDERING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^Rendering SLS '(?:([^:']+):)?([^']+)' failed(?:, render error)?: ?([\s\S]*)$")
        .expect("pattern compiles")
});
static RENDERING_OLD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^Rendering SLS (\S+) failed, render error: ?([\s\S]*)$").expect("pattern compiles")
});
static NO_SLS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^No matching sls found for '([^']+)' in env '([^']+)'").expect("pattern compiles")
});
static LINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"line (\d+)(?:, column (\d+))?").expect("pattern compiles"));

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
    Some(texts.into_iter().map(parse).collect())
}

fn parse(text: &str) -> RenderError {
    let (saltenv, sls, message) = if let Some(c) = RENDERING.captures(text) {
        (
            c.get(1).map(|m| m.as_str().to_owned()),
            c.get(2).map(|m| m.as_str().to_owned()),
            c.get(3).map_or("", |m| m.as_str()),
        )
    } else if let Some(c) = RENDERING_OLD.captures(text) {
        (
            None,
            c.get(1).map(|m| m.as_str().to_owned()),
            c.get(2).map_or("", |m| m.as_str()),
        )
    } else if let Some(c) = NO_SLS.captures(text) {
        (
            c.get(2).map(|m| m.as_str().to_owned()),
            c.get(1).map(|m| m.as_str().to_owned()),
            text,
        )
    } else {
        (None, None, text)
    };
    let line = LINE.captures(message);
    let number = |i| {
        line.as_ref()
            .and_then(|c| c.get(i))
            .and_then(|m| m.as_str().parse().ok())
    };
    RenderError {
        saltenv,
        sls,
        line: number(1),
        column: number(2),
        message: message.trim().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(v: serde_json::Value, retcode: i64) -> Option<Vec<RenderError>> {
        render_errors(&rmp_serde::to_vec_named(&v).unwrap(), Some(retcode))
    }

    #[test]
    fn yaml_error_names_sls_line_and_column() {
        let e = errors(
            serde_json::json!(["Rendering SLS 'base:yaml_error' failed: while parsing a flow sequence\n  in \"<unicode string>\", line 3, column 13\ndid not find expected ',' or ']'"]),
            1,
        )
        .unwrap();
        assert_eq!(e.len(), 1);
        assert_eq!(
            (
                e[0].saltenv.as_deref(),
                e[0].sls.as_deref(),
                e[0].line,
                e[0].column
            ),
            (Some("base"), Some("yaml_error"), Some(3), Some(13))
        );
        assert!(e[0].message.starts_with("while parsing a flow sequence"));
    }

    #[test]
    fn missing_sls_is_named_too() {
        let e = errors(
            serde_json::json!(["No matching sls found for 'nope' in env 'base'"]),
            1,
        )
        .unwrap();
        assert_eq!(
            (e[0].sls.as_deref(), e[0].saltenv.as_deref(), e[0].line),
            (Some("nope"), Some("base"), None)
        );
    }

    #[test]
    fn other_shapes_are_not_render_failures() {
        assert_eq!(errors(serde_json::json!(["x"]), 0), None, "retcode 0");
        assert_eq!(errors(serde_json::json!("text"), 1), None);
        assert_eq!(errors(serde_json::json!([]), 1), None);
        assert_eq!(errors(serde_json::json!(["a", 1]), 1), None);
        let unknown = errors(serde_json::json!(["Pillar failed to render"]), 1).unwrap();
        assert_eq!(
            (unknown[0].sls.as_deref(), unknown[0].message.as_str()),
            (None, "Pillar failed to render")
        );
    }
}
