//! `saltsight generate DIR` (hidden): man pages (`manual`) and shell
//! completions from the clap definitions, for the packages (`scripts/package`),
//! so they never drift from `--help`. Hidden subcommands and flags (this one,
//! an earlier release's names) are left out of both.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::Cli;

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Writes `man/saltsight*.1` and `completions/{saltsight.bash,_saltsight,saltsight.fish}`
    /// under this directory
    pub dir: PathBuf,
}

/// Writes every page and completion script; returns the files written.
/// Writes them and lists the files written on stdout.
pub fn run(args: &GenerateArgs) -> anyhow::Result<super::Outcome> {
    for path in write(args)? {
        println!("{}", path.display());
    }
    Ok(super::Outcome::Ok)
}

/// Writes man pages and completions under `args.dir`.
pub fn write(args: &GenerateArgs) -> anyhow::Result<Vec<PathBuf>> {
    let man = args.dir.join("man");
    let completions = args.dir.join("completions");
    for dir in [&man, &completions] {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    for (name, page) in super::manual::pages(Cli::command()) {
        let path = man.join(name);
        std::fs::write(&path, page)
            .with_context(|| format!("cannot write the man page {}", path.display()))?;
    }
    let mut written = listing(&man)?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let path = clap_complete::generate_to(
            shell,
            &mut visible(Cli::command()),
            "saltsight",
            &completions,
        )
        .with_context(|| {
            format!(
                "cannot write {shell} completions to {}",
                completions.display()
            )
        })?;
        written.push(path);
    }
    Ok(written)
}

/// `cmd` without its hidden subcommands and flags (clap's completions list
/// them): the same command, rebuilt from what is shown.
fn visible(cmd: clap::Command) -> clap::Command {
    let args: Vec<clap::Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .cloned()
        .collect();
    let subcommands: Vec<clap::Command> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .cloned()
        .collect();
    let mut shown = clap::Command::new("saltsight")
        .args(args)
        .subcommands(subcommands);
    if let Some(about) = cmd.get_about() {
        shown = shown.about(about.clone());
    }
    shown
}

fn listing(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .collect();
    files.sort();
    Ok(files)
}


impl super::Action for GenerateArgs {
    fn execute(self, _overrides: crate::config::Overrides) -> Result<super::Outcome, super::Failure> {
        run(&self).map_err(super::runtime)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_and_completions_cover_every_subcommand() {
        let dir = tempfile::tempdir().unwrap();
        let written = write(&GenerateArgs {
            dir: dir.path().to_owned(),
        })
        .unwrap();
        let names: Vec<String> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for page in ["saltsight.1", "saltsight-run.1", "saltsight-check-config.1"] {
            assert!(names.iter().any(|n| n == page), "{page} in {names:?}");
        }
        assert!(
            !names.iter().any(|n| n.contains("generate")),
            "hidden: {names:?}"
        );
        let run_page = std::fs::read_to_string(dir.path().join("man/saltsight-run.1")).unwrap();
        assert!(run_page.contains("allow\\-root"), "{run_page}");
        let bash = std::fs::read_to_string(dir.path().join("completions/saltsight.bash")).unwrap();
        assert!(bash.contains("check-config"));
        for hidden in ["generate", "--log-level", "--endpoint", "--state-dir"] {
            for file in ["saltsight.bash", "_saltsight", "saltsight.fish"] {
                let text =
                    std::fs::read_to_string(dir.path().join("completions").join(file)).unwrap();
                assert!(!text.contains(hidden), "{hidden} in {file}");
            }
        }
        for (page, sections) in [
            (
                "saltsight.1",
                &["EXIT STATUS", "ENVIRONMENT", "FILES", "SIGNALS", "EXAMPLES"][..],
            ),
            (
                "saltsight-run.1",
                &["EXIT STATUS", "ENVIRONMENT", "FILES", "SIGNALS", "EXAMPLES"],
            ),
            (
                "saltsight-tail.1",
                &["EXIT STATUS", "ENVIRONMENT", "FILES", "SIGNALS", "EXAMPLES"],
            ),
            (
                "saltsight-check-config.1",
                &["EXIT STATUS", "ENVIRONMENT", "FILES", "EXAMPLES"],
            ),
        ] {
            let text = std::fs::read_to_string(dir.path().join("man").join(page)).unwrap();
            for section in sections {
                assert!(
                    text.contains(&format!(".SH \"{section}\""))
                        || text.contains(&format!(".SH {section}")),
                    "{section} in {page}:\n{text}"
                );
            }
            for status in crate::cli::exit::ALL {
                assert!(text.contains(status.name), "{} in {page}", status.name);
            }
        }
        let run = std::fs::read_to_string(dir.path().join("man/saltsight-run.1")).unwrap();
        for env in [
            "SALTSIGHT_WEB_LISTEN_ADDRESS",
            "SALTSIGHT_ENDPOINT",
            "SALTSIGHT_ALLOW_ROOT",
            "SALTSIGHT_CONFIG",
        ] {
            assert!(run.contains(env), "{env} in saltsight-run.1");
        }
        assert!(run.contains("SIGHUP"), "{run}");
        let tail = std::fs::read_to_string(dir.path().join("man/saltsight-tail.1")).unwrap();
        assert!(!tail.contains("web.listen"), "run's flag on tail's page");
        for other in ["_saltsight", "saltsight.fish"] {
            assert!(names.iter().any(|n| n == other), "{other} in {names:?}");
        }
    }
}
