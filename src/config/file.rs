//! saltsight's own config file, as written: every key optional, unknown keys
//! rejected. Resolution and validation happen in `resolve`.

use std::path::PathBuf;

use serde::Deserialize;

/// `/etc/saltsight/saltsight.toml`.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default)]
    pub bus: BusSection,
    #[serde(default)]
    pub log: LogSection,
}

#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BusSection {
    /// The Salt master's config file; `master.d/*.conf` beside it is read too.
    pub master_config: Option<PathBuf>,
    /// `unix:/path/to/master_event_pub.ipc` or `tcp:127.0.0.1:4512`; overrides
    /// what the master's config says.
    pub endpoint: Option<String>,
    /// Largest frame accepted, in bytes.
    pub max_frame_bytes: Option<u64>,
    /// Frames the queue between the reader and the pipeline holds.
    pub queue_frames: Option<u64>,
    /// First reconnect delay, e.g. `"100ms"`.
    pub reconnect_min: Option<String>,
    /// Longest reconnect delay, e.g. `"1s"`.
    pub reconnect_max: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LogSection {
    /// `error`, `warn`, `info`, `debug`, `trace`, or a tracing filter directive.
    pub level: Option<String>,
    /// `text` or `json`.
    pub format: Option<String>,
}
