# hangdesk's read of one Slurm job, on the controller or a login host. Read-only: it runs
# scontrol show, squeue, sacct and sinfo, never scancel, scontrol update or sbatch.
#
# POSIX sh. Settings come from HD_* variables the caller puts in front of this file as
# shell-quoted assignments; every value is used as data ("$VAR"), never eval'd.
# Output: "HDPROBE1 <nonce>", then frames "HD1 <key> <size>\n" + <size> bytes (the snapshot
# probe's format, read by collectors/remote.py), ending with "HD1 end 0". Frames:
#   job        scontrol show job -o <id> (one line per job; several for a het job)
#   job.rc     its exit status (non-zero: unknown job id, or no controller)
#   job.err    its stderr
#   steps      scontrol show step -o <id> (the steps running now)
#   squeue     squeue -h -j <id> -o '%i|%T|%r|%M|%l|%D|%N' (the job as the queue sees it)
#   sacct      sacct -j <id> -P -n -o JobID,JobName,State,ExitCode,DerivedExitCode,NodeList,
#              NTasks,Elapsed,Start,End (the job, its steps and their exit codes)
#   sacct.err  why sacct said nothing (accounting disabled, slurmdbd down)
#   nodes      scontrol show node -o <the job's node list> (states and reasons)
#   errors     what failed
# Every external command is bounded by `timeout`.

[ -n "${HD_JOB+x}" ] || HD_JOB=''
[ -n "${HD_CMD_TIMEOUT+x}" ] || HD_CMD_TIMEOUT=10
[ -n "${HD_NONCE+x}" ] || HD_NONCE=standalone
[ -n "${HD_MAX_BYTES+x}" ] || HD_MAX_BYTES=4194304

hds_emit() { # key file
	_s=$(wc -c <"$2")
	printf 'HD1 %s %s\n' "$1" "${_s##* }"
	cat "$2"
}

hds_run() { # key command...: its bounded stdout as <key>, stderr as <key>.err, status <key>.rc
	_key=$1
	shift
	{
		timeout -k 2 "$HD_CMD_TIMEOUT" "$@" 2>"$HDS_DIR/err"
		printf '%s' "$?" >"$HDS_DIR/rc"
	} | head -c "$HD_MAX_BYTES" >"$HDS_DIR/out.$_key"
	hds_emit "$_key" "$HDS_DIR/out.$_key"
	[ -s "$HDS_DIR/err" ] && hds_emit "$_key.err" "$HDS_DIR/err"
	hds_emit "$_key.rc" "$HDS_DIR/rc"
}

hds_main() {
	set -f
	umask 077
	export LC_ALL=C
	HDS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/hdslurm.XXXXXX" 2>/dev/null ||
		mktemp -d /dev/shm/hdslurm.XXXXXX 2>/dev/null)
	printf 'HDPROBE1 %s\n' "$HD_NONCE"
	if [ -z "$HDS_DIR" ]; then
		printf 'no writable temp dir\n' >&2
		return 1
	fi
	trap 'rm -rf "$HDS_DIR"' EXIT
	trap 'rm -rf "$HDS_DIR"; exit 143' TERM INT HUP
	if ! command -v scontrol >/dev/null 2>&1; then
		printf 'scontrol not found on PATH (%s)\n' "$PATH" >"$HDS_DIR/errors"
		hds_emit errors "$HDS_DIR/errors"
		printf 'HD1 end 0\n'
		return 0
	fi
	hds_run job scontrol show job -o -- "$HD_JOB"
	hds_run steps scontrol show step -o -- "$HD_JOB"
	hds_run squeue squeue -h -j "$HD_JOB" -o '%i|%T|%r|%M|%l|%D|%N'
	if command -v sacct >/dev/null 2>&1; then
		hds_run sacct sacct -j "$HD_JOB" -P -n \
			-o JobID,JobName,State,ExitCode,DerivedExitCode,NodeList,NTasks,Elapsed,Start,End
	fi
	# The node list as Slurm wrote it (compressed): scontrol expands it itself.
	_nodes=$(tr ' ' '\n' <"$HDS_DIR/out.job" | sed -n 's/^NodeList=//p' | grep -v '^(null)$' |
		paste -s -d, -)
	[ -n "$_nodes" ] && hds_run nodes scontrol show node -o -- "$_nodes"
	printf 'HD1 end 0\n'
}

hds_main </dev/null
