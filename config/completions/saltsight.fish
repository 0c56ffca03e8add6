# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_saltsight_global_optspecs
    string join \n config.file= log.level= log.format= h/help
end

function __fish_saltsight_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_saltsight_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_saltsight_using_subcommand
    set -l cmd (__fish_saltsight_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c saltsight -n "__fish_saltsight_needs_command" -l config.file -d 'saltsight\'s config file (TOML) [default: /etc/saltsight/saltsight.toml, if present]' -r -F
complete -c saltsight -n "__fish_saltsight_needs_command" -l log.level -d 'Log level or tracing filter (error, warn, info, debug, trace) [default: info]' -r
complete -c saltsight -n "__fish_saltsight_needs_command" -l log.format -d 'Log format on stderr: text or json [default: text]' -r
complete -c saltsight -n "__fish_saltsight_needs_command" -s h -l help -d 'Print help'
complete -c saltsight -n "__fish_saltsight_needs_command" -f -a "run" -d 'Run the agent: watch the bus and emit records (logs go to stderr)'
complete -c saltsight -n "__fish_saltsight_needs_command" -f -a "tail" -d 'Show live events, like `salt-run state.event pretty=True`'
complete -c saltsight -n "__fish_saltsight_needs_command" -f -a "top" -d 'A live view of the bus: jobs in flight with their returns against expected, verdicts as they fall, failure groups, the bus and its lag; Enter on a job shows its recap. Follows the bus itself, as `tail` does, so it needs no running agent'
complete -c saltsight -n "__fish_saltsight_needs_command" -f -a "capture" -d 'Record the raw bus bytes, with receive times, to a file for later replay'
complete -c saltsight -n "__fish_saltsight_needs_command" -f -a "replay" -d 'Feed a recording (a capture or a raw socket dump) through the pipeline'
complete -c saltsight -n "__fish_saltsight_needs_command" -f -a "check-config" -d 'Validate the configuration and print the resolved bus endpoint'
complete -c saltsight -n "__fish_saltsight_needs_command" -f -a "demo" -d 'Start a local Salt master with 3 minions, run a few jobs, and tail its bus'
complete -c saltsight -n "__fish_saltsight_needs_command" -f -a "job" -d 'One job\'s recap from the history: minions, reasons, root causes, commit'
complete -c saltsight -n "__fish_saltsight_needs_command" -f -a "jobs" -d 'Recent jobs from the history, one line each'
complete -c saltsight -n "__fish_saltsight_needs_command" -f -a "failures" -d 'Root causes across jobs from the history, by fingerprint'
complete -c saltsight -n "__fish_saltsight_needs_command" -f -a "minion" -d 'One minion\'s recent jobs, successes, misses and failures from the history'
complete -c saltsight -n "__fish_saltsight_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c saltsight -n "__fish_saltsight_using_subcommand run" -l output -d 'Where records go' -r -f -a "config\t'The config\'s `[[output]]`s (stdout when it has none)'
stdout\t'Records as JSON lines on stdout only'
none\t'No records (logs and counters only)'"
complete -c saltsight -n "__fish_saltsight_using_subcommand run" -l format -d 'How records look on stdout: readable lines on a terminal, JSON lines otherwise, unless this says' -r -f -a "json\t'JSON lines (the default when stdout is not a terminal)'
text\t'One readable line per record (the default on a terminal)'"
complete -c saltsight -n "__fish_saltsight_using_subcommand run" -l bus.master-config -d 'The Salt master\'s config, read for its id, the bus (sock_dir, root_dir, ipc_mode, tcp_master_pub_port) and its state tree (master.d/*.conf beside it too) [default: /etc/salt/master]' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand run" -l bus.endpoint -d 'The master\'s event publisher, overriding its config: unix:/var/run/salt/master/master_event_pub.ipc or tcp:127.0.0.1:4512' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand run" -l bus.max-frame-bytes -d 'Largest frame accepted, in bytes (highstate returns of several MB are normal) [default: 67108864]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand run" -l web.listen-address -d 'Where /metrics is served: host:port, [v6]:port, or :port for every interface [default: :10097, every interface]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand run" -l web.config.file -d 'TLS and basic auth for /metrics, in the Prometheus exporter-toolkit web-config format' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand run" -l state.dir -d 'Where the checkpoint of jobs in flight is kept across restarts [default: /var/lib/saltsight/state]' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand run" -l config.file -d 'saltsight\'s config file (TOML) [default: /etc/saltsight/saltsight.toml, if present]' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand run" -l log.level -d 'Log level or tracing filter (error, warn, info, debug, trace) [default: info]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand run" -l log.format -d 'Log format on stderr: text or json [default: text]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand run" -l allow-root -d 'Run as root anyway (saltsight needs only read access to the bus socket: run it as the master\'s user or a member of its group)'
complete -c saltsight -n "__fish_saltsight_using_subcommand run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c saltsight -n "__fish_saltsight_using_subcommand tail" -l tag -d 'Only events whose tag matches this glob (fnmatch, like Salt\'s); repeatable' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand tail" -l from -d 'Read a recording (saltsight capture file or raw socket dump) instead of the bus' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand tail" -l count -d 'Stop after this many matching events' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand tail" -l bus.master-config -d 'The Salt master\'s config, read for its id, the bus (sock_dir, root_dir, ipc_mode, tcp_master_pub_port) and its state tree (master.d/*.conf beside it too) [default: /etc/salt/master]' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand tail" -l bus.endpoint -d 'The master\'s event publisher, overriding its config: unix:/var/run/salt/master/master_event_pub.ipc or tcp:127.0.0.1:4512' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand tail" -l bus.max-frame-bytes -d 'Largest frame accepted, in bytes (highstate returns of several MB are normal) [default: 67108864]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand tail" -l config.file -d 'saltsight\'s config file (TOML) [default: /etc/saltsight/saltsight.toml, if present]' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand tail" -l log.level -d 'Log level or tracing filter (error, warn, info, debug, trace) [default: info]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand tail" -l log.format -d 'Log format on stderr: text or json [default: text]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand tail" -l wait -d 'Wait for the bus when it cannot be reached (retrying with backoff), instead of saying why and exiting (69: nothing there, 77: not allowed)'
complete -c saltsight -n "__fish_saltsight_using_subcommand tail" -l json -d 'One JSON object per line: {"tag": ..., "data": {...}}, data as Salt sent it'
complete -c saltsight -n "__fish_saltsight_using_subcommand tail" -l no-redact -d 'Show secrets as the bus carries them (passwords in args, pillar returns...); by default they are masked as in records (docs/security.md)'
complete -c saltsight -n "__fish_saltsight_using_subcommand tail" -s h -l help -d 'Print help'
complete -c saltsight -n "__fish_saltsight_using_subcommand top" -l bus.master-config -d 'The Salt master\'s config, read for its id, the bus (sock_dir, root_dir, ipc_mode, tcp_master_pub_port) and its state tree (master.d/*.conf beside it too) [default: /etc/salt/master]' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand top" -l bus.endpoint -d 'The master\'s event publisher, overriding its config: unix:/var/run/salt/master/master_event_pub.ipc or tcp:127.0.0.1:4512' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand top" -l bus.max-frame-bytes -d 'Largest frame accepted, in bytes (highstate returns of several MB are normal) [default: 67108864]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand top" -l config.file -d 'saltsight\'s config file (TOML) [default: /etc/saltsight/saltsight.toml, if present]' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand top" -l log.level -d 'Log level or tracing filter (error, warn, info, debug, trace) [default: info]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand top" -l log.format -d 'Log format on stderr: text or json [default: text]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand top" -l wait -d 'Wait for the bus when it cannot be reached (retrying with backoff), instead of saying why and exiting (69: nothing there, 77: not allowed)'
complete -c saltsight -n "__fish_saltsight_using_subcommand top" -s h -l help -d 'Print help'
complete -c saltsight -n "__fish_saltsight_using_subcommand capture" -l duration -d 'Stop after this long, e.g. 30s or 10m' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand capture" -l bus.master-config -d 'The Salt master\'s config, read for its id, the bus (sock_dir, root_dir, ipc_mode, tcp_master_pub_port) and its state tree (master.d/*.conf beside it too) [default: /etc/salt/master]' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand capture" -l bus.endpoint -d 'The master\'s event publisher, overriding its config: unix:/var/run/salt/master/master_event_pub.ipc or tcp:127.0.0.1:4512' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand capture" -l bus.max-frame-bytes -d 'Largest frame accepted, in bytes (highstate returns of several MB are normal) [default: 67108864]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand capture" -l config.file -d 'saltsight\'s config file (TOML) [default: /etc/saltsight/saltsight.toml, if present]' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand capture" -l log.level -d 'Log level or tracing filter (error, warn, info, debug, trace) [default: info]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand capture" -l log.format -d 'Log format on stderr: text or json [default: text]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand capture" -l wait -d 'Wait for the bus when it cannot be reached (retrying with backoff), instead of saying why and exiting (69: nothing there, 77: not allowed)'
complete -c saltsight -n "__fish_saltsight_using_subcommand capture" -s h -l help -d 'Print help'
complete -c saltsight -n "__fish_saltsight_using_subcommand replay" -l output -d 'Where records go' -r -f -a "config\t'The config\'s `[[output]]`s (stdout when it has none)'
stdout\t'Records as JSON lines on stdout only'
none\t'No records (logs and counters only)'"
complete -c saltsight -n "__fish_saltsight_using_subcommand replay" -l format -d 'How records look on stdout: readable lines on a terminal, JSON lines otherwise, unless this says' -r -f -a "json\t'JSON lines (the default when stdout is not a terminal)'
text\t'One readable line per record (the default on a terminal)'"
complete -c saltsight -n "__fish_saltsight_using_subcommand replay" -l bus.master-config -d 'The Salt master\'s config, read for its id, the bus (sock_dir, root_dir, ipc_mode, tcp_master_pub_port) and its state tree (master.d/*.conf beside it too) [default: /etc/salt/master]' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand replay" -l bus.max-frame-bytes -d 'Largest frame accepted, in bytes (highstate returns of several MB are normal) [default: 67108864]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand replay" -l config.file -d 'saltsight\'s config file (TOML) [default: /etc/saltsight/saltsight.toml, if present]' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand replay" -l log.level -d 'Log level or tracing filter (error, warn, info, debug, trace) [default: info]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand replay" -l log.format -d 'Log format on stderr: text or json [default: text]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand replay" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c saltsight -n "__fish_saltsight_using_subcommand check-config" -l bus.master-config -d 'The Salt master\'s config, read for its id, the bus (sock_dir, root_dir, ipc_mode, tcp_master_pub_port) and its state tree (master.d/*.conf beside it too) [default: /etc/salt/master]' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand check-config" -l bus.endpoint -d 'The master\'s event publisher, overriding its config: unix:/var/run/salt/master/master_event_pub.ipc or tcp:127.0.0.1:4512' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand check-config" -l bus.max-frame-bytes -d 'Largest frame accepted, in bytes (highstate returns of several MB are normal) [default: 67108864]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand check-config" -l web.listen-address -d 'Where /metrics is served: host:port, [v6]:port, or :port for every interface [default: :10097, every interface]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand check-config" -l web.config.file -d 'TLS and basic auth for /metrics, in the Prometheus exporter-toolkit web-config format' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand check-config" -l state.dir -d 'Where the checkpoint of jobs in flight is kept across restarts [default: /var/lib/saltsight/state]' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand check-config" -l config.file -d 'saltsight\'s config file (TOML) [default: /etc/saltsight/saltsight.toml, if present]' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand check-config" -l log.level -d 'Log level or tracing filter (error, warn, info, debug, trace) [default: info]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand check-config" -l log.format -d 'Log format on stderr: text or json [default: text]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand check-config" -l example -d 'Print a documented example config with every key at its default, and exit'
complete -c saltsight -n "__fish_saltsight_using_subcommand check-config" -l no-environment -d 'Check the config only: do not connect to the bus or the outputs'
complete -c saltsight -n "__fish_saltsight_using_subcommand check-config" -s h -l help -d 'Print help'
complete -c saltsight -n "__fish_saltsight_using_subcommand demo" -l format -d 'How records look on stdout: readable lines on a terminal, JSON lines otherwise, unless this says' -r -f -a "json\t'JSON lines (the default when stdout is not a terminal)'
text\t'One readable line per record (the default on a terminal)'"
complete -c saltsight -n "__fish_saltsight_using_subcommand demo" -l config.file -d 'saltsight\'s config file (TOML) [default: /etc/saltsight/saltsight.toml, if present]' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand demo" -l log.level -d 'Log level or tracing filter (error, warn, info, debug, trace) [default: info]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand demo" -l log.format -d 'Log format on stderr: text or json [default: text]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand demo" -l events -d 'Show the bus\'s events as `saltsight tail` does, instead of the records'
complete -c saltsight -n "__fish_saltsight_using_subcommand demo" -l json -d 'With --events: events as JSON lines instead of the readable form'
complete -c saltsight -n "__fish_saltsight_using_subcommand demo" -l keep -d 'Keep the lab running after the jobs, until Ctrl-C (try `salt` yourself: the command to use is printed)'
complete -c saltsight -n "__fish_saltsight_using_subcommand demo" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c saltsight -n "__fish_saltsight_using_subcommand job" -l state.dir -d 'Where the checkpoint of jobs in flight is kept across restarts [default: /var/lib/saltsight/state]' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand job" -l config.file -d 'saltsight\'s config file (TOML) [default: /etc/saltsight/saltsight.toml, if present]' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand job" -l log.level -d 'Log level or tracing filter (error, warn, info, debug, trace) [default: info]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand job" -l log.format -d 'Log format on stderr: text or json [default: text]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand job" -l json -d 'Print the answer as JSON (for scripts) instead of a table'
complete -c saltsight -n "__fish_saltsight_using_subcommand job" -s h -l help -d 'Print help'
complete -c saltsight -n "__fish_saltsight_using_subcommand jobs" -l since -d 'Jobs since then: a duration back (1h, 2d) or a time (2026-11-24T03:00:00Z)' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand jobs" -l fun -d 'Only functions matching this glob (state.*)' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand jobs" -l user -d 'Only jobs published by this user' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand jobs" -l state.dir -d 'Where the checkpoint of jobs in flight is kept across restarts [default: /var/lib/saltsight/state]' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand jobs" -l config.file -d 'saltsight\'s config file (TOML) [default: /etc/saltsight/saltsight.toml, if present]' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand jobs" -l log.level -d 'Log level or tracing filter (error, warn, info, debug, trace) [default: info]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand jobs" -l log.format -d 'Log format on stderr: text or json [default: text]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand jobs" -l failed -d 'Only jobs with a failed return or a missing minion'
complete -c saltsight -n "__fish_saltsight_using_subcommand jobs" -l json -d 'Print the answer as JSON (for scripts) instead of a table'
complete -c saltsight -n "__fish_saltsight_using_subcommand jobs" -s h -l help -d 'Print help'
complete -c saltsight -n "__fish_saltsight_using_subcommand failures" -l since -d 'Failures since then: a duration back (1h, 2d) or a time (2026-11-24T03:00:00Z)' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand failures" -l state.dir -d 'Where the checkpoint of jobs in flight is kept across restarts [default: /var/lib/saltsight/state]' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand failures" -l config.file -d 'saltsight\'s config file (TOML) [default: /etc/saltsight/saltsight.toml, if present]' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand failures" -l log.level -d 'Log level or tracing filter (error, warn, info, debug, trace) [default: info]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand failures" -l log.format -d 'Log format on stderr: text or json [default: text]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand failures" -l json -d 'Print the answer as JSON (for scripts) instead of a table'
complete -c saltsight -n "__fish_saltsight_using_subcommand failures" -s h -l help -d 'Print help'
complete -c saltsight -n "__fish_saltsight_using_subcommand minion" -l jobs -d 'Recent jobs shown at most' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand minion" -l state.dir -d 'Where the checkpoint of jobs in flight is kept across restarts [default: /var/lib/saltsight/state]' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand minion" -l config.file -d 'saltsight\'s config file (TOML) [default: /etc/saltsight/saltsight.toml, if present]' -r -F
complete -c saltsight -n "__fish_saltsight_using_subcommand minion" -l log.level -d 'Log level or tracing filter (error, warn, info, debug, trace) [default: info]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand minion" -l log.format -d 'Log format on stderr: text or json [default: text]' -r
complete -c saltsight -n "__fish_saltsight_using_subcommand minion" -l json -d 'Print the answer as JSON (for scripts) instead of a table'
complete -c saltsight -n "__fish_saltsight_using_subcommand minion" -s h -l help -d 'Print help'
complete -c saltsight -n "__fish_saltsight_using_subcommand help; and not __fish_seen_subcommand_from run tail top capture replay check-config demo job jobs failures minion help" -f -a "run" -d 'Run the agent: watch the bus and emit records (logs go to stderr)'
complete -c saltsight -n "__fish_saltsight_using_subcommand help; and not __fish_seen_subcommand_from run tail top capture replay check-config demo job jobs failures minion help" -f -a "tail" -d 'Show live events, like `salt-run state.event pretty=True`'
complete -c saltsight -n "__fish_saltsight_using_subcommand help; and not __fish_seen_subcommand_from run tail top capture replay check-config demo job jobs failures minion help" -f -a "top" -d 'A live view of the bus: jobs in flight with their returns against expected, verdicts as they fall, failure groups, the bus and its lag; Enter on a job shows its recap. Follows the bus itself, as `tail` does, so it needs no running agent'
complete -c saltsight -n "__fish_saltsight_using_subcommand help; and not __fish_seen_subcommand_from run tail top capture replay check-config demo job jobs failures minion help" -f -a "capture" -d 'Record the raw bus bytes, with receive times, to a file for later replay'
complete -c saltsight -n "__fish_saltsight_using_subcommand help; and not __fish_seen_subcommand_from run tail top capture replay check-config demo job jobs failures minion help" -f -a "replay" -d 'Feed a recording (a capture or a raw socket dump) through the pipeline'
complete -c saltsight -n "__fish_saltsight_using_subcommand help; and not __fish_seen_subcommand_from run tail top capture replay check-config demo job jobs failures minion help" -f -a "check-config" -d 'Validate the configuration and print the resolved bus endpoint'
complete -c saltsight -n "__fish_saltsight_using_subcommand help; and not __fish_seen_subcommand_from run tail top capture replay check-config demo job jobs failures minion help" -f -a "demo" -d 'Start a local Salt master with 3 minions, run a few jobs, and tail its bus'
complete -c saltsight -n "__fish_saltsight_using_subcommand help; and not __fish_seen_subcommand_from run tail top capture replay check-config demo job jobs failures minion help" -f -a "job" -d 'One job\'s recap from the history: minions, reasons, root causes, commit'
complete -c saltsight -n "__fish_saltsight_using_subcommand help; and not __fish_seen_subcommand_from run tail top capture replay check-config demo job jobs failures minion help" -f -a "jobs" -d 'Recent jobs from the history, one line each'
complete -c saltsight -n "__fish_saltsight_using_subcommand help; and not __fish_seen_subcommand_from run tail top capture replay check-config demo job jobs failures minion help" -f -a "failures" -d 'Root causes across jobs from the history, by fingerprint'
complete -c saltsight -n "__fish_saltsight_using_subcommand help; and not __fish_seen_subcommand_from run tail top capture replay check-config demo job jobs failures minion help" -f -a "minion" -d 'One minion\'s recent jobs, successes, misses and failures from the history'
complete -c saltsight -n "__fish_saltsight_using_subcommand help; and not __fish_seen_subcommand_from run tail top capture replay check-config demo job jobs failures minion help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
