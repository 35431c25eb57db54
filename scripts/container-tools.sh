# Sourced by servers.sh and deploy/build-image.sh: install the tools that build
# and run the container image (Debian's podman, buildah, runc, debootstrap) when
# they are missing. Under CI=true a failed install is fatal; locally the image
# tests are skipped instead.
container_need=()
for tool in podman buildah runc debootstrap; do
  command -v "$tool" >/dev/null || container_need+=("$tool")
done
if [ ${#container_need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing ${container_need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends \
        "${container_need[@]}" uidmap fuse-overlayfs slirp4netns >/dev/null; }; then
      [ "${CI:-}" = "true" ] && { echo "could not install ${container_need[*]}"; exit 1; }
    fi
  elif [ "${CI:-}" = "true" ]; then
    echo "CI needs ${container_need[*]} and cannot install them (not root or no apt-get)"; exit 1
  else
    echo "== ${container_need[*]} missing: the image tests will be skipped"
  fi
fi
unset container_need
