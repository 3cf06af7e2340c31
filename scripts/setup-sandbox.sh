#!/bin/sh
# setup-sandbox.sh installs the host tools the sandbox package needs:
# bubblewrap (the isolated local provider) and git (baselines and diffs).
# It is idempotent: packages that are already present are left alone.
set -eu

missing=""
command -v bwrap >/dev/null 2>&1 || missing="$missing bubblewrap"
command -v git >/dev/null 2>&1 || missing="$missing git"
command -v find >/dev/null 2>&1 || missing="$missing findutils"

if [ -z "$missing" ]; then
	echo "setup-sandbox: bubblewrap and git already installed"
	exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	SUDO="sudo"
fi

echo "setup-sandbox: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086 # word splitting of the package list is intended
$SUDO apt-get install -y -qq --no-install-recommends $missing
