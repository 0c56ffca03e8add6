//! Where the master's event publisher listens: a unix socket, or loopback TCP for
//! masters with `ipc_mode: tcp`. Connecting is read-only by construction: the
//! stream handed out implements only `AsyncRead`, and its blocking form only
//! `read` (plus a handle that ends a blocked read at shutdown).

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll};

use nix::unistd::{Gid, Group, Uid, User};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

/// The publisher's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `<sock_dir>/master_event_pub.ipc`.
    Unix(PathBuf),
    /// `127.0.0.1:<tcp_master_pub_port>` (default 4512).
    Tcp(SocketAddr),
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Unix(path) => write!(f, "unix:{}", path.display()),
            Endpoint::Tcp(addr) => write!(f, "tcp:{addr}"),
        }
    }
}

/// `unix:/path`, a bare absolute path, `tcp:host:port` or `host:port` (an IP
/// literal): as `bus.endpoint` and `reactor.endpoint` are written.
impl std::str::FromStr for Endpoint {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || {
            format!(
                "endpoint {text:?} is not `unix:/path/to/master_event_pub.ipc` or `tcp:127.0.0.1:4512`"
            )
        };
        if let Some(path) = text.strip_prefix("unix:") {
            return if path.starts_with('/') {
                Ok(Endpoint::Unix(path.into()))
            } else {
                Err(bad())
            };
        }
        if text.starts_with('/') {
            return Ok(Endpoint::Unix(text.into()));
        }
        let addr = text.strip_prefix("tcp:").unwrap_or(text);
        addr.parse().map(Endpoint::Tcp).map_err(|_| bad())
    }
}

/// A connection to the publisher that can only be read from.
pub struct BusStream {
    inner: Inner,
}

enum Inner {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl AsyncRead for BusStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.inner {
            Inner::Unix(s) => Pin::new(s).poll_read(cx, buf),
            Inner::Tcp(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl BusStream {
    /// The same connection, blocking, for a thread of its own: while that
    /// thread is not reading, arriving data wakes nothing (the kernel holds
    /// it), where the runtime's poller would wake at every write the master
    /// makes. The [`ReadCloser`] ends a blocked read (at shutdown).
    pub fn into_blocking(self) -> io::Result<(BlockingBusStream, ReadCloser)> {
        let inner = match self.inner {
            Inner::Unix(s) => BlockingInner::Unix(s.into_std()?),
            Inner::Tcp(s) => BlockingInner::Tcp(s.into_std()?),
        };
        let closer = match &inner {
            BlockingInner::Unix(s) => {
                s.set_nonblocking(false)?;
                BlockingInner::Unix(s.try_clone()?)
            }
            BlockingInner::Tcp(s) => {
                s.set_nonblocking(false)?;
                BlockingInner::Tcp(s.try_clone()?)
            }
        };
        Ok((BlockingBusStream { inner }, ReadCloser { inner: closer }))
    }
}

enum BlockingInner {
    Unix(std::os::unix::net::UnixStream),
    Tcp(std::net::TcpStream),
}

/// A connection to the publisher, blocking, that can only be read from.
pub struct BlockingBusStream {
    inner: BlockingInner,
}

impl BlockingBusStream {
    /// Reads what is there (waiting for at least a byte, or the read timeout).
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use std::io::Read;
        match &mut self.inner {
            BlockingInner::Unix(s) => s.read(buf),
            BlockingInner::Tcp(s) => s.read(buf),
        }
    }

    /// How long a read may wait (`None`: for ever); past it the read fails
    /// with `WouldBlock`.
    pub fn set_read_timeout(&self, timeout: Option<std::time::Duration>) -> io::Result<()> {
        match &self.inner {
            BlockingInner::Unix(s) => s.set_read_timeout(timeout),
            BlockingInner::Tcp(s) => s.set_read_timeout(timeout),
        }
    }
}

/// Ends a read blocked on a [`BlockingBusStream`]: its read side is shut down
/// (nothing is sent to the master), so the read returns at once.
pub struct ReadCloser {
    inner: BlockingInner,
}

impl ReadCloser {
    pub fn close_read(&self) {
        let _ = match &self.inner {
            BlockingInner::Unix(s) => s.shutdown(std::net::Shutdown::Read),
            BlockingInner::Tcp(s) => s.shutdown(std::net::Shutdown::Read),
        };
    }
}

/// Connecting failed; says where, as whom, and what usually fixes it.
#[derive(Debug, thiserror::Error)]
#[error("cannot connect to the Salt event bus at {endpoint} as user {user}: {source}{hint}")]
pub struct ConnectError {
    pub endpoint: Endpoint,
    pub user: String,
    #[source]
    pub source: io::Error,
    hint: String,
}

impl Endpoint {
    pub async fn connect(&self) -> Result<BusStream, ConnectError> {
        let result = match self {
            Endpoint::Unix(path) => UnixStream::connect(path).await.map(Inner::Unix),
            Endpoint::Tcp(addr) => TcpStream::connect(addr).await.map(Inner::Tcp),
        };
        result.map(|inner| BusStream { inner }).map_err(|source| {
            let hint = match (self, source.kind()) {
                (Endpoint::Unix(_), io::ErrorKind::PermissionDenied) => {
                    format!(" ({})", self.who_can_read())
                }
                (Endpoint::Unix(_), io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused) => {
                    " (is salt-master running, and is this its sock_dir?)".into()
                }
                (Endpoint::Tcp(_), io::ErrorKind::ConnectionRefused) => {
                    " (is salt-master running with ipc_mode: tcp, and is this its tcp_master_pub_port?)"
                        .into()
                }
                _ => String::new(),
            };
            ConnectError {
                endpoint: self.clone(),
                user: current_user(),
                source,
                hint,
            }
        })
    }

