# hangdesk remote probe: gathers the evidence of one node in a single run.
#
# POSIX sh (dash, bash, busybox ash), after hangdesk/probelib.sh (the frames, the temp dir,
# the files a glob names). Settings come from HD_* variables that the caller puts in front of
# both as shell-quoted assignments; every value is used as data ("$VAR"), never eval'd, so a
# pattern or glob cannot run code. Unset settings fall back to defaults, which makes the pair
# runnable on their own:   cat probelib.sh probe.sh | ssh node 'sh -s'
#
# Output on stdout: the line "HDPROBE1 <nonce>", then frames "HD1 <key> <size>\n" followed by
# exactly <size> raw bytes (the bigger ones gzipped when asked: probelib.sh's hd_emit), ending
# with the frame "HD1 end 0".
#
# How: every step runs in the background and writes its artifact into a private temp dir
# ($HD_DIR/w.<key>); once the file is complete it appends "<key> <size>" to $HD_DIR/ready.
# The main shell only ships what is listed there. So slow steps overlap (one py-spy per
# process, all at once), and a probe stopped by its time budget still delivers everything
# that was finished. Every external command is bounded by `timeout`.

[ -n "${HD_PATTERN+x}" ] ||
	HD_PATTERN='torchrun|torch[.]distributed[.](run|launch)|pretrain_[A-Za-z0-9_]*[.]py|megatron|[A-Za-z0-9_]*train[A-Za-z0-9_]*[.]py'
[ -n "${HD_LOG_GLOBS+x}" ] || HD_LOG_GLOBS='/var/log/train/*.log'
[ -n "${HD_FR_GLOBS+x}" ] || HD_FR_GLOBS='/var/log/train/fr/*'
[ -n "${HD_PYSPY+x}" ] || HD_PYSPY='py-spy'
[ -n "${HD_NCCLRAS+x}" ] || HD_NCCLRAS='ncclras'
[ -n "${HD_TAIL_BYTES+x}" ] || HD_TAIL_BYTES=262144
[ -n "${HD_CAP_BYTES+x}" ] || HD_CAP_BYTES=2097152
[ -n "${HD_CMD_TIMEOUT+x}" ] || HD_CMD_TIMEOUT=20
[ -n "${HD_MAX_PROCS+x}" ] || HD_MAX_PROCS=128
[ -n "${HD_MAX_FILES+x}" ] || HD_MAX_FILES=256
[ -n "${HD_NONCE+x}" ] || HD_NONCE=standalone
# The sampling window: seconds of `py-spy record` per process (0: none), samples a second.
[ -n "${HD_SAMPLE_S+x}" ] || HD_SAMPLE_S=2
[ -n "${HD_SAMPLE_RATE+x}" ] || HD_SAMPLE_RATE=50
# A process of the caller's that is no training process (`hangdesk collect` itself), or empty.
[ -n "${HD_SKIP_PID+x}" ] || HD_SKIP_PID=
# How the training processes are chosen: by HD_PATTERN, or (`pids`) exactly the pids in
# HD_PIDS, space-separated (a scheduler named them: Ray's worker actors), whatever they run.
[ -n "${HD_SELECT+x}" ] || HD_SELECT=pattern
[ -n "${HD_PIDS+x}" ] || HD_PIDS=
# The GPU's shape: nvidia-smi sampled every HD_GPU_MS ms for HD_GPU_WINDOW s (0: no sampling).
[ -n "${HD_GPU_MS+x}" ] || HD_GPU_MS=200
[ -n "${HD_GPU_WINDOW+x}" ] || HD_GPU_WINDOW=2
# Frames of HD_ZIP_MIN bytes or more sent gzip-compressed when HD_ZIP=gzip and gzip is here
# (plain otherwise): the console stores them as they come, without compressing them again.
[ -n "${HD_ZIP+x}" ] || HD_ZIP=
[ -n "${HD_ZIP_MIN+x}" ] || HD_ZIP_MIN=2048

