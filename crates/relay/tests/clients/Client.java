// MariaDB Connector/J through the relay, with server-side prepared
// statements (useServerPrepStmts), transactions, an error.
import java.sql.*;

public class Client {
    public static void main(String[] args) throws Exception {
        String url = "jdbc:mariadb://" + System.getenv("RELAY_HOST") + ":" + System.getenv("RELAY_PORT")
                + "/" + System.getenv("RELAY_DB") + "?useServerPrepStmts=true";
        try (Connection c = DriverManager.getConnection(url, System.getenv("RELAY_USER"), System.getenv("RELAY_PASSWORD"))) {
            Statement st = c.createStatement();
            st.execute("CREATE TABLE lang_java (id INT PRIMARY KEY, s VARCHAR(50), n DOUBLE)");
            PreparedStatement ins = c.prepareStatement("INSERT INTO lang_java VALUES (?, ?, ?)");
            Object[][] rows = {{1, "a", 1.5}, {2, null, 2.5}, {3, "c'q\u00e9", 3.5}};
            for (Object[] r : rows) {
                ins.setInt(1, (Integer) r[0]);
                if (r[1] == null) ins.setNull(2, Types.VARCHAR); else ins.setString(2, (String) r[1]);
                ins.setDouble(3, (Double) r[2]);
                ins.executeUpdate();
            }
            ins.close();
            c.setAutoCommit(false);
            st.execute("INSERT INTO lang_java VALUES (4, 'x', 0)");
            c.rollback();
            st.execute("INSERT INTO lang_java VALUES (5, 'y', 0)");
            c.commit();
            c.setAutoCommit(true);
            ResultSet rs = st.executeQuery("SELECT COUNT(*) FROM lang_java");
            rs.next();
            int n = rs.getInt(1);
            PreparedStatement sel = c.prepareStatement("SELECT s, n FROM lang_java WHERE id = ?");
            sel.setInt(1, 3);
            rs = sel.executeQuery();
            rs.next();
            if (!rs.getString(1).equals("c'q\u00e9") || rs.getDouble(2) != 3.5) throw new Exception("wrong row");
            try {
                st.executeQuery("SELECT * FROM missing_table");
                throw new Exception("no error for a missing table");
            } catch (SQLException e) {
                if (e.getErrorCode() != 1146) throw e;
            }
            st.executeQuery("SELECT 1").close();
            // A result streamed two rows at a time (fetch size).
            PreparedStatement cur = c.prepareStatement("SELECT id FROM lang_java ORDER BY id");
            cur.setFetchSize(2);
            rs = cur.executeQuery();
            int seen = 0, sum = 0;
            while (rs.next()) { seen++; sum += rs.getInt(1); }
            rs.close();
            cur.close();
            if (seen != n || sum != 1 + 2 + 3 + 5) throw new Exception("cursor read " + seen + " rows, sum " + sum);
            System.out.println("OK " + n);
        }
    }
}
