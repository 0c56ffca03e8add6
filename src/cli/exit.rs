//! Exit codes, defined once: `main` exits with them, the man pages' EXIT STATUS
//! lists [`ALL`], and a test checks that README.md and docs/install.md name
//! each. Above 63 they are sysexits(3)'s, so scripts and systemd
//! (`RestartPreventExitStatus=`) can tell a bad command line or config from an
//! outage.

/// One exit code and what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    pub code: u8,
    /// sysexits' name, or a plain one below 64.
    pub name: &'static str,
    pub meaning: &'static str,
}

pub const OK: Status = Status {
    code: 0,
    name: "OK",
    meaning: "Success.",
};
pub const RUNTIME: Status = Status {
    code: 1,
    name: "FAILURE",
    meaning: "It ran and failed: a port in use, an output that cannot open, a recording that cannot be read; status: something is wrong now.",
};
/// `job`, `minion`, `wait`: what was asked for is not in the history.
pub const NOT_FOUND: Status = Status {
    code: 2,
    name: "NOT_FOUND",
    meaning: "Nothing found: the job or minion asked for is not in the history (job, minion; wait: not within 30 s).",
};
pub const BAD_INPUT: Status = Status {
    code: 3,
    name: "BAD_INPUT",
    meaning: "It ran, but some input was bad: undecodable frames, a damaged recording.",
};
/// `wait`, `job --wait`: a minion's return failed.
pub const JOB_FAILED: Status = Status {
    code: 4,
    name: "JOB_FAILED",
    meaning: "The job waited for failed: a minion's return failed (a state failed, a non-zero retcode) (wait, job --wait).",
};
/// `wait`, `job --wait`: an expected minion did not return.
pub const JOB_INCOMPLETE: Status = Status {
    code: 5,
    name: "JOB_INCOMPLETE",
    meaning: "The job waited for is incomplete: an expected minion did not return (the recap says why), or no minion was targeted (wait, job --wait).",
};
/// `wait`, `job --wait`: `--timeout` passed first.
pub const TIMED_OUT: Status = Status {
    code: 6,
    name: "TIMED_OUT",
    meaning: "The job waited for had not finished when --timeout passed (wait, job --wait).",
};
/// clap's errors: an unknown flag, a bad value (sysexits' EX_USAGE).
pub const USAGE: Status = Status {
    code: 64,
    name: "EX_USAGE",
    meaning: "The command line is wrong: an unknown flag or subcommand, a bad value.",
};
/// `check-config`, `tail`, `capture`: the bus or an output cannot be reached.
pub const UNAVAILABLE: Status = Status {
    code: 69,
    name: "EX_UNAVAILABLE",
    meaning: "The event bus (no master there) or an output cannot be reached (check-config, tail, capture).",
};
/// `run` as root without `--allow-root`; the bus refused this user.
pub const NO_PERMISSION: Status = Status {
    code: 77,
    name: "EX_NOPERM",
    meaning: "Not permitted: run as root without --allow-root, or this user may not open the bus socket (check-config, tail, capture).",
};
/// The configuration is invalid: nothing started.
pub const CONFIG: Status = Status {
    code: 78,
    name: "EX_CONFIG",
    meaning: "The configuration is invalid (every problem is listed); nothing started.",
};
/// A second SIGINT or SIGTERM: exited without draining (128 + SIGINT's 2).
pub const INTERRUPTED: Status = Status {
    code: 130,
    name: "INTERRUPTED",
    meaning: "A second SIGINT or SIGTERM: exited at once, without draining.",
};

/// Every code saltsight exits with, in order.
pub const ALL: &[Status] = &[
    OK,
    RUNTIME,
    NOT_FOUND,
    BAD_INPUT,
    JOB_FAILED,
    JOB_INCOMPLETE,
    TIMED_OUT,
    USAGE,
    UNAVAILABLE,
    NO_PERMISSION,
    CONFIG,
    INTERRUPTED,
];
