#!/usr/bin/env python3
"""The L4 job runner of the local e2e environment: it plays the kubelet for what kwok cannot.

kwok never runs containers. This loop watches the pods Tusk creates and does, on this machine,
what their containers would do:

* a database pod (owned by a StatefulSet, component `database`) that is Running for the first
  time gets a real local PostgreSQL for its (namespace, cluster): initdb as the `postgres` user
  with the superuser name/password/initdb args of the pod's resolved env, the cluster's own
  postgresql.conf/pg_hba.conf from its ConfigMap volume, then the first-start scripts of the
  `/docker-entrypoint-initdb.d` volume run the way the postgres image runs them. The instance
  outlives pod restarts (like the volume) and is replaced when the StatefulSet is re-created.
* a pod owned by a Job (backup or restore, nothing is special-cased) that is Running and not yet
  annotated runs the real `backup-agent` ($TUSK_AGENT_BIN) with exactly the container's
  command line and environment, after resolving valueFrom (secretKeyRef, configMapKeyRef,
  fieldRef), envFrom and `$(VAR)` references, materializing its secret/configMap/emptyDir
  volumes, and rewriting only in-cluster addresses: PGHOST `<cluster>-rw.<ns>.svc[.cluster.local]`
  is dialled at the local instance (PGHOSTADDR + PGPORT; the name stays, for verify-full), TUSK_S3_ENDPOINT of the in-cluster MinIO to the local MinIO,
  GCS (no endpoint: storage.googleapis.com) to TUSK_GCS_ENDPOINT of $TUSK_E2E_DIR/gcs.endpoint
  (the operator's, see operator.sh), and paths under a volume's mountPath to its local directory. The exit code is reported as
  annotation `e2e.tusk.dev/exit-code` (with the termination message the container left, as
  `e2e.tusk.dev/termination-message`), which kwok's stage turns into Succeeded/Failed. While a
  Secret or ConfigMap it needs is missing, the pod waits and is retried, as with the kubelet
  (reason in annotation `e2e.tusk.dev/waiting`).
* a `verify-restore` pod (the cluster's postgres image as uid 999; its init container only
  copies the agent in) runs the same way, as the postgres OS user, with TUSK_PG_BIN_DIR mapped
  to the installed major and its scratch volume reached through a short link (socket paths).

The local server is the installed PostgreSQL major the pod's image names (postgres:18), else the
newest installed one (logged when they differ); $TUSK_PG_BIN_DIR overrides both.

Usage: jobrunner.py run            # the loop (e2e/local/l4.sh starts it in the background)
       jobrunner.py down           # stop every local PostgreSQL it started
       jobrunner.py port NS NAME   # the local port of a cluster's instance (for pg.sh)
       jobrunner.py socket NS NAME # its socket directory (pg.sh: the superuser, as in a pod)
State and logs: ${TUSK_E2E_DIR:-/tmp/tusk-e2e}/l4/ (databases.json, pods/<ns>_<pod>/, results.jsonl).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

E2E_DIR = Path(os.environ.get("TUSK_E2E_DIR", "/tmp/tusk-e2e"))
L4_DIR = E2E_DIR / "l4"
STATE_FILE = L4_DIR / "databases.json"
RESULTS_FILE = L4_DIR / "results.jsonl"
KUBECTL = os.environ.get("TUSK_KUBECTL_BIN", "kubectl")
SELECTOR = "app.kubernetes.io/managed-by=tusk-operator"
EXIT_CODE = "e2e.tusk.dev/exit-code"
TAKEN = "e2e.tusk.dev/runner"
WAITING = "e2e.tusk.dev/waiting"  # why a container cannot start yet (a missing Secret, say)
# The container's termination message, which kwok's stage copies into state.terminated.message.
MESSAGE = "e2e.tusk.dev/termination-message"
TERMINATION_PATH = "/dev/termination-log"  # the kubelet's default terminationMessagePath
MESSAGE_MAX = 4096  # bytes the kubelet keeps of the file
LOG_TAIL_LINES, LOG_TAIL_BYTES = 80, 2048  # what FallbackToLogsOnError keeps of the log
# The backup-agent image: ENTRYPOINT and ENV (see the Dockerfile).
AGENT_ENTRYPOINT = "/usr/local/bin/backup-agent"
AGENT_IMAGE_ENV = {"HOME": "/tmp"}
# The in-cluster MinIO of e2e/kind and samples/postgresql-s3-minio.yaml.
IN_CLUSTER_MINIO = {"minio.minio.svc.cluster.local:9000", "minio.minio.svc:9000", "minio.minio:9000"}
# A cluster's `-rw` Service, or its primary pod through the headless Service (restore Jobs).
RW_HOST = re.compile(
    r"(?P<cluster>[a-z0-9]([-a-z0-9]*[a-z0-9])?)(-rw|-0\.(?P=cluster)-hl)"
    r"\.(?P<ns>[a-z0-9]([-a-z0-9]*[a-z0-9])?)\.svc(\.cluster\.local)?\.?"
)
JOB_TIMEOUT = float(os.environ.get("TUSK_E2E_JOB_TIMEOUT", "1800"))
AS_POSTGRES = os.geteuid() == 0  # the server refuses to run as root

state_lock = threading.Lock()
database_waiting: dict[str, str] = {}
children: set[subprocess.Popen] = set()
stopping = threading.Event()


def log(msg: str) -> None:
    print(f"jobrunner: {msg}", flush=True)


# ---------------------------------------------------------------------------------------------
# The API, through kubectl.


def kubectl(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([KUBECTL, *args], capture_output=True, text=True, check=check)


def get(kind: str, namespace: str, name: str) -> dict | None:
    out = kubectl("get", kind, "-n", namespace, name, "-o", "json", "--ignore-not-found")
    return json.loads(out.stdout) if out.stdout.strip() else None


def annotate(pod: dict, key: str, value: str, **more: str) -> None:
    """Sets annotations in one request (`more` maps further keys, given as key=value pairs)."""
    meta = pod["metadata"]
    pairs = [f"{key}={value}", *(f"{k}={v}" for k, v in more.items())]
    kubectl("annotate", "pod", "-n", meta["namespace"], meta["name"], *pairs, "--overwrite")


def owner_kind(pod: dict) -> str | None:
    for ref in pod["metadata"].get("ownerReferences", []):
        if ref.get("controller"):
            return ref["kind"]
    return None


def owner_uid(pod: dict) -> str:
    return next(r["uid"] for r in pod["metadata"]["ownerReferences"] if r.get("controller"))


# ---------------------------------------------------------------------------------------------
# What the kubelet does before starting a container: env, volumes, command line.


class ConfigError(Exception):
    """What the kubelet reports as CreateContainerConfigError (a missing Secret, say)."""


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion: defined names are replaced, `$$` is a literal `$`."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$")
            i += 2
        elif text.startswith("$(", i) and (end := text.find(")", i + 2)) != -1:
            name = text[i + 2 : end]
            out.append(env.get(name, text[i : end + 1]))
            i = end + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


class Resolver:
    """Reads the Secrets and ConfigMaps of one pod's namespace, once each."""

    def __init__(self, pod: dict):
        self.pod = pod
        self.namespace = pod["metadata"]["namespace"]
        self.cache: dict[tuple[str, str], dict | None] = {}

    def data(self, kind: str, name: str, optional: bool) -> dict[str, bytes] | None:
        if (kind, name) not in self.cache:
            self.cache[(kind, name)] = get(kind, self.namespace, name)
        obj = self.cache[(kind, name)]
        if obj is None:
            if optional:
                return None
            raise ConfigError(f'{kind} "{name}" not found')
        if kind == "secret":
            return {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        values = {k: v.encode() for k, v in (obj.get("data") or {}).items()}
        values.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
        return values

    def key(self, kind: str, ref: dict) -> str | None:
        optional = bool(ref.get("optional"))
        data = self.data(kind, ref["name"], optional)
        if data is None or ref["key"] not in data:
            if optional:
                return None
            raise ConfigError(f'couldn\'t find key {ref["key"]} in {kind} {self.namespace}/{ref["name"]}')
        return data[ref["key"]].decode("utf-8", "surrogateescape")

    def field(self, path: str) -> str:
        meta = self.pod["metadata"]
        if m := re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path):
            return (meta.get(m[1]) or {}).get(m[2], "")
        simple = {
            "metadata.name": meta["name"],
            "metadata.namespace": meta["namespace"],
            "metadata.uid": meta.get("uid", ""),
            "spec.nodeName": self.pod["spec"].get("nodeName", ""),
            "spec.serviceAccountName": self.pod["spec"].get("serviceAccountName", ""),
            "status.podIP": self.pod.get("status", {}).get("podIP", ""),
            "status.hostIP": self.pod.get("status", {}).get("hostIP", ""),
        }
        if path not in simple:
            raise ConfigError(f"fieldRef {path} is not supported by the e2e job runner")
        return simple[path]

    def env(self, container: dict) -> dict[str, str]:
        """The container's environment in kubelet order: envFrom, then env (later wins)."""
        env: dict[str, str] = {}
        for source in container.get("envFrom", []):
            prefix = source.get("prefix", "")
            for kind, field in (("secret", "secretRef"), ("configmap", "configMapRef")):
                if field in source:
                    ref = source[field]
                    data = self.data(kind, ref["name"], bool(ref.get("optional"))) or {}
                    for k, v in data.items():
                        env[prefix + k] = v.decode("utf-8", "surrogateescape")
        for var in container.get("env", []):
            name = var["name"]
            if "valueFrom" not in var:
                env[name] = expand(var.get("value", ""), env)
                continue
            source = var["valueFrom"]
            if "secretKeyRef" in source:
                value = self.key("secret", source["secretKeyRef"])
            elif "configMapKeyRef" in source:
                value = self.key("configmap", source["configMapKeyRef"])
            elif "fieldRef" in source:
                value = self.field(source["fieldRef"]["fieldPath"])
            else:
                raise ConfigError(f"env {name}: {sorted(source)} is not supported by the e2e job runner")
            if value is not None:
                env[name] = value
        return env

    def volumes(self, container: dict, root: Path) -> dict[str, Path]:
        """Materializes the container's mounted volumes under root; returns mountPath → dir."""
        by_name = {v["name"]: v for v in self.pod["spec"].get("volumes", [])}
        mounts: dict[str, Path] = {}
        for mount in container.get("volumeMounts", []):
            volume = by_name[mount["name"]]
            local = root / "volumes" / mount["name"]
            if not local.exists():
                local.mkdir(parents=True)
                self._fill(volume, local)
            mounts[mount["mountPath"].rstrip("/") or "/"] = local / mount.get("subPath", "")
        return mounts

    def _fill(self, volume: dict, local: Path) -> None:
        for kind, field, name_field in (("secret", "secret", "secretName"), ("configmap", "configMap", "name")):
            if field not in volume:
                continue
            source = volume[field]
            data = self.data(kind, source[name_field], bool(source.get("optional"))) or {}
            mode = source.get("defaultMode", 0o644)
            items = source.get("items") or [{"key": k, "path": k} for k in data]
            for item in items:
                if item["key"] not in data:
                    raise ConfigError(f'key {item["key"]} not in {kind} {source[name_field]}')
                path = local / item["path"]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data[item["key"]])
                path.chmod(item.get("mode", mode))
            return
        if "emptyDir" in volume or "persistentVolumeClaim" in volume:
            return  # an empty directory (a claim's data is the local instance's own directory)
        if "projected" in volume and volume["name"].startswith("kube-api-access-"):
            return  # the ServiceAccount token the instance manager renews its Lease with: unused here
        raise ConfigError(f'volume {volume["name"]}: only secret, configMap, emptyDir, claims and the API token are supported')


