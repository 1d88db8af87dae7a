#!/usr/bin/env bash
# Installs what the e2e harness runs: the apt packages it needs, then
# containerd (+ shim, ctr), runc (with seccomp), crictl and kubelet, built
# from their Go modules, and for the cluster scenarios the control plane
# (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl), etcd,
# the CNI reference plugins, helm and kustomize. Each tool is built once per version into
# $DRI_CDI_E2E_CACHE/<tool>-<version>/ and reused afterwards; the harness
# finds them through the symlinks in $DRI_CDI_E2E_CACHE/bin.
set -euo pipefail

CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
RUNC_VERSION=${RUNC_VERSION:-v1.5.3}
CRICTL_VERSION=${CRICTL_VERSION:-v1.37.0}
KUBELET_VERSION=${KUBELET_VERSION:-v1.37.2}
# The control plane comes from the same k8s.io/kubernetes version (and
# wrapper module) as the kubelet.
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
CNI_PLUGINS_VERSION=${CNI_PLUGINS_VERSION:-v1.10.0}
HELM_VERSION=${HELM_VERSION:-v3.22.0}
KUSTOMIZE_VERSION=${KUSTOMIZE_VERSION:-v5.8.2}
# kustomize v5.8.2 is the release of sigs.k8s.io/kustomize/api v0.21.2, which
# deployments/test renders with; v5.8.3 needs Go 1.27.
CACHE=${DRI_CDI_E2E_CACHE:-/var/cache/dri-cdi-e2e}
APT_PACKAGES=(libseccomp-dev pkg-config busybox-static gcc libc6-dev)

here=$(cd "$(dirname "$0")" && pwd)
log() { printf '%s install: %s\n' "$(date +%T)" "$*" >&2; }

