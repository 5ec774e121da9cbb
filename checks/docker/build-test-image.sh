#!/usr/bin/env bash
# Build the sandbox test image from this host's own binaries (no registry, no pull):
#   checks/docker/build-test-image.sh [--busybox] [TAG]   (default sandcastle-test:latest)
# The image has the `agent` user (uid/gid 1000, home /home/agent), bash, coreutils, git,
# grep/sed/findutils, CA certificates, the real Claude Code native binary and the project's
# binaries (configure-tea fmt check load-config sandcastle), with every shared library they need.
# With --busybox, /bin/sh is BusyBox (a multi-call binary that goes by its name, as on Alpine) and
# there is no bash on the PATH or in /bin: the image sandcastle must also work with (the host's
# `busybox`, e.g. Debian's busybox-static package). Claude Code's own Bash tool accepts only bash or
# zsh, so it gets a bash of its own, off the PATH, through CLAUDE_CODE_SHELL.
# Inputs:
#   CLAUDE_BIN          the Claude Code native binary (default: node_modules of the repo root,
#                       then `npm root -g`, else `npm install --no-save` into a cache dir)
#   SANDCASTLE_BIN_DIR  where the project's binaries are (default target/debug; built if missing)
# The image is labelled with a hash of its inputs; an unchanged image is not rebuilt.
set -euo pipefail

busybox=
if [[ "${1:-}" == --busybox ]]; then busybox=1; shift; fi
tag="${1:-sandcastle-test:latest}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$here/../.." && pwd)"
bin_dir="${SANDCASTLE_BIN_DIR:-$repo_root/target/debug}"
project_bins=(configure-tea fmt check load-config sandcastle)
native_pkg="@anthropic-ai/claude-code-linux-x64/claude"

say() { echo "build-test-image: $*"; }
die() { echo "build-test-image: $*" >&2; exit 1; }

command -v docker >/dev/null || die "docker not found; install docker.io and run checks/docker/start-dockerd.sh"
docker info >/dev/null 2>&1 || die "Docker engine does not answer; run checks/docker/start-dockerd.sh"

find_claude() {
    local candidates=("$repo_root/node_modules/$native_pkg")
    if command -v npm >/dev/null; then
        local global
        global="$(npm root -g 2>/dev/null || true)"
        [[ -n "$global" ]] && candidates+=("$global/$native_pkg" "$global/@anthropic-ai/claude-code/node_modules/$native_pkg")
    fi
    local cache="${XDG_CACHE_HOME:-$HOME/.cache}/sandcastle/claude-code"
    candidates+=("$cache/node_modules/$native_pkg")
    for candidate in "${candidates[@]}"; do
        [[ -x "$candidate" ]] && { echo "$candidate"; return; }
    done
    command -v npm >/dev/null || return 1
    say "Claude Code not found; npm install --no-save @anthropic-ai/claude-code into $cache" >&2
    mkdir -p "$cache"
    npm install --no-save --prefix "$cache" @anthropic-ai/claude-code >&2 || return 1
    [[ -x "$cache/node_modules/$native_pkg" ]] && echo "$cache/node_modules/$native_pkg"
}

if [[ -n "${CLAUDE_BIN:-}" ]]; then
    [[ -x "$CLAUDE_BIN" ]] || die "CLAUDE_BIN=$CLAUDE_BIN is not an executable file; point it at the claude native binary"
    claude_bin="$CLAUDE_BIN"
else
    claude_bin="$(find_claude)" || die "no Claude Code binary; run 'npm install @anthropic-ai/claude-code' at $repo_root or set CLAUDE_BIN"
fi
say "Claude Code: $claude_bin ($("$claude_bin" --version 2>/dev/null || echo "version unknown"))"

missing=()
for name in "${project_bins[@]}"; do
    [[ -x "$bin_dir/$name" ]] || missing+=("$name")
