//! A real PostgreSQL with the configuration and the certificates the operator writes: it
//! speaks TLS 1.3 only, and `sslmode=verify-full` holds through every name a client is given
//! (each Service and pod, short and qualified) and fails for any other name.

use std::collections::BTreeMap;
use std::os::unix::fs::{PermissionsExt, chown};
use std::path::Path;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use tusk::PostgreSQL;
use tusk::resources::ca_rotation::Lifetimes;
use tusk::resources::{Cluster, render_postgresql_conf, tls};

/// uid/gid of `postgres` when running as root (the server refuses root), else None.
fn postgres_ids() -> Option<(u32, u32)> {
    let root = std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false);
    let id = |flag: &str| {
        let out = Command::new("id")
            .args([flag, "postgres"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<u32>()
            .unwrap()
    };
    root.then(|| (id("-u"), id("-g")))
}

fn as_postgres(program: &str) -> Command {
    let mut cmd = Command::new(tusk_testkit::pg_bin_dir().join(program));
    if let Some((uid, gid)) = postgres_ids() {
        std::os::unix::process::CommandExt::uid(&mut cmd, uid);
        std::os::unix::process::CommandExt::gid(&mut cmd, gid);
    }
    cmd
}

fn write_owned(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    if let Some((uid, gid)) = postgres_ids() {
        chown(path, Some(uid), Some(gid)).unwrap();
    }
}

struct Server {
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn psql(conninfo: &str, ca: &Path) -> Output {
    Command::new(tusk_testkit::pg_bin_dir().join("psql"))
        .args([
            "-X",
            "-At",
            "-d",
            &format!(
                "{conninfo} sslrootcert={} user=app dbname=postgres",
                ca.display()
            ),
            "-c",
            "SELECT version FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
        ])
        .env("PGPASSWORD", "tls-test")
        .env("PGCONNECT_TIMEOUT", "5")
        .output()
        .unwrap()
}

#[test]
fn postgres_serves_tls13_only_and_verify_full_holds_for_every_name_it_is_given() {
    let pg: PostgreSQL = serde_json::from_value(serde_json::json!({
        "apiVersion": "tusk.dev/v1alpha1", "kind": "PostgreSQL",
        "metadata": {"name": "demo", "namespace": "prod", "uid": "1234-uid"},
        "spec": {"storage": {"size": "1Gi"}, "instances": 3},
    }))
    .unwrap();
    let cluster = Cluster::new(&pg).unwrap();
    let now = time::OffsetDateTime::now_utc();
    let lifetimes = Lifetimes::default();
    let ca = tls::issue_ca(&cluster, now, &lifetimes).unwrap();
    let validity = tls::Validity::leaf(now, &lifetimes, now + lifetimes.ca);
    let server = tls::issue_server(&cluster, "cluster.local", &ca, validity).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755)).unwrap();
    for sub in ["tls", "etc", "run", "data"] {
        std::fs::create_dir(root.join(sub)).unwrap();
        std::fs::set_permissions(root.join(sub), std::fs::Permissions::from_mode(0o700)).unwrap();
        if let Some((uid, gid)) = postgres_ids() {
            chown(root.join(sub), Some(uid), Some(gid)).unwrap();
        }
    }
    write_owned(&root.join("tls/tls.crt"), &server.cert, 0o644);
    write_owned(&root.join("tls/tls.key"), &server.key, 0o600);
    write_owned(&root.join("tls/ca.crt"), &ca.cert, 0o644);
    let client_ca = root.join("client-ca.crt");
    std::fs::write(&client_ca, &ca.cert).unwrap();

    // The operator's postgresql.conf and pg_hba.conf, with its directories moved here.
    let port = tusk_testkit::free_port();
    let conf = render_postgresql_conf(&BTreeMap::new(), None, None)
        .unwrap()
        .replace("/etc/tusk-tls", &root.join("tls").display().to_string())
        .replace("/etc/tusk", &root.join("etc").display().to_string())
        .replace(
            "/var/run/postgresql",
            &root.join("run").display().to_string(),
        )
        .replace("port = 5432", &format!("port = {port}"))
        .replace("listen_addresses = '*'", "listen_addresses = '127.0.0.1'");
    assert!(conf.contains("ssl = on") && conf.contains("ssl_min_protocol_version = 'TLSv1.3'"));
    write_owned(&root.join("etc/postgresql.conf"), &conf, 0o644);
    write_owned(
        &root.join("etc/pg_hba.conf"),
        // With rules of the user's, written to reach Tusk's roles too: none may (below).
        &tusk::resources::render_hba(
            true,
            false,
            &[
                "hostssl app reporting all cert".to_owned(),
                "hostssl all postgres,tusk_replication all scram-sha-256".to_owned(),
                "hostssl replication all all scram-sha-256".to_owned(),
            ],
        ),
        0o644,
    );
    write_owned(&root.join("etc/pg_ident.conf"), "", 0o644);

    let data = root.join("data");
    let init = as_postgres("initdb")
        .args([
            "-D",
            &data.display().to_string(),
            "-U",
            "postgres",
            "--auth=trust",
        ])
        .output()
        .unwrap();
    assert!(
        init.status.success(),
        "initdb: {}",
        String::from_utf8_lossy(&init.stderr)
    );
    let log = root.join("postgres.log");
    let log_file = std::fs::File::create(&log).unwrap();
    let mut server = Server {
        child: as_postgres("postgres")
            .args(["-D", &data.display().to_string()])
            .arg("-c")
            .arg(format!(
                "config_file={}",
                root.join("etc/postgresql.conf").display()
            ))
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file)
            .spawn()
            .unwrap(),
    };
    let socket = root.join("run").display().to_string();
    // SQL as postgres over the local socket (peer), as in a pod.
    let local = |sql: &str| {
        as_postgres("psql")
            .args([
                "-X",
                "-h",
                &socket,
                "-p",
                &port.to_string(),
                "-U",
                "postgres",
            ])
            .args(["-c", sql])
            .output()
            .unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let set = local("ALTER ROLE postgres PASSWORD 'tls-test'");
        if set.status.success() {
            break;
        }
        if let Ok(Some(status)) = server.child.try_wait() {
            panic!(
                "postgres exited {status}: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        assert!(
            Instant::now() < deadline,
            "postgres never answered: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    for sql in [
        "CREATE ROLE app LOGIN PASSWORD 'tls-test'",
        "CREATE DATABASE app OWNER app",
    ] {
        let made = local(sql);
        assert!(made.status.success(), "{made:?}");
    }
    let at = |host: &str, extra: &str| {
        psql(
            &format!("host={host} hostaddr=127.0.0.1 port={port} {extra}"),
            &client_ca,
        )
    };
    for host in [
        "demo-rw",
        "demo-rw.prod",
        "demo-rw.prod.svc",
        "demo-rw.prod.svc.cluster.local",
        "demo-ro.prod.svc",
        "demo-r.prod.svc.cluster.local",
        "demo-0.demo-hl.prod.svc",
        "demo-2.demo-hl.prod.svc.cluster.local",
    ] {
        let out = at(host, "sslmode=verify-full");
        assert!(
            out.status.success(),
            "verify-full as {host}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "TLSv1.3",
            "{host}"
        );
    }

    let out = at("db.example.org", "sslmode=verify-full");
    let error = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && error.contains("does not match host name"),
        "{error}"
    );

    let out = at(
        "demo-rw",
        "sslmode=require ssl_max_protocol_version=TLSv1.2",
    );
    let error = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a TLS 1.2 client got in");
    // The server's refusal of the version, not any TLS error (a certificate problem is one).
    let lower = error.to_lowercase();
    assert!(
        lower.contains("protocol version") || lower.contains("unsupported protocol"),
        "{error}"
    );

    // Without TLS: refused by pg_hba.conf's first network rule, with the right password, for
    // clients and for replication, from any address (127.0.0.1 included).
    for extra in ["sslmode=disable", "sslmode=disable replication=true"] {
        let out = at("demo-rw", extra);
        let error = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && error.contains("no encryption"),
            "{extra}: {error}"
        );
    }

    // The replication role needs both its password and the certificate Tusk issued it.
    let created = local("CREATE ROLE tusk_replication REPLICATION LOGIN PASSWORD 'repl-test'");
    assert!(created.status.success(), "{created:?}");
    let replication = tls::issue_replication(&cluster, &ca, validity).unwrap();
    let (cert, key) = (root.join("replication.crt"), root.join("replication.key"));
    std::fs::write(&cert, &replication.cert).unwrap();
    std::fs::write(&key, &replication.key).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let with_cert = format!("sslcert={} sslkey={}", cert.display(), key.display());
    // psql as `user` with `password`, `conninfo` added to the connection string.
    let as_role = |user: &str, password: &str, conninfo: &str, commands: &[&str]| {
        let mut psql = Command::new(tusk_testkit::pg_bin_dir().join("psql"));
        psql.args(["-X", "-At", "-d"]).arg(format!(
            "host=demo-rw hostaddr=127.0.0.1 port={port} user={user} \
             sslmode=verify-full sslrootcert={} {conninfo}",
            client_ca.display()
        ));
        for command in commands {
            psql.args(["-c", command]);
        }
        psql.env("PGPASSWORD", password)
            .env("PGCONNECT_TIMEOUT", "5")
            .output()
            .unwrap()
    };
    let stream = |password: &str, extra: &str| {
        as_role(
            "tusk_replication",
            password,
            &format!("replication=true {extra}"),
            &["IDENTIFY_SYSTEM"],
        )
    };
    let out = stream("repl-test", "");
    let error = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && error.contains("certificate"),
        "the password alone got in: {error}"
    );
    let out = stream("wrong", &with_cert);
    let error = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && error.contains("password authentication failed"),
        "the certificate alone got in: {error}"
    );
    let out = stream("repl-test", &with_cert);
    assert!(
        out.status.success(),
        "both: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The role only replicates (issue 47, defect 1): no ordinary session, with its password
    // or with both, where it could create a slot that keeps WAL until the volume fills, drop a
    // standby's, or decode every row change.
    let session = |extra: &str| {
        let slot = "SELECT pg_create_physical_replication_slot('stolen')";
        as_role(
            "tusk_replication",
            "repl-test",
            &format!("dbname=postgres {extra}"),
            &[slot],
        )
    };
    for extra in ["", with_cert.as_str()] {
        let out = session(extra);
        let error = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && error.contains("pg_hba.conf rejects"),
            "an ordinary session as tusk_replication ({extra:?}): {error}"
        );
    }
    // What a base backup reads of the server, it reads over replication (backup-agent).
    let out = as_role(
        "tusk_replication",
        "repl-test",
        &format!("replication=true {with_cert}"),
        &["SHOW wal_segment_size", "SHOW server_version_num"],
    );
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && shown.starts_with("16MB\n15"),
        "{shown} {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The roles that borrow the replication credential (issue 47, defect 4), made here as the
    // instance manager makes them: each needs the password and a certificate of the CA, and
    // gets in only where its work is.
    for role in ["tusk_rewind", "tusk_backup"] {
        let made = local(&format!("CREATE ROLE {role} LOGIN PASSWORD 'repl-test'"));
        assert!(made.status.success(), "{made:?}");
    }
    let refused = |out: &Output, needle: &str, what: &str| {
        let error = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && error.contains(needle),
            "{what}: {error}"
        );
    };
    let whoami = ["SELECT current_user"];
    for (role, database) in [("tusk_rewind", "postgres"), ("tusk_backup", "app")] {
        let conninfo = format!("dbname={database}");
        let out = as_role(role, "repl-test", &conninfo, &whoami);
        refused(&out, "certificate", &format!("{role}'s password alone"));
        let out = as_role(
            role,
            "repl-test",
            &format!("{conninfo} {with_cert}"),
            &whoami,
        );
        let user = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            user.trim(),
            role,
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = as_role(
        "tusk_rewind",
        "repl-test",
        &format!("dbname=app {with_cert}"),
        &whoami,
    );
    refused(
        &out,
        "pg_hba.conf rejects",
        "tusk_rewind outside database postgres",
    );

    // The superuser: its password alone is refused over the network; with the certificate a
    // restore is given (it names `postgres`), it gets in. The replication certificate does not
    // stand in for it.
    let out = as_role("postgres", "tls-test", "dbname=postgres", &whoami);
    refused(&out, "certificate", "the superuser's password alone");
    let out = as_role(
        "postgres",
        "tls-test",
        &format!("dbname=postgres {with_cert}"),
        &whoami,
    );
    // (PostgreSQL reports the certificate's wrong name as the method's failure.)
    refused(
        &out,
        "authentication failed",
        "the superuser with another role's certificate",
    );
    let restore = tls::issue_superuser(&cluster, &ca, validity).unwrap();
    let (cert, key) = (root.join("restore.crt"), root.join("restore.key"));
    std::fs::write(&cert, &restore.cert).unwrap();
    std::fs::write(&key, &restore.key).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let restore_cert = format!(
        "dbname=postgres sslcert={} sslkey={}",
        cert.display(),
        key.display()
    );
    let out = as_role("postgres", "tls-test", &restore_cert, &whoami);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "postgres",
        "{out:?}"
    );

    // A rule of the user's (`spec.pgHba`): `reporting` logs in to `app` by a certificate of the
    // cluster's CA naming it (`kubectl tusk certificate`), with no password; elsewhere, or
    // without the certificate, it is refused.
    assert!(local("CREATE ROLE reporting LOGIN").status.success());
    let issued = tls::issue_client(&cluster, &ca, "reporting", validity).unwrap();
    let (cert, key) = (root.join("reporting.crt"), root.join("reporting.key"));
    std::fs::write(&cert, &issued.cert).unwrap();
    std::fs::write(&key, &issued.key).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let by_cert = format!("sslcert={} sslkey={}", cert.display(), key.display());
    let out = as_role("reporting", "", &format!("dbname=app {by_cert}"), &whoami);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "reporting",
        "{out:?}"
    );
    let out = as_role("reporting", "", "dbname=app", &whoami);
    refused(&out, "certificate", "reporting without its certificate");
    let out = as_role(
        "reporting",
        "",
        &format!("dbname=postgres {by_cert}"),
        &whoami,
    );
    refused(&out, "password", "reporting outside its rule");
}
