// MariaDB Connector/J: the connect-time variable reads in RELAY_VARS_FILE
// on two connections one after the other, each column's metadata and
// value printed (the output must be the same directly and through the
// relay, which answers the second connection's reads itself).
import java.nio.file.*;
import java.sql.*;

public class Vars {
    public static void main(String[] args) throws Exception {
        String url = "jdbc:mariadb://" + System.getenv("RELAY_HOST") + ":" + System.getenv("RELAY_PORT") + "/";
        java.util.List<String> stmts = Files.readAllLines(Paths.get(System.getenv("RELAY_VARS_FILE")));
        for (int n = 0; n < 2; n++) {
            try (Connection c = DriverManager.getConnection(url, System.getenv("RELAY_USER"), System.getenv("RELAY_PASSWORD"))) {
                Statement st = c.createStatement();
                for (String s : stmts) {
                    if (s.isEmpty()) continue;
                    ResultSet rs = st.executeQuery(s);
                    ResultSetMetaData m = rs.getMetaData();
                    for (int i = 1; i <= m.getColumnCount(); i++) {
                        System.out.println(n + " " + m.getColumnName(i) + " " + m.getColumnLabel(i) + " "
                                + m.getColumnTypeName(i) + " " + m.getColumnType(i) + " " + m.getPrecision(i) + " "
                                + m.getScale(i) + " " + m.getColumnDisplaySize(i) + " " + m.isNullable(i) + " "
                                + m.getColumnClassName(i));
                    }
                    while (rs.next()) {
                        StringBuilder b = new StringBuilder(n + " row");
                        for (int i = 1; i <= m.getColumnCount(); i++) b.append(" [").append(rs.getString(i)).append("]");
                        System.out.println(b);
                    }
                    rs.close();
                }
            }
        }
    }
}
