//! A fake Salt event publisher for the fault suite: it listens where a master's
//! publisher would (a unix socket in a temp dir, or a TCP port on 127.0.0.1),
//! hands each subscriber to the test as a [`Subscriber`] to script (Salt's frames,
//! bare or length-prefixed, garbage, half frames, a close), or answers every
//! connection by itself (`on_connect`). Stops when dropped.

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use saltsight::event::encode_frame;
use saltsight::time::Stamp;
use serde_json::Value;

/// How frames are written: bare (3006.25, 3007, 3008) or behind a 4-byte length
/// (3006.30).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Bare,
    Prefixed,
}

/// One connected subscriber.
pub struct Subscriber {
    stream: Box<dyn Write + Send>,
    framing: Framing,
}

/// Salt's frame for `tag` and `data`, with a `_stamp` of now when it has none.
pub fn frame(tag: &str, mut data: Value) -> Vec<u8> {
    if data.get("_stamp").is_none() {
        data["_stamp"] = Value::String(Stamp::now().to_string());
    }
    encode_frame(tag, &rmp_serde::to_vec_named(&data).expect("encode"), false)
}

impl Subscriber {
    /// One event, as the master writes it.
    pub fn send(&mut self, tag: &str, data: Value) -> std::io::Result<()> {
        let frame = frame(tag, data);
        self.send_frame(&frame)
    }

    /// A frame's bytes, framed as this publisher frames.
    pub fn send_frame(&mut self, frame: &[u8]) -> std::io::Result<()> {
        let mut bytes = Vec::with_capacity(frame.len() + 4);
        if self.framing == Framing::Prefixed {
            bytes.extend_from_slice(&(frame.len() as u32).to_be_bytes());
        }
        bytes.extend_from_slice(frame);
        self.send_raw(&bytes)
    }

    /// Bytes as they are.
    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }
}

type OnConnect = Box<dyn Fn(&mut Subscriber) + Send>;

pub struct Publisher {
    endpoint: String,
    subscribers: Receiver<Subscriber>,
    connections: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    _dir: Option<tempfile::TempDir>,
}

enum Listener {
    Unix(UnixListener),
    Tcp(std::net::TcpListener),
}

impl Publisher {
    /// On a unix socket (`<tempdir>/master_event_pub.ipc`).
    pub fn unix(framing: Framing) -> Publisher {
        let dir = tempfile::tempdir().expect("tempdir");
        let path: PathBuf = dir.path().join("master_event_pub.ipc");
        let listener = UnixListener::bind(&path).expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        Publisher::start(
            Listener::Unix(listener),
            format!("unix:{}", path.display()),
            framing,
            Some(dir),
            None,
        )
    }

    /// On 127.0.0.1, a port the kernel picks (as `ipc_mode: tcp`).
    pub fn tcp(framing: Framing) -> Publisher {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        Publisher::start(
            Listener::Tcp(listener),
            format!("tcp:{addr}"),
            framing,
            None,
            None,
        )
    }

    /// On a unix socket, answering every connection with `on_connect` (the
    /// subscriber is then closed) instead of handing it to the test.
    pub fn unix_answering(framing: Framing, on_connect: OnConnect) -> Publisher {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("master_event_pub.ipc");
        let listener = UnixListener::bind(&path).expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        Publisher::start(
            Listener::Unix(listener),
            format!("unix:{}", path.display()),
            framing,
            Some(dir),
            Some(on_connect),
        )
    }

    fn start(
        listener: Listener,
        endpoint: String,
        framing: Framing,
        dir: Option<tempfile::TempDir>,
        on_connect: Option<OnConnect>,
    ) -> Publisher {
        let (tx, rx) = mpsc::channel();
        let connections = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (count, stopping) = (connections.clone(), stop.clone());
        let on_connect = Mutex::new(on_connect);
        std::thread::spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                let stream: Option<Box<dyn Write + Send>> = match &listener {
                    Listener::Unix(l) => l.accept().ok().map(|(s, _)| {
                        let _ = s.set_nonblocking(false);
                        Box::new(s) as Box<dyn Write + Send>
                    }),
                    Listener::Tcp(l) => l.accept().ok().map(|(s, _)| {
                        let _ = s.set_nonblocking(false);
                        Box::new(s) as Box<dyn Write + Send>
                    }),
                };
                let Some(stream) = stream else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                count.fetch_add(1, Ordering::Relaxed);
                let mut subscriber = Subscriber { stream, framing };
                let answer = on_connect.lock().unwrap_or_else(|p| p.into_inner());
                match answer.as_ref() {
                    Some(answer) => answer(&mut subscriber),
                    None => {
                        if tx.send(subscriber).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Publisher {
            endpoint,
            subscribers: rx,
            connections,
            stop,
            _dir: dir,
        }
    }

    /// `unix:/...` or `tcp:127.0.0.1:port`, for `--endpoint`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The next subscriber to connect (10 s at most).
    pub fn accept(&self) -> Subscriber {
        self.subscribers
            .recv_timeout(Duration::from_secs(10))
            .expect("a subscriber connects")
    }

    /// Connections made so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::Relaxed)
    }

    /// Waits until `n` connections were made, or `timeout`; true when they were.
    pub fn wait_connections(&self, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.connections() >= n {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
