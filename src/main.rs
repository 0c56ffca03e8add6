//! The `saltsight` binary: parse the command line, run the subcommand
//! (`cli::execute`), and turn how it ended into an exit code (`cli::exit`).

use std::process::ExitCode;

use saltsight::cli::{self, Cli, Outcome, exit};

fn main() -> ExitCode {
    cap_malloc_arenas();
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

/// glibc gives each thread that allocates an arena of its own, up to eight per
/// core, and each keeps what it freed: saltsight's threads (the consumer, the
/// bus reader, the history writer, the runtime's workers) left four arenas
/// nearly idle yet holding 0.8 MB between them at the load test's peak
/// (`malloc_info`). Two arenas serve them all; the allocations that matter are
/// the consumer's.
fn cap_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` sets a tunable of the allocator and touches no memory
    // of ours; it runs before any other thread exists.
    unsafe {
        nix::libc::mallopt(nix::libc::M_ARENA_MAX, 2);
    }
}