# --- plumbing ------------------------------------------------------------------------------

hd_cleanup() {
	trap - EXIT
	if [ -n "${HD_DIR:-}" ] && [ -d "$HD_DIR" ]; then
		# Stop bounded commands still running (their `timeout` has its own process group,
		# so the signal that stopped us did not reach them).
		set +f
		for _b in "$HD_DIR"/.running.*; do
			[ -f "$_b" ] && kill -TERM "${_b##*.running.}" 2>/dev/null
		done
		rm -rf "$HD_DIR"
	fi
}

hd_stopped() { # the time budget is up: ship what is finished, then go
	if [ "${HD_EMITTING:-0}" = 0 ]; then # a half-written frame cannot be continued
		hd_flush
		hd_ship_errors
	fi
	hd_cleanup
	exit 143
}

hd_error() { # step message
	printf '%s: %s\n' "$1" "$2" >>"$HD_DIR/errors"
}

# Run a command under `timeout`; remember its pid while it runs so cleanup can stop it.
hd_bounded() {
	timeout -k 2 "$HD_CMD_TIMEOUT" "$@" &
	_bp=$!
	: >"$HD_DIR/.running.$_bp"
	wait "$_bp"
	_brc=$?
	rm -f "$HD_DIR/.running.$_bp"
	return "$_brc"
}

# hd_publish key [cap end|start]: $HD_DIR/w.<key> is complete, hand it to the emitter.
# With a cap, the file holds at most cap+1 bytes: cut it back to cap bytes (keeping the
# end for tails, the start for heads) and record the truncation.
hd_publish() {
	_pf="$HD_DIR/w.$1"
	_psize=$(hd_size "$_pf")
	if [ -n "${2:-}" ] && [ "$_psize" -gt "$2" ]; then
		if [ "$3" = end ]; then
			tail -c "$2" "$_pf" >"$_pf.cut"
		else
			head -c "$2" "$_pf" >"$_pf.cut"
		fi
		mv -f "$_pf.cut" "$_pf"
		_psize=$2
		: >"$HD_DIR/w.trunc.$1"
		printf 'trunc.%s 0\n' "$1" >>"$HD_DIR/ready"
	fi
	# One short append per artifact: the emitter sees the whole line or none of it.
	printf '%s %s\n' "$1" "$_psize" >>"$HD_DIR/ready"
}

hd_publish_text() { # key text
	printf '%s' "$2" >"$HD_DIR/w.$1"
	hd_publish "$1"
}

hd_flush() { # ship every artifact listed as ready and not shipped yet
	[ -f "$HD_DIR/ready" ] || return 0
	_line=0
	while read -r _key _size; do
		_line=$((_line + 1))
		[ "$_line" -gt "$HD_SHIPPED" ] || continue
		hd_emit "$_key" "$_size" "$HD_DIR/w.$_key"
		HD_SHIPPED=$_line
	done <"$HD_DIR/ready"
}

hd_ship_errors() {
	[ -f "$HD_DIR/errors" ] || return 0
	hd_emit errors "$(hd_size "$HD_DIR/errors")" "$HD_DIR/errors"
}

hd_capture() { # key command...: stdout of a bounded command, its last HD_CAP_BYTES
	_ck=$1
	shift
	_cw="$HD_DIR/w.$_ck"
	hd_bounded "$@" >"$_cw" 2>"$_cw.err"
	_crc=$?
	if [ "$_crc" -eq 0 ]; then
		hd_publish "$_ck" "$HD_CAP_BYTES" end
	else
		hd_error "$_ck" "$* exited $_crc: $(head -c 2000 "$_cw.err")"
	fi
	return "$_crc"
}

hd_spawn() { # name command...: run a step in the background, leave a marker when done
	_name=$1
	shift
	{
		"$@"
		: >"$HD_DIR/.done.$_name"
	} </dev/null &
	HD_SPAWNED=$((HD_SPAWNED + 1))
}

