"""Unit tests of the kubelet-like parts of e2e/local/jobrunner.py (no cluster needed).

    python3 -m unittest discover -s e2e/local -p 'test_*.py'
"""

import base64
import json
import os
import tempfile
import unittest
from pathlib import Path
from unittest import mock

os.environ.setdefault("TUSK_E2E_DIR", tempfile.mkdtemp(prefix="tusk-jobrunner-test-"))
import jobrunner  # noqa: E402 - TUSK_E2E_DIR first


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


OBJECTS = {
    ("secret", "demo-superuser"): {"data": {"username": b64("postgres"), "password": b64("s3cr$t")}},
    ("secret", "minio"): {"data": {"access-key": b64("minioadmin"), "secret-key": b64("minioadmin")}},
    ("secret", "gcs"): {"data": {"key.json": b64('{"type": "service_account"}')}},
    ("configmap", "settings"): {"data": {"LEVEL": "debug", "MODE": "fast"}},
}

POD = {
    "metadata": {
        "name": "demo-backup-29000000-abcde",
        "namespace": "prod",
        "uid": "uid-1",
        "labels": {"batch.kubernetes.io/job-name": "demo-backup-29000000"},
        "annotations": {"note": "hi"},
        "ownerReferences": [{"kind": "Job", "name": "demo-backup-29000000", "uid": "j1", "controller": True}],
    },
    "spec": {
        "nodeName": "kwok-node-0",
        "volumes": [
            {"name": "tmp", "emptyDir": {}},
            {"name": "gcs-key", "secret": {"secretName": "gcs", "items": [{"key": "key.json", "path": "key.json"}]}},
        ],
        "containers": [
            {
                "name": "backup-agent",
                "args": ["restore", "--work-dir=/tmp/work", "$(TUSK_CLUSTER)"],
                "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}],
                "env": [
                    {"name": "TUSK_CLUSTER", "value": "demo"},
                    {"name": "GREETING", "value": "$(TUSK_CLUSTER)-$(UNDEFINED)-$$(TUSK_CLUSTER)"},
                    {"name": "PGHOST", "value": "demo-rw.prod.svc"},
                    {"name": "PGPORT", "value": "5432"},
                    {"name": "PGUSER", "valueFrom": {"secretKeyRef": {"name": "demo-superuser", "key": "username"}}},
                    {"name": "PGPASSWORD", "valueFrom": {"secretKeyRef": {"name": "demo-superuser", "key": "password"}}},
                    {"name": "OPTIONAL", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "x", "optional": True}}},
                    {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "LEVEL"}}},
                    {"name": "TUSK_BACKUP_ID",
                     "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-name']"}}},
                    {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "NOTE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['note']"}}},
                    {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    {"name": "TUSK_S3_ENDPOINT", "value": "http://minio.minio.svc.cluster.local:9000"},
                    {"name": "GOOGLE_APPLICATION_CREDENTIALS", "value": "/var/run/secrets/tusk/gcs/key.json"},
                    {"name": "TUSK_WORK_DIR", "value": "/tmp"},
                ],
                "volumeMounts": [
                    {"name": "tmp", "mountPath": "/tmp"},
                    {"name": "gcs-key", "mountPath": "/var/run/secrets/tusk/gcs", "readOnly": True},
                ],
            }
        ],
    },
}


def fake_get(kind, namespace, name):
    assert namespace == "prod"
    return OBJECTS.get((kind, name))


