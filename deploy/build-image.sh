#!/usr/bin/env bash
# Build the dejaq broker image from nothing with podman, and print its tag.
#
#   deploy/build-image.sh [TAG]      (default localhost/dejaq:<version>)
#   DEJAQ_IMAGE_REBUILD=1 deploy/build-image.sh    build even when nothing changed
#
# Recipe (no image registry is needed): debootstrap a minimal Debian bookworm
# from the mirror apt already uses, `podman import` it as the base image, build
# the wheels of dejaq and its drivers on the host, and build deploy/Containerfile
# over them (runc, cgroupfs, host network for apt). The base rootfs is cached in
# $DEJAQ_IMAGE_CACHE (default /var/cache/dejaq-image). An image already carrying
# this tag is reused when its inputs (the package sources, pyproject.toml, the
# Containerfile, this script and the base image) hash the same: label dejaq.inputs.
# Installs podman, buildah, runc and debootstrap when missing (root, apt).
# Progress goes to stderr; stdout is the tag alone.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)"
tag="${1:-localhost/dejaq:$version}"
cache="${DEJAQ_IMAGE_CACHE:-/var/cache/dejaq-image}"
suite=bookworm
base="localhost/dejaq-base:$suite"
podman=(podman --runtime runc --cgroup-manager cgroupfs)
ulimits=(--ulimit nofile=20000:20000 --ulimit nproc=32768:32768)

source scripts/container-tools.sh >&2
say() { echo "== $*" >&2; }

# The mirror apt uses here (deb822 .sources or a one-line sources.list).
apt_mirror() {
  local uri
  uri="$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v security | head -1)"
  [ -n "$uri" ] || uri="$(grep -hs '^deb ' /etc/apt/sources.list | awk '{print $2}' | head -1)"
  echo "${uri:-http://deb.debian.org/debian}"
}

make_base() {
  local rootfs_tar="$cache/rootfs-$suite.tar"
  if [ ! -s "$rootfs_tar" ]; then
    local dir mirror
    mirror="$(apt_mirror)"
    dir="$(mktemp -d /var/tmp/dejaq-rootfs.XXXXXX)"
    say "debootstrap --variant=minbase $suite from $mirror"
    debootstrap --variant=minbase "$suite" "$dir" "$mirror" >&2
    mkdir -p "$cache"
    tar -C "$dir" -cf "$rootfs_tar.part" .
    mv "$rootfs_tar.part" "$rootfs_tar"
    rm -rf "$dir"
  fi
  say "importing the base image $base from $rootfs_tar"
  "${podman[@]}" import --change 'CMD ["/bin/bash"]' "$rootfs_tar" "$base" >&2
}

# What the image is made of: tracked and new (not ignored) sources, the build files, the base.
inputs_hash() {
  {
    git ls-files --cached --others --exclude-standard -- core proto fbs broker driver \
      storage_plugins pyproject.toml setup.py | sort | xargs sha256sum
    sha256sum deploy/Containerfile deploy/build-image.sh
    "${podman[@]}" image inspect --format '{{.Id}}' "$base"
  } | sha256sum | cut -d' ' -f1
}

"${podman[@]}" image exists "$base" || make_base
inputs="$(inputs_hash)"
if [ -z "${DEJAQ_IMAGE_REBUILD:-}" ] && "${podman[@]}" image exists "$tag" \
   && [ "$("${podman[@]}" image inspect --format '{{index .Labels "dejaq.inputs"}}' "$tag")" = "$inputs" ]; then
  say "$tag is up to date (inputs $inputs)"
  echo "$tag"
  exit 0
fi

context="$(mktemp -d /var/tmp/dejaq-image.XXXXXX)"
trap 'rm -rf "$context"' EXIT
py="$ROOT/.venv/bin/python"
isolation=()
# Where scripts/bootstrap.sh put the build's requirements (mypyc among them) into
# .venv, build there: that reuses the C it compiled for the editable install, where
# an isolated build installs them all again and compiles every module anew (~35 s of CPU).
if [ -x "$py" ] && "$py" -c 'import mypy, numpy, setuptools' 2>/dev/null; then
  isolation=(--no-build-isolation)
else
  [ -x "$py" ] || py=python3
fi
say "building wheels for dejaq-timeline[etcd,redis,postgres] on the host"
# async-timeout: redis needs it on the image's Python 3.11.2 (< 3.11.3), which
# the host's newer 3.11 does not, so the host's resolver would leave it out.
"$py" -m pip wheel --quiet "${isolation[@]}" --wheel-dir "$context/wheels" \
  ".[etcd,redis,postgres]" "async-timeout>=4.0.3" \
  2>&1 | { grep -v "^WARNING: Location 'file:" || true; } >&2
old="$("${podman[@]}" image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)"
say "building $tag"
"${podman[@]}" build --pull=never --network host "${ulimits[@]}" \
  --build-arg "BASE=$base" --label "dejaq.inputs=$inputs" \
  --label "org.opencontainers.image.version=$version" \
  -f deploy/Containerfile -t "$tag" "$context" >&2
# The image this tag named before is untagged now: do not let rebuilds pile up.
if [ -n "$old" ] && [ "$old" != "$("${podman[@]}" image inspect --format '{{.Id}}' "$tag")" ]; then
  "${podman[@]}" rmi "$old" >/dev/null 2>&1 || true
fi
echo "$tag"
