package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idemkit/store"
)

var (
	_ store.Store    = (*Store)(nil)
	_ store.Purger   = (*Store)(nil)
	_ store.Migrator = (*Store)(nil)
)

// Store keeps idempotency keys in a JetStream key-value bucket, one entry
// per key. Make one with New or store.Open; it is safe for concurrent use.
type Store struct {
	nc     *natsgo.Conn
	js     jetstream.JetStream
	bucket string
	stream string // KV_<bucket>
	prefix string // $KV.<bucket>.
	getSub string // $JS.API.STREAM.MSG.GET.KV_<bucket>
	opts   options
	owned  bool // Close closes nc (a Store made by store.Open)
	clock  serverClock

	infoMu sync.Mutex
	info   *bucketInfo // nil until first needed
}

// bucketInfo is what the Store learned of its bucket's stream.
type bucketInfo struct {
	ttl      bool  // per-message TTL allowed (NATS 2.11 and later, bucket made with it)
	direct   bool  // one replica and direct gets allowed: reads need not go to a leader
	maxValue int64 // the largest record message the Store writes, headers included
}

// Option configures a Store. Options are checked by New; a nil Option or an
// invalid value is an error matching store.ErrInvalid.
type Option func(*options) error

type options struct {
	replicas     int
	maxValueSize int32
	storage      jetstream.StorageType
}

// DefaultReplicas is the replica count Migrate gives a new bucket when
// WithReplicas is not used.
const DefaultReplicas = 1

// WithReplicas sets how many servers keep a copy of the bucket Migrate
// creates: 1 (no replication) to 5. Use 3 on a cluster: the bucket's stream
// then replicates through Raft, and an acknowledged write survives the loss
// of any one server. It does not change a bucket that exists.
func WithReplicas(n int) Option {
	return func(o *options) error {
		if n < 1 || n > 5 {
			return fmt.Errorf("%w: WithReplicas(%d): the replica count must be 1 to 5", store.ErrInvalid, n)
		}
		o.replicas = n
		return nil
	}
}

// WithMaxValueSize sets the largest entry, in bytes, that the bucket Migrate
// creates accepts (its streams' max_msg_size). Without it the limit is the
// servers' max_payload. Either way, a Complete whose record would not fit is
// refused with store.ErrInvalid before anything is written (see the package
// documentation).
func WithMaxValueSize(n int) Option {
	return func(o *options) error {
		if n < 1024 || n > 1<<30 {
			return fmt.Errorf("%w: WithMaxValueSize(%d): give a size from 1024 bytes to 1 GiB", store.ErrInvalid, n)
		}
		o.maxValueSize = int32(n)
		return nil
	}
}

// WithMemoryStorage makes Migrate create the bucket in memory instead of on
// disk. The records of a server that restarts are then gone, on a cluster as
// on one server: use it for tests only.
func WithMemoryStorage() Option {
	return func(o *options) error {
		o.storage = jetstream.MemoryStorage
		return nil
	}
}

var bucketRe = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// New returns a Store on the bucket named bucket, reached through the
// connection nc, which the Store uses but does not own: Close leaves it
// open. The bucket need not exist yet; Migrate creates it. New sends
// nothing to the server.
func New(nc *natsgo.Conn, bucket string, opts ...Option) (*Store, error) {
	if nc == nil {
		return nil, fmt.Errorf("nats: new: %w: nil connection", store.ErrInvalid)
	}
	if !bucketRe.MatchString(bucket) {
		return nil, fmt.Errorf("nats: new: %w: bucket name %q: use letters, digits, _ and - only", store.ErrInvalid, bucket)
	}
	o, err := newOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("nats: new: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("nats: new: %w", err)
	}
	s := &Store{
		nc:     nc,
		js:     js,
		bucket: bucket,
		stream: "KV_" + bucket,
		prefix: "$KV." + bucket + ".",
		getSub: "$JS.API.STREAM.MSG.GET.KV_" + bucket,
		opts:   o,
	}
	s.clock.probe = s.probe
	return s, nil
}