def rewrite_path(value: str, mounts: dict[str, Path]) -> str:
    """A path under a container mountPath → the same path under the volume's local directory."""
    for mount_path in sorted(mounts, key=len, reverse=True):
        if value == mount_path or value.startswith(mount_path.rstrip("/") + "/"):
            return str(mounts[mount_path]) + value[len(mount_path) :]
    return value


def rewrite_arg(arg: str, mounts: dict[str, Path]) -> str:
    """Paths as whole arguments or as the value of `key=value` arguments."""
    if "=" in arg and not arg.startswith("/"):
        key, value = arg.split("=", 1)
        return f"{key}={rewrite_path(value, mounts)}"
    return rewrite_path(arg, mounts)


def pg_bin_dir(major: int | None = None) -> Path:
    """$TUSK_PG_BIN_DIR, else the installed major the image asks for, else the newest installed."""
    if os.environ.get("TUSK_PG_BIN_DIR"):
        return Path(os.environ["TUSK_PG_BIN_DIR"])
    found = {
        int(initdb.parts[-3]): initdb.parent
        for initdb in Path("/usr/lib/postgresql").glob("*/bin/initdb")
        if initdb.parts[-3].isdigit()
    }
    if not found:
        sys.exit("jobrunner: no PostgreSQL under /usr/lib/postgresql (apt-get install postgresql)")
    return found.get(major) or found[max(found)]


