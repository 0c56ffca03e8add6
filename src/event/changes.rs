//! What a state run changed, read from the return's raw msgpack as triage reads
//! what failed: for the states that changed (or, under `test=True`, would
//! change) their sls, id, function, name and a short summary of `changes`.
//! Every state's key and outcome are the walk's ([`States::entries`]); nothing
//! is built for a state that did not change, and at most `max_changed` are
//! read whole.

use super::states::{StateEntry, States, fields, text_of};

/// Lines of a file's diff a summary keeps.
const DIFF_LINES: usize = 6;

/// Whether a state changed: its `changes` map is not empty, or its result
/// is `null` (`test=True`: it would change).
pub fn changed(entry: &StateEntry<'_>) -> bool {
    entry.changed || entry.result.is_none()
}

/// A state that changed, or would.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    /// Index into the run's [`States::entries`].
    pub index: usize,
    pub sls: String,
    pub state_id: String,
    /// `mod.fun` (`file.managed`).
    pub function: String,
    pub name: String,
    /// Under `test=True`: it would change (`result: null`).
    pub would_change: bool,
    /// `changes` in short: a file's diff's first lines, a package's old and
    /// new versions, else the map as compact JSON; capped.
    pub summary: String,
}

/// What changed in a state-run return (its states as they ran are its
/// [`States::entries`]).
#[derive(Debug, Clone, Default)]
pub struct StateRun {
    /// The first `max_changed` states that changed (or would), read whole.
    pub changed: Vec<Changed>,
    /// States that changed past `max_changed`: counted, not read.
    pub changed_not_read: u32,
}

/// What changed in a state-run return's states ([`changed`]); a failed
/// state is not counted.
pub fn state_run(states: &States<'_>, max_changed: usize, summary_bytes: usize) -> StateRun {
    let mut run = StateRun::default();
    for (index, entry) in states.entries().iter().enumerate() {
        // A failed state is triage's: it did not settle anything.
        if changed(entry) && entry.result != Some(false) {
            if run.changed.len() < max_changed {
                run.changed.push(read_changed(entry, index, summary_bytes));
            } else {
                run.changed_not_read += 1;
            }
        }
    }
    run
}

/// `mod_|-id_|-name_|-fun` → (mod, id, name, fun).
pub fn key_parts(key: &[u8]) -> (String, String, String, String) {
    let text = String::from_utf8_lossy(key);
    let mut parts = text.splitn(3, "_|-");
    let module = parts.next().unwrap_or_default().to_owned();
    let id = parts.next().unwrap_or_default().to_owned();
    let rest = parts.next().unwrap_or_default();
    let (name, fun) = rest.rsplit_once("_|-").unwrap_or((rest, ""));
    (module, id, name.to_owned(), fun.to_owned())
}

fn read_changed(entry: &StateEntry<'_>, index: usize, summary_bytes: usize) -> Changed {
    let (module, key_id, key_name, fun) = key_parts(entry.key);
    let [sls, id, name, changes] = fields(entry.raw, [b"__sls__", b"__id__", b"name", b"changes"]);
    let text = |raw: Option<&[u8]>, max: usize| raw.and_then(|r| text_of(r, max, false));
    Changed {
        index,
        sls: text(sls, 256).unwrap_or_default(),
        state_id: text(id, 256).unwrap_or(key_id),
        function: format!("{module}.{fun}"),
        name: text(name, 256).unwrap_or(key_name),
        would_change: entry.result.is_none(),
        summary: changes.map_or_else(String::new, |c| summary(c, summary_bytes)),
    }
}

/// `changes` in short, at most `max` bytes.
fn summary(changes: &[u8], max: usize) -> String {
    let [diff] = fields(changes, [b"diff"]);
    let text = match diff.and_then(|d| text_of(d, max.saturating_mul(4), false)) {
        Some(diff) => diff.lines().take(DIFF_LINES).collect::<Vec<_>>().join("\n"),
        None => match text_of(changes, max, false) {
            Some(text) if text != "{}" => text,
            _ => String::new(),
        },
    };
    cut(text, max)
}

fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        let end = crate::plain::within(&text, max).len();
        text.truncate(end);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pack(v: serde_json::Value) -> Vec<u8> {
        rmp_serde::to_vec_named(&v).expect("packs")
    }

    #[test]
    fn changed_states_are_read_and_the_rest_only_listed() {
        let raw = pack(json!({
            "file_|-motd_|-/etc/motd_|-managed": {
                "result": true, "__sls__": "base.motd", "__id__": "motd", "name": "/etc/motd",
                "changes": {"diff": "--- \n+++ \n@@ -1 +1 @@\n-hand edit\n+managed\n l2\n l3\n l4"}},
            "pkg_|-tools_|-tools_|-installed": {
                "result": true, "__sls__": "base.pkgs", "__id__": "tools", "name": "tools",
                "changes": {"htop": {"old": "", "new": "3.2.2"}}},
            "test_|-quiet_|-quiet_|-succeed_without_changes": {
                "result": true, "__sls__": "base", "__id__": "quiet", "changes": {}},
            "cmd_|-broken_|-false_|-run": {
                "result": false, "__sls__": "base", "__id__": "broken", "changes": {"retcode": 1}},
        }));
        let states = States::of(&raw).expect("a state run");
        let run = state_run(&states, 10, 200);
        assert_eq!(states.entries().len(), 4);
        assert_eq!(states.entries().iter().filter(|e| changed(e)).count(), 3);
        assert_eq!(run.changed.len(), 2, "{:?}", run.changed);
        let motd = &run.changed[0];
        assert_eq!(
            (
                motd.sls.as_str(),
                motd.state_id.as_str(),
                motd.function.as_str(),
                motd.name.as_str()
            ),
            ("base.motd", "motd", "file.managed", "/etc/motd")
        );
        assert_eq!(motd.summary.lines().count(), DIFF_LINES);
        assert!(motd.summary.contains("-hand edit"), "{}", motd.summary);
        assert_eq!(
            run.changed[1].summary,
            r#"{"htop":{"new":"3.2.2","old":""}}"#
        );
        assert_eq!(run.changed_not_read, 0);
    }

    #[test]
    fn test_mode_would_change_and_the_cap_counts_the_rest() {
        let raw = pack(json!({
            "file_|-a_|-/a_|-managed": {"result": null, "__sls__": "s", "__id__": "a", "changes": {}},
            "file_|-b_|-/b_|-managed": {"result": null, "__sls__": "s", "__id__": "b", "changes": {}},
        }));
        let run = state_run(&States::of(&raw).expect("a state run"), 1, 200);
        assert!(run.changed[0].would_change);
        assert_eq!(run.changed[0].summary, "");
        assert_eq!(run.changed_not_read, 1);
        assert!(States::of(&pack(json!(["Rendering SLS failed"]))).is_none());
    }

    #[test]
    fn summaries_are_capped_on_a_char_boundary() {
        let raw = pack(json!({"file_|-a_|-/a_|-managed": {
            "result": true, "__sls__": "s", "__id__": "a", "changes": {"diff": "é".repeat(100)}}}));
        let run = state_run(&States::of(&raw).expect("a state run"), 1, 11);
        assert_eq!(run.changed[0].summary, format!("{}…", "é".repeat(5)));
    }

    #[test]
    fn keys_split_into_module_id_name_and_function() {
        assert_eq!(
            key_parts(b"file_|-motd_|-/etc/motd_|-managed"),
            (
                "file".into(),
                "motd".into(),
                "/etc/motd".into(),
                "managed".into()
            )
        );
    }
}
