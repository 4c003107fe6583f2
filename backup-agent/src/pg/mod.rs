//! PostgreSQL access: connection parameters, the startup check, catalog queries, client tools.

mod connect;
pub mod counts;
mod replication;
mod tools;

pub use connect::{DatabaseInfo, PgParams, ServerInfo, SslMode};
pub use replication::{ReplicationFacts, replication_facts};
pub use tools::{ToolOutput, parse_major, quote_conninfo, quote_ident, spawn_tool, tool_version};
