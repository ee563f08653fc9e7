#!/usr/bin/env bash
# citus-up-device: a throwaway Citus 13.2.2 cluster (1 coordinator + N workers on localhost) on
# the PostgreSQL 15 bundle that .device/pg-up unpacks into /tmp/pg15, for the GPU machine: no
# system PostgreSQL, no package registry, no apt-get.  The same interface and output as
# ../shared/citus/citus-up, so that bench/kmeans_citus_bench.py uses it through GPUCLUST_CITUS_UP.
#
#   citus-up-device [--workers N] [--port P] [--extension NAME ...] [--set NAME=VALUE ...]
#                   [--preload NAME ...]
#   citus-up-device --down [DIR | --port P]       (what citus-down-device runs)
#
# From the repository root, after `source .device/pg-up && make && make install`:
#
#   eval "$(.device/citus-up-device --extension gpuclust --preload gpuclust)"
#   psql -c 'SELECT * FROM pg_dist_node'
#   .device/citus-down-device                     # uses $CITUS_DIR
#
# What it does:
#  1. Finds the PostgreSQL 15 installation through $PG_CONFIG (else /tmp/pg15/bin/pg_config) and
#     copies Citus's .so, .control and .sql files from citus-13.2.2-pg15.tar.xz (in citus/ beside
#     this script, $CITUS_BUNDLE_DIR, .device/citus or ../shared/citus) into its pkglibdir and
#     sharedir/extension, once (again when the bundle's citus.so differs).  Citus was built
#     against Debian's 15.20, so on an older 15.x it builds and preloads citus_pg15_compat.so
#     (below) before citus.
#  2. Citus's libraries need libcurl, libpq, libssl, liblz4 and libzstd, and those what they need.
#     The bundle's libdir gives libpq; every other library that ldd reports missing (and only
#     those: nothing of the system's is replaced) is taken from citus-deps.tar.xz beside the
#     Citus bundle (Debian 12's builds of the libraries and their dependencies) into
#     <pkglibdir>/citus-deps.  The servers run with LD_LIBRARY_PATH = that folder, the bundle's
#     libdir and .device/lib (copied under /tmp when the server's OS user cannot read it there).
#  3. Picks the first free ports from --port P (default $CITUS_PORT, else 9700): P..P+N.
#  4. As root, runs the servers as the ordinary OS user pg-up uses ($PGRUN_USER, else pgrun;
#     created when missing), as another user as that user: initdb -A trust -U postgres of a
#     coordinator and N workers under a fresh ${TMPDIR:-/tmp}/citus-P-XXXXXX, with
#     shared_preload_libraries = 'citus' and the --preload libraries (also from $CITUS_PRELOAD,
#     comma-separated; e.g. gpuclust for its GPU service), durability off, starts them, CREATE
#     EXTENSION citus on each, adds the workers, then CREATE EXTENSION of each --extension on
#     the coordinator (Citus propagates it) and checks every worker has it.
#  5. Prints, on stdout, the lines citus-up prints (`export PGHOST=...` etc.); progress and the
#     nodes go to stderr.  On any failure it prints the logs' tails, stops what it started and
#     removes the folder (CITUS_KEEP_ON_FAIL=1 keeps it).
#
# The tracked copy of this script is bench/citus_up_device.sh; .device/citus-up-device is the
# same file (see bench/kmeans_citus_bench.py for the GPU machine's command line).
set -euo pipefail

HERE=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
SELF=$(readlink -f "$0")
die() { echo "citus-up-device: error: $*" >&2; exit 1; }
say() { echo "citus-up-device: $*" >&2; }

usage() { sed -n '2,12p' "$SELF" | sed 's/^# \{0,1\}//'; }

PG_CONFIG=${PG_CONFIG:-/tmp/pg15/bin/pg_config}
[ -x "$PG_CONFIG" ] || PG_CONFIG=$(command -v pg_config || true)
[ -n "$PG_CONFIG" ] && [ -x "$PG_CONFIG" ] || die "no pg_config: source .device/pg-up first (or set PG_CONFIG)"
PGBIN=$("$PG_CONFIG" --bindir)
PGLIBDIR=$("$PG_CONFIG" --libdir)
PGPKGLIB=$("$PG_CONFIG" --pkglibdir)
PGEXT=$("$PG_CONFIG" --sharedir)/extension
PGVER=$("$PG_CONFIG" --version)
OSUSER=${PGRUN_USER:-pgrun}
[ "$(id -u)" -eq 0 ] || OSUSER=$(id -un)

