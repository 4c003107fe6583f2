#!/usr/bin/env bash
# Builds (or reuses) the pinned upstream control-plane binaries of the local e2e environment:
# kube-apiserver, kube-controller-manager, kube-scheduler and kubectl, etcd, and kwok.
# Each lands in ${TUSK_TESTBIN:-~/.cache/tusk-testbin}/<component>-<version>/, outside the
# repository; nothing here is committed. A warm cache makes a re-run take well under a second.
# Usage: eval "$(e2e/local/binaries.sh)"   # export lines on stdout, progress on stderr
set -euo pipefail

KUBERNETES_VERSION="v1.37.2"   # k8s.io/kubernetes; its staging modules are v0.37.2
ETCD_VERSION="v3.6.16"
KWOK_VERSION="v0.8.0"
CACHE="${TUSK_TESTBIN:-$HOME/.cache/tusk-testbin}"
K8S_COMPONENTS=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy)

log() { echo "binaries.sh: $*" >&2; }
command -v go >/dev/null || { log "Go toolchain not found (needed to build the control plane)"; exit 1; }

# Go builds are heavy and the machines small: keep them polite. CGO off gives static binaries.
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
gobuild() { nice -n 10 go "$@"; }

# have NAME VERSION: true when CACHE/NAME-VERSION/NAME is an executable.
have() { [[ -x "$CACHE/$1-$2/$1" ]]; }

# install_into NAME VERSION FILE: move a freshly built FILE into CACHE/NAME-VERSION/NAME.
install_into() {
  local dir="$CACHE/$1-$2"
  rm -rf "$dir" && mkdir -p "$dir" && mv "$3" "$dir/$1"
}

# kubernetes: `go install k8s.io/kubernetes/cmd/...@v` cannot work because k8s.io/kubernetes
# replaces its staging modules (k8s.io/api, ...) with local paths. A wrapper module requires it
# and replaces each staging module with its published version.
build_kubernetes() {
  local missing=0 c
  for c in "${K8S_COMPONENTS[@]}"; do have "$c" "$KUBERNETES_VERSION" || missing=1; done
  ((missing)) || return 0
  local v=${KUBERNETES_VERSION#v}
  local staging="0.${v#*.}" minor=${v#*.}
  minor=${minor%%.*}
  local mod="$CACHE/src/kubernetes-$KUBERNETES_VERSION"
  log "building kubernetes $KUBERNETES_VERSION (cold: ~10-30 min on 2 cores; warm Go cache: ~1 min)..."
  mkdir -p "$mod"
  {
    printf 'module local/k8sbin\n\ngo 1.26\n\nrequire k8s.io/kubernetes v%s\n\n' "$v"
    for m in api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider \
      cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api \
      cri-client cri-streaming csi-translation-lib dynamic-resource-allocation endpointslice externaljwt \
      kms kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics \
      mount-utils pod-security-admission sample-apiserver sample-cli-plugin sample-controller streaming; do
      echo "replace k8s.io/$m => k8s.io/$m v$staging"
    done
  } >"$mod/go.mod.want"
  # Keep go.mod/go.sum from an earlier tidy when the wanted header has not changed.
  if ! cmp -s "$mod/go.mod.want" "$mod/go.mod.from" 2>/dev/null; then
    cp "$mod/go.mod.want" "$mod/go.mod" && cp "$mod/go.mod.want" "$mod/go.mod.from" && rm -f "$mod/go.sum"
  fi
  {
    echo '//go:build tools'
    echo
    echo 'package tools'
    echo
    echo 'import ('
    for c in "${K8S_COMPONENTS[@]}"; do echo "	_ \"k8s.io/kubernetes/cmd/$c\""; done
    echo ')'
  } >"$mod/tools.go"
  (cd "$mod" && gobuild mod tidy >&2)
  local out="$mod/bin.tmp"
  rm -rf "$out" && mkdir -p "$out"
  local pkgs=()
  for c in "${K8S_COMPONENTS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  (cd "$mod" && gobuild build -trimpath -tags selinux,notest \
    -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean" \
    -o "$out/" "${pkgs[@]}" >&2)
  for c in "${K8S_COMPONENTS[@]}"; do install_into "$c" "$KUBERNETES_VERSION" "$out/$c"; done
  rm -rf "$out"
}

# etcd: server/go.mod also replaces its sibling modules, so it gets a wrapper module too.
build_etcd() {
  have etcd "$ETCD_VERSION" && return 0
  local mod="$CACHE/src/etcd-$ETCD_VERSION"
  log "building etcd $ETCD_VERSION..."
  mkdir -p "$mod"
  local want
  want=$(printf 'module local/etcdbin\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION")
  if [[ "$want" != "$(cat "$mod/go.mod.from" 2>/dev/null)" ]]; then
    echo "$want" >"$mod/go.mod" && echo "$want" >"$mod/go.mod.from" && rm -f "$mod/go.sum"
  fi
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >"$mod/tools.go"
  (cd "$mod" && gobuild mod tidy >&2 && gobuild build -trimpath -ldflags "-s -w" -o "$mod/etcd.tmp" go.etcd.io/etcd/server/v3 >&2)
  install_into etcd "$ETCD_VERSION" "$mod/etcd.tmp"
}

# kwok has no replaces: go install works.
build_kwok() {
  have kwok "$KWOK_VERSION" && return 0
  log "building kwok $KWOK_VERSION..."
  local tmp="$CACHE/kwok-$KWOK_VERSION.tmp"
  rm -rf "$tmp" && mkdir -p "$tmp"
  GOBIN="$tmp" gobuild install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" >&2
  install_into kwok "$KWOK_VERSION" "$tmp/kwok"
  rm -rf "$tmp"
}

build_kubernetes
build_etcd
build_kwok

# kwok's Stage manifests ship in its module; e2e/local/up.sh copies the ones it uses from here.
kwok_src="$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION"
if [[ ! -d "$kwok_src/kustomize/stage" ]]; then
  kwok_src=$(cd / && go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
fi

echo "export TUSK_KUBE_APISERVER_BIN=$CACHE/kube-apiserver-$KUBERNETES_VERSION/kube-apiserver"
echo "export TUSK_KUBE_CONTROLLER_MANAGER_BIN=$CACHE/kube-controller-manager-$KUBERNETES_VERSION/kube-controller-manager"
echo "export TUSK_KUBE_SCHEDULER_BIN=$CACHE/kube-scheduler-$KUBERNETES_VERSION/kube-scheduler"
echo "export TUSK_KUBECTL_BIN=$CACHE/kubectl-$KUBERNETES_VERSION/kubectl"
echo "export TUSK_KUBELET_BIN=$CACHE/kubelet-$KUBERNETES_VERSION/kubelet"
echo "export TUSK_KUBE_PROXY_BIN=$CACHE/kube-proxy-$KUBERNETES_VERSION/kube-proxy"
echo "export TUSK_ETCD_BIN=$CACHE/etcd-$ETCD_VERSION/etcd"
echo "export TUSK_KWOK_BIN=$CACHE/kwok-$KWOK_VERSION/kwok"
echo "export TUSK_KWOK_STAGES=$kwok_src/kustomize/stage"
