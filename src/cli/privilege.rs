//! Least privilege: `saltsight run` refuses root unless `--allow-root`, and says
//! which user can read the bus instead.

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use nix::unistd::{Gid, Group, Uid, User};

use crate::bus::Endpoint;

/// Why saltsight will not run as root here, and as whom it should; `None` when
/// not root or allowed.
pub fn refuse_root(endpoint: &Endpoint, allow_root: bool) -> Option<String> {
    if allow_root || !Uid::effective().is_root() {
        return None;
    }
    Some(format!(
        "saltsight does not run as root: it only reads the master's event bus. {} \
         Pass --allow-root (or SALTSIGHT_ALLOW_ROOT=true) to run as root anyway.",
        who_can_read(endpoint)
    ))
}

/// Advice naming the user (and group) that can read `endpoint`.
pub fn who_can_read(endpoint: &Endpoint) -> String {
    let path = match endpoint {
        Endpoint::Tcp(addr) => {
            return format!(
                "Any local user can connect to {addr} (ipc_mode: tcp): run it as an unprivileged user, e.g. the master's user `salt`."
            );
        }
        Endpoint::Unix(path) => path,
    };
    let Ok(meta) = std::fs::metadata(path) else {
        return format!(
            "Run it as the master's user (`user:` in its config; `salt` in Salt's packages), \
             which can read {} once the master is up.",
            path.display()
        );
    };
    let user = User::from_uid(Uid::from_raw(meta.uid()))
        .ok()
        .flatten()
        .map_or_else(|| format!("uid {}", meta.uid()), |u| u.name);
    let group = Group::from_gid(Gid::from_raw(meta.gid()))
        .ok()
        .flatten()
        .map_or_else(|| format!("gid {}", meta.gid()), |g| g.name);
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o060 == 0o060 {
        format!(
            "{} is {user}:{group} mode {mode:04o}: run it as `{user}` or as a user in group `{group}`.",
            path.display()
        )
    } else {
        format!(
            "{} is {user}:{group} mode {mode:04o} (Salt 3006 makes it 0600; 3007+ 0660): \
             run it as `{user}`.",
            path.display()
        )
    }
}