# run a command as the servers' OS user, from a folder it can read, with the servers' libraries
as_pg() {
    if [ "$(id -un)" = "$OSUSER" ]; then
        (cd / && env LD_LIBRARY_PATH="$SERVER_LIBS" "$@")
    else
        (cd / && su -s /bin/sh "$OSUSER" -c "$(printf '%q ' env LD_LIBRARY_PATH="$SERVER_LIBS" "$@")")
    fi
}
SERVER_LIBS="$PGLIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# ---------------------------------------------------------------- --down
if [ "${1:-}" = "--down" ]; then
    shift
    DIR=; PORT=
    while [ $# -gt 0 ]; do
        case $1 in
            --port|-p) [ $# -ge 2 ] || die "$1 needs a value"; PORT=$2; shift 2 ;;
            --port=*) PORT=${1#*=}; shift ;;
            -*) die "unknown option $1" ;;
            *) DIR=$1; shift ;;
        esac
    done
    if [ -z "$DIR" ] && [ -z "$PORT" ] && [ -n "${CITUS_DIR:-}" ]; then DIR=$CITUS_DIR; fi
    if [ -z "$DIR" ]; then
        PORT=${PORT:-${CITUS_PORT:-9700}}
        for f in "${TMPDIR:-/tmp}"/citus-"$PORT"-*/cluster.env; do
            [ -f "$f" ] && grep -qx "CITUS_PORT=$PORT" "$f" && DIR=$(dirname "$f")
        done
        [ -n "$DIR" ] || die "no cluster for port $PORT under ${TMPDIR:-/tmp} (give its folder)"
    fi
    [ -f "$DIR/cluster.env" ] || die "$DIR is not a citus-up-device cluster folder (no cluster.env)"
    SERVER_LIBS=$(sed -n 's/^CITUS_LIBS=//p' "$DIR/cluster.env")
    rc=0
    for n in $(sed -n 's/^CITUS_NODES="\(.*\)"$/\1/p' "$DIR/cluster.env"); do
        [[ $n =~ ^(coord|worker[0-9]+)$ ]] || die "odd node name '$n' in $DIR/cluster.env"
        [ -f "$DIR/$n/postmaster.pid" ] || continue
        if as_pg "$PGBIN/pg_ctl" -D "$DIR/$n" -m fast -w -t 30 stop >/dev/null 2>&1 ||
            as_pg "$PGBIN/pg_ctl" -D "$DIR/$n" -m immediate -w -t 30 stop >/dev/null 2>&1; then
            say "stopped $n"
        else
            say "could not stop $n ($DIR/$n)"; rc=1
        fi
    done
    if [ $rc -eq 0 ]; then rm -rf "$DIR"; say "removed $DIR"; else say "kept $DIR"; fi
    exit $rc
fi

# ---------------------------------------------------------------- arguments
WORKERS=2
PORT=${CITUS_PORT:-9700}
EXTS=()
SETS=()
PRELOAD=()
[ -n "${CITUS_PRELOAD:-}" ] && IFS=, read -r -a PRELOAD <<<"$CITUS_PRELOAD"
while [ $# -gt 0 ]; do
    case $1 in
        -h|--help) usage; exit 0 ;;
        --workers|-w) [ $# -ge 2 ] || die "$1 needs a value"; WORKERS=$2; shift 2 ;;
        --workers=*) WORKERS=${1#*=}; shift ;;
        --port|-p) [ $# -ge 2 ] || die "$1 needs a value"; PORT=$2; shift 2 ;;
        --port=*) PORT=${1#*=}; shift ;;
        --extension|-e)
            shift; [ $# -ge 1 ] && [ "${1#-}" = "$1" ] || die "--extension needs a name"
            while [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; do
                IFS=, read -r -a _e <<<"$1"; EXTS+=("${_e[@]}"); shift
            done ;;
        --extension=*) IFS=, read -r -a _e <<<"${1#*=}"; EXTS+=("${_e[@]}"); shift ;;
        --preload) [ $# -ge 2 ] || die "--preload needs a name"; IFS=, read -r -a _e <<<"$2"; PRELOAD+=("${_e[@]}"); shift 2 ;;
        --preload=*) IFS=, read -r -a _e <<<"${1#*=}"; PRELOAD+=("${_e[@]}"); shift ;;
        --set) [ $# -ge 2 ] || die "--set needs NAME=VALUE"; SETS+=("$2"); shift 2 ;;
        --set=*) SETS+=("${1#*=}"); shift ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
done
[[ $WORKERS =~ ^[0-9]+$ ]] && [ "$WORKERS" -le 32 ] || die "--workers must be an integer 0..32 (got '$WORKERS')"
[[ $PORT =~ ^[0-9]+$ ]] && [ "$PORT" -ge 1024 ] && [ $((PORT + WORKERS)) -le 65535 ] \
    || die "--port must be an integer 1024..$((65535 - WORKERS)) (got '$PORT')"
