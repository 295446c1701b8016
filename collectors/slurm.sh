# hangdesk's read of one Slurm job, on the controller or a login host. Read-only: it runs
# scontrol show, squeue, sacct and sinfo, never scancel, scontrol update or sbatch.
#
# POSIX sh, after hangdesk/probelib.sh (the frames, hd_run). Settings come from HD_* variables
# the caller puts in front of both as shell-quoted assignments; every value is used as data
# ("$VAR"), never eval'd. Frames:
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

hds_main() {
	hd_begin hdslurm || return 1
	hd_remove_on_exit
	if ! command -v scontrol >/dev/null 2>&1; then
		printf 'scontrol not found on PATH (%s)\n' "$PATH" >"$HD_DIR/errors"
		hd_frame errors "$HD_DIR/errors"
		hd_end
		return 0
	fi
	hd_run job scontrol show job -o -- "$HD_JOB"
	hd_run steps scontrol show step -o -- "$HD_JOB"
	hd_run squeue squeue -h -j "$HD_JOB" -o '%i|%T|%r|%M|%l|%D|%N'
	if command -v sacct >/dev/null 2>&1; then
		hd_run sacct sacct -j "$HD_JOB" -P -n \
			-o JobID,JobName,State,ExitCode,DerivedExitCode,NodeList,NTasks,Elapsed,Start,End
	fi
	# The node list as Slurm wrote it (compressed): scontrol expands it itself.
	_nodes=$(tr ' ' '\n' <"$HD_DIR/out.job" | sed -n 's/^NodeList=//p' | grep -v '^(null)$' |
		paste -s -d, -)
	[ -n "$_nodes" ] && hd_run nodes scontrol show node -o -- "$_nodes"
	hd_end
}

hds_main </dev/null
