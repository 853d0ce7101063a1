#!/bin/sh
# deb.sh - `make deb`: the programs as a Debian package, built with dpkg-deb alone.
#
#   1. make install-progs DESTDIR=$BUILD/deb/root PREFIX=/usr SYSTEMDUNITDIR=/lib/systemd/system
#      (market-server, market-seed, market-load; their man pages; docs and examples; the unit);
#   2. the settings template (deploy/systemd/market-server.env.example) as the conffile
#      /etc/gamemarket/market-server.env, every line commented, listed in DEBIAN/conffiles;
#   3. the maintainer scripts of deploy/deb/: postinst writes a random key of the player tokens
#      into /etc/gamemarket/market-server.secret.env (not a conffile: maintainer scripts leave
#      conffiles alone), makes both files mode 0600, enables and starts (on an upgrade,
#      restarts) market-server.service; prerm stops it on remove; postrm deletes the key file
#      and /etc/gamemarket on purge (docs/OPERATIONS.md, "Installing");
#   4. what Debian policy asks of the tree: binaries stripped, man pages and the changelog
#      compressed with gzip -9n, a copyright file, DEBIAN/control with the shared-library
#      dependencies that dpkg-shlibdeps finds, DEBIAN/md5sums (of every file but the conffile);
#   5. dpkg-deb --root-owner-group --build into $BUILD/gamemarket_<VERSION>_<arch>.deb, whose
#      path it prints last.
#
# lock/ as a library (liblock, lock.h, rconn.h, lock.pc) is not in the package: `make install`
# installs it; a Debian library wants packages of its own (liblock1, liblock-dev). BUILD
# (build), BIN (bin), VERSION (0.1.0), MAKE, DEB_MAINTAINER may be set. Exits non-zero on any
# failure.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=${BIN:-bin}
VERSION=${VERSION:-0.1.0}
MAKE=${MAKE:-make}
MAINTAINER=${DEB_MAINTAINER:-gamemarket developers <dev@gamemarket.invalid>}
unset MAKEFLAGS MFLAGS MAKELEVEL # a make of our own, not a part of the caller's
arch=$(dpkg --print-architecture)
stage="$BUILD/deb"
root="$stage/root"
deb="$BUILD/gamemarket_${VERSION}_$arch.deb"
doc="$root/usr/share/doc/gamemarket"

rm -rf "$stage"
mkdir -p "$stage"
"$MAKE" --no-print-directory BUILD="$BUILD" BIN="$BIN" VERSION="$VERSION" install-progs \
    DESTDIR="$PWD/$root" PREFIX=/usr SYSTEMDUNITDIR=/lib/systemd/system >"$stage/install.log" ||
    {
        cat "$stage/install.log" >&2
        exit 1
    }

# The conffile: shipped 0644 as lintian wants; postinst makes it 0600 before it holds a secret.
install -d -m 755 "$root/etc/gamemarket"
install -m 644 deploy/systemd/market-server.env.example "$root/etc/gamemarket/market-server.env"

for b in "$root"/usr/bin/*; do
    strip --strip-unneeded --remove-section=.comment --remove-section=.note "$b"
done
gzip -9n "$root"/usr/share/man/man1/*.1

cat >"$stage/changelog.Debian" <<EOF
gamemarket ($VERSION) unstable; urgency=medium

  * Built from the gamemarket sources with make deb.

 -- $MAINTAINER  $(date -R -u -d @"${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")
EOF
gzip -9n -c "$stage/changelog.Debian" >"$doc/changelog.gz"
cat >"$doc/copyright" <<EOF
gamemarket

Copyright 2026 the gamemarket authors.

No licence has been chosen for gamemarket yet; until one is, its authors keep every
right, and this package grants none.
EOF
chmod 644 "$doc/changelog.gz" "$doc/copyright"

# The libraries the programs load, as dependencies (dpkg-shlibdeps wants a debian/control).
mkdir -p "$stage/src/debian"
printf 'Source: gamemarket\n\nPackage: gamemarket\nArchitecture: any\n' >"$stage/src/debian/control"
depends=$(cd "$stage/src" && dpkg-shlibdeps -O "$PWD/../root"/usr/bin/* 2>"$PWD/../shlibdeps.log" |
    sed -n 's/^shlibs:Depends=//p') || {
    cat "$stage/shlibdeps.log" >&2
    exit 1
}
[ -n "$depends" ] || {
    echo "deb: dpkg-shlibdeps found no dependencies" >&2
    exit 1
}

size=$(du -sk --apparent-size "$root" | cut -f1)
mkdir -p "$root/DEBIAN"
cat >"$root/DEBIAN/control" <<EOF
Package: gamemarket
Version: $VERSION
Architecture: $arch
Maintainer: $MAINTAINER
Installed-Size: $size
Depends: $depends
Suggests: redis-server
Section: net
Priority: optional
Description: game-market trading service over Redis
 gamemarket trades game items between players: purchases, listings, flash
 sales and searches over an HTTP API, kept consistent in Redis under a
 distributed lock with fencing.
 .
 This package holds market-server (with a hardened systemd unit,
 market-server.service), market-seed and market-load.
EOF
# Every file under /etc is a conffile; dpkg keeps their sums itself, so md5sums leaves them out.
(cd "$root" && find etc -type f | sed 's|^|/|' | sort >DEBIAN/conffiles)
(cd "$root" && find . \( -path ./DEBIAN -o -path ./etc \) -prune -o -type f -print |
    sed 's|^\./||' | sort | xargs md5sum >DEBIAN/md5sums)
for s in postinst prerm postrm; do
    install -m 755 "deploy/deb/$s" "$root/DEBIAN/$s"
done
chmod 644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums" "$root/DEBIAN/conffiles"
find "$root" -type d -exec chmod 755 {} +

dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
