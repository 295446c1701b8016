# hangdesk watch probe: the cheap read of one node, once per watch period.
#
# POSIX sh, after hangdesk/probelib.sh (the frames, the files a glob names). Settings come from
# HD_* variables the caller puts in front of both as shell-quoted assignments; every value is
# used as data ("$VAR"), never eval'd. Frames:
#   ps               "pid stat etimes args" of the processes matching HD_PATTERN (capped)
#   log.<n>.path     the path of a log file matching HD_LOG_GLOBS
#   log.<n>          its last HD_TAIL_BYTES bytes
#   tree             "pid ppid" of each matched process (HD_STACKS=1 only)
#   stack.<pid>      its `py-spy dump` (HD_STACKS=1 only: while the job has no first step)
#   errors           what failed
# Every external command is bounded by `timeout`.

[ -n "${HD_PATTERN+x}" ] || HD_PATTERN='torchrun|train[A-Za-z0-9_]*[.]py'
[ -n "${HD_LOG_GLOBS+x}" ] || HD_LOG_GLOBS=''
[ -n "${HD_TAIL_BYTES+x}" ] || HD_TAIL_BYTES=16384
[ -n "${HD_MAX_FILES+x}" ] || HD_MAX_FILES=64
[ -n "${HD_MAX_PROCS+x}" ] || HD_MAX_PROCS=256
[ -n "${HD_CMD_TIMEOUT+x}" ] || HD_CMD_TIMEOUT=5
[ -n "${HD_NONCE+x}" ] || HD_NONCE=standalone
[ -n "${HD_STACKS+x}" ] || HD_STACKS=0
[ -n "${HD_PYSPY+x}" ] || HD_PYSPY='py-spy'

hdw_error() { # text
	printf '%s\n' "$1" >>"$HD_DIR/errors"
}

hdw_processes() {
	timeout -k 1 "$HD_CMD_TIMEOUT" ps -eo pid=,stat=,etimes=,args= >"$HD_DIR/all" 2>"$HD_DIR/err" ||
		hdw_error "ps: $(head -c 500 "$HD_DIR/err")"
	# The command line only (fields 4..); never this script or its parent.
	HD_PATTERN=$HD_PATTERN timeout -k 1 "$HD_CMD_TIMEOUT" awk -v self="$$" -v parent="$PPID" \
		-v max="$HD_MAX_PROCS" '
		{
			args = $0
			sub(/^ *[0-9]+ +[^ ]+ +[0-9]+ /, "", args)
			if ($1 == self || $1 == parent) next
			if (args ~ ENVIRON["HD_PATTERN"] && ++n <= max) print substr($0, 1, 300)
		}' "$HD_DIR/all" >"$HD_DIR/ps" 2>"$HD_DIR/err" ||
		hdw_error "process_pattern: $(head -c 500 "$HD_DIR/err")"
	hd_frame ps "$HD_DIR/ps"
}

hdw_log() { # n path: the file's last HD_TAIL_BYTES bytes, and its path
	if timeout -k 1 "$HD_CMD_TIMEOUT" tail -c "$HD_TAIL_BYTES" "$2" >"$HD_DIR/tail" \
		2>"$HD_DIR/err"; then
		printf '%s' "$2" >"$HD_DIR/path"
		hd_frame "log.$1.path" "$HD_DIR/path"
		hd_frame "log.$1" "$HD_DIR/tail"
	else
		hdw_error "logs: $2: $(head -c 300 "$HD_DIR/err")"
	fi
}

hdw_stacks() {
	# Where each process stands while no first step came: init or not (watch/progress.py).
	: >"$HD_DIR/tree"
	while read -r _p _rest; do
		case $_p in '' | *[!0-9]*) continue ;; esac
		_pp=$(timeout -k 1 "$HD_CMD_TIMEOUT" ps -o ppid= -p "$_p" 2>/dev/null)
		printf '%s %s\n' "$_p" "${_pp##* }" >>"$HD_DIR/tree"
		if timeout -k 1 "$HD_CMD_TIMEOUT" "$HD_PYSPY" dump --pid "$_p" >"$HD_DIR/stack" \
			2>"$HD_DIR/err"; then
			hd_frame "stack.$_p" "$HD_DIR/stack"
		else
			hdw_error "py-spy $_p: $(head -c 300 "$HD_DIR/err")"
		fi
	done <"$HD_DIR/ps"
	hd_frame tree "$HD_DIR/tree"
}

hdw_logs() {
	hd_each_file logs "$HD_LOG_GLOBS" hdw_log ||
		hdw_error "logs: more than $HD_MAX_FILES files match; the rest were skipped"
}

hdw_main() {
	hd_begin hdwatch || return 1
	hd_remove_on_exit
	hdw_processes
	[ "$HD_STACKS" = 1 ] && hdw_stacks
	hdw_logs
	[ -f "$HD_DIR/errors" ] && hd_frame errors "$HD_DIR/errors"
	hd_end
}

hdw_main </dev/null
