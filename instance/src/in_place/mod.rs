//! The instance side of an in-place major-version upgrade (`spec.upgrade.method: inPlace`,
//! docs/src/design/major-upgrades.md, "In place"): the old major's installation carried into
//! the new image by an init container, and `pg_upgrade --link` of the stopped PGDATA.

pub mod installation;
pub mod run;
pub mod statistics;
