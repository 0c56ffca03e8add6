# The spool directory, 0700, owned by the user the unit runs as when it exists
# (systemd's StateDirectory= fixes the owner at start otherwise). Run by the
# .deb's postinst and the .rpm's post-install.
install -d -m 0750 /var/lib/saltsight
install -d -m 0700 /var/lib/saltsight/spool
if getent passwd salt >/dev/null 2>&1; then
    chown salt: /var/lib/saltsight /var/lib/saltsight/spool
else
    echo "saltsight: there is no 'salt' user here. saltsight.service runs as salt, the user Salt 3006+ packages run salt-master as; install salt-master first, or see /usr/share/doc/saltsight/install.md to run it as another user." >&2
fi
