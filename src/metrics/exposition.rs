//! The two exposition formats a Prometheus scrape may ask for, and which one it
//! gets. `prometheus-client` writes OpenMetrics 1.0; Prometheus' classic text
//! format (0.0.4) is made from that text, family by family: a counter's `# HELP`
//! and `# TYPE` name its `_total` series (promtool reads the OpenMetrics form's
//! `x` as a family without samples, and `x_total` as one without help), the
//! OpenMetrics-only types become their 0.0.4 equivalents, and `# UNIT`,
//! exemplars and `# EOF` go.
//!
//! Negotiation as the Go client does it: OpenMetrics when the `Accept` header
//! asks for `application/openmetrics-text` at least as much as for anything
//! else, else the 0.0.4 text (no header, `*/*`, `text/plain`).

use foldhash::HashSet;

pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
pub const TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Which format to answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    OpenMetrics,
    Text,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => OPENMETRICS,
            Format::Text => TEXT,
        }
    }

    /// The format an `Accept` header prefers (q-values honoured; a tie goes to
    /// OpenMetrics, which only a client that knows it names).
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Text;
        };
        let (mut openmetrics, mut text) = (0.0f32, 0.0f32);
        for range in accept.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or_default().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
                .and_then(|(_, v)| v.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            match media.as_str() {
                "application/openmetrics-text" => openmetrics = openmetrics.max(q),
                "text/plain" | "text/*" | "*/*" => text = text.max(q),
                _ => {}
            }
        }
        if openmetrics > 0.0 && openmetrics >= text {
            Format::OpenMetrics
        } else {
            Format::Text
        }
    }
}

/// OpenMetrics text (as `prometheus-client` writes it) → the 0.0.4 text format.
pub fn to_text_format(openmetrics: &str) -> String {
    let typed = || {
        openmetrics
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|rest| rest.split_once(' '))
    };
    let counters: HashSet<&str> = typed()
        .filter(|(_, kind)| *kind == "counter")
        .map(|(name, _)| name)
        .collect();
    let infos: HashSet<&str> = typed()
        .filter(|(_, kind)| *kind == "info")
        .map(|(name, _)| name)
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            // 0.0.4 escapes only `\` and newlines in help text.
            let help = help.replace("\\\"", "\"");
            let name = series_name(name, &counters, &infos);
            out.push_str(&format!("# HELP {name} {help}\n"));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (name, kind) = match kind {
                "counter" => (format!("{name}_total"), "counter"),
                "info" => (format!("{name}_info"), "gauge"),
                "stateset" => (name.to_string(), "gauge"),
                "gaugehistogram" => (name.to_string(), "histogram"),
                "unknown" => (name.to_string(), "untyped"),
                other => (name.to_string(), other),
            };
            out.push_str(&format!("# TYPE {name} {kind}\n"));
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        // A sample: its exemplar (` # {...} v`) goes; a counter's `_created` too.
        let sample = match line.find(" # {") {
            Some(at) => &line[..at],
            None => line,
        };
        let name = sample.split(['{', ' ']).next().unwrap_or_default();
        if let Some(family) = name.strip_suffix("_created") {
            if counters.contains(family) {
                continue;
            }
        }
        out.push_str(sample);
        out.push('\n');
    }
    out
}

/// A family's name as its series carry it in 0.0.4 (`_total` for a counter,
/// `_info` for an info).
fn series_name(family: &str, counters: &HashSet<&str>, infos: &HashSet<&str>) -> String {
    if counters.contains(family) {
        format!("{family}_total")
    } else if infos.contains(family) {
        format!("{family}_info")
    } else {
        family.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_asks_for_openmetrics_curl_gets_text() {
        // Prometheus 2.42's scrape header.
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prometheus)), Format::OpenMetrics);
        for text in [
            None,
            Some("*/*"),
            Some("text/plain; version=0.0.4"),
            Some("text/plain;version=0.0.4;q=1,application/openmetrics-text;version=1.0.0;q=0.5"),
            Some("application/json"),
            Some("application/openmetrics-text;q=0"),
        ] {
            assert_eq!(Format::negotiate(text), Format::Text, "{text:?}");
        }
    }

    #[test]
    fn counters_name_their_total_series_and_openmetrics_only_lines_go() {
        let om = "# HELP saltsight_jobs Jobs \\\"published\\\".\n# TYPE saltsight_jobs counter\n# UNIT saltsight_jobs jobs\nsaltsight_jobs_total{function=\"test.ping\"} 3 # {trace_id=\"x\"} 1\nsaltsight_jobs_created 1.7e9\n# HELP saltsight_bus_connected Connected.\n# TYPE saltsight_bus_connected gauge\nsaltsight_bus_connected 1\n# HELP saltsight_build Build.\n# TYPE saltsight_build info\nsaltsight_build_info{version=\"0.1.0\"} 1\n# EOF\n";
        assert_eq!(
            to_text_format(om),
            "# HELP saltsight_jobs_total Jobs \"published\".\n# TYPE saltsight_jobs_total counter\nsaltsight_jobs_total{function=\"test.ping\"} 3\n# HELP saltsight_bus_connected Connected.\n# TYPE saltsight_bus_connected gauge\nsaltsight_bus_connected 1\n# HELP saltsight_build_info Build.\n# TYPE saltsight_build_info gauge\nsaltsight_build_info{version=\"0.1.0\"} 1\n"
        );
    }
}
