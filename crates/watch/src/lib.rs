//! `sqlfleet watch`: an agentless fleet monitor.
//!
//! Servers come from the same inventory as `sqlfleet query` (fanout's host
//! lists, conn's targets); each is checked every interval over one kept
//! connection (`probe`), host figures stream over one SSH session per host
//! (`ssh`), rules with hold times turn conditions into incidents
//! (`rules`), incidents become one message per batch on every channel
//! (`notify`), and the screens draw the shared fleet view (`ui`). What
//! the monitor sees is kept (`record` into `history`, a SQLite file) and
//! served to browsers and Prometheus (`web`), with the numbers every
//! consumer shares in `figures`. Which login and SSH pipe each server gets
//! (store, config, tags) is decided in `watched`; `start` puts a running
//! watcher together.

pub mod askpass;
pub mod config;
pub mod creds;
mod figures;
pub mod history;
pub mod monitor;
pub mod notify;
mod probe;
pub mod record;
pub mod rules;
pub mod sample;
pub mod ssh;
pub mod start;
pub mod statements;
mod trend;
pub mod ui;
pub mod watched;
pub mod web;
mod when;
