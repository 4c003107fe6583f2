//! Roles and databases declared in the spec, on real pods, as `samples/postgresql-app.yaml`
//! declares them: the owner and the reader log in with the passwords Tusk generated, the reader
//! reads and cannot write, a password rotated in its Secret works within seconds (the time is
//! printed), and a role taken out of the spec can no longer log in. No pod restarts.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams};
use tusk_e2e::login::{login, logs_in_within};
use tusk_e2e::{Ctx, Result, ensure, say, scenario};

const NAME: &str = "webshop";

#[scenario]
async fn the_samples_declared_roles_and_database_work_on_real_pods(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    ctx.apply_sample("postgresql-app.yaml").await?;
    ctx.wait_ready(&[NAME]).await?;
    ctx.wait_condition_within(&ctx.ns, NAME, "Declared", "True", Duration::from_secs(120))
        .await?;
    let pod = format!("{NAME}-0");
    let before = ctx.pod_state(&pod).await?;
    let owner_password = ctx
        .secret_value("webshop-role-shop-owner", "password")
        .await?;
    let reader_password = ctx
        .secret_value("webshop-role-shop-reader", "password")
        .await?;
    let limit = Duration::from_secs(60);
    let owner = (NAME, "shop_owner", "shop");
    let owner = logs_in_within(&ctx, owner, &owner_password, "shop_owner", limit).await?;
    owner
        .batch_execute(
            "CREATE TABLE sales.orders (id int PRIMARY KEY, item text); \
             INSERT INTO sales.orders VALUES (1, 'walrus tusk')",
        )
        .await?;
    let similar: f32 = owner
        .query_one("SELECT similarity('tusk', 'tusks')", &[])
        .await?
        .get(0);
    ensure!(similar > 0.5, "pg_trgm's similarity: {similar}");
    let reader = (NAME, "shop_reader", "shop");
    let session = logs_in_within(&ctx, reader, &reader_password, "shop_reader", limit).await?;
    let rows: i64 = session
        .query_one("SELECT count(*) FROM sales.orders", &[])
        .await?
        .get(0);
    ensure!(rows == 1, "shop_reader reads {rows} rows");
    let write = session
        .batch_execute("INSERT INTO sales.orders VALUES (2, 'x')")
        .await;
    ensure!(
        write
            .as_ref()
            .is_err_and(|e| format!("{e:?}").contains("permission denied")),
        "shop_reader could write: {write:?}"
    );

    // A password rotated in the generated Secret.
    let rotated = format!("Rotated{}", ctx.ns.replace('-', ""));
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let patch = serde_json::json!({"stringData": {"password": rotated}});
    secrets
        .patch(
            "webshop-role-shop-reader",
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    let changed = Instant::now();
    logs_in_within(&ctx, reader, &rotated, "the rotated password", limit).await?;
    let took = changed.elapsed();
    let old = login(&ctx, NAME, "shop_reader", "shop", &reader_password)
        .await?
        .map(drop);
    ensure!(
        old.as_ref()
            .is_err_and(|e| e.contains("password authentication failed")),
        "the old password: {old:?}"
    );

    // Taken out of the spec: it can no longer log in, and the status says so.
    let roles = serde_json::json!({"spec": {"roles": [{"name": "shop_owner"}]}});
    ctx.postgresqls_in(&ctx.ns)
        .patch(NAME, &PatchParams::default(), &Patch::Merge(&roles))
        .await?;
    ctx.wait_status_in(&ctx.ns, NAME, "shop_reader Disabled", |status| {
        let found = status
            .declared
            .iter()
            .any(|o| o.name == "shop_reader" && o.state == "Disabled");
        (found, format!("{:?}", status.declared))
    })
    .await?;
    let refused = login(&ctx, NAME, "shop_reader", "shop", &rotated)
        .await?
        .map(drop);
    ensure!(refused.is_err(), "a role no longer declared still logs in");
    let after = ctx.pod_state(&pod).await?;
    ensure!(
        after.restarts() == before.restarts() && after.uid == before.uid,
        "the pod restarted or was replaced"
    );
    say(format!(
        "samples/postgresql-app.yaml: shop_owner and shop_reader log in with their generated \
         passwords, pg_trgm and schema sales in database shop, the reader cannot write; a \
         password rotated in its Secret logs in {:.1}s later (goal ≤ 10 s), the old one \
         refused; shop_reader out of the spec: Disabled, refused ({}); 0 restarts",
        took.as_secs_f64(),
        refused.err().unwrap_or_default()
    ));
    Ok(())
}