def base_path(bin_dir: Path | None = None) -> str:
    return f"{bin_dir or pg_bin_dir()}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


# ---------------------------------------------------------------------------------------------
# Local PostgreSQL instances, one per (namespace, cluster).


def load_state() -> dict:
    try:
        return json.loads(STATE_FILE.read_text())
    except FileNotFoundError:
        return {}


def save_state(state: dict) -> None:
    tmp = STATE_FILE.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True))
    tmp.replace(STATE_FILE)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def as_postgres(cmd: list[str], bin_dir: Path | None = None) -> list[str]:
    """Runs cmd as the postgres OS user when we are root (PATH survives runuser via env)."""
    if not AS_POSTGRES:
        return cmd
    return ["runuser", "-u", "postgres", "--", "env", f"PATH={base_path(bin_dir)}", *cmd]


def postmaster_alive(data: Path) -> bool:
    try:
        pid = int((data / "postmaster.pid").read_text().split("\n", 1)[0])
        os.kill(pid, 0)
        return True
    except (FileNotFoundError, ValueError, ProcessLookupError, PermissionError):
        return False


def pg_ctl(instance: dict, *args: str) -> subprocess.CompletedProcess:
    bin_dir = Path(instance.get("binDir") or pg_bin_dir())
    cmd = [str(bin_dir / "pg_ctl"), "-D", instance["data"], *args]
    return subprocess.run(as_postgres(cmd, bin_dir), capture_output=True, text=True)


def start_server(instance: dict) -> None:
    opts = " ".join(shlex.quote(a) for a in instance["server_args"])
    out = pg_ctl(instance, "-l", instance["log"], "-o", opts, "-w", "-t", "120", "start")
    if out.returncode != 0:
        raise RuntimeError(f"pg_ctl start failed: {out.stdout}{out.stderr} (log {instance['log']})")
    instance["pid"] = int((Path(instance["data"]) / "postmaster.pid").read_text().split("\n", 1)[0])


