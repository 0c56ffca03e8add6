//! The lab's state tree: one SLS that succeeds, one with a root-cause failure and
//! its requisite fallout, one that sleeps (for jobs that outlive a kill).

pub const FILES: &[(&str, &str)] = &[
    ("top.sls", "base:\n  '*':\n    - ok\n"),
    (
        "ok.sls",
        "lab_hello:\n  test.succeed_with_changes: []\nlab_true:\n  cmd.run:\n    - name: 'true'\n",
    ),
    (
        "fail.sls",
        "lab_good:\n  test.succeed_without_changes: []\n\
         lab_failing_cmd:\n  cmd.run:\n    - name: echo about to fail; echo err >&2; exit 1\n\
         lab_needs_failing:\n  cmd.run:\n    - name: echo never\n    - require:\n      - cmd: lab_failing_cmd\n",
    ),
    (
        "sleep.sls",
        "lab_sleep:\n  cmd.run:\n    - name: sleep 20\n",
    ),
];