func newOptions(opts []Option) (options, error) {
	o := options{replicas: DefaultReplicas, storage: jetstream.FileStorage}
	for i, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("%w: option %d is nil", store.ErrInvalid, i)
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// Bucket returns the name of the Store's bucket.
func (s *Store) Bucket() string { return s.bucket }

// Close closes the connection when the Store was made by store.Open, and
// otherwise does nothing.
func (s *Store) Close() error {
	if s.owned {
		s.nc.Close()
	}
	return nil
}

// versionAtLeast reports whether the server version v ("2.9.10",
// "2.11.0-RC.1") is want or later; an unreadable version is not.
func versionAtLeast(v string, want [3]int) bool {
	var got [3]int
	if n, _ := fmt.Sscanf(v, "%d.%d.%d", &got[0], &got[1], &got[2]); n < 2 {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return got[i] > want[i]
		}
	}
	return true
}

var (
	// ttlVersion is the first server release with per-message TTLs.
	ttlVersion = [3]int{2, 11, 0}
	// casVersion is the first release whose replicated streams check
	// Nats-Expected-Last-Subject-Sequence against the writes still being
	// replicated, not only the stored ones: before it, two concurrent
	// writes expecting one revision could both be accepted on a stream of
	// more than one replica (nats-server issue 4320). storetest's
	// concurrent takeover cases fail on a 2.9.10 cluster.
	casVersion = [3]int{2, 9, 21}
)

// serverHasTTL reports whether the connected server is NATS 2.11 or later.
func (s *Store) serverHasTTL() bool {
	return versionAtLeast(s.nc.ConnectedServerVersion(), ttlVersion)
}

// errUnsafeCAS is the error of a replicated bucket on a server whose
// compare-and-set is not atomic there.
func (s *Store) errUnsafeCAS(replicas int) error {
	return fmt.Errorf("%w: bucket %s has %d replicas, and NATS %s does not make compare-and-set writes atomic on a replicated stream "+
		"(two concurrent takeovers of one key could both win): upgrade the servers to 2.9.21 or later, or use one replica",
		store.ErrInvalid, s.bucket, replicas, s.nc.ConnectedServerVersion())
}

// Migrate creates the bucket when it does not exist: history 1, the replica
// count of WithReplicas, the size limit of WithMaxValueSize, and, on NATS
// 2.11 and later, per-key TTLs (so the servers delete each record when its
// lease or retention is over). An existing bucket is left as it is; Migrate
// fails if its replica count differs from the one asked for. Running it
// again, or from several processes at once, is harmless.
func (s *Store) Migrate(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("nats: migrate: %w", err)
	}
	cfg := jetstream.KeyValueConfig{
		Bucket:       s.bucket,
		Description:  "idemkit idempotency keys",
		History:      1,
		Replicas:     s.opts.replicas,
		MaxValueSize: s.opts.maxValueSize,
		Storage:      s.opts.storage,
	}
	if s.serverHasTTL() {
		cfg.LimitMarkerTTL = time.Second
	}
	st, err := s.js.Stream(ctx, s.stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if s.opts.replicas > 1 && !versionAtLeast(s.nc.ConnectedServerVersion(), casVersion) {
			return fmt.Errorf("nats: migrate: %w", s.errUnsafeCAS(s.opts.replicas))
		}
		_, err = s.js.CreateKeyValue(ctx, cfg)
		if err != nil && !errors.Is(err, jetstream.ErrBucketExists) {
			return fmt.Errorf("nats: migrate: creating bucket %s: %w", s.bucket, err)
		}
		st, err = s.js.Stream(ctx, s.stream)
	}
	if err != nil {
		return fmt.Errorf("nats: migrate: reading bucket %s: %w", s.bucket, err)
	}
	if r := st.CachedInfo().Config.Replicas; r != s.opts.replicas {
		return fmt.Errorf("nats: migrate: %w: bucket %s exists with %d replicas, not the %d asked for: change it with the nats CLI or use another bucket",
			store.ErrInvalid, s.bucket, r, s.opts.replicas)
	}
	s.infoMu.Lock()
	s.info = nil // read it again
	s.infoMu.Unlock()
	if _, err := s.bucketInfo(ctx); err != nil {
		return fmt.Errorf("nats: migrate: %w", err)
	}
	return nil
}

// errNoBucket matches the error of a call on a bucket that does not exist.
var errNoBucket = errors.New("bucket does not exist (run store.Migrate)")

