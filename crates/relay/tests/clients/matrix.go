// The configuration matrix's program for go-sql-driver/mysql: the same
// statements directly and through the relay (server-side prepared
// statements, multi-results, LOAD DATA LOCAL), every result printed; the
// two outputs must be equal line for line.
package main

import (
	"database/sql"
	"fmt"
	"os"
	"strings"

	"github.com/go-sql-driver/mysql"
)

func check(what string, err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, what+":", err)
		os.Exit(1)
	}
}

// show prints every result set of rows.
func show(label string, rows *sql.Rows, err error) {
	check(label, err)
	defer rows.Close()
	for n := 0; ; n++ {
		cols, err := rows.Columns()
		check(label, err)
		fmt.Println(label, n, "columns", strings.Join(cols, ","))
		for rows.Next() {
			vals := make([]sql.RawBytes, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			check(label, rows.Scan(ptrs...))
			out := make([]string, len(cols))
			for i, v := range vals {
				if v == nil {
					out[i] = "NULL"
				} else {
					out[i] = string(v)
				}
			}
			fmt.Println(label, n, strings.Join(out, "|"))
		}
		if !rows.NextResultSet() {
			break
		}
	}
	check(label, rows.Err())
}

func main() {
	dsn := fmt.Sprintf("%s:%s@tcp(%s:%s)/%s?multiStatements=true&allowAllFiles=true", os.Getenv("RELAY_USER"),
		os.Getenv("RELAY_PASSWORD"), os.Getenv("RELAY_HOST"), os.Getenv("RELAY_PORT"), os.Getenv("RELAY_DB"))
	db, err := sql.Open("mysql", dsn)
	check("open", err)
	db.SetMaxOpenConns(1)
	_, err = db.Exec("CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(20), d DECIMAL(10,2), b VARBINARY(8), j JSON, ts DATETIME(3))")
	check("create", err)
	ins, err := db.Prepare("INSERT INTO t (v, d, b, j, ts) VALUES (?, ?, ?, ?, ?)")
	check("prepare", err)
	for _, r := range [][]any{
		{"a", "1.50", []byte{0, 255}, `{"k": 1}`, "2026-11-26 10:00:00.123"},
		{"é", nil, nil, nil, nil},
		{"c", "-2.25", []byte{}, "[1, 2]", "2026-01-01 00:00:00"},
	} {
		res, err := ins.Exec(r...)
		check("insert", err)
		id, _ := res.LastInsertId()
		fmt.Println("insert id", id)
	}
	ins.Close()
	rows, err := db.Query("SELECT id, v, d, HEX(b), j, ts FROM t ORDER BY id")
	show("select", rows, err)
	rows, err = db.Query("SELECT id, v, d, ts FROM t WHERE id > ? ORDER BY id", 1)
	show("param select", rows, err)
	_, err = db.Exec("CREATE PROCEDURE p() BEGIN SELECT COUNT(*) AS n FROM t; SELECT v FROM t ORDER BY id; END")
	check("create procedure", err)
	rows, err = db.Query("CALL p()")
	show("call", rows, err)
	rows, err = db.Query("SELECT 1 AS one; SELECT 2 AS two")
	show("multi", rows, err)
	tx, err := db.Begin()
	check("begin", err)
	_, err = tx.Exec("INSERT INTO t (v) VALUES ('gone')")
	check("insert in transaction", err)
	check("rollback", tx.Rollback())
	rows, err = db.Query("SELECT COUNT(*) FROM t")
	show("after rollback", rows, err)
	_, err = db.Exec("INSERT INTO t (id, v) VALUES (1, 'dup')")
	if me, ok := err.(*mysql.MySQLError); ok {
		fmt.Println("error", me.Number)
	} else {
		fmt.Println("unexpected", err)
	}
	rows, err = db.Query("SELECT CAST('12abc' AS INT); SHOW WARNINGS")
	show("cast and warnings", rows, err)
	res, err := db.Exec("LOAD DATA LOCAL INFILE '" + os.Getenv("MATRIX_CSV") + "' INTO TABLE t FIELDS TERMINATED BY ',' (v, d)")
	check("load data", err)
	n, _ := res.RowsAffected()
	fmt.Println("loaded", n)
	rows, err = db.Query("SELECT COUNT(*), SUM(d) FROM t")
	show("after load", rows, err)
	rows, err = db.Query("SELECT v FROM t WHERE 0")
	show("empty", rows, err)
	fmt.Println("done")
}
