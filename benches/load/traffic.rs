//! Real-shaped job traffic for the master's pull socket, encoded as Salt 3008's
//! `fire_event` encodes it: `{"head": {}, "body": bin(tag + "\n\n" + msgpack(data))}`
//! behind a 4-byte big-endian length, with the smallest msgpack forms and the
//! keys in the order Salt's events carry them, `_stamp` taken as each event is
//! made (so bus lag is real).
//!
//! Mixes (each job names its minions in `new`, 2% of them never return):
//! - `ping`: `test.ping` to 500 minions, returns of about 230 B;
//! - `failing`: `state.apply load` to 500 minions, returns of about 1 KB with
//!   two failed states (a command and a package) and one state failed by
//!   requisite (fallout);
//! - `highstate`: a `state.highstate` to 100 minions whose returns hold 300
//!   states (about 75 KB; one minion in 20 fails one state, with fallout), then
//!   two `ping` jobs;
//! - `big`: the `failing` job to a big master's fleet, 50,000 minions by
//!   default (`--minions`).

use std::time::SystemTime;

use saltsight::time::Stamp;
use serde_json::json;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mix {
    Ping,
    Failing,
    Highstate,
    Big,
}

impl Mix {
    pub fn parse(name: &str) -> Option<Mix> {
        match name {
            "ping" => Some(Mix::Ping),
            "failing" => Some(Mix::Failing),
            "highstate" => Some(Mix::Highstate),
            "big" => Some(Mix::Big),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mix::Ping => "ping",
            Mix::Failing => "failing",
            Mix::Highstate => "highstate",
            Mix::Big => "big",
        }
    }
}

/// The SLS the `failing` and `highstate` mixes name (committed to the lab's
/// state tree, so the correlator has a HEAD and a history to tie failures to).
pub const LOAD_SLS: &str = "# saltsight load test: the states its returns name.\n\
app_config:\n  cmd.run:\n    - name: /usr/local/bin/render-config --strict\n\
app_pkg:\n  pkg.installed:\n    - name: app-server\n\
app_service:\n  service.running:\n    - name: app\n    - require:\n      - cmd: app_config\n";

/// Makes the frames of one mix, job after job, each with `_stamp` now.
pub struct Traffic {
    mix: Mix,
    job: u64,
    last_jid: u128,
    ping_minions: Vec<String>,
    highstate_minions: Vec<String>,
    big_minions: Vec<String>,
    failing_return: Vec<u8>,
    highstate_ok: Vec<u8>,
    highstate_failed: Vec<u8>,
}

impl Traffic {
    /// The mix's traffic; `big` jobs go to `big` minions.
    pub fn new(mix: Mix, big: usize) -> Traffic {
        let minion = |m: usize| format!("web{m:04}.example.net");
        Traffic {
            mix,
            job: 0,
            last_jid: 0,
            ping_minions: (0..500).map(minion).collect(),
            highstate_minions: (0..100).map(minion).collect(),
            // In no order, as Salt lists a big target's minions (the key
            // directory's order): a permutation, 7,919 prime to the sizes.
            big_minions: if mix == Mix::Big {
                (0..big).map(|m| minion(m * 7_919 % big)).collect()
            } else {
                Vec::new()
            },
            failing_return: msgpack(&failing_states()),
            highstate_ok: msgpack(&highstate_states(300, false)),
            highstate_failed: msgpack(&highstate_states(300, true)),
        }
    }

    /// The next job's frames (pull-socket framed) into `out`.
    pub fn next_job(&mut self, out: &mut Vec<Vec<u8>>) {
        self.job += 1;
        match self.mix {
            Mix::Ping => self.ping_job(out),
            Mix::Failing => {
                let minions = std::mem::take(&mut self.ping_minions);
                self.failing_job(&minions, out);
                self.ping_minions = minions;
            }
            Mix::Big => {
                let minions = std::mem::take(&mut self.big_minions);
                self.failing_job(&minions, out);
                self.big_minions = minions;
            }
            Mix::Highstate => {
                self.highstate_job(out);
                self.ping_job(out);
                self.ping_job(out);
            }
        }
    }

