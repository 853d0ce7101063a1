# shellcheck shell=bash
# common.sh - shell functions that run.sh, run_ha.sh and load.sh share (sourced, not run).

# Whether something accepts TCP connections on $1:$2.
port_taken() {
    # shellcheck disable=SC2016 # the inner bash expands them
    timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null
}

# Splits the listen address $1 (HOST:PORT, [v6]:PORT) into host and port, and sets
# probe_host to where a client reaches it: a wildcard address is probed on loopback.
# shellcheck disable=SC2034 # host, port and probe_host are for the caller
listen_split() {
    host=${1%:*}
    port=${1##*:}
    probe_host=${host#[}
    probe_host=${probe_host%]}
    case $probe_host in
    "" | 0.0.0.0) probe_host=127.0.0.1 ;;
    ::) probe_host=::1 ;;
    esac
}