done
if ((${#missing[@]})) && [[ -z "${SANDCASTLE_BIN_DIR:-}" ]]; then
    say "building missing project binaries: ${missing[*]}"
    (cd "$repo_root" && cargo build --bins -p sandcastle-config -p configure-tea -p sandcastle-steps -p sandcastle) ||
        say "warning: cargo build failed; the image gets only the binaries that exist"
fi
found_bins=()
for name in "${project_bins[@]}"; do
    if [[ -x "$bin_dir/$name" ]]; then found_bins+=("$bin_dir/$name"); else say "warning: $bin_dir/$name missing, not in the image"; fi
done

git_exec_path="$(git --exec-path)"
git_templates="$(cd "$git_exec_path/../.." && pwd)/share/git-core/templates"
tools=(bash env cat ls cp mv rm mkdir rmdir ln chmod chown touch head tail wc sort uniq cut tr tee
    echo printf test true false sleep date id whoami basename dirname realpath readlink pwd mktemp stat
    du df seq expr install sha256sum md5sum uname nproc timeout kill xargs find grep egrep fgrep sed
    diff cmp tar gzip awk ps which less git)
if [[ -n "$busybox" ]]; then
    busybox_bin="$(type -P busybox)" || die "--busybox needs busybox on this host (apt-get install busybox-static)"
    tools=("${tools[@]/bash/}")
fi
inputs_hash="$( {
    cat "${BASH_SOURCE[0]}"
    sha256sum "$claude_bin" "${found_bins[@]}"
    for tool in "${tools[@]}"; do p="$(type -P "$tool" || true)"; [[ -n "$p" ]] && stat -L -c '%n %s %Y' "$p"; done
    echo "$git_exec_path"
    if [[ -n "$busybox" ]]; then sha256sum "$busybox_bin"; fi
} | sha256sum | cut -d' ' -f1)"

current="$(docker image inspect -f '{{index .Config.Labels "sandcastle.inputs"}}' "$tag" 2>/dev/null || true)"
previous_id="$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)"
if [[ "$current" == "$inputs_hash" ]]; then
    say "$tag is up to date (inputs $inputs_hash)"
    exit 0
fi

rootfs="$(mktemp -d /tmp/sandcastle-rootfs.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT
say "assembling root filesystem in $rootfs"

# Mirror the host's merged-/usr symlinks (bin -> usr/bin, ...) so library paths resolve alike.
mkdir -p "$rootfs"/{usr/bin,usr/sbin,usr/lib,usr/lib64,usr/local/bin,etc,tmp,home/agent/workspace,root,dev,proc,sys}
for dir in bin sbin lib lib64 lib32 libx32; do
    if [[ -L "/$dir" ]]; then
        ln -s "$(readlink "/$dir")" "$rootfs/$dir"
        mkdir -p "$rootfs/$(readlink -f "/$dir")"
    fi
done
mkdir -p "$rootfs"/{bin,lib,lib64}

elves=()
copy_file() { # host path [rootfs path]
    local dest="$rootfs${2:-$1}"
    mkdir -p "$(dirname "$dest")"
    cp -L --preserve=mode "$1" "$dest"
    if head -c 4 "$1" | grep -q 'ELF'; then elves+=("$1"); fi
}

for tool in "${tools[@]}"; do
    [[ -z "$tool" ]] && continue
    if p="$(type -P "$tool")"; then copy_file "$p"; else say "warning: $tool not on this host"; fi
done
shell=bash
claude_shell=()
if [[ -n "$busybox" ]]; then
    copy_file "$busybox_bin" /usr/bin/busybox
    shell=busybox
    copy_file "$(type -P bash)" /opt/claude-code-shell/bash
    claude_shell=(--change 'ENV CLAUDE_CODE_SHELL=/opt/claude-code-shell/bash')
fi
ln -sf "$shell" "$rootfs/usr/bin/sh"
[[ -e "$rootfs/bin/sh" ]] || ln -sf "$shell" "$rootfs/bin/sh"

say "copying git ($(git --version)) from $git_exec_path"
mkdir -p "$rootfs$git_exec_path"
cp -a "$git_exec_path/." "$rootfs$git_exec_path/"
while IFS= read -r -d '' file; do
    if head -c 4 "$file" | grep -q 'ELF'; then elves+=("$file"); fi
done < <(find "$git_exec_path" -type f -print0)
if [[ -d "$git_templates" ]]; then
    mkdir -p "$rootfs$git_templates"
    cp -a "$git_templates/." "$rootfs$git_templates/"
fi

copy_file "$claude_bin" /usr/local/bin/claude
for bin in "${found_bins[@]}"; do copy_file "$bin" "/usr/local/bin/$(basename "$bin")"; done

say "collecting shared libraries of ${#elves[@]} executables"
libs="$(for elf in "${elves[@]}"; do ldd "$elf" 2>/dev/null || true; done |
    awk '/=> \// {print $3} /^\t\/[^ ]+ \(/ {print $1}' | sort -u)"
for lib in $libs; do copy_file "$lib"; done
# NSS modules are loaded at run time (getpwuid for `id`, git's ident), not listed by ldd.
for nss in /lib/x86_64-linux-gnu/libnss_files.so.2 /lib/x86_64-linux-gnu/libnss_dns.so.2; do
    [[ -e "$nss" ]] && copy_file "$nss"
done

if [[ -d /etc/ssl/certs ]]; then
    mkdir -p "$rootfs/etc/ssl"
    cp -rL /etc/ssl/certs "$rootfs/etc/ssl/certs"
fi
cat >"$rootfs/etc/passwd" <<PASSWD
root:x:0:0:root:/root:/bin/$shell
agent:x:1000:1000:agent:/home/agent:/bin/$shell
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
PASSWD
cat >"$rootfs/etc/group" <<'GROUP'
root:x:0:
agent:x:1000:
nogroup:x:65534:
GROUP
echo 'passwd: files
group: files
hosts: files dns' >"$rootfs/etc/nsswitch.conf"
echo '127.0.0.1 localhost' >"$rootfs/etc/hosts"
chmod 1777 "$rootfs/tmp"
chown -R 1000:1000 "$rootfs/home/agent"
chmod 755 "$rootfs/home/agent"

say "importing $(du -sh "$rootfs" | cut -f1) as $tag"
tar -C "$rootfs" --numeric-owner -c . | docker import \
    --change 'USER agent' \
    --change 'WORKDIR /home/agent' \
    --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin HOME=/home/agent' \
    --change "LABEL sandcastle.inputs=$inputs_hash" \
    "${claude_shell[@]}" \
    --change 'ENTRYPOINT ["/bin/sleep","infinity"]' \
    - "$tag" >/dev/null
# The replaced image is left untagged; remove it unless a container still uses it.
[[ -n "$previous_id" ]] && docker image rm "$previous_id" >/dev/null 2>&1 || true
say "built $tag (inputs $inputs_hash)"
