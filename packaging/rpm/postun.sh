# samsa %postun ($1: 0 erase, 1 upgrade). The broker's data in /var/lib/samsa is never removed.
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || :
fi
if [ "$1" -eq 0 ] && [ -d /var/lib/samsa ]; then
	echo "samsa: /var/lib/samsa is kept: a package tool never deletes a broker's data." >&2
fi
