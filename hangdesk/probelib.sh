# hangdesk's probe library: what every script the console sends shares (the snapshot's probe,
# hangdesk/probe.sh; the watch's, watch/probe.sh; the scheduler reads, collectors/slurm.sh and
# collectors/ray.sh). `hangdesk.frames.render_script` sends it after the script's shell-quoted
# settings and before the script itself, in one `sh -s`; to run a script by hand:
#   cat hangdesk/probelib.sh hangdesk/probe.sh | sh -s
#
# POSIX sh. The wire format (read by hangdesk/frames.py): the line "HDPROBE1 <nonce>", then
# frames "HD1 <key> <size>\n" followed by exactly <size> raw bytes (or, with HD_ZIP=gzip,
# "HD1 <key> <size> gz <n>\n" and a gzip member of n bytes), ending with "HD1 end 0".
# Defines functions only (their locals start with _hd); HD_DIR is the script's private temp dir.

# hd_begin name: the script's start: no globbing, private files, the C locale, a private temp
# dir in HD_DIR (name.XXXXXX, in TMPDIR or /dev/shm), then the greeting line. Status 1 (and a
# word on stderr) when no temp dir can be made.
hd_begin() {
	set -f
	umask 077
	export LC_ALL=C
	HD_DIR=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX" 2>/dev/null ||
		mktemp -d "/dev/shm/$1.XXXXXX" 2>/dev/null)
	printf 'HDPROBE1 %s\n' "$HD_NONCE"
	if [ -z "$HD_DIR" ]; then
		printf 'no writable temp dir in %s or /dev/shm\n' "${TMPDIR:-/tmp}" >&2
		return 1
	fi
}

hd_remove_on_exit() { # the temp dir goes with the script, however it ends
	trap 'rm -rf "$HD_DIR"' EXIT
	trap 'rm -rf "$HD_DIR"; exit 143' TERM INT HUP
}

hd_end() { # the last frame: the reader knows the output is whole
	printf 'HD1 end 0\n'
}

hd_size() { # file -> byte count on stdout
	_hd_sz=$(wc -c <"$1")
	printf '%s' "${_hd_sz##* }"
}

hd_emit() { # key size file: one frame (HD_EMITTING says a frame is half written)
	HD_EMITTING=1
	# Compressed when asked (HD_ZIP, checked by hd_zip_check) and worth it: the header gives
	# the size before and after, "HD1 <key> <size> gz <gzip size>", then the gzip member.
	if [ -n "${HD_ZIP:-}" ] && [ "$2" -ge "${HD_ZIP_MIN:-2048}" ] &&
		gzip -1 -n -c <"$3" >"$HD_DIR/zip" 2>/dev/null; then
		printf 'HD1 %s %s gz %s\n' "$1" "$2" "$(hd_size "$HD_DIR/zip")"
		cat "$HD_DIR/zip"
	else
		printf 'HD1 %s %s\n' "$1" "$2"
		cat "$3"
	fi
	HD_EMITTING=0
}

# hd_zip_check: HD_ZIP emptied (frames sent plain) unless gzip is here and takes -1 -n -c.
hd_zip_check() {
	[ -n "${HD_ZIP:-}" ] || return 0
	[ "$(printf hd | gzip -1 -n -c 2>/dev/null | wc -c)" -gt 0 ] 2>/dev/null || HD_ZIP=
}

hd_frame() { # key file: the whole file as one frame
	hd_emit "$1" "$(hd_size "$2")" "$2"
}

# hd_run key command...: the command under `timeout`, its stdout cut at HD_MAX_BYTES as frame
# <key>, its stderr as <key>.err (when it said anything), its exit status as <key>.rc; the
# stdout stays in $HD_DIR/out.<key> for the script to read.
hd_run() {
	_hd_key=$1
	shift
	{
		timeout -k 2 "$HD_CMD_TIMEOUT" "$@" 2>"$HD_DIR/err"
		printf '%s' "$?" >"$HD_DIR/rc"
	} | head -c "$HD_MAX_BYTES" >"$HD_DIR/out.$_hd_key"
	hd_frame "$_hd_key" "$HD_DIR/out.$_hd_key"
	[ -s "$HD_DIR/err" ] && hd_frame "$_hd_key.err" "$HD_DIR/err"
	hd_frame "$_hd_key.rc" "$HD_DIR/rc"
}

# hd_each_file name globs callback: `callback n path` for every regular file matching one of
# the newline-separated globs (n from 1), at most HD_MAX_FILES of them; status 1 when more
# match (the rest are skipped). Glob expansion only: IFS empty means no word splitting, and
# expanded values are never re-parsed, so quotes, ';' or '$(...)' in a glob are plain
# characters. FIFOs, devices and directories are skipped: they would hang or mislead.
hd_each_file() {
	_hd_cb=$3
	_hd_n=0
	printf '%s\n' "$2" >"$HD_DIR/globs.$1"
	while IFS= read -r _hd_g; do
		[ -n "$_hd_g" ] || continue
		set +f
		_hd_ifs=$IFS
		IFS=''
		# shellcheck disable=SC2086  # expanding the glob is the point
		set -- $_hd_g
		IFS=$_hd_ifs
		set -f
		for _hd_f in "$@"; do
			[ -f "$_hd_f" ] || continue
			_hd_n=$((_hd_n + 1))
			[ "$_hd_n" -le "$HD_MAX_FILES" ] || return 1
			"$_hd_cb" "$_hd_n" "$_hd_f"
		done
	done <"$HD_DIR/globs.$1"
	return 0
}
