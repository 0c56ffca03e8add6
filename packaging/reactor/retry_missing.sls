{#-
  saltsight: run a state job again on the minions that did not return, once.

  saltsight fires `saltsight/job/<jid>/missing` when a job's deadline passed
  with minions that never answered ([reactor] enabled = true in saltsight.toml).
  This runs the same function with the same arguments on exactly those minions
  (a list target: nothing is globbed), and names the job it answers in its
  metadata, so saltsight records the retry with run kind `reactor` and fires
  nothing more about it: a retry that fails again does not start another.

  Only state runs are retried (re-running an arbitrary function is not safe to
  assume), and never a test=True run. The retry is queued behind a state run
  still going on the minion (`queue=True`): a hung minion that resumes finishes
  the original first, then the retry, instead of refusing it as already
  running. docs/reactor.md.
-#}
{%- set retryable = ['state.apply', 'state.sls', 'state.highstate'] %}
{%- set minions = data.get('minions', []) %}
{%- set kwarg = dict(data.get('kwarg', {}), queue=True) %}
{%- if data.get('fun') in retryable and minions and not data.get('test') %}
saltsight_retry_{{ data['jid'] }}:
  local.{{ data['fun'] }}:
    - tgt: {{ minions | join(',') | json }}
    - tgt_type: list
    - arg: {{ data.get('arg', []) | json }}
    - kwarg: {{ kwarg | json }}
    - metadata:
        saltsight_retry_of: {{ data['retry_of'] | string | json }}
{%- endif %}
