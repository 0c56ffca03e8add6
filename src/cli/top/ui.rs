//! `saltsight top`'s screen (ratatui over crossterm): the bus line, jobs with
//! their returns against expected, verdicts, failure groups; up/down (j/k)
//! select a job, Enter shows its recap (`saltsight job`, from the view's own
//! history), Esc or Backspace go back, q or Ctrl-C quit. Redrawn on a tick and
//! on keys; it runs on a thread of its own and only reads what the pipeline
//! hands it.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::Duration;

use ratatui::DefaultTerminal;
use ratatui::Frame;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style as Look};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table, TableState, Wrap};
use tokio_util::sync::CancellationToken;

use super::feed::{BusState, BusWatch};
use super::model::{JobView, Model, Verdict, VerdictKind};
use crate::cli::present::Style;
use crate::history::{Store, query};
use crate::record::Record;
use crate::time::Stamp;

/// How often the screen is redrawn with nothing pressed.
pub const TICK: Duration = Duration::from_millis(250);
/// How often an open recap is read again from the history.
const RECAP_EVERY: Duration = Duration::from_secs(1);

/// What the screen shows.
enum View {
    List,
    /// One job's recap, read again every [`RECAP_EVERY`].
    Job {
        jid: String,
        text: String,
        read_at: std::time::Instant,
        scroll: u16,
    },
}

/// The screen's state.
pub struct Screen {
    model: Model,
    records: Receiver<Record>,
    watch: Arc<BusWatch>,
    history: PathBuf,
    master: String,
    /// The selected job; `None` follows the newest.
    selected: Option<String>,
    view: View,
}

impl Screen {
    pub fn new(
        model: Model,
        records: Receiver<Record>,
        watch: Arc<BusWatch>,
        history: PathBuf,
        master: String,
    ) -> Self {
        Self {
            model,
            records,
            watch,
            history,
            master,
            selected: None,
            view: View::List,
        }
    }

    /// Draws and reads keys until q, Ctrl-C or `cancel` (a signal, or the
    /// pipeline ending); cancels `cancel` on the way out.
    pub fn run(
        mut self,
        terminal: &mut DefaultTerminal,
        cancel: &CancellationToken,
    ) -> std::io::Result<()> {
        let result = self.run_inner(terminal, cancel);
        cancel.cancel();
        result
    }

