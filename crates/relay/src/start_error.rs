//! Why a relay did not start: which part (a listener, the metrics page,
//! either TLS direction), and the cause. Made by `Relay::new` and
//! `run::start` alike.

/// Why a relay did not start: which part, and the cause.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("listening on {addr}: {source}")]
    Listen {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("metrics listener {addr}: {source}")]
    Metrics {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    /// The clients' TLS (certificate, key).
    #[error("client TLS: {0}")]
    ClientTls(#[source] sqlfleet_conn::tls::TlsError),
    /// TLS towards the backends (the CA).
    #[error("backend TLS: {0}")]
    BackendTls(#[source] sqlfleet_conn::tls::TlsError),
}
