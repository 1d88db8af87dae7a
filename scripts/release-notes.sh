#!/usr/bin/env bash
# Prints the CHANGELOG.md entry of a release, without its heading, for the
# release notes of the tag: scripts/release-notes.sh v0.1.0 [CHANGELOG.md].
# Fails when the changelog has no entry for that version, so that a tag
# without notes cannot be released.
set -euo pipefail
version=${1:?usage: $0 vX.Y.Z [CHANGELOG.md]}
changelog=${2:-$(dirname "$0")/../CHANGELOG.md}
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "$0: $version is not vX.Y.Z" >&2; exit 2; }
awk -v v="$version" '
  /^## / { if (found) exit; if (index($0, "## [" v "]") == 1) { found = 1; next } }
  found { print }
  END { if (!found) { print "no entry \"## [" v "]\" in the changelog" > "/dev/stderr"; exit 1 } }
' "$changelog" | sed -e '/./,$!d' | sed -e ':a' -e '/^\n*$/{$d;N;ba' -e '}'