hd_all_done() {
	set +f
	set -- "$HD_DIR"/.done.*
	set -f
	[ -e "$1" ] || set --
	[ "$#" -ge "$HD_SPAWNED" ]
}

# --- the steps -----------------------------------------------------------------------------

hd_processes() {
	_w="$HD_DIR/w.ps"
	ps -eo pid,ppid,stat,etimes,args >"$_w.all" 2>"$_w.err" ||
		hd_error ps "$(head -c 2000 "$_w.err")"
	# Match the command line only (fields 5..), never the probe or its children; or, when
	# the pids are given, exactly those (a pid of no process is simply not listed).
	HD_PATTERN=$HD_PATTERN HD_PIDS=$HD_PIDS awk -v self="$$" -v parent="$PPID" \
		-v skip="$HD_SKIP_PID" -v max="$HD_MAX_PROCS" -v mode="$HD_SELECT" '
		BEGIN { k = split(ENVIRON["HD_PIDS"], given, " "); for (i = 1; i <= k; i++) want[given[i]] = 1 }
		NR == 1 { print; next }
		{
			args = $0
			sub(/^ *[0-9]+ +[0-9]+ +[^ ]+ +[0-9]+ /, "", args)
			if ($1 == self || $2 == self || $1 == parent || $1 == skip) next
			if (mode == "pids") { if (($1 in want) && ++n <= max) print; next }
			if (args ~ ENVIRON["HD_PATTERN"] && ++n <= max) print
		}' "$_w.all" >"$_w" 2>"$_w.err" ||
		hd_error ps "process selection: $(head -c 2000 "$_w.err")"
	awk 'NR > 1 { print $1 }' "$_w" >"$HD_DIR/pids"
	rm -f "$_w.all" "$_w.err"
	hd_publish ps
}

hd_environ() { # pid
	_w="$HD_DIR/w.env.$1"
	hd_bounded head -c "$((HD_CAP_BYTES + 1))" "/proc/$1/environ" >"$_w" 2>"$_w.err" ||
		hd_error "environ.$1" "$(head -c 500 "$_w.err")"
	[ -s "$_w" ] && hd_publish "env.$1" "$HD_CAP_BYTES" start
}

hd_pyspy() { # pid
	_w="$HD_DIR/w.pyspy.$1"
	hd_bounded "$HD_PYSPY" dump --json --pid "$1" >"$_w" 2>"$_w.err"
	_rc=$?
	if [ "$_rc" -eq 0 ] && [ -s "$_w" ]; then
		hd_publish "pyspy.$1"
		return 0
	fi
	if [ "$_rc" -eq 124 ] || [ "$_rc" -eq 137 ]; then
		# A process py-spy cannot read in time will not be readable as text either.
		_why="py-spy dump --json timed out after ${HD_CMD_TIMEOUT}s"
	else
		_why="py-spy dump --json exited $_rc: $(head -c 2000 "$_w.err")"
		hd_bounded "$HD_PYSPY" dump --pid "$1" >"$_w" 2>"$_w.err"
		_rc=$?
		if [ "$_rc" -eq 0 ] && [ -s "$_w" ]; then
			hd_publish "pyspy.$1"
			return 0
		fi
		_why="$_why; text dump exited $_rc: $(head -c 2000 "$_w.err")"
	fi
	hd_publish_text "pyspyerr.$1" "$_why"
	return 1
}

# Where the process spends a few seconds: the straggler is the rank that rarely waits in a
# collective while the others mostly do. Non-blocking (the process is never paused), idle
# threads included (a rank blocked in a collective sleeps in the kernel), per thread.
hd_pyspy_sample() { # pid
	[ "$HD_SAMPLE_S" -gt 0 ] 2>/dev/null || return 0
	_w="$HD_DIR/w.pyspyrec.$1"
	hd_bounded "$HD_PYSPY" record --pid "$1" --duration "$HD_SAMPLE_S" \
		--rate "$HD_SAMPLE_RATE" --format raw --output "$_w" --idle --threads --nonblocking \
		>"$_w.log" 2>&1
	_rc=$?
	if [ "$_rc" -eq 0 ] && [ -s "$_w" ]; then
		hd_publish "pyspyrec.$1" "$HD_CAP_BYTES" start
	else
		hd_error "pyspyrec.$1" "py-spy record exited $_rc: $(tail -c 500 "$_w.log")"
	fi
}

