//! A local HTTP sink for saltsight's http output: takes every POST on loopback
//! and answers 200, counting requests and body bytes. One thread per
//! connection (saltsight keeps one or two alive).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default)]
pub struct SinkStats {
    pub requests: AtomicU64,
    pub bytes: AtomicU64,
}

pub struct Sink {
    pub url: String,
    pub stats: Arc<SinkStats>,
}

impl Sink {
    /// Listens on a free loopback port; the thread lives as long as the process.
    pub fn start() -> std::io::Result<Sink> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let url = format!("http://{}/records", listener.local_addr()?);
        let stats = Arc::new(SinkStats::default());
        let counts = stats.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let counts = counts.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, &counts);
                });
            }
        });
        Ok(Sink { url, stats })
    }

    pub fn requests(&self) -> u64 {
        self.stats.requests.load(Ordering::Relaxed)
    }
}

/// Requests on one kept-alive connection, until it closes.
fn serve(stream: TcpStream, stats: &SinkStats) -> std::io::Result<()> {
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut length = 0usize;
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body)?;
        stats.requests.fetch_add(1, Ordering::Relaxed);
        stats.bytes.fetch_add(length as u64, Ordering::Relaxed);
        writer.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")?;
    }
}
