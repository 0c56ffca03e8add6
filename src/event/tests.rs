//! Tests of the decode: bodies, tags, fields and their lenient shapes.

use super::*;

#[test]
fn decodes_a_return_from_bin_and_from_str_bodies() {
    let data = serde_json::json!({
        "cmd": "_return", "id": "web2", "success": false, "retcode": 2, "return": {"k": 1},
        "jid": "20261121193316907494", "fun": "state.apply", "fun_args": ["fail"],
        "_stamp": "2026-11-21T19:33:17.000001+00:00"
    });
    for as_str in [false, true] {
        let frame = salt_frame("salt/job/20261121193316907494/ret/web2", &data, as_str);
        let event = decode(&frame).unwrap();
        assert_eq!(event.class, TagClass::JobReturn);
        let Body::JobReturn(ret) = &event.body else {
            panic!("not a return: {:?}", event.body)
        };
        assert_eq!(
            (ret.jid.as_str(), ret.minion.as_str()),
            ("20261121193316907494", "web2")
        );
        assert_eq!((ret.retcode, ret.success), (Some(2), Some(false)));
        assert_eq!(ret.fun.as_ref().map(Text::as_str), Some("state.apply"));
        assert_eq!(event.stamp, Stamp::parse("2026-11-21T19:33:17.000001Z"));
    }
}

/// A return's states are walked once and read by every stage from there:
/// a state run gives its states in wire order, anything else none.
#[test]
fn a_returns_states_are_walked_once_for_every_stage() {
    let returned = |ret: serde_json::Value| {
        let data = serde_json::json!({"id": "web1", "fun": "state.apply", "return": ret});
        salt_frame("salt/job/20261127000000000000/ret/web1", &data, false)
    };
    let frame = returned(serde_json::json!({
        "file_|-conf_|-/etc/app.conf_|-managed": {"result": true, "changes": {"diff": "+x"}},
        "cmd_|-migrate_|-/opt/migrate_|-run": {"result": false, "changes": {}},
        "pkg_|-app_|-app_|-installed": {"result": null, "changes": {}},
    }));
    let event = decode(&frame).unwrap();
    let Body::JobReturn(r) = &event.body else {
        panic!("not a return")
    };
    let states = r.states().expect("a state run");
    // In wire order (`json!` writes a map's keys sorted).
    let keys: Vec<&[u8]> = states.entries().iter().map(|s| s.key).collect();
    assert_eq!(
        keys,
        [
            &b"cmd_|-migrate_|-/opt/migrate_|-run"[..],
            b"file_|-conf_|-/etc/app.conf_|-managed",
            b"pkg_|-app_|-app_|-installed"
        ]
    );
    assert_eq!((states.counts().changed, states.counts().failed), (1, 1));
    assert!(
        std::ptr::eq(states, r.states().expect("a state run")),
        "asked again, the same walk"
    );
    for other in [
        serde_json::json!(["Rendering SLS 'base:app' failed"]),
        serde_json::json!(true),
    ] {
        let frame = returned(other);
        let event = decode(&frame).unwrap();
        let Body::JobReturn(r) = &event.body else {
            panic!("not a return")
        };
        assert!(r.states().is_none());
    }
}

/// The decode reads a state run's states as it passes over the return
/// and goes on after it: a field after `return` is read, the return's
/// bytes are all of its map, and a later `return` that is no state run
/// leaves no states.
#[test]
fn a_state_run_is_read_in_the_walk_that_passes_over_it() {
    let state_run = rmp_serde::to_vec_named(&serde_json::json!({
        "cmd_|-migrate_|-/opt/migrate_|-run": {"result": false, "changes": {"retcode": 1}},
        "file_|-conf_|-/etc/app.conf_|-managed": {"result": true, "changes": {}},
    }))
    .unwrap();
    let frame_of = |pairs: &[(&str, &[u8])]| {
        let mut data = vec![0x80 | pairs.len() as u8];
        for (key, value) in pairs {
            data.push(0xa0 | key.len() as u8);
            data.extend_from_slice(key.as_bytes());
            data.extend_from_slice(value);
        }
        encode_frame("salt/job/20261128000000000000/ret/web1", &data, false)
    };
    let frame = frame_of(&[("return", &state_run), ("success", &[0xc2])]);
    let event = decode(&frame).unwrap();
    let Body::JobReturn(r) = &event.body else {
        panic!("not a return")
    };
    assert_eq!(r.success, Some(false), "the field after the return");
    assert_eq!(r.ret.map(|raw| raw.0), Some(state_run.as_slice()));
    assert_eq!(r.states().map(|s| s.counts().failed), Some(1));

    let twice = frame_of(&[("return", &state_run), ("return", &[0xc3])]);
    let event = decode(&twice).unwrap();
    let Body::JobReturn(r) = &event.body else {
        panic!("not a return")
    };
    assert_eq!(r.ret.map(|raw| raw.0), Some(&[0xc3][..]), "the last return");
    assert!(r.states().is_none(), "the states of an earlier return");
}

#[test]
fn the_tag_is_read_from_the_head_of_a_frame() {
    let frame = salt_frame(
        "salt/job/20261124100000000000/ret/web1",
        &serde_json::json!({"return": "x".repeat(5000)}),
        false,
    );
    assert_eq!(
        tag_of_head(&frame[..100]),
        Some("salt/job/20261124100000000000/ret/web1")
    );
    assert_eq!(tag_of_head(&frame[..30]), None, "the tag is cut");
    assert_eq!(tag_of_head(b"\x93\x01\x02\x03"), None);
}

#[test]
fn bad_frames_give_reasons() {
    assert_eq!(
        decode(&[0x93, 1, 2, 3]).unwrap_err().reason().as_str(),
        "envelope"
    );
    assert_eq!(
        decode(&[0x81, 0xa4, b'h', b'e', b'a', b'd', 0x80])
            .unwrap_err()
            .reason(),
        DecodeReason::Envelope
    );
    assert_eq!(
        decode(&[0x81, 0xa4, b'b', b'o', b'd', b'y', 0x01])
            .unwrap_err()
            .reason(),
        DecodeReason::Envelope
    );
    let mut no_sep = vec![0x81, 0xa4, b'b', b'o', b'd', b'y', 0xc4, 3];
    no_sep.extend_from_slice(b"tag");
    assert_eq!(decode(&no_sep).unwrap_err(), DecodeError::NoTagSeparator);
    let mut not_map = vec![0x81, 0xa4, b'b', b'o', b'd', b'y', 0xc4, 6];
    not_map.extend_from_slice(b"t\n\n\x93\x01\x02");
    assert_eq!(
        decode(&not_map).unwrap_err(),
        DecodeError::DataNotAMap { tag: "t".into() }
    );
    let frame = salt_frame("salt/auth", &serde_json::json!({"act": "accept"}), false);
    assert_eq!(
        decode(&frame).unwrap_err().reason().as_str(),
        "missing_field"
    );
}

#[test]
fn minion_start_takes_its_id_from_data_when_the_tag_has_none() {
    let frame = salt_frame(
        "minion_start",
        &serde_json::json!({"id": "db1", "data": "Minion db1 started"}),
        false,
    );
    let Body::MinionStart(start) = decode(&frame).unwrap().body else {
        panic!()
    };
    assert_eq!(start.minion.as_str(), "db1");
}
