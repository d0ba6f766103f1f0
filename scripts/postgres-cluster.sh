#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests (docs/storage.md, "PostgreSQL"):
#   scripts/postgres-cluster.sh start DIR   makes a cluster in DIR (initdb), starts it on a free
#                                            loopback port and prints its URL on stdout:
#                                            postgres://signfleet@127.0.0.1:PORT/signfleet
#   scripts/postgres-cluster.sh stop DIR    stops it (immediate shutdown) and removes DIR.
#   scripts/postgres-cluster.sh halt DIR    stops it (fast shutdown) and keeps DIR.
#   scripts/postgres-cluster.sh resume DIR  starts the cluster in DIR again on its port (DIR/port),
#                                            e.g. after `halt` or after its postmaster was killed
#                                            (a crash it recovers from), and prints its URL.
# The fleet launcher uses it for `coordinator: {store: postgres}` scenarios (docs/scenarios.md),
# with DIR the run directory's postgres/.
# PostgreSQL refuses to run as root: as root the cluster runs as the `postgres` user (made by
# Debian's package), or as a system user `signfleet-pg` created on first use. Trust
# authentication on loopback only, and no fsync: a test cluster, never a store to keep.
set -euo pipefail

PGBIN=${SIGNFLEET_PGBIN:-}
if [ -z "$PGBIN" ]; then
    for candidate in /usr/lib/postgresql/*/bin; do
        [ -x "$candidate/initdb" ] && PGBIN=$candidate
    done
fi
if [ -z "$PGBIN" ] || [ ! -x "$PGBIN/initdb" ]; then
    echo "error: PostgreSQL's initdb was not found (install Debian's postgresql: scripts/install-deps.sh)" >&2
    exit 2
fi

as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u "$OWNER" -- "$@"
    else
        "$@"
    fi
}

OWNER=$(id -un)
if [ "$(id -u)" -eq 0 ]; then
    if id postgres >/dev/null 2>&1; then
        OWNER=postgres
    else
        id signfleet-pg >/dev/null 2>&1 || useradd --system --no-create-home signfleet-pg
        OWNER=signfleet-pg
    fi
fi

command=${1:-}
dir=${2:-}
if [ -z "$command" ] || [ -z "$dir" ]; then
    echo "usage: $0 start|stop|halt|resume DIR" >&2
    exit 2
fi

# pg_ctl starts the server through `sh -c` with DIR and the options inside double quotes: a DIR
# that could break out of them is refused.
case "$dir" in
*'"'* | *'`'* | *'$'* | *'\'* | *$'\n'*)
    echo "error: $0 refuses a directory containing \", \`, \$, a backslash or a newline: $dir" >&2
    exit 2
    ;;
esac

# fsync off (a killed process loses nothing the OS holds; power loss is not simulated), but
# synchronous_commit on: a commit the coordinator acknowledged is in the OS before the ack, so a
# `restart_postgres: kill` is a crash the store recovers from, not a store that goes back in time.
OPTIONS="-c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c fsync=off -c synchronous_commit=on -c full_page_writes=off -c max_connections=200"

case "$command" in
start)
    mkdir -p "$dir"
    if [ "$(id -u)" -eq 0 ]; then chown "$OWNER" "$dir"; fi
    as_owner "$PGBIN/initdb" -D "$dir/data" --username=signfleet --auth=trust --encoding=UTF8 --no-locale >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
    # A free port: bind port 0, read it, let it go. Another process could take it before
    # PostgreSQL binds it, so a failed start tries again with another port.
    for attempt in 1 2 3 4 5; do
        port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
        if as_owner "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
            -o "-p $port $OPTIONS" \
            >/dev/null 2>&1; then
            as_owner "$PGBIN/psql" -h 127.0.0.1 -p "$port" -U signfleet -d postgres -q -c "CREATE DATABASE signfleet" >/dev/null
            echo "$port" >"$dir/port"
            echo "postgres://signfleet@127.0.0.1:$port/signfleet"
            exit 0
        fi
    done
    echo "error: PostgreSQL did not start; its log:" >&2
    cat "$dir/server.log" >&2 || true
    exit 1
    ;;
stop)
    if [ -d "$dir/data" ]; then
        as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
halt)
    if [ -d "$dir/data" ]; then
        if ! as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null 2>&1; then
            as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
        fi
        # Still running (pg_ctl reports "no server running" with status 3 once it is down)?
        if as_owner "$PGBIN/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
            echo "error: PostgreSQL in $dir/data did not stop" >&2
            exit 1
        fi
    fi
    ;;
resume)
    if [ ! -d "$dir/data" ] || [ ! -f "$dir/port" ]; then
        echo "error: $dir holds no cluster made by \`$0 start\`" >&2
        exit 2
    fi
    port=$(cat "$dir/port")
    if ! [[ "$port" =~ ^[0-9]{1,5}$ ]]; then
        echo "error: $dir/port holds no port number" >&2
        exit 2
    fi
    # A killed postmaster's last backends may still be exiting: try for up to 30 s.
    for attempt in $(seq 1 60); do
        if as_owner "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start -o "-p $port $OPTIONS" >/dev/null 2>&1; then
            echo "postgres://signfleet@127.0.0.1:$port/signfleet"
            exit 0
        fi
        sleep 0.5
    done
    echo "error: PostgreSQL did not start again on port $port; its log:" >&2
    tail -n 50 "$dir/server.log" >&2 || true
    exit 1
    ;;
*)
    echo "usage: $0 start|stop|halt|resume DIR" >&2
    exit 2
    ;;
esac
