# hangdesk watch probe: the cheap read of one node, once per watch period.
#
# POSIX sh. Settings come from HD_* variables the caller puts in front of this file as
# shell-quoted assignments; every value is used as data ("$VAR"), never eval'd.
# Output: "HDPROBE1 <nonce>", then frames "HD1 <key> <size>\n" + <size> bytes (the snapshot
# probe's format, read by collectors/remote.py), ending with "HD1 end 0". Frames:
#   ps               "pid stat etimes args" of the processes matching HD_PATTERN (capped)
#   log.<n>.path     the path of a log file matching HD_LOG_GLOBS
#   log.<n>          its last HD_TAIL_BYTES bytes
#   errors           what failed
# Every external command is bounded by `timeout`.

[ -n "${HD_PATTERN+x}" ] || HD_PATTERN='torchrun|train[A-Za-z0-9_]*[.]py'
[ -n "${HD_LOG_GLOBS+x}" ] || HD_LOG_GLOBS=''
[ -n "${HD_TAIL_BYTES+x}" ] || HD_TAIL_BYTES=16384
[ -n "${HD_MAX_FILES+x}" ] || HD_MAX_FILES=64
[ -n "${HD_MAX_PROCS+x}" ] || HD_MAX_PROCS=256
[ -n "${HD_CMD_TIMEOUT+x}" ] || HD_CMD_TIMEOUT=5
[ -n "${HD_NONCE+x}" ] || HD_NONCE=standalone

hdw_emit() { # key file
	_s=$(wc -c <"$2")
	printf 'HD1 %s %s\n' "$1" "${_s##* }"
	cat "$2"
}

hdw_error() { # text
	printf '%s\n' "$1" >>"$HDW_DIR/errors"
}

hdw_processes() {
	timeout -k 1 "$HD_CMD_TIMEOUT" ps -eo pid=,stat=,etimes=,args= >"$HDW_DIR/all" 2>"$HDW_DIR/err" ||
		hdw_error "ps: $(head -c 500 "$HDW_DIR/err")"
	# The command line only (fields 4..); never this script or its parent.
	HD_PATTERN=$HD_PATTERN timeout -k 1 "$HD_CMD_TIMEOUT" awk -v self="$$" -v parent="$PPID" \
		-v max="$HD_MAX_PROCS" '
		{
			args = $0
			sub(/^ *[0-9]+ +[^ ]+ +[0-9]+ /, "", args)
			if ($1 == self || $1 == parent) next
			if (args ~ ENVIRON["HD_PATTERN"] && ++n <= max) print substr($0, 1, 300)
		}' "$HDW_DIR/all" >"$HDW_DIR/ps" 2>"$HDW_DIR/err" ||
		hdw_error "process_pattern: $(head -c 500 "$HDW_DIR/err")"
	hdw_emit ps "$HDW_DIR/ps"
}

hdw_logs() {
	_n=0
	printf '%s\n' "$HD_LOG_GLOBS" >"$HDW_DIR/globs"
	while IFS= read -r _g; do
		[ -n "$_g" ] || continue
		# Glob expansion only (IFS empty: no word splitting, nothing re-parsed).
		set +f
		_saved_ifs=$IFS
		IFS=''
		# shellcheck disable=SC2086  # expanding the glob is the point
		set -- $_g
		IFS=$_saved_ifs
		set -f
		for _f in "$@"; do
			[ -f "$_f" ] || continue
			_n=$((_n + 1))
			if [ "$_n" -gt "$HD_MAX_FILES" ]; then
				hdw_error "logs: more than $HD_MAX_FILES files match; the rest were skipped"
				return 0
			fi
			if timeout -k 1 "$HD_CMD_TIMEOUT" tail -c "$HD_TAIL_BYTES" "$_f" >"$HDW_DIR/tail" \
				2>"$HDW_DIR/err"; then
				printf '%s' "$_f" >"$HDW_DIR/path"
				hdw_emit "log.$_n.path" "$HDW_DIR/path"
				hdw_emit "log.$_n" "$HDW_DIR/tail"
			else
				hdw_error "logs: $_f: $(head -c 300 "$HDW_DIR/err")"
			fi
		done
	done <"$HDW_DIR/globs"
}

hdw_main() {
	set -f
	umask 077
	export LC_ALL=C
	HDW_DIR=$(mktemp -d "${TMPDIR:-/tmp}/hdwatch.XXXXXX" 2>/dev/null ||
		mktemp -d /dev/shm/hdwatch.XXXXXX 2>/dev/null)
	printf 'HDPROBE1 %s\n' "$HD_NONCE"
	if [ -z "$HDW_DIR" ]; then
		printf 'no writable temp dir\n' >&2
		return 1
	fi
	trap 'rm -rf "$HDW_DIR"' EXIT
	trap 'rm -rf "$HDW_DIR"; exit 143' TERM INT HUP
	hdw_processes
	hdw_logs
	[ -f "$HDW_DIR/errors" ] && hdw_emit errors "$HDW_DIR/errors"
	printf 'HD1 end 0\n'
}

hdw_main </dev/null