def ensure_database(pod: dict) -> None:
    meta = pod["metadata"]
    cluster = meta["labels"].get("tusk.dev/cluster") or meta["labels"]["app.kubernetes.io/instance"]
    key = f'{meta["namespace"]}/{cluster}'
    sts_uid = owner_uid(pod)
    with state_lock:
        state = load_state()
    current = state.get(key)
    if current and current["statefulsetUid"] == sts_uid:
        if current.get("failed") or postmaster_alive(Path(current["data"])):
            return
        log(f"{key}: local PostgreSQL is not running, starting it again (pod {meta['name']})")
        start_server(current)
    else:
        if current:
            log(f"{key}: StatefulSet re-created, replacing the local PostgreSQL on port {current['port']}")
            stop_instance(current)
            if current.get("dir"):
                shutil.rmtree(current["dir"], ignore_errors=True)
        try:
            current = init_database(pod, key, sts_uid)
        except ConfigError as e:
            # Like the kubelet: the container waits until its Secret or ConfigMap exists.
            if database_waiting.get(key) != str(e):
                database_waiting[key] = str(e)
                log(f"{key}: pod {meta['name']} waits: CreateContainerConfigError: {e} (retrying)")
            return
        except Exception as e:  # noqa: BLE001 - remembered, so it is reported once, not every second
            log(f"{key}: starting a local PostgreSQL for pod {meta['name']} failed: {e}")
            current = {"statefulsetUid": sts_uid, "failed": True, "error": str(e), "data": "", "port": 0}
    with state_lock:
        state = load_state()
        state[key] = current
        save_state(state)


# What `tusk-instance run` does on a primary's first start, in the image's shell terms; psql
# variables quote the names and the password.
# The machine roles are contract/src/roles.rs's (names, options, grants), which the agent's
# contract test also makes; the password of both is the replication role's.
APP_ROLE_SCRIPT = """#!/bin/bash
set -euo pipefail
psql -v ON_ERROR_STOP=1 --no-psqlrc --username postgres --dbname postgres \\
  --set=owner="$TUSK_APP_USER" --set=password="$TUSK_APP_PASSWORD" --set=db="$TUSK_APP_DATABASE" \\
  --set=machine="$TUSK_REPLICATION_PASSWORD" <<'SQL'
CREATE ROLE :"owner" LOGIN PASSWORD :'password';
CREATE DATABASE :"db" OWNER :"owner";
CREATE ROLE tusk_replication LOGIN REPLICATION PASSWORD :'machine';
CREATE ROLE tusk_rewind LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD :'machine';
CREATE ROLE tusk_backup LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION BYPASSRLS INHERIT
  PASSWORD :'machine';
GRANT EXECUTE ON FUNCTION pg_catalog.pg_ls_dir(text, boolean, boolean) TO tusk_rewind;
GRANT EXECUTE ON FUNCTION pg_catalog.pg_stat_file(text, boolean) TO tusk_rewind;
GRANT EXECUTE ON FUNCTION pg_catalog.pg_read_binary_file(text) TO tusk_rewind;
GRANT EXECUTE ON FUNCTION pg_catalog.pg_read_binary_file(text, bigint, bigint, boolean) TO tusk_rewind;
GRANT pg_read_all_data, pg_read_all_stats TO tusk_backup;
ALTER ROLE tusk_backup SET lo_compat_privileges = on;
SQL
"""


def declared_verifier(root: Path, name: str) -> str | None:
    """The verifier the pod's `verifiers` volume holds for `name` (`superuser`, `app`), if any."""
    path = root / "volumes" / "verifiers" / name
    if not path.is_file():
        return None
    return path.read_text().strip() or None


def server_args(container: dict, env: dict) -> list:
    """The postgres arguments of the container: the instance manager passes the ConfigMap's
    file from TUSK_CONFIG_FILE; a plain image takes them from the container's args."""
    args = list(container.get("args", []))
    if env.get("TUSK_CONFIG_FILE"):
        args = ["-c", f"config_file={env['TUSK_CONFIG_FILE']}", *args]
    return args


