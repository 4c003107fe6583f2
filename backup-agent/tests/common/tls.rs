//! A throwaway private CA and a server certificate for 127.0.0.1 it signed (openssl CLI), laid
//! out as MinIO's `--certs-dir` wants it: `public.crt` and `private.key`.

use std::path::Path;

use super::openssl;

pub struct TestCa {
    /// The CA certificate, PEM: what a user puts into `s3.caBundle`.
    pub ca_pem: String,
    /// The CA certificate as a file (the agent's `TUSK_S3_CA_BUNDLE`).
    pub ca_file: std::path::PathBuf,
    server: String,
    _dir: tempfile::TempDir,
}

impl TestCa {
    pub fn generate() -> TestCa {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path();
        let server = root.join("server");
        std::fs::create_dir(&server).expect("server dir");
        let at = |p: &Path| p.to_str().expect("UTF-8 temp path").to_owned();
        let (ca_key, ca_crt) = (root.join("ca.key"), root.join("ca.crt"));
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=tusk test private CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout",
            &at(&ca_key),
            "-out",
            &at(&ca_crt),
        ]);
        let (csr, ext) = (root.join("server.csr"), root.join("server.ext"));
        std::fs::write(
            &ext,
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n\
             keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
        )
        .expect("extensions file");
        openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            &at(&server.join("private.key")),
            "-out",
            &at(&csr),
        ]);
        openssl(&[
            "x509",
            "-req",
            "-in",
            &at(&csr),
            "-CA",
            &at(&ca_crt),
            "-CAkey",
            &at(&ca_key),
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            &at(&ext),
            "-out",
            &at(&server.join("public.crt")),
        ]);
        TestCa {
            ca_pem: std::fs::read_to_string(&ca_crt).expect("CA certificate"),
            ca_file: ca_crt,
            server: at(&server),
            _dir: dir,
        }
    }

    /// The `--certs-dir` of the server.
    pub fn server_dir(&self) -> &str {
        &self.server
    }
}
