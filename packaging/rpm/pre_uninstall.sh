# saltsight's %preun ($1: 0 on erase, 1 on upgrade): stop and disable on erase.
if [ "$1" -eq 0 ] && [ -d /run/systemd/system ]; then
    systemctl --no-reload disable --now saltsight.service >/dev/null 2>&1 || :
fi
