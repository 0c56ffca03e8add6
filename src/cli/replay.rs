//! `saltsight replay FILE`: a recording through the same pipeline as live, as fast
//! as it reads. A summary of what went through goes to stderr.

use std::path::PathBuf;

use clap::Args;

use super::run::Output;

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A saltsight capture file, or a raw dump of the publisher's socket bytes
    pub file: PathBuf,
    /// Where records go
    #[arg(long, value_enum, default_value = "none")]
    pub output: Output,
}
