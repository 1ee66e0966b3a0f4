//! Where to connect and how, the way the mysql client does it.
//!
//! [`ConnArgs`] are the shared flags; [`resolve()`] applies option files,
//! a DSN and the environment in the documented precedence and yields a
//! [`Target`]; [`Target::connect`] opens a connection with the chosen TLS
//! mode. Passwords travel as [`Secret`]s, which never print.

pub mod addr;
pub mod args;
pub mod dsn;
pub mod home;
pub mod open;
pub mod optfile;
pub mod quote;
pub mod resolve;
pub mod secret;
pub mod text;
pub mod tls;

pub use args::{normalize_argv, ConnArgs};
pub use dsn::Dsn;
pub use open::ConnectError;
pub use resolve::{
    resolve, resolve_interactive, resolve_interactive_traced, resolve_traced, Endpoint, Env,
    Origin, PasswordSpec, ResolveError, Target,
};
pub use secret::Secret;
pub use tls::SslMode;
