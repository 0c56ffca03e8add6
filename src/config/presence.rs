//! `[presence]`: how saltsight tells a minion that is down (`not_connected`)
//! from one that is hung (`no_response`): the master's connections to its
//! publish port (read from /proc and mapped through the master's minion data
//! cache, as Salt's own CLI does for `[Not connected]`), the master's
//! `salt/presence` events when it fires them, or both.

use std::path::PathBuf;

use serde::Deserialize;

use crate::master_connections::ConnectionWatch;

/// `[presence]` as written.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PresenceSection {
    pub connections: Option<bool>,
    pub publish_port: Option<u16>,
    pub cachedir: Option<PathBuf>,
}

/// Where the connections source reads, or why it is off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectionsSource {
    /// Established connections to `publish_port`, minions from `cachedir`.
    On {
        publish_port: u16,
        cachedir: PathBuf,
        /// Where the two came from, for check-config.
        origin: String,
    },
    /// Off, and why (said by check-config and at start).
    Off { why: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresenceConfig {
    pub connections: ConnectionsSource,
}

impl PresenceConfig {
    /// The watch of the master's connections where they are on, bounded to
    /// `max_minions` minions from the cache: the one place one is made (the
    /// agent's presence, check-config's report).
    pub fn connection_watch(&self, max_minions: usize) -> Option<ConnectionWatch> {
        match &self.connections {
            ConnectionsSource::On {
                publish_port,
                cachedir,
                ..
            } => Some(ConnectionWatch::new(
                *publish_port,
                cachedir.clone(),
                max_minions,
            )),
            ConnectionsSource::Off { .. } => None,
        }
    }
}

impl Default for PresenceConfig {
    fn default() -> Self {
        Self {
            connections: ConnectionsSource::Off {
                why: "no master config was read".into(),
            },
        }
    }
}

/// What the master's own config says of the connections source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterPresence {
    pub publish_port: u16,
    pub cachedir: PathBuf,
    pub minion_data_cache: bool,
    pub transport: String,
}

impl From<&super::master::MasterBusSettings> for MasterPresence {
    fn from(m: &super::master::MasterBusSettings) -> Self {
        Self {
            publish_port: m.publish_port,
            cachedir: m.cachedir.clone(),
            minion_data_cache: m.minion_data_cache,
            transport: m.transport.clone(),
        }
    }
}

/// `[presence]`, with the master's settings (`None` when its config could not
/// be read: then only explicit keys turn the source on).
pub fn resolve(section: &PresenceSection, master: Option<MasterPresence>) -> PresenceConfig {
    let connections = if section.connections == Some(false) {
        ConnectionsSource::Off {
            why: "presence.connections = false".into(),
        }
    } else {
        match (master, section.publish_port, section.cachedir.clone()) {
            (_, Some(publish_port), Some(cachedir)) => ConnectionsSource::On {
                publish_port,
                cachedir,
                origin: "presence.publish_port and presence.cachedir".into(),
            },
            (Some(m), _, _) if !m.minion_data_cache && section.cachedir.is_none() => {
                ConnectionsSource::Off {
                    why: "the master has minion_data_cache off: no grains map a connection to a minion".into(),
                }
            }
            (Some(m), port, dir) => ConnectionsSource::On {
                publish_port: port.unwrap_or(m.publish_port),
                cachedir: dir.unwrap_or(m.cachedir),
                origin: format!(
                    "the master config (publish_port, cachedir; transport {})",
                    m.transport
                ),
            },
            (None, _, _) => ConnectionsSource::Off {
                why: "the master config could not be read (set presence.publish_port and presence.cachedir)".into(),
            },
        }
    };
    PresenceConfig { connections }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn master(cache: bool) -> MasterPresence {
        MasterPresence {
            publish_port: 4505,
            cachedir: "/var/cache/salt/master".into(),
            minion_data_cache: cache,
            transport: "zeromq".into(),
        }
    }

    #[test]
    fn on_by_default_from_the_master_and_off_where_it_cannot_work() {
        let on = resolve(&PresenceSection::default(), Some(master(true)));
        assert!(matches!(
            on.connections,
            ConnectionsSource::On {
                publish_port: 4505,
                ..
            }
        ));
        let no_cache = resolve(&PresenceSection::default(), Some(master(false)));
        assert!(
            matches!(&no_cache.connections, ConnectionsSource::Off { why } if why.contains("minion_data_cache")),
        );
        let off = resolve(
            &PresenceSection {
                connections: Some(false),
                ..Default::default()
            },
            Some(master(true)),
        );
        assert!(matches!(off.connections, ConnectionsSource::Off { .. }));
        let unread = resolve(&PresenceSection::default(), None);
        assert!(matches!(unread.connections, ConnectionsSource::Off { .. }));
    }
}
