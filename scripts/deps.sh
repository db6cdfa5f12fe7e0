#!/bin/sh
# Installs the Debian packages of packages.txt that are missing. Idempotent;
# does nothing (and needs no network) when everything is present.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
want=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$here/packages.txt" | awk '{print $1}')
missing=""
for p in $want; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "deps: missing packages:$missing (run as root, or install them)" >&2
	exit 1
fi
echo "deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing >/dev/null
