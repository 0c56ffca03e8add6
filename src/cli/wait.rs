//! `saltsight wait JID` (and `saltsight job JID --wait`): waits for a job in
//! the history the running agent writes, then exits with the truth: 0 only
//! when every expected minion returned and succeeded; a failed return, a
//! minion that never returned, a job never seen and a timeout each have a code
//! of their own (`exit`). Salt's own `salt` exits 0 in some of those cases; a
//! CI pipeline runs `jid=$(salt --async ...)` and then this.

use std::io::Write;
use std::time::{Duration, Instant};

use clap::Args;

use super::present::{QueryArgs, names, open_history};
use super::recap::answer;
use super::{Failure, Outcome, exit};
use crate::config::Config;
use crate::config::duration::parse_duration;
use crate::history::query::{JobRecap, job};

/// How often the history is read again while waiting (it is written in
/// batches of about a second).
const POLL: Duration = Duration::from_millis(250);
/// A job the history has not heard of by then is unknown (it may have been
/// published before the agent ran, or not be a jid at all).
const UNKNOWN_AFTER: Duration = Duration::from_secs(30);

#[derive(Debug, Args)]
pub struct WaitArgs {
    /// The job's id (`salt --async` prints it; `salt --show-jid` too)
    pub jid: String,
    #[command(flatten)]
    pub until: Until,
    #[command(flatten)]
    pub query: QueryArgs,
}

/// How long to wait.
#[derive(Debug, Args, Clone)]
pub struct Until {
    /// Give up after this long (30s, 10m): exit 6 with what is known so far
    #[arg(long, default_value = "10m")]
    pub timeout: String,
}

pub fn run(args: &WaitArgs, config: &Config, out: &mut dyn Write) -> Result<Outcome, Failure> {
    wait_for(&args.jid, &args.until, args.query.json, config, out)
}

/// Waits for `jid` to close, shows its recap, and says how it ended.
pub fn wait_for(
    jid: &str,
    until: &Until,
    json: bool,
    config: &Config,
    out: &mut dyn Write,
) -> Result<Outcome, Failure> {
    let timeout = parse_duration(&until.timeout)
        .map_err(|e| Failure::new(exit::USAGE, format!("--timeout {:?}: {e}", until.timeout)))?;
    check_jid(jid)?;
    let store = open_history(config)?;
    let started = Instant::now();
    let recap = loop {
        let recap = job(&store, jid).map_err(|e| Failure::runtime(e.to_string()))?;
        let waited = started.elapsed();
        match recap {
            Some(recap) if !recap.open => break recap,
            Some(recap) if waited >= timeout => {
                answer(&recap, json, out)?;
                return Err(Failure::new(
                    exit::TIMED_OUT,
                    format!(
                        "job {jid} had not finished after {}: {} of {} minions returned; waiting on {}",
                        until.timeout,
                        recap.succeeded.len() + recap.failed.len(),
                        recap.expected,
                        super::recap::outstanding(&recap)
                    ),
                ));
            }
            None if waited >= timeout.min(UNKNOWN_AFTER) => {
                return Err(Failure::new(
                    exit::NOT_FOUND,
                    format!(
                        "no job {jid} in the history ({}) after {}s: is it a job id, published while `saltsight run` was writing this history?",
                        store.path().display(),
                        waited.as_secs()
                    ),
                ));
            }
            _ => std::thread::sleep(POLL),
        }
    };
    answer(&recap, json, out)?;
    verdict(&recap)
}

/// A job id as Salt makes them (digits, `%Y%m%d%H%M%S%f`), or a usage error
/// at once: no history holds anything else.
pub fn check_jid(jid: &str) -> Result<(), Failure> {
    if crate::event::tag::looks_like_jid(jid) {
        return Ok(());
    }
    Err(Failure::new(
        exit::USAGE,
        format!("{jid:?} is not a job id (Salt's are 20 digits, as `salt --show-jid` prints them)"),
    ))
}

/// How a closed job ended: a failed return first, then a minion missing (or
/// records of it the history lacks, or none targeted), else success.
pub fn verdict(recap: &JobRecap) -> Result<Outcome, Failure> {
    if !recap.failed.is_empty() {
        return Err(Failure::new(
            exit::JOB_FAILED,
            format!("job {}: failed on {}", recap.jid, names(&recap.failed, 10)),
        ));
    }
    if !recap.missing.is_empty() {
        let missing: Vec<String> = recap
            .missing
            .iter()
            .map(|m| format!("{} ({})", m.minion, m.reason))
            .collect();
        return Err(Failure::new(
            exit::JOB_INCOMPLETE,
            format!("job {}: no return from {}", recap.jid, names(&missing, 10)),
        ));
    }
    if recap.incomplete > 0 {
        // Never 0 on an answer that lacks records: they may be misses.
        return Err(Failure::new(
            exit::JOB_INCOMPLETE,
            format!(
                "job {}: the history lacks {} of its records (its writer was behind); not every return is known",
                recap.jid, recap.incomplete
            ),
        ));
    }
    if recap.expected == 0 && recap.succeeded.is_empty() {
        return Err(Failure::new(
            exit::JOB_INCOMPLETE,
            format!("job {}: no minion was targeted", recap.jid),
        ));
    }
    Ok(Outcome::Ok)
}


impl super::Action for WaitArgs {
    fn overrides(&self, o: &mut crate::config::Overrides) {
        self.query.state.apply(o);
    }

    fn execute(self, overrides: crate::config::Overrides) -> Result<Outcome, Failure> {
        super::answer(&overrides, |config, out| run(&self, config, out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recap(succeeded: &[&str], incomplete: u64) -> JobRecap {
        JobRecap {
            jid: "1".into(),
            fun: "state.apply".into(),
            args: vec![],
            target: "*".into(),
            user: String::new(),
            run_kind: String::new(),
            test: false,
            metadata: None,
            commits: Default::default(),
            published_at: None,
            duration_ms: Some(1),
            expected: succeeded.len() as u64,
            open: false,
            outstanding: vec![],
            outstanding_count: 0,
            batch: None,
            incomplete,
            succeeded: succeeded.iter().map(|s| s.to_string()).collect(),
            failed: vec![],
            missing: vec![],
            groups: vec![],
            renders: vec![],
            incidents: vec![],
            pressure: None,
            changed_states: 0,
            drift: vec![],
        }
    }

    #[test]
    fn a_job_the_history_lacks_records_of_is_never_a_success() {
        assert!(matches!(verdict(&recap(&["a"], 0)), Ok(Outcome::Ok)));
        let Err(lacking) = verdict(&recap(&["a"], 3)) else {
            panic!("a success");
        };
        assert_eq!(lacking.status, exit::JOB_INCOMPLETE);
    }

    #[test]
    fn a_malformed_jid_is_a_usage_error_at_once() {
        for bad in ["", "foo", "notajid", "2026120704", "20261207043319530601x"] {
            let Err(refused) = check_jid(bad) else {
                panic!("{bad:?} taken for a jid");
            };
            assert_eq!(refused.status, exit::USAGE, "{bad:?}");
        }
        assert!(check_jid("20261207043319530601").is_ok());
    }
}
