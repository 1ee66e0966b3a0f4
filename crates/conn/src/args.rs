//! The connection flags every subcommand shares, spelled like the mysql
//! client's.
//!
//! `-h` is the host here, as in mysql; help is `--help` only.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::tls::SslMode;

/// The heading the connection flags share in `--help` (each field names it,
/// so the command's own options stay under "Options").
const CONN: &str = "Connection (as the mysql client: flags, then --dsn, option files, environment)";

#[derive(clap::Args, Debug, Clone, Default)]
pub struct ConnArgs {
    /// Server host name or IP (`localhost` means the Unix socket, as in mysql)
    #[arg(short = 'h', long, help_heading = CONN)]
    pub host: Option<String>,

    /// TCP port
    #[arg(short = 'P', long, help_heading = CONN)]
    pub port: Option<u16>,

    /// User name
    #[arg(short = 'u', long, help_heading = CONN)]
    pub user: Option<String>,

    /// Password; a bare -p or --password asks on the terminal. Prefer
    /// option files or MYSQL_PWD: a command line is visible to other users
    /// until sqlfleet masks it at start-up.
    #[arg(short = 'p', long, num_args = 0..=1, require_equals = true, value_name = "PASSWORD", help_heading = CONN)]
    pub password: Option<Option<String>>,

    /// Unix socket path
    #[arg(short = 'S', long, help_heading = CONN)]
    pub socket: Option<PathBuf>,

    /// Default database
    #[arg(short = 'D', long, help_heading = CONN)]
    pub database: Option<String>,

    /// Connection as a URL: mysql://user:pass@host:port/db?ssl-mode=..&socket=..
    #[arg(long, value_name = "URL", help_heading = CONN)]
    pub dsn: Option<String>,

    /// Read options from this file only (instead of /etc/my.cnf, /etc/mysql/my.cnf, ~/.my.cnf)
    #[arg(long, value_name = "FILE", help_heading = CONN)]
    pub defaults_file: Option<PathBuf>,

    /// Read this file after the global option files and before ~/.my.cnf
    #[arg(long, value_name = "FILE", help_heading = CONN)]
    pub defaults_extra_file: Option<PathBuf>,

    /// Read each option group under this suffix too ([client_SUFFIX], ...),
    /// as the stock client's --defaults-group-suffix (also
    /// MARIADB_GROUP_SUFFIX)
    #[arg(long, value_name = "SUFFIX", help_heading = CONN)]
    pub defaults_group_suffix: Option<String>,

    /// Read no option files
    #[arg(long, help_heading = CONN)]
    pub no_defaults: bool,

    /// Transport: tcp or socket (default: socket for localhost, as mysql)
    #[arg(long, value_parser = ["tcp", "socket"], ignore_case = true, help_heading = CONN)]
    pub protocol: Option<String>,

    /// DISABLED, PREFERRED (default), REQUIRED, VERIFY_CA or VERIFY_IDENTITY
    #[arg(long, value_name = "MODE", help_heading = CONN)]
    pub ssl_mode: Option<SslMode>,

    /// TLS where the server offers it (the default; the MariaDB client's --ssl)
    #[arg(long, conflicts_with_all = ["ssl_mode", "skip_ssl"], help_heading = CONN)]
    pub ssl: bool,

    /// Plain text, no TLS (the MariaDB client's --skip-ssl; --ssl-mode DISABLED)
    #[arg(long, conflicts_with_all = ["ssl_mode", "ssl_verify_server_cert"], help_heading = CONN)]
    pub skip_ssl: bool,

    /// TLS with the server's certificate checked against the CA and its
    /// name (the MariaDB client's switch; --ssl-mode VERIFY_IDENTITY)
    #[arg(long, conflicts_with = "ssl_mode", help_heading = CONN)]
    pub ssl_verify_server_cert: bool,

    /// CA certificate (PEM) for VERIFY_CA / VERIFY_IDENTITY
    #[arg(long, value_name = "FILE", help_heading = CONN)]
    pub ssl_ca: Option<PathBuf>,

    /// Client certificate (PEM) to show the server, for accounts made
    /// with REQUIRE X509, SUBJECT or ISSUER (as the mysql client)
    #[arg(long, value_name = "FILE", help_heading = CONN)]
    pub ssl_cert: Option<PathBuf>,

