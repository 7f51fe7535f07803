# samsa %post ($1: 1 install, 2 upgrade): user and group samsa, data directory, then the unit
# enabled per the preset policy and, where systemd runs, started (restarted on upgrade).
if command -v systemd-sysusers >/dev/null 2>&1; then
	systemd-sysusers samsa.conf || :
fi
# (systemd-tmpfiles needs /proc: not there when installing into an image with rpm --root)
if command -v systemd-tmpfiles >/dev/null 2>&1 && [ -e /proc/self ]; then
	systemd-tmpfiles --create samsa.conf || :
fi
if [ "$1" -eq 1 ] && command -v systemctl >/dev/null 2>&1; then
	systemctl --no-reload preset samsa.service >/dev/null 2>&1 || :
fi
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || :
	if [ "$1" -eq 1 ]; then
		systemctl start samsa.service >/dev/null 2>&1 || :
	else
		systemctl try-restart samsa.service >/dev/null 2>&1 || :
	fi
fi
