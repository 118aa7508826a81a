# Cloud Spanner emulator on 127.0.0.1:9010 (gRPC) for store/spanner's tests,
# which create their own instance and databases in it. Sourced by .ci/run.
# A server already answering on the port is used as it is; otherwise the
# emulator of the Google Cloud SDK is started (apt package
# google-cloud-cli-spanner-emulator when it is missing), and its REST
# gateway on 9020 when gateway_main is there too.
spanner_port=9010
spanner_rest_port=9020
spanner_dir=/usr/lib/google-cloud-sdk/bin/cloud_spanner_emulator
spanner_up() { (exec 3<>"/dev/tcp/127.0.0.1/$spanner_port") 2>/dev/null; }
if ! spanner_up; then
	if [ ! -x "$spanner_dir/emulator_main" ]; then
		if [ -z "${apt_updated:-}" ]; then apt-get update -qq; apt_updated=1; fi
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq google-cloud-cli-spanner-emulator >/dev/null
	fi
	log "starting the Cloud Spanner emulator"
	mkdir -p /tmp/idemkit-spanner
	if [ -x "$spanner_dir/gateway_main" ]; then
		(cd /tmp/idemkit-spanner && nohup "$spanner_dir/gateway_main" --grpc_binary "$spanner_dir/emulator_main" --hostname 127.0.0.1 --grpc_port "$spanner_port" \
			--http_port "$spanner_rest_port" >/tmp/idemkit-spanner/emulator.log 2>&1 &)
	else
		nohup "$spanner_dir/emulator_main" --host_port "127.0.0.1:$spanner_port" \
			>/tmp/idemkit-spanner/emulator.log 2>&1 &
	fi
	for _ in $(seq 60); do spanner_up && break; sleep 0.5; done
fi
spanner_up || { echo "the Cloud Spanner emulator did not start on 127.0.0.1:$spanner_port" >&2; cat /tmp/idemkit-spanner/emulator.log >&2 || true; exit 1; }
export SPANNER_EMULATOR_HOST="${SPANNER_EMULATOR_HOST:-127.0.0.1:$spanner_port}"
