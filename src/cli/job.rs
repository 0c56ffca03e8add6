//! `saltsight job JID`: the recap of one job, from the history on the master:
//! what ran, under which commit, which minions succeeded, failed or never
//! answered (and why), the root causes grouped with their commit, render
//! failures, and the external incident or master pressure behind it.

use std::io::Write;

use clap::Args;

use super::present::{QueryArgs, open_history};
use super::recap::answer;
use super::{Failure, Outcome, exit};
use crate::config::Config;
use crate::history::query::job;

#[derive(Debug, Args)]
pub struct JobArgs {
    /// The job's id (as `salt --show-jid` or `saltsight jobs` shows it)
    pub jid: String,
    /// Wait for the job to finish, and exit as `saltsight wait` does
    #[arg(long)]
    pub wait: bool,
    #[command(flatten)]
    pub until: super::wait::Until,
    #[command(flatten)]
    pub query: QueryArgs,
}

pub fn run(args: &JobArgs, config: &Config, out: &mut dyn Write) -> Result<Outcome, Failure> {
    super::wait::check_jid(&args.jid)?;
    if args.wait {
        return super::wait::wait_for(&args.jid, &args.until, args.query.json, config, out);
    }
    let store = open_history(config)?;
    let recap = job(&store, &args.jid)
        .map_err(|e| Failure::runtime(e.to_string()))?
        .ok_or_else(|| {
            Failure::new(
                exit::NOT_FOUND,
                format!(
                    "no job {} in the history ({})",
                    args.jid,
                    store.path().display()
                ),
            )
        })?;
    answer(&recap, args.query.json, out)?;
    Ok(Outcome::Ok)
}

impl super::Action for JobArgs {
    fn overrides(&self, o: &mut crate::config::Overrides) {
        self.query.state.apply(o);
    }

    fn execute(self, overrides: crate::config::Overrides) -> Result<Outcome, Failure> {
        super::answer(&overrides, |config, out| run(&self, config, out))
    }
}
