# saltsight's %post ($1: 1 on install, 2 on upgrade). scripts/package puts the
# spool lines in place of the marker.
#SPOOL#
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
    if [ "$1" -eq 1 ]; then
        systemctl preset saltsight.service >/dev/null 2>&1 || :
    fi
fi
