package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/mysql"
)

// mysqlLedger keeps payments in a table of the store's MySQL or MariaDB
// database and writes them in the middleware's transaction (mysql.TxFrom),
// or straight to the database when direct (lease mode).
type mysqlLedger struct {
	db     *sql.DB
	table  string
	direct bool
}

func newMySQLLedger(ctx context.Context, db *sql.DB, table string) (*mysqlLedger, error) {
	t := "`" + strings.ReplaceAll(table, "`", "``") + "`"
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+t+` (
		id      BIGINT AUTO_INCREMENT PRIMARY KEY,
		user_id VARBINARY(255) NOT NULL,
		amount  BIGINT NOT NULL) ENGINE=InnoDB`); err != nil {
		return nil, fmt.Errorf("payments: create table: %w", err)
	}
	return &mysqlLedger{db: db, table: t}, nil
}

func (l *mysqlLedger) create(ctx context.Context, user string, amount int64) (payment, error) {
	var q interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	} = l.db
	if tx, ok := mysql.TxFrom(ctx); ok {
		q = tx
	} else if !l.direct {
		return payment{}, errNoTx
	}
	res, err := q.ExecContext(ctx, `INSERT INTO `+l.table+` (user_id, amount) VALUES (?, ?)`, user, amount)
	if err != nil {
		return payment{}, err
	}
	id, err := res.LastInsertId()
	return payment{ID: id, Amount: amount}, err
}

func (l *mysqlLedger) list(ctx context.Context) ([]payment, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT id, amount FROM `+l.table+` ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ps []payment
	for rows.Next() {
		var p payment
		if err := rows.Scan(&p.ID, &p.Amount); err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, rows.Err()
}

func (l *mysqlLedger) get(ctx context.Context, id int64) (payment, bool, error) {
	var p payment
	err := l.db.QueryRowContext(ctx, `SELECT id, amount FROM `+l.table+` WHERE id = ?`, id).Scan(&p.ID, &p.Amount)
	if errors.Is(err, sql.ErrNoRows) {
		return payment{}, false, nil
	}
	return p, err == nil, err
}

// mysqlLedgerFor returns the MySQL ledger when st is a MySQL store (for
// ledgerFor), and false otherwise.
func mysqlLedgerFor(ctx context.Context, st store.Store, table string) (ledger, bool, error) {
	s, ok := st.(*mysql.Store)
	if !ok {
		return nil, false, nil
	}
	l, err := newMySQLLedger(ctx, s.DB(), table)
	return l, true, err
}

// mysqlStoreURL turns a go-sql-driver/mysql DSN (user:password@tcp(host:port)/db,
// as in IDEMKIT_MYSQL_DSN) into the mysql:// URL store.Open takes, with the
// keys table when one is named.
func mysqlStoreURL(dsn, keysTable string) (string, error) {
	if dsn == "" {
		return "", errors.New("-store mysql needs -mysql DSN or IDEMKIT_MYSQL_DSN")
	}
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("-mysql: %w", err)
	}
	if cfg.Net != "tcp" {
		return "", fmt.Errorf("-mysql: only tcp(host:port) addresses, not %s", cfg.Net)
	}
	u := &url.URL{Scheme: mysql.Scheme, Host: cfg.Addr, Path: "/" + cfg.DBName}
	if cfg.Passwd != "" {
		u.User = url.UserPassword(cfg.User, cfg.Passwd)
	} else if cfg.User != "" {
		u.User = url.User(cfg.User)
	}
	q := url.Values{}
	for k, v := range cfg.Params {
		q.Set(k, v)
	}
	if keysTable != "" {
		q.Set("table", keysTable)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}
