{#-
  saltsight: apply a remedy state when a Prometheus alert fires.

  Alertmanager posts to saltsight's /alerts ([reactor] alerts = true), and
  saltsight fires one `saltsight/alert/<alertname>` event per alert. This
  applies the SLS the alert rule names in its `salt_state` annotation, on the
  minion its `minion` label names, when the alert starts firing:

      - alert: DiskAlmostFull
        expr: ...
        labels:
          minion: '{{ $labels.minion }}'
        annotations:
          salt_state: remedies.disk_cleanup

  Only SLS under `remedies.` are applied, and only on the minions named (a list
  target: a `*` in a label targets nothing). Edit `allowed_prefix` to suit.
  docs/reactor.md.
-#}
{%- set allowed_prefix = 'remedies.' %}
{%- set labels = data.get('labels', {}) %}
{%- set sls = data.get('annotations', {}).get('salt_state', '') %}
{%- set minion = labels.get('minion', '') %}
{%- if data.get('status') == 'firing' and minion and sls.startswith(allowed_prefix) %}
saltsight_alert_{{ labels.get('alertname', 'alert') }}_{{ data.get('fingerprint', '') }}:
  local.state.apply:
    - tgt: {{ minion | json }}
    - tgt_type: list
    - arg:
      - {{ sls | json }}
    - kwarg:
        queue: True
    - metadata:
        saltsight_alert: {{ labels.get('alertname', '') | json }}
{%- endif %}
