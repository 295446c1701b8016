# hangdesk's read of one Ray job, on the Ray head. Read-only: Ray's state API through its CLI
# (ray list, ray status) and Ray Train's own log lines; never `ray stop`, `ray job stop`,
# `ray kill` or anything else that changes the cluster.
#
# POSIX sh, after hangdesk/probelib.sh (the frames, hd_run). Settings come from HD_* variables
# the caller puts in front of both as shell-quoted assignments; every value is used as data
# ("$VAR"), never eval'd.
#
# Two phases, so a job that cannot be snapshot costs one `ray` call: HD_PHASE=find reads
# the jobs and Ray Train's runs (which job is asked for, and is it running?); HD_PHASE=read
# reads that job (HD_JOB_ID, its hex Ray job id): its workers, the nodes, placement groups
# and the autoscaler's view. Frames (each command's stdout as <key>, its stderr as
# <key>.err, its exit status as <key>.rc):
#   jobs      (find) ray list jobs --detail --format json (submission id, job id, status)
#   train     (find) Ray Train's controller log lines that name a run and its worker group
#             (world rank, node address and pid of every worker), from the session's logs
#   logdir    (find) the session log directory these were read from
#   workers   ray list actors --detail --format json --filter class_name=RayTrainWorker
#             --filter job_id=<id> (Ray Train's workers: state, node, pid, death cause)
#   nodes     ray list nodes --detail --format json (address, ALIVE / DEAD and why)
#   pgs       ray list placement-groups --detail --format json (state, bundles' nodes)
#   status    ray status (the autoscaler's view: active, pending and failed nodes)
#   errors    what failed
# Every command is bounded by `timeout` and its output by a byte cap. They run one after the
# other: each is a Python process of its own, and side by side they only share the CPU.

[ -n "${HD_PHASE+x}" ] || HD_PHASE=find
[ -n "${HD_JOB_ID+x}" ] || HD_JOB_ID=''
[ -n "${HD_RAY+x}" ] || HD_RAY=ray
[ -n "${HD_LIMIT+x}" ] || HD_LIMIT=10000
[ -n "${HD_CMD_TIMEOUT+x}" ] || HD_CMD_TIMEOUT=20
[ -n "${HD_NONCE+x}" ] || HD_NONCE=standalone
[ -n "${HD_MAX_BYTES+x}" ] || HD_MAX_BYTES=4194304
[ -n "${HD_LOGDIR+x}" ] || HD_LOGDIR=''

# The session's logs: where this head's raylet writes (its --log_dir), else Ray's default.
hdr_logdir() {
	[ -n "$HD_LOGDIR" ] && {
		printf '%s' "$HD_LOGDIR"
		return
	}
	_d=$(ps -eo args 2>/dev/null | awk '/\/raylet( |$)/ {
		for (i = 2; i <= NF; i++) if ($i ~ /^--log_dir=/) { sub(/^--log_dir=/, "", $i); print $i; exit }
	}')
	[ -n "$_d" ] && [ -d "$_d" ] || _d=/tmp/ray/session_latest/logs
	printf '%s' "$_d"
}

# Ray Train's controller logs: the first record of each (its run name and job id) and every
# `Started training worker group` record (the ranks), newest files last, bounded.
hdr_train() {
	set +f
	for _f in $(ls -tr "$1"/train/ray-train-sys-controller-*.log 2>/dev/null | tail -n 50); do
		[ -f "$_f" ] || continue
		head -n 1 "$_f" | head -c 4096
		printf '\n'
		grep -h -e 'Started training worker group' "$_f" | tail -n 5 | head -c 262144
	done
	set -f
}

hdr_main() {
	export RAY_USAGE_STATS_ENABLED=0
	hd_begin hdray || return 1
	hd_remove_on_exit
	if ! command -v "$HD_RAY" >/dev/null 2>&1; then
		printf '%s not found on PATH (%s)\n' "$HD_RAY" "$PATH" >"$HD_DIR/errors"
		hd_frame errors "$HD_DIR/errors"
		hd_end
		return 0
	fi
	_json="--detail --format json --limit $HD_LIMIT"
	if [ "$HD_PHASE" = find ]; then
		_logs=$(hdr_logdir)
		printf '%s' "$_logs" >"$HD_DIR/logdir"
		hd_frame logdir "$HD_DIR/logdir"
		hdr_train "$_logs" | head -c "$HD_MAX_BYTES" >"$HD_DIR/train"
		hd_frame train "$HD_DIR/train"
		# shellcheck disable=SC2086  # $_json: constant options, split on purpose
		hd_run jobs "$HD_RAY" list jobs $_json
	else
		# shellcheck disable=SC2086
		hd_run workers "$HD_RAY" list actors $_json --filter class_name=RayTrainWorker \
			--filter "job_id=$HD_JOB_ID"
		# shellcheck disable=SC2086
		hd_run nodes "$HD_RAY" list nodes $_json
		# shellcheck disable=SC2086
		hd_run pgs "$HD_RAY" list placement-groups $_json
		hd_run status "$HD_RAY" status
	fi
	hd_end
}

hdr_main </dev/null
