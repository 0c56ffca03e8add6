//! The `saltsight` binary: parse the command line, run the subcommand
//! (`cli::execute`), and turn how it ended into an exit code.

use std::process::ExitCode;

use clap::Parser;
use saltsight::cli::{self, Cli, Outcome, exit};

fn main() -> ExitCode {
    match cli::execute(Cli::parse()) {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::BadInput) => ExitCode::from(exit::BAD_INPUT as u8),
        Err(failure) => {
            eprintln!("saltsight: {failure}");
            ExitCode::from(failure.exit_code() as u8)
        }
    }
}