// bucketInfo returns what the Store knows of its bucket, reading the
// stream's configuration the first time.
func (s *Store) bucketInfo(ctx context.Context) (*bucketInfo, error) {
	s.infoMu.Lock()
	defer s.infoMu.Unlock()
	if s.info != nil {
		return s.info, nil
	}
	st, err := s.js.Stream(ctx, s.stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("%s: %w", s.bucket, errNoBucket)
	}
	if err != nil {
		return nil, err
	}
	cfg := st.CachedInfo().Config
	if cfg.Replicas > 1 && !versionAtLeast(s.nc.ConnectedServerVersion(), casVersion) {
		return nil, s.errUnsafeCAS(cfg.Replicas)
	}
	limit := s.nc.MaxPayload()
	if cfg.MaxMsgSize > 0 && int64(cfg.MaxMsgSize) < limit {
		limit = int64(cfg.MaxMsgSize)
	}
	s.info = &bucketInfo{ttl: cfg.AllowMsgTTL, maxValue: limit, direct: cfg.Replicas <= 1 && cfg.AllowDirect && cfg.Mirror == nil}
	return s.info, nil
}

// MaxResponse returns the largest response, in bytes, that Complete stores
// with the fingerprint and token given: the bucket's limit (the smaller of
// its max value size and the servers' max_payload) less the record's header
// and the bytes its reads add (a stored message comes back base64-encoded in
// a JSON reply, four bytes for every three). Complete refuses a larger one
// with store.ErrInvalid.
func (s *Store) MaxResponse(ctx context.Context, fingerprint string, token store.Token) (int, error) {
	bi, err := s.bucketInfo(ctx)
	if err != nil {
		return 0, fmt.Errorf("nats: max response: %w", err)
	}
	return s.maxResponse(bi, fingerprint, token), nil
}

// replyOverhead is what a STREAM.MSG.GET reply adds around the message:
// its JSON fields, subject, sequence, time and headers.
const replyOverhead = 4096

func (s *Store) maxResponse(bi *bucketInfo, fingerprint string, token store.Token) int {
	write := bi.maxValue - replyOverhead
	read := (s.nc.MaxPayload()-replyOverhead)/4*3 - replyOverhead
	n := min(write, read) - int64(recordOverhead(fingerprint, token))
	return int(max(n, 0))
}

// defaultRequestTimeout bounds a read whose context has no deadline, as
// jetstream's own default bounds its publishes.
const defaultRequestTimeout = 5 * time.Second

// msg is a stored message as the stream leader returns it.
type msg struct {
	Subject string    `json:"subject"`
	Seq     uint64    `json:"seq"`
	Hdrs    []byte    `json:"hdrs"`
	Data    []byte    `json:"data"`
	Time    time.Time `json:"time"`

	header natsgo.Header
}

type msgGetReply struct {
	Error   *jetstream.APIError `json:"error"`
	Message *msg                `json:"message"`
}

// load reads the latest message of subj: from the stream's leader on a
// replicated bucket (not from any replica, as the KV's direct gets may: a
// replica that lags would show an older record), with a direct get on a
// bucket of one replica, where the one server that answers is the one
// that writes. It returns nil when the subject has no message.
func (s *Store) load(ctx context.Context, subj string) (*msg, error) {
	bi, err := s.bucketInfo(ctx)
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		// As jetstream does for its own requests: a read never waits
		// forever for a server that will not answer.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultRequestTimeout)
		defer cancel()
	}
	if bi.direct {
		return s.loadDirect(ctx, subj)
	}
	req, _ := json.Marshal(struct {
		LastBySubj string `json:"last_by_subj"`
	}{subj})
	resp, err := s.nc.RequestWithContext(ctx, s.getSub, req)
	if err != nil {
		if errors.Is(err, natsgo.ErrNoResponders) {
			return nil, fmt.Errorf("no stream leader answered (bucket %s missing, or electing a leader): %w", s.bucket, err)
		}
		return nil, err
	}
	at := time.Now()
	var r msgGetReply
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return nil, fmt.Errorf("reading the stream's reply: %w", err)
	}
	if r.Error != nil {
		if r.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, nil
		}
		if r.Error.ErrorCode == jetstream.JSErrCodeStreamNotFound {
			return nil, fmt.Errorf("%s: %w", s.bucket, errNoBucket)
		}
		return nil, r.Error
	}
	if r.Message == nil {
		return nil, errors.New("empty reply from the stream")
	}
	m := r.Message
	if len(m.Hdrs) > 0 {
		h, err := natsgo.DecodeHeadersMsg(m.Hdrs)
		if err != nil {
			return nil, fmt.Errorf("reading headers: %w", err)
		}
		m.header = h
	}
	s.clock.observe(m.Time, at)
	return m, nil
}

