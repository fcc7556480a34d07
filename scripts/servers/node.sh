# shellcheck shell=bash
# shellcheck disable=SC2154  # cache, here, kube_bin: set by scripts/test-servers
# A real node for the tests, sourced by scripts/test-servers:
#
#   scripts/test-servers start-node DIR NAME   # after `start DIR`
#   scripts/test-servers stop-node DIR NAME    # (`stop DIR` stops every node)
#
# containerd and runc from Debian's packages and the kubelet of the
# Kubernetes build, registered to the API server started in DIR as node
# NAME. Each node lives in a network namespace of its own (bound to
# DIR/nodes/NAME/ns/net) and a mount namespace (ns/mnt), with 127.0.0.1 and a documentation address
# (192.0.2.N, RFC 5737) on its loopback device: pods use hostNetwork (no
# CNI plugin runs), two nodes' pods can listen on the same port, and
# nothing leaves the machine. The API server, on the machine's loopback, is
# 127.0.0.1:6443 inside the namespace (a forwarder, servers/netns-proxy).
# Images are local: a pause image and a busybox image built here
# (scripts/oci-image), imported into the node's containerd, and the
# IMAGE.tar files WASMSCHED_TEST_NODE_IMAGES names (colon-separated).
# DIR/nodes/NAME/env says where everything is (WASMSCHED_TEST_NODE_*).

node_images_dir="$cache/node-images"
pause_image=wasmsched.test/pause:1
busybox_image=wasmsched.test/busybox:1