def init_database(pod: dict, key: str, sts_uid: str) -> dict:
    """initdb + start + first-start scripts, as the postgres image's entrypoint does them."""
    resolver = Resolver(pod)
    container = next(
        (c for c in pod["spec"]["containers"] if c["name"] == "postgres"), pod["spec"]["containers"][0]
    )
    started = time.monotonic()
    root = L4_DIR / "pg" / f'{key.replace("/", "_")}-{sts_uid[:8]}'
    # The major of the image (postgres:18) if that server is installed here, else the newest.
    wanted = re.search(r"postgres:(\d+)", container.get("image", ""))
    bin_dir = pg_bin_dir(int(wanted[1]) if wanted else None)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    env = resolver.env(container)
    mounts = resolver.volumes(container, root)
    port = free_port()
    data = Path(rewrite_path(env.get("PGDATA", "/var/lib/postgresql/data"), mounts))
    # The ConfigMap's postgresql.conf names in-pod paths (hba_file, socket dir): rewrite the local
    # copy's quoted paths that fall under a mountPath; everything else is the operator's config.
    for conf in root.glob("volumes/*/postgresql.conf"):
        conf.chmod(0o644)
        text = re.sub(r"'(/[^']*)'", lambda m: f"'{rewrite_path(m[1], mounts)}'", conf.read_text())
        # One local server plays the whole cluster: with no standby, synchronous replication
        # would make every commit (the first start's included) wait forever. (Durability
        # `preferred` writes no such line, and no instance manager runs here to set one.)
        text = "".join(
            line for line in text.splitlines(keepends=True)
            if not line.startswith("synchronous_standby_names")
        )
        conf.write_text(text)
    # The socket is the harness's way in as the superuser (pg.sh), whatever user runs it: trust
    # there. Every network rule stays the operator's.
    for hba in root.glob("volumes/*/pg_hba.conf"):
        hba.chmod(0o644)
        hba.write_text(re.sub(r"(?m)^local(\s+all\s+all\s+)peer$", r"local\1trust", hba.read_text()))
    socket_dir = rewrite_path("/var/run/postgresql", mounts)
    Path(socket_dir).mkdir(parents=True, exist_ok=True)
    instance = {
        "namespace": pod["metadata"]["namespace"],
        "cluster": key.split("/", 1)[1],
        "statefulsetUid": sts_uid,
        "pod": pod["metadata"]["name"],
        "dir": str(root),
        "data": str(data),
        "log": str(root / "postgres.log"),
        "port": port,
        "socketDir": socket_dir,
        "superuser": env.get("POSTGRES_USER", "postgres"),
        "binDir": str(bin_dir),
        "image": container.get("image", ""),
        "server_args": [rewrite_arg(a, mounts) for a in server_args(container, env)]
        + ["-c", f"port={port}", "-c", "listen_addresses=127.0.0.1"],
    }
    if AS_POSTGRES:
        subprocess.run(["chown", "-R", "postgres:postgres", str(root)], check=True)
    # Secret volumes as the kubelet leaves them with fsGroup: files root's, group postgres. The
    # server accepts a 0640 key file owned by root, never one it owns itself; a runner that is
    # not root makes them its own and 0600 instead.
    for volume in pod["spec"].get("volumes", []):
        local = root / "volumes" / volume["name"]
        if "secret" not in volume or not local.exists():
            continue
        if AS_POSTGRES:
            subprocess.run(["chown", "-R", "root:postgres", str(local)], check=True)
        else:
            for path in local.rglob("*"):
                if path.is_file():
                    path.chmod(0o600)
    # initdb --username="$POSTGRES_USER" --pwfile=<(printf "%s\n" "$POSTGRES_PASSWORD") $POSTGRES_INITDB_ARGS
    # The instance manager's pods carry no superuser or app password, only their SCRAM
    # verifiers (Secret <name>-verifiers, mounted): initdb and CREATE ROLE store a verifier
    # as it is, as the manager does (instance/src/declared_passwords.rs).
    superuser_secret = declared_verifier(root, "superuser") or env.get("POSTGRES_PASSWORD", "")
    app_secret = declared_verifier(root, "app") or env.get("TUSK_APP_PASSWORD", "")
    pwfile = root / "pwfile"
    pwfile.write_text(superuser_secret + "\n")
    if AS_POSTGRES:
        shutil.chown(pwfile, "postgres", "postgres")
    pwfile.chmod(0o600)
    initdb = [
        str(bin_dir / "initdb"), "-D", str(data), f"--username={instance['superuser']}",
        f"--pwfile={pwfile}", *shlex.split(env.get("POSTGRES_INITDB_ARGS", "")),
    ]
    out = subprocess.run(
        as_postgres(initdb, bin_dir), capture_output=True, text=True, env={"PATH": base_path(bin_dir), "LANG": "C.UTF-8"}
    )
    pwfile.unlink()
    if out.returncode != 0:
        raise RuntimeError(f"{key}: initdb failed: {out.stderr}")
    start_server(instance)
    # docker_process_init_files: executable *.sh run, other *.sh are sourced, *.sql go to psql;
    # PGPASSWORD is exported from POSTGRES_PASSWORD; psql reaches the server over the socket.
    init_dir = Path(rewrite_path("/docker-entrypoint-initdb.d", mounts))
    script_env = {
        **env,
        "TUSK_APP_PASSWORD": app_secret,
        "PATH": base_path(bin_dir),
        "PGDATA": str(data),
        "PGPASSWORD": env.get("PGPASSWORD", env.get("POSTGRES_PASSWORD", "")),
        "PGHOST": socket_dir,
        "PGPORT": str(port),
        "LANG": "C.UTF-8",
    }
    scripts = sorted(init_dir.glob("*")) if init_dir.is_dir() else []
    if env.get("TUSK_APP_USER"):
        # The instance manager's first start (docs/src/design/replication.md): the app role and database.
        app_sql = root / "tusk-app.sh"
        app_sql.write_text(APP_ROLE_SCRIPT)
        app_sql.chmod(0o755)
        if AS_POSTGRES:
            shutil.chown(app_sql, "postgres", "postgres")
        scripts.append(app_sql)
    for script in scripts:
        if script.suffix == ".sh":
            cmd = [str(script)] if os.access(script, os.X_OK) else ["bash", str(script)]
        elif script.suffix == ".sql":
            cmd = ["psql", "-v", "ON_ERROR_STOP=1", "--username", instance["superuser"], "-f", str(script)]
        else:
            continue
        out = subprocess.run(as_postgres(cmd, bin_dir), capture_output=True, text=True, env=script_env)
        (root / f"{script.name}.log").write_text(out.stdout + out.stderr)
        if out.returncode != 0:
            # The container would exit and crash-loop; the instance stays down, jobs will fail.
            log(f"{key}: first-start script {script.name} failed (rc {out.returncode}): {out.stderr.strip()}")
            pg_ctl(instance, "-m", "fast", "-w", "stop")
            instance["failed"] = True
            return instance
    major = bin_dir.parent.name
    asked = f", image {instance['image']}" if not wanted or wanted[1] != major else ""
    log(
        f"{key}: local PostgreSQL {major}{asked} on 127.0.0.1:{port} for pod {instance['pod']}"
        f" in {time.monotonic() - started:.1f}s (superuser {instance['superuser']}, data {data})"
    )
    return instance


