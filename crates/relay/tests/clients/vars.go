// go-sql-driver/mysql: the connect-time variable reads in RELAY_VARS_FILE
// on two connections one after the other, each column's metadata and
// value printed (the output must be the same directly and through the
// relay, which answers the second connection's reads itself).
package main

import (
	"database/sql"
	"fmt"
	"os"
	"strings"

	_ "github.com/go-sql-driver/mysql"
)

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func main() {
	text, err := os.ReadFile(os.Getenv("RELAY_VARS_FILE"))
	check(err)
	dsn := fmt.Sprintf("%s:%s@tcp(%s:%s)/", os.Getenv("RELAY_USER"), os.Getenv("RELAY_PASSWORD"),
		os.Getenv("RELAY_HOST"), os.Getenv("RELAY_PORT"))
	for n := 0; n < 2; n++ {
		db, err := sql.Open("mysql", dsn)
		check(err)
		db.SetMaxOpenConns(1)
		for _, s := range strings.Split(strings.TrimSpace(string(text)), "\n") {
			rows, err := db.Query(s)
			check(err)
			types, err := rows.ColumnTypes()
			check(err)
			for _, t := range types {
				l, _ := t.Length()
				p, sc, _ := t.DecimalSize()
				nu, _ := t.Nullable()
				fmt.Println(n, t.Name(), t.DatabaseTypeName(), l, p, sc, nu, t.ScanType())
			}
			vals := make([]sql.RawBytes, len(types))
			ptrs := make([]any, len(types))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			for rows.Next() {
				check(rows.Scan(ptrs...))
				for _, v := range vals {
					fmt.Printf("%q ", string(v))
				}
				fmt.Println()
			}
			check(rows.Close())
		}
		check(db.Close())
	}
}