for e in "${EXTS[@]}" "${PRELOAD[@]}"; do
    [[ $e =~ ^[A-Za-z_][A-Za-z0-9_-]*$ ]] || die "bad extension or library name '$e'"
done
for s in "${SETS[@]}"; do
    [[ $s =~ ^[A-Za-z_][A-Za-z0-9_.]*=.*$ ]] || die "bad --set '$s' (want NAME=VALUE)"
done
[[ $PGVER =~ ^PostgreSQL\ 15\. ]] || die "Citus 13.2.2 here is built for PostgreSQL 15, $PG_CONFIG is $PGVER"
for b in postgres initdb pg_ctl psql; do [ -x "$PGBIN/$b" ] || die "$PGBIN/$b missing"; done

if [ "$(id -u)" -eq 0 ] && ! id "$OSUSER" >/dev/null 2>&1; then
    useradd -m "$OSUSER" || die "could not create the OS user $OSUSER"
fi

# ---------------------------------------------------------------- Citus's files
find_file() {   # find_file NAME: the first of the places a bundle may be
    local d
    for d in "${CITUS_BUNDLE_DIR:-}" "$HERE/citus" "$HERE/../.device/citus" "$HERE/../../shared/citus" \
             "$HERE/../shared/citus"; do
        [ -n "$d" ] && [ -f "$d/$1" ] && { echo "$d/$1"; return 0; }
    done
    return 1
}
BUNDLE=$(find_file citus-13.2.2-pg15.tar.xz) || die "citus-13.2.2-pg15.tar.xz not found (copy ../shared/citus/ into .device/citus/)"
if [ -f "$BUNDLE.sha256" ] && command -v sha256sum >/dev/null; then
    (cd "$(dirname "$BUNDLE")" && sha256sum -c --quiet "$(basename "$BUNDLE").sha256") || die "checksum mismatch for $BUNDLE"