# The pause (sandbox) image: a static C program that sleeps until told to
# stop; the busybox image, from Debian's busybox-static. Cached.
build_node_images() {
  mkdir -p "$node_images_dir"
  local tmp a
  if [ ! -f "$node_images_dir/pause.tar" ]; then
    tmp=$(mktemp -d)
    cat >"$tmp/pause.c" <<'C'
/* The pod sandbox's process: holds the namespaces, reaps orphans, exits on
 * SIGINT or SIGTERM. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
static void stop(int s) { (void)s; _exit(0); }
static void reap(int s) { (void)s; while (waitpid(-1, 0, WNOHANG) > 0) {} }
int main(void) {
  signal(SIGINT, stop);
  signal(SIGTERM, stop);
  signal(SIGCHLD, reap);
  for (;;) pause();
}
C
    mkdir -p "$tmp/rootfs"
    gcc -static -O2 -s -o "$tmp/rootfs/pause" "$tmp/pause.c"
    "$here/oci-image" --rootfs "$tmp/rootfs" --name "$pause_image" \
      --entrypoint '["/pause"]' --user 65535:65535 --out "$node_images_dir/pause.tar" >/dev/null
    rm -rf "$tmp"
  fi
  if [ ! -f "$node_images_dir/busybox.tar" ]; then
    tmp=$(mktemp -d)
    mkdir -p "$tmp/rootfs/bin" "$tmp/rootfs/tmp"
    chmod 1777 "$tmp/rootfs/tmp"
    cp /bin/busybox "$tmp/rootfs/bin/busybox"
    for a in $(/bin/busybox --list); do
      [ "$a" = busybox ] || ln -s busybox "$tmp/rootfs/bin/$a"
    done
    "$here/oci-image" --rootfs "$tmp/rootfs" --name "$busybox_image" \
      --cmd '["/bin/sh"]' --out "$node_images_dir/busybox.tar" >/dev/null
    rm -rf "$tmp"
  fi
}

node_dir() { echo "$1/nodes/$2"; }

# The cgroup v1 parent of the node's pods (the kubelet's cgroupRoot),
# unique per DIR and node.
node_cgroup() {
  echo "wasmsched-$(printf '%s' "$1" | sha256sum | cut -c1-8)-$2"
}

check_node_name() {
  [[ "$1" =~ ^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$ ]] ||
    { log "node name '$1': must be a DNS label of at most 32 characters"; exit 2; }
}

in_node() { local ndir=$1; shift; nsenter --net="$ndir/ns/net" --mount="$ndir/ns/mnt" "$@"; }

start_node() {
  local dir=$1 name=$2
  check_node_name "$name"
  [ "$(id -u)" -eq 0 ] || { log "start-node: needs root (network and mount namespaces, cgroups, containerd)"; exit 1; }
  [ -f "$dir/env" ] || { log "start-node: $dir/env: no servers started in $dir (run start first)"; exit 1; }
  dir="$(cd "$dir" && pwd)"
  local ndir
  ndir=$(node_dir "$dir" "$name")
  if [ -f "$ndir/kubelet.pid" ] && kill -0 "$(cat "$ndir/kubelet.pid")" 2>/dev/null; then
    log "node $name already runs"; return 0
  fi
  local t0=$SECONDS
  apt_install containerd runc busybox-static gcc libc6-dev iproute2 util-linux
  build_kubernetes
  build_node_images
  stop_node "$dir" "$name"
  mkdir -p "$ndir"
  # The node's index picks its address: 192.0.2.1, .2, ...
  local index
  index=$(cat "$ndir/index" 2>/dev/null || true)
  if [ -z "$index" ]; then
    index=$(($(find "$dir/nodes" -maxdepth 2 -name index | wc -l) + 1))
    echo "$index" >"$ndir/index"
  fi
  local ip="192.0.2.$index" api_port
  api_port=$(sed -n 's|^WASMSCHED_TEST_APISERVER=https://127.0.0.1:||p' "$dir/env")

  # The node's network and mount namespaces, bound to files (no name in
  # /run/netns). In its mount namespace the node has its own
  # /var/lib/kubelet/device-plugins (the kubelet's device-plugin socket has
  # a fixed path), and what its kubelet and containers mount stays there.
  mkdir -p "$ndir/ns" "$ndir/device-plugins" /var/lib/kubelet/device-plugins
  mount --bind "$ndir/ns" "$ndir/ns"
  mount --make-private "$ndir/ns"
  touch "$ndir/ns/net" "$ndir/ns/mnt"
  unshare --net="$ndir/ns/net" --mount="$ndir/ns/mnt" --propagation private \
    mount --bind "$ndir/device-plugins" /var/lib/kubelet/device-plugins
  in_node "$ndir" ip link set lo up
  in_node "$ndir" ip addr add "$ip/32" dev lo
  "$here/servers/netns-proxy" "$ndir/ns/net" 6443 "$api_port" >>"$ndir/proxy.log" 2>&1 &
  echo $! >"$ndir/proxy.pid"

  # containerd, by hand: its own root, state and socket; the overlayfs
  # snapshotter where overlay mounts work (checked), else native.
  local snapshotter=overlayfs
  mkdir -p "$ndir/ovl-check/"{l,u,w,m}
  if mount -t overlay overlay -o "lowerdir=$ndir/ovl-check/l,upperdir=$ndir/ovl-check/u,workdir=$ndir/ovl-check/w" \
    "$ndir/ovl-check/m" 2>/dev/null; then
    umount "$ndir/ovl-check/m"
  else
    snapshotter=native
  fi
  rm -rf "$ndir/ovl-check"
  mkdir -p "$ndir/cni/net.d" "$ndir/cni/bin"
  # No pod network: a configuration whose plugin does not exist, so that
  # the runtime reports its network ready (hostNetwork pods need nothing)
  # and a pod without hostNetwork fails with this name in its events.
  cat >"$ndir/cni/net.d/10-none.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "no-pod-network",
 "plugins": [{"type": "no-pod-network-use-hostNetwork"}]}
EOF
  cat >"$ndir/containerd.toml" <<EOF
version = 2
root = "$ndir/containerd/root"
state = "$ndir/containerd/state"
[grpc]
  address = "$ndir/containerd.sock"
[ttrpc]
  address = "$ndir/containerd.ttrpc.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$ndir/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  # This machine refuses a negative oom_score_adj (the kubelet asks -998
  # for sandboxes, -997 for Guaranteed pods): containerd raises such
  # values to its own (0), as for rootless setups.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "$snapshotter"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$ndir/cni/bin"
    conf_dir = "$ndir/cni/net.d"
EOF
  log "starting containerd $(containerd --version | awk '{print $3}') for node $name ($snapshotter snapshotter)"
  # (nsenter execs the server: the pid file holds its pid)
  nsenter --net="$ndir/ns/net" --mount="$ndir/ns/mnt" containerd --config "$ndir/containerd.toml" >>"$ndir/containerd.log" 2>&1 &
  echo $! >"$ndir/containerd.pid"
  local i ctr=(ctr --address "$ndir/containerd.sock")
  for ((i = 0; i < 300; i++)); do
    "${ctr[@]}" version >/dev/null 2>&1 && break
    sleep 0.1
  done
  "${ctr[@]}" version >/dev/null 2>&1 ||
    { tail -20 "$ndir/containerd.log" >&2; log "containerd did not start"; exit 1; }
  local images=("$node_images_dir/pause.tar" "$node_images_dir/busybox.tar") more img
  if [ -n "${WASMSCHED_TEST_NODE_IMAGES:-}" ]; then
    IFS=: read -r -a more <<<"$WASMSCHED_TEST_NODE_IMAGES"
    images+=("${more[@]}")
  fi
  local ref
  for img in "${images[@]}"; do
    [ -f "$img" ] || { log "image $img: no such file"; exit 1; }
    # Named as its index says (REPO:TAG), and REPO@DIGEST too, so that pods
    # may name it either way.
    ref=$(tar -xOf "$img" index.json | python3 -c \
      'import json,sys; print(json.load(sys.stdin)["manifests"][0]["annotations"]["io.containerd.image.name"])') ||
      { log "image $img: no io.containerd.image.name in its index.json"; exit 1; }
    "${ctr[@]}" -n k8s.io images import --snapshotter "$snapshotter" --digests \
      --base-name "${ref%:*}" "$img" >>"$ndir/containerd.log" 2>&1 ||
      { log "importing $img failed (see $ndir/containerd.log)"; exit 1; }
  done

  # The kubelet, its pods under a cgroup of their own in every cgroup v1
  # hierarchy.
  local cg sub
  cg=$(node_cgroup "$dir" "$name")
  for sub in /sys/fs/cgroup/*/; do
    [ "$(basename "$sub")" = unified ] || mkdir -p "$sub$cg"
  done
  cat >"$ndir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority: $dir/pki/ca.crt
users:
- name: kubelet
  user:
    token: $(cat "$dir/pki/admin-token")
contexts:
- name: test
  context: {cluster: test, user: kubelet}
current-context: test
EOF
  cat >"$ndir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 here: the kubelet refuses it (from 1.35) unless told otherwise.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$cg
failSwapOn: false
containerRuntimeEndpoint: unix://$ndir/containerd.sock
# The kubelet authenticates with the admin token; only the API server, on
# loopback, talks to the kubelet's port.
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
staticPodPath: ""
podLogsDir: $ndir/pod-logs
# How soon an updated ConfigMap reaches a pod's volume: the pod's next
# periodic sync (every syncFrequency, 1m by default) reads it from the
# kubelet's watch-fed cache.
syncFrequency: ${WASMSCHED_TEST_NODE_SYNC:-5s}
configMapAndSecretChangeDetectionStrategy: Watch
nodeStatusUpdateFrequency: 5s
maxPods: ${WASMSCHED_TEST_NODE_MAX_PODS:-16}
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 50Mi, nodefs.available: 1%, imagefs.available: 1%}
EOF
  log "starting kubelet $KUBERNETES_VERSION as node $name ($ip)"
  nsenter --net="$ndir/ns/net" --mount="$ndir/ns/mnt" "$kube_bin/kubelet" --config="$ndir/kubelet.yaml" --kubeconfig="$ndir/kubeconfig" \
    --hostname-override="$name" --node-ip="$ip" --root-dir="$ndir/kubelet" \
    --cert-dir="$ndir/kubelet-pki" --v=2 >>"$ndir/kubelet.log" 2>&1 &
  echo $! >"$ndir/kubelet.pid"
  cat >"$ndir/env" <<EOF
