#!/usr/bin/env bash
# Offline checks of sandcastle's Nix code (flake.nix, nix/, templates/, the
# stand-ins). nixpkgs and the other inputs cannot be fetched here, so the
# flake is evaluated with every input replaced by a stand-in under
# checks/nix/stand-ins/ whose functions take nixpkgs' real argument names.
#
# Needs: nix (2.8 or later), git, jq, cargo, and deadnix + nixpkgs-fmt
# (`cargo install --locked deadnix nixpkgs-fmt`). Nix only sees files git
# tracks: commit or `git add` new files before running.
#
# Usage: checks/nix/test.sh   (prints PASS/FAIL per check, exits 1 on any FAIL)
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
standins=$repo/checks/nix/stand-ins
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export NO_COLOR=1

nixf() {
  nix --extra-experimental-features 'nix-command flakes' \
    --option substituters '' --option warn-dirty false "$@"
}

# Every input of this flake, replaced by its stand-in.
overrides=(
  --override-input nixpkgs "path:$standins/nixpkgs"
  --override-input flake-utils "path:$standins/flake-utils"
  --override-input rust-overlay "path:$standins/rust-overlay"
  --override-input llm-agents "path:$standins/llm-agents"
  --no-write-lock-file
)

failures=0
# check NAME FUNCTION: runs FUNCTION, prints PASS or FAIL and its output.
check() {
  local name=$1 output
  if output=$("$2" 2>&1); then
    echo "PASS $name"
  else
    echo "FAIL $name"
    printf '%s\n' "$output" | tail -n 40 | sed 's/^/    /'
    failures=$((failures + 1))
  fi
}

nix_files() {
  git -C "$repo" ls-files -- '*.nix'
}

parse_every_nix_file() {
  local file status=0
  for file in $(nix_files); do
    nix-instantiate --parse "$repo/$file" >/dev/null || { echo "does not parse: $file"; status=1; }
  done
  return $status
}

deadnix_clean() {
  cd "$repo" || return 1
  # The stand-ins name every argument of the nixpkgs function they stand in
  # for, used or not: that is their point, so unused argument names are fine there.
  deadnix --fail $(nix_files | grep -v '^checks/nix/stand-ins/') &&
    deadnix --fail --no-lambda-pattern-names $(nix_files | grep '^checks/nix/stand-ins/')
}

nixpkgs_fmt_clean() {
  cd "$repo" && nixpkgs-fmt --check $(nix_files)
}

# The image arguments mkSandcastleImage passes to streamLayeredImage.
image_arguments() {
  local facts=$work/image-facts.json
  nixf eval --json "${overrides[@]}" "git+file://$repo#lib.x86_64-linux" \
    --apply "$(cat "$repo/checks/nix/image-facts.nix")" >"$facts" || return 1
  helpers=$(nixf eval --raw "${overrides[@]}" "git+file://$repo#packages.x86_64-linux.helpers.drvPath") || return 1
  claude=$(nixf eval --raw "${overrides[@]}" "git+file://$repo#packages.x86_64-linux.claude-code.drvPath") || return 1
  jq -e --arg helpers "$helpers" --arg claude "$claude" '
    def fail($what): error("image: \($what)");
    def env: .config.Env;
    def contentPaths: [.contents[].drvPath];
    def nss: [.contents[] | select(.function == "fakeNss")][0];
    def locales: [.contents[] | select(.function == "glibcLocales")][0];
    (if .function == "dockerTools.streamLayeredImage" then . else fail("not built with streamLayeredImage") end)
    | (if .name == "test-image" and .tag == "test-tag" then . else fail("name/tag not passed through") end)
    | (if .config.User == "agent" then . else fail("User is not agent") end)
    | (if .config.WorkingDir == "/home/agent" then . else fail("WorkingDir is not /home/agent") end)
    | (if (.config.Entrypoint | length) == 2
          and (.config.Entrypoint[0] | test("^/nix/store/[^/]+-coreutils[^/]*/bin/sleep$"))
          and .config.Entrypoint[1] == "infinity"
       then . else fail("Entrypoint is not an absolute `sleep infinity`: \(.config.Entrypoint)") end)
    | (if nss.arguments.extraPasswdLines == ["agent:x:1000:1000:sandcastle agent:/home/agent:/bin/sh"]
       then . else fail("fakeNss passwd lines: \(nss.arguments.extraPasswdLines)") end)
    | (if nss.arguments.extraGroupLines == ["agent:x:1000:"] then . else fail("fakeNss group lines") end)
    | (if .enableFakechroot == true then . else fail("enableFakechroot is not true") end)
    | (if (.fakeRootCommands | test("chown 1000:1000 /home/agent"))
          and (.fakeRootCommands | test("chmod 1777 /tmp"))
       then . else fail("fakeRootCommands do not make /home/agent (agent) and /tmp (1777)") end)
    | (if ([.contents[].function] | index("package")) != null
          and ([.contents[].name] | contains(["usr-bin-env", "bin-sh", "ca-certificates"]))
       then . else fail("usrBinEnv, binSh or caCertificates missing") end)
    | (if locales.arguments == {allLocales: false, locales: ["C.UTF-8/UTF-8", "en_US.UTF-8/UTF-8"]}
       then . else fail("locale archive arguments: \(locales.arguments)") end)
    | (if env[0:8] == [
          "PATH=/bin:/usr/bin",
          "HOME=/home/agent",
          "SSL_CERT_FILE=/etc/ssl/certs/ca-bundle.crt",
          "NIX_SSL_CERT_FILE=/etc/ssl/certs/ca-bundle.crt",
          "GIT_SSL_CAINFO=/etc/ssl/certs/ca-bundle.crt",
          "LANG=C.UTF-8",
          "LOCALE_ARCHIVE=\(env[6] | ltrimstr("LOCALE_ARCHIVE="))",
          "SANDCASTLE_FORGE_URL=http://127.0.0.1:3000"
        ]
        and (env[6] | test("^LOCALE_ARCHIVE=/nix/store/[^/]+-glibc-locales/lib/locale/locale-archive$"))
       then . else fail("Env base entries: \(env)") end)
    | (if env[8:] == ["EXTRA_ONE=1", "EXTRA_TWO=2"] then . else fail("extraEnv not appended: \(env)") end)
    | (if contentPaths[-2:] == .extraContents then . else fail("extraContents not appended last") end)
    | (if (.sandcastlePackages - contentPaths) == [] then . else fail("sandcastlePackages not all in contents") end)
    | (if (contentPaths | index($helpers)) != null then . else fail("helpers not in contents") end)
    | (if (contentPaths | index($claude)) != null then . else fail("claude-code not in contents") end)
    | (if (.sandcastlePackages | length) == 18 then . else fail("sandcastlePackages has \(.sandcastlePackages | length) entries, expected 18") end)
    | true
  ' "$facts"
}

