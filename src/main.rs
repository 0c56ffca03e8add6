//! The `saltsight` binary: parse the command line, run the subcommand
//! (`cli::execute`), and turn how it ended into an exit code (`cli::exit`).

use std::process::ExitCode;

use saltsight::cli::{self, Cli, Outcome, exit};

fn main() -> ExitCode {
    match cli::execute(Cli::parse_or_exit()) {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::BadInput) => ExitCode::from(exit::BAD_INPUT.code),
        Err(failure) => {
            // Said once: a failure the log has carried is not printed again.
            if !failure.logged() {
                eprintln!("saltsight: {failure}");
            }
            ExitCode::from(failure.exit_code())
        }
    }
}
