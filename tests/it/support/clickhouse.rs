//! A real ClickHouse server (Debian's `clickhouse-server`) for the tests: its own
//! config, data directory and free loopback ports in a temp dir, the shipped
//! schema applied. Stopped (and restarted) by its pid; dropping it stops it.

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
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// The statements of a `.sql` file: comment lines dropped, split at `;`.
pub fn statements(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("sql file");
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect();
    kept.join("\n")
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

pub fn packaging(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("packaging/clickhouse")
        .join(name)
}

impl ClickHouse {
    /// Starts a server and applies `packaging/clickhouse/schema.sql`.
    pub fn start() -> ClickHouse {
        assert!(
            Path::new(SERVER).exists(),
            "{SERVER} is missing: install Debian's clickhouse-server (.ci/run does)"
        );
        let dir = tempfile::Builder::new()
            .prefix("saltsight-clickhouse-")
            .tempdir()
            .expect("tempdir");
        let (http_port, tcp_port) = (free_port(), free_port());
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
        for statement in statements(&packaging("schema.sql")) {
            server.query(&statement);
        }
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
