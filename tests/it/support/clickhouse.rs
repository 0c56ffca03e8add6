//! A real ClickHouse server (Debian's `clickhouse-server`, 18.16) for the tests:
//! its own config, data directory and free loopback ports in a temp dir, the
//! shipped legacy schema applied; or several, as the shards of a cluster. Stopped
//! (and restarted) by its pid; dropping it stops it. And current ClickHouse in
//! process ([`Chdb`]: chdb-core 26.x, driven through `scripts/chdb-sql`), with the
//! splitter both use for the shipped `.sql` files.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::upstream::post;

pub const SERVER: &str = "/usr/sbin/clickhouse-server";

pub struct ClickHouse {
    dir: tempfile::TempDir,
    pub http: SocketAddr,
    child: Option<Child>,
}

pub fn free_port() -> u16 {
    free_ports(1)[0]
}

/// `n` distinct free loopback ports (bound together, then released).
pub fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("a free loopback port"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("bound").port())
        .collect()
}

/// The statements of a `.sql` file (see [`split`]).
pub fn statements(path: &Path) -> Vec<String> {
    split(&std::fs::read_to_string(path).expect("sql file"))
}

/// Splits SQL text into statements: a statement ends at a `;` outside a string
/// (`'...'`, with `\'` or `''` inside), a quoted name (`"..."`, `` `...` ``) and
/// a comment; comments (`--` to the end of the line, `/* ... */`) are dropped, so
/// a `;` inside one splits nothing. `scripts/clickhouse_sql.py` does the same.
pub fn split(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let (mut out, mut cur, mut i) = (Vec::new(), Vec::new(), 0);
    while i < b.len() {
        match b[i] {
            b'-' if b[i..].starts_with(b"--") => {
                i += b[i..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .unwrap_or(b.len() - i);
            }
            b'/' if b[i..].starts_with(b"/*") => {
                i += 2 + find(&b[i + 2..], b"*/").map_or(b.len() - i - 2, |at| at + 2);
                cur.push(b' ');
            }
            q @ (b'\'' | b'"' | b'`') => {
                let mut j = i + 1;
                while j < b.len() {
                    if b[j] == b'\\' || (b[j] == q && b.get(j + 1) == Some(&q)) {
                        j += 2;
                    } else if b[j] == q {
                        break;
                    } else {
                        j += 1;
                    }
                }
                let end = (j + 1).min(b.len());
                cur.extend_from_slice(&b[i..end]);
                i = end;
            }
            b';' => {
                out.push(std::mem::take(&mut cur));
                i += 1;
            }
            c => {
                cur.push(c);
                i += 1;
            }
        }
    }
    out.push(cur);
    out.into_iter()
        .map(|s| {
            String::from_utf8(s)
                .expect("split at ASCII bytes")
                .trim()
                .to_owned()
        })
        .filter(|s| !s.is_empty())
        .collect()
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

pub fn packaging(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("packaging/clickhouse")
        .join(name)
}

impl ClickHouse {
    /// Starts a server and applies `packaging/clickhouse/legacy/schema.sql` with
    /// `scripts/clickhouse-apply`.
    pub fn start() -> ClickHouse {
        let ports = free_ports(2);
        let server = ClickHouse::spawn(ports[0], ports[1], "");
        // As an operator would: scripts/clickhouse-apply over the HTTP interface.
        let out = Command::new("python3")
            .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/clickhouse-apply"))
            .arg(server.url())
            .arg(packaging("legacy/schema.sql"))
            .output()
            .expect("python3 runs");
        assert!(
            out.status.success(),
            "scripts/clickhouse-apply: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        server
    }

    /// Starts `n` servers, the shards of the cluster `saltsight` (one replica
    /// each), and applies `packaging/clickhouse/legacy/cluster.sql` on each.
    pub fn cluster(n: usize) -> Vec<ClickHouse> {
        let ports = free_ports(2 * n);
        let shards: String = ports
            .chunks(2)
            .map(|p| {
                format!(
                    "<shard><replica><host>127.0.0.1</host><port>{}</port></replica></shard>",
                    p[1]
                )
            })
            .collect();
        let remote = format!("<remote_servers><saltsight>{shards}</saltsight></remote_servers>");
        let servers: Vec<ClickHouse> = ports
            .chunks(2)
            .map(|p| ClickHouse::spawn(p[0], p[1], &remote))
            .collect();
        for server in &servers {
            for statement in statements(&packaging("legacy/cluster.sql")) {
                server.query(&statement);
            }
        }
        servers
    }

    fn spawn(http_port: u16, tcp_port: u16, extra: &str) -> ClickHouse {
        assert!(
            Path::new(SERVER).exists(),
            "{SERVER} is missing: install Debian's clickhouse-server (.ci/run does)"
        );
        let dir = tempfile::Builder::new()
            .prefix("saltsight-clickhouse-")
            .tempdir()
            .expect("tempdir");
        let root = dir.path();
        for sub in ["data", "tmp", "user_files", "format_schemas"] {
            std::fs::create_dir_all(root.join(sub)).expect("mkdir");
        }
        let p = |sub: &str| format!("{}/{sub}", root.display());
        std::fs::write(
            root.join("config.xml"),
            format!(
                r#"<?xml version="1.0"?>
<yandex>
    <logger><level>information</level><log>{log}</log><errorlog>{errlog}</errorlog><console>0</console></logger>
    <listen_host>127.0.0.1</listen_host>
    <http_port>{http_port}</http_port>
    <tcp_port>{tcp_port}</tcp_port>
    <path>{data}/</path>
    <tmp_path>{tmp}/</tmp_path>
    <user_files_path>{user_files}/</user_files_path>
    <format_schema_path>{format_schemas}/</format_schema_path>
    <mark_cache_size>5368709120</mark_cache_size>
    <users_config>{users}</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    {extra}
</yandex>
"#,
                log = p("server.log"),
                errlog = p("error.log"),
                data = p("data"),
                tmp = p("tmp"),
                user_files = p("user_files"),
                format_schemas = p("format_schemas"),
                users = p("users.xml"),
            ),
        )
        .expect("config.xml");
        std::fs::write(
            root.join("users.xml"),
            r#"<?xml version="1.0"?>
<yandex>
    <profiles><default><max_memory_usage>2000000000</max_memory_usage></default></profiles>
    <users><default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default></users>
    <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
"#,
        )
        .expect("users.xml");
        let mut server = ClickHouse {
            dir,
            http: SocketAddr::from(([127, 0, 0, 1], http_port)),
            child: None,
        };
        server.resume();
        server
    }

    /// Starts the server (again) on the same data and ports; waits until it answers.
    pub fn resume(&mut self) {
        let child = Command::new(SERVER)
            .arg(format!(
                "--config-file={}",
                self.dir.path().join("config.xml").display()
            ))
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn clickhouse-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok((200, body)) = post(self.http, "/?query=SELECT%201", b"") {
                if body.trim() == "1" {
                    return;
                }
            }
            if let Some(child) = &mut self.child {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!(
                        "clickhouse-server exited with {status}: {}",
                        std::fs::read_to_string(self.dir.path().join("error.log"))
                            .unwrap_or_default()
                    );
                }
            }
            assert!(
                Instant::now() < deadline,
                "clickhouse-server did not answer in 60 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGTERM to the server's pid, then waits for it to exit (SIGKILL after 30 s).
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Runs one statement; panics with ClickHouse's message on an error.
    pub fn query(&self, sql: &str) -> String {
        // 64-bit integers as JSON numbers, not strings.
        let target = "/?output_format_json_quote_64bit_integers=0";
        match post(self.http, target, sql.as_bytes()) {
            Ok((200, body)) => body,
            Ok((status, body)) => panic!("ClickHouse answered {status} to {sql}:\n{body}"),
            Err(e) => panic!("ClickHouse unreachable for {sql}: {e}"),
        }
    }

    /// Rows of `sql` as JSON objects (`FORMAT JSONEachRow`).
    pub fn rows(&self, sql: &str) -> Vec<serde_json::Value> {
        self.query(&format!("{sql} FORMAT JSONEachRow"))
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON row"))
            .collect()
    }

    /// The server's data directory (`<path>` of its config).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.http)
    }

    /// Polls until every record id in `want` is in `saltsight.records`.
    pub fn wait_stored(&self, want: &std::collections::BTreeSet<String>, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let stored: std::collections::BTreeSet<String> = self
                .query("SELECT DISTINCT id FROM saltsight.records FORMAT TSV")
                .lines()
                .map(str::to_owned)
                .collect();
            let missing = want.difference(&stored).count();
            if missing == 0 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{missing} of {} records never reached ClickHouse",
                want.len()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for ClickHouse {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Where scripts/setup-chdb installs chdb-core: `$SALTSIGHT_CHDB_VENV`, else
/// `~/.cache/saltsight/chdb-26.9.0`.
pub fn chdb_venv() -> PathBuf {
    std::env::var_os("SALTSIGHT_CHDB_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME"))
                .join(".cache/saltsight/chdb-26.9.0")
        })
}

/// Current ClickHouse (26.x) in a Python process of its own (`scripts/chdb-sql
/// DIR --serve`), on a database in a temp dir. Dropping it kills that process,
/// by pid.
pub struct Chdb {
    child: Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    _dir: tempfile::TempDir,
}

impl Chdb {
    pub fn start() -> Chdb {
        Chdb::spawn(false)
    }

    /// As [`Chdb::start`], configured with the cluster `saltsight` of one shard:
    /// itself (a replica on the `tcp_port` it is configured with is local, so
    /// its `Distributed` tables run in process; nothing listens).
    pub fn start_cluster() -> Chdb {
        Chdb::spawn(true)
    }

    fn spawn(cluster: bool) -> Chdb {
        let python = chdb_venv().join("bin/python");
        assert!(
            python.exists(),
            "{} is missing: run scripts/setup-chdb (scripts/test does)",
            python.display()
        );
        let dir = tempfile::Builder::new()
            .prefix("saltsight-chdb-")
            .tempdir()
            .expect("tempdir");
        let mut db = dir.path().join("db").display().to_string();
        if cluster {
            let port = free_port();
            let config = dir.path().join("config.xml");
            std::fs::write(
                &config,
                format!(
                    "<clickhouse><tcp_port>{port}</tcp_port><remote_servers><saltsight><shard><replica>\
                     <host>127.0.0.1</host><port>{port}</port></replica></shard></saltsight></remote_servers></clickhouse>\n"
                ),
            )
            .expect("config.xml");
            db = format!("{db}?config-file={}", config.display());
        }
        let mut child = Command::new(python)
            .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/chdb-sql"))
            .arg(db)
            .arg("--serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn scripts/chdb-sql");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        Chdb {
            child,
            stdin,
            stdout,
            _dir: dir,
        }
    }

    /// Runs one statement; its output in `format`, or ClickHouse's message.
    pub fn try_query(&mut self, sql: &str, format: &str) -> Result<String, String> {
        use std::io::{BufRead, Write};
        let request = serde_json::json!({"sql": sql, "format": format});
        writeln!(self.stdin, "{request}").expect("write to chdb-sql");
        self.stdin.flush().expect("flush");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read chdb-sql");
        let answer: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("chdb-sql answered {line:?}: {e}"));
        match answer["error"].as_str() {
            Some(error) => Err(error.to_owned()),
            None => Ok(answer["out"].as_str().expect("out").to_owned()),
        }
    }

    /// Runs one statement; panics with ClickHouse's message on an error.
    pub fn query(&mut self, sql: &str) -> String {
        self.try_query(sql, "TSV")
            .unwrap_or_else(|e| panic!("chdb failed {sql}:\n{e}"))
    }

    /// Rows of `sql` as JSON objects (64-bit integers as numbers).
    pub fn rows(&mut self, sql: &str) -> Vec<serde_json::Value> {
        let sql = format!("{sql} SETTINGS output_format_json_quote_64bit_integers = 0");
        self.try_query(&sql, "JSONEachRow")
            .unwrap_or_else(|e| panic!("chdb failed {sql}:\n{e}"))
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON row"))
            .collect()
    }

    /// Runs every statement of a shipped `.sql` file.
    pub fn apply(&mut self, path: &Path) {
        for statement in statements(path) {
            self.query(&statement);
        }
    }

    /// Inserts rows made by the `clickhouse` encoding, with the settings the
    /// HTTP output sends.
    pub fn insert(&mut self, table: &str, rows: &[u8]) {
        let sql = format!(
            "INSERT INTO {table} SETTINGS input_format_skip_unknown_fields = 1 FORMAT JSONEachRow\n{}",
            String::from_utf8_lossy(rows)
        );
        self.query(&sql);
    }
}

impl Drop for Chdb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