WASMSCHED_TEST_NODE_NAME=$name
WASMSCHED_TEST_NODE_DIR=$ndir
WASMSCHED_TEST_NODE_IP=$ip
WASMSCHED_TEST_NODE_KUBECONFIG=$ndir/kubeconfig
WASMSCHED_TEST_NODE_CONTAINERD=$ndir/containerd.sock
WASMSCHED_TEST_NODE_DEVICE_PLUGINS=$ndir/device-plugins
WASMSCHED_TEST_NODE_APISERVER=https://127.0.0.1:6443
EOF
  local kubectl=("$kube_bin/kubectl" --kubeconfig "$dir/kubeconfig")
  for ((i = 0; i < 1200; i++)); do
    if [ "$("${kubectl[@]}" get node "$name" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; then
      log "node $name Ready after $((SECONDS - t0))s"
      return 0
    fi
    kill -0 "$(cat "$ndir/kubelet.pid")" 2>/dev/null || break
    sleep 0.1
  done
  tail -30 "$ndir/kubelet.log" >&2
  log "node $name did not become Ready (kubelet log: $ndir/kubelet.log)"
  exit 1
}

# Stops the node's kubelet, every container it started, containerd and the
# forwarder; unmounts what they mounted; removes the node's cgroups and
# network namespace; deletes the Node object.
stop_node() {
  local dir=$1 name=$2 ndir
  ndir=$(node_dir "$dir" "$name")
  [ -d "$ndir" ] || return 0
  stop_pid "$ndir/kubelet.pid"
  local sock="$ndir/containerd.sock" id ctr=(ctr --address "$ndir/containerd.sock" -n k8s.io)
  if [ -S "$sock" ] && "${ctr[@]}" version >/dev/null 2>&1; then
    for id in $("${ctr[@]}" tasks ls -q 2>/dev/null); do
      "${ctr[@]}" tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
    done
    for id in $("${ctr[@]}" tasks ls -q 2>/dev/null); do
      for _ in $(seq 50); do
        "${ctr[@]}" tasks delete "$id" >/dev/null 2>&1 && break
        sleep 0.1
      done
    done
    for id in $("${ctr[@]}" containers ls -q 2>/dev/null); do
      "${ctr[@]}" containers delete "$id" >/dev/null 2>&1 || true
    done
  fi
  stop_pid "$ndir/containerd.pid"
  # Shims left behind (containerd-shim-runc-v2 ... -address SOCKET).
  local pid
  for pid in $(pgrep -f -- "-address $sock" || true); do kill -9 "$pid" 2>/dev/null || true; done
  stop_pid "$ndir/proxy.pid"
  # What was mounted under the node's directory, deepest first.
  local m
  while read -r m; do umount -l "$m" 2>/dev/null || true; done < <(
    awk -v d="$ndir/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r)
  umount "$ndir/ns/net" "$ndir/ns/mnt" 2>/dev/null || true
  umount "$ndir/ns" 2>/dev/null || true
  local cg sub
  cg=$(node_cgroup "$dir" "$name")
  for sub in /sys/fs/cgroup/*/; do
    if [ -d "$sub$cg" ]; then find "$sub$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
  done
  if [ -f "$dir/apiserver.pid" ] && kill -0 "$(cat "$dir/apiserver.pid")" 2>/dev/null; then
    "$kube_bin/kubectl" --kubeconfig "$dir/kubeconfig" delete node "$name" --ignore-not-found \
      --request-timeout=10s >/dev/null 2>&1 || true
  fi
  rm -rf "$ndir/containerd" "$ndir/kubelet" "$ndir/env"
}

stop_nodes() {
  local dir=$1 n
  [ -d "$dir/nodes" ] || return 0
  for n in "$dir"/nodes/*/; do
    if [ -d "$n" ]; then stop_node "$dir" "$(basename "$n")"; fi
  done
}