hd_pyspy_both() { # pid: the dump first (the moment), then the window (the spread)
	hd_pyspy "$1" && hd_pyspy_sample "$1"
}

hd_kernel_log() {
	_w="$HD_DIR/w.dmesg"
	for _cmd in "dmesg -T" "dmesg" "journalctl -k --no-pager -n 20000"; do
		# shellcheck disable=SC2086  # constant command strings, split on purpose
		if hd_bounded $_cmd >"$_w" 2>"$_w.err" && [ -s "$_w" ]; then
			hd_publish dmesg "$HD_CAP_BYTES" end
			hd_publish_text dmesg.source "$_cmd"
			return 0
		fi
		hd_error dmesg "$_cmd: $(head -c 500 "$_w.err")"
	done
}

hd_gpus() {
	if ! command -v nvidia-smi >/dev/null 2>&1; then
		hd_publish_text nvsmi.absent 'not installed'
		return 0
	fi
	hd_capture nvsmi nvidia-smi
	hd_capture nvsmi.query nvidia-smi \
		--query-gpu=index,uuid,utilization.gpu,memory.used,memory.total,temperature.gpu \
		--format=csv
	hd_capture nvsmi.apps nvidia-smi \
		--query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv
	[ "$HD_GPU_WINDOW" -gt 0 ] || return 0
	# A few samples over a short window: flat at 100 % (NCCL spinning), 0 % with memory held
	# (the CPU side), or moving. `timeout` ends the loop: its 124 is the expected end.
	_w="$HD_DIR/w.nvsmi.samples"
	timeout -k 1 "$HD_GPU_WINDOW" nvidia-smi \
		--query-gpu=timestamp,index,uuid,utilization.gpu,memory.used,memory.total,power.draw,clocks.sm,ecc.errors.uncorrected.volatile.total \
		--format=csv,nounits -lms "$HD_GPU_MS" >"$_w" 2>"$_w.err"
	if [ -s "$_w" ]; then
		hd_publish nvsmi.samples "$HD_CAP_BYTES" start
	else
		hd_error nvsmi.samples "$(head -c 500 "$_w.err")"
	fi
}

hd_system() {
	hd_capture sys.df_shm df -h /dev/shm
	hd_capture sys.df_root df -h /
	hd_capture sys.loadavg cat /proc/loadavg
	hd_capture sys.free free -m
	hd_capture sys.date date -u +%Y-%m-%dT%H:%M:%SZ
}

