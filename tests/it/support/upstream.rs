//! A small HTTP/1.1 upstream on loopback for the delivery tests: it answers from a
//! script (status, headers, body, how long to hold the answer), then with a
//! default, and keeps every request (gzip bodies decoded). Stops when dropped.
//! Also a plain HTTP POST for talking to ClickHouse.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How a reply is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A whole HTTP response.
    Answer,
    /// The connection closed with no response (a reset, a crash).
    Close,
    /// Bytes that are no HTTP response, then a close.
    Garbage,
    /// The response a byte a second (a link that barely moves).
    Dribble,
}

#[derive(Debug, Clone)]
pub struct Reply {
    pub shape: Shape,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// Wait this long before answering (a request held "mid-send").
    pub hold: Duration,
}

impl Reply {
    pub fn status(status: u16) -> Reply {
        Reply {
            shape: Shape::Answer,
            status,
            headers: Vec::new(),
            body: String::new(),
            hold: Duration::ZERO,
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn body(mut self, body: &str) -> Reply {
        self.body = body.into();
        self
    }

    pub fn hold(mut self, hold: Duration) -> Reply {
        self.hold = hold;
        self
    }

    pub fn shape(mut self, shape: Shape) -> Reply {
        self.shape = shape;
        self
    }
}

#[derive(Debug, Clone)]
pub struct Request {
    pub at: Instant,
    pub target: String,
    /// Lower-cased names.
    pub headers: Vec<(String, String)>,
    /// Decoded when it came gzipped.
    pub body: Vec<u8>,
    /// The status it was answered with.
    pub answered: u16,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body's JSON lines.
    pub fn records(&self) -> Vec<serde_json::Value> {
        String::from_utf8_lossy(&self.body)
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }
}

struct State {
    script: VecDeque<Reply>,
    default: Reply,
    requests: Vec<Request>,
}

pub struct Upstream {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
}

impl Upstream {
    pub fn start(script: Vec<Reply>, default: Reply) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(Mutex::new(State {
            script: script.into(),
            default,
            requests: Vec::new(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (state2, stop2) = (state.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (state, stop) = (state2.clone(), stop2.clone());
                        std::thread::spawn(move || serve(stream, &state, &stop));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Upstream { addr, state, stop }
    }

    pub fn url(&self) -> String {
        format!("http://{}/ingest", self.addr)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn requests(&self) -> Vec<Request> {
        self.state().requests.clone()
    }

    pub fn set_default(&self, reply: Reply) {
        self.state().default = reply;
    }

    /// Waits until `done(requests)` holds.
    pub fn wait(&self, timeout: Duration, done: impl Fn(&[Request]) -> bool) -> Vec<Request> {
        let deadline = Instant::now() + timeout;
        loop {
            let requests = self.requests();
            if done(&requests) {
                return requests;
            }
            assert!(
                Instant::now() < deadline,
                "upstream: condition not met in {timeout:?}; {} requests: {:?}",
                requests.len(),
                requests.iter().map(|r| r.answered).collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve(stream: TcpStream, state: &Mutex<State>, stop: &AtomicBool) {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let mut writer = match stream.try_clone() {
        Ok(w) => w,
        Err(_) => return,
    };
    let mut reader = BufReader::new(stream);
    while !stop.load(Ordering::Relaxed) {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => continue,
            Err(_) => return,
        }
        let target = line.split(' ').nth(1).unwrap_or("").to_string();
        let mut headers = Vec::new();
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
            }
        }
        let len: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if headers
            .iter()
            .any(|(n, v)| n == "content-encoding" && v == "gzip")
        {
            let mut decoded = Vec::new();
            flate2::read::GzDecoder::new(&body[..])
                .read_to_end(&mut decoded)
                .expect("a gzip body");
            body = decoded;
        }
        let reply = {
            let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
            let reply = state
                .script
                .pop_front()
                .unwrap_or_else(|| state.default.clone());
            state.requests.push(Request {
                at: Instant::now(),
                target,
                headers,
                body,
                answered: reply.status,
            });
            reply
        };
        std::thread::sleep(reply.hold);
        match reply.shape {
            Shape::Answer | Shape::Dribble => {}
            Shape::Close => return,
            Shape::Garbage => {
                let _ = writer.write_all(b"\x00\x9fnot http at all\r\n\r\n");
                return;
            }
        }
        let mut response = format!(
            "HTTP/1.1 {} Scripted\r\nContent-Length: {}\r\n",
            reply.status,
            reply.body.len()
        );
        for (name, value) in &reply.headers {
            response.push_str(&format!("{name}: {value}\r\n"));
        }
        response.push_str("\r\n");
        response.push_str(&reply.body);
        if reply.shape == Shape::Dribble {
            for byte in response.as_bytes() {
                if stop.load(Ordering::Relaxed) || writer.write_all(&[*byte]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            continue;
        }
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// POSTs `body` to `http://addr{target}`; returns the status and body.
pub fn post(addr: SocketAddr, target: &str, body: &[u8]) -> Result<(u16, String), String> {
    request(addr, "POST", target, "", body)
}

/// GETs `http://addr{target}`; returns the status and body.
pub fn get(addr: SocketAddr, target: &str) -> Result<(u16, String), String> {
    request(addr, "GET", target, "", b"")
}

/// GETs with HTTP basic auth.
pub fn get_as(
    addr: SocketAddr,
    target: &str,
    user: &str,
    password: &str,
) -> Result<(u16, String), String> {
    let token = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        format!("{user}:{password}"),
    );
    let header = format!("Authorization: Basic {token}\r\n");
    request(addr, "GET", target, &header, b"")
}

/// Any request, with `headers` as written lines (`Name: value\r\n`).
pub fn request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &str,
    body: &[u8],
) -> Result<(u16, String), String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
    let head = format!(
        "{method} {target} HTTP/1.1\r\nHost: {addr}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body))
        .map_err(|e| format!("send: {e}"))?;
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status in {head:?}"))?;
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    Ok((
        status,
        if chunked {
            dechunk(body)
        } else {
            body.to_string()
        },
    ))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}
