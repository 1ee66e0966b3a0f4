// The configuration matrix's program for MariaDB Connector/J: the same
// statements directly and through the relay (server-side prepared
// statements, multi-results, LOAD DATA LOCAL), every result printed; the
// two outputs must be equal line for line.
import java.sql.*;
import java.util.*;

public class Matrix {
    static void show(String label, Statement st, boolean hasRows) throws SQLException {
        int n = 0;
        while (true) {
            if (hasRows) {
                ResultSet rs = st.getResultSet();
                ResultSetMetaData md = rs.getMetaData();
                List<String> cols = new ArrayList<>();
                for (int i = 1; i <= md.getColumnCount(); i++) cols.add(md.getColumnLabel(i) + ":" + md.getColumnTypeName(i));
                System.out.println(label + " " + n + " columns " + String.join(",", cols));
                while (rs.next()) {
                    List<String> vals = new ArrayList<>();
                    for (int i = 1; i <= md.getColumnCount(); i++) {
                        String v = rs.getString(i);
                        vals.add(v == null ? "NULL" : v);
                    }
                    System.out.println(label + " " + n + " " + String.join("|", vals));
                }
            } else if (st.getUpdateCount() == -1) {
                break;
            } else {
                System.out.println(label + " " + n + " affected " + st.getUpdateCount());
            }
            n++;
            hasRows = st.getMoreResults();
        }
    }

    public static void main(String[] args) throws Exception {
        String url = "jdbc:mariadb://" + System.getenv("RELAY_HOST") + ":" + System.getenv("RELAY_PORT")
                + "/" + System.getenv("RELAY_DB") + "?useServerPrepStmts=true&allowMultiQueries=true&allowLocalInfile=true";
        try (Connection c = DriverManager.getConnection(url, System.getenv("RELAY_USER"), System.getenv("RELAY_PASSWORD"))) {
            Statement st = c.createStatement();
            st.execute("CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(20), d DECIMAL(10,2), b VARBINARY(8), j JSON, ts DATETIME(3))");
            PreparedStatement ins = c.prepareStatement("INSERT INTO t (v, d, b, j, ts) VALUES (?, ?, ?, ?, ?)", Statement.RETURN_GENERATED_KEYS);
            Object[][] rows = {
                {"a", "1.50", new byte[] {0, (byte) 255}, "{\"k\": 1}", "2026-11-26 10:00:00.123"},
                {"\u00e9", null, null, null, null},
                {"c", "-2.25", new byte[] {}, "[1, 2]", "2026-01-01 00:00:00"}};
            for (Object[] r : rows) {
                ins.setString(1, (String) r[0]);
                ins.setString(2, (String) r[1]);
                ins.setBytes(3, (byte[]) r[2]);
                ins.setString(4, (String) r[3]);
                ins.setString(5, (String) r[4]);
                ins.executeUpdate();
                ResultSet k = ins.getGeneratedKeys();
                k.next();
                System.out.println("insert id " + k.getLong(1));
            }
            ins.close();
            show("select", st, st.execute("SELECT id, v, d, HEX(b), j, ts FROM t ORDER BY id"));
            PreparedStatement sel = c.prepareStatement("SELECT id, v, d, ts FROM t WHERE id > ? ORDER BY id");
            sel.setInt(1, 1);
            show("param select", sel, sel.execute());
            st.execute("CREATE PROCEDURE p() BEGIN SELECT COUNT(*) AS n FROM t; SELECT v FROM t ORDER BY id; END");
            show("call", st, st.execute("CALL p()"));
            show("multi", st, st.execute("SELECT 1 AS one; SELECT 2 AS two"));
            c.setAutoCommit(false);
            st.execute("INSERT INTO t (v) VALUES ('gone')");
            c.rollback();
            c.setAutoCommit(true);
            show("after rollback", st, st.execute("SELECT COUNT(*) FROM t"));
            try {
                st.execute("INSERT INTO t (id, v) VALUES (1, 'dup')");
                System.out.println("duplicate accepted");
            } catch (SQLException e) {
                System.out.println("error " + e.getErrorCode());
            }
            show("cast", st, st.execute("SELECT CAST('12abc' AS INT)"));
            show("warnings", st, st.execute("SHOW WARNINGS"));
            System.out.println("loaded " + st.executeUpdate("LOAD DATA LOCAL INFILE '" + System.getenv("MATRIX_CSV") + "' INTO TABLE t FIELDS TERMINATED BY ',' (v, d)"));
            show("after load", st, st.execute("SELECT COUNT(*), SUM(d) FROM t"));
            show("empty", st, st.execute("SELECT v FROM t WHERE 0"));
        }
        System.out.println("done");
    }
}
