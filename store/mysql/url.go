package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/idemkit/idemkit/store"
)

// Schemes this package registers with store.Register when it is imported.
// store.Open makes a *sql.DB from the URL, pings the server within its
// context, and returns a Store on it:
//
//	mysql://user:password@host:3306/db?table=idempotency_keys&tls=true
//
// The port defaults to 3306 and the path names the database. The parameters
// table (WithTable) and purge_batch (WithPurgeBatch) configure the Store;
// go-sql-driver/mysql's own DSN parameters (tls, timeout, readTimeout,
// writeTimeout, charset, collation, loc, parseTime, maxAllowedPacket, ...,
// spelt as the driver spells them) go to the driver. A session variable is
// passed on purpose as var.NAME=value (?var.transaction_isolation=%27READ-COMMITTED%27
// sets it on every connection, as the driver does for a DSN parameter it
// does not know). Every other parameter is an error matching
// store.ErrInvalid before anything connects: the driver would send an
// unknown name to the server as SET name=value, so ?tabel=x fails at the
// server and ?password=x would run SET password. The Store owns the
// *sql.DB: Close closes it. Open does not create the
// table: call store.Migrate or Store.Migrate.
const (
	Scheme      = "mysql"
	SchemeAlias = "mariadb"
)

func init() {
	store.Register(Scheme, openURL)
	store.Register(SchemeAlias, openURL)
}

// driverParams are go-sql-driver/mysql's own DSN parameters;
// store.URLParams.Driver passes them.
var driverParams = []string{
	"allowAllFiles", "allowCleartextPasswords", "allowFallbackToPlaintext", "allowNativePasswords",
	"allowOldPasswords", "checkConnLiveness", "clientFoundRows", "charset", "collation",
	"columnsWithAlias", "compress", "interpolateParams", "loc", "multiStatements", "parseTime",
	"timeTruncate", "readTimeout", "rejectReadOnly", "serverPubKey", "strict", "timeout", "tls",
	"writeTimeout", "maxAllowedPacket", "connectionAttributes",
}

func openURL(ctx context.Context, u *url.URL) (store.Store, error) {
	p := store.NewURLParams(u)
	var opts []Option
	if p.Has("table") {
		opts = append(opts, WithTable(p.String("table", "")))
	}
	if p.Has("purge_batch") {
		opts = append(opts, WithPurgeBatch(p.Int("purge_batch", 0)))
	}
	rest := p.Driver(driverParams...)
	if err := p.Done(); err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	if _, err := buildOptions(opts); err != nil {
		return nil, err
	}
	if u.Host == "" {
		return nil, fmt.Errorf("mysql: %w: the URL names no host: use mysql://user:password@host:3306/db", store.ErrInvalid)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "3306")
	}
	var dsn strings.Builder
	if u.User != nil {
		dsn.WriteString(u.User.Username())
		if pw, ok := u.User.Password(); ok {
			dsn.WriteString(":" + pw)
		}
		dsn.WriteByte('@')
	}
	dsn.WriteString("tcp(" + addr + ")/" + strings.TrimPrefix(u.Path, "/"))
	if len(rest) > 0 {
		dsn.WriteString("?" + rest.Encode())
	}
	cfg, err := gomysql.ParseDSN(dsn.String())
	if err != nil {
		return nil, fmt.Errorf("mysql: %w: %w", store.ErrInvalid, err)
	}
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w: %w", store.ErrInvalid, err)
	}
	db := sql.OpenDB(conn)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w: %w", cerr, err) // match ctx.Err() whatever the driver reported
		}
		return nil, fmt.Errorf("mysql: connect to %s: %w", addr, err)
	}
	s, err := New(db, opts...)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	s.closeDB = db.Close
	return s, nil
}
