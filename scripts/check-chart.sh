#!/usr/bin/env bash
# Static checks of the Helm chart (deploy/helm/tusk) and the monitoring it ships: helm lint,
# helm template with default, namespace-scoped and monitoring values (namespace-scoped RBAC must
# leave Secrets out of every ClusterRole), promtool check/test of the alert rules, and the
# dashboard's JSON. The server-side dry run is an e2e scenario (e2e/tests/helm.rs).
# helm and promtool come pinned from scripts/testbin.sh (TUSK_HELM_BIN/TUSK_PROMTOOL_BIN if set).
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -z "${TUSK_HELM_BIN:-}" || -z "${TUSK_PROMTOOL_BIN:-}" ]]; then
  eval "$(scripts/testbin.sh helm promtool)"
fi
helm=$TUSK_HELM_BIN
promtool=$TUSK_PROMTOOL_BIN
chart=deploy/helm/tusk

"$helm" lint --strict "$chart"
"$helm" lint --strict "$chart" --set 'watchNamespaces={a,b}' \
  --set metrics.serviceMonitor.enabled=true --set metrics.podMonitor.enabled=true \
  --set prometheusRule.enabled=true --set grafanaDashboard.enabled=true

render() { "$helm" template tusk "$chart" --namespace tusk-system --include-crds "$@"; }
# summary: "N objects: kinds..." of a rendered stream.
summary() { grep '^kind:' | sort | uniq -c | awk '{printf "%s %s, ", $1, $3}'; echo; }

echo "default values: $(render | summary)"
scoped=(--set 'watchNamespaces={team-a,team-b}')
echo "watchNamespaces [team-a, team-b]: $(render "${scoped[@]}" | summary)"
# Namespace-scoped really is scoped: no ClusterRole grants Secrets (nor anything by wildcard),
# each watched namespace has its Role with them, and the operator watches only those.
cluster_rbac=$(render "${scoped[@]}" --show-only templates/clusterrole.yaml)
if grep -Eq 'secrets|"\*"' <<<"$cluster_rbac"; then
  echo "namespace-scoped mode: a ClusterRole grants Secrets or a wildcard:" >&2
  echo "$cluster_rbac" >&2
  exit 1
fi
roles=$(render "${scoped[@]}" --show-only templates/role.yaml)
for ns in team-a team-b; do
  # The Role of each watched namespace, and within it the Secrets rule.
  awk -v ns="$ns" '/^---/{doc=""} {doc=doc $0 "\n"} /"secrets"/ && doc ~ "kind: Role\n" && doc ~ "namespace: " ns "\n" {found=1} END{exit !found}' <<<"$roles" \
    || { echo "namespace-scoped mode: no Role granting Secrets in $ns" >&2; exit 1; }
done
render "${scoped[@]}" --show-only templates/deployment.yaml | grep -q -- '- --namespace=team-a,team-b$' \
  || { echo "namespace-scoped mode: the operator is not given --namespace=team-a,team-b" >&2; exit 1; }
echo "namespace-scoped: no ClusterRole grants Secrets; Roles in team-a and team-b; --namespace=team-a,team-b"
monitoring=$(render --set metrics.serviceMonitor.enabled=true --set metrics.podMonitor.enabled=true \
  --set 'metrics.podMonitor.clusters[0].namespace=prod' --set 'metrics.podMonitor.clusters[0].name=demo' \
  --set prometheusRule.enabled=true --set grafanaDashboard.enabled=true)
# One PodMonitor per listed cluster, in its namespace, with its CA and status token.
pod_monitor=$(render --set metrics.podMonitor.enabled=true --set 'metrics.podMonitor.clusters[0].namespace=prod' \
  --set 'metrics.podMonitor.clusters[0].name=demo' --show-only templates/podmonitor.yaml)
for want in 'namespace: prod' 'tusk.dev/cluster: demo' 'scheme: https' 'name: demo-server-tls' \
  'serverName: demo-rw' 'type: Bearer' 'name: demo-monitoring'; do
  grep -qF "$want" <<<"$pod_monitor" \
    || { echo "the instance managers' PodMonitor lacks '$want':" >&2; echo "$pod_monitor" >&2; exit 1; }
done
echo "monitoring enabled: $(summary <<<"$monitoring")"

"$promtool" check rules "$chart/files/prometheus-rules.yaml"
"$promtool" test rules deploy/monitoring/rules_test.yaml
# The dashboard's queries parse as PromQL: promtool checks them as recording rules (JSON is YAML).
queries=$(mktemp --suffix=.json)
trap 'rm -f "$queries"' EXIT
python3 - "$chart/files/grafana-dashboard.json" >"$queries" <<'PY'
import json, sys
panels = json.load(open(sys.argv[1]))["panels"]
rules = [{"record": f"dashboard:panel{p['id']}:{t['refId']}", "expr": t["expr"]}
         for p in panels for t in p["targets"]]
print(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
print(f"dashboard: {len(panels)} panels, {len(rules)} queries", file=sys.stderr)
PY
"$promtool" check rules "$queries"
