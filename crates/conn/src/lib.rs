//! Where to connect and how, the way the mysql client does it.
//!
//! [`ConnArgs`] are the shared flags; [`resolve()`] applies option files,
//! a DSN and the environment in the documented precedence and yields a
//! [`Target`]; [`Target::connect`] opens a driver connection with the chosen
//! TLS mode, [`Target::dial`] logs in with our own handshake (one handshake
//! for PREFERRED) for the text-protocol client of `sqlfleet query`. Passwords travel as [`Secret`]s, which never print.

pub mod addr;
mod args;
pub mod charset;
mod client_cert;
pub mod codes;
mod dial;
pub mod dsn;
mod file_error;
pub mod home;
mod open;
pub mod optfile;
pub mod quote;
pub mod read_only;
pub mod resolve;
pub mod secret;
pub mod text;
pub mod tls;
pub mod tls_policy;

pub use args::{normalize_argv, ConnArgs};
pub use dsn::Dsn;
pub use file_error::{at_line, FileError};
pub use open::{ConnectError, Stage};
pub use resolve::{
    resolve, resolve_interactive, resolve_interactive_traced, resolve_traced, Endpoint, Env,
    Origin, PasswordSpec, PlaceError, ResolveError, Target,
};
pub use secret::Secret;
pub use tls::SslMode;