def stop_instance(instance: dict) -> None:
    if instance.get("data") and postmaster_alive(Path(instance["data"])):
        pg_ctl(instance, "-m", "fast", "-w", "-t", "60", "stop")


# ---------------------------------------------------------------------------------------------
# Job pods: the real agent with the container's command line.


def rewrite_addresses(env: dict[str, str], pod_name: str) -> None:
    """In-cluster host names → this machine; nothing else."""
    if m := RW_HOST.fullmatch(env.get("PGHOST", "")):
        with state_lock:
            instance = load_state().get(f'{m["ns"]}/{m["cluster"]}')
        if instance:
            # PGHOST keeps the name the server's certificate carries (verify-full); the
            # connection goes to the local instance's address, as libpq's hostaddr does.
            env["PGHOSTADDR"], env["PGPORT"] = "127.0.0.1", str(instance["port"])
        else:
            log(f'{pod_name}: no local PostgreSQL for {m["ns"]}/{m["cluster"]}; PGHOST left unresolvable')
    if "TUSK_S3_ENDPOINT" in env:
        url = urllib.parse.urlsplit(env["TUSK_S3_ENDPOINT"])
        if url.netloc in IN_CLUSTER_MINIO:
            env["TUSK_S3_ENDPOINT"] = minio_endpoint()
    # GCS has no endpoint in the spec (storage.googleapis.com): the agent gets the one the
    # operator was started with (operator.sh), where the GCS scenarios serve their emulator.
    if env.get("TUSK_STORE") == "gcs" and "TUSK_GCS_ENDPOINT" not in env and (gcs := gcs_endpoint()):
        env["TUSK_GCS_ENDPOINT"] = gcs


def minio_endpoint() -> str:
    if os.environ.get("TUSK_E2E_MINIO_ENDPOINT"):
        return os.environ["TUSK_E2E_MINIO_ENDPOINT"]
    return (E2E_DIR / "minio" / "endpoint").read_text().strip()


def gcs_endpoint() -> str | None:
    path = E2E_DIR / "gcs.endpoint"
    return (path.read_text().strip() or None) if path.exists() else None


def prepare_job_pod(pod: dict) -> tuple[list[str], dict[str, str], Path]:
    """What the kubelet does before starting the container; ConfigError while it cannot."""
    meta = pod["metadata"]
    root = L4_DIR / "pods" / f'{meta["namespace"]}_{meta["name"]}'
    root.mkdir(parents=True, exist_ok=True)
    containers = pod["spec"]["containers"]
    if len(containers) != 1:
        raise ConfigError(f"{len(containers)} containers; the runner runs single-container pods")
    container = containers[0]
    resolver = Resolver(pod)
    env = resolver.env(container)
    mounts = resolver.volumes(container, root)
    # The kubelet mounts an empty termination-message file into every container.
    termination = root / "termination-log"
    termination.write_text("")
    mounts[container.get("terminationMessagePath") or TERMINATION_PATH] = termination
    command = [expand(a, env) for a in container.get("command") or [AGENT_ENTRYPOINT]]
    args = [expand(a, env) for a in container.get("args") or []]
    if Path(command[0]).name != "backup-agent":
        raise ConfigError(f"command {command[0]} is not the backup-agent")
    argv = [os.environ.get("TUSK_AGENT_BIN", "backup-agent"), *command[1:], *args]
    argv[1:] = [rewrite_arg(a, mounts) for a in argv[1:]]
    process_env = {"PATH": base_path(), **AGENT_IMAGE_ENV, **env}
    for k, v in list(process_env.items()):
        process_env[k] = rewrite_path(v, mounts)
    if "/tmp" in mounts and "TMPDIR" not in env:
        process_env["TMPDIR"] = str(mounts["/tmp"])  # the container's /tmp is that volume
    rewrite_addresses(process_env, f'{meta["namespace"]}/{meta["name"]}')
    if "verify-restore" in args:
        argv = as_verifier(argv, process_env, root)
    (root / "command.json").write_text(json.dumps({"argv": argv, "env": sorted(process_env)}, indent=1))
    return argv, process_env, root


