//! `pg_hba.conf`: who may log in from where, and how.

/// pg_hba.conf: peer authentication on the local socket (so `kubectl exec … psql -U postgres`
/// works inside the pod); over the network, a connection without TLS is refused first, from
/// every address (127.0.0.1 too, so no rule above it lets plaintext in), then SCRAM passwords
/// over TLS. With `certificates` (Tusk issues them), Tusk's own roles also present a client
/// certificate of the cluster's CA: a password alone (or a stolen key alone) gets no one in.
/// Certificates the user brings come without one, so there it is SCRAM only.
///
/// Each machine role only where its work is (issue 47): `tusk_replication` only replicates (its
/// password alone once created slots in an ordinary session); `tusk_rewind` serves a former
/// primary's rewind from database `postgres`; `tusk_backup` reads for dumps; both present the
/// replication role's certificate (any of the CA's, as its name is not theirs); `tusk_pooler`
/// (the pooler's password lookup) presents its own certificate and nothing else, and so does
/// `tusk_upgrade` (a new major's side reading the old primary during an online upgrade; a
/// logical replication connection names its database, so `all` matches it). The superuser
/// logs in over the network only with `superuser_access`, or with Tusk's CA for a restore's
/// short-lived certificate.
///
/// `extra` (`spec.pgHba`, checked by [`super::hba_rules`]) comes after every rule of Tusk's and
/// before the last, which admits any other role with its password: each pair of database and
/// role of Tusk's is matched by a line above them (`all` never matches `replication`, hence the
/// rejections of replication by the other roles of Tusk's), so no user rule can change it.
pub fn render_hba(certificates: bool, superuser_access: bool, extra: &[String]) -> String {
    let (machine, borrowed) = if certificates {
        (
            "scram-sha-256 clientcert=verify-full",
            "scram-sha-256 clientcert=verify-ca",
        )
    } else {
        ("scram-sha-256", "scram-sha-256")
    };
    // The pooler's lookup role and the upgrade role have no password: the certificate the
    // operator issues each is its only credential, so without Tusk's CA they cannot log in.
    let pooler = if certificates { "cert" } else { "reject" };
    let superuser = match (superuser_access, certificates) {
        (true, _) => "scram-sha-256",
        (false, true) => "scram-sha-256 clientcert=verify-full",
        (false, false) => "reject",
    };
    let mut hba = format!(
        "# Managed by Tusk.\n\
         local     all         all              peer\n\
         hostnossl all         all              all  reject\n\
         hostnossl replication all              all  reject\n\
         hostssl   replication tusk_replication all  {machine}\n\
         hostssl   all         tusk_replication all  reject\n\
         hostssl   postgres    tusk_rewind      all  {borrowed}\n\
         hostssl   all         tusk_rewind      all  reject\n\
         hostssl   all         tusk_backup      all  {borrowed}\n\
         hostssl   all         tusk_pooler      all  {pooler}\n\
         hostssl   all         tusk_upgrade     all  {pooler}\n\
         hostssl   all         postgres         all  {superuser}\n\
         hostssl   replication postgres,tusk_rewind,tusk_backup,tusk_pooler,tusk_upgrade all reject\n"
    );
    if !extra.is_empty() {
        hba.push_str("# spec.pgHba\n");
        for rule in extra {
            hba.push_str(rule.trim());
            hba.push('\n');
        }
    }
    hba.push_str("hostssl   all         all              all  scram-sha-256\n");
    hba
}

#[cfg(test)]
#[path = "hba_tests.rs"]
mod tests;
