//! The agent's own timers: an idle agent arms none; a change arms the
//! checkpoint an interval ahead, and writing it disarms it again; a big
//! job's names are taken a slice an event or a tick.

use std::time::Duration;

use super::*;
use crate::event::{decode_shared, encode_frame};
use crate::jobs::tracker::{FIRST_SLICE, INTAKE_SLICE};
use crate::pipeline::{AgentOptions, Assembly, HistoryChoice, OutputChoice, SourceChoice};
use crate::sink::output::StdoutFormat;

/// An agent with a checkpoint every minute, in `dir`.
fn agent_in(dir: &std::path::Path) -> Agent {
    let path = dir.join("saltsight.toml");
    std::fs::write(
        &path,
        format!(
            "[bus]\nendpoint = \"unix:/unused\"\n[correlate]\ndiscover = false\n[state]\ndir = {:?}\ncheckpoint_interval = \"60s\"\n",
            dir.join("state").display().to_string()
        ),
    )
    .expect("write config");
    let (config, specs) = crate::pipeline::load_config(&crate::config::Overrides {
        config: Some(path),
        ..Default::default()
    })
    .expect("config loads");
    let options = AgentOptions {
        source: SourceChoice::Live,
        outputs: OutputChoice::None,
        stdout_format: StdoutFormat::Json,
        history: HistoryChoice::Off,
        checkpoint: true,
        master_processes: false,
        presence: false,
        reactor: false,
    };
    let (agent, _senders) = Assembly::open(&config, &specs, options)
        .expect("opens")
        .agent(
            &config,
            Redactor::new(&config.redact).expect("redactor"),
            Observer::unregistered(&config.metrics),
        )
        .expect("an agent");
    agent
}

/// A frame of `tag` with `data`, just received.
fn frame_of(tag: &str, data: &serde_json::Value) -> Frame {
    Frame {
        bytes: encode_frame(tag, &rmp_serde::to_vec_named(data).expect("msgpack"), false).into(),
        received_at: Some(SystemTime::now()),
        received_mono: Some(Instant::now()),
    }
}

fn feed(agent: &mut Agent, frame: &Frame) {
    let event = decode_shared(&frame.bytes).expect("decode");
    agent.event(&event, frame).expect("event");
    agent.batch_end(frame.received_mono).expect("batch end");
}

#[tokio::test]
async fn an_idle_agent_arms_no_checkpoint_until_something_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut agent = agent_in(dir.path());
    assert_eq!(agent.next_wakeup(), None, "idle: no timer at all");

    // A minion starts: the memory changed, a checkpoint is due an interval on.
    let data = serde_json::json!({"id": "web1", "_stamp": "2026-11-26T01:00:00.000000"});
    feed(&mut agent, &frame_of("salt/minion/web1/start", &data));
    let due = agent.next_wakeup().expect("a checkpoint armed");
    assert!(
        due >= Instant::now() + Duration::from_secs(55),
        "an interval ahead, not at once"
    );
    let checkpoint = dir.path().join("state").join("checkpoint");
    assert!(!checkpoint.exists());

    // Written when due; then nothing is armed again.
    agent.tick(due).expect("tick");
    // Written on the checkpoint's own thread: waited for, within a deadline.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !checkpoint.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(checkpoint.exists(), "the checkpoint was written");
    assert_eq!(agent.next_wakeup(), None, "saved and idle: no timer");
}

/// A big job's names: its first with its publication, a slice with each
/// event after it (a return among them, counted before its name is taken), then
/// a tick at once for each while the bus is quiet; no checkpoint while
/// they are part way taken.
#[tokio::test]
async fn a_big_jobs_names_are_taken_a_slice_an_event_or_a_tick() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut agent = agent_in(dir.path());
    let minions: Vec<String> = (0..60_000).map(|m| format!("web{m:05}")).collect();
    let stamp = "2026-11-26T01:00:00.000000";
    let new = serde_json::json!({"jid": "1", "fun": "state.apply", "arg": [], "tgt": "*",
        "minions": minions, "_stamp": stamp});
    feed(&mut agent, &frame_of("salt/job/1/new", &new));
    let taking = |agent: &Agent| agent.stages().taking();
    assert!(taking(&agent));
    let last = &minions[minions.len() - 1];
    let ret = serde_json::json!({"jid": "1", "id": last, "fun": "state.apply", "return": {},
        "retcode": 0, "_stamp": stamp});
    let mut events = 0;
    while taking(&agent) && events < 2 {
        feed(
            &mut agent,
            &frame_of(&format!("salt/job/1/ret/{last}"), &ret),
        );
        events += 1;
    }
    assert_eq!(
        events, 2,
        "a slice an event, the return waiting for no slice"
    );
    assert!(taking(&agent));
    let mut ticks = 0;
    while taking(&agent) {
        let due = agent.next_wakeup().expect("a tick");
        assert!(due <= Instant::now(), "at once");
        // A checkpoint due meanwhile waits for the last name.
        agent.tick(due + Duration::from_secs(120)).expect("tick");
        ticks += 1;
        assert!(ticks < 100, "the names end");
        let saved = dir.path().join("state").join("checkpoint").exists();
        assert!(!saved || !taking(&agent), "no checkpoint part way");
    }
    // None with the publication (its first names), one with each return,
    // one a tick.
    let slices = (minions.len() - FIRST_SLICE).div_ceil(INTAKE_SLICE);
    assert_eq!(ticks, slices - events, "a slice a tick");
    let tracker = agent.stages().tracker();
    assert_eq!(tracker.stats.duplicate_returns.get(), 1, "placed once");
    assert_eq!(tracker.expected_outstanding(), minions.len() - 1);
}