# The helpers package: all of the workspace, tests on, Docker and Nix tests skipped.
helpers_package() {
  nixf eval --json "${overrides[@]}" "git+file://$repo#packages.x86_64-linux.helpers.standIn.arguments" \
    --apply 'a: { inherit (a) pname env postInstall doInstallCheck; src = builtins.attrNames (builtins.readDir a.src); lock = baseNameOf a.cargoLock.lockFile; doCheck = a.doCheck or true; }' |
    jq -e '
      (.src | sort) == ["ARCHITECTURE.md", "Cargo.lock", "Cargo.toml", "README.md", "docs", "helpers", "prompts", "templates"]
      and .env.SANDCASTLE_SKIP_DOCKER_TESTS == "1" and .env.SANDCASTLE_SKIP_NIX_TESTS == "1"
      and .env.SANDCASTLE_SKIP_BROWSER_TESTS == "1"
      and (.lock | endswith("Cargo.lock"))
      and .doCheck == true and .doInstallCheck == true
      and (.postInstall | contains("configure-tea|fmt|check|load-config|sandcastle)"))
    '
}

# `nix run .#sandcastle` runs the orchestrator with git and the Docker client
# (the CLI only) first on its PATH, the host's PATH after them.
sandcastle_app() {
  local program
  program=$(nixf eval --raw "${overrides[@]}" "git+file://$repo#apps.x86_64-linux.sandcastle.program") || return 1
  nixf eval --json "${overrides[@]}" "git+file://$repo#packages.x86_64-linux" --apply '
    packages: let wrapper = packages.sandcastle; in {
      bin = "${wrapper}/bin/sandcastle";
      function = wrapper.standIn.function;
      runtimeInputs = map (d: d.name) wrapper.standIn.arguments.runtimeInputs;
      inheritPath = wrapper.standIn.arguments.inheritPath or true;
      execsHelpers = builtins.match ".*exec ${builtins.unsafeDiscardStringContext packages.helpers.outPath}/bin/sandcastle \"[$]@\".*"
        (builtins.unsafeDiscardStringContext wrapper.standIn.arguments.text) != null;
    }' | jq -e --arg program "$program" '
      .bin == $program and .function == "writeShellApplication"
      and .runtimeInputs == ["git"] and .inheritPath and .execsHelpers'
}

