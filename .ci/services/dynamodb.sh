# DynamoDB-compatible server for the tests of store/dynamodb: dynalite (npm),
# in memory, on 127.0.0.1:8000, with table creation and deletion instant.
# Installed into a cache directory (no global npm install); a server that
# already answers on the port is used as it is.
dynamodb_port=8000
dynamodb_dir="${IDEMKIT_CACHE:-$HOME/.cache/idemkit}/dynalite"
need_pkg curl curl
dynamodb_up() { # any HTTP answer on the port: dynalite replies 400 to an unsigned GET
	curl -s -o /dev/null -m 2 "http://127.0.0.1:$dynamodb_port/" 2>/dev/null
}
if ! dynamodb_up; then
	if [ ! -x "$dynamodb_dir/node_modules/.bin/dynalite" ]; then
		need_pkg npm npm
		log "installing dynalite 4.0.0 into $dynamodb_dir"
		mkdir -p "$dynamodb_dir"
		(cd "$dynamodb_dir" && npm install --no-audit --no-fund --silent dynalite@4.0.0 >/dev/null)
	fi
	log "starting dynalite on 127.0.0.1:$dynamodb_port"
	# dynalite's own command would exit on the first request a client
	# abandons mid-body (it rethrows the socket's ECONNRESET); the tests
	# cancel calls in flight on purpose, so the server logs such errors and
	# goes on.
	nohup node -e '
		process.on("uncaughtException", (e) => console.error("dynalite: ignored:", e && (e.code || e.message)));
		require(process.argv[1])({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 })
			.listen(Number(process.argv[2]), "127.0.0.1", () => console.log("dynalite listening on 127.0.0.1:" + process.argv[2]));
	' "$dynamodb_dir/node_modules/dynalite" "$dynamodb_port" >"$dynamodb_dir/dynalite.log" 2>&1 &
	for _ in $(seq 60); do dynamodb_up && break; sleep 0.25; done
	dynamodb_up || { echo "dynalite did not start; see $dynamodb_dir/dynalite.log" >&2; exit 1; }
fi
export IDEMKIT_DYNAMODB_ENDPOINT="${IDEMKIT_DYNAMODB_ENDPOINT:-http://127.0.0.1:$dynamodb_port}"
