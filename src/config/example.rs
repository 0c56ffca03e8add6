//! The documented example config (`check-config --example`,
//! `packaging/saltsight.toml`), written from the defaults so it cannot drift.

use super::defaults::*;
use super::master::DEFAULT_MASTER_CONFIG;

/// The documented example config, every key at its default. `packaging/saltsight.toml`
/// is this text; a test keeps the two the same, so the example cannot drift.
pub fn example() -> String {
    format!(
        r#"# saltsight configuration (/etc/saltsight/saltsight.toml).
# Every key is optional; the values below are the defaults. Unknown keys are an
# error. Command-line flags and SALTSIGHT_* environment variables override this
# file (see `saltsight --help`); `saltsight check-config` shows the result.

# This master's name in every record. Default: the Salt master's own `id` from
# its config, else the host name.
# master_id = "salt-master-1"

[bus]
# The Salt master's config. saltsight reads id, root_dir, sock_dir, cachedir, ipc_mode
# and tcp_master_pub_port from it (and from master.d/*.conf beside it) to find the
# event publisher, exactly as the master does. Set, the file must exist; unset,
# a missing /etc/salt/master means Salt's defaults. Flag: --bus.master-config.
# master_config = "{DEFAULT_MASTER_CONFIG}"

# The event publisher itself, overriding what the master's config says:
#   "unix:/var/run/salt/master/master_event_pub.ipc"   (ipc_mode: ipc, the default)
#   "tcp:127.0.0.1:4512"                               (ipc_mode: tcp)
# Flag: --bus.endpoint; environment: SALTSIGHT_ENDPOINT.
# endpoint = "unix:/var/run/salt/master/master_event_pub.ipc"

# Largest frame accepted, in bytes. A highstate return of thousands of states is
# several MB, and Salt's max_event_size does not trim it. Larger frames are counted
# and skipped. At least 1024, below 2 GiB.
max_frame_bytes = {DEFAULT_MAX_FRAME_BYTES}

# Frames held in memory between the reader and the pipeline. When full, frames
# wait on disk (spill_dir), in order, until the pipeline takes them: the reader
# never makes the master wait (it drops a subscriber with 10,000 writes pending).
queue_frames = {DEFAULT_QUEUE_FRAMES}
# The same queue's bound in bytes (a highstate return can be several MB).
queue_bytes = {DEFAULT_QUEUE_BYTES}

# Where frames wait when the queue is full: unlinked temporary files (nothing is
# left after a crash), default `bus-spill` in state.dir. Past spill_max_bytes the
# newest frames are dropped, counted, and reported as a queue_full bus gap;
# spill_max_bytes = 0 turns the spill off.
# spill_dir = "/var/lib/saltsight/state/bus-spill"
spill_max_bytes = {DEFAULT_SPILL_MAX_BYTES}

# Reconnect backoff after the master restarts or the socket is missing: the delay
# doubles from reconnect_min up to reconnect_max, plus up to as much again of
# random jitter.
reconnect_min = "{}ms"
reconnect_max = "{}ms"

# A frame half-read this long with nothing more arriving was never sent whole
# (Salt writes each frame at once): the stream is out of sync, saltsight says so,
# reports a gap and reconnects.
stall_timeout = "{}s"

[jobs]
# When an expected minion has not returned by its job's deadline, saltsight names
# it missing, with a reason. Deadlines by function glob; the longest matching glob
# wins. A job's own `timeout=N` argument, when longer, extends its deadline.
# deadlines = {{ "state.*" = "30m", "test.ping" = "30s" }}
default_deadline = "{}s"
# Bounds on memory: open jobs, and expected returns over all open jobs. Past them
# the job with the earliest deadline is closed early (its job_completed says
# evicted = true).
max_jobs = {DEFAULT_MAX_JOBS}
max_expected = {DEFAULT_MAX_EXPECTED}
# Minions followed one by one: how many jobs in a row each missed (its streak;
# the alert on minions missing repeatedly). Past it new minions are not followed
# (about 40 bytes each).
max_minions = {DEFAULT_MAX_MINIONS}
# How long a job with missing minions waits for late returns (late_return).
late_window = "{}s"
# Salt before 3008.2 gives each sub-batch of a `salt -b` run a jid of its own:
# a sub-batch whose minions all returned is held open this long for the
# batch's next one (raise it above your --batch-wait).
batch_gap = "{}s"

# Users whose jobs come through salt-api: their jobs are `run_kind = "api"`.
# api_users = ["saltapi"]

[triage]
# State comments and render messages in records are cut to this many bytes (the
# record keeps the original length).
comment_max_bytes = {}
# Minions named in a failure_group at most (its count has them all).
example_minions = {}

[correlate]
# Git checkouts of the state tree and pillar. Each job records their HEADs at
# publish; a failing state is tied to the last commit touching its SLS and, when
# it passed before on that minion, to the commits since. With discover = true the
# master's file_roots and pillar_roots that are git checkouts are watched, and
# gitfs's cache (<cachedir>/gitfs) at the gitfs_base branch.
discover = true
# More, by name (SLS paths are relative to the directory):
# state_repos = {{ states = "/srv/salt" }}
# pillar_repos = {{ pillar = "/srv/pillar" }}
git = "git"
git_timeout = "{}s"
# Commits listed in a config_change or suspect range at most.
max_commits = {}
# (minion, state) pairs remembered to find the first failing run (8 to 16
# bytes each: a minion's states are kept in blocks of 32).
max_history = {}
# A commit whose message names its pull or merge request ("Merge pull request
# #12", a squash merge's "(#12)", GitLab's "See merge request group/project!12")
# carries it; with this, a link too ({{number}}, {{project}}, {{repo}} replaced):
# pull_request_url = "https://github.com/acme/{{repo}}/pull/{{number}}"

[spool]
# Each HTTP output keeps its batches here (in <dir>/<output name>/, 0700) until
# upstream answers 2xx: they survive upstream outages and restarts. Refused
# batches (4xx) go to <dir>/<output name>/dead-letter/ with the response.
dir = "{spool_dir}"
# Bound per output, in bytes; past it the oldest batches are dropped (counted
# and logged). At least 4 times the output's batch_max_bytes.
max_bytes = {spool_max}
# fsync each batch when it is sealed (a power loss keeps all but the open batch).
fsync = true

[incidents]
# Failures with a cause outside the state tree (a package mirror, a DNS name, a
# URL's host) are grouped by the host they name: when at least min_minions
# distinct minions fail against one host within window, that is one
# external_incident, re-emitted as it grows (at most every update_every, and
# when its minions double) and closed after quiet with no new failure against
# it, or as soon as a state that had failed against it succeeds. Its
# state_failure and failure_group records carry its id.
min_minions = {inc_min}
window = "{inc_window}s"
quiet = "{inc_quiet}s"
update_every = "{inc_update}s"
# Hosts followed at most (the one seen longest ago is forgotten first), and the
# minions, jobs and states an incident lists.
max_targets = {inc_targets}
max_samples = {inc_samples}

[presence]
# A minion that did not return: down, or hung? saltsight reads which minions
# hold a connection to the master's publish port, as Salt's own CLI does for
# `[Not connected]`: the established TCP connections (/proc/net/tcp, tcp6),
# mapped to minion ids by the ipv4/ipv6 grains in the master's minion data
# cache. A minion with no connection when a job is published is judged
# not_connected at once; one that keeps its connection and stays silent is
# no_response (connected_silent). Minions sharing an address (NAT) are not
# judged by it. Live only (a recording has no connections); docs/records.md.
connections = true
# publish_port = 4505                    # default: the master config's publish_port
# cachedir = "/var/cache/salt/master"    # default: the master config's cachedir

[pressure]
# saltsight runs on the master, so it can see whether the master itself is
# saturated: its request workers' (MWorker) CPU, read from /proc (the master's
# pidfile names the tree; saltsight must run as the master's user to see it),
# the bus's lag, and Salt's own salt/stats request times (master_stats: True).
# A signal over its threshold for `sustain` opens a master_pressure record; it
# closes when every signal has stayed under 80% of its threshold as long.
# Missing-return verdicts and jobs that overlapped it carry its id.
sample_processes = true
# pidfile = "/var/run/salt-master.pid"   # default: the master config's pidfile
sample_interval = "{pr_sample}s"
sustain = "{pr_sustain}s"
# Each worker busy this share of a core, on average.
worker_cpu = {pr_cpu}
# p99 of receipt minus _stamp.
bus_lag = "{pr_lag}s"
# Mean _return / _pillar request time in salt/stats.
request_time = "{pr_req}s"

[rollouts]
# Each commit of a watched state tree is followed to every minion the master
# knows (its accepted keys; the minions seen on the bus when those cannot be
# listed): applied by a successful, non-test highstate or state.apply under it
# or a descendant; failed with its root cause; or pending. rollout records and
# the release delay (commit to 50/95/100% of the fleet) come of it.
enabled = true
# minions_dir = "/etc/salt/pki/master/minions"   # default: <pki_dir>/minions of the master config
# How often that directory is checked for a change (one stat).
relist_every = "{ro_relist}s"
# Longest between two revisions of a progressing rollout.
update_every = "{ro_update}s"
# Minions pending and no progress this long: stalled.
stall_after = "{ro_stall}s"
# Rollouts open at once per state tree.
max_open = {ro_open}

[drift]
# Each change a non-test state run makes is told apart: intentional (the run
# applied a commit, or an SLS, the minion had not applied yet), corrected (the
# state had settled under the applied commit and the run changed it back: the
# system had drifted), unsettled (it changed in the run before too), or
# never_settles (a state judged non-idempotent). A test=True run that would
# change a settled state is detected drift. Needs a watched state tree
# ([correlate]): the commit each run applied.
enabled = true
# Runs in a row a state changes in, on one minion under one commit, before it
# is judged non-idempotent (the first, intentional, counts).
never_settles_after = 3
# The share of a job's minions that changed a state again (after a change the
# run before) at which those changes are unsettled rather than drift.
fleet_share = 0.5
# Drifted states a drift record lists; changed states of one return read whole;
# bytes of a change's summary (a diff's first lines, a package's versions).
max_states_listed = 20
max_changed_read = 200
summary_bytes = 400
# (minion, state) pairs remembered (16 to 32 bytes each: a minion's states are
# kept in blocks of 32); jobs whose drift waits for their close.
max_remembered = 500000
max_open_jobs = 1000

[history]
# Every record (redacted, as the outputs get it) is kept on the master in an
# SQLite store, so that `saltsight job JID`, `jobs`, `failures` and `minion`
# answer without an upstream. Written in batches from a thread of its own; the
# oldest records go first past max_age or max_bytes (a replay's history counts
# max_age back from the recording's newest record, so an old recording is
# kept). The file is 0640: readable by saltsight's group (salt), not by the
# world.
enabled = true
# path = "{state_dir}/history.db"   # default: history.db in state.dir
max_age = "{hist_age}d"
max_bytes = {hist_bytes}
batch_max_age = "{hist_batch}s"

[state]
# What survives a restart (an upgrade, a reboot): a checkpoint of the jobs in
# flight (each minion's state), triage's open failure groups, missing streaks,
# presence and the correlator's history, kept here (0700). On start it is read
# back, the restart becomes a bus_gap (reason restart) and the jobs complete
# with their verdicts. A damaged checkpoint, or one another format or master
# wrote, is set aside beside it, never trusted. Flag: --state.dir.
dir = "{state_dir}"
# How often it is written while running ("0s": only at stop). A crash loses at
# most this much; written at every stop.
checkpoint_interval = "{checkpoint_secs}s"
# false: no checkpoint (every restart loses the jobs in flight).
checkpoint = true

# Outputs: where records go. None configured means one: stdout (JSON lines).
# Several at once are fine; `saltsight run --output stdout|none` overrides.
#
# [[output]]
# type = "stdout"
#
# [[output]]
# type = "file"                          # JSON lines, rotated by size
# path = "/var/log/saltsight/records.jsonl"
# max_bytes = {file_max}
# keep = {file_keep}
#
# [[output]]
# type = "http"
# name = "clickhouse"                    # names the spool directory; unique
# url = "http://clickhouse.example.com:8123/"
# encoding = "clickhouse"                # or "ndjson" (Vector, Logstash, Fluent Bit)
# table = "{table}"          # clickhouse only; see packaging/clickhouse/schema.sql
# headers = {{ "X-Fleet" = "eu-west" }}
# Credentials are read from files at start, never written here:
# bearer_token_file = "/etc/saltsight/upstream.token"
# basic_auth_user = "saltsight"
# basic_auth_password_file = "/etc/saltsight/upstream.password"
# ca_file = "/etc/saltsight/upstream-ca.pem"   # trusted besides the system's roots
# connect_timeout = "{connect}s"
# timeout = "{timeout}s"
# gzip = true
# A batch is sent when it has batch_max_records, batch_max_bytes, or is
# batch_max_age old, whichever comes first.
# batch_max_records = {batch_records}
# batch_max_bytes = {batch_bytes}
# batch_max_age = "{batch_age}s"
# 5xx, 408 and connection errors are retried without limit, waiting a random
# time up to retry_min doubling to retry_max; 429 and 503 wait as Retry-After
# says, up to retry_after_max.
# retry_min = "{retry_min}ms"
# retry_max = "{retry_max}s"
# retry_after_max = "{retry_after_max}s"
#
# [[output]]
# type = "otlp"                          # OpenTelemetry logs (docs/opentelemetry.md)
# name = "collector"
# endpoint = "http://127.0.0.1:4318"     # /v1/logs is appended; OTLP/HTTP protobuf
# Every key of `http` but url, encoding and table applies (headers, credentials
# from files, ca_file, timeouts, gzip, batches, retries); a partial success is
# counted in saltsight_upstream_rejected_records_total.

[metrics]
# Prometheus metrics (docs/metrics.md) at /metrics, with /, /healthz and /readyz,
# while `run` runs.
enabled = true
# host:port, [v6]:port, or :port for every interface. The default, :{metrics_port},
# is EVERY interface, IPv6 and IPv4, so that a Prometheus on another host can
# scrape it, as node_exporter's does; "127.0.0.1:{metrics_port}" serves loopback
# only (a Prometheus on this host). Flag: --web.listen-address.
listen_address = ":{metrics_port}"
# TLS and basic auth, in the Prometheus exporter-toolkit format (as node_exporter's
# --web.config.file). Flag: --web.config.file.
# web_config_file = "/etc/saltsight/web.yml"
# The `function` label: these functions have series from the start, and the
# functions seen then get values of their own, up to max_functions in all (later
# ones are "other", counted in
# saltsight_metric_label_values_refused_total{{label="function"}}).
max_functions = {max_functions}
# Or list them: exactly the listed functions get values, every other is "other"
# (set functions or max_functions, not both).
# functions = [{functions}]
# Per-minion series (saltsight_minion_*): off, as fleets have thousands of minions.
per_minion = false
# Minions given per-minion series at most; later ones are refused and counted in
# saltsight_metric_series_refused_total.
max_minions = {max_minions}
# Also expose salt-exporter's metrics (salt_new_job_total, ...) for its dashboards
# and alerts (docs/metrics.md, "Moving from salt-exporter").
salt_exporter_compat = false
# With salt_exporter_compat, salt-exporter's own switches (its config.yml keys):
# [metrics.salt_exporter]
# minion_label = false        # add-minion-label
# ignore_test = false         # global.filters.ignore-test
# ignore_mock = false         # global.filters.ignore-mock
# status_functions = ["state.highstate"]   # salt_function_status.filters.functions
# status_states = ["highstate"]            # salt_function_status.filters.states
# health_minions = true       # health-minions: accepted keys as heartbeats
# minion_keys = "/etc/salt/pki/master/minions"   # default: the master's pki_dir
# disable = []                # <metric>.enabled = false, by metric name

[redact]
# Before any output (stdout, files, upstream, logs, tail), secrets are masked as
# "[redacted]" (docs/security.md): values of map keys matching key_pattern (a
# case-insensitive regex; a key matches when it contains one), the `pillar`
# kwarg, returns of secret_functions (a summary is kept), and in free text:
# credentials in URLs, -p<secret> and --password= flags, key=value with a secret
# key, bearer tokens, PEM private keys, AWS keys, and extra_patterns.
key_pattern = "{key_pattern}"
secret_functions = [{secret_functions}]
# Every text is cut to this many bytes, ending with its original length.
max_field_bytes = {max_field_bytes}
# More patterns to mask, name = regex; a group named `s` masks only that group.
# The name is the `rule` label of saltsight_redactions_total.
# [redact.extra_patterns]
# vault_token = 'hvs\.[A-Za-z0-9]{{20,}}'

[reactor]
# Off by default: the one write saltsight can make. On, saltsight fires its
# verdicts onto the master's bus through the pull socket, as Salt's fire_event
# does, for Salt's Reactor to act on (docs/reactor.md; Reactor SLS ship in
# /usr/share/saltsight/reactor): saltsight/job/<jid>/missing (the minions that
# did not return, with reasons, the job's function and arguments),
# saltsight/job/<jid>/failed (root causes, the failed minions),
# saltsight/incident/<id>/open|closed, saltsight/pressure/<id>/open|closed,
# saltsight/rollout/<repo>/<commit>/<status>. Each kind fires at most once per
# original job: a job a Reactor starts names the one it answers in its metadata
# (saltsight_retry_of), so a retry that fails again fires nothing.
enabled = false
fire = ["missing", "failed", "incident", "rollout", "pressure"]
# endpoint = "unix:/var/run/salt/master/master_event_pull.ipc"   # default: from the master config
# Events per second at most, and at once; past them, or past the queue, or with
# the pull socket absent, events are counted and dropped, never kept to retry.
max_per_second = {re_rate}
burst = {re_burst}
queue = {re_queue}
# Minions one event lists at most (the rest counted in `more`).
max_minions = {re_minions}
# Alertmanager's webhook (version 4) at POST /alerts on the metrics listener:
# one saltsight/alert/<alertname> event per alert. Off loopback it needs
# basic_auth_users or required client certificates in the web config.
alerts = false
alerts_max_bytes = {re_alert_bytes}

[log]
# error, warn, info, debug, trace, or a tracing filter such as
# "info,saltsight::bus=debug". Flag: --log.level.
level = "info"
# "text" or "json". Under systemd, text lines carry no timestamp (the journal
# adds one). Flag: --log.format.
format = "text"
"#,
        DEFAULT_RECONNECT_MIN.as_millis(),
        DEFAULT_RECONNECT_MAX.as_millis(),
        DEFAULT_STALL_TIMEOUT.as_secs(),
        DEFAULT_DEADLINE.as_secs(),
        DEFAULT_LATE_WINDOW.as_secs(),
        DEFAULT_BATCH_GAP.as_secs(),
        DEFAULT_COMMENT_MAX_BYTES,
        DEFAULT_EXAMPLE_MINIONS,
        DEFAULT_GIT_TIMEOUT.as_secs(),
        DEFAULT_MAX_COMMITS,
        DEFAULT_MAX_HISTORY,
        spool_dir = DEFAULT_SPOOL_DIR,
        state_dir = DEFAULT_STATE_DIR,
        hist_age = DEFAULT_HISTORY_MAX_AGE.as_secs() / 86_400,
        hist_bytes = DEFAULT_HISTORY_MAX_BYTES,
        hist_batch = DEFAULT_HISTORY_BATCH_MAX_AGE.as_secs(),
        re_rate = DEFAULT_REACTOR_PER_SECOND,
        re_burst = DEFAULT_REACTOR_BURST,
        re_queue = DEFAULT_REACTOR_QUEUE,
        re_minions = DEFAULT_REACTOR_MAX_MINIONS,
        re_alert_bytes = DEFAULT_REACTOR_ALERT_MAX_BYTES,
        ro_relist = DEFAULT_ROLLOUT_RELIST_EVERY.as_secs(),
        ro_update = DEFAULT_ROLLOUT_UPDATE_EVERY.as_secs(),
        ro_stall = DEFAULT_ROLLOUT_STALL_AFTER.as_secs(),
        ro_open = DEFAULT_ROLLOUT_MAX_OPEN,
        pr_sample = DEFAULT_PRESSURE_SAMPLE_INTERVAL.as_secs(),
        pr_sustain = DEFAULT_PRESSURE_SUSTAIN.as_secs(),
        pr_cpu = DEFAULT_PRESSURE_WORKER_CPU,
        pr_lag = DEFAULT_PRESSURE_BUS_LAG.as_secs(),
        pr_req = DEFAULT_PRESSURE_REQUEST_TIME.as_secs(),
        inc_min = DEFAULT_INCIDENT_MIN_MINIONS,
        inc_window = DEFAULT_INCIDENT_WINDOW.as_secs(),
        inc_quiet = DEFAULT_INCIDENT_QUIET.as_secs(),
        inc_update = DEFAULT_INCIDENT_UPDATE_EVERY.as_secs(),
        inc_targets = DEFAULT_INCIDENT_MAX_TARGETS,
        inc_samples = DEFAULT_INCIDENT_MAX_SAMPLES,
        checkpoint_secs = DEFAULT_CHECKPOINT_INTERVAL.as_secs(),
        spool_max = DEFAULT_SPOOL_MAX_BYTES,
        file_max = DEFAULT_FILE_MAX_BYTES,
        file_keep = DEFAULT_FILE_KEEP,
        table = DEFAULT_CLICKHOUSE_TABLE,
        connect = DEFAULT_CONNECT_TIMEOUT.as_secs(),
        timeout = DEFAULT_REQUEST_TIMEOUT.as_secs(),
        batch_records = DEFAULT_BATCH_MAX_RECORDS,
        batch_bytes = DEFAULT_BATCH_MAX_BYTES,
        batch_age = DEFAULT_BATCH_MAX_AGE.as_secs(),
        retry_min = DEFAULT_RETRY_MIN.as_millis(),
        retry_max = DEFAULT_RETRY_MAX.as_secs(),
        retry_after_max = DEFAULT_RETRY_AFTER_MAX.as_secs(),
        metrics_port = super::metrics::DEFAULT_PORT,
        functions = toml_list(super::metrics::DEFAULT_FUNCTIONS),
        max_functions = super::metrics::DEFAULT_MAX_FUNCTIONS,
        max_minions = super::metrics::DEFAULT_MAX_MINIONS,
        key_pattern = super::redact::DEFAULT_KEY_PATTERN,
        secret_functions = toml_list(super::redact::DEFAULT_SECRET_FUNCTIONS),
        max_field_bytes = super::redact::DEFAULT_MAX_FIELD_BYTES,
    )
}

