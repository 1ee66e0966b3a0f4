// go-sql-driver/mysql through the relay: server-side prepared statements
// over a connection pool, transactions, an error. Prints OK and the count.
package main

import (
	"database/sql"
	"fmt"
	"os"

	"github.com/go-sql-driver/mysql"
)

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func main() {
	dsn := fmt.Sprintf("%s:%s@tcp(%s:%s)/%s", os.Getenv("RELAY_USER"), os.Getenv("RELAY_PASSWORD"),
		os.Getenv("RELAY_HOST"), os.Getenv("RELAY_PORT"), os.Getenv("RELAY_DB"))
	db, err := sql.Open("mysql", dsn)
	check(err)
	db.SetMaxOpenConns(4)
	_, err = db.Exec("CREATE TABLE lang_go (id INT PRIMARY KEY, s VARCHAR(50), n DOUBLE)")
	check(err)
	ins, err := db.Prepare("INSERT INTO lang_go VALUES (?, ?, ?)")
	check(err)
	_, err = ins.Exec(1, "a", 1.5)
	check(err)
	_, err = ins.Exec(2, nil, 2.5)
	check(err)
	_, err = ins.Exec(3, "c'q\u00e9", 3.5)
	check(err)
	check(ins.Close())
	tx, err := db.Begin()
	check(err)
	_, err = tx.Exec("INSERT INTO lang_go VALUES (?, 'x', 0)", 4)
	check(err)
	check(tx.Rollback())
	tx, err = db.Begin()
	check(err)
	_, err = tx.Exec("INSERT INTO lang_go VALUES (?, 'y', 0)", 5)
	check(err)
	check(tx.Commit())
	var n int
	check(db.QueryRow("SELECT COUNT(*) FROM lang_go").Scan(&n))
	var s string
	var f float64
	check(db.QueryRow("SELECT s, n FROM lang_go WHERE id = ?", 3).Scan(&s, &f))
	if s != "c'q\u00e9" || f != 3.5 {
		fmt.Fprintln(os.Stderr, "wrong row", s, f)
		os.Exit(1)
	}
	_, err = db.Exec("SELECT * FROM missing_table")
	if me, ok := err.(*mysql.MySQLError); !ok || me.Number != 1146 {
		fmt.Fprintln(os.Stderr, "expected error 1146, got", err)
		os.Exit(1)
	}
	var one int
	check(db.QueryRow("SELECT 1").Scan(&one))
	check(db.Close())
	fmt.Println("OK", n)
}