hd_shell_init() {
	_w="$HD_DIR/w.shellinit"
	set +f
	set -- /etc/profile /etc/bashrc /etc/bash.bashrc /etc/environment /etc/profile.d/* \
		"$HOME/.bashrc" "$HOME/.bash_profile" "$HOME/.profile"
	set -f
	: >"$_w"
	for _f in "$@"; do
		[ -f "$_f" ] || continue
		hd_bounded grep -H -e NCCL_ -- "$_f" >>"$_w" 2>/dev/null
	done
	hd_publish shellinit "$HD_CAP_BYTES" start
}

# NCCL's RAS (NCCL 2.24+): one query of the job's communicators, asked of the RAS thread of an
# NCCL process on this node (localhost:28028). JSON where the client has -f (2.28.7+), text
# otherwise. Bounded twice: `timeout` ends a client that hangs, `head -c` one that streams
# (RAS's own -t stays under the command's timeout; -t 0 would disable it).
hd_ncclras() {
	command -v "$HD_NCCLRAS" >/dev/null 2>&1 || return 0
	_w="$HD_DIR/w.ncclras"
	_t=5
	if [ "$HD_CMD_TIMEOUT" -le 6 ]; then
		_t=$((HD_CMD_TIMEOUT / 2))
		[ "$_t" -ge 1 ] || _t=1
	fi
	hd_ras_query "$_w" -f json -t "$_t"
	if [ "$_rrc" -ne 0 ] && ! grep -q '{' "$_w" 2>/dev/null &&
		grep -q -i -e option -e usage -e format "$_w.err" 2>/dev/null; then
		hd_ras_query "$_w" -t "$_t" # a client before 2.28.7 knows no -f
	fi
	[ "$_rrc" -eq 0 ] || hd_error ncclras "$HD_NCCLRAS exited $_rrc: $(head -c 500 "$_w.err")"
	[ -s "$_w" ] && hd_publish ncclras "$HD_CAP_BYTES" start
}

hd_ras_query() { # file args...: the client's output in file (capped), its status in $_rrc
	_rf=$1
	shift
	{
		hd_bounded "$HD_NCCLRAS" "$@" 2>"$_rf.err"
		echo "$?" >"$_rf.rc"
	} | head -c "$((HD_CAP_BYTES + 1))" >"$_rf"
	_rrc=$(cat "$_rf.rc" 2>/dev/null)
	[ -n "$_rrc" ] || _rrc=1
}

# hd_files kind cap end|start globs: copy every regular file matching one of the
# newline-separated globs, capped, and publish it with its path.
hd_files() {
	_kind=$1
	_cap=$2
	_keep=$3
	hd_each_file "$_kind" "$4" hd_file ||
		hd_error "$_kind" "more than $HD_MAX_FILES files match; the rest were skipped"
}

hd_file() { # n path: one file of hd_files
	_w="$HD_DIR/w.$_kind.$1"
	if [ "$_keep" = end ]; then
		hd_bounded tail -c "$((_cap + 1))" "$2" >"$_w" 2>"$_w.err"
	else
		hd_bounded head -c "$((_cap + 1))" "$2" >"$_w" 2>"$_w.err"
	fi
	_rc=$?
	if [ "$_rc" -ne 0 ]; then
		hd_error "$_kind" "$2: exited $_rc: $(head -c 500 "$_w.err")"
		return 0
	fi
	hd_publish_text "$_kind.$1.path" "$2"
	hd_publish "$_kind.$1" "$_cap" "$_keep"
}

# --- main ----------------------------------------------------------------------------------

hd_main() {
	export RUST_BACKTRACE=0
	hd_begin hangdesk || return 1
	hd_zip_check
	HD_SHIPPED=0
	trap hd_cleanup EXIT
	trap hd_stopped TERM INT HUP
	trap 'hd_cleanup; exit 141' PIPE

	# The cheap, essential facts first, shipped at once.
	hd_publish_text hostname "$(uname -n)"
	hd_processes
	while read -r _pid; do
		hd_environ "$_pid"
	done <"$HD_DIR/pids"
	hd_flush

	# Everything else side by side; ship each artifact as soon as it is finished.
	HD_SPAWNED=0
	while read -r _pid; do
		hd_spawn "pyspy.$_pid" hd_pyspy_both "$_pid"
	done <"$HD_DIR/pids"
	hd_spawn dmesg hd_kernel_log
	hd_spawn gpus hd_gpus
	hd_spawn system hd_system
	hd_spawn shellinit hd_shell_init
	hd_spawn ncclras hd_ncclras
	hd_spawn logs hd_files log "$HD_TAIL_BYTES" end "$HD_LOG_GLOBS"
	hd_spawn fr hd_files fr "$HD_CAP_BYTES" start "$HD_FR_GLOBS"
	until hd_all_done; do
		hd_flush
		sleep 0.05 2>/dev/null || sleep 1
	done
	wait
	hd_flush
	hd_ship_errors
	hd_end
}

hd_main </dev/null
