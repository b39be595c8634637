#!/usr/bin/env bash
# Local stand-ins for the public images the Dockerfile and compose.yaml use, made from Debian
# packages, for a machine that cannot reach an image registry (Docker Hub, MCR) but can reach
# Debian's mirror, PyPI and npm.
#
# NOT NEEDED ON A NORMAL MACHINE: there `podman build` / `docker compose` pull the public images
# (python, node, nginx, redis, postgres, azurite) and this script is never run.
#
#   sudo tools/container_bases.sh       make the stand-ins (about 2 minutes on 2 cores), then say how to use them
#   set -a; . /var/tmp/crag-container-bases/standin.env; set +a      use them (compose.yaml reads these)
#
# The stand-ins are named localhost/crag-standin/*, never like the public images, so nobody mistakes
# one for the other. They are close enough for this project, not copies: a CPython 3.11 built on this
# machine (see python below), Debian bookworm's Node.js 18, nginx 1.22, Redis 7.0 and PostgreSQL 15,
# and Azurite from tests/servers/'s lock.
#
# What this machine needed besides (kept out of the Dockerfile and compose.yaml): a containers.conf
# (runc: crun refuses this kernel's hybrid cgroups; file and process limits no higher than the host
# allows: it has no CAP_SYS_RESOURCE), and this machine's extra CA certificates in the images (its
# egress proxy re-signs TLS). Both are written to $WORK; point podman at the first with
# CONTAINERS_CONF (standin.env does).
#
# Needs: root, debootstrap, podman (Debian: apt-get install debootstrap podman runc).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${CRAG_STANDIN_WORK:-/var/tmp/crag-container-bases}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE=bookworm
PREFIX=localhost/crag-standin
# Certificates this machine added to its own trust store (an intercepting proxy's CA), copied into
# every stand-in so pip, npm and apt inside the builds trust what this machine trusts.
CA_DIR="${CRAG_STANDIN_CA_DIR:-/usr/local/share/ca-certificates}"

