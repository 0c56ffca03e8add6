# saltsight's %postun ($1: 0 on erase, 1 on upgrade): restart after an upgrade.
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
    if [ "$1" -ge 1 ]; then
        systemctl try-restart saltsight.service >/dev/null 2>&1 || :
    fi
fi
