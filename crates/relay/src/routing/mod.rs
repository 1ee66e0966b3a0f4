//! Which backend a statement goes to: the route kinds ([`Route`]), query
//! rules and digests ([`rules`]), the result cache's rules ([`cache_rules`]). A statement's route kind and what a
//! replica read waits for are decided in [`read`] (the session gathers
//! the facts and carries the answer out); which backend of a route serves
//! in [`pick`] (the pool gathers the backends' states).

pub mod cache_rules;
pub mod defaults;
pub mod galera;
pub mod pick;
pub mod read;
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
