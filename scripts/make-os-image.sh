#!/bin/sh
# SPDX-License-Identifier: MIT
# A small OS image for `root: workspace` (the container tier's tests, make run):
# Debian's busybox-static as /bin/busybox with its applets as symlinks, a
# passwd/group, and the mountpoints a runtime fills (/proc, /dev, /sys, /tmp).
# Usage: scripts/make-os-image.sh DIR   (DIR must not exist or be empty)
set -eu
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
dir=$1
bb=${BUSYBOX:-/bin/busybox}
if ! [ -x "$bb" ] || ! "$bb" --list >/dev/null 2>&1; then
	echo "$0: no busybox at $bb: install Debian's busybox-static" >&2
	exit 1
fi
# A dynamically linked busybox would need libc inside the image.
if file -L "$bb" 2>/dev/null | grep -q 'dynamically linked'; then
	echo "$0: $bb is dynamically linked: install busybox-static" >&2
	exit 1
fi
mkdir -p "$dir"
if [ -n "$(ls -A "$dir")" ]; then
	echo "$0: $dir is not empty" >&2
	exit 1
fi
mkdir -p "$dir/bin" "$dir/sbin" "$dir/usr/bin" "$dir/usr/sbin" "$dir/etc" "$dir/root" \
	"$dir/proc" "$dir/dev" "$dir/sys" "$dir/tmp" "$dir/workspace" "$dir/home"
chmod 1777 "$dir/tmp"
chmod 0700 "$dir/root"
cp "$bb" "$dir/bin/busybox"
chmod 0755 "$dir/bin/busybox"
for applet in $("$bb" --list); do
	[ "$applet" = busybox ] && continue
	[ -e "$dir/bin/$applet" ] || ln -s busybox "$dir/bin/$applet"
done
# /usr/bin/env is where scripts look for env.
ln -s ../../bin/busybox "$dir/usr/bin/env"
cat > "$dir/etc/passwd" <<'PW'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PW
cat > "$dir/etc/group" <<'GR'
root:x:0:
nogroup:x:65534:
GR
echo "kis" > "$dir/etc/hostname"
printf '127.0.0.1 localhost\n::1 localhost\n' > "$dir/etc/hosts"