@mock.patch.object(jobrunner, "get", side_effect=fake_get)
class ResolverTest(unittest.TestCase):
    def test_env_is_resolved_like_the_kubelet(self, _get):
        env = jobrunner.Resolver(POD).env(POD["spec"]["containers"][0])
        self.assertEqual(env["PGUSER"], "postgres")
        self.assertEqual(env["PGPASSWORD"], "s3cr$t")
        self.assertNotIn("OPTIONAL", env)
        self.assertEqual(env["LEVEL"], "debug")
        self.assertEqual((env["CFG_LEVEL"], env["CFG_MODE"]), ("debug", "fast"))
        self.assertEqual(env["TUSK_BACKUP_ID"], "demo-backup-29000000")
        self.assertEqual((env["POD"], env["NOTE"], env["NODE"]), (POD["metadata"]["name"], "hi", "kwok-node-0"))
        self.assertEqual(env["GREETING"], "demo-$(UNDEFINED)-$(TUSK_CLUSTER)")

    def test_a_missing_secret_is_a_config_error(self, _get):
        container = {"name": "c", "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "gone", "key": "k"}}}]}
        with self.assertRaisesRegex(jobrunner.ConfigError, 'secret "gone" not found'):
            jobrunner.Resolver(POD).env(container)
        container["env"][0]["valueFrom"]["secretKeyRef"] = {"name": "minio", "key": "missing"}
        with self.assertRaisesRegex(jobrunner.ConfigError, "couldn't find key missing"):
            jobrunner.Resolver(POD).env(container)

    def test_volumes_are_materialized_and_paths_rewritten(self, _get):
        with tempfile.TemporaryDirectory() as root:
            resolver = jobrunner.Resolver(POD)
            mounts = resolver.volumes(POD["spec"]["containers"][0], Path(root))
            key = jobrunner.rewrite_path("/var/run/secrets/tusk/gcs/key.json", mounts)
            self.assertTrue(key.startswith(root))
            self.assertEqual(json.loads(Path(key).read_text()), {"type": "service_account"})
            self.assertEqual(jobrunner.rewrite_path("/tmp", mounts), str(Path(root) / "volumes" / "tmp"))
            self.assertEqual(jobrunner.rewrite_arg("--work-dir=/tmp/work", mounts),
                             f"--work-dir={Path(root) / 'volumes' / 'tmp' / 'work'}")
            self.assertEqual(jobrunner.rewrite_path("/tmpfoo", mounts), "/tmpfoo")
            self.assertEqual(jobrunner.rewrite_arg("restore", mounts), "restore")


class TerminationMessageTest(unittest.TestCase):
    """The kubelet's termination message: the file, or the log tail with FallbackToLogsOnError."""

    def test_the_file_is_the_message(self):
        with tempfile.TemporaryDirectory() as root:
            root = Path(root)
            (root / "termination-log").write_text("integrity check failed: x" + "y" * 5000)
            (root / "stderr").write_text("log line\n")
            message = jobrunner.termination_message({}, root, 5)
            self.assertTrue(message.startswith("integrity check failed: x"))
            self.assertEqual(len(message), jobrunner.MESSAGE_MAX)

    def test_an_empty_file_falls_back_to_the_log_only_when_asked(self):
        with tempfile.TemporaryDirectory() as root:
            root = Path(root)
            (root / "termination-log").write_text("")
            (root / "stdout").write_text("")
            (root / "stderr").write_text("".join(f"line {i}\n" for i in range(200)) + "panicked at x\n")
            fallback = {"terminationMessagePolicy": "FallbackToLogsOnError"}
            tail = jobrunner.termination_message(fallback, root, 101)
            self.assertTrue(tail.endswith("panicked at x"))
            self.assertLessEqual(len(tail.encode()), jobrunner.LOG_TAIL_BYTES)
            self.assertEqual(jobrunner.termination_message({}, root, 101), "")
            self.assertEqual(jobrunner.termination_message(fallback, root, 0), "")

    @mock.patch.object(jobrunner, "get", side_effect=fake_get)
    def test_the_agent_writes_to_a_local_file(self, _get):
        pod = json.loads(json.dumps(POD))
        container = pod["spec"]["containers"][0]
        container["env"].append({"name": "TUSK_TERMINATION_LOG", "value": "/dev/termination-log"})
        with mock.patch.object(jobrunner, "L4_DIR", Path(tempfile.mkdtemp())), \
                mock.patch.object(jobrunner, "rewrite_addresses"):
            _argv, env, root = jobrunner.prepare_job_pod(pod)
        self.assertEqual(env["TUSK_TERMINATION_LOG"], str(root / "termination-log"))
        self.assertEqual((root / "termination-log").read_text(), "")


class VerifierTest(unittest.TestCase):
    def test_verify_restore_gets_a_local_server_of_its_major(self):
        with tempfile.TemporaryDirectory() as tmp, \
                mock.patch.object(jobrunner, "AS_POSTGRES", False), \
                mock.patch.object(jobrunner, "pg_bin_dir", side_effect=lambda m=None: Path(f"/pg/{m}")):
            env = {"TUSK_PG_BIN_DIR": "/usr/lib/postgresql/18/bin"}
            argv = ["backup-agent", "verify-restore", "--backup-id", "b1"]
            self.assertEqual(jobrunner.as_verifier(argv, env, Path(tmp)), argv)
            self.assertEqual(env["TUSK_PG_BIN_DIR"], "/pg/18")
            # A short link to the scratch volume keeps the server's socket path under 108 bytes.
            env = {"TUSK_SCRATCH_DIR": str(Path(tmp) / ("long" * 20))}
            with mock.patch.object(jobrunner, "E2E_DIR", Path(tmp)):
                jobrunner.as_verifier(argv, env, Path(tmp))
            self.assertLess(len(env["TUSK_SCRATCH_DIR"]), len(tmp) + 12)
            self.assertEqual(os.readlink(env["TUSK_SCRATCH_DIR"]), str(Path(tmp) / ("long" * 20)))
            env = {}
            jobrunner.as_verifier(argv, env, Path(tmp))
            self.assertEqual(env["TUSK_PG_BIN_DIR"], "/pg/None")

    def test_as_root_it_runs_a_copy_of_the_agent_as_postgres(self):
        with tempfile.TemporaryDirectory() as tmp, \
                mock.patch.object(jobrunner, "AS_POSTGRES", True), \
                mock.patch.object(jobrunner, "pg_bin_dir", return_value=Path("/pg/18")), \
                mock.patch.object(jobrunner.shutil, "chown") as chown:
            agent = Path(tmp) / "agent-bin"
            agent.write_text("#!/bin/sh\n")
            root = Path(tmp) / "pod"
            (root / "scratch").mkdir(parents=True)
            argv = jobrunner.as_verifier([str(agent), "verify-restore"], {}, root)
            self.assertEqual(argv[:3], ["runuser", "-u", "postgres"])
            self.assertEqual(argv[-2:], [str(root / "backup-agent"), "verify-restore"])
            self.assertTrue((root / "backup-agent").exists())
            chowned = {c.args[0] for c in chown.call_args_list}
            self.assertIn(root / "scratch", chowned)


class AddressTest(unittest.TestCase):
    def test_only_in_cluster_addresses_are_rewritten(self):
        state = {"prod/demo": {"port": 54321}}
        env = {"PGHOST": "demo-rw.prod.svc.cluster.local", "PGPORT": "5432",
               "TUSK_S3_ENDPOINT": "http://minio.minio.svc.cluster.local:9000"}
        with mock.patch.object(jobrunner, "load_state", return_value=state), \
                mock.patch.object(jobrunner, "minio_endpoint", return_value="http://127.9.9.9:9000"):
            jobrunner.rewrite_addresses(env, "prod/pod")
            self.assertEqual(env, {"PGHOST": "demo-rw.prod.svc.cluster.local",
                                   "PGHOSTADDR": "127.0.0.1", "PGPORT": "54321",
                                   "TUSK_S3_ENDPOINT": "http://127.9.9.9:9000"})
            other = {"PGHOST": "db.example.com", "PGPORT": "5432", "TUSK_S3_ENDPOINT": "https://s3.amazonaws.com"}
            jobrunner.rewrite_addresses(other, "prod/pod")
            self.assertEqual(other["PGHOST"], "db.example.com")
            self.assertEqual(other["TUSK_S3_ENDPOINT"], "https://s3.amazonaws.com")
            primary = {"PGHOST": "demo-0.demo-hl.prod.svc", "PGPORT": "5432"}
            jobrunner.rewrite_addresses(primary, "prod/pod")
            self.assertEqual(primary, {"PGHOST": "demo-0.demo-hl.prod.svc",
                                       "PGHOSTADDR": "127.0.0.1", "PGPORT": "54321"})
            foreign = {"PGHOST": "demo-0.other-hl.prod.svc", "PGPORT": "5432"}
            jobrunner.rewrite_addresses(foreign, "prod/pod")
            self.assertEqual(foreign["PGHOST"], "demo-0.other-hl.prod.svc")
            unknown = {"PGHOST": "other-rw.prod.svc", "PGPORT": "5432"}
            jobrunner.rewrite_addresses(unknown, "prod/pod")
            self.assertEqual(unknown["PGHOST"], "other-rw.prod.svc")

    def test_gcs_goes_to_the_suite_endpoint(self):
        gcs = {"TUSK_STORE": "gcs", "GOOGLE_APPLICATION_CREDENTIALS": "/x/key.json"}
        with mock.patch.object(jobrunner, "gcs_endpoint", return_value="http://127.8.8.8:4443"):
            jobrunner.rewrite_addresses(gcs, "prod/pod")
            self.assertEqual(gcs["TUSK_GCS_ENDPOINT"], "http://127.8.8.8:4443")
            s3 = {"TUSK_STORE": "s3"}
            jobrunner.rewrite_addresses(s3, "prod/pod")
            self.assertNotIn("TUSK_GCS_ENDPOINT", s3)
        with mock.patch.object(jobrunner, "gcs_endpoint", return_value=None):
            real = {"TUSK_STORE": "gcs"}
            jobrunner.rewrite_addresses(real, "prod/pod")
            self.assertNotIn("TUSK_GCS_ENDPOINT", real)

    @mock.patch.object(jobrunner, "get", side_effect=fake_get)
    def test_the_gcs_key_reaches_the_agent_as_a_file(self, _get):
        with mock.patch.object(jobrunner, "L4_DIR", Path(tempfile.mkdtemp())), \
                mock.patch.object(jobrunner, "minio_endpoint", return_value="http://127.9.9.9:9000"), \
                mock.patch.object(jobrunner, "gcs_endpoint", return_value=None):
            _argv, env, root = jobrunner.prepare_job_pod(json.loads(json.dumps(POD)))
        key = Path(env["GOOGLE_APPLICATION_CREDENTIALS"])
        self.assertTrue(str(key).startswith(str(root)))
        self.assertEqual(json.loads(key.read_text()), {"type": "service_account"})

    def test_expand(self):
        self.assertEqual(jobrunner.expand("$(A)/$(B)/$$(A)/$(", {"A": "x"}), "x/$(B)/$(A)/$(")


if __name__ == "__main__":
    unittest.main()