for tool in debootstrap podman; do
  command -v "$tool" >/dev/null || { echo "error: $tool not found (apt-get install $tool)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "error: run as root (debootstrap and rootful podman)" >&2; exit 1; }
mkdir -p "$WORK"

# --- podman for this machine -------------------------------------------------------------------
conf="$WORK/containers.conf"
nofile="$(ulimit -Hn)"
nproc="$(ulimit -Hu)"
[ "$nofile" = unlimited ] && nofile=1048576
[ "$nproc" = unlimited ] && nproc=1048576
# Found by trial on the sandbox this was written on: a process limit above kernel.pid_max was refused
# when the container started, however high the host's own limit.
pid_max="$(cat /proc/sys/kernel/pid_max)"
[ "$nproc" -gt "$pid_max" ] && nproc="$pid_max"
runtime=crun
if grep -qs . /sys/fs/cgroup/unified/cgroup.controllers; then
  # cgroup v1 with controllers left on the v2 hierarchy: crun refuses to start containers, runc copes.
  command -v runc >/dev/null || { echo "error: hybrid cgroups here: apt-get install runc" >&2; exit 1; }
  runtime=runc
fi
cat > "$conf" <<EOF
# Written by tools/container_bases.sh for this machine only (CONTAINERS_CONF=$conf).
[containers]
# podman asks for more open files and processes than this machine lets a process raise itself to.
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "$runtime"
cgroup_manager = "cgroupfs"
EOF
export CONTAINERS_CONF="$conf"

# --- the Debian root file system, imported as an image -----------------------------------------
build() {  # build NAME TAG: the Containerfile in $WORK/NAME/ (context: $WORK/NAME)
  podman build --format docker -t "$PREFIX/$1:$2" "$WORK/$1" >&2
}

rootfs="$WORK/rootfs"
if ! podman image exists "$PREFIX/debian:$SUITE"; then
  echo "debootstrap $SUITE from $MIRROR (minbase) ..." >&2
  rm -rf "$rootfs"
  debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$rootfs" "$MIRROR" >"$WORK/debootstrap.log"
  cat > "$rootfs/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb ${MIRROR%/debian}/debian-security $SUITE-security main
EOF
  if compgen -G "$CA_DIR/*.crt" >/dev/null; then
    cp "$CA_DIR"/*.crt "$rootfs/usr/local/share/ca-certificates/"
    chroot "$rootfs" update-ca-certificates >/dev/null
  fi
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | podman import --change 'CMD ["/bin/bash"]' - "$PREFIX/debian:$SUITE" >&2
  rm -rf "$rootfs"
fi

# Every stand-in installs from Debian on top of that image. pip, npm and Python's ssl read the
# system store (which holds $CA_DIR's certificates), not their own bundles.
apt_layer() {  # apt_layer PACKAGES...: the RUN line that installs them
  echo "RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $* \\"
  echo " && rm -rf /var/lib/apt/lists/*"
}
base_header() {
  echo "FROM $PREFIX/debian:$SUITE"
  echo "LABEL org.opencontainers.image.description=\"local stand-in made by tools/container_bases.sh\""
  echo "ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \\"
  echo "    NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt"
}

# python: the Dockerfile's BASE_IMAGE (python:3.11-slim-bookworm), which is CPython built from source
# into /usr/local. Debian bookworm's own python3 (3.11.2) is too old for requirements.lock (soupsieve
# 4.1.4 needs 3.11.5 or later), and python.org cannot be reached here, so a CPython 3.11 (>= 3.11.5)
# built on this machine (pyenv's, built with --enable-shared on bookworm) is copied into /usr/local,
# without its site-packages and test suite. CRAG_STANDIN_PYTHON names its python3.11.
mkdir -p "$WORK/python"
python="${CRAG_STANDIN_PYTHON:-$(command -v python3.11 || true)}"
prefix="$("$python" -c 'import sys; assert sys.version_info >= (3, 11, 5) and sys.version_info[:2] == (3, 11); print(sys.base_prefix)' 2>/dev/null || true)"
if [ -z "$prefix" ] || [ ! -f "$prefix/lib/libpython3.11.so.1.0" ]; then
  echo "error: need a CPython 3.11.5+ built with --enable-shared (CRAG_STANDIN_PYTHON=/path/to/python3.11)" >&2
  exit 1
fi
rm -rf "$WORK/python/usr-local" && mkdir -p "$WORK/python/usr-local/bin" "$WORK/python/usr-local/lib"
cp -a "$prefix/bin/python3.11" "$WORK/python/usr-local/bin/"
cp -a "$prefix"/lib/libpython3.11.so* "$WORK/python/usr-local/lib/"
tar -C "$prefix/lib" -c --exclude='python3.11/site-packages/*' --exclude=python3.11/test \
  --exclude=python3.11/idlelib --exclude=python3.11/tkinter --exclude=python3.11/turtledemo \
  --exclude='*/_tkinter*' --exclude='__pycache__' python3.11 | tar -C "$WORK/python/usr-local/lib" -x
{
  base_header
  # The shared libraries CPython's extension modules link to (ssl, sqlite3, ctypes, bz2, lzma, ...).
  apt_layer libssl3 libsqlite3-0 libffi8 libbz2-1.0 liblzma5 zlib1g libreadline8 libncursesw6 \
    libuuid1 libexpat1 libnsl2 libcrypt1 libtirpc3
  echo "COPY usr-local/ /usr/local/"
  echo "RUN ldconfig && ln -s python3.11 /usr/local/bin/python3 && ln -s python3.11 /usr/local/bin/python \\"
  echo " && python3 -c 'import ssl, sqlite3, ctypes, lzma, bz2, venv, ensurepip'"
  echo 'CMD ["python3"]'
} > "$WORK/python/Containerfile"

# node: the Dockerfile's NODE_IMAGE (node:20-bookworm-slim), for npm ci and npm pack.
mkdir -p "$WORK/node"
{ base_header; apt_layer nodejs npm; echo 'CMD ["node"]'; } > "$WORK/node/Containerfile"

# nginx: like the public image, nginx in the foreground, logs to the container's output, no
# Debian default site. Too old for compose.yaml's proxy now (no upstream `resolve` before nginx 1.27.3,
# no template entrypoint): docs/container.md.
mkdir -p "$WORK/nginx"
{
  base_header
  apt_layer nginx
  echo "RUN rm -f /etc/nginx/sites-enabled/default \\"
  echo " && ln -sf /dev/stdout /var/log/nginx/access.log && ln -sf /dev/stderr /var/log/nginx/error.log"
  echo "STOPSIGNAL SIGQUIT"
  echo 'CMD ["nginx", "-g", "daemon off;"]'
} > "$WORK/nginx/Containerfile"

# redis: redis-server and redis-cli, run as the redis user like the public image.
mkdir -p "$WORK/redis"
{ base_header; apt_layer redis-server; echo "USER redis"; echo "WORKDIR /var/lib/redis"; echo 'CMD ["redis-server"]'; } \
  > "$WORK/redis/Containerfile"

# postgres: the public image's contract that compose.yaml relies on: POSTGRES_USER, POSTGRES_PASSWORD
# and POSTGRES_DB make the cluster and database on the first start (PGDATA empty), password auth over
# TCP, pg_isready on PATH.
mkdir -p "$WORK/postgres"
cat > "$WORK/postgres/entrypoint.sh" <<'EOF'
#!/bin/sh
set -eu
: "${PGDATA:=/var/lib/postgresql/data}" "${POSTGRES_USER:=postgres}" "${POSTGRES_DB:=$POSTGRES_USER}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  [ -n "${POSTGRES_PASSWORD:-}" ] || { echo "POSTGRES_PASSWORD is required" >&2; exit 1; }
  pw="$(mktemp)"; printf '%s' "$POSTGRES_PASSWORD" > "$pw"
  initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pw" --auth-local=trust --auth-host=scram-sha-256 \
    --encoding=UTF8 --locale=C.UTF-8 >/dev/null
  rm -f "$pw"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  if [ "$POSTGRES_DB" != postgres ]; then
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    createdb -U "$POSTGRES_USER" "$POSTGRES_DB"
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  fi
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
EOF
{
  base_header
  # No cluster at install time: the entrypoint makes one in PGDATA, as the public image does.
  echo "RUN mkdir -p /etc/postgresql-common/createcluster.d \\"
  echo " && echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.d/no-main.conf"
  apt_layer postgresql-15
  echo "ENV PATH=/usr/lib/postgresql/15/bin:\$PATH PGDATA=/var/lib/postgresql/data"
  echo "RUN mkdir -p \"\$PGDATA\" /var/run/postgresql && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql"
  echo "COPY entrypoint.sh /usr/local/bin/docker-entrypoint.sh"
  echo "USER postgres"
  echo "STOPSIGNAL SIGINT"
  echo 'ENTRYPOINT ["/bin/sh", "/usr/local/bin/docker-entrypoint.sh"]'
} > "$WORK/postgres/Containerfile"

# azurite: Azurite from npm at the version tests/servers/package-lock.json pins (hash-checked by
# npm ci), its commands on PATH like the public image.
mkdir -p "$WORK/azurite"
cp "$ROOT/tests/servers/package.json" "$ROOT/tests/servers/package-lock.json" "$WORK/azurite/"
{
  echo "FROM $PREFIX/node:18-$SUITE"
  echo "WORKDIR /opt/azurite"
  echo "COPY package.json package-lock.json ./"
  echo "RUN npm ci --ignore-scripts --no-audit --no-fund --loglevel=error \\"
  echo " && ln -s /opt/azurite/node_modules/.bin/azurite* /usr/local/bin/ && mkdir -p /data"
  echo "WORKDIR /data"
  echo 'CMD ["azurite", "-l", "/data", "--blobHost", "0.0.0.0", "--queueHost", "0.0.0.0", "--tableHost", "0.0.0.0"]'
} > "$WORK/azurite/Containerfile"

build python "3.11-$SUITE"
build node "18-$SUITE"
build nginx "1.22-$SUITE"
build redis "7.0-$SUITE"
build postgres "15-$SUITE"
build azurite 3.37.0

cat > "$WORK/standin.env" <<EOF
# Made by tools/container_bases.sh: the local stand-ins instead of the public images (this machine only).
CONTAINERS_CONF=$conf
CRAG_BASE_IMAGE=$PREFIX/python:3.11-$SUITE
CRAG_NODE_IMAGE=$PREFIX/node:18-$SUITE
CRAG_NGINX_IMAGE=$PREFIX/nginx:1.22-$SUITE
CRAG_REDIS_IMAGE=$PREFIX/redis:7.0-$SUITE
CRAG_POSTGRES_IMAGE=$PREFIX/postgres:15-$SUITE
CRAG_AZURITE_IMAGE=$PREFIX/azurite:3.37.0
EOF
podman images --filter "reference=$PREFIX/*" >&2
echo "stand-ins ready; to use them: set -a; . $WORK/standin.env; set +a" >&2