fi
STAGE=$(mktemp -d "${TMPDIR:-/tmp}/citus-stage-XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
tar -xJf "$BUNDLE" -C "$STAGE" --no-same-owner
SRCLIB=$STAGE/usr/lib/postgresql/15/lib
SRCEXT=$STAGE/usr/share/postgresql/15/extension
if ! cmp -s "$SRCLIB/citus.so" "$PGPKGLIB/citus.so" || [ ! -f "$PGEXT/citus.control" ]; then
    say "installing Citus 13.2.2 into $PGPKGLIB and $PGEXT"
    cp -r "$SRCLIB/." "$PGPKGLIB/" && cp "$SRCEXT/"* "$PGEXT/" || die "could not write into $PGPKGLIB or $PGEXT"
fi
chmod -R a+rX "$PGPKGLIB/citus.so" "$PGPKGLIB/citus_columnar.so" "$PGPKGLIB/citus_decoders" 2>/dev/null || true

# Citus 13.2.2 was built against Debian's PostgreSQL 15.20, whose headers made two functions out
# of what 15.18's are macros or do not have: DatumGetHeapTupleHeader and heap_datum_check (the
# check of a versioned composite datum, which 15.18 never makes).  On a server without them a
# small library loaded before citus gives 15.18's meaning to both; it adds no hook, so citus
# still finds itself first.
COMPAT=
if ! { command -v nm >/dev/null && nm -D --defined-only "$PGBIN/postgres" | grep -qw heap_datum_check; }; then
    COMPAT=citus_pg15_compat
    cat > "$STAGE/$COMPAT.c" <<'CEOF'
/* What Citus built against PostgreSQL 15.20 needs of an older 15.x server (citus-up-device). */
#include "postgres.h"
#include "fmgr.h"
#include "access/htup_details.h"

PG_MODULE_MAGIC;

#undef DatumGetHeapTupleHeader
extern HeapTupleHeader DatumGetHeapTupleHeader(Datum d);
extern void heap_datum_check(HeapTupleHeader tup, TupleDesc tupleDesc);

/* 15.18's macro: the detoasted composite datum */
HeapTupleHeader
DatumGetHeapTupleHeader(Datum d)
{
	return (HeapTupleHeader) PG_DETOAST_DATUM(d);
}

/* called only for a versioned composite datum, which this server never makes */
void
heap_datum_check(HeapTupleHeader tup, TupleDesc tupleDesc)
{
}
CEOF
    CC=$("$PG_CONFIG" --cc 2>/dev/null || echo cc)
    command -v "${CC%% *}" >/dev/null || CC=cc
    $CC -O2 -fPIC -shared -I"$("$PG_CONFIG" --includedir-server)" -o "$STAGE/$COMPAT.so" "$STAGE/$COMPAT.c" \
        || die "could not build $COMPAT.so (Citus needs it on $PGVER)"
    cp "$STAGE/$COMPAT.so" "$PGPKGLIB/" && chmod a+r "$PGPKGLIB/$COMPAT.so"
fi

# ---------------------------------------------------------------- libraries
DEPDIR=$PGPKGLIB/citus-deps
mkdir -p "$DEPDIR" && chmod a+rx "$DEPDIR" && rm -f "$DEPDIR"/*
SERVER_LIBS="$DEPDIR:$PGLIBDIR"
DEVLIB=${GPUCLUST_DEVICE_LIB:-$(cd "$HERE/.." && pwd)/.device/lib}
if [ -d "$DEVLIB" ]; then
    SERVER_LIBS="$SERVER_LIBS:$DEVLIB"
    if ! as_pg test -r "$DEVLIB/." 2>/dev/null || ! as_pg test -x "$DEVLIB" 2>/dev/null; then
        # the repository is not readable by the servers' user (e.g. under /root): a copy they can read
        mkdir -p "$PGPKGLIB/device-lib" && cp -a "$DEVLIB/." "$PGPKGLIB/device-lib/" && chmod -R a+rX "$PGPKGLIB/device-lib"
        SERVER_LIBS="$DEPDIR:$PGLIBDIR:$PGPKGLIB/device-lib"
    fi
fi
SERVER_LIBS="$SERVER_LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
missing_libs() {
    env LD_LIBRARY_PATH="$SERVER_LIBS" ldd "$PGPKGLIB/citus.so" "$PGPKGLIB/citus_columnar.so" 2>/dev/null \
        | awk '/not found/ {print $1}' | sort -u
}
miss=$(missing_libs)
if [ -n "$miss" ] || [ -n "${CITUS_DEPS_ALL:-}" ]; then
    DEPS=$(find_file citus-deps.tar.xz) || die "Citus needs $(echo $miss) and there is no citus-deps.tar.xz beside the Citus bundle"
    mkdir -p "$STAGE/deps" && tar -xJf "$DEPS" -C "$STAGE/deps" --no-same-owner
    if [ -n "${CITUS_DEPS_ALL:-}" ]; then
        # (for checking the shipped libraries themselves: take all of them)
        cp "$STAGE/deps/"* "$DEPDIR/"
    fi
    for _round in 1 2 3 4 5 6 7 8; do
        miss=$(missing_libs)
        [ -n "$miss" ] || break
        for l in $miss; do
            [ -f "$STAGE/deps/$l" ] || die "Citus needs $l, which neither the system nor $DEPS has"
            cp "$STAGE/deps/$l" "$DEPDIR/"
        done
    done
    [ -z "$(missing_libs)" ] || die "still missing: $(missing_libs | tr '\n' ' ')"
    chmod a+r "$DEPDIR/"* 2>/dev/null || true
    say "libraries taken from $(basename "$DEPS"): $(cd "$DEPDIR" && ls | tr '\n' ' ')"
fi
for e in "${EXTS[@]}"; do
    [ -f "$PGEXT/$e.control" ] || die "extension '$e' is not installed ($PGEXT/$e.control missing): make install first"
done
for e in "${PRELOAD[@]}"; do
    [ -f "$PGPKGLIB/$e.so" ] || die "library '$e' is not installed ($PGPKGLIB/$e.so missing): make install first"
done

# ---------------------------------------------------------------- ports
port_taken() {
    if command -v ss >/dev/null 2>&1; then
        [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ] && return 0
    fi
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    return 1
}
for _try in $(seq 1 50); do
    busy=
    for i in $(seq 0 "$WORKERS"); do port_taken $((PORT + i)) && { busy=1; break; }; done
    [ -z "$busy" ] && break
    PORT=$((PORT + WORKERS + 1))
    [ $((PORT + WORKERS)) -le 65535 ] || die "no $((WORKERS + 1)) free ports found"
done
[ -z "$busy" ] || die "no $((WORKERS + 1)) free ports found from the one asked for"

# ---------------------------------------------------------------- cluster
D=$(mktemp -d "${TMPDIR:-/tmp}/citus-$PORT-XXXXXX")
chmod 755 "$D"
[ "$(id -u)" -eq 0 ] && chown "$OSUSER:" "$D"
NODES=(coord); for i in $(seq 1 "$WORKERS"); do NODES+=("worker$i"); done
cat > "$D/cluster.env" <<EOF
# written by citus-up-device; read by citus-up-device --down
CITUS_DIR=$D
CITUS_PORT=$PORT
CITUS_WORKERS=$WORKERS
CITUS_NODES="${NODES[*]}"
CITUS_LIBS=$SERVER_LIBS
EOF
started=()
cleanup() {
    local rc=$?
    rm -rf "$STAGE"
    [ $rc -eq 0 ] && return
    say "failed (exit $rc); stopping what was started"
    for n in "${NODES[@]}"; do
        [ -f "$D/$n.log" ] && { echo "---- tail of $D/$n.log" >&2; tail -n 15 "$D/$n.log" >&2; }
    done
    for n in "${started[@]}"; do
        as_pg "$PGBIN/pg_ctl" -D "$D/$n" -m immediate -w stop >/dev/null 2>&1 || true
    done
    if [ -n "${CITUS_KEEP_ON_FAIL:-}" ]; then say "kept $D"; else rm -rf "$D"; fi
}
trap cleanup EXIT
psql_on() {   # psql_on port sql...
    local port=$1; shift
    as_pg "$PGBIN/psql" -X -q -A -t -h "$D" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 "$@"
}
preload=${COMPAT:+$COMPAT,}citus
for e in "${PRELOAD[@]}"; do [ "$e" = citus ] || preload="$preload,$e"; done
for idx in "${!NODES[@]}"; do
    n=${NODES[$idx]}; p=$((PORT + idx))
    as_pg "$PGBIN/initdb" -D "$D/$n" -A trust -U postgres -E UTF8 --no-locale --no-instructions \
        >"$D/$n.initdb.log" 2>&1 || { cat "$D/$n.initdb.log" >&2; die "initdb for $n failed"; }
    {
        echo "# --- citus-up-device"
        echo "port = $p"
        echo "listen_addresses = 'localhost'"
        echo "unix_socket_directories = '$D'"
        echo "shared_preload_libraries = '$preload'"
        echo "citus.enable_statistics_collection = off"
        echo "max_connections = 200"
        echo "shared_buffers = 1GB"
        echo "work_mem = 256MB"
        echo "max_wal_size = 8GB"
        echo "fsync = off"
        echo "synchronous_commit = off"
        echo "full_page_writes = off"
        echo "log_line_prefix = '%m [%p] $n '"
        for s in "${SETS[@]}"; do echo "${s%%=*} = ${s#*=}"; done
    } | as_pg tee -a "$D/$n/postgresql.conf" >/dev/null
    say "starting $n on port $p"
    as_pg "$PGBIN/pg_ctl" -D "$D/$n" -l "$D/$n.log" -w -t 60 start >/dev/null || die "$n did not start (see $D/$n.log)"
    started+=("$n")
    psql_on $p -c "CREATE EXTENSION citus" >/dev/null
done
psql_on $PORT -c "SELECT citus_set_coordinator_host('localhost', $PORT)" >/dev/null
for i in $(seq 1 "$WORKERS"); do
    psql_on $PORT -c "SELECT citus_add_node('localhost', $((PORT + i)))" >/dev/null
done
for e in "${EXTS[@]}"; do
    say "CREATE EXTENSION $e"
    psql_on $PORT -c "CREATE EXTENSION IF NOT EXISTS \"$e\" CASCADE" >/dev/null
    for i in $(seq 1 "$WORKERS"); do
        v=$(psql_on $((PORT + i)) -c "SELECT extversion FROM pg_extension WHERE extname = '$e'")
        [ -n "$v" ] || die "extension $e was not propagated to worker$i"
    done
done
echo "--- nodes (pg_dist_node on the coordinator), shared_preload_libraries = '$preload':" >&2
psql_on $PORT -F ' ' -c "SELECT nodeid, nodename||':'||nodeport, CASE WHEN groupid = 0 THEN 'coordinator' ELSE 'worker' END FROM pg_dist_node ORDER BY nodeid" >&2
echo "--- $(psql_on $PORT -c "SELECT citus_version()" | cut -d, -f1)" >&2

DOWN=$HERE/citus-down-device
[ -x "$DOWN" ] || DOWN="$SELF --down"
cat <<EOF
# Citus cluster up: coordinator localhost:$PORT, workers ${WORKERS} (ports $((PORT + 1))..$((PORT + WORKERS)))
# cluster dir (data dirs, sockets, logs): $D
# stop it with: $DOWN $D
export PGHOST=$D
export PGPORT=$PORT
export PGUSER=postgres
export PGDATABASE=postgres
export CITUS_DIR=$D
EOF