// loadDirect reads the latest message of subj with a direct get.
func (s *Store) loadDirect(ctx context.Context, subj string) (*msg, error) {
	resp, err := s.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+s.stream+"."+subj, nil)
	if err != nil {
		if errors.Is(err, natsgo.ErrNoResponders) {
			return nil, fmt.Errorf("no server answered for bucket %s (missing, or its server is down): %w", s.bucket, err)
		}
		return nil, err
	}
	at := time.Now()
	h := resp.Header
	if len(resp.Data) == 0 && h.Get("Status") != "" {
		if h.Get("Status") == "404" {
			return nil, nil
		}
		return nil, fmt.Errorf("direct get: status %s %s", h.Get("Status"), h.Get("Description"))
	}
	seq, err := strconv.ParseUint(h.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("direct get: sequence header %q: %w", h.Get(jetstream.SequenceHeader), err)
	}
	tm, err := time.Parse(time.RFC3339Nano, h.Get(jetstream.TimeStampHeaer))
	if err != nil {
		return nil, fmt.Errorf("direct get: time stamp header: %w", err)
	}
	m := &msg{Subject: subj, Seq: seq, Data: resp.Data, Time: tm, header: h}
	s.clock.observe(m.Time, at)
	return m, nil
}

// marker reports whether m is a KV delete or purge marker, or one the
// server placed for an expired key: the key is absent.
func (m *msg) marker() bool {
	return m.header.Get(kvOpHeader) != "" || m.header.Get(jetstream.MarkerReasonHeader) != "" || len(m.header.Get(lifeHeader)) == 0
}

// write publishes the record r (or, with r nil, a marker of operation op)
// on subj if the subject's last sequence is still rev (0: the subject has
// no message). conflict is true when it was not: someone wrote first.
func (s *Store) write(ctx context.Context, bi *bucketInfo, subj string, rev uint64, r *record, op string) (seq uint64, conflict bool, err error) {
	m := &natsgo.Msg{Subject: subj, Header: natsgo.Header{}}
	ttl := time.Second // a marker's: it only needs to outlive the write
	if r == nil {
		m.Header.Set(kvOpHeader, op)
	} else {
		m.Data = r.encode()
		m.Header.Set(lifeHeader, strconv.FormatInt(int64(r.life), 10))
		m.Header.Set(keptHeader, strconv.FormatInt(int64(r.kept()), 10))
		ttl = r.life + r.kept()
	}
	if bi.ttl {
		m.Header.Set(ttlHeader, ttlFor(ttl).String())
	}
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(rev, 10))
	ack, err := s.js.PublishMsg(ctx, m)
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return 0, true, nil
		}
		if errors.Is(err, natsgo.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) {
			return 0, false, fmt.Errorf("no stream leader answered (bucket %s missing, or electing a leader): %w", s.bucket, err)
		}
		return 0, false, err
	}
	return ack.Sequence, false, nil
}

// probe writes the clock entry and reads back the time stamp the server
// gave it.
func (s *Store) probe(ctx context.Context) (time.Time, error) {
	bi, err := s.bucketInfo(ctx)
	if err != nil {
		return time.Time{}, err
	}
	subj := s.prefix + clockKey
	m := &natsgo.Msg{Subject: subj, Header: natsgo.Header{}}
	if bi.ttl {
		m.Header.Set(ttlHeader, "1m")
	}
	if _, err := s.js.PublishMsg(ctx, m); err != nil {
		return time.Time{}, fmt.Errorf("reading the servers' time: %w", err)
	}
	got, err := s.load(ctx, subj)
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the servers' time: %w", err)
	}
	if got == nil {
		return time.Time{}, errors.New("reading the servers' time: the clock entry vanished")
	}
	return got.Time, nil
}

// clockKey is the entry whose time stamp tells the servers' time. It has a
// dot, so no idempotency key (always one base64url token) can be it.
const clockKey = "idemkit.clock"