    /// The client certificate's private key (PEM) [default: read from the
    /// --ssl-cert file, as the MariaDB client does]
    #[arg(long, value_name = "FILE", help_heading = CONN)]
    pub ssl_key: Option<PathBuf>,

    /// Directory of CA certificates under OpenSSL's hashed names (HASH.0),
    /// beside or instead of --ssl-ca
    #[arg(long, value_name = "DIR", help_heading = CONN)]
    pub ssl_capath: Option<PathBuf>,

    /// Certificate revocation lists (PEM), checked with the server's
    /// certificate under VERIFY_CA / VERIFY_IDENTITY
    #[arg(long, value_name = "FILE", help_heading = CONN)]
    pub ssl_crl: Option<PathBuf>,

    /// Directory of revocation lists under OpenSSL's hashed names (HASH.r0)
    #[arg(long, value_name = "DIR", help_heading = CONN)]
    pub ssl_crlpath: Option<PathBuf>,

    /// TLS versions allowed, e.g. TLSv1.3 or TLSv1.2,TLSv1.3 (checked
    /// against the server's Ssl_version once logged in)
    #[arg(long, value_name = "LIST", help_heading = CONN)]
    pub tls_version: Option<String>,

    /// Ciphers allowed, by the names the server reports in Ssl_cipher,
    /// separated by ':' (checked once logged in)
    #[arg(long, value_name = "LIST", help_heading = CONN)]
    pub ssl_cipher: Option<String>,

    /// The connection's character set, as the mysql client's option
    /// (also `default-character-set` in option files) [default: utf8mb4;
    /// `auto` means utf8mb4 too]
    #[arg(long, value_name = "NAME", help_heading = CONN)]
    pub default_character_set: Option<String>,

    /// Connect to the local sandbox of this name (see `sqlfleet sandbox list`);
    /// used instead of option files, flags still override
    #[arg(long, value_name = "NAME", help_heading = CONN)]
    pub sandbox: Option<String>,
}

/// Rewrites the mysql-style attached password `-pSECRET` as
/// `--password=SECRET`, which is how clap can read it without taking a
/// following word as the password (in mysql, `-p word` prompts and `word`
/// is something else). Everything after `--` is left alone.
pub fn normalize_argv(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut passthrough = false;
    for a in args {
        if passthrough {
            out.push(a);
            continue;
        }
        if a == "--" {
            passthrough = true;
            out.push(a);
            continue;
        }
        match a.to_str() {
            Some(s) if s.len() > 2 && s.starts_with("-p") && !s.starts_with("-p=") => {
                let mut o = OsString::from("--password=");
                o.push(&s[2..]);
                out.push(o);
            }
            _ => out.push(a),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    #[command(disable_help_flag = true)]
    struct T {
        #[command(flatten)]
        conn: ConnArgs,
        rest: Vec<String>,
    }

    fn parse(args: &[&str]) -> T {
        let argv = normalize_argv(
            std::iter::once("t")
                .chain(args.iter().copied())
                .map(OsString::from),
        );
        T::try_parse_from(argv).expect("parses")
    }

    #[test]
    fn mysql_style_short_flags() {
        let t = parse(&[
            "-h", "db1", "-P3307", "-uroot", "-psecret", "-D", "shop", "-S/tmp/s",
        ]);
        assert_eq!(t.conn.host.as_deref(), Some("db1"));
        assert_eq!(t.conn.port, Some(3307));
        assert_eq!(t.conn.user.as_deref(), Some("root"));
        assert_eq!(t.conn.password, Some(Some("secret".into())));
        assert_eq!(t.conn.database.as_deref(), Some("shop"));
        assert_eq!(t.conn.socket, Some(PathBuf::from("/tmp/s")));
    }

    #[test]
    fn bare_p_prompts_and_does_not_eat_next_word() {
        let t = parse(&["-p", "dbname"]);
        assert_eq!(t.conn.password, Some(None));
        assert_eq!(t.rest, vec!["dbname".to_string()]);
        let t = parse(&["--password", "x"]);
        assert_eq!(t.conn.password, Some(None));
        let t = parse(&["--password=x y"]);
        assert_eq!(t.conn.password, Some(Some("x y".into())));
    }

    #[test]
    fn after_double_dash_untouched() {
        let v = normalize_argv(["a", "--", "-pfoo"].map(OsString::from));
        assert_eq!(v[2], OsString::from("-pfoo"));
    }
}
