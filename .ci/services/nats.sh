# NATS with JetStream for store/nats (sourced by .ci/run; idempotent, loopback only).
# store/nats's conformance test stores a 4 MiB response, so the server must take
# messages of 8 MiB (max_payload). The machine's server on 127.0.0.1:4222 is used when it
# answers with JetStream and that limit; otherwise (NATS's default max_payload is 1 MiB)
# a server of our own runs on 127.0.0.1:4250 with it, from Debian's nats-server package.
# The store's tests make and delete their own buckets only. The failover test starts its
# own three-node cluster on other private ports.
nats_info() { # nats_info PORT: the server's INFO line, or nothing
	timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1 && head -n1 <&3" 2>/dev/null || true
}
nats_fits() { # nats_fits PORT: JetStream on and max_payload >= 8 MiB
	local info
	info=$(nats_info "$1")
	[[ "$info" == *'"jetstream":true'* ]] || return 1
	local mp
	mp=$(sed -n 's/.*"max_payload":\([0-9]*\).*/\1/p' <<<"$info")
	[ -n "$mp" ] && [ "$mp" -ge 8388608 ]
}
if nats_fits 4222; then
	nats_port=4222
else
	nats_port=4250
	if ! nats_fits "$nats_port"; then
		need_pkg nats-server nats-server
		log "starting NATS with JetStream on 127.0.0.1:$nats_port (max_payload 8 MiB)"
		nats_dir=/tmp/idemkit-nats
		mkdir -p "$nats_dir"
		cat >"$nats_dir/nats.conf" <<CONF
host: 127.0.0.1
port: $nats_port
max_payload: 8MB
jetstream { store_dir: "$nats_dir/js" }
CONF
		start-stop-daemon --start --oknodo --background --pidfile "$nats_dir/pid" --make-pidfile \
			--exec "$(command -v nats-server)" -- -c "$nats_dir/nats.conf" -l "$nats_dir/nats.log"
		for _ in $(seq 40); do nats_fits "$nats_port" && break; sleep 0.25; done
	fi
	nats_fits "$nats_port" || { echo "NATS with JetStream did not start on 127.0.0.1:$nats_port" >&2; exit 1; }
fi
export IDEMKIT_NATS_URL="${IDEMKIT_NATS_URL:-nats://127.0.0.1:$nats_port}"