    /// Advice naming the user (and group) that can read the publisher, from the
    /// socket's owner, group and mode (0600 on Salt 3006, 0660 on 3007+).
    pub fn who_can_read(&self) -> String {
        let path = match self {
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
        let path = path.display();
        // Owned by root, the master runs as root: saltsight should not (`run`
        // refuses it), so root is advised only where nothing else can read it.
        match (mode & 0o060 == 0o060, meta.uid() == 0) {
            (true, false) => format!(
                "{path} is {user}:{group} mode {mode:04o}: run it as `{user}` or as a user in group `{group}`."
            ),
            (true, true) => format!(
                "{path} is {user}:{group} mode {mode:04o} (the master runs as root): \
                 run it as a user in group `{group}` (docs/install.md, \"A master that runs as root\")."
            ),
            (false, false) => format!(
                "{path} is {user}:{group} mode {mode:04o} (Salt 3006 makes it 0600; 3007+ 0660): \
                 run it as `{user}`."
            ),
            (false, true) => format!(
                "{path} is {user}:{group} mode {mode:04o} (Salt 3006 makes it 0600; 3007+ 0660) \
                 and the master runs as root: only root can open it. Run the master as `salt` \
                 (`user: salt`), or saltsight as root with --allow-root (docs/install.md, \
                 \"A master that runs as root\")."
            ),
        }
    }
}

/// `name (uid N)` of the user this process runs as.
pub fn current_user() -> String {
    let uid = nix::unistd::getuid();
    match nix::unistd::User::from_uid(uid) {
        Ok(Some(user)) => format!("{} (uid {uid})", user.name),
        _ => format!("uid {uid}"),
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    #[test]
    fn endpoints() {
        assert_eq!(
            Endpoint::from_str("unix:/a/b.ipc"),
            Ok(Endpoint::Unix("/a/b.ipc".into()))
        );
        assert_eq!(
            Endpoint::from_str("/a/b.ipc"),
            Ok(Endpoint::Unix("/a/b.ipc".into()))
        );
        assert_eq!(
            Endpoint::from_str("tcp:127.0.0.1:4512"),
            Ok(Endpoint::Tcp("127.0.0.1:4512".parse().unwrap()))
        );
        assert_eq!(
            Endpoint::from_str("[::1]:4512"),
            Ok(Endpoint::Tcp("[::1]:4512".parse().unwrap()))
        );
        assert!(Endpoint::from_str("unix:relative").is_err());
        assert!(Endpoint::from_str("localhost").is_err());
    }

    use super::*;

    #[tokio::test]
    async fn a_missing_socket_names_the_path_the_user_and_what_to_check() {
        let path = PathBuf::from("/nonexistent-saltsight/master_event_pub.ipc");
        let err = Endpoint::Unix(path)
            .connect()
            .await
            .err()
            .expect("no such socket");
        let text = err.to_string();
        assert!(
            text.contains("unix:/nonexistent-saltsight/master_event_pub.ipc"),
            "{text}"
        );
        assert!(
            text.contains(&format!("as user {}", current_user())),
            "{text}"
        );
        assert!(text.contains("is salt-master running"), "{text}");
    }

    #[tokio::test]
    async fn a_refused_tcp_port_says_ipc_mode_tcp() {
        // Bind then drop to get a port nobody listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port());
        let addr = SocketAddr::from(([127, 0, 0, 1], port.expect("a free port")));
        let text = Endpoint::Tcp(addr)
            .connect()
            .await
            .err()
            .expect("refused")
            .to_string();
        assert!(text.contains("ipc_mode: tcp"), "{text}");
    }
}