install_apt() {
	local missing=()
	for p in "${APT_PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return
	log "apt-get install ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# build NAME VERSION CMD...: runs CMD with GOBIN set to a fresh directory
# and moves it to $CACHE/NAME-VERSION only when CMD succeeded, so an
# interrupted build is never mistaken for a finished one.
build() {
	local name=$1 version=$2
	shift 2
	local dest=$CACHE/$name-$version lockfd
	# One build per tool and version at a time; a second installer waits
	# and then finds the result.
	exec {lockfd}>"$CACHE/.lock-$name-$version"
	flock "$lockfd"
	if [ -f "$dest/.complete" ]; then
		log "$name $version: cached in $dest"
		exec {lockfd}>&-
		return
	fi
	# Leftovers of an interrupted build of this tool.
	rm -rf "$CACHE/.build-$name-$version".*
	local start=$SECONDS tmp
	tmp=$(mktemp -d "$CACHE/.build-$name-$version.XXXXXX")
	log "$name $version: building"
	if ! GOBIN=$tmp "$@" >"$tmp/.build.log" 2>&1; then
		cat "$tmp/.build.log" >&2
		rm -rf "$tmp"
		log "$name $version: build failed"
		exec {lockfd}>&-
		return 1
	fi
	touch "$tmp/.complete"
	rm -rf "$dest"
	mv "$tmp" "$dest"
	exec {lockfd}>&-
	log "$name $version: built in $((SECONDS - start))s"
}

build_containerd() {
	go install \
		"github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD_VERSION" \
		"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" \
		"github.com/containerd/containerd/v2/cmd/ctr@$CONTAINERD_VERSION"
}

build_runc() {
	CGO_ENABLED=1 go install -tags seccomp "github.com/opencontainers/runc@$RUNC_VERSION"
}

build_crictl() {
	go install "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
}

# build_kubelet builds cmd/kubelet from a wrapper module: `go install`
# refuses k8s.io/kubernetes because its go.mod replaces the staging
# modules with local directories. The wrapper replaces each of them with
# the published module of the matching v0 version instead; the list comes
# from kubernetes's own go.mod.
build_kubelet() {
	k8s_wrapper_module "$here/kubelet" || return 1
	(cd "$here/kubelet" && go get "k8s.io/kubernetes/cmd/kubelet@$KUBELET_VERSION" && go build -trimpath -o "$GOBIN/kubelet" k8s.io/kubernetes/cmd/kubelet)
}

# build_controlplane builds kube-apiserver, kube-controller-manager,
# kube-scheduler and kubectl in one `go build` from the kubelet's wrapper
# module, so they share every compiled package with each other and, through
# the Go build cache, with the kubelet.
build_controlplane() {
	local cmds=(kube-apiserver kube-controller-manager kube-scheduler kubectl) pkgs=() gets=() c
	for c in "${cmds[@]}"; do
		pkgs+=("k8s.io/kubernetes/cmd/$c")
		gets+=("k8s.io/kubernetes/cmd/$c@$KUBELET_VERSION")
	done
	# The version the API server reports (helm checks a chart's kubeVersion
	# against it); k8s sets it at link time, a plain go build would report
	# v0.0.0-master.
	local v=k8s.io/component-base/version minor=${KUBELET_VERSION#v1.}
	local ldflags="-X $v.gitVersion=$KUBELET_VERSION -X $v.gitMajor=1 -X $v.gitMinor=${minor%%.*} -X $v.gitTreeState=clean"
	k8s_wrapper_module "$here/kubelet" || return 1
	(cd "$here/kubelet" && go get "${gets[@]}" && go build -trimpath -ldflags "$ldflags" -o "$GOBIN/" "${pkgs[@]}")
}

# build_etcd builds e2e/tools/etcd, a small program on etcd's embed
# package: `go install` refuses the etcd module itself because of its
# replace directives.
build_etcd() {
	(cd "$here/etcd" && go build -trimpath -o "$GOBIN/etcd" .)
}

build_cni() {
	local p=github.com/containernetworking/plugins/plugins
	go install "$p/main/bridge@$CNI_PLUGINS_VERSION" "$p/ipam/host-local@$CNI_PLUGINS_VERSION" "$p/main/loopback@$CNI_PLUGINS_VERSION"
}

build_helm() {
	go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
}

build_kustomize() {
	go install "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION"
}

# k8s_wrapper_module DIR writes the wrapper module into DIR.
k8s_wrapper_module() {
	local mod=$1 staging=v0${KUBELET_VERSION#v1}
	mkdir -p "$mod"
	local kmod
	kmod=$(cd "$mod" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBELET_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
	[ -f "$kmod" ] || { echo "no go.mod downloaded for k8s.io/kubernetes@$KUBELET_VERSION" >&2; return 1; }
	local goline replaces
	goline=$(grep -m1 '^go ' "$kmod")
	replaces=$(sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\)[[:space:]]*=>[[:space:]]*\./staging/.*#\1#p' "$kmod")
	[ -n "$replaces" ] || { echo "no staging replaces found in $kmod" >&2; return 1; }
	{
		echo "// Generated by e2e/tools/install.sh; do not edit."
		echo "module github.com/dri-cdi/dri-cdi/e2e/tools/kubelet"
		echo
		echo "$goline"
		echo
		echo "require k8s.io/kubernetes $KUBELET_VERSION"
		echo
		echo "replace ("
		for m in $replaces; do echo "	$m => $m $staging"; done
		echo ")"
	} >"$mod/go.mod"
	rm -f "$mod/go.sum"
	echo "wrapper replaces $(echo "$replaces" | wc -w) staging modules"
}

link() {
	local target=$1
	ln -sfn "$target" "$CACHE/bin/$(basename "$target")"
}

main() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "install.sh must run as root (apt-get, $CACHE)" >&2
		exit 1
	fi
	command -v go >/dev/null || { echo "go is not on PATH" >&2; exit 1; }
	mkdir -p "$CACHE/bin"
	install_apt
	local which=${1:-all}
	case $which in
	all | kubelet) build kubelet "$KUBELET_VERSION" build_kubelet ;;
	esac
	case $which in
	all | containerd) build containerd "$CONTAINERD_VERSION" build_containerd ;;
	esac
	case $which in
	all | runc) build runc "$RUNC_VERSION" build_runc ;;
	esac
	case $which in
	all | crictl) build crictl "$CRICTL_VERSION" build_crictl ;;
	esac
	case $which in
	all | cluster | k8s-controlplane) build k8s-controlplane "$KUBELET_VERSION" build_controlplane ;;
	esac
	case $which in
	all | cluster | etcd) build etcd "$ETCD_VERSION" build_etcd ;;
	esac
	case $which in
	all | cluster | cni-plugins) build cni-plugins "$CNI_PLUGINS_VERSION" build_cni ;;
	esac
	case $which in
	all | cluster | helm) build helm "$HELM_VERSION" build_helm ;;
	esac
	case $which in
	all | cluster | kustomize) build kustomize "$KUSTOMIZE_VERSION" build_kustomize ;;
	esac
	for t in kubelet:$KUBELET_VERSION containerd:$CONTAINERD_VERSION containerd-shim-runc-v2:$CONTAINERD_VERSION \
		ctr:$CONTAINERD_VERSION runc:$RUNC_VERSION crictl:$CRICTL_VERSION \
		kube-apiserver:$KUBELET_VERSION kube-controller-manager:$KUBELET_VERSION kube-scheduler:$KUBELET_VERSION \
		kubectl:$KUBELET_VERSION etcd:$ETCD_VERSION helm:$HELM_VERSION kustomize:$KUSTOMIZE_VERSION; do
		local bin=${t%%:*} version=${t#*:} dir
		case $bin in
		containerd-shim-runc-v2 | ctr) dir=containerd ;;
		kube-apiserver | kube-controller-manager | kube-scheduler | kubectl) dir=k8s-controlplane ;;
		*) dir=$bin ;;
		esac
		[ -x "$CACHE/$dir-$version/$bin" ] && link "$CACHE/$dir-$version/$bin"
	done
	# The harness hands containerd this directory as its CNI bin dir.
	[ -x "$CACHE/cni-plugins-$CNI_PLUGINS_VERSION/bridge" ] && ln -sfn "$CACHE/cni-plugins-$CNI_PLUGINS_VERSION" "$CACHE/bin/cni"
	log "tools in $CACHE/bin"
}

main "$@"
