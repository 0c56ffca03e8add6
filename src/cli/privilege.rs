//! Least privilege: `saltsight run` refuses root unless `--allow-root`, and says
//! which user can read the bus instead.

use nix::unistd::Uid;

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
        endpoint.who_can_read()
    ))
}
