# samsa %preun ($1: 0 erase, 1 upgrade): on erase, disable and stop the unit (gracefully).
if [ "$1" -eq 0 ] && command -v systemctl >/dev/null 2>&1; then
	if [ -d /run/systemd/system ]; then
		systemctl --no-reload disable --now samsa.service >/dev/null 2>&1 || :
	else
		systemctl --no-reload disable samsa.service >/dev/null 2>&1 || :
	fi
fi
