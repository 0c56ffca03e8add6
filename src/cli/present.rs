//! How the query commands show their answers to a person: aligned tables,
//! and colour only on a terminal (and never with `NO_COLOR` set). `--json`
//! prints the answer itself instead.

pub use crate::plain::{cut, names, when};
use std::io::{IsTerminal, Write};

/// Colours and weights, or nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    color: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Bold,
    Dim,
    Good,
    Bad,
    Warn,
}

impl Style {
    /// Colour when stdout is a terminal and `NO_COLOR` is unset (no-color.org).
    pub fn for_stdout() -> Style {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Style {
            color: !no_color && std::io::stdout().is_terminal(),
        }
    }

    pub fn plain() -> Style {
        Style { color: false }
    }

    pub fn paint(self, tone: Tone, text: &str) -> String {
        if !self.color || text.is_empty() {
            return text.to_owned();
        }
        let code = match tone {
            Tone::Bold => "1",
            Tone::Dim => "2",
            Tone::Good => "32",
            Tone::Bad => "31",
            Tone::Warn => "33",
        };
        format!("\x1b[{code}m{text}\x1b[0m")
    }
}

/// Rows of cells under a header, each column as wide as its widest cell (a
/// cell's colour codes do not count).
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

fn visible_width(text: &str) -> usize {
    let mut width = 0;
    let mut in_escape = false;
    for c in text.chars() {
        match (in_escape, c) {
            (false, '\x1b') => in_escape = true,
            (true, 'm') => in_escape = false,
            (true, _) => {}
            (false, _) => width += 1,
        }
    }
    width
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn write(&self, style: Style, out: &mut dyn Write) -> std::io::Result<()> {
        let columns = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(visible_width(cell));
            }
        }
        let line = |cells: Vec<String>, out: &mut dyn Write| -> std::io::Result<()> {
            let mut text = String::new();
            for (i, cell) in cells.iter().enumerate().take(columns) {
                text.push_str(cell);
                if i + 1 < columns {
                    let pad = widths[i].saturating_sub(visible_width(cell)) + 2;
                    text.push_str(&" ".repeat(pad));
                }
            }
            writeln!(out, "{}", text.trim_end())
        };
        let header = self
            .header
            .iter()
            .map(|h| style.paint(Tone::Bold, h))
            .collect();
        line(header, out)?;
        for row in &self.rows {
            line(row.clone(), out)?;
        }
        Ok(())
    }
}

/// What decided a missing verdict, said with what presence saw: "no
/// connection since 16:41:07", "connection gone at 16:42:10", "connected from
/// 10.1.2.3, no return"; otherwise the evidence's name.
pub fn missing_evidence(
    evidence: &str,
    disconnected_at: Option<&str>,
    address: Option<&str>,
) -> String {
    match (evidence, disconnected_at, address) {
        ("presence_absent", Some(at), _) => format!("no connection since {}", when(at)),
        ("presence_absent", None, _) => "no connection (never seen connected)".to_owned(),
        ("presence_lost", Some(at), _) => format!("connection gone at {}", when(at)),
        ("connected_silent", _, Some(address)) => format!("connected from {address}, no return"),
        (evidence, _, _) => evidence.to_owned(),
    }
}

/// A missing streak: "3", or "3 since 2026-11-25 16:41:07".
pub fn streak(streak: u64, since: Option<&str>) -> String {
    match since {
        Some(since) if streak > 1 => format!("{streak} since {}", when(since)),
        _ => streak.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_on_visible_width() {
        let mut t = Table::new(&["A", "B"]);
        t.row(vec!["\x1b[31mxx\x1b[0m".into(), "y".into()]);
        t.row(vec!["long".into(), "z".into()]);
        let mut out = Vec::new();
        t.write(Style::plain(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text, "A     B\n\x1b[31mxx\x1b[0m    y\nlong  z\n");
    }

    #[test]
    fn a_missing_verdict_says_what_presence_saw() {
        let at = Some("2026-11-25T16:41:07.123456Z");
        assert_eq!(
            missing_evidence("presence_absent", at, None),
            "no connection since 2026-11-25 16:41:07"
        );
        assert_eq!(
            missing_evidence("presence_lost", at, None),
            "connection gone at 2026-11-25 16:41:07"
        );
        assert_eq!(
            missing_evidence("connected_silent", None, Some("10.1.2.3")),
            "connected from 10.1.2.3, no return"
        );
        assert_eq!(
            missing_evidence("connected_silent", None, None),
            "connected_silent"
        );
        assert_eq!(streak(3, at), "3 since 2026-11-25 16:41:07");
        assert_eq!(streak(1, at), "1");
    }

    #[test]
    fn small_helpers() {
        assert_eq!(Style::plain().paint(Tone::Bad, "x"), "x");
    }
}

/// What every query command takes: where the history is, and `--json`.
#[derive(Debug, clap::Args)]
pub struct QueryArgs {
    #[command(flatten)]
    pub state: super::flags::StateArgs,
    /// Print the answer as JSON (for scripts) instead of a table
    #[arg(long)]
    pub json: bool,
}

/// Opens the history the agent writes (`[history]`), to read.
pub fn open_history(
    config: &crate::config::Config,
) -> Result<crate::history::Store, super::Failure> {
    crate::history::Store::open_reader(&config.history.path)
        .map_err(|e| super::Failure::new(super::exit::UNAVAILABLE, e.to_string()))
}

/// `--since`: a duration back from now (`1h`, `2d`) or a time
/// (`2026-11-24T03:00:00Z`).
pub fn parse_since(text: &str) -> Result<crate::time::Stamp, String> {
    if let Some(at) = crate::time::Stamp::parse(text) {
        return Ok(at);
    }
    let back = crate::config::duration::parse_duration(text)
        .map_err(|e| format!("--since {text:?}: {e}; or a time such as 2026-11-24T03:00:00Z"))?;
    let now = std::time::SystemTime::now();
    Ok(crate::time::Stamp::from_system_time(
        now.checked_sub(back).unwrap_or(std::time::UNIX_EPOCH),
    ))
}

/// Prints `value` as pretty JSON.
pub fn print_json(value: &impl serde::Serialize, out: &mut dyn Write) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)
}