/// `"a", "b"`: the inside of a TOML array of strings.
fn toml_list(items: &[&str]) -> String {
    items
        .iter()
        .map(|f| format!("{f:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_packaged_example_is_the_generated_one() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/saltsight.toml");
        let packaged = std::fs::read_to_string(&path).expect("packaging/saltsight.toml");
        assert!(
            packaged == example(),
            "packaging/saltsight.toml is stale: write config::example::example() to it"
        );
    }

    #[test]
    fn the_example_parses_and_resolves_to_the_defaults() {
        let parsed: crate::config::file::FileConfig =
            toml::from_str(&example()).expect("example parses");
        assert_eq!(parsed.bus.queue_frames, Some(DEFAULT_QUEUE_FRAMES as u64));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("saltsight.toml");
        std::fs::write(&path, example()).unwrap();
        let from_example = crate::config::load(&crate::config::Overrides {
            config: Some(path),
            ..Default::default()
        });
        let from_nothing = crate::config::load(&crate::config::Overrides {
            config: Some(dir.path().join("absent.toml")),
            ..Default::default()
        });
        assert!(
            from_nothing.is_err(),
            "an explicit missing config file is an error"
        );
        let config = from_example.expect("example resolves");
        assert_eq!(config.bus.max_frame_bytes, DEFAULT_MAX_FRAME_BYTES);
        assert_eq!(config.bus.reconnect_max, DEFAULT_RECONNECT_MAX);
    }
}