    /// A job of one minion, `end`, whose return tells every subscriber the
    /// traffic is over.
    pub fn end_job(&mut self, jid: &str, out: &mut Vec<Vec<u8>>) {
        let minions = vec!["end".to_string()];
        out.push(new_event(jid, "test.ping", &[], &minions));
        out.push(return_event(
            jid,
            "end",
            "test.ping",
            &[],
            true,
            0,
            None,
            b"\xc3",
        ));
    }

    /// A fresh jid (Salt's: the time to the microsecond, kept unique).
    pub fn jid(&mut self) -> String {
        let digits: String = Stamp::now()
            .to_string()
            .chars()
            .filter(char::is_ascii_digit)
            .collect();
        let mut jid: u128 = digits.parse().unwrap_or(0);
        if jid <= self.last_jid {
            jid = self.last_jid + 1;
        }
        self.last_jid = jid;
        jid.to_string()
    }

    fn ping_job(&mut self, out: &mut Vec<Vec<u8>>) {
        let jid = self.jid();
        out.push(new_event(&jid, "test.ping", &[], &self.ping_minions));
        out.push(publish_event(&jid, "test.ping", &[]));
        for (i, m) in self.ping_minions.iter().enumerate() {
            if i % 50 == 49 {
                continue; // 2% never return
            }
            out.push(return_event(
                &jid,
                m,
                "test.ping",
                &[],
                true,
                0,
                None,
                b"\xc3",
            ));
        }
    }

    fn failing_job(&mut self, minions: &[String], out: &mut Vec<Vec<u8>>) {
        let jid = self.jid();
        out.push(new_event(&jid, "state.apply", &["load"], minions));
        out.push(publish_event(&jid, "state.apply", &["load"]));
        for (i, m) in minions.iter().enumerate() {
            if i % 50 == 49 {
                continue;
            }
            out.push(return_event(
                &jid,
                m,
                "state.apply",
                &["load"],
                false,
                2,
                Some("highstate"),
                &self.failing_return,
            ));
        }
    }

    fn highstate_job(&mut self, out: &mut Vec<Vec<u8>>) {
        let jid = self.jid();
        out.push(new_event(
            &jid,
            "state.highstate",
            &[],
            &self.highstate_minions,
        ));
        out.push(publish_event(&jid, "state.highstate", &[]));
        for (i, m) in self.highstate_minions.iter().enumerate() {
            if i % 50 == 49 {
                continue;
            }
            let failed = i % 20 == 3;
            let body = if failed {
                &self.highstate_failed
            } else {
                &self.highstate_ok
            };
            out.push(return_event(
                &jid,
                m,
                "state.highstate",
                &[],
                !failed,
                if failed { 2 } else { 0 },
                Some("highstate"),
                body,
            ));
        }
    }
}

fn msgpack(value: &serde_json::Value) -> Vec<u8> {
    rmp_serde::to_vec(value).expect("msgpack")
}

/// A state run's entry, as Salt returns it.
fn state(
    key: &str,
    id: &str,
    name: &str,
    result: bool,
    comment: &str,
    run_num: usize,
    changes: serde_json::Value,
) -> (String, serde_json::Value) {
    (
        key.to_string(),
        json!({"name": name, "changes": changes, "result": result, "comment": comment,
               "__sls__": "load", "__run_num__": run_num, "start_time": "03:12:51.506143",
               "duration": 5.722, "__id__": id}),
    )
}