# `nix flake show --json` lists every output the flake promises.
expected_outputs='
  def has_all($out; $system; $names):
    ($out[$system] // {} | keys) as $k | all($names[]; . as $n | $k | index($n) != null);
  . as $r
  | ($r.templates | keys == ["default", "rust"])
  and all(["x86_64-linux", "aarch64-linux"][]; . as $s |
    has_all($r.packages; $s; ["helpers", "sandcastle", "claude-code", "sandcastleImage", "default"])
    and has_all($r.apps; $s; ["sandcastle", "sandcastleImage"])
    and has_all($r.checks; $s; ["helpers", "sandcastleImage"])
    and has_all($r.devShells; $s; ["default"])
    and ($r.formatter | has($s)))
  and all(["x86_64-darwin", "aarch64-darwin"][]; . as $s |
    has_all($r.packages; $s; ["helpers", "sandcastle"]) and has_all($r.apps; $s; ["sandcastle"]))
'

flake_show() {
  nixf flake show --json "${overrides[@]}" "git+file://$repo" >"$work/show.json" &&
    jq -e "$expected_outputs" "$work/show.json" >/dev/null || { cat "$work/show.json"; return 1; }
  # lib is not shown by `nix flake show`: read it directly.
  nixf eval --json "${overrides[@]}" "git+file://$repo#lib" --apply \
    'lib: builtins.mapAttrs (_: value: if builtins.isAttrs value then builtins.attrNames value else builtins.typeOf value) lib' |
    jq -e '(.["x86_64-linux"] | contains(["imageArgsFromConfig", "mkApps", "mkSandcastleImage", "sandcastlePackages", "helpers", "sandcastle"]))
           and (.["aarch64-darwin"] | contains(["imageArgsFromConfig", "mkApps"]) and (index("mkSandcastleImage") == null))
           and .mkLib == "lambda" and .imageArgsFromConfig == "lambda"'
}

# `lib.mkLib pkgs` builds from the consumer's own pkgs: an overlay of theirs
# reaches the helpers, rust-overlay is added only where pkgs lacks rust-bin,
# and the image, its app and the system-free imageArgsFromConfig work from it.
mk_lib_from_consumer_pkgs() {
  nixf eval --json --impure "${overrides[@]}" "git+file://$repo#lib" --apply "
    lib: let
      pkgs = import $standins/nixpkgs {
        system = \"x86_64-linux\";
        overlays = [ (_final: prev: { git = prev.git // { name = \"consumers-git\"; }; }) ];
      };
      mine = lib.mkLib pkgs;
      args = lib.imageArgsFromConfig $repo/templates/rust/.sandcastle/config.toml;
      image = mine.mkSandcastleImage args;
      darwin = lib.mkLib (import $standins/nixpkgs { system = \"aarch64-darwin\"; });
    in {
      checkInputs = map (d: d.name) mine.helpers.standIn.arguments.nativeCheckInputs;
      rust = mine.rustToolchain.name;
      inherit (args) name tag forgeUrl;
      imageFunction = image.standIn.function;
      apps = builtins.attrNames (mine.mkApps image);
      imageApp = (mine.mkApps image).sandcastleImage.program == \"\${image}\";
      noImageApps = builtins.attrNames (mine.mkApps null);
      darwinHasImage = darwin ? mkSandcastleImage;
    }" | jq -e '
      .checkInputs == ["consumers-git"] and .rust == "rust-default-stable"
      and .name == "sandcastle" and .tag == "name" and .forgeUrl == "https://forge.example.dev"
      and .imageFunction == "dockerTools.streamLayeredImage"
      and .apps == ["sandcastle", "sandcastleImage"] and .imageApp and .noImageApps == ["sandcastle"]
      and (.darwinHasImage | not)'
}

flake_check() {
  nixf flake check --no-build "${overrides[@]}" "git+file://$repo"
}

# load-config, as a user runs it.
load_config() {
  (cd "$repo" && cargo run -q -p sandcastle-config --bin load-config -- "$1")
}

# imageArgsFromConfig resolves name, tag and forge URL as load-config does:
# every case of the table the Rust test helpers/config/tests/resolution_table.rs
# writes gives the same name, tag and forgeUrl, or fails with the same message.
table=$repo/helpers/config/tests/resolution-table.json
image_args_from_config() {
  local outcomes=$work/resolution-outcomes.json count index text why stderr
  nixf eval --json --impure "${overrides[@]}" "git+file://$repo#lib.x86_64-linux.imageArgsFromConfig" --apply "
    f: map (case:
      let tried = builtins.tryEval (builtins.deepSeq (f (builtins.toFile \"config.toml\" case.config)) (f (builtins.toFile \"config.toml\" case.config)));
      in if tried.success then tried.value else { error = true; })
    (builtins.fromJSON (builtins.readFile $table))" >"$outcomes" || return 1
  jq -e -n --slurpfile table "$table" --slurpfile nix "$outcomes" '
    [range(0; $table[0] | length) as $i | $table[0][$i] as $want | $nix[0][$i] as $got
      | select(if $want.error then $got.error != true else $got != {name: $want.name, tag: $want.tag, forgeUrl: $want.forgeUrl} end)
      | "case \($i): load-config says \($want | del(.config)), Nix says \($got)"]
    | if length == 0 then true else error(join("\n")) end' >/dev/null || return 1
  # The messages: the flake is the same function, so evaluate the file itself (fast).
  count=$(jq length "$table")
  for ((index = 0; index < count; index++)); do
    why=$(jq -r ".[$index].error // empty" "$table")
    [ -n "$why" ] || continue
    text=$(jq -r ".[$index].config" "$table")
    stderr=$(nix-instantiate --eval --strict --read-write-mode --argstr text "$text" -E "
      { text }: import $repo/nix/imageArgsFromConfig.nix { lib = import $standins/nixpkgs/lib.nix; }
        (builtins.toFile \"config.toml\" text)" 2>&1 >/dev/null)
    case "$stderr" in
      *"-config.toml: $why"*) ;;
      *) printf 'case %s: load-config says\n  %s\nNix says\n  %s\n' "$index" "$why" "$stderr"; return 1 ;;
    esac
  done
}

# `nix flake init -t <repo>#rust` into an empty git repository.
consumer=$work/consumer
template_init() {
  mkdir -p "$consumer" && cd "$consumer" && git init -q &&
    nixf flake init -t "git+file://$repo#rust" >/dev/null || return 1
  diff <(cd "$consumer" && find . -path ./.git -prune -o -type f -print | sort) \
    <(cd "$repo/templates/rust" && git ls-files | sed 's|^|./|' | sort) || return 1
  diff -r --exclude=.git "$consumer" "$repo/templates/rust"
}

# The new project's flake evaluates against this repository and the stand-ins.
template_evaluates() {
  [ -f "$consumer/flake.nix" ] || { echo "no consumer project (template_init failed)"; return 1; }
  cd "$consumer" && git add -A &&
    git -c user.name=test -c user.email=test@localhost commit -q -m "nix flake init" || return 1
  local consumer_overrides=(
    --override-input nixpkgs "path:$standins/nixpkgs"
    --override-input flake-utils "path:$standins/flake-utils"
    --override-input rust-overlay "path:$standins/rust-overlay"
    --override-input sandcastle "git+file://$repo"
    --override-input sandcastle/llm-agents "path:$standins/llm-agents"
    --no-write-lock-file
  )
  nixf flake check --no-build "${consumer_overrides[@]}" "git+file://$consumer" || return 1
  nixf flake show --json "${consumer_overrides[@]}" "git+file://$consumer" >"$work/consumer-show.json" || return 1
  jq -e '
    (.packages["x86_64-linux"] | has("sandcastleImage"))
    and (.apps["x86_64-linux"] | has("sandcastle") and has("sandcastleImage"))
    and (.checks["x86_64-linux"] | has("clippy") and has("sandcastleImage"))
    and (.devShells["x86_64-linux"] | has("default") and has("ci"))
  ' "$work/consumer-show.json" >/dev/null || { cat "$work/consumer-show.json"; return 1; }
  # The image is named, tagged and pointed at the forge by the project's config.
  nixf eval --json "${consumer_overrides[@]}" \
    "git+file://$consumer#packages.x86_64-linux.sandcastleImage.standIn.arguments" \
    --apply 'a: { inherit (a) name tag; env = a.config.Env; contents = map (d: d.name) a.contents; }' |
    jq -e '.name == "sandcastle" and .tag == "name"
           and ([.env[] | select(startswith("SANDCASTLE_"))] == ["SANDCASTLE_FORGE_URL=https://forge.example.dev"])
           and (.contents[-2:] == ["rust-default-stable", "pkg-config"])'
}

template_config_loads() {
  [ -f "$consumer/.sandcastle/config.toml" ] || { echo "no consumer project (template_init failed)"; return 1; }
  load_config "$consumer/.sandcastle/config.toml" >/dev/null
}

check "every .nix file parses (nix-instantiate --parse)" parse_every_nix_file
check "deadnix --fail" deadnix_clean
check "nixpkgs-fmt --check" nixpkgs_fmt_clean
check "mkSandcastleImage passes the right streamLayeredImage arguments" image_arguments
check "helpers package: workspace source, Cargo.lock, tests on, Docker and Nix tests skipped" helpers_package
check "apps.sandcastle: the orchestrator with git on PATH (no Docker client)" sandcastle_app
check "nix flake show lists every output" flake_show
check "lib.mkLib builds from the consumer's pkgs" mk_lib_from_consumer_pkgs
check "nix flake check --no-build" flake_check
check "imageArgsFromConfig resolves the table of cases as load-config does" image_args_from_config
check "nix flake init -t #rust gives exactly the template files" template_init
check "the new project's flake evaluates against this repo" template_evaluates
check "the new project's .sandcastle/config.toml passes load-config" template_config_loads

if [ "$failures" -gt 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all Nix checks passed"
