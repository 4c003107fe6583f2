//! An online upgrade driven through the two managers alone, as the operator will drive it: the
//! old primary's manager publishes, freezes, confirms and unpublishes; the new side's manager
//! copies in the background (reaching the old primary as `tusk_upgrade` with the certificate
//! mounted beside its CA), reports its progress and finishes. No SQL from the test but its
//! writes and checks.

mod common;

use std::time::Duration;

use common::upgrade::*;
use common::*;
use tusk_contract::upgrade_source::{
    CONFIRMED_PATH, Confirmation, FREEZE_PATH, Frozen, THAW_PATH, UNPUBLISH_PATH,
};
use tusk_contract::upgrade_target::{COPY_PATH, CopyState, FINISH_PATH, Finished};

#[test]
fn the_managers_carry_a_database_to_the_new_side_and_the_old_keeps_nothing() {
    let (mut old, mut new) = old_and_new();
    let primary = old.member("demo-0");
    sql(
        primary,
        "appdb",
        "CREATE TABLE items (id bigserial PRIMARY KEY, note text);
         INSERT INTO items (note) SELECT 'before' FROM generate_series(1, 1000);",
    );
    let (_, body) = publish_for_copy(primary);

    // Without the upgrade certificate the copy fails, and says why.
    let new_tls = new.dir.path().join("tls");
    for file in ["upgrade.crt", "upgrade.key"] {
        std::fs::remove_file(new_tls.join(file)).expect("the new side's own, unused");
    }
    let target = new.member("demo-0");
    let (code, answer) = http_post(target.status_port, COPY_PATH, &body);
    assert_eq!(code, 202, "{answer}");
    wait_for("the copy to fail", Duration::from_secs(30), || {
        progress(target).state == CopyState::Failed
    });
    let failed = progress(target);
    assert!(
        (failed.message.as_deref()).is_some_and(|m| m.contains("upgrade certificate")),
        "{failed:?}"
    );

    hand_over_the_upgrade_certificate(&old, &new);
    // A restore that fails leaves nothing behind (one transaction), and the copy runs again.
    let target = new.member("demo-0");
    sql(target, "appdb", "CREATE TABLE items (id int)");
    let (code, answer) = http_post(target.status_port, COPY_PATH, &body);
    assert_eq!(code, 202, "{answer}");
    wait_for("the restore to fail", Duration::from_secs(30), || {
        progress(target).state == CopyState::Failed
    });
    let failed = progress(target);
    assert!(
        (failed.message.as_deref()).is_some_and(|m| m.contains("already exists")),
        "{failed:?}"
    );
    assert_eq!(
        sql(
            target,
            "appdb",
            "SELECT count(*) FROM pg_class WHERE relname = 'items_id_seq'"
        ),
        "0",
        "nothing of the failed restore"
    );
    sql(target, "appdb", "DROP TABLE items");
    let (code, answer) = http_post(target.status_port, COPY_PATH, &body);
    assert_eq!(code, 202, "{answer}");
    wait_for("every table copied", Duration::from_secs(120), || {
        progress(target).synchronized()
    });
    let (code, _) = http_post(target.status_port, COPY_PATH, &body);
    assert_eq!(code, 202, "asked again while following: left as it is");
    assert_eq!(progress(target).state, CopyState::Following);

    let primary = old.member("demo-0");
    sql(primary, "appdb", "INSERT INTO items (note) VALUES ('last')");
    let frozen: Frozen = post(primary, FREEZE_PATH, "");
    let confirm = format!(r#"{{"lsn": "{}"}}"#, frozen.lsn);
    wait_for("the new side to confirm", Duration::from_secs(60), || {
        post::<Confirmation>(primary, CONFIRMED_PATH, &confirm).confirmed()
    });
    let target = new.member("demo-0");
    let finished: Finished = post(target, FINISH_PATH, &body);
    assert_eq!(finished.sequences, 1, "items_id_seq");
    assert_eq!(sql(target, "appdb", "SELECT count(*) FROM items"), "1001");
    assert_eq!(
        sql(
            target,
            "appdb",
            "INSERT INTO items (note) VALUES ('new') RETURNING id"
        ),
        "1002"
    );
    assert_eq!(
        sql(
            target,
            "appdb",
            "SELECT count(*) FROM pg_subscription UNION ALL \
             SELECT count(*) FROM pg_namespace WHERE nspname = 'tusk_upgrade'"
        ),
        "0\n0",
        "detached, and the schema copy's mark gone"
    );

    let primary = old.member("demo-0");
    let _: () = post(primary, UNPUBLISH_PATH, "");
    let _: () = post(primary, THAW_PATH, "");
    assert_eq!(
        sql(
            primary,
            "postgres",
            "SELECT count(*) FROM pg_replication_slots"
        ),
        "0"
    );
}
