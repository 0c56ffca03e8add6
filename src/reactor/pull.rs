//! The master's pull socket, written the way Salt's `fire_event` writes it:
//! `master_event_pull.ipc` (or `tcp_master_pull_port` with `ipc_mode: tcp`),
//! which the master republishes to every subscriber, its Reactor included.
//!
//! One message is `{"head": {}, "body": <tag> "\n\n" <msgpack data>}` (the body
//! as msgpack bin, as `SaltEvent.pack` makes it), behind a 4-byte big-endian
//! length (`frame_msg_ipc`, which the pull side of Salt 3006.x since its
//! framing change, 3007 and 3008 reads). This is the only socket saltsight
//! writes to; it is its own connection, never the reader's, and is opened
//! only when `[reactor]` is enabled.

use std::io::Write;
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde::Serialize;

use crate::bus::Endpoint;

/// How long a connect or one write may take before the event is given up.
pub const IO_TIMEOUT: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum FireError {
    #[error("cannot encode the event's data as msgpack: {0}")]
    Encode(#[from] rmp_serde::encode::Error),
    #[error("the event is {len} bytes, over the 4 GiB a frame can say")]
    TooLarge { len: usize },
    #[error("cannot connect to the master's pull socket {endpoint}: {source}")]
    Connect {
        endpoint: String,
        source: std::io::Error,
    },
    #[error("cannot write to the master's pull socket {endpoint}: {source}")]
    Write {
        endpoint: String,
        source: std::io::Error,
    },
}

/// `data` under `tag`, framed for the pull socket: the event as Salt's
/// publisher carries it ([`crate::event::encode_frame`]) behind its length.
pub fn frame(tag: &str, data: &impl Serialize) -> Result<Vec<u8>, FireError> {
    let data = rmp_serde::to_vec_named(data)?;
    let message = crate::event::encode_frame(tag, &data, false);
    let len =
        u32::try_from(message.len()).map_err(|_| FireError::TooLarge { len: message.len() })?;
    let mut out = Vec::with_capacity(4 + message.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&message);
    Ok(out)
}

/// `_stamp` as Salt's 3008 `fire_event` sets it (UTC, microseconds, `+00:00`).
pub fn salt_stamp(at: std::time::SystemTime) -> String {
    let text = crate::time::Stamp::from_system_time(at).to_string();
    format!("{}+00:00", text.trim_end_matches('Z'))
}

enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

/// A connection to the pull socket, made when there is something to write.
pub struct PullSocket {
    endpoint: Endpoint,
    stream: Option<Stream>,
}

impl PullSocket {
    pub fn new(endpoint: Endpoint) -> Self {
        Self {
            endpoint,
            stream: None,
        }
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Writes one framed event, connecting first if needed. On an error the
    /// connection is dropped (the next write connects again); the event is not
    /// kept.
    pub fn write(&mut self, frame: &[u8]) -> Result<(), FireError> {
        if self.stream.is_none() {
            self.stream = Some(self.connect()?);
        }
        let written = match self.stream.as_mut() {
            Some(Stream::Unix(s)) => s.write_all(frame),
            Some(Stream::Tcp(s)) => s.write_all(frame),
            None => Ok(()),
        };
        written.map_err(|source| {
            self.stream = None;
            FireError::Write {
                endpoint: self.endpoint.to_string(),
                source,
            }
        })
    }

    fn connect(&self) -> Result<Stream, FireError> {
        let failed = |source| FireError::Connect {
            endpoint: self.endpoint.to_string(),
            source,
        };
        match &self.endpoint {
            Endpoint::Unix(path) => {
                let stream = UnixStream::connect(path).map_err(failed)?;
                stream.set_write_timeout(Some(IO_TIMEOUT)).map_err(failed)?;
                Ok(Stream::Unix(stream))
            }
            Endpoint::Tcp(addr) => {
                let stream = TcpStream::connect_timeout(addr, IO_TIMEOUT).map_err(failed)?;
                stream.set_write_timeout(Some(IO_TIMEOUT)).map_err(failed)?;
                stream.set_nodelay(true).map_err(failed)?;
                Ok(Stream::Tcp(stream))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::framing::{FrameSplitter, Split};

    /// What the master's pull side reads (length, then `{head, body}`) and what
    /// it republishes (that map, unchanged) is what saltsight's own decoder
    /// reads back: the tag and the data.
    #[test]
    fn a_fired_event_reads_back_as_salt_would_publish_it() {
        let data = serde_json::json!({"jid": "20261126041118123456", "minions": ["web1"], "n": 3});
        let framed = frame("saltsight/job/20261126041118123456/missing", &data).unwrap();
        let len = u32::from_be_bytes(framed[..4].try_into().unwrap()) as usize;
        assert_eq!(len, framed.len() - 4);
        let mut splitter = FrameSplitter::new(1 << 20);
        let mut buf = bytes::BytesMut::from(&framed[..]);
        let Ok(Some(Split::Frame(frame))) = splitter.next(&mut buf) else {
            panic!("not one frame");
        };
        let event = crate::event::decode(&frame).unwrap();
        assert_eq!(event.tag, "saltsight/job/20261126041118123456/missing");
        assert_eq!(crate::event::json::to_json(event.data).unwrap(), data);
    }

    #[test]
    fn an_absent_socket_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut socket = PullSocket::new(Endpoint::Unix(dir.path().join("master_event_pull.ipc")));
        let error = socket.write(b"x").unwrap_err().to_string();
        assert!(error.contains("master_event_pull.ipc"), "{error}");
    }
}