def as_verifier(argv: list[str], env: dict[str, str], root: Path) -> list[str]:
    """`verify-restore` runs in the cluster's postgres image as its postgres user (uid 999) with
    the server binaries of /usr/lib/postgresql/<major>/bin: here the installed major the path
    names (else the newest installed), as the postgres OS user when we are root, which then owns
    the pod's directory (its emptyDirs) and runs a copy of the agent it can reach."""
    wanted = re.fullmatch(r"/usr/lib/postgresql/(\d+)/bin/?", env.get("TUSK_PG_BIN_DIR", ""))
    bin_dir = pg_bin_dir(int(wanted.group(1)) if wanted else None)
    env["TUSK_PG_BIN_DIR"] = str(bin_dir)
    if scratch := env.get("TUSK_SCRATCH_DIR"):
        # The throwaway server's socket lives there, and a socket path has at most 107 bytes:
        # the pod's volume directory is reached through a short link.
        short = E2E_DIR / "v" / hashlib.sha256(str(root).encode()).hexdigest()[:8]
        short.parent.mkdir(parents=True, exist_ok=True)
        short.unlink(missing_ok=True)
        short.symlink_to(scratch)
        env["TUSK_SCRATCH_DIR"] = str(short)
    if not AS_POSTGRES:
        return argv
    agent = root / "backup-agent"
    shutil.copy2(shutil.which(argv[0]) or argv[0], agent)
    agent.chmod(0o755)
    for path in [root, *root.rglob("*")]:
        shutil.chown(path, "postgres", "postgres")
    return as_postgres([str(agent), *argv[1:]], bin_dir)


def termination_message(container: dict, root: Path, rc: int) -> str:
    """What the kubelet puts in state.terminated.message: the file (its first 4096 bytes) or, with
    FallbackToLogsOnError, a failed container and an empty file, the tail of its log."""
    path = root / "termination-log"
    text = path.read_bytes()[:MESSAGE_MAX].decode(errors="replace") if path.exists() else ""
    if text.strip() or rc == 0 or container.get("terminationMessagePolicy") != "FallbackToLogsOnError":
        return text
    log_text = b"".join((root / f).read_bytes() for f in ("stdout", "stderr") if (root / f).exists())
    tail = b"\n".join(log_text.splitlines()[-LOG_TAIL_LINES:])[-LOG_TAIL_BYTES:]
    return tail.decode(errors="replace")


