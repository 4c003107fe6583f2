//! The roles Tusk's programs log in as over the network (issue 47, defect 4): a primary's
//! manager makes them with only what their work needs, puts them back on a cluster an older
//! manager made, and lets the backup role into databases created (or locked) since.

mod common;

use std::time::Duration;

use common::*;

/// The attributes, memberships and grants of the machine roles, one line each.
const FACTS: &str = "SELECT string_agg(line, ' | ' ORDER BY line) FROM (\
    SELECT rolname || ':' || rolsuper || rolreplication || rolbypassrls || rolcanlogin AS line \
      FROM pg_roles WHERE rolname IN ('tusk_replication', 'tusk_rewind', 'tusk_backup') \
    UNION ALL SELECT 'reads all data:' || pg_has_role('tusk_backup', 'pg_read_all_data', 'MEMBER') \
    UNION ALL SELECT 'rewind reads files:' \
      || has_function_privilege('tusk_rewind', 'pg_read_binary_file(text, bigint, bigint, boolean)', 'EXECUTE') \
    UNION ALL SELECT 'replication reads files:' \
      || has_function_privilege('tusk_replication', 'pg_read_binary_file(text)', 'EXECUTE') \
    UNION ALL SELECT 'backup settings:' || coalesce(array_to_string(setconfig, ','), '') \
      FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole WHERE r.rolname = 'tusk_backup'\
    ) facts";

/// Superuser, replication, bypass row security, login: each role only what its work needs.
const EXPECTED: &str = "backup settings:lo_compat_privileges=on | reads all data:true | \
    replication reads files:false | rewind reads files:true | tusk_backup:falsefalsetruetrue | \
    tusk_replication:falsetruefalsetrue | tusk_rewind:falsefalsefalsetrue";

#[test]
fn a_primary_makes_the_machine_roles_and_puts_them_back_on_an_older_cluster() {
    let mut cluster = single_primary();
    let primary = &cluster.members[0];
    assert_eq!(primary.psql(FACTS).unwrap(), EXPECTED);

    // A cluster an older manager made: no tusk_backup, no rewind grants. The next manager to
    // run the primary makes them.
    primary
        .psql(
            "DROP ROLE tusk_backup; REVOKE EXECUTE ON FUNCTION \
             pg_read_binary_file(text, bigint, bigint, boolean) FROM tusk_rewind",
        )
        .unwrap();
    let member = cluster.member("demo-0");
    member.stop();
    member.start();
    member.wait_ready_as("primary", Duration::from_secs(60));
    wait_for_value(member, FACTS, EXPECTED, Duration::from_secs(30));

    // A database the backup role may not connect to (CONNECT revoked from PUBLIC, as a
    // hardening guide says) is opened to it, and to it alone, within a few seconds.
    member.psql("CREATE DATABASE locked").unwrap();
    member
        .psql("REVOKE CONNECT ON DATABASE locked FROM PUBLIC")
        .unwrap();
    let may = "SELECT has_database_privilege('tusk_backup', 'locked', 'CONNECT') \
               || ',' || has_database_privilege('app', 'locked', 'CONNECT')";
    wait_for_value(member, may, "true,false", Duration::from_secs(30));
}
