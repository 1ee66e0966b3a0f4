//! Promoting a replica: it stops replicating and becomes writable, the
//! other replicas (and the old primary, if it still runs) replicate from it
//! with GTID, and `sandbox.toml` and the client files follow the new roles.

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

use crate::error::{Result, SandboxError};
use crate::meta::Role;
use crate::{node, setup, Sandbox};

/// What a promotion did.
#[derive(Debug, Clone)]
pub struct PromoteReport {
    pub new_primary: String,
    pub old_primary: String,
    /// Nodes now replicating from the new primary.
    pub repointed: Vec<String>,
    /// Nodes that were not running (they replicate once started).
    pub not_running: Vec<String>,
    pub elapsed: Duration,
}

impl Sandbox {
    /// Makes replica `name` the primary.
    pub async fn promote(&mut self, name: &str) -> Result<PromoteReport> {
        let t0 = Instant::now();
        let Some(pos) = self.meta.nodes.iter().position(|n| n.name == name) else {
            return Err(SandboxError::Sql {
                node: self.meta.name.clone(),
                what: format!(
                    "no node '{name}' (it has {})",
                    self.meta
                        .nodes
                        .iter()
                        .map(|n| n.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        };
        if self.meta.nodes[pos].role == Role::Primary {
            return Err(SandboxError::Sql {
                node: self.label(&self.meta.nodes[pos]),
                what: "already the primary".into(),
            });
        }
        let password = self.password()?;
        let new = self.meta.nodes[pos].clone();
        let label = self.label(&new);
        let nl = self.layout.node(&new);
        if node::running_pid(&nl).is_none() {
            return Err(SandboxError::Sql {
                node: label,
                what: "not running: start it with 'sqlfleet sandbox up' first".into(),
            });
        }
        let mut c = setup::root_conn(&label, &nl, Some(&password)).await?;
        let e = |w: mysql_async::Error| SandboxError::Sql {
            node: label.clone(),
            what: w.to_string(),
        };
        c.query_drop("STOP SLAVE").await.map_err(e)?;
        c.query_drop("RESET SLAVE ALL").await.map_err(e)?;
        c.query_drop("SET GLOBAL read_only = 0").await.map_err(e)?;
        let _ = c.disconnect().await;

        let old_primary = self.meta.primary().name.clone();
        for n in &mut self.meta.nodes {
            n.role = if n.name == new.name {
                Role::Primary
            } else {
                Role::Replica
            };
        }
        // The primary comes first in sandbox.toml.
        let promoted = self.meta.nodes.remove(pos);
        self.meta.nodes.insert(0, promoted);
        self.meta.save(&self.layout.meta())?;
        self.write_client_files(&password)?;

        let mut repointed = Vec::new();
        let mut not_running = Vec::new();
        for n in self
            .meta
            .nodes
            .clone()
            .iter()
            .filter(|n| n.role == Role::Replica)
        {
            let nl = self.layout.node(n);
            let label = self.label(n);
            if node::running_pid(&nl).is_none() {
                not_running.push(n.name.clone());
                continue;
            }
            if n.name == old_primary {
                let mut c = setup::root_conn(&label, &nl, Some(&password)).await?;
                c.query_drop("SET GLOBAL read_only = 1")
                    .await
                    .map_err(|w| SandboxError::Sql {
                        node: label.clone(),
                        what: w.to_string(),
                    })?;
                let _ = c.disconnect().await;
            }
            setup::start_replication(&label, &nl, &password, &new).await?;
            repointed.push(n.name.clone());
        }
        Ok(PromoteReport {
            new_primary: new.name,
            old_primary,
            repointed,
            not_running,
            elapsed: t0.elapsed(),
        })
    }
}
