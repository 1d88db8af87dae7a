#!/usr/bin/env bash
# Moves the release version everywhere it is written: VERSION, the chart's
# version and appVersion, the kustomize base's image tag, pkg/version's
# default, and the install commands in the READMEs and docs/ (?ref=, helm
# --version, image tags). The CHANGELOG entry is yours to write; `make
# release-check` fails until its newest entry is the new version.
#   scripts/set-version.sh v0.2.0
set -euo pipefail
cd "$(dirname "$0")/.."
new=${1:?usage: $0 vX.Y.Z}
[[ $new =~ ^v([0-9]+\.[0-9]+\.[0-9]+)$ ]] || { echo "$0: $new is not vX.Y.Z" >&2; exit 2; }
newc=${BASH_REMATCH[1]}
old=$(cat VERSION)
oldc=${old#v}
q() { printf '%s' "$1" | sed 's/[.]/\\./g'; }
echo "$new" > VERSION
sed -i -e "s/^version: $(q "$oldc")\$/version: $newc/" -e "s/^appVersion: $(q "$old")\$/appVersion: $new/" deployments/helm/dri-cdi/Chart.yaml
sed -i -e "s/^  newTag: $(q "$old")\$/  newTag: $new/" deployments/kustomize/base/kustomization.yaml
sed -i -e "s/^var Version = \"$(q "$old")\"\$/var Version = \"$new\"/" pkg/version/version.go
sed -i -e "s/?ref=$(q "$old")/?ref=$new/g" \
  -e "s|charts/dri-cdi --version $(q "$oldc")|charts/dri-cdi --version $newc|g" \
  -e "s|ghcr\.io/dri-cdi/dri-cdi:$(q "$old")|ghcr.io/dri-cdi/dri-cdi:$new|g" \
  -e "s|raw\.githubusercontent\.com/dri-cdi/dri-cdi/$(q "$old")/|raw.githubusercontent.com/dri-cdi/dri-cdi/$new/|g" \
  README.md deployments/README.md docs/*.md
sed -i -e "s/^    tag: $(q "$oldc")$/    tag: $newc/" deployments/gitops/flux/ocirepository.yaml
sed -i -e "s/^    targetRevision: $(q "$oldc")$/    targetRevision: $newc/" deployments/gitops/argocd/application.yaml
echo "$old -> $new; now write the CHANGELOG.md entry \"## [$new] - <date>\","
echo "rewrite the golden files (cd deployments/test && go test ./... -update) and run make release-check"