/// About 1 KB: a passing state, two root causes, one state failed by requisite
/// (also `big_job`'s return).
pub fn failing_states() -> serde_json::Value {
    let states = [
        state(
            "test_|-lab_good_|-good_|-succeed_without_changes",
            "lab_good",
            "good",
            true,
            "Success!",
            0,
            json!({}),
        ),
        state(
            "cmd_|-app_config_|-/usr/local/bin/render-config --strict_|-run",
            "app_config",
            "/usr/local/bin/render-config --strict",
            false,
            "Command \"/usr/local/bin/render-config --strict\" run",
            1,
            json!({"pid": 9628, "retcode": 1, "stdout": "", "stderr": "render-config: /etc/app/app.conf: unknown key 'workers'"}),
        ),
        state(
            "pkg_|-app_pkg_|-app-server_|-installed",
            "app_pkg",
            "app-server",
            false,
            "The following packages failed to install/update: app-server",
            2,
            json!({}),
        ),
        state(
            "service_|-app_service_|-app_|-running",
            "app_service",
            "app",
            false,
            "One or more requisite failed: load.app_config",
            3,
            json!({}),
        ),
    ];
    serde_json::Value::Object(states.into_iter().collect())
}

/// `n` passing file states; with `failed`, the last two fail (a root cause and
/// its fallout).
fn highstate_states(n: usize, failed: bool) -> serde_json::Value {
    let mut states: serde_json::Map<String, serde_json::Value> = (0..n)
        .map(|i| {
            let path = format!("/etc/app/conf.d/{i:04}-settings.conf");
            state(
                &format!("file_|-app_conf_{i}_|-{path}_|-managed"),
                &format!("app_conf_{i}"),
                &path,
                true,
                &format!("File {path} is in the correct state"),
                i,
                json!({}),
            )
        })
        .collect();
    if failed {
        let (k, v) = state(
            "cmd_|-app_config_|-/usr/local/bin/render-config --strict_|-run",
            "app_config",
            "/usr/local/bin/render-config --strict",
            false,
            "Command \"/usr/local/bin/render-config --strict\" run",
            n,
            json!({"pid": 9628, "retcode": 1, "stdout": "", "stderr": "render-config: unknown key 'workers'"}),
        );
        states.insert(k, v);
        let (k, v) = state(
            "service_|-app_service_|-app_|-running",
            "app_service",
            "app",
            false,
            "One or more requisite failed: load.app_config",
            n + 1,
            json!({}),
        );
        states.insert(k, v);
    }
    serde_json::Value::Object(states)
}

fn stamp() -> String {
    let text = Stamp::now().to_string();
    // Salt 3008's form: `+00:00`, not `Z`.
    format!("{}+00:00", text.trim_end_matches('Z'))
}

fn new_event(jid: &str, fun: &str, arg: &[&str], minions: &[String]) -> Vec<u8> {
    let mut d = Vec::with_capacity(64 + minions.len() * 24);
    map(&mut d, 9);
    kv_str(&mut d, "jid", jid);
    kv_str(&mut d, "tgt_type", "glob");
    kv_str(&mut d, "tgt", "*");
    kv_str(&mut d, "user", "root");
    kv_str(&mut d, "fun", fun);
    str(&mut d, "arg");
    strs(&mut d, arg);
    str(&mut d, "minions");
    array(&mut d, minions.len());
    for m in minions {
        str(&mut d, m);
    }
    str(&mut d, "missing");
    array(&mut d, 0);
    kv_str(&mut d, "_stamp", &stamp());
    framed(&format!("salt/job/{jid}/new"), &d)
}

fn publish_event(jid: &str, fun: &str, arg: &[&str]) -> Vec<u8> {
    let mut d = Vec::with_capacity(192);
    map(&mut d, 8);
    kv_str(&mut d, "fun", fun);
    str(&mut d, "arg");
    strs(&mut d, arg);
    kv_str(&mut d, "tgt", "*");
    kv_str(&mut d, "jid", jid);
    kv_str(&mut d, "ret", "");
    kv_str(&mut d, "tgt_type", "glob");
    kv_str(&mut d, "user", "root");
    kv_str(&mut d, "_stamp", &stamp());
    framed(&format!("salt/job/{jid}/publish"), &d)
}

