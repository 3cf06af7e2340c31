#!/usr/bin/env bash
# setup-docker.sh: make a local Docker engine and the goai sandbox test image
# available for the sandbox/docker tests, idempotently.
#
#   eval "$(scripts/setup-docker.sh)"   # exports GOAI_TEST_DOCKER, GOAI_TEST_DOCKER_IMAGE
#   go test -race ./sandbox/docker/
#
# Installs docker.io (and busybox-static) from Debian if missing, starts
# dockerd with no bridge and no iptables (containers get no network; the
# default 172.17/16 bridge is a private range these machines must not use),
# logging to /tmp/goai-dockerd.log, and waits for it. There is no registry,
# so the test image is built locally from host files: busybox-static for the
# core utilities, plus the host's git, dash (as /bin/sh) and GNU find
# (busybox find has no -printf, which the watcher's poll needs) with the
# shared libraries ldd reports (about 10 MB). Prints GOAI_TEST_DOCKER=1 and GOAI_TEST_DOCKER_IMAGE=<image>
# on stdout; progress goes to stderr. Stop the engine with:
#   kill "$(cat /tmp/goai-dockerd.pid)"
set -euo pipefail

IMAGE=${GOAI_TEST_DOCKER_IMAGE:-goai-sandbox-test:1}
LOG=/tmp/goai-dockerd.log
PIDFILE=/tmp/goai-dockerd.pid

log() { printf 'setup-docker: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v docker >/dev/null || need+=(docker.io)
# The image needs a static busybox (ldd says "not a dynamic executable").
if ! { [ -x /bin/busybox ] && { ldd /bin/busybox 2>&1 || true; } | grep -q 'not a dynamic'; }; then
	need+=(busybox-static)
fi
if [ ${#need[@]} -gt 0 ]; then
	[ "$(id -u)" -eq 0 ] || die "not root: cannot apt-get install ${need[*]}"
	log "installing ${need[*]} from Debian"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update >&2 || true
	apt-get install -y --no-install-recommends "${need[@]}" >&2 || die "apt-get install ${need[*]} failed"
fi

ready() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

if ! ready; then
	[ "$(id -u)" -eq 0 ] || die "dockerd is not running and we are not root"
	log "starting dockerd (--bridge=none --iptables=false --ip6tables=false), log $LOG"
	nohup dockerd --bridge=none --iptables=false --ip6tables=false >"$LOG" 2>&1 &
	echo $! >"$PIDFILE"
	for _ in $(seq 1 150); do
		ready && break
		if ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
			tail -20 "$LOG" >&2 || true
			die "dockerd exited during startup (see $LOG)"
		fi
		sleep 0.2
	done
	ready || { tail -20 "$LOG" >&2 || true; die "dockerd did not become ready within 30 s (see $LOG)"; }
fi
log "dockerd $(docker version --format '{{.Server.Version}}') is ready"

if ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
	log "building $IMAGE from busybox-static + host git, find and dash"
	root=$(mktemp -d)
	trap 'rm -rf "$root"' EXIT
	mkdir -p "$root"/{bin,etc,tmp,root,workspace,usr/bin,usr/lib/git-core,usr/share} "$root"/proc "$root"/dev "$root"/sys
	chmod 1777 "$root/tmp"
	cp /bin/busybox "$root/bin/busybox"
	for applet in $(/bin/busybox --list); do
		[ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
	done
	# Host binaries override the busybox applets of the same name. The
	# shell is the host's dash: busybox sh runs its own applets before
	# $PATH, so it would pick busybox find over GNU find.
	for bin in git find dash; do
		src=$(command -v "$bin")
		rm -f "$root/bin/$bin"
		cp "$src" "$root/usr/bin/$bin"
		ln -s "/usr/bin/$bin" "$root/bin/$bin"
		for lib in $(ldd "$src" | grep -o '/[^ ]*'); do
			mkdir -p "$root$(dirname "$lib")"
			cp -L "$lib" "$root$lib"
		done
	done
	rm -f "$root/bin/sh"
	ln -s /usr/bin/dash "$root/bin/sh"
	[ -d /usr/share/git-core/templates ] && mkdir -p "$root/usr/share/git-core" && cp -r /usr/share/git-core/templates "$root/usr/share/git-core/"
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
	tar -C "$root" -c . | docker import \
		-c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		-c 'WORKDIR /workspace' \
		- "$IMAGE" >&2 || die "docker import failed"
	docker run --rm --network none "$IMAGE" sh -c 'git --version && find --version >/dev/null && find . -maxdepth 0 -printf "%T@\\t%s\\t%p\\n" >/dev/null' >&2 || die "the test image does not run"
fi
log "image $IMAGE is ready"

echo "GOAI_TEST_DOCKER=1"
echo "GOAI_TEST_DOCKER_IMAGE=$IMAGE"
