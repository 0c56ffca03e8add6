//! The agent's own timers: an idle agent arms none; a change arms the
//! checkpoint an interval ahead, and writing it disarms it again.

use std::time::Duration;

use super::*;
use crate::event::{decode, encode_frame};
use crate::pipeline::{AgentOptions, Assembly, HistoryChoice, OutputChoice, SourceChoice};
use crate::sink::output::StdoutFormat;

#[tokio::test]
async fn an_idle_agent_arms_no_checkpoint_until_something_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("saltsight.toml");
    std::fs::write(
        &path,
        format!(
            "[bus]\nendpoint = \"unix:/unused\"\n[correlate]\ndiscover = false\n[state]\ndir = {:?}\ncheckpoint_interval = \"60s\"\n",
            dir.path().join("state").display().to_string()
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
    let (mut agent, _senders) = Assembly::open(&config, &specs, options)
        .expect("opens")
        .agent(
            &config,
            Redactor::new(&config.redact).expect("redactor"),
            Observer::unregistered(&config.metrics),
        )
        .expect("an agent");
    assert_eq!(agent.next_wakeup(), None, "idle: no timer at all");

    // A minion starts: the memory changed, a checkpoint is due an interval on.
    let data = serde_json::json!({"id": "web1", "_stamp": "2026-11-26T01:00:00.000000"});
    let frame = Frame {
        bytes: encode_frame(
            "salt/minion/web1/start",
            &rmp_serde::to_vec_named(&data).expect("msgpack"),
            false,
        )
        .into(),
        received_at: Some(SystemTime::now()),
        received_mono: Some(Instant::now()),
    };
    let event = decode(&frame.bytes).expect("decode");
    agent.event(&event, &frame).expect("event");
    agent.batch_end(frame.received_mono).expect("batch end");
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