/// A minion's `_return`; `ret` is the `return` value, msgpack-encoded.
#[allow(clippy::too_many_arguments)]
fn return_event(
    jid: &str,
    minion: &str,
    fun: &str,
    fun_args: &[&str],
    success: bool,
    retcode: u8,
    out: Option<&str>,
    ret: &[u8],
) -> Vec<u8> {
    let mut d = Vec::with_capacity(224 + ret.len());
    map(&mut d, if out.is_some() { 12 } else { 11 });
    kv_str(&mut d, "cmd", "_return");
    kv_str(&mut d, "id", minion);
    str(&mut d, "success");
    d.push(if success { 0xc3 } else { 0xc2 });
    str(&mut d, "return");
    d.extend_from_slice(ret);
    str(&mut d, "retcode");
    d.push(retcode); // a positive fixint
    kv_str(&mut d, "jid", jid);
    kv_str(&mut d, "fun", fun);
    str(&mut d, "fun_args");
    strs(&mut d, fun_args);
    kv_str(&mut d, "user", "root");
    if let Some(out) = out {
        kv_str(&mut d, "out", out);
    }
    kv_str(&mut d, "_stamp", &stamp());
    str(&mut d, "ts");
    let ts = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as u32;
    d.push(0xce);
    d.extend_from_slice(&ts.to_be_bytes());
    framed(&format!("salt/job/{jid}/ret/{minion}"), &d)
}

/// An event that only announces itself: subscribers say they are listening.
pub fn hello() -> Vec<u8> {
    let mut d = Vec::new();
    map(&mut d, 1);
    kv_str(&mut d, "_stamp", &stamp());
    framed("load/hello", &d)
}

/// `fire_event`'s message behind the pull socket's 4-byte length.
fn framed(tag: &str, data: &[u8]) -> Vec<u8> {
    let body_len = tag.len() + 2 + data.len();
    let mut p = Vec::with_capacity(body_len + 32);
    p.extend_from_slice(&[
        0x82, 0xa4, b'h', b'e', b'a', b'd', 0x80, 0xa4, b'b', b'o', b'd', b'y',
    ]);
    match body_len {
        0..=0xff => p.extend_from_slice(&[0xc4, body_len as u8]),
        0x100..=0xffff => {
            p.push(0xc5);
            p.extend_from_slice(&(body_len as u16).to_be_bytes());
        }
        _ => {
            p.push(0xc6);
            p.extend_from_slice(&(body_len as u32).to_be_bytes());
        }
    }
    p.extend_from_slice(tag.as_bytes());
    p.extend_from_slice(b"\n\n");
    p.extend_from_slice(data);
    let mut out = Vec::with_capacity(p.len() + 4);
    out.extend_from_slice(&(p.len() as u32).to_be_bytes());
    out.extend_from_slice(&p);
    out
}

fn map(d: &mut Vec<u8>, n: usize) {
    debug_assert!(n < 16);
    d.push(0x80 | n as u8);
}

fn array(d: &mut Vec<u8>, n: usize) {
    match n {
        0..=15 => d.push(0x90 | n as u8),
        16..=0xffff => {
            d.push(0xdc);
            d.extend_from_slice(&(n as u16).to_be_bytes());
        }
        _ => {
            d.push(0xdd);
            d.extend_from_slice(&(n as u32).to_be_bytes());
        }
    }
}

fn str(d: &mut Vec<u8>, s: &str) {
    let n = s.len();
    match n {
        0..=31 => d.push(0xa0 | n as u8),
        32..=0xff => d.extend_from_slice(&[0xd9, n as u8]),
        _ => {
            d.push(0xda);
            d.extend_from_slice(&(n as u16).to_be_bytes());
        }
    }
    d.extend_from_slice(s.as_bytes());
}

fn strs(d: &mut Vec<u8>, items: &[&str]) {
    array(d, items.len());
    for s in items {
        str(d, s);
    }
}

fn kv_str(d: &mut Vec<u8>, key: &str, value: &str) {
    str(d, key);
    str(d, value);
}
