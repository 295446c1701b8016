# A misbehaving node for the collector tests: sshd runs this (ForceCommand) instead of the
# probe. $1 is a file naming the behaviour the current test wants.
behaviour=$(cat "$1")
session=$PPID

wait_for_disconnect() {
	# Stay silent until sshd's session process goes away, then leave no process behind.
	while kill -0 "$session" 2>/dev/null; do sleep 0.2; done
}

case "$behaviour" in
silent)
	wait_for_disconnect
	;;
frames-then-silent)
	nonce=$(sed -n 's/^HD_NONCE=//p')
	printf 'HDPROBE1 %s\n' "$nonce"
	printf 'HD1 hostname 7\nhostile'
	ps='  PID  PPID STAT ELAPSED COMMAND
 4242     1 S     99 train.py
'
	printf 'HD1 ps %s\n%s' "${#ps}" "$ps"
	wait_for_disconnect
	;;
flood)
	yes 'not a probe, just noise'
	;;
esac
