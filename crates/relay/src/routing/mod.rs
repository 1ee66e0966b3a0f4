//! Which backend a statement goes to: the route kinds ([`Route`]), query
//! rules and digests ([`rules`]). The per-statement decision is made in
//! `frontend::session::route` from these and the health of each backend;
//! the pool picks the least busy backend a route allows.

pub mod galera;
pub mod pick;
pub mod rules;

/// Where a statement may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// No routing: the least busy backend.
    Any,
    /// The writable backend.
    Primary,
    /// A replica (of no named group) within the lag limit, else the primary.
    Replica,
    /// A replica of the named group (index into the distinct group names
    /// in backend order), else the primary.
    Group(usize),
}

impl Route {
    /// A replica may answer.
    pub fn is_replica(self) -> bool {
        matches!(self, Route::Replica | Route::Group(_))
    }
}