    fn run_inner(
        &mut self,
        terminal: &mut DefaultTerminal,
        cancel: &CancellationToken,
    ) -> std::io::Result<()> {
        while !cancel.is_cancelled() {
            self.take_records();
            self.refresh_recap(false);
            terminal.draw(|frame| self.draw(frame))?;
            // Our own wait first: crossterm's poll never returns once the
            // terminal has hung up (it reads end-of-file for ever).
            match wait_for_keys(TICK) {
                Keys::Gone => return Ok(()),
                Keys::None => {}
                Keys::Ready => {
                    while event::poll(Duration::ZERO)? {
                        if let Event::Key(key) = event::read()? {
                            if key.kind != KeyEventKind::Release && self.key(key) {
                                return Ok(());
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn take_records(&mut self) {
        loop {
            match self.records.try_recv() {
                Ok(record) => self.model.apply(&record),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return,
            }
        }
    }

    /// One key; `true` to quit.
    fn key(&mut self, key: KeyEvent) -> bool {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match (key.code, &mut self.view) {
            (KeyCode::Char('c'), _) if ctrl => return true,
            (KeyCode::Char('q'), _) => return true,
            (KeyCode::Esc | KeyCode::Backspace | KeyCode::Left, View::Job { .. }) => {
                self.view = View::List;
            }
            (KeyCode::Down | KeyCode::Char('j'), View::Job { scroll, .. }) => {
                *scroll = scroll.saturating_add(1);
            }
            (KeyCode::Up | KeyCode::Char('k'), View::Job { scroll, .. }) => {
                *scroll = scroll.saturating_sub(1);
            }
            (KeyCode::Down | KeyCode::Char('j'), View::List) => self.step(1),
            (KeyCode::Up | KeyCode::Char('k'), View::List) => self.step(-1),
            (KeyCode::Enter | KeyCode::Right, View::List) => {
                if let Some(jid) = self.selected_job().map(|j| j.jid.clone()) {
                    self.selected = Some(jid.clone());
                    self.view = View::Job {
                        jid,
                        text: String::new(),
                        read_at: std::time::Instant::now(),
                        scroll: 0,
                    };
                    self.refresh_recap(true);
                }
            }
            _ => {}
        }
        false
    }

    fn selected_index(&self) -> usize {
        self.selected
            .as_ref()
            .and_then(|jid| self.model.jobs().position(|j| &j.jid == jid))
            .unwrap_or(0)
    }

    fn selected_job(&self) -> Option<&JobView> {
        self.model.jobs().nth(self.selected_index())
    }

    fn step(&mut self, by: isize) {
        let count = self.model.jobs().count();
        if count == 0 {
            return;
        }
        let at = self
            .selected_index()
            .saturating_add_signed(by)
            .min(count - 1);
        self.selected = self.model.jobs().nth(at).map(|j| j.jid.clone());
    }

    /// Reads the open recap again when due (or `now`).
    fn refresh_recap(&mut self, now: bool) {
        let View::Job {
            jid, text, read_at, ..
        } = &mut self.view
        else {
            return;
        };
        if !now && read_at.elapsed() < RECAP_EVERY {
            return;
        }
        *read_at = std::time::Instant::now();
        *text = recap(&self.history, jid);
    }

    fn draw(&self, frame: &mut Frame<'_>) {
        let now = Stamp::now();
        let [top, body] =
            Layout::vertical([Constraint::Length(2), Constraint::Min(0)]).areas(frame.area());
        frame.render_widget(
            Paragraph::new(vec![
                Line::from(bus_line(
                    &self.master,
                    &self.watch.state(),
                    &self.model,
                    now,
                )),
                Line::from(match self.view {
                    View::List => "q quit   ↑↓/j k select   Enter recap",
                    View::Job { .. } => "q quit   Esc back   ↑↓ scroll",
                })
                .style(Look::new().add_modifier(Modifier::DIM)),
            ]),
            top,
        );
        match &self.view {
            View::List => self.draw_list(frame, body, now),
            View::Job {
                jid, text, scroll, ..
            } => frame.render_widget(
                Paragraph::new(text.as_str())
                    .wrap(Wrap { trim: false })
                    .scroll((*scroll, 0))
                    .block(
                        Block::default()
                            .borders(Borders::ALL)
                            .title(format!(" saltsight job {jid} ")),
                    ),
                body,
            ),
        }
    }

    fn draw_list(&self, frame: &mut Frame<'_>, area: Rect, now: Stamp) {
        let [jobs, lower] =
            Layout::vertical([Constraint::Percentage(55), Constraint::Min(0)]).areas(area);
        let [verdicts, groups] =
            Layout::horizontal([Constraint::Percentage(55), Constraint::Min(0)]).areas(lower);
        let widths = job_columns(jobs.width);
        let rows = self.model.jobs().map(|j| {
            let state = if j.is_open() { "running" } else { "done" };
            let look = match (j.failed, j.missing) {
                (0, 0) => Look::new(),
                (0, _) => Look::new().fg(Color::Yellow),
                _ => Look::new().fg(Color::Red),
            };
            let w = |column: usize| usize::from(widths[column]);
            Row::new(vec![
                crate::plain::elide_middle(&j.jid, w(0)),
                crate::plain::cut(&j.fun, w(1)),
                crate::plain::cut(&j.target, w(2)),
                returned(j),
                j.failed.to_string(),
                missing(j, w(5)),
                crate::plain::age(j.age_micros(now)),
                state.to_owned(),
            ])
            .style(look)
        });
        let table = Table::new(rows, widths.map(Constraint::Length))
            .header(
                Row::new([
                    "JID", "FUNCTION", "TARGET", "RETURNED", "FAILED", "MISSING", "AGE", "STATE",
                ])
                .style(Look::new().add_modifier(Modifier::BOLD)),
            )
            .row_highlight_style(Look::new().add_modifier(Modifier::REVERSED))
            .highlight_symbol("▶ ")
            .highlight_spacing(ratatui::widgets::HighlightSpacing::Always)
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(format!(" jobs: {} in flight ", self.model.in_flight())),
            );
        let mut state = TableState::default().with_selected(Some(self.selected_index()));
        frame.render_stateful_widget(table, jobs, &mut state);

        let lines: Vec<Line<'_>> = self.model.verdicts().map(verdict_line).collect();
        frame.render_widget(
            Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(" verdicts ")),
            verdicts,
        );
        let lines: Vec<Line<'_>> = self
            .model
            .groups()
            .flat_map(|g| {
                [
                    Line::from(format!(
                        "{} minion{}  {}  {}  {}",
                        g.count(),
                        if g.count() == 1 { "" } else { "s" },
                        g.category,
                        g.place,
                        g.minions.join(",")
                    ))
                    .style(Look::new().fg(Color::Red)),
                    Line::from(format!("    {}", first_line(&g.comment))),
                ]
            })
            .collect();
        frame.render_widget(
            Paragraph::new(lines).block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(" failure groups "),
            ),
            groups,
        );
    }
}

/// The first line of the screen: the bus, its lag, what came through.
fn bus_line(master: &str, bus: &BusState, model: &Model, now: Stamp) -> String {
    let state = match (bus.connected, bus.in_gap) {
        (_, true) => "GAP (events may be missed)",
        (true, false) => "connected",
        (false, false) => "connecting",
    };
    let quiet = bus.last_event.map_or_else(
        || "no event yet".to_owned(),
        |t| {
            format!(
                "last event {} ago",
                crate::plain::duration_micros(now.micros_since(t))
            )
        },
    );
    let lag = bus.lag_micros.map_or_else(String::new, |l| {
        format!("   lag {}", crate::plain::duration_micros(l))
    });
    let gaps = match &model.last_gap {
        Some(g) => format!(
            "   gaps {} (last {}, {} ms)",
            model.gaps, g.reason, g.duration_ms
        ),
        None => String::new(),
    };
    let refused = if bus.refused > 0 {
        format!("   refused {} (screen behind)", bus.refused)
    } else {
        String::new()
    };
    format!(
        "saltsight top  master {master}   bus {state}   {quiet}{lag}   events {}   records {}{gaps}{refused}",
        bus.events, model.records
    )
}

fn returned(job: &JobView) -> String {
    if job.expected == 0 {
        job.returned.to_string()
    } else {
        format!("{}/{}", job.returned, job.expected)
    }
}

/// Missing minions by reason in `width` characters, whole reasons only.
fn missing(job: &JobView, width: usize) -> String {
    if job.missing == 0 {
        return "0".into();
    }
    let reasons: Vec<String> = job
        .missing_by_reason
        .iter()
        .map(|(reason, n)| format!("{n} {}", reason.as_str()))
        .collect();
    crate::plain::fitted(&reasons, width)
}

/// The jobs table's column widths in an area `width` wide (borders, the
/// selection mark and the gaps between columns taken out): jids whole from
/// 110 columns, else their start and end; the rest to the missing reasons.
fn job_columns(width: u16) -> [u16; 8] {
    let usable = width.saturating_sub(2 + 2 + 7);
    let [jid, fun, target, returned, failed] = if width >= 110 {
        [20, 20, 16, 9, 6]
    } else {
        [13, 11, 6, 7, 4]
    };
    let fixed = jid + fun + target + returned + failed + 4 + 7;
    let missing = usable.saturating_sub(fixed).max(10);
    [jid, fun, target, returned, failed, missing, 4, 7]
}

fn verdict_line(v: &Verdict) -> Line<'_> {
    let time = v.at.to_string();
    let clock = time.get(11..19).unwrap_or_default();
    let (what, colour) = match &v.kind {
        VerdictKind::Missing { reason, evidence } => {
            (format!("missing {reason} ({evidence})"), Color::Yellow)
        }
        VerdictKind::Failed { retcode } => (
            format!(
                "failed retcode {}",
                retcode.map_or("-".into(), |r| r.to_string())
            ),
            Color::Red,
        ),
        VerdictKind::Late { succeeded } => (
            format!(
                "late return, {}",
                if *succeeded { "succeeded" } else { "failed" }
            ),
            Color::Cyan,
        ),
        VerdictKind::Render { sls, message } => {
            (format!("render {sls}: {}", first_line(message)), Color::Red)
        }
        VerdictKind::Drift {
            change,
            state,
            states,
        } => {
            let more = if *states > 1 {
                format!(" (+{} more)", states - 1)
            } else {
                String::new()
            };
            (format!("drift {change} {state}{more}"), Color::Magenta)
        }
    };
    Line::from(format!(
        "{clock} {:<10} {} {}  {what}",
        v.minion, v.jid, v.fun
    ))
    .style(Look::new().fg(colour))
}

fn first_line(text: &str) -> &str {
    text.trim().lines().next().unwrap_or_default()
}

/// `saltsight job JID`'s text, from the history the view writes (in batches:
/// a job just published may not be there yet).
fn recap(history: &std::path::Path, jid: &str) -> String {
    let answer = Store::open_reader(history).and_then(|store| query::job(&store, jid));
    match answer {
        Ok(Some(recap)) => {
            let mut text = Vec::new();
            match crate::cli::recap::show(&recap, Style::plain(), &mut text) {
                Ok(()) => String::from_utf8_lossy(&text).into_owned(),
                Err(e) => format!("cannot show job {jid}: {e}"),
            }
        }
        Ok(None) => format!("Job {jid} is not in the history yet (it is written in batches)."),
        Err(e) => format!("cannot read the history: {e}"),
    }
}

/// What waiting on the terminal gave.
enum Keys {
    /// Input to read.
    Ready,
    /// Nothing within the wait.
    None,
    /// The terminal hung up (the tmux server killed, the ssh session
    /// dropped): no key will ever come.
    Gone,
}

/// Waits up to `wait` for input on the terminal (stdin).
fn wait_for_keys(wait: Duration) -> Keys {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
    let timeout = PollTimeout::try_from(wait).unwrap_or(PollTimeout::MAX);
    match poll(&mut fds, timeout) {
        Ok(0) => Keys::None,
        Ok(_) => match fds[0].revents() {
            Some(r)
                if r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL) =>
            {
                Keys::Gone
            }
            _ => Keys::Ready,
        },
        // A signal (SIGWINCH: ratatui resizes on the next draw).
        Err(_) => Keys::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::top::model::tests::{at, missing, published, record};
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    /// At 80 columns a job's line keeps its jid's start and end, whole
    /// reasons and a short age (issue 68: jids cut to 16 digits, ages read
    /// "641m", reasons "no_").
    #[test]
    fn the_jobs_list_is_readable_at_80_columns() {
        let mut model = Model::new(crate::cli::top::model::Limits {
            in_flight: 10,
            closed: 10,
            verdicts: 10,
            groups: 10,
        });
        let jid = "20261207043319530601";
        model.apply(&record(0, published(jid, &["db1", "web1", "web2"])));
        model.apply(&record(8, missing(jid, "db1")));
        model.apply(&record(9, missing(jid, "web1")));
        let (_tx, rx) = std::sync::mpsc::channel();
        let screen = Screen::new(
            model,
            rx,
            Arc::new(BusWatch::default()),
            PathBuf::from("/nonexistent"),
            "lab".into(),
        );
        let mut terminal = Terminal::new(TestBackend::new(80, 24)).expect("a test terminal");
        let now = Stamp(at(0).0 + 641 * 60 * 1_000_000);
        terminal
            .draw(|frame| screen.draw_list(frame, frame.area(), now))
            .expect("draws");
        let text: String = terminal
            .backend()
            .buffer()
            .content()
            .chunks(80)
            .map(|row| row.iter().map(|c| c.symbol()).collect::<String>() + "\n")
            .collect();
        let row = text
            .lines()
            .find(|l| l.contains("test.sleep"))
            .unwrap_or_else(|| panic!("no job row:\n{text}"));
        assert!(row.contains("202612…530601"), "{row}");
        assert!(row.contains("2 not_connected"), "{row}");
        assert!(row.contains("10h"), "{row}");
    }
}