def run_job_pod(pod: dict, argv: list[str], process_env: dict[str, str], root: Path) -> None:
    meta = pod["metadata"]
    name = f'{meta["namespace"]}/{meta["name"]}'
    started = time.monotonic()
    rc, summary = 128, ""
    try:
        with open(root / "stdout", "wb") as out, open(root / "stderr", "wb") as err:
            proc = subprocess.Popen(argv, env=process_env, cwd=root, stdout=out, stderr=err)
            children.add(proc)
            try:
                rc = proc.wait(timeout=JOB_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = proc.wait()
                summary = f"killed after {JOB_TIMEOUT:.0f} s"
            finally:
                children.discard(proc)
        lines = (root / "stdout").read_text(errors="replace").strip().splitlines()
        if lines and not summary:
            try:
                result = json.loads(lines[-1])
                summary = f'status={result.get("status")}' + (
                    f' error={result["error"]!r}' if result.get("error") else ""
                )
            except json.JSONDecodeError:
                summary = lines[-1][:200]
    except Exception as e:  # noqa: BLE001 - a runner bug must still finish the pod
        summary = f"runner error: {e!r}"
        (root / "stderr").write_text(summary + "\n")
    if stopping.is_set():
        return  # interrupted by our own shutdown: leave the pod Running, report nothing
    seconds = time.monotonic() - started
    log(f'{name} {" ".join(argv[1:2]) or "?"} rc={rc} {seconds:.1f}s {summary} (logs {root})')
    with state_lock, open(RESULTS_FILE, "a") as f:
        f.write(json.dumps({"pod": name, "job": meta.get("labels", {}).get("batch.kubernetes.io/job-name"),
                            "args": argv[1:], "rc": rc, "seconds": round(seconds, 2), "summary": summary}) + "\n")
    message = termination_message(pod["spec"]["containers"][0], root, rc)
    try:
        # One request: the stage that finishes the pod must see the message with the exit code.
        annotate(pod, MESSAGE, message, **{EXIT_CODE: str(rc)})
    except subprocess.CalledProcessError as e:
        log(f"{name}: annotating failed: {e.stderr.strip()}")


# ---------------------------------------------------------------------------------------------


def loop(interval: float) -> None:
    taken: set[str] = set()
    waiting: dict[str, str] = {}
    rounds = 0
    log(f"watching pods labelled {SELECTOR} (state {L4_DIR}, agent {os.environ.get('TUSK_AGENT_BIN')})")
    while not stopping.is_set():
        out = kubectl("get", "pods", "-A", "-l", SELECTOR, "-o", "json", check=False)
        if out.returncode != 0:
            log(f"listing pods failed: {out.stderr.strip()}")
            stopping.wait(interval)
            continue
        pods = [p for p in json.loads(out.stdout)["items"] if p.get("status", {}).get("phase") == "Running"]
        # Databases first, so a Job listed in the same round finds its server.
        for pod in pods:
            labels = pod["metadata"].get("labels", {})
            if owner_kind(pod) == "StatefulSet" and labels.get("app.kubernetes.io/component") == "database":
                try:
                    ensure_database(pod)
                except Exception as e:  # noqa: BLE001 - keep serving the other pods
                    log(f'database pod {pod["metadata"]["namespace"]}/{pod["metadata"]["name"]}: {e}')
        for pod in pods:
            meta = pod["metadata"]
            annotations = meta.get("annotations") or {}
            if owner_kind(pod) != "Job" or meta["uid"] in taken:
                continue
            if EXIT_CODE in annotations or TAKEN in annotations:
                continue
            try:
                prepared = prepare_job_pod(pod)
            except ConfigError as e:
                # The kubelet keeps the container waiting (CreateContainerConfigError) and retries;
                # so does this loop. The reason is logged once and shown on the pod.
                reason = f"CreateContainerConfigError: {e}"
                if waiting.get(meta["uid"]) != reason:
                    waiting[meta["uid"]] = reason
                    log(f'{meta["namespace"]}/{meta["name"]}: {reason} (retrying)')
                    kubectl("annotate", "pod", "-n", meta["namespace"], meta["name"],
                            f"{WAITING}={reason}", "--overwrite", check=False)
                continue
            except Exception as e:  # noqa: BLE001 - an API hiccup: try again next round
                log(f'{meta["namespace"]}/{meta["name"]}: preparing failed, retrying: {e!r}')
                continue
            taken.add(meta["uid"])
            try:
                annotate(pod, TAKEN, f"started {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
            except subprocess.CalledProcessError:
                continue  # deleted meanwhile
            threading.Thread(target=run_job_pod, args=(pod, *prepared), daemon=True).start()
        rounds += 1
        if rounds % 5 == 0:
            collect_deleted_clusters()
        stopping.wait(interval)


def collect_deleted_clusters() -> None:
    """An instance whose StatefulSet is gone goes with it, as its volume claim would."""
    out = kubectl("get", "statefulsets", "-A", "-l", SELECTOR, "-o", "jsonpath={.items[*].metadata.uid}", check=False)
    if out.returncode != 0:
        return
    live = set(out.stdout.split())
    with state_lock:
        state = load_state()
        gone = {k: v for k, v in state.items() if v["statefulsetUid"] not in live}
        for key in gone:
            del state[key]
        save_state(state)
    for key, instance in gone.items():
        stop_instance(instance)
        if instance.get("dir"):
            shutil.rmtree(instance["dir"], ignore_errors=True)
        log(f"{key}: StatefulSet deleted, local PostgreSQL on port {instance['port']} stopped and removed")


def down() -> None:
    with state_lock:
        state = load_state()
    for key, instance in state.items():
        stop_instance(instance)
        log(f"{key}: local PostgreSQL on port {instance['port']} stopped")
    if STATE_FILE.exists():
        STATE_FILE.unlink()
    shutil.rmtree(L4_DIR / "pg", ignore_errors=True)  # the "volumes" go with the environment


def main() -> None:
    cmd = sys.argv[1] if len(sys.argv) > 1 else "run"
    L4_DIR.mkdir(parents=True, exist_ok=True)
    if cmd == "run":
        if not os.environ.get("TUSK_AGENT_BIN"):
            sys.exit("jobrunner: set TUSK_AGENT_BIN to the backup-agent binary built from this workspace")

        def stop(*_):
            stopping.set()
            for proc in list(children):
                proc.terminate()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        loop(float(os.environ.get("TUSK_E2E_POLL_SECONDS", "1")))
    elif cmd == "down":
        down()
    elif cmd in ("port", "socket") and len(sys.argv) == 4:
        instance = load_state().get(f"{sys.argv[2]}/{sys.argv[3]}")
        if not instance or instance.get("failed"):
            sys.exit(f"jobrunner: no running local PostgreSQL for {sys.argv[2]}/{sys.argv[3]}")
        print(instance["port"] if cmd == "port" else instance["socketDir"])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
